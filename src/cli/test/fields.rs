//! The strict reader of the test file's mappings: each key taken by the
//! code that knows it, every key left over refused, and every problem one
//! [`FieldError`] naming the field by its path (`cases[2].violations[0]`).

use serde_json::{Map, Value};

use crate::manifest::json_type;

/// A field of the test file that is not what the schema says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// Where, as a path: `namespace.mode`, `cases[0].patched.file`.
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// `parent.key`, or `key` at the top.
pub fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// `parent[index]`.
pub fn item(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// A mapping of the test file, read key by key.
pub struct Fields {
    /// The mapping's own path (empty at the top of a document).
    path: String,
    map: Map<String, Value>,
    /// The keys the schema allows here, for the message on an unknown one.
    known: &'static [&'static str],
}

impl Fields {
    /// The mapping at `path`, whose keys may only be `known`.
    pub fn new(
        value: Value,
        path: &str,
        known: &'static [&'static str],
    ) -> Result<Self, FieldError> {
        match value {
            Value::Object(map) => {
                let fields = Self {
                    path: path.to_owned(),
                    map,
                    known,
                };
                fields.refuse_unknown()?;
                Ok(fields)
            }
            other => Err(FieldError::new(
                shown(path),
                format!("must be a mapping, not {}", json_type(&other)),
            )),
        }
    }

    fn refuse_unknown(&self) -> Result<(), FieldError> {
        match self
            .map
            .keys()
            .find(|key| !self.known.contains(&key.as_str()))
        {
            Some(key) => Err(FieldError::new(
                child(&self.path, key),
                format!("unknown field (expected one of: {})", self.known.join(", ")),
            )),
            None => Ok(()),
        }
    }

    /// The path of `key` in this mapping.
    pub fn path_of(&self, key: &str) -> String {
        child(&self.path, key)
    }

    /// The value of `key`, if it is there (`null` counts as absent).
    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|value| !value.is_null())
    }

    /// The value of a key that must be there.
    pub fn required(&mut self, key: &str) -> Result<Value, FieldError> {
        self.take(key)
            .ok_or_else(|| FieldError::new(self.path_of(key), "missing"))
    }

    /// A string that must be there and not be empty.
    pub fn required_string(&mut self, key: &str) -> Result<String, FieldError> {
        let value = self.required(key)?;
        non_empty_string(value, &self.path_of(key))
    }

    /// A string, if it is there; not empty.
    pub fn string(&mut self, key: &str) -> Result<Option<String>, FieldError> {
        let path = self.path_of(key);
        self.take(key)
            .map(|value| non_empty_string(value, &path))
            .transpose()
    }

    /// A boolean, if it is there.
    pub fn boolean(&mut self, key: &str) -> Result<Option<bool>, FieldError> {
        let path = self.path_of(key);
        self.take(key)
            .map(|value| match value {
                Value::Bool(flag) => Ok(flag),
                other => Err(FieldError::new(
                    path,
                    format!("must be true or false, not {}", described(&other)),
                )),
            })
            .transpose()
    }

    /// A list, if it is there: each element with its path.
    pub fn list(&mut self, key: &str) -> Result<Option<Vec<(String, Value)>>, FieldError> {
        let path = self.path_of(key);
        self.take(key).map(|value| list(value, &path)).transpose()
    }
}

/// The elements of a list, each with its path.
pub fn list(value: Value, path: &str) -> Result<Vec<(String, Value)>, FieldError> {
    match value {
        Value::Array(items) => Ok(items
            .into_iter()
            .enumerate()
            .map(|(index, value)| (item(path, index), value))
            .collect()),
        other => Err(FieldError::new(
            path,
            format!("must be a list, not {}", json_type(&other)),
        )),
    }
}

/// A string that is not empty.
pub fn non_empty_string(value: Value, path: &str) -> Result<String, FieldError> {
    match value {
        Value::String(text) if text.trim().is_empty() => Err(FieldError::new(path, "is empty")),
        Value::String(text) => Ok(text),
        other => Err(FieldError::new(
            path,
            format!("must be a string, not {}", described(&other)),
        )),
    }
}

/// A value's type, and the value itself when it is a short scalar (`a
/// number (2)`), so that the fix is plain.
pub fn described(value: &Value) -> String {
    match value {
        Value::Bool(_) | Value::Number(_) => format!("{} ({value})", json_type(value)),
        Value::String(text) if text.chars().count() <= 40 => {
            format!("{} ({text:?})", json_type(value))
        }
        _ => json_type(value).to_owned(),
    }
}

/// The top of a document has no path of its own.
fn shown(path: &str) -> &str {
    if path.is_empty() {
        "the document"
    } else {
        path
    }
}

#[cfg(test)]
mod tests;
