use super::*;
use crate::registry::lookup::Lookup;

/// Every result a lookup reports is one of the label's values, and a
/// word outside the lists is counted as `other`.
#[test]
fn lookups_and_hits_are_counted_under_closed_values() {
    let results = [
        Lookup::Failed(String::new()),
        Lookup::TooLarge(String::new()),
        Lookup::Refused(String::new()),
        Lookup::TimedOut,
    ];
    for lookup in &results {
        assert!(LOOKUP_RESULTS.contains(&lookup.result()), "{lookup:?}");
    }
    let mut registry = Registry::default();
    let metrics = ResolverMetrics::register(&mut registry);
    metrics.lookup("timed_out");
    metrics.lookup("registry.example/evil");
    metrics.hit("tag");
    metrics.hit("nvcr.io/nvidia/pytorch:25.01-py3");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap_or_default();
    for line in [
        r#"image_lookups_total{result="timed_out"} 1"#,
        r#"image_lookups_total{result="other"} 1"#,
        r#"image_cache_hits_total{cache="tag"} 1"#,
        r#"image_cache_hits_total{cache="other"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    assert!(!text.contains("evil") && !text.contains("pytorch"), "{text}");
}
