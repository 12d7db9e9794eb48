//! The shared manifests of `tests/fixtures/`, read as `gpu-policy check`
//! reads them ([`gpu_policy::manifest::load`]), and the pods they make.

use std::path::{Path, PathBuf};

use gpu_policy::manifest::{self, Document};
use serde_json::Value;

use super::workloads::pod_of_workload;

/// `tests/fixtures`.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The path of one fixture file, as the command line names it.
pub fn path(name: &str) -> String {
    dir().join(name).display().to_string()
}

/// The YAML files of one folder, sorted by name.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// The YAML fixtures, sorted by name: the 18 shared ones.
pub fn files() -> Vec<PathBuf> {
    let files = yaml_files(&dir());
    assert_eq!(files.len(), 18, "the 18 shared fixtures: {files:?}");
    files
}

/// The fixtures of the GPU sharing schemes (`tests/fixtures/sharing/`),
/// sorted by name: the 18 of KAI-Scheduler, HAMi and the DRA driver's MPS demo.
pub fn sharing_files() -> Vec<PathBuf> {
    let files = yaml_files(&dir().join("sharing"));
    assert_eq!(files.len(), 18, "the 18 sharing fixtures: {files:?}");
    files
}

/// Every fixture in the order `check -f tests/fixtures` reads them: the
/// shared ones, then `sharing/`.
pub fn all_files() -> Vec<PathBuf> {
    let mut files = files();
    files.extend(sharing_files());
    files
}

/// The example manifests: every `examples/*.yaml` but the configuration
/// file, sorted.
pub fn example_manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("examples")
        .expect("examples/")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .filter(|path| path.file_name().is_some_and(|n| n != "config.yaml"))
        .collect();
    files.sort();
    files
}

/// The file name of a fixture without its extension, e.g.
/// `07-vllm-mistral-7b-deployment`.
pub fn stem(path: &Path) -> String {
    path.file_stem().and_then(|s| s.to_str()).expect("UTF-8 file name").to_owned()
}

/// The documents of one file, in order.
pub fn load(path: &Path) -> Vec<Document> {
    manifest::load(&[path.to_path_buf()], &mut std::io::empty())
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Every object of the shared fixtures, with the stem of its file.
pub fn objects() -> Vec<(String, Value)> {
    objects_in(&files())
}

/// Every object of every fixture, `sharing/` included, in the order
/// `check -f tests/fixtures` reads them, with the stem of its file.
pub fn all_objects() -> Vec<(String, Value)> {
    objects_in(&all_files())
}

/// Every object of every fixture, `sharing/` included, as `audit` reads it
/// from a cluster, with the stem of its file: in the namespace it names,
/// else in `fixture-NN` (NN: the file's number), and with a
/// `metadata.uid`. Namespace objects stay cluster-scoped.
pub fn audited_objects() -> Vec<(String, Value)> {
    let mut objects = all_objects();
    for (index, (stem, object)) in objects.iter_mut().enumerate() {
        let namespaced = object["kind"] != "Namespace";
        let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        if namespaced && !metadata.contains_key("namespace") {
            let number = stem.get(..2).unwrap_or("00");
            metadata.insert("namespace".into(), format!("fixture-{number}").into());
        }
        metadata
            .entry("uid")
            .or_insert_with(|| format!("00000000-0000-4000-8000-{index:012}").into());
    }
    objects
}

fn objects_in(files: &[PathBuf]) -> Vec<(String, Value)> {
    files
        .iter()
        .flat_map(|path| {
            let stem = stem(path);
            load(path).into_iter().map(move |document| (stem.clone(), document.object))
        })
        .collect()
}

/// The objects of the fixture whose file name starts with `prefix` (e.g.
/// `"09"`).
pub fn objects_of(prefix: &str) -> Vec<Value> {
    let path = files()
        .into_iter()
        .find(|p| stem(p).starts_with(prefix))
        .unwrap_or_else(|| panic!("no fixture {prefix}"));
    load(&path).into_iter().map(|d| d.object).collect()
}

/// The first object of the fixture whose file name starts with `prefix`.
pub fn fixture(prefix: &str) -> Value {
    objects_of(prefix).into_iter().next().unwrap_or_else(|| panic!("fixture {prefix} is empty"))
}

pub fn is_pod(object: &Value) -> bool {
    object["apiVersion"] == "v1" && object["kind"] == "Pod"
}

/// One pod of the fixtures: a Pod object, or the pod a workload's
/// controller creates from its template.
pub struct FixturePod {
    /// The stem of the fixture file.
    pub stem: String,
    /// The object of the fixture the pod is or comes from.
    pub source: Value,
    pub pod: Value,
}

impl FixturePod {
    /// Whether the pod was made from a workload's template.
    pub fn is_template(&self) -> bool {
        !is_pod(&self.source)
    }

    /// `<stem>`, or `<stem> template` for a pod made from a template.
    pub fn label(&self) -> String {
        if self.is_template() { format!("{} template", self.stem) } else { self.stem.clone() }
    }
}

/// The pods of the fixtures: the 3 Pod objects, and one pod per workload (9),
/// named `<workload>-<suffix>`, owned by a workload of uid `owner_uid`
/// ([`pod_of_workload`]).
pub fn pods(suffix: &str, owner_uid: &str) -> Vec<FixturePod> {
    let mut pods = Vec::new();
    for (stem, object) in objects() {
        let pod = if is_pod(&object) {
            Some(object.clone())
        } else {
            pod_of_workload(&object, suffix, owner_uid)
        };
        if let Some(pod) = pod {
            pods.push(FixturePod { stem, source: object, pod });
        }
    }
    assert_eq!(pods.len(), 21, "12 pods and 9 workload templates");
    pods
}
