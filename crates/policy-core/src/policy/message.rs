//! What the policy says to people: violation messages and notices.
//! [`Message::new`] is the one place that puts `gpu-policy: ` in front of a
//! body, so every line a user reads says where it comes from.

use std::fmt::{self, Write};
use std::ops::Deref;

use serde::{Serialize, Serializer};

use crate::settings::NamespaceSettings;

/// A message for people: `gpu-policy: ` followed by a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message(String);

impl Message {
    /// What every message starts with.
    pub const PREFIX: &str = "gpu-policy: ";

    /// The longest body a message keeps, in bytes; a longer one is cut at a character boundary and
    /// ends with `…`. The longest message of the golden files is some 200 bytes.
    pub const MAX_BODY_BYTES: usize = 1024;

    pub fn new(body: impl fmt::Display) -> Self {
        let mut text = Bounded::new(Self::PREFIX.len() + Self::MAX_BODY_BYTES);
        let _ = text.write_str(Self::PREFIX);
        let _ = write!(text, "{body}");
        Message(text.finish())
    }

    /// The whole message, prefix included.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The message without the prefix, for lines that gather several
    /// messages after one prefix (`gpu-policy: [rule] a; [rule] b`).
    pub fn body(&self) -> &str {
        &self.0[Self::PREFIX.len()..]
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl Deref for Message {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Message> for String {
    fn from(message: Message) -> String {
        message.0
    }
}

/// Compared with text: `str`, `&str`, `String`.
impl<T: AsRef<str> + ?Sized> PartialEq<T> for Message {
    fn eq(&self, other: &T) -> bool {
        self.0 == other.as_ref()
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// The words of one message with named slots, written once for both backends: a rule fills the
/// slots with values ([`Self::format`]), the admission policies with CEL
/// (`policy::rules::cel_text::message`). A slot is `{name}`, the name lowercase letters and `_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageTemplate(&'static str);

/// A run of a [`MessageTemplate`]: words, or the name of a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    Words(&'static str),
    Slot(&'static str),
}

impl MessageTemplate {
    pub const fn new(text: &'static str) -> Self {
        MessageTemplate(text)
    }

    /// The template as written, slots and all.
    pub fn text(&self) -> &'static str {
        self.0
    }

    /// The words and slots, in order.
    pub fn pieces(&self) -> Vec<Piece> {
        let text = self.0;
        let mut pieces = Vec::new();
        // `start`: the first byte not yet in a piece; `at`: where to look.
        let (mut start, mut at) = (0, 0);
        while let Some(open) = text[at..].find('{').map(|i| at + i) {
            let name = text[open + 1..]
                .find('}')
                .map(|len| &text[open + 1..open + 1 + len])
                .filter(|name| {
                    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                });
            match name {
                Some(name) => {
                    if open > start {
                        pieces.push(Piece::Words(&text[start..open]));
                    }
                    pieces.push(Piece::Slot(name));
                    start = open + name.len() + 2;
                    at = start;
                }
                None => at = open + 1,
            }
        }
        if start < text.len() {
            pieces.push(Piece::Words(&text[start..]));
        }
        pieces
    }

    /// The names of the slots, each once, in order.
    pub fn slots(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        for piece in self.pieces() {
            if let Piece::Slot(name) = piece
                && !names.contains(&name)
            {
                names.push(name);
            }
        }
        names
    }

    /// The message body with each slot filled by its value in `values`. A
    /// slot without a value stays as written (`{name}`), for a test to see.
    pub fn format(&self, values: &[(&str, &dyn fmt::Display)]) -> String {
        let mut out = String::with_capacity(self.0.len() + 32);
        for piece in self.pieces() {
            match piece {
                Piece::Words(words) => out.push_str(words),
                Piece::Slot(name) => match values.iter().find(|(slot, _)| *slot == name) {
                    Some((_, value)) => {
                        use fmt::Write;
                        let _ = write!(out, "{value}");
                    }
                    None => {
                        out.push('{');
                        out.push_str(name);
                        out.push('}');
                    }
                },
            }
        }
        out
    }
}

/// Joins the messages of one kind the webhook reports apart, as a policy's one message does.
pub const SEPARATOR: &str = "; ";

/// A word that agrees with a count: `container` or `containers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Noun {
    pub one: &'static str,
    pub many: &'static str,
}

/// Between the quoted names of a [`Noun::list`].
pub const LIST_SEPARATOR: &str = ", ";

/// `container "a"`, `containers "a", "b"`: how messages name containers.
pub const CONTAINER: Noun = Noun::new("container", "containers");

impl Noun {
    pub const fn new(one: &'static str, many: &'static str) -> Self {
        Noun { one, many }
    }

    /// The word for `count` things.
    pub fn of(&self, count: usize) -> &'static str {
        if count == 1 { self.one } else { self.many }
    }

    /// The word and the names, quoted ([`quoted_list`]).
    pub fn list<'s>(&self, names: impl IntoIterator<Item = &'s str>) -> String {
        quoted_list(self.one, self.many, names)
    }
}

/// What input the policy ignored, what it could not do, or what it allows but a person should know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoticeKind {
    /// A namespace or pod annotation that may only tighten the policy is unreadable or looser.
    IgnoredAnnotation,
    /// An allowlist entry matched by name, but the cluster does not confirm the owner: not exempt.
    UnverifiedOwner,
    /// The RuntimeClass to set does not exist in the cluster, so none is set.
    MissingRuntimeClass,
    /// No node's GPUs meet the pod's minimum compute capability or carry a GPU product its
    /// namespace allows, or no GPU node has the labels R4 requires: the pod will stay Pending.
    UnmetComputeCapability,
    /// A floor of R4, or the namespace's GPU products, is not written because no GPU node carries
    /// the labels it would be on (GPU Feature Discovery not deployed): the pod may land on a card,
    /// driver or product it should not use.
    UnenforcedFloor,
    /// A DRA claim a container uses cannot be resolved: its containers count as holding no GPU.
    UnresolvedClaim,
    /// A GPU container is privileged: it sees every card of the node, not only those it was given.
    PrivilegedGpuContainer,
    /// An image's registry gave no usable answer in time (it failed, timed
    /// out, or its config is unreadable): the image table applies to it.
    ImageTableFallback,
    /// A claim the pod only references does not guarantee, by its
    /// selectors, the compute and driver floors the pod's images need.
    UnguaranteedClaimFloor,
    /// A claim the pod only references does not carry, in every GPU request, the selector of the
    /// GPU products its namespace allows.
    UnguaranteedClaimProducts,
    /// The pod a ResourceClaim is made for is unreadable: the claim is admitted without its floors.
    UnreadClaimOwner,
    /// Some claims of the pod a ResourceClaim is made for could not be counted with it against
    /// `maxPerPod` (not found yet, not readable), or the pod itself could not be read.
    UncountedPodClaims,
    /// A pod that asks for no GPU tolerates a taint of `gpuTolerations`: it could be scheduled on
    /// a GPU node and keep its GPUs from GPU pods (denied instead with `denyCpuPodsOnGpuNodes`).
    GpuTaintTolerated,
}

