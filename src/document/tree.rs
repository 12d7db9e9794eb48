//! The document itself: its nodes, and the handles that read them
//! ([`Json`], [`Object`], [`Array`]).

use serde_json::Number;

/// One value of a document.
#[derive(Debug, Clone)]
pub(super) enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    /// A string as the text holds it.
    Str(&'a str),
    /// A string the text escapes: its index in the document's own strings.
    Unescaped(u32),
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
    /// An element of an array that the reader left out ([`super::Unread`]):
    /// it keeps its place, so the indexes of the others stay as written.
    Left,
}

/// A JSON document: the values of a text (or of a `serde_json::Value`),
/// borrowed where they can be.
#[derive(Clone, Default)]
pub struct Document<'a> {
    pub(super) nodes: Vec<Node<'a>>,
    pub(super) unescaped: Vec<Box<str>>,
}

impl<'a> Document<'a> {
    /// The root value. A document always has one.
    pub fn root(&self) -> Json<'_> {
        Json { doc: self, at: 0 }
    }

    /// Sets the length and end (the node count now) of the array or
    /// object at `at`, the two building ways (text, value) share. None
    /// when they do not fit a node: 2^32 values or more.
    pub(super) fn close(&mut self, at: usize, len: usize) -> Option<()> {
        let len = u32::try_from(len).ok()?;
        let end = u32::try_from(self.nodes.len()).ok()?;
        let node = self.nodes.get_mut(at)?;
        *node = match node {
            Node::Array { .. } => Node::Array { len, end },
            _ => Node::Object { len, end },
        };
        Some(())
    }

    pub(super) fn node(&self, at: usize) -> &Node<'a> {
        // The handles only ever point at nodes that exist; a document
        // that is empty (only while it is being read) reads as null.
        self.nodes.get(at).unwrap_or(&Node::Null)
    }

    fn str_at(&self, at: usize) -> Option<&str> {
        match self.node(at) {
            Node::Str(text) => Some(text),
            Node::Unescaped(index) => self.unescaped.get(*index as usize).map(|s| &**s),
            _ => None,
        }
    }

    /// The node after the value at `at` and everything inside it.
    fn after(&self, at: usize) -> usize {
        match self.node(at) {
            Node::Array { end, .. } | Node::Object { end, .. } => *end as usize,
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
    fn node(self) -> &'a Node<'a> {
        self.doc.node(self.at)
    }

    pub fn kind(self) -> Kind {
        match self.node() {
            Node::Null | Node::Left => Kind::Null,
            Node::Bool(_) => Kind::Bool,
            Node::Number(_) => Kind::Number,
            Node::Str(_) | Node::Unescaped(_) => Kind::String,
            Node::Array { .. } => Kind::Array,
            Node::Object { .. } => Kind::Object,
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
        matches!(self.node(), Node::Null | Node::Left)
    }

    /// An array element the reader left out: it reads as null.
    pub fn is_left_out(self) -> bool {
        matches!(self.node(), Node::Left)
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
            Node::Bool(flag) => Some(*flag),
            _ => None,
        }
    }

    pub fn as_str(self) -> Option<&'a str> {
        self.doc.str_at(self.at)
    }

    pub fn as_number(self) -> Option<&'a Number> {
        match self.node() {
            Node::Number(number) => Some(number),
            _ => None,
        }
    }

    pub fn as_u64(self) -> Option<u64> {
        self.as_number()?.as_u64()
    }

    pub fn as_i64(self) -> Option<i64> {
        self.as_number()?.as_i64()
    }

    pub fn as_f64(self) -> Option<f64> {
        self.as_number()?.as_f64()
    }

    pub fn as_object(self) -> Option<Object<'a>> {
        match self.node() {
            Node::Object { .. } => Some(Object(self)),
            _ => None,
        }
    }

    pub fn as_array(self) -> Option<Array<'a>> {
        match self.node() {
            Node::Array { .. } => Some(Array(self)),
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
            Node::Object { len, .. } => *len as usize,
            _ => 0,
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Its members in the order of the text.
    pub fn iter(self) -> Members<'a> {
        let end = self.0.doc.after(self.0.at);
        Members {
            doc: self.0.doc,
            next: self.0.at + 1,
            end,
        }
    }

    /// The value of `key`: of two members with that key, the last.
    pub fn get(self, key: &str) -> Option<Json<'a>> {
        // Every member is looked at, for the last of a repeated key.
        let doc = self.0.doc;
        let end = doc.after(self.0.at);
        let mut at = self.0.at + 1;
        let mut found = None;
        while at < end {
            if doc.str_at(at) == Some(key) {
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
        let value = Json {
            doc: self.doc,
            at: self.next + 1,
        };
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
            Node::Array { len, .. } => *len as usize,
            _ => 0,
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Its elements in order.
    pub fn iter(self) -> Elements<'a> {
        let end = self.0.doc.after(self.0.at);
        Elements {
            doc: self.0.doc,
            next: self.0.at + 1,
            end,
            left: self.len(),
        }
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
}

impl<'a> Iterator for Elements<'a> {
    type Item = Json<'a>;

    fn next(&mut self) -> Option<Json<'a>> {
        if self.next >= self.end {
            return None;
        }
        let value = Json {
            doc: self.doc,
            at: self.next,
        };
        self.next = self.doc.after(self.next);
        self.left = self.left.saturating_sub(1);
        Some(value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Elements<'_> {}
