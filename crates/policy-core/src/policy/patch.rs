//! JSON Patch operations the rules build.

use std::collections::BTreeMap;

use json_patch::jsonptr::{Pointer, PointerBuf};
use json_patch::{AddOperation, PatchOperation, RemoveOperation};
use serde_json::{Map, Value};

pub fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

pub fn remove(path: PointerBuf) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation { path })
}

/// One step of a path below a pointer: a member's key or an element's index.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `base` followed by `steps`, each escaped.
pub fn pointer_below<'s>(base: &Pointer, steps: impl IntoIterator<Item = Step<'s>>) -> PointerBuf {
    let mut pointer = base.to_buf();
    for step in steps {
        match step {
            Step::Key(key) => pointer.push_back(key),
            Step::Index(index) => pointer.push_back(index),
        }
    }
    pointer
}

/// Where an object's annotations stand, for [`set_annotation`]: its `metadata` pointer, and whether
/// `metadata` and `metadata.annotations` exist (in the object, or made earlier in the patch).
#[derive(Debug, Clone, Copy)]
pub struct AnnotationsAt<'a> {
    pub metadata: &'a Pointer,
    pub has_metadata: bool,
    pub has_annotations: bool,
}

/// The operation that sets the annotation `key` to `value`, creating
/// `metadata.annotations` (and `metadata`) when they are missing.
pub fn set_annotation(at: AnnotationsAt<'_>, key: &str, value: String) -> PatchOperation {
    if at.has_annotations {
        let path = pointer_below(at.metadata, [Step::Key("annotations"), Step::Key(key)]);
        return add(path, Value::String(value));
    }
    let mut path = at.metadata.to_buf();
    let annotations = object(key, Value::String(value));
    if at.has_metadata {
        path.push_back("annotations");
        return add(path, annotations);
    }
    add(path, object("annotations", annotations))
}

/// `{key: value}`, built directly: `json!` would copy a `Value` by serialising it.
pub fn object(key: &str, value: Value) -> Value {
    let mut map = Map::with_capacity(1);
    map.insert(key.to_owned(), value);
    Value::Object(map)
}

/// Whether one of `operations` adds the whole `metadata.annotations` map
/// (or `metadata`) of the object whose metadata is at `metadata`.
pub fn adds_annotations(operations: &[PatchOperation], metadata: &Pointer) -> bool {
    // Compared as text, without building the annotations' pointer.
    operations.iter().any(|operation| {
        matches!(operation, PatchOperation::Add(op)
            if op.path.as_str().strip_prefix(metadata.as_str())
                .is_some_and(|below| below.is_empty() || below == "/annotations"))
    })
}

/// `operations` made to compose with `earlier`, the operations of the patch before them. Rules
/// compute their operations from the same original object, so two of them may each create a
/// missing array (`add /spec/tolerations [...]`), and the second add would replace the first's:
/// an `add` of a whole array where an earlier operation placed one becomes appends (`/-`) of its
/// items, and an item an earlier operation already placed in that array is not placed again.
pub fn composed(
    earlier: &[PatchOperation],
    operations: Vec<PatchOperation>,
) -> Vec<PatchOperation> {
    let builds_arrays = |operations: &[PatchOperation]| {
        operations.iter().any(|operation| array_items(operation).is_some())
    };
    if !builds_arrays(&operations) || !builds_arrays(earlier) {
        return operations;
    }
    // The items each array path got from the earlier operations.
    let mut placed: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for operation in earlier {
        if let Some((path, items)) = array_items(operation) {
            placed.entry(path).or_default().extend(items);
        }
    }
    let mut out = Vec::with_capacity(operations.len());
    for operation in operations {
        let PatchOperation::Add(add_op) = &operation else {
            out.push(operation);
            continue;
        };
        let appended = add_op.path.as_str().strip_suffix("/-");
        let path = appended.unwrap_or(add_op.path.as_str());
        let Some(before) = placed.get(path) else {
            out.push(operation);
            continue;
        };
        match (&add_op.value, appended) {
            (item, Some(_)) => {
                if !before.contains(&item) {
                    out.push(operation);
                }
            }
            (Value::Array(items), None) => {
                let mut end = add_op.path.clone();
                end.push_back("-");
                for item in items.iter().filter(|item| !before.contains(item)) {
                    out.push(add(end.clone(), item.clone()));
                }
            }
            _ => out.push(operation),
        }
    }
    out
}

/// The array path an operation places items in, and those items: an `add` of a whole array, or an
/// append (`/-`) of one item.
fn array_items(operation: &PatchOperation) -> Option<(&str, Vec<&Value>)> {
    let PatchOperation::Add(add_op) = operation else {
        return None;
    };
    match (add_op.path.as_str().strip_suffix("/-"), &add_op.value) {
        (Some(path), item) => Some((path, vec![item])),
        (None, Value::Array(items)) => Some((add_op.path.as_str(), items.iter().collect())),
        (None, _) => None,
    }
}

/// `operations` encoded as JSON, when that is at most `budget` bytes; `None` past it. The encoding
/// stops at the budget: a patch far over it costs the budget, not its size.
pub fn encoded_within(operations: &[PatchOperation], budget: usize) -> Option<Vec<u8>> {
    let mut out = Written { kept: Some(Vec::new()), len: 0, budget };
    serde_json::to_writer(&mut out, operations).ok()?;
    out.kept
}

/// The length of `value` as JSON text, counted without keeping the text.
pub fn json_len(value: &Value) -> usize {
    let mut out = Written { kept: None, len: 0, budget: usize::MAX };
    // Writing a value into a counter cannot fail.
    let _ = serde_json::to_writer(&mut out, value);
    out.len
}

/// What a writer took: counted, kept when `kept` is, refused past `budget`.
struct Written {
    kept: Option<Vec<u8>>,
    len: usize,
    budget: usize,
}

impl std::io::Write for Written {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let len = self.len.saturating_add(bytes.len());
        if len > self.budget {
            return Err(std::io::Error::other("over the budget"));
        }
        self.len = len;
        if let Some(kept) = &mut self.kept {
            kept.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