/// Something the policy ignored or could not do, for the person who
/// submitted the object. Notices never deny: they become warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub kind: NoticeKind,
    pub message: Message,
}

impl Notice {
    pub fn new(kind: NoticeKind, body: impl fmt::Display) -> Self {
        Notice { kind, message: Message::new(body) }
    }

    /// The namespace annotations the settings ignored, as notices.
    pub fn of_ignored(namespace: &NamespaceSettings) -> Vec<Notice> {
        namespace
            .ignored
            .iter()
            .map(|ignored| Notice::new(NoticeKind::IgnoredAnnotation, ignored))
            .collect()
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.message.fmt(f)
    }
}

/// How many names a list names; the rest are counted (`and 99,990 more`). Ten fill a line.
pub const LISTED_NAMES: usize = 10;

/// The longest name a list quotes, in bytes: a container name is a DNS label of 63 at most.
pub const MAX_LISTED_NAME_BYTES: usize = 63;

/// `<singular> "a"` or `<plural> "a", "b"`: at most [`LISTED_NAMES`]
/// names, each cut to [`MAX_LISTED_NAME_BYTES`], then how many more there
/// are (`and 1,234 more`). The noun agrees with the whole count.
pub fn quoted_list<'s>(
    singular: &str,
    plural: &str,
    names: impl IntoIterator<Item = &'s str>,
) -> String {
    let mut names = names.into_iter();
    let listed: Vec<&str> = names.by_ref().take(LISTED_NAMES).collect();
    let more = names.count();
    let noun = if listed.len() + more == 1 { singular } else { plural };
    let room =
        listed.iter().map(|name| name.len().min(MAX_LISTED_NAME_BYTES + 3) + 4).sum::<usize>();
    let mut phrase = String::with_capacity(noun.len() + room);
    phrase.push_str(noun);
    if listed.is_empty() {
        phrase.push(' ');
    }
    for (at, name) in listed.iter().enumerate() {
        phrase.push_str(if at == 0 { " " } else { LIST_SEPARATOR });
        let kept = prefix_within(name, MAX_LISTED_NAME_BYTES);
        if kept.len() < name.len() {
            let _ = write!(phrase, "{:?}", [kept, "…"].concat());
        } else {
            let _ = write!(phrase, "{name:?}");
        }
    }
    if more > 0 {
        phrase.push(' ');
        phrase.push_str(&and_more(more));
    }
    phrase
}

/// `and 1,234 more`: what a cut list or text says of the rest.
pub fn and_more(count: usize) -> String {
    format!("and {} more", thousands(count))
}

/// `1234567` as `1,234,567`.
pub fn thousands(count: usize) -> String {
    let digits = count.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn prefix_within(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let end = (0..=max).rev().find(|&end| text.is_char_boundary(end)).unwrap_or(0);
    text.get(..end).unwrap_or_default()
}

/// A string written through `fmt::Write` that keeps at most `room` bytes
/// (and `…` in place of the rest); its writes never fail.
pub struct Bounded {
    text: String,
    room: usize,
    cut: bool,
}

impl Bounded {
    pub fn new(room: usize) -> Self {
        Bounded { text: String::new(), room, cut: false }
    }

    /// The text kept, with `…` when some was left out.
    pub fn finish(mut self) -> String {
        if self.cut {
            self.text.push('…');
        }
        self.text
    }
}

impl Write for Bounded {
    fn write_str(&mut self, piece: &str) -> fmt::Result {
        let left = self.room.saturating_sub(self.text.len());
        let kept = prefix_within(piece, left);
        self.text.push_str(kept);
        self.cut |= kept.len() < piece.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
