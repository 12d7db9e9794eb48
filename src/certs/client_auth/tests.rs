use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::fs;

use super::*;

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

fn ca() -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, "client CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let key = KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("CA");
    Ca { pem: cert.pem(), issuer: Issuer::new(params, key) }
}

/// A client certificate of `ca` with subject CN `cn` and DNS SANs `dns`.
fn client(ca: &Ca, cn: &str, dns: &[&str]) -> CertificateDer<'static> {
    client_cert(ca, cn, dns).der().clone()
}

fn client_cert(ca: &Ca, cn: &str, dns: &[&str]) -> rcgen::Certificate {
    let names = dns.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>();
    let mut params = CertificateParams::new(names).expect("params");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().expect("key");
    params.signed_by(&key, &ca.issuer).expect("leaf")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).expect("write");
    path
}

fn verify(auth: &ClientAuth, cert: &CertificateDer<'_>) -> Result<(), rustls::Error> {
    auth.verify_client_cert(cert, &[], UnixTime::now()).map(|_| ())
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn chain_to_the_ca_and_a_listed_cn_or_dns_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ours = ca();
    let path = write(tmp.path(), "ca.crt", &ours.pem);
    let auth = ClientAuth::load(&path, &names(&["apiserver", "kube.example"])).expect("load");
    assert!(auth.client_auth_mandatory() && auth.offer_client_auth());
    assert!(auth.root_hint_subjects().is_empty());

    verify(&auth, &client(&ours, "apiserver", &[])).expect("CN listed");
    verify(&auth, &client(&ours, "other", &["KUBE.example"])).expect("DNS SAN listed");

    let wrong = verify(&auth, &client(&ours, "intruder", &["intruder.example"]));
    assert_eq!(
        wrong,
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::ApplicationVerificationFailure
        ))
    );
    // The CN compares exactly.
    assert!(verify(&auth, &client(&ours, "APISERVER", &[])).is_err());

    let theirs = ca();
    let foreign = verify(&auth, &client(&theirs, "apiserver", &[]));
    assert!(matches!(foreign, Err(rustls::Error::InvalidCertificate(_))), "{foreign:?}");

    // Without names, any certificate of the CA.
    let any = ClientAuth::load(&path, &[]).expect("load");
    verify(&any, &client(&ours, "intruder", &[])).expect("no names: any");
    assert!(verify(&any, &client(&theirs, "apiserver", &[])).is_err());
}

#[test]
fn a_bundle_trusts_each_of_its_cas() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (one, two) = (ca(), ca());
    let path = write(tmp.path(), "ca.crt", &format!("{}{}", one.pem, two.pem));
    let auth = ClientAuth::load(&path, &[]).expect("load");
    assert_eq!(auth.ca_count(), 2);
    verify(&auth, &client(&one, "a", &[])).expect("first CA");
    verify(&auth, &client(&two, "b", &[])).expect("second CA");
}

#[test]
fn bad_files_and_blank_names_are_refused_at_load() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ours = ca();
    let empty = write(tmp.path(), "empty.crt", "");
    let garbage = write(tmp.path(), "garbage.crt", "not a certificate\n");
    let truncated = write(tmp.path(), "truncated.crt", "-----BEGIN CERTIFICATE-----\nMIIB\n");
    for bad in [&empty, &garbage, &truncated] {
        let err = ClientAuth::load(bad, &[]).expect_err("bad CA file");
        assert!(matches!(&err, CertError::Parse { path, .. } if path == bad), "{err:?}");
    }
    // A client certificate given instead of the CA.
    let leaf = client_cert(&ours, "apiserver", &[]);
    let not_ca = write(tmp.path(), "leaf.crt", &leaf.pem());
    let err = ClientAuth::load(&not_ca, &[]).expect_err("a leaf is no CA");
    assert!(err.to_string().contains("is not a CA certificate"), "{err}");

    let missing = tmp.path().join("missing.crt");
    assert!(matches!(ClientAuth::load(&missing, &[]), Err(CertError::Read { .. })));
    let good = write(tmp.path(), "ca.crt", &ours.pem);
    let err = ClientAuth::load(&good, &names(&["apiserver", " "])).expect_err("blank");
    assert!(err.to_string().contains("must not be blank"), "{err}");
}

