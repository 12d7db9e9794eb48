use super::*;

#[test]
fn the_default_pod_asks_for_one_gpu_in_no_namespace() {
    let pod = gpu_pod().json();
    assert_eq!(pod["metadata"], json!({"name": "trainer"}));
    assert_eq!(pod["spec"]["containers"][0]["image"], CUDA_IMAGE);
    assert_eq!(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], 1);
}

#[test]
fn each_setter_changes_its_field_only() {
    let pod = gpu_pod().name("p").namespace("ml").container("c").image("x:1").gpus("500m");
    assert_eq!(
        pod.json(),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
               "spec": {"containers": [{"name": "c", "image": "x:1",
                        "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}})
    );
    let manifest = pod.manifest();
    assert!(manifest.ends_with('\n'));
    assert_eq!(serde_json::from_str::<Value>(&manifest).ok(), Some(pod.json()));
}
