use super::*;

#[tokio::test]
async fn an_ip_literal_is_its_own_answer() {
    // A name server nobody listens on: any question would fail.
    let dns = Dns::new(&DnsOptions {
        resolv_conf: Some(String::new()),
        name_server: Some(SocketAddr::from(([127, 0, 0, 1], 9))),
    })
    .unwrap_or_else(|err| panic!("{err}"));
    for (host, address) in
        [("10.0.0.5", "10.0.0.5"), ("[fd00::5]", "fd00::5"), ("2606:4700::1111", "2606:4700::1111")]
    {
        let address: IpAddr = address.parse().unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(dns.addresses(host).await.map_err(|e| e.to_string()), Ok(vec![address]));
    }
}
