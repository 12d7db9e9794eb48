use super::*;
use serde_json::json;

fn node(labels: Value, allocatable: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "gpu-1", "labels": labels},
               "status": {"allocatable": allocatable, "capacity": allocatable}})
}

#[test]
fn a_manifest_node_is_read_as_the_caches_read_it() {
    let settings = Settings::default();
    let read = |object: &Value| lean_node_of_manifest(object, &settings).map_err(|e| e.to_string());
    let gpus = json!({"cpu": "8", "nvidia.com/gpu": "4"});
    let (name, bare) = read(&node(json!({}), gpus.clone())).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(name, "gpu-1");
    assert_eq!(bare, NodeGpus::of(&[("nvidia.com/gpu", 4)], None));
    let gfd = json!({MAJOR_LABEL: "8", MINOR_LABEL: "6", DRIVER_MAJOR_LABEL: "580"});
    let labelled = read(&node(gfd, gpus.clone())).map(|(_, n)| n);
    assert_eq!(
        labelled,
        Ok(NodeGpus::of(&[("nvidia.com/gpu", 4)], Some((8, 6))).with_driver_labels())
    );
    // Older GFD releases name the driver labels differently.
    let old = read(&node(json!({OLD_DRIVER_MAJOR_LABEL: "535"}), gpus.clone()));
    assert_eq!(old.map(|(_, n)| n.driver_labels), Ok(true));
    // A label the scheduler cannot compare as a number does not count.
    let junk = json!({MAJOR_LABEL: "ampere", DRIVER_MAJOR_LABEL: "r580"});
    let junk = read(&node(junk, gpus)).map(|(_, n)| (n.compute_capability, n.driver_labels));
    assert_eq!(junk, Ok((None, false)));
    let pod = json!({"kind": "Pod", "metadata": {"name": "p"}});
    assert_eq!(read(&pod).err().as_deref(), Some("not a Node (Pod)"));
    let nameless = json!({"kind": "Node", "metadata": {}});
    assert!(read(&nameless).is_err());
    let unreadable =
        json!({"kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": 3}});
    assert!(read(&unreadable).is_err());
}
