//! What the rules' stable identifiers ([`RuleId`], declared by the
//! registry) read as and write as, and [`RuleSet`].

use std::fmt;

use serde::{Serialize, Serializer};

use super::rules::RuleId;

impl RuleId {
    pub fn parse(text: &str) -> Option<RuleId> {
        Self::ALL.iter().copied().find(|rule| rule.as_str() == text)
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RuleId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A set of rules in one word, iterating in [`RuleId::ALL`] order: the rules that changed or were
/// violated are gathered on every request, and a `BTreeSet` cost an allocation for each.
pub type RuleSet = enumset::EnumSet<RuleId>;

#[cfg(test)]
mod tests;
