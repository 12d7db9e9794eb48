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

/// A set of rules that iterates in the order of [`RuleId::ALL`], as a
/// `BTreeSet<RuleId>` would, in one word: the rules that changed or
/// were violated are gathered on every request, and a `BTreeSet` cost an
/// allocation for each of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RuleSet(u32);

// One bit per rule.
const _: () = assert!(RuleId::ALL.len() <= u32::BITS as usize);

impl RuleSet {
    pub const fn new() -> Self {
        Self(0)
    }

    fn bit(rule: RuleId) -> u32 {
        1 << rule as u32
    }

    /// Adds `rule`; whether it was not there.
    pub fn insert(&mut self, rule: RuleId) -> bool {
        let absent = !self.contains(rule);
        self.0 |= Self::bit(rule);
        absent
    }

    pub fn contains(&self, rule: RuleId) -> bool {
        self.0 & Self::bit(rule) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    pub fn len(&self) -> usize {
        self.0.count_ones() as usize
    }

    /// The rules, in the order of [`RuleId::ALL`].
    pub fn iter(&self) -> Rules {
        Rules {
            set: *self,
            next: 0,
        }
    }
}

/// The rules of a [`RuleSet`], in the order of [`RuleId::ALL`].
#[derive(Debug, Clone)]
pub struct Rules {
    set: RuleSet,
    next: usize,
}

impl Iterator for Rules {
    type Item = RuleId;

    fn next(&mut self) -> Option<RuleId> {
        while let Some(&rule) = RuleId::ALL.get(self.next) {
            self.next += 1;
            if self.set.contains(rule) {
                return Some(rule);
            }
        }
        None
    }
}

impl IntoIterator for &RuleSet {
    type Item = RuleId;
    type IntoIter = Rules;

    fn into_iter(self) -> Rules {
        self.iter()
    }
}

impl FromIterator<RuleId> for RuleSet {
    fn from_iter<I: IntoIterator<Item = RuleId>>(rules: I) -> Self {
        let mut set = Self::new();
        set.extend(rules);
        set
    }
}

impl Extend<RuleId> for RuleSet {
    fn extend<I: IntoIterator<Item = RuleId>>(&mut self, rules: I) {
        for rule in rules {
            self.insert(rule);
        }
    }
}

impl<'a> Extend<&'a RuleId> for RuleSet {
    fn extend<I: IntoIterator<Item = &'a RuleId>>(&mut self, rules: I) {
        self.extend(rules.into_iter().copied());
    }
}

#[cfg(test)]
mod tests;
