//! What the policy says to people: violation messages and notices.
//!
//! Rules and settings write the body of a message; [`Message::new`] is the
//! one place that puts `gpu-policy:` in front of it, so that every line a
//! user reads says where it comes from.

use std::fmt;
use std::ops::Deref;

use serde::{Serialize, Serializer};

/// A message for people: `gpu-policy: ` followed by a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message(String);

impl Message {
    /// What every message starts with.
    pub const PREFIX: &str = "gpu-policy: ";

    pub fn new(body: impl fmt::Display) -> Self {
        Message(format!("{}{body}", Self::PREFIX))
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

impl PartialEq<str> for Message {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Message {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Message {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// What kind of input the policy ignored, what it could not do, or what it
/// allows but a person should know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoticeKind {
    /// A namespace or pod annotation that may only tighten the policy was
    /// unreadable or would loosen it.
    IgnoredAnnotation,
    /// An allowlist entry matched by name, but the cluster does not confirm
    /// the owner the pod names: no exemption.
    UnverifiedOwner,
    /// The RuntimeClass to set does not exist in the cluster, so none is set.
    MissingRuntimeClass,
    /// No node's GPUs meet the pod's minimum compute capability.
    UnmetComputeCapability,
    /// A DRA claim a container uses cannot be resolved: its containers are
    /// treated as holding no GPU.
    UnresolvedClaim,
    /// A GPU container is privileged: it sees every card of the node, not
    /// only the ones it was given.
    PrivilegedGpuContainer,
    /// An image's registry gave no usable answer in time (it failed, timed
    /// out, or its config is unreadable): the image table applies to it.
    ImageTableFallback,
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
        Notice {
            kind,
            message: Message::new(body),
        }
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.message.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_added_once_and_the_body_kept() {
        let message = Message::new("runtimeClassName \"kata\" is not a GPU runtime class");
        assert_eq!(
            message.as_str(),
            "gpu-policy: runtimeClassName \"kata\" is not a GPU runtime class"
        );
        assert_eq!(
            message.body(),
            "runtimeClassName \"kata\" is not a GPU runtime class"
        );
        assert_eq!(
            serde_json::to_value(&message).ok(),
            Some(serde_json::Value::String(message.to_string()))
        );
    }
}
