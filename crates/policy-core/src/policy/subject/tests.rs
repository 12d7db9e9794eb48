use serde_json::json;

use super::*;

#[test]
fn malformed_owner_references_are_skipped() {
    let pod = json!({"metadata": {"ownerReferences": [
        {"controller": true, "kind": 3, "name": "nvidia-gpu-exporter"},
        "garbage"
    ]}});
    let pod = crate::document::Document::from_value(&pod);
    assert_eq!(controller_owner(pod.root()), None);
}
