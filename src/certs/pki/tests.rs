use super::*;

const NOW: i64 = 1_767_225_600;

fn pair(ca: &PemPair) -> PemPair {
    issue(&ca.cert, &ca.key, &["gpu-policy.gpu-policy.svc".to_owned()], NOW, 30)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_bundle_trusts_the_chains_its_cas_signed() {
    let ca = generate_ca(NOW, 365).unwrap_or_else(|e| panic!("{e}"));
    let other = generate_ca(NOW, 365).unwrap_or_else(|e| panic!("{e}"));
    let leaf = pair(&ca);
    let both = format!("{}{}", other.cert, ca.cert);
    assert!(bundle_trusts(ca.cert.as_bytes(), leaf.cert.as_bytes(), NOW).is_ok());
    assert!(bundle_trusts(both.as_bytes(), leaf.cert.as_bytes(), NOW).is_ok());
    let refused = bundle_trusts(other.cert.as_bytes(), leaf.cert.as_bytes(), NOW);
    assert!(
        refused.as_ref().is_err_and(|why| why.to_string().contains("no certificate of caBundle")),
        "{refused:?}"
    );
    let expired = bundle_trusts(ca.cert.as_bytes(), leaf.cert.as_bytes(), NOW + 40 * DAY);
    assert!(expired.is_err(), "{expired:?}");
    assert_eq!(
        bundle_trusts(b"", leaf.cert.as_bytes(), NOW).map_err(|why| why.to_string()),
        Err("caBundle holds no certificate".to_owned())
    );
}