/// The reports of a poller of `auth`'s file every 20 ms, one word each
/// (`parse` with the file's path).
fn spawn_reports(
    auth: &Arc<ClientAuth>,
) -> (tokio::task::JoinHandle<()>, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let poller = Arc::clone(auth).spawn_poller(Duration::from_millis(20), move |reload| {
        let _ = tx.send(match reload {
            Reload::Unchanged => "unchanged".to_owned(),
            Reload::Reloaded => "reloaded".to_owned(),
            Reload::Failed(CertError::Parse { path, .. }) => {
                format!("parse {}", path.display())
            }
            Reload::Failed(CertError::Read { .. }) => "read".to_owned(),
            Reload::Failed(other) => format!("{other}"),
        });
    });
    (poller, rx)
}

async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a report within 10 s")
        .expect("the poller runs")
}

/// Renamed into place: the poller never reads half a file.
fn replace(dir: &Path, text: &str) {
    let next = write(dir, "next.crt", text);
    fs::rename(&next, dir.join("ca.crt")).expect("rename");
}

#[tokio::test]
async fn reload_swaps_the_ca_and_keeps_it_on_a_broken_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (old, new) = (ca(), ca());
    let path = write(tmp.path(), "ca.crt", &old.pem);
    let auth = Arc::new(ClientAuth::load(&path, &names(&["apiserver"])).expect("load"));
    let (old_client, new_client) = (client(&old, "apiserver", &[]), client(&new, "apiserver", &[]));
    let (poller, mut rx) = spawn_reports(&auth);

    replace(tmp.path(), &new.pem);
    assert_eq!(next(&mut rx).await, "reloaded");
    verify(&auth, &new_client).expect("new CA in force");
    assert!(verify(&auth, &old_client).is_err(), "old CA no longer trusted");

    replace(tmp.path(), "garbage\n");
    assert_eq!(next(&mut rx).await, format!("parse {}", path.display()));
    verify(&auth, &new_client).expect("the previous CA stays");
    // Still broken: reported once (the same bytes give the same
    // answer), so the next report is the file's removal.
    tokio::time::sleep(Duration::from_millis(100)).await;
    fs::remove_file(&path).expect("remove");
    // A file that cannot be read: reported on every poll.
    assert_eq!(next(&mut rx).await, "read");
    assert_eq!(next(&mut rx).await, "read");
    verify(&auth, &new_client).expect("the previous CA stays");

    // The file put back as it was: good again, reported once, and
    // nothing after (unchanged is not reported).
    replace(tmp.path(), &new.pem);
    let mut report = next(&mut rx).await;
    while report == "read" {
        report = next(&mut rx).await;
    }
    assert_eq!(report, "reloaded");
    let quiet = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await;
    assert!(quiet.is_err(), "{quiet:?}");
    poller.abort();
    verify(&auth, &new_client).expect("the CA in force");
}

#[tokio::test]
async fn poller_reports_a_reload() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (old, new) = (ca(), ca());
    let path = write(tmp.path(), "ca.crt", &old.pem);
    let auth = Arc::new(ClientAuth::load(&path, &[]).expect("load"));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let poller = Arc::clone(&auth).spawn_poller(Duration::from_millis(20), move |reload| {
        let _ = tx.send(format!("{reload:?}"));
    });
    // Renamed into place: the poller never reads half a file.
    let next = write(tmp.path(), "next.crt", &new.pem);
    fs::rename(&next, &path).expect("rename");
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a reload within 10 s");
    poller.abort();
    assert_eq!(first.as_deref(), Some("Reloaded"));
    verify(&auth, &client(&new, "x", &[])).expect("new CA in force");
}

/// A certificate of many long names is refused naming the first few, each
/// cut, and counting the rest.
#[test]
fn a_refusal_names_a_bounded_few_of_the_names() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ours = ca();
    let path = write(tmp.path(), "ca.crt", &ours.pem);
    let auth = ClientAuth::load(&path, &names(&["apiserver"])).expect("load");
    let long = "a".repeat(200);
    let dns: Vec<String> = (0..40).map(|at| format!("{at}.{long}.example")).collect();
    let dns: Vec<&str> = dns.iter().map(String::as_str).collect();
    let cert = client(&ours, "intruder", &dns);
    let Err(NameRefusal::NoneAllowed { presented }) = auth.check_names(&cert) else {
        panic!("the names are not refused");
    };
    assert!(presented.starts_with("CN=intruder, DNS:0.aaa"), "{presented}");
    assert!(presented.ends_with(" and 31 more"), "{presented}");
    assert!(presented.len() < 1024, "{} bytes", presented.len());
}
