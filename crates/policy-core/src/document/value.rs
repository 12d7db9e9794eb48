//! A [`Document`] and `serde_json::Value`: one made from the other (`check`, `audit` and tests hold
//! their objects as values), written out (`Serialize`), compared and shown.

use std::fmt;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::tree::{Array, Document, Json, Kind, Object};

impl<'a> Document<'a> {
    /// A document of `value`, whose strings it borrows: read as a text is,
    /// from the value's own deserializer. Empty (its root null) only past
    /// 2^30 values, more than a value held in memory has.
    pub fn from_value(value: &'a Value) -> Self {
        super::read("", value, super::Everything, &super::Budget::unlimited()).unwrap_or_default()
    }
}

impl Json<'_> {
    /// The value as an owned `serde_json::Value`.
    pub fn to_value(self) -> Value {
        match self.kind() {
            Kind::Null => Value::Null,
            Kind::Bool => Value::Bool(self.as_bool().unwrap_or_default()),
            Kind::Number => self.as_number().map_or(Value::Null, Value::Number),
            Kind::String => Value::String(self.as_str().unwrap_or_default().to_owned()),
            Kind::Array => {
                Value::Array(self.as_array().into_iter().flatten().map(Json::to_value).collect())
            }
            Kind::Object => {
                let mut map = Map::new();
                for (key, member) in self.as_object().into_iter().flatten() {
                    map.insert(key.to_owned(), member.to_value());
                }
                Value::Object(map)
            }
        }
    }
}

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.kind() {
            Kind::Null => serializer.serialize_unit(),
            Kind::Bool => serializer.serialize_bool(self.as_bool().unwrap_or_default()),
            Kind::Number => match self.as_number() {
                Some(number) => number.serialize(serializer),
                None => serializer.serialize_unit(),
            },
            Kind::String => serializer.serialize_str(self.as_str().unwrap_or_default()),
            Kind::Array => {
                let list = self.as_array();
                let mut seq = serializer.serialize_seq(list.map(|l| l.len()))?;
                for element in list.into_iter().flatten() {
                    seq.serialize_element(&element)?;
                }
                seq.end()
            }
            Kind::Object => {
                let object = self.as_object();
                let mut map = serializer.serialize_map(object.map(|o| o.len()))?;
                for (key, member) in object.into_iter().flatten() {
                    map.serialize_entry(key, &member)?;
                }
                map.end()
            }
        }
    }
}

/// Equal as JSON values are: objects as maps (the last of a repeated key),
/// numbers as `serde_json` compares them.
impl PartialEq for Json<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self.kind(), other.kind()) {
            (Kind::Null, Kind::Null) => true,
            (Kind::Bool, Kind::Bool) => self.as_bool() == other.as_bool(),
            (Kind::Number, Kind::Number) => self.as_number() == other.as_number(),
            (Kind::String, Kind::String) => self.as_str() == other.as_str(),
            (Kind::Array, Kind::Array) => match (self.as_array(), other.as_array()) {
                (Some(left), Some(right)) => {
                    left.len() == right.len() && left.iter().zip(right.iter()).all(|(l, r)| l == r)
                }
                _ => false,
            },
            (Kind::Object, Kind::Object) => match (self.as_object(), other.as_object()) {
                (Some(left), Some(right)) => {
                    let left_keys = sorted_keys(left);
                    left_keys == sorted_keys(right)
                        && left_keys.iter().all(|key| left.get(key) == right.get(key))
                }
                _ => false,
            },
            _ => false,
        }
    }
}

/// Equal as two documents are ([`PartialEq`] of [`Json`]), against a
/// `serde_json::Value`, without converting either.
impl PartialEq<Value> for Json<'_> {
    fn eq(&self, other: &Value) -> bool {
        match (self.kind(), other) {
            (Kind::Null, Value::Null) => true,
            (Kind::Bool, Value::Bool(value)) => self.as_bool() == Some(*value),
            (Kind::Number, Value::Number(value)) => self.as_number().as_ref() == Some(value),
            (Kind::String, Value::String(value)) => self.as_str() == Some(value.as_str()),
            (Kind::Array, Value::Array(items)) => self.as_array().is_some_and(|list| {
                list.len() == items.len() && list.iter().zip(items).all(|(l, r)| l == *r)
            }),
            (Kind::Object, Value::Object(map)) => self.as_object().is_some_and(|object| {
                let keys = sorted_keys(object);
                keys.len() == map.len()
                    && keys.iter().all(|key| match (object.get(key), map.get(*key)) {
                        (Some(left), Some(right)) => left == *right,
                        _ => false,
                    })
            }),
            _ => false,
        }
    }
}

fn sorted_keys(object: Object<'_>) -> Vec<&str> {
    let mut keys: Vec<&str> = object.keys().collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

impl PartialEq for Object<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}

impl PartialEq for Array<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}

/// The value as JSON text.
impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl fmt::Debug for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(text) => f.write_str(&text),
            Err(_) => f.write_str("<unwritable JSON>"),
        }
    }
}

impl fmt::Debug for Document<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.root().fmt(f)
    }
}

impl fmt::Debug for Object<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_json().fmt(f)
    }
}

impl fmt::Debug for Array<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_json().fmt(f)
    }
}
