//! Reading a [`Document`] from any serde deserializer, in the same pass that parses the text:
//! strings without escapes borrowed from it, and members that no one reads ([`Unread`]) parsed but
//! left out, within a [`Budget`] of bytes.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use super::tree::{Document, Json, MAX_HALF, Node, Unpacked};

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
    /// Bytes charged to the [`Budget`] for a value read at this place, besides its nodes: what the
    /// policy builds for each one it reads there (a container's view, its patch).
    fn cost(self) -> usize {
        0
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
        let document = read(text, &mut deserializer, Everything, &Budget::unlimited())?;
        deserializer.end()?;
        Ok(document)
    }

    /// Whether reading it ran out of its [`Budget`]: it is then empty (its
    /// root reads as null), its text having been parsed to the end.
    pub fn exceeded_budget(&self) -> bool {
        self.exceeded
    }
}

/// The bytes reading documents may take, shared by the documents of one text (an object and its old
/// version): nodes, side tables and their places' cost ([`Unread::cost`]). A document taking more
/// is read to its end keeping nothing ([`Document::exceeded_budget`]).
#[derive(Debug)]
pub struct Budget {
    left: Cell<usize>,
}

impl Budget {
    pub fn new(bytes: usize) -> Self {
        Budget { left: Cell::new(bytes) }
    }

    pub fn unlimited() -> Self {
        Budget::new(usize::MAX)
    }

    /// Takes `bytes`, when there are that many left.
    fn spend(&self, bytes: usize) -> bool {
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                true
            }
            None => false,
        }
    }

    fn refund(&self, bytes: usize) {
        self.left.set(self.left.get().saturating_add(bytes));
    }
}

/// What one node costs.
const NODE_BYTES: usize = size_of::<Node>();

/// Reads one value of `deserializer`, which reads `text` (or a part of it), into a document,
/// starting at `place`. A string that `text` holds is kept as its place in it; any other (with
/// escapes, or from another text) is copied or borrowed aside.
pub fn read<'de, D: Deserializer<'de>, P: Unread>(
    text: &'de str,
    deserializer: D,
    place: P,
    budget: &Budget,
) -> Result<Document<'de>, D::Error> {
    let mut document = Document {
        text,
        nodes: Vec::with_capacity(reserved_nodes(text.len(), budget)),
        ..Document::default()
    };
    Builder { doc: &mut document, place, budget }.deserialize(deserializer)?;
    if document.exceeded {
        document.nodes = vec![Node::NULL];
    }
    Ok(document)
}

/// Room for a pod of a few containers, so that a small object's nodes are
/// never moved as the list grows (2 KiB).
const INITIAL_NODES: usize = 256;

/// From this length of text on, a document reserves room for all the nodes its budget allows.
const LARGE_TEXT: usize = 1 << 20;

/// The nodes to make room for before reading a text of `len` bytes.
///
/// A large text gets room for every node its budget allows: untouched, the room costs no memory,
/// while a list that doubles as it grows holds its old and new buffers at once, and mimalloc gives
/// the old ones back only after a delay. Measured on a review near the 3 MiB limit whose object is
/// 300,000 annotations of one character, growing took the peak 5.5 bodies above the base, against
/// about 3 with the room reserved (tests/attack/memory_shapes.rs). A small text gets room for one
/// node for each 8 of its bytes, about what a pod has.
fn reserved_nodes(len: usize, budget: &Budget) -> usize {
    let allowed = budget.left.get() / NODE_BYTES;
    if len >= LARGE_TEXT {
        allowed.min(MAX_HALF)
    } else {
        (len / 8).max(INITIAL_NODES).min(allowed)
    }
}

struct Builder<'d, 'de, 'b, P> {
    doc: &'d mut Document<'de>,
    place: P,
    budget: &'b Budget,
}

impl<'de, P> Builder<'_, 'de, '_, P> {
    /// Takes `bytes` of the budget; when they are not there, empties the document for good.
    fn spend(&mut self, bytes: usize) -> bool {
        if self.doc.exceeded {
            return false;
        }
        if self.budget.spend(bytes) {
            return true;
        }
        let doc = &mut *self.doc;
        doc.exceeded = true;
        doc.nodes = Vec::new();
        doc.strings = Vec::new();
        doc.numbers = Vec::new();
        false
    }

    fn push(&mut self, node: Node) {
        if self.spend(NODE_BYTES) {
            self.doc.nodes.push(node);
        }
    }

    fn push_aside<E: de::Error>(&mut self, text: Cow<'de, str>) -> Result<(), E> {
        let bytes = size_of::<Cow<'_, str>>()
            + match &text {
                Cow::Owned(owned) => owned.len(),
                Cow::Borrowed(_) => 0,
            };
        if !self.spend(bytes) {
            return Ok(());
        }
        let index = index(self.doc.strings.len())?;
        self.doc.strings.push(text);
        self.push(Node::text(index));
        Ok(())
    }

    /// A string of the text as its place there; any other aside.
    fn push_str<E: de::Error>(&mut self, value: Cow<'de, str>) -> Result<(), E> {
        if let Cow::Borrowed(borrowed) = value
            && let Some(node) = self.place_in_text(borrowed)
        {
            self.push(node);
            return Ok(());
        }
        self.push_aside(value)
    }

