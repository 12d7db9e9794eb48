//! The document's nodes, and the handles that read them ([`Json`], [`Object`], [`Array`]).
//!
//! A string the text holds as it is, and an integer of up to 60 bits, are inside their node; the
//! rare others (a string with escapes, a string of a `serde_json::Value`, a float or a large
//! integer) are in side tables it indexes. So the smallest values of a text cost no more than four
//! times their bytes (`1,`: one 8-byte node), where a node that held a `serde_json::Number` or a
//! `&str` took 24 bytes.

use std::borrow::Cow;

use serde_json::Number;

/// One value of a document, packed into a word: a 4-bit tag above 60 bits
/// of payload ([`Node::unpack`] reads it as a [`Unpacked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Node(u64);

/// A node as what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unpacked {
    Null,
    /// Elements of an array that the reader left out ([`super::Unread::keeps`]): `count` of them in
    /// a row, each of which keeps its place so that the indexes of the others stay as written.
    Left {
        count: u32,
    },
    Bool(bool),
    /// An integer that fits the node.
    Int(i64),
    /// Any other number: its index in the document's numbers.
    Number(u32),
    /// A string as the text holds it, at `at` for `len` bytes.
    Str {
        at: u32,
        len: u32,
    },
    /// A string the text does not hold as it is (it has escapes, or the
    /// document was made from a value): its index in the strings.
    Text(u32),
    /// An array: its elements follow it, up to the node at `end`.
    Array {
        len: u32,
        end: u32,
    },
    /// An object: its members follow it, each a key (a string node) and
    /// then the value, up to the node at `end`.
    Object {
        len: u32,
        end: u32,
    },
}

const TAG_SHIFT: u32 = 60;
const HALF_BITS: u32 = 30;
const HALF: u64 = (1 << HALF_BITS) - 1;
const PAYLOAD: u64 = (1 << TAG_SHIFT) - 1;

/// The largest count, offset or length a node holds: a document has fewer
/// than this many nodes, and strings at it in its text are kept aside.
pub(super) const MAX_HALF: usize = HALF as usize;

/// The integers a node holds: 60 bits, two's complement.
const INT_MIN: i64 = -(1 << (TAG_SHIFT - 1));
const INT_MAX: i64 = (1 << (TAG_SHIFT - 1)) - 1;

mod tag {
    pub const NULL: u64 = 0;
    pub const LEFT: u64 = 1;
    pub const BOOL: u64 = 2;
    pub const INT: u64 = 3;
    pub const NUMBER: u64 = 4;
    pub const STR: u64 = 5;
    pub const TEXT: u64 = 6;
    pub const ARRAY: u64 = 7;
    pub const OBJECT: u64 = 8;
}

impl Node {
    pub(super) const NULL: Node = Node(tag::NULL);

    fn pack(tag: u64, payload: u64) -> Node {
        Node((tag << TAG_SHIFT) | (payload & PAYLOAD))
    }

    fn halves(tag: u64, high: u32, low: u32) -> Node {
        Node::pack(tag, ((u64::from(high) & HALF) << HALF_BITS) | (u64::from(low) & HALF))
    }

    pub(super) fn left(count: u32) -> Node {
        Node::pack(tag::LEFT, u64::from(count))
    }

    pub(super) fn bool(value: bool) -> Node {
        Node::pack(tag::BOOL, u64::from(value))
    }

    /// The integer, when it fits a node.
    pub(super) fn int(value: i64) -> Option<Node> {
        (INT_MIN..=INT_MAX).contains(&value).then(|| Node::pack(tag::INT, value as u64))
    }

    pub(super) fn number(index: u32) -> Node {
        Node::pack(tag::NUMBER, u64::from(index))
    }

    /// A string of the text; `at` and `len` at most [`MAX_HALF`].
    pub(super) fn str(at: u32, len: u32) -> Node {
        Node::halves(tag::STR, at, len)
    }

    pub(super) fn text(index: u32) -> Node {
        Node::pack(tag::TEXT, u64::from(index))
    }

