//! JSON Patch operations the rules build.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde_json::{Map, Value};

/// An `add` operation.
pub fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

/// Where an object's annotations stand, for [`set_annotation`]: its
/// `metadata` pointer, and whether `metadata` and `metadata.annotations`
/// exist (in the object, or made by an earlier operation of the patch).
#[derive(Debug, Clone, Copy)]
pub struct AnnotationsAt<'a> {
    pub metadata: &'a PointerBuf,
    pub has_metadata: bool,
    pub has_annotations: bool,
}

/// The operation that sets the annotation `key` to `value`, creating
/// `metadata.annotations` (and `metadata`) when they are missing.
pub fn set_annotation(at: AnnotationsAt<'_>, key: &str, value: String) -> PatchOperation {
    let mut path = at.metadata.clone();
    if at.has_annotations {
        path.push_back("annotations");
        path.push_back(key);
        return add(path, Value::String(value));
    }
    let mut annotations = Map::new();
    annotations.insert(key.to_owned(), Value::String(value));
    let mut annotations = Value::Object(annotations);
    if at.has_metadata {
        path.push_back("annotations");
    } else {
        let mut metadata = Map::new();
        metadata.insert("annotations".to_owned(), annotations);
        annotations = Value::Object(metadata);
    }
    add(path, annotations)
}

/// Whether one of `operations` adds the whole `metadata.annotations` map
/// (or `metadata`) of the object whose metadata is at `metadata`.
pub fn adds_annotations(operations: &[PatchOperation], metadata: &PointerBuf) -> bool {
    let mut annotations = metadata.clone();
    annotations.push_back("annotations");
    operations.iter().any(|operation| {
        matches!(operation, PatchOperation::Add(op) if op.path == annotations || op.path == *metadata)
    })
}
