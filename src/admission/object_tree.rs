//! The object of a review as a [`Document`] that borrows the body, read in
//! the same pass that parses the body, without the fields that no rule
//! reads.
//!
//! A pod's containers carry much that no rule looks at: probes, commands
//! and arguments, ports. Those subtrees are parsed (the body must be valid
//! JSON) but not kept. Everything else is kept as the body has it.
//!
//! Leaving fields out of the document cannot change a patch: it is never
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

use serde::de::Deserializer;

use crate::document::{self, Document, Json, Unread};
use crate::policy::READ_ENV_NAMES;

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
pub enum Place {
    /// The object itself.
    Root,
    /// The value of a `metadata` key.
    Metadata,
    /// The value of a `containers`, `initContainers` or
    /// `ephemeralContainers` key.
    ContainerList,
    /// An element of a container list.
    Container,
    /// A container's `env`.
    EnvList,
    /// An element of a container's `env`.
    EnvEntry,
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
            Place::ContainerList | Place::EnvList | Place::EnvEntry | Place::Other => {
                return false;
            }
        };
        unread.contains(&key)
    }
}

/// Reads an object into its document, without the fields no rule reads.
pub fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Document<'de>, D::Error> {
    document::read(deserializer, Place::Root)
}

impl Unread for Place {
    fn member(self, key: &str) -> Place {
        match (self, key) {
            (Place::Container, "env") => Place::EnvList,
            _ => Place::of_key(key),
        }
    }

    fn element(self) -> Place {
        match self {
            Place::ContainerList => Place::Container,
            Place::EnvList => Place::EnvEntry,
            _ => Place::Other,
        }
    }

    /// An env entry is kept when it names a variable a rule reads
    /// ([`READ_ENV_NAMES`]), or is not a well-formed entry (the rules
    /// report it): a container may carry hundreds of others.
    fn keeps(self, element: Json<'_>) -> bool {
        if self != Place::EnvEntry {
            return true;
        }
        match element.get("name").and_then(Json::as_str) {
            Some(name) if element.is_object() => READ_ENV_NAMES.contains(&name),
            _ => true,
        }
    }

    fn skips(self, key: &str) -> bool {
        Place::skips(self, key)
    }
}

#[cfg(test)]
mod tests;