    fn place_in_text(&self, value: &str) -> Option<Node> {
        let text = self.doc.text;
        let at = (value.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
        let end = at.checked_add(value.len())?;
        (end <= text.len() && end <= MAX_HALF).then(|| Node::str(at as u32, value.len() as u32))
    }

    fn push_number<E: de::Error>(&mut self, number: Number) -> Result<(), E> {
        if !self.spend(size_of::<Number>()) {
            return Ok(());
        }
        let index = index(self.doc.numbers.len())?;
        self.doc.numbers.push(number);
        self.push(Node::number(index));
        Ok(())
    }
}

/// A node index or count as a document keeps it.
fn index<E: de::Error>(at: usize) -> Result<u32, E> {
    match u32::try_from(at) {
        Ok(at) if (at as usize) < MAX_HALF => Ok(at),
        _ => Err(too_many()),
    }
}

fn too_many<E: de::Error>() -> E {
    E::custom("the document has too many values")
}

impl<'de, P: Unread> DeserializeSeed<'de> for Builder<'_, 'de, '_, P> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(mut self, deserializer: D) -> Result<(), D::Error> {
        let cost = self.place.cost();
        if self.doc.exceeded || (cost > 0 && !self.spend(cost)) {
            return deserializer.deserialize_ignored_any(IgnoredAny).map(|_| ());
        }
        deserializer.deserialize_any(self)
    }
}

/// As serde_json's own `Value` visitor, into nodes.
impl<'de, P: Unread> Visitor<'de> for Builder<'_, 'de, '_, P> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(mut self, value: bool) -> Result<(), E> {
        self.push(Node::bool(value));
        Ok(())
    }

    fn visit_i64<E: de::Error>(mut self, value: i64) -> Result<(), E> {
        match Node::int(value) {
            Some(node) => {
                self.push(node);
                Ok(())
            }
            None => self.push_number(value.into()),
        }
    }

    fn visit_u64<E: de::Error>(mut self, value: u64) -> Result<(), E> {
        match i64::try_from(value) {
            Ok(value) => self.visit_i64(value),
            Err(_) => self.push_number(value.into()),
        }
    }

    fn visit_f64<E: de::Error>(mut self, value: f64) -> Result<(), E> {
        match Number::from_f64(value) {
            Some(number) => self.push_number(number),
            None => {
                self.push(Node::NULL);
                Ok(())
            }
        }
    }

    fn visit_borrowed_str<E: de::Error>(mut self, value: &'de str) -> Result<(), E> {
        self.push_str(Cow::Borrowed(value))
    }

    fn visit_str<E: de::Error>(mut self, value: &str) -> Result<(), E> {
        self.push_aside(Cow::Owned(value.to_owned()))
    }

    fn visit_string<E: de::Error>(mut self, value: String) -> Result<(), E> {
        self.push_aside(Cow::Owned(value))
    }

    fn visit_none<E>(mut self) -> Result<(), E> {
        self.push(Node::NULL);
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_unit<E>(mut self) -> Result<(), E> {
        self.push(Node::NULL);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let at = self.doc.nodes.len();
        self.push(Node::array());
        let element = self.place.element();
        let mut len = 0usize;
        // The run of left-out elements that the last element joined.
        let mut run: Option<usize> = None;
        while !self.doc.exceeded {
            let start = self.doc.nodes.len();
            let read = seq.next_element_seed(Builder {
                doc: &mut *self.doc,
                place: element,
                budget: self.budget,
            })?;
            if read.is_none() {
                return self.close(at, len);
            }
            len += 1;
            if self.doc.exceeded || element.keeps(Json::at(self.doc, start)) {
                run = None;
                continue;
            }
            self.budget.refund(NODE_BYTES * (self.doc.nodes.len() - start));
            self.doc.nodes.truncate(start);
            run = match run.map(|left| (left, self.doc.node(left))) {
                Some((left, Unpacked::Left { count })) if (count as usize) < MAX_HALF => {
                    if let Some(node) = self.doc.nodes.get_mut(left) {
                        *node = Node::left(count + 1);
                    }
                    Some(left)
                }
                _ => {
                    self.push(Node::left(1));
                    Some(start)
                }
            };
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let at = self.doc.nodes.len();
        self.push(Node::object());
        let mut len = 0usize;
        while !self.doc.exceeded {
            let Some(Key(key)) = map.next_key()? else {
                return self.close(at, len);
            };
            if self.place.skips(&key) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let place = self.place.member(&key);
            self.push_str(key)?;
            map.next_value_seed(Builder { doc: &mut *self.doc, place, budget: self.budget })?;
            len += 1;
        }
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

impl<P> Builder<'_, '_, '_, P> {
    /// Closes the array or object at `at` (unless the budget ran out, which left nothing to close).
    fn close<E: de::Error>(self, at: usize, len: usize) -> Result<(), E> {
        if self.doc.exceeded {
            return Ok(());
        }
        self.doc.close(at, len).ok_or_else(too_many)
    }
}

/// A member's key, borrowed from the text without escapes (a bare `Cow<str>` is always copied).
#[derive(serde::Deserialize)]
#[serde(transparent)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);