    /// An array or object not yet closed ([`Document::close`]).
    pub(super) fn array() -> Node {
        Node::pack(tag::ARRAY, 0)
    }

    pub(super) fn object() -> Node {
        Node::pack(tag::OBJECT, 0)
    }

    pub(super) fn unpack(self) -> Unpacked {
        let payload = self.0 & PAYLOAD;
        // Each half is 30 bits, so it fits a u32.
        let high = ((payload >> HALF_BITS) & HALF) as u32;
        let low = (payload & HALF) as u32;
        let index = payload as u32;
        match self.0 >> TAG_SHIFT {
            tag::LEFT => Unpacked::Left { count: index },
            tag::BOOL => Unpacked::Bool(payload != 0),
            // Sign-extended from 60 bits.
            tag::INT => Unpacked::Int(((payload << 4) as i64) >> 4),
            tag::NUMBER => Unpacked::Number(index),
            tag::STR => Unpacked::Str { at: high, len: low },
            tag::TEXT => Unpacked::Text(index),
            tag::ARRAY => Unpacked::Array { len: low, end: high },
            tag::OBJECT => Unpacked::Object { len: low, end: high },
            _ => Unpacked::Null,
        }
    }
}

/// A JSON document: the values of a text (or of a `serde_json::Value`).
#[derive(Clone, Default)]
pub struct Document<'a> {
    /// The text the [`Unpacked::Str`] nodes point into.
    pub(super) text: &'a str,
    pub(super) nodes: Vec<Node>,
    pub(super) strings: Vec<Cow<'a, str>>,
    pub(super) numbers: Vec<Number>,
    /// Reading it ran out of its budget ([`super::Budget`]).
    pub(super) exceeded: bool,
}

impl<'a> Document<'a> {
    /// The root value. A document always has one.
    pub fn root(&self) -> Json<'_> {
        Json { doc: self, at: 0 }
    }

    /// How many nodes it holds (each one word).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Sets the length and end (the node count now) of the array or object at `at`. None when they
    /// do not fit a node: 2^30 values or more.
    pub(super) fn close(&mut self, at: usize, len: usize) -> Option<()> {
        let end = self.nodes.len();
        if len > MAX_HALF || end > MAX_HALF {
            return None;
        }
        let (len, end) = (len as u32, end as u32);
        let node = self.nodes.get_mut(at)?;
        *node = match node.unpack() {
            Unpacked::Array { .. } => Node::halves(tag::ARRAY, end, len),
            _ => Node::halves(tag::OBJECT, end, len),
        };
        Some(())
    }

    pub(super) fn node(&self, at: usize) -> Unpacked {
        // The handles only ever point at nodes that exist; a document
        // that is empty (only while it is being read) reads as null.
        self.nodes.get(at).map_or(Unpacked::Null, |node| node.unpack())
    }

    fn str_at(&self, at: usize) -> Option<&str> {
        match self.node(at) {
            Unpacked::Str { at, len } => {
                let start = at as usize;
                self.text.get(start..start + len as usize)
            }
            Unpacked::Text(index) => self.strings.get(index as usize).map(|s| &**s),
            _ => None,
        }
    }

    fn number_at(&self, at: usize) -> Option<Number> {
        match self.node(at) {
            Unpacked::Int(value) => Some(Number::from(value)),
            Unpacked::Number(index) => self.numbers.get(index as usize).cloned(),
            _ => None,
        }
    }

    /// Whether the string at `at` is `key`: compared as bytes, without making a `&str` of the text
    /// first (asked of every member of an object a field is looked up in).
    fn is_key(&self, at: usize, key: &str) -> bool {
        match self.node(at) {
            Unpacked::Str { at, len } => {
                len as usize == key.len() && {
                    let start = at as usize;
                    self.text.as_bytes().get(start..start + key.len()) == Some(key.as_bytes())
                }
            }
            Unpacked::Text(index) => self.strings.get(index as usize).is_some_and(|s| s == key),
            _ => false,
        }
    }

    /// The node after the value at `at` and everything inside it.
    fn after(&self, at: usize) -> usize {
        match self.node(at) {
            Unpacked::Array { end, .. } | Unpacked::Object { end, .. } => end as usize,
            _ => at + 1,
        }
    }
}

