use super::*;
use crate::document::Document;
use serde_json::json;

fn entries() -> Vec<IndexEntry> {
    let entry = |digest: &str, os: &str, arch: &str, variant: Option<&str>| {
        serde_json::from_value::<IndexEntry>(json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest,
            "size": 1,
            "platform": {"os": os, "architecture": arch, "variant": variant},
        }))
    };
    [
        entry("sha256:amd", "linux", "amd64", None),
        entry("sha256:attestation", "unknown", "unknown", None),
        entry("sha256:arm-v8", "linux", "arm64", Some("v8")),
        entry("sha256:arm-v9", "linux", "arm64", Some("v9")),
    ]
    .into_iter()
    .filter_map(Result::ok)
    .collect()
}

fn chosen(platform: &Platform) -> Option<String> {
    platform.choose(&entries()).map(|entry| entry.digest.clone())
}

fn of_spec(spec: &serde_json::Value) -> Result<Platform, LabelValueError> {
    Platform::of_pod_spec(Document::from_value(spec).root())
}

#[test]
fn the_pods_node_selector_names_the_architecture() {
    assert_eq!(entries().len(), 4);
    let arm = of_spec(&json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}}));
    assert_eq!(arm, Ok(Platform::linux("arm64")));
    let arm = arm.unwrap_or_default();
    assert_eq!(arm.to_string(), "linux/arm64");
    assert_eq!(chosen(&arm).as_deref(), Some("sha256:arm-v8"));
    for spec in [
        json!({}),
        json!({"nodeSelector": {"kubernetes.io/arch": ""}}),
        json!({"nodeSelector": {"zone": "a"}}),
    ] {
        assert_eq!(of_spec(&spec), Ok(Platform::default()), "{spec}");
    }
    assert_eq!(chosen(&Platform::default()).as_deref(), Some("sha256:amd"));
}

#[test]
fn an_architecture_that_is_no_label_value_is_refused_with_a_prefix() {
    let huge = "a".repeat(1_400_000);
    let refused = of_spec(&json!({"nodeSelector": {"kubernetes.io/arch": huge}}));
    let reason = refused.err().map(|err| err.to_string()).unwrap_or_default();
    assert!(
        reason.starts_with("nodeSelector kubernetes.io/arch \"aaaa")
            && reason.contains("(1400000 bytes)")
            && reason.ends_with("at most 63 characters"),
        "{reason}"
    );
    assert!(reason.len() < 200, "{} bytes", reason.len());
    let spaced = of_spec(&json!({"nodeSelector": {"kubernetes.io/arch": " arm64"}}));
    assert_eq!(
        spaced.map_err(|err| err.to_string()),
        Err("nodeSelector kubernetes.io/arch \" arm64\" is not a label value: letters, \
                 digits, '-', '_' and '.', starting and ending with a letter or digit"
            .to_owned())
    );
}

#[test]
fn a_platform_is_checked_field_by_field() {
    assert_eq!(Platform::default().check(), Ok(()));
    let v8 = Platform { variant: Some("v8".to_owned()), ..Platform::linux("arm64") };
    assert_eq!(v8.check(), Ok(()));
    let long = Platform::linux(&"a".repeat(64));
    assert!(long.check().is_err_and(|e| e.to_string().starts_with("platform architecture ")));
    let slashed = Platform { os: "linux/x".to_owned(), ..Platform::default() };
    assert!(slashed.check().is_err_and(|e| e.to_string().starts_with("platform OS ")));
    let bad_variant = Platform { variant: Some("v8 ".to_owned()), ..Platform::default() };
    assert!(bad_variant.check().is_err_and(|e| e.to_string().starts_with("platform variant ")));
}

#[test]
fn a_variant_picks_its_entry_and_a_missing_platform_none() {
    let v9 = Platform { variant: Some("v9".to_owned()), ..Platform::linux("arm64") };
    assert_eq!(chosen(&v9).as_deref(), Some("sha256:arm-v9"));
    assert_eq!(chosen(&Platform::linux("s390x")), None);
}
