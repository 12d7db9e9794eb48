use super::*;
use rstest::rstest;

#[rstest]
#[case("ml", true)]
#[case("gpu-test1", true)]
#[case("a", true)]
#[case(&"a".repeat(63), true)]
#[case(&"a".repeat(64), false)]
#[case("", false)]
#[case("-ml", false)]
#[case("ml-", false)]
#[case("Ml", false)]
#[case("m.l", false)]
#[case("ml/../kube-system", false)]
#[case("ml?x=1", false)]
fn namespaces(#[case] name: &str, #[case] valid: bool) {
    assert_eq!(is_dns_label(name), valid, "{name:?}");
}

#[rstest]
#[case("pod1", true)]
#[case("web-5d8f.x7k2p", true)]
#[case(&format!("{}.{}", "a".repeat(126), "b".repeat(126)), true)]
#[case(&"a".repeat(254), false)]
#[case("", false)]
#[case("..", false)]
#[case("a..b", false)]
#[case(".a", false)]
#[case("pod1/../../secrets/x", false)]
#[case("pod1%2F..", false)]
#[case("pod1 x", false)]
fn pods(#[case] name: &str, #[case] valid: bool) {
    assert_eq!(is_dns_subdomain(name), valid, "{name:?}");
}