/// One value of a [`Document`].
#[derive(Clone, Copy)]
pub struct Json<'a> {
    doc: &'a Document<'a>,
    at: usize,
}

/// What kind of value a [`Json`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl<'a> Json<'a> {
    fn node(self) -> Unpacked {
        self.doc.node(self.at)
    }

    pub fn kind(self) -> Kind {
        match self.node() {
            Unpacked::Null | Unpacked::Left { .. } => Kind::Null,
            Unpacked::Bool(_) => Kind::Bool,
            Unpacked::Int(_) | Unpacked::Number(_) => Kind::Number,
            Unpacked::Str { .. } | Unpacked::Text(_) => Kind::String,
            Unpacked::Array { .. } => Kind::Array,
            Unpacked::Object { .. } => Kind::Object,
        }
    }

    /// The kind as messages name it: "a string", "a list", ...
    pub fn type_name(self) -> &'static str {
        match self.kind() {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "a list",
            Kind::Object => "an object",
        }
    }

    pub fn is_null(self) -> bool {
        matches!(self.node(), Unpacked::Null | Unpacked::Left { .. })
    }

    /// An array element the reader left out: it reads as null.
    pub fn is_left_out(self) -> bool {
        matches!(self.node(), Unpacked::Left { .. })
    }

    pub(super) fn at(doc: &'a Document<'a>, at: usize) -> Self {
        Json { doc, at }
    }

    pub fn is_string(self) -> bool {
        self.kind() == Kind::String
    }

    pub fn is_object(self) -> bool {
        self.kind() == Kind::Object
    }

    pub fn is_array(self) -> bool {
        self.kind() == Kind::Array
    }

    pub fn as_bool(self) -> Option<bool> {
        match self.node() {
            Unpacked::Bool(flag) => Some(flag),
            _ => None,
        }
    }

    pub fn as_str(self) -> Option<&'a str> {
        self.doc.str_at(self.at)
    }

    /// The number (a copy: most are held in their node).
    pub fn as_number(self) -> Option<Number> {
        self.doc.number_at(self.at)
    }

    pub fn as_u64(self) -> Option<u64> {
        match self.node() {
            Unpacked::Int(value) => u64::try_from(value).ok(),
            _ => self.as_number()?.as_u64(),
        }
    }

    pub fn as_i64(self) -> Option<i64> {
        match self.node() {
            Unpacked::Int(value) => Some(value),
            _ => self.as_number()?.as_i64(),
        }
    }

    pub fn as_f64(self) -> Option<f64> {
        self.as_number()?.as_f64()
    }

    pub fn as_object(self) -> Option<Object<'a>> {
        match self.node() {
            Unpacked::Object { .. } => Some(Object(self)),
            _ => None,
        }
    }

    pub fn as_array(self) -> Option<Array<'a>> {
        match self.node() {
            Unpacked::Array { .. } => Some(Array(self)),
            _ => None,
        }
    }

    /// The value of `key`, when this is an object that has it.
    pub fn get(self, key: &str) -> Option<Json<'a>> {
        self.as_object()?.get(key)
    }

    /// The value at a JSON pointer (RFC 6901), as `serde_json::Value::pointer`.
    pub fn pointer(self, pointer: &str) -> Option<Json<'a>> {
        let pointer = json_patch::jsonptr::Pointer::parse(pointer).ok()?;
        let mut value = self;
        for token in pointer.tokens() {
            let token = token.decoded();
            value = match value.kind() {
                Kind::Object => value.get(&token)?,
                Kind::Array => {
                    // As serde_json: decimal digits only, no leading zero.
                    if token.len() > 1 && token.starts_with('0') {
                        return None;
                    }
                    let index = token.parse::<usize>().ok()?;
                    value.as_array()?.get(index)?
                }
                _ => return None,
            };
        }
        Some(value)
    }
}

