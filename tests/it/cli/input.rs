//! What `check` reads: stdin, files, folders, lists.

use super::*;

// ---------------------------------------------------------------------------
// Input

#[test]
fn stdin_multi_document_yaml() {
    let input = format!(
        "# leading comment\n{}---\n---\n{}...\n",
        gpu_pod().container("app").name("first").gpus(1).manifest(),
        CUDA_NO_GPU_POD
    );
    let out = check_stdin(&["-o", "json"], &input);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["first", "cpu-only"]);

    let text = check_stdin(&[], &input);
    assert_eq!(text.code, 0, "{text:?}");
    assert_eq!(text.lines()[0], "Pod default/first: allowed, mutated  (-)");
    assert_eq!(text.last_line(), "2 objects (enforce mode): 2 allowed, 0 denied, 0 ignored");
}

#[test]
fn stdin_json_object_and_array() {
    let object = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}"#;
    let out = check_stdin(&["-o", "json"], object);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["j"]);

    let array = format!("[{object}, {}]", object.replace("\"j\"", "\"k\""));
    let out = check_stdin(&["-o", "json"], &array);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["j", "k"]);
}

#[test]
fn folders_are_walked_recursively_for_manifest_extensions_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "b.yaml", &gpu_pod().container("app").name("from-yaml").gpus(1).manifest());
    write(dir.path(), "a/c.yml", &gpu_pod().container("app").name("from-yml").gpus(1).manifest());
    write(
        dir.path(),
        "a/deeper/d.json",
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "from-json"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}"#,
    );
    // Not manifests: never read, although they would not parse.
    write(dir.path(), "notes.txt", "kind: [broken\n");
    write(dir.path(), "a/README.md", "# {{ not yaml: [\n");
    write(dir.path(), "a/deeper/pod.yaml.bak", "kind: [broken\n");
    write(dir.path(), "Makefile", "all:\n\t{broken\n");
    let out = check(&["-f", &dir.path().display().to_string(), "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    // Sorted by path: a/c.yml, a/deeper/d.json, b.yaml.
    assert_eq!(names(&out.json()), vec!["from-yml", "from-json", "from-yaml"]);

    // A folder and a file together, in the order given.
    let file = dir.path().join("b.yaml").display().to_string();
    let out =
        check(&["-f", &file, "-f", &dir.path().join("a").display().to_string(), "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["from-yaml", "from-yml", "from-json"]);
}

#[test]
fn an_empty_folder_checks_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "ignored.txt", "hello");
    let out = check(&["-f", &dir.path().display().to_string()]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "0 objects (enforce mode): 0 allowed, 0 denied, 0 ignored\n");
}

#[test]
fn kind_list_is_flattened() {
    let input = "\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: listed-gpu}
  spec:
    containers:
    - {name: app, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: listed-cpu}
  spec:
    containers:
    - {name: app, image: busybox}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed-config}
";
    let out = check_stdin(&["-o", "json"], input);
    assert_eq!(out.code, 0, "{out:?}");
    let reports = out.json();
    assert_eq!(names(&reports), vec!["listed-gpu", "listed-cpu", "listed-config"]);
    assert_eq!(reports[2]["ignored"], true);
    assert!(reports.iter().all(|r| r["kind"] != "List"), "the List itself is not an object");
}

// ---------------------------------------------------------------------------
// YAML whatever its style, and folders with symlink cycles

#[test]
fn yaml_flow_style_and_json_documents_in_a_yaml_file_are_yaml() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Valid YAML (flow style), not valid JSON.
    let flow = write(
        dir.path(),
        "flow.yaml",
        "{apiVersion: v1, kind: Pod, metadata: {name: flow}, \
         spec: {containers: [{name: c, image: busybox}]}}\n",
    );
    let out = check(&["-f", &flow, "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["flow"]);
    // A YAML stream of JSON documents, as `kubectl apply -f` accepts.
    let stream = write(
        dir.path(),
        "stream.yaml",
        "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"}, \
         \"spec\": {\"containers\": [{\"name\": \"c\"}]}}\n---\n\
         {\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"b\"}, \
         \"spec\": {\"containers\": [{\"name\": \"c\"}]}}\n",
    );
    let out = check(&["-f", &stream, "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["a", "b"]);
}

#[cfg(unix)]
#[test]
fn a_symlink_cycle_does_not_repeat_manifests() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "a/pod.yaml", &gpu_pod().container("app").name("once").gpus(1).manifest());
    std::os::unix::fs::symlink("..", dir.path().join("a/loop")).expect("symlink");
    let out = check(&["-f", &dir.path().display().to_string(), "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["once"]);
}
