use super::*;

#[test]
fn every_entry_has_a_row() {
    let table = coverage_table(&Settings::default(), KubernetesVersion::default());
    assert_eq!(table.lines().count(), entries().count() + 2, "{table}");
    assert!(
        table.contains(
            "| R2 bounded-requests (claims) | `gpu-policy-bounded-requests-claims` (validating) |"
        ),
        "{table}"
    );
    assert!(table.contains("| R4 compute-affinity (claims) | none | nothing |"), "{table}");
}