/// A JSON object of a [`Document`].
#[derive(Clone, Copy)]
pub struct Object<'a>(Json<'a>);

impl<'a> Object<'a> {
    /// The object as a value.
    pub fn as_json(self) -> Json<'a> {
        self.0
    }

    /// How many members it has (as written: a repeated key counts twice).
    pub fn len(self) -> usize {
        match self.0.node() {
            Unpacked::Object { len, .. } => len as usize,
            _ => 0,
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Its members in the order of the text.
    pub fn iter(self) -> Members<'a> {
        let end = self.0.doc.after(self.0.at);
        Members { doc: self.0.doc, next: self.0.at + 1, end }
    }

    /// The value of `key`: of two members with that key, the last.
    pub fn get(self, key: &str) -> Option<Json<'a>> {
        // Every member is looked at, for the last of a repeated key.
        let doc = self.0.doc;
        let end = doc.after(self.0.at);
        let mut at = self.0.at + 1;
        let mut found = None;
        while at < end {
            if doc.is_key(at, key) {
                found = Some(at + 1);
            }
            at = doc.after(at + 1);
        }
        found.map(|at| Json { doc, at })
    }

    pub fn contains_key(self, key: &str) -> bool {
        self.iter().any(|(name, _)| name == key)
    }

    pub fn keys(self) -> impl Iterator<Item = &'a str> {
        self.iter().map(|(key, _)| key)
    }
}

impl<'a> IntoIterator for Object<'a> {
    type Item = (&'a str, Json<'a>);
    type IntoIter = Members<'a>;

    fn into_iter(self) -> Members<'a> {
        self.iter()
    }
}

/// The members of an [`Object`].
#[derive(Clone)]
pub struct Members<'a> {
    doc: &'a Document<'a>,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, Json<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let key = self.doc.str_at(self.next).unwrap_or("");
        let value = Json { doc: self.doc, at: self.next + 1 };
        self.next = self.doc.after(self.next + 1);
        Some((key, value))
    }
}

/// A JSON array of a [`Document`].
#[derive(Clone, Copy)]
pub struct Array<'a>(Json<'a>);

impl<'a> Array<'a> {
    /// The array as a value.
    pub fn as_json(self) -> Json<'a> {
        self.0
    }

    pub fn len(self) -> usize {
        match self.0.node() {
            Unpacked::Array { len, .. } => len as usize,
            _ => 0,
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Its elements in order.
    pub fn iter(self) -> Elements<'a> {
        let end = self.0.doc.after(self.0.at);
        Elements { doc: self.0.doc, next: self.0.at + 1, end, left: self.len(), repeated: 0 }
    }

    pub fn get(self, index: usize) -> Option<Json<'a>> {
        self.iter().nth(index)
    }
}

impl<'a> IntoIterator for Array<'a> {
    type Item = Json<'a>;
    type IntoIter = Elements<'a>;

    fn into_iter(self) -> Elements<'a> {
        self.iter()
    }
}

/// The elements of an [`Array`].
#[derive(Clone)]
pub struct Elements<'a> {
    doc: &'a Document<'a>,
    next: usize,
    end: usize,
    left: usize,
    /// How many elements of the run of left-out ones at `next` were handed out already.
    repeated: u32,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Json<'a>;

    fn next(&mut self) -> Option<Json<'a>> {
        if self.next >= self.end {
            return None;
        }
        let value = Json { doc: self.doc, at: self.next };
        match self.doc.node(self.next) {
            Unpacked::Left { count } if self.repeated + 1 < count => self.repeated += 1,
            _ => {
                self.repeated = 0;
                self.next = self.doc.after(self.next);
            }
        }
        self.left = self.left.saturating_sub(1);
        Some(value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Elements<'_> {}
