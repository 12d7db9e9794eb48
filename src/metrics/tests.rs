use super::*;

/// A word outside a label's list is `other`; the list's own are kept.
#[test]
fn closed_labels_fold_every_other_word_to_other() {
    assert_eq!(closed_label("config", &RELOAD_SOURCES), "config");
    assert_eq!(closed_label("client_ca", &RELOAD_SOURCES), "client_ca");
    assert_eq!(closed_label("Config", &RELOAD_SOURCES), "other");
    assert_eq!(closed_label(&"x".repeat(1 << 16), &RELOAD_SOURCES), "other");
    let metrics = Metrics::new();
    metrics.set_reload("config", true);
    metrics.set_reload("something else", false);
    let text = metrics.encode();
    assert!(text.contains(r#"gpu_policy_reload_success{source="config"} 1"#), "{text}");
    assert!(text.contains(r#"gpu_policy_reload_success{source="other"} 0"#), "{text}");
}
