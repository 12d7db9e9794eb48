//! Reading a [`Document`] from any serde deserializer, in the same pass
//! that parses the text: strings without escapes borrowed from it, and
//! members that no one reads ([`Unread`]) parsed but left out.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use super::tree::{Document, Json, Node};

/// Where a reader is in a document, for leaving out the members no one
/// reads: a small state machine over keys and list elements.
pub trait Unread: Copy {
    /// The place of the value of member `key` of an object at this place.
    fn member(self, key: &str) -> Self;
    /// The place of an element of an array at this place.
    fn element(self) -> Self;
    /// Whether member `key` of an object at this place is left out.
    fn skips(self, key: &str) -> bool;
    /// Whether an element of an array, read at this place, is kept; one
    /// that is not keeps its index as a [`Json::is_left_out`] value.
    fn keeps(self, _element: Json<'_>) -> bool {
        true
    }
}

/// Leaves nothing out.
#[derive(Debug, Clone, Copy)]
pub struct Everything;

impl Unread for Everything {
    fn member(self, _: &str) -> Self {
        self
    }

    fn element(self) -> Self {
        self
    }

    fn skips(self, _: &str) -> bool {
        false
    }
}

impl<'a> Document<'a> {
    /// Reads a whole text.
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let document = read(&mut deserializer, Everything)?;
        deserializer.end()?;
        Ok(document)
    }
}

/// Reads one value of `deserializer` into a document, starting at `place`.
pub fn read<'de, D: Deserializer<'de>, P: Unread>(
    deserializer: D,
    place: P,
) -> Result<Document<'de>, D::Error> {
    // Room for a pod of a few containers, so that a small object's nodes
    // are never moved as the list grows (6 KiB).
    let mut document = Document {
        nodes: Vec::with_capacity(INITIAL_NODES),
        unescaped: Vec::new(),
    };
    Builder {
        doc: &mut document,
        place,
    }
    .deserialize(deserializer)?;
    Ok(document)
}

const INITIAL_NODES: usize = 256;

struct Builder<'d, 'de, P> {
    doc: &'d mut Document<'de>,
    place: P,
}

impl<'de, P> Builder<'_, 'de, P> {
    fn push(&mut self, node: Node<'de>) {
        self.doc.nodes.push(node);
    }

    fn push_unescaped<E: de::Error>(&mut self, text: Box<str>) -> Result<(), E> {
        let index = index(self.doc.unescaped.len())?;
        self.doc.unescaped.push(text);
        self.push(Node::Unescaped(index));
        Ok(())
    }

    fn push_key<E: de::Error>(&mut self, key: Cow<'de, str>) -> Result<(), E> {
        match key {
            Cow::Borrowed(text) => {
                self.push(Node::Str(text));
                Ok(())
            }
            Cow::Owned(text) => self.push_unescaped(text.into_boxed_str()),
        }
    }
}

/// A node index or count as a document keeps it.
fn index<E: de::Error>(at: usize) -> Result<u32, E> {
    u32::try_from(at).map_err(|_| too_many())
}

fn too_many<E: de::Error>() -> E {
    E::custom("the document has too many values")
}

impl<'de, P: Unread> DeserializeSeed<'de> for Builder<'_, 'de, P> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// As serde_json's own `Value` visitor, into nodes.
impl<'de, P: Unread> Visitor<'de> for Builder<'_, 'de, P> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(mut self, value: bool) -> Result<(), E> {
        self.push(Node::Bool(value));
        Ok(())
    }

    fn visit_i64<E>(mut self, value: i64) -> Result<(), E> {
        self.push(Node::Number(value.into()));
        Ok(())
    }

    fn visit_u64<E>(mut self, value: u64) -> Result<(), E> {
        self.push(Node::Number(value.into()));
        Ok(())
    }

    fn visit_f64<E>(mut self, value: f64) -> Result<(), E> {
        self.push(Number::from_f64(value).map_or(Node::Null, Node::Number));
        Ok(())
    }

    fn visit_borrowed_str<E>(mut self, value: &'de str) -> Result<(), E> {
        self.push(Node::Str(value));
        Ok(())
    }

    fn visit_str<E: de::Error>(mut self, value: &str) -> Result<(), E> {
        self.push_unescaped(value.into())
    }

    fn visit_string<E: de::Error>(mut self, value: String) -> Result<(), E> {
        self.push_unescaped(value.into_boxed_str())
    }

    fn visit_none<E>(mut self) -> Result<(), E> {
        self.push(Node::Null);
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_unit<E>(mut self) -> Result<(), E> {
        self.push(Node::Null);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let at = self.doc.nodes.len();
        self.push(Node::Array { len: 0, end: 0 });
        let element = self.place.element();
        let mut len = 0usize;
        loop {
            let start = self.doc.nodes.len();
            let read = seq.next_element_seed(Builder {
                doc: &mut *self.doc,
                place: element,
            })?;
            if read.is_none() {
                break;
            }
            if !element.keeps(Json::at(self.doc, start)) {
                self.doc.nodes.truncate(start);
                self.push(Node::Left);
            }
            len += 1;
        }
        self.doc.close(at, len).ok_or_else(too_many)
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let at = self.doc.nodes.len();
        self.push(Node::Object { len: 0, end: 0 });
        let mut len = 0usize;
        while let Some(Key(key)) = map.next_key()? {
            if self.place.skips(&key) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let place = self.place.member(&key);
            self.push_key(key)?;
            map.next_value_seed(Builder {
                doc: &mut *self.doc,
                place,
            })?;
            len += 1;
        }
        self.doc.close(at, len).ok_or_else(too_many)
    }
}

/// A member's key, borrowed from the text when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a string key")
            }

            fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(value)))
            }

            fn visit_str<E>(self, value: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(value.to_owned())))
            }

            fn visit_string<E>(self, value: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(value)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}
