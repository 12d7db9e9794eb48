//! Reading the fields of an object's raw JSON, with the path of a field of the wrong shape spelled
//! out in the error: the pod view's and the claims' readers.

use crate::document::{Array, Json, Object};

/// An object whose fields the rules read have the wrong shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ObjectError {
    /// Dotted field path, e.g. `spec.containers[0].env`.
    pub field: String,
    pub problem: String,
}

/// Where a field is, for messages (`spec.containers[0].env`), spelled out only on an error.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FieldPath<'p> {
    /// Keys from the object's root (a pod template's place in its workload).
    Keys(&'p [&'p str]),
    Key(&'p FieldPath<'p>, &'p str),
    Index(&'p FieldPath<'p>, usize),
}

impl FieldPath<'_> {
    pub(crate) fn root() -> Self {
        FieldPath::Keys(&[])
    }

    pub(crate) fn key<'a>(&'a self, key: &'a str) -> FieldPath<'a> {
        FieldPath::Key(self, key)
    }

    pub(crate) fn index(&self, index: usize) -> FieldPath<'_> {
        FieldPath::Index(self, index)
    }

    fn write_to(&self, out: &mut String) {
        let push_key = |out: &mut String, key: &str| {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(key);
        };
        match self {
            FieldPath::Keys(keys) => keys.iter().for_each(|key| push_key(out, key)),
            FieldPath::Key(parent, key) => {
                parent.write_to(out);
                push_key(out, key);
            }
            FieldPath::Index(parent, index) => {
                parent.write_to(out);
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
        }
    }

    pub(crate) fn error(&self, problem: &str) -> ObjectError {
        let mut field = String::new();
        self.write_to(&mut field);
        if field.is_empty() {
            field.push_str("object");
        }
        ObjectError { field, problem: problem.to_owned() }
    }
}

pub(crate) fn as_object<'a>(
    value: Json<'a>,
    path: &FieldPath<'_>,
) -> Result<Object<'a>, ObjectError> {
    value
        .as_object()
        .ok_or_else(|| path.error(&format!("must be an object, not {}", value.type_name())))
}

/// The member `key` of `parent`, unless it is missing or null.
pub(crate) fn member<'a>(parent: Object<'a>, key: &str) -> Option<Json<'a>> {
    parent.get(key).filter(|value| !value.is_null())
}

/// The members `keys` of `object`, in one pass: of a repeated key the last, and null as missing.
pub(crate) fn fields<'a, const N: usize>(
    object: Object<'a>,
    keys: [&str; N],
) -> [Option<Json<'a>>; N] {
    let mut found = [None; N];
    for (key, value) in object {
        if let Some(at) = keys.iter().position(|wanted| *wanted == key) {
            found[at] = (!value.is_null()).then_some(value);
        }
    }
    found
}

/// The field `key` (read with [`fields`] or [`member`]) read as `what`.
pub(crate) fn typed_field<'a, T>(
    field: Option<Json<'a>>,
    key: &str,
    path: &FieldPath<'_>,
    read: fn(Json<'a>) -> Option<T>,
    what: &str,
) -> Result<Option<T>, ObjectError> {
    match field {
        None => Ok(None),
        Some(value) => read(value).map(Some).ok_or_else(|| {
            path.key(key).error(&format!("must be {what}, not {}", value.type_name()))
        }),
    }
}

pub(crate) fn object_field<'a>(
    field: Option<Json<'a>>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<Object<'a>>, ObjectError> {
    typed_field(field, key, path, Json::as_object, "an object")
}

pub(crate) fn array_field<'a>(
    field: Option<Json<'a>>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<Array<'a>>, ObjectError> {
    typed_field(field, key, path, Json::as_array, "a list")
}

/// The objects of the list `key` (read with [`fields`] or [`member`]),
/// each read by `read` with its index and path, which keeps what it
/// returns; elements the document's reader left out are skipped.
pub(crate) fn objects<'a, T>(
    field: Option<Json<'a>>,
    key: &str,
    path: &FieldPath<'_>,
    mut read: impl FnMut(usize, Object<'a>, &FieldPath<'_>) -> Result<Option<T>, ObjectError>,
) -> Result<Option<Vec<T>>, ObjectError> {
    let Some(list) = array_field(field, key, path)? else {
        return Ok(None);
    };
    let list_path = path.key(key);
    // Grown as elements are kept, not sized by the list: a run of left-out
    // elements is one node of the document, so the list's length is not
    // what the read budget charged (a million `{}` env entries fit a body).
    let mut kept = Vec::new();
    for (index, raw) in list.iter().enumerate().filter(|(_, raw)| !raw.is_left_out()) {
        let at = list_path.index(index);
        kept.extend(read(index, as_object(raw, &at)?, &at)?);
    }
    Ok(Some(kept))
}

pub(crate) fn str_field<'a>(
    field: Option<Json<'a>>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<&'a str>, ObjectError> {
    typed_field(field, key, path, Json::as_str, "a string")
}

pub(crate) fn optional_object<'a>(
    parent: Object<'a>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<Object<'a>>, ObjectError> {
    object_field(member(parent, key), key, path)
}

pub(crate) fn optional_str<'a>(
    parent: Object<'a>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<&'a str>, ObjectError> {
    str_field(member(parent, key), key, path)
}

pub(crate) fn optional_bool(
    parent: Object<'_>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<bool>, ObjectError> {
    typed_field(member(parent, key), key, path, Json::as_bool, "a boolean")
}
