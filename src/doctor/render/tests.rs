use super::*;
use crate::doctor::diagnose;
use crate::doctor::inventory::{Inventory, Node, Seen};

/// One node that looks like a GPU node and advertises nothing, with no
/// device plugin and no RuntimeClass: two findings.
fn one_finding() -> Diagnosis {
    let node = Node {
        name: "gpu-1".to_owned(),
        labels: [("nvidia.com/gpu.present".to_owned(), "true".to_owned())].into(),
        ..Node::default()
    };
    diagnose(&Inventory {
        nodes: Seen::Complete(vec![node]),
        runtime_classes: Seen::Complete(Vec::new()),
        ..Inventory::default()
    })
}

#[test]
fn the_json_schema_is_stable() {
    let value: serde_json::Value =
        serde_json::from_str(&json(&one_finding()).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
    let keys = |v: &serde_json::Value| -> Vec<String> {
        v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
    };
    assert_eq!(keys(&value), ["findings", "healthy", "notes", "schemaVersion", "summary"]);
    assert_eq!(value["schemaVersion"], 1);
    assert_eq!(value["healthy"], false);
    assert_eq!(keys(&value["summary"]), ["gpuNodes", "nodes", "optedIn"]);
    assert_eq!(keys(&value["summary"]["optedIn"]), ["audit", "enforce", "warn"]);
    let finding = &value["findings"][0];
    assert_eq!(
        keys(finding),
        ["cause", "evidence", "fix", "id", "moreSubjects", "severity", "subjects", "summary"]
    );
    assert_eq!(finding["id"], "no-gpu-capacity");
    assert_eq!(finding["severity"], "error");
    assert_eq!(finding["cause"], "device-plugin-missing");
    assert_eq!(
        finding["subjects"][0],
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "name": "gpu-1"})
    );
    assert_eq!(keys(&value["notes"][0]), ["kind", "message"]);
}

#[test]
fn the_text_gives_each_finding_its_evidence_and_fix() {
    let text = text(&one_finding());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first().copied(), Some("gpu-policy doctor: 1 node, 1 with GPUs; 2 findings"));
    assert!(
        lines.contains(&"  objects: Node gpu-1")
            && lines.contains(&"  cause: device-plugin-missing")
            && lines.iter().any(|l| l.starts_with("  fix: install the device plugin"))
            && lines.last() == Some(&"opted in: enforce none; warn none; audit none"),
        "{text}"
    );
}
