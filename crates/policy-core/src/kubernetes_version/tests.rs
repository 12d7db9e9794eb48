use super::*;
use rstest::rstest;

#[rstest]
#[case("1.32", 32)]
#[case("v1.33", 33)]
#[case("1.34.4", 34)]
#[case("v1.35.4", 35)]
#[case("v1.33.4-eks-1234", 33)]
#[case("v1.36.3+k3s1", 36)]
#[case("1.34+", 34)]
#[case("1.40", 40)]
fn reads_the_minor(#[case] text: &str, #[case] minor: u32) {
    assert_eq!(KubernetesVersion::parse(text).map(KubernetesVersion::minor), Ok(minor));
}

#[rstest]
#[case("")]
#[case("1")]
#[case("2.1")]
#[case("1.x")]
#[case("1.33.")]
#[case("1.33.x")]
#[case("1.-3")]
#[case("1.99999")]
#[case("v")]
fn refuses_what_is_not_a_version(#[case] text: &str) {
    assert_eq!(KubernetesVersion::parse(text), Err(VersionError::NotAVersion(text.to_owned())));
}

#[test]
fn refuses_releases_before_the_oldest_supported() {
    let error = KubernetesVersion::parse("v1.31.9").unwrap_err();
    assert_eq!(
        error.to_string(),
        "Kubernetes 1.31 is older than the oldest supported release, 1.32 (supported: 1.32 to 1.37)"
    );
}

#[test]
fn mutating_policies_are_beta_then_ga() {
    let api = |minor| KubernetesVersion::new(minor).mutating_policies();
    assert_eq!(api(33), None);
    assert_eq!(api(34).map(|a| (a.version, a.opt_in)), Some(("v1beta1", true)));
    assert_eq!(api(35).map(|a| (a.version, a.opt_in)), Some(("v1beta1", true)));
    assert_eq!(api(36).map(|a| (a.version, a.opt_in)), Some(("v1", false)));
}

#[test]
fn dra_is_flat_v1beta1_before_1_34() {
    let dra = |minor| KubernetesVersion::new(minor).dra();
    assert_eq!(
        (dra(32).version, dra(32).shape, dra(32).first_available),
        ("v1beta1", RequestShape::Flat, false)
    );
    assert_eq!((dra(33).version, dra(33).first_available), ("v1beta1", true));
    assert_eq!(
        (dra(34).version, dra(34).shape, dra(34).opt_in),
        ("v1", RequestShape::Exactly, false)
    );
}

#[test]
fn the_supported_range_is_oldest_to_newest() {
    let all: Vec<String> = KubernetesVersion::supported().map(|v| v.to_string()).collect();
    assert_eq!(all, ["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"]);
}
