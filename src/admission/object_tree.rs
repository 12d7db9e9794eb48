//! The object of a review as a JSON tree, built in the same pass that
//! parses the body, without the fields that no rule reads.
//!
//! Building the tree is most of what an admission costs, and a pod's
//! containers carry much that no rule looks at: probes, commands and
//! arguments, ports. Those subtrees are parsed (the body must be valid
//! JSON) but not built. Everything else is built exactly as
//! `serde_json::Value` builds it.
//!
//! Leaving fields out of the tree cannot change a patch: the tree is never
//! encoded again, a patch addresses the object as the API server sent it
//! by the keys and indexes of the fields it changes, and no skipped field is
//! read or changed by a rule. The tests check that no source file of the
//! request path names a skipped field.
//!
//! Skipped:
//! - in every element of a `containers`, `initContainers` or
//!   `ephemeralContainers` list: [`UNREAD_CONTAINER_FIELDS`];
//! - in every `metadata`: `managedFields`;
//! - at the top of the object: `status`.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Container fields no rule reads.
pub const UNREAD_CONTAINER_FIELDS: &[&str] = &[
    "args",
    "command",
    "envFrom",
    "imagePullPolicy",
    "lifecycle",
    "livenessProbe",
    "ports",
    "readinessProbe",
    "resizePolicy",
    "startupProbe",
    "stdin",
    "stdinOnce",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "tty",
    "workingDir",
];

/// Metadata fields no rule reads.
pub const UNREAD_METADATA_FIELDS: &[&str] = &["managedFields"];

/// Top-level fields no rule reads.
pub const UNREAD_OBJECT_FIELDS: &[&str] = &["status"];

/// Where in the object a value sits, as far as skipping goes: named by the
/// key of the map it is the value of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The object itself.
    Root,
    /// The value of a `metadata` key.
    Metadata,
    /// The value of a `containers`, `initContainers` or
    /// `ephemeralContainers` key.
    ContainerList,
    /// An element of a container list.
    Container,
    Other,
}

impl Place {
    fn of_key(key: &str) -> Place {
        match key {
            "metadata" => Place::Metadata,
            "containers" | "initContainers" | "ephemeralContainers" => Place::ContainerList,
            _ => Place::Other,
        }
    }

    fn skips(self, key: &str) -> bool {
        let unread = match self {
            Place::Root => UNREAD_OBJECT_FIELDS,
            Place::Metadata => UNREAD_METADATA_FIELDS,
            Place::Container => UNREAD_CONTAINER_FIELDS,
            Place::ContainerList | Place::Other => return false,
        };
        unread.contains(&key)
    }
}

/// Reads an object into its tree, without the fields no rule reads.
#[derive(Debug, Clone, Copy)]
pub struct ObjectTree(Place);

impl ObjectTree {
    /// The seed of a whole object (a review's `object` or `oldObject`).
    pub fn object() -> Self {
        ObjectTree(Place::Root)
    }
}

impl<'de> DeserializeSeed<'de> for ObjectTree {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// As serde_json's own `Value` visitor, but for the map and list places.
impl<'de> Visitor<'de> for ObjectTree {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let element = match self.0 {
            Place::ContainerList => Place::Container,
            _ => Place::Other,
        };
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(value) = seq.next_element_seed(ObjectTree(element))? {
            values.push(value);
        }
        Ok(Value::Array(values))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut values = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.0.skips(&key) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = map.next_value_seed(ObjectTree(Place::of_key(&key)))?;
            values.insert(key, value);
        }
        Ok(Value::Object(values))
    }
}

#[cfg(test)]
mod tests;
