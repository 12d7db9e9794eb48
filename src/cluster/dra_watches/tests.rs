use super::*;

#[test]
fn the_newest_served_version_is_read() {
    let pick = |served: &[&str]| preferred(served.iter().copied());
    assert_eq!(pick(&["v1beta1", "v1beta2", "v1"]), Some("v1"));
    assert_eq!(pick(&["v1beta2", "v1beta1"]), Some("v1beta2"));
    assert_eq!(pick(&["v1alpha3", "v1beta1"]), Some("v1beta1"));
    assert_eq!(pick(&["v1alpha3"]), None);
    assert_eq!(pick(&[]), None);
}
