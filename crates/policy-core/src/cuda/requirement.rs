//! CUDA versions, the NVIDIA Container Toolkit's requirement language
//! (`NVIDIA_REQUIRE_CUDA`: alternatives ORed, each `name op value` constraints ANDed), and
//! the driver floor ([`DriverFloor`]) a requirement puts on a node's GFD labels. What is
//! kept and what dropped (`brand`, `arch`, `cuda>=9.0`), and why: docs/policy.md,
//! "R4 compute-affinity", "The driver floor".

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

use crate::cuda::numbers;

/// GFD's labels for the CUDA version the driver supports and the driver version.
pub const RUNTIME_MAJOR_LABEL: &str = "nvidia.com/cuda.runtime-version.major";
pub const RUNTIME_MINOR_LABEL: &str = "nvidia.com/cuda.runtime-version.minor";
pub const DRIVER_MAJOR_LABEL: &str = "nvidia.com/cuda.driver-version.major";
pub const DRIVER_MINOR_LABEL: &str = "nvidia.com/cuda.driver-version.minor";
/// The same, as older GFD releases name them.
pub const OLD_RUNTIME_MAJOR_LABEL: &str = "nvidia.com/cuda.runtime.major";
pub const OLD_RUNTIME_MINOR_LABEL: &str = "nvidia.com/cuda.runtime.minor";
pub const OLD_DRIVER_MAJOR_LABEL: &str = "nvidia.com/cuda.driver.major";
pub const OLD_DRIVER_MINOR_LABEL: &str = "nvidia.com/cuda.driver.minor";

/// The highest CUDA floor every supported driver meets.
const ALWAYS_MET: CudaVersion = CudaVersion::new(9, 0);

crate::cuda::major_minor!(
    /// A CUDA version `major.minor`. Reads `13.1`, `13.1.0` and the NGC images'
    /// `CUDA_VERSION=12.3.2.001`; the patch level never matters to a driver.
    CudaVersion,
    CudaVersionError,
    "a CUDA version",
    "13.1",
    |text| numbers(text.trim(), 4, 6)
);

/// A driver version `major.minor` (the revision is rounded into the bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriverVersion {
    pub major: u32,
    pub minor: u32,
}

/// An `NVIDIA_REQUIRE_CUDA` value, parsed: its alternatives (ORed) that
/// node labels can say, each as an atom (its constraints ANDed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    text: String,
    alternatives: Vec<Atom>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NVIDIA_REQUIRE_CUDA {text:?}: {reason}")]
pub struct RequirementError {
    text: String,
    reason: String,
}

const OPERATORS: [&str; 6] = [">=", "<=", "!=", ">", "<", "="];

impl FromStr for Requirement {
    type Err = RequirementError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| RequirementError { text: s.chars().take(200).collect(), reason };
        if s.split_ascii_whitespace().next().is_none() {
            return Err(err("empty".to_owned()));
        }
        let mut alternatives = Vec::new();
        for alternative in s.split_ascii_whitespace() {
            let mut atom = Atom::default();
            let mut expressible = true;
            for item in alternative.split(',') {
                expressible &= constrain(&mut atom, item).map_err(&err)?;
            }
            if expressible {
                alternatives.push(atom);
            }
        }
        Ok(Self { text: s.trim().to_owned(), alternatives })
    }
}

/// Adds one `name op value` constraint to `atom`. False when node labels
/// cannot say it: its alternative is dropped.
fn constrain(atom: &mut Atom, item: &str) -> Result<bool, String> {
    let name_end = item
        .find(|c: char| !c.is_ascii_alphabetic())
        .ok_or_else(|| format!("{item:?} has no operator"))?;
    let (name, rest) = item.split_at(name_end);
    let operator = OPERATORS
        .iter()
        .find(|op| rest.starts_with(**op))
        .ok_or_else(|| format!("{item:?} has no operator"))?;
    let value = &rest[operator.len()..];
    if value.is_empty() {
        return Err(format!("{item:?} has no value"));
    }
    let version = |value: &str| {
        numbers(value, 3, 6).ok_or_else(|| format!("{item:?}: {value:?} is not a version"))
    };
    match (name.to_ascii_lowercase().as_str(), *operator) {
        ("cuda", ">=" | ">") => {
            let [major, minor, _] = version(value)?;
            let bump = u32::from(*operator == ">");
            let floor = CudaVersion::new(major, minor + bump);
            atom.cuda = atom.cuda.max(Some(floor));
        }
        ("driver", ">=" | ">") => {
            let [major, minor, revision] = version(value)?;
            // A revision, or `>`, can only be met by a later minor on the
            // labels (which carry no revision): round up.
            let bump = u32::from(revision > 0 || *operator == ">");
            let from = DriverVersion { major, minor: minor + bump };
            atom.driver_from = atom.driver_from.max(Some(from));
        }
        ("driver", "<" | "<=") => {
            let [major, minor, revision] = version(value)?;
            // The labels carry no revision: `<=535.104.05` stays below 535.104
            // (round down); `<=535.104` allows 535.104 itself.
            let minor = if *operator == "<=" && revision == 0 { minor + 1 } else { minor };
            let below = DriverVersion { major, minor };
            atom.driver_below = Some(atom.driver_below.map_or(below, |b| b.min(below)));
        }
        ("brand", _) if !value.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            return Err(format!("{item:?}: {value:?} is not a brand"));
        }
        // Forward compatibility never holds for these brands.
        ("brand", "=") => {
            let brand = value.to_ascii_lowercase();
            return Ok(brand != "geforce" && brand != "titan");
        }
        ("brand", "!=") => {}
        ("cuda" | "driver" | "arch", _) => return version(value).map(|_| false),
        ("brand", _) => return Ok(false),
        (other, _) => return Err(format!("unknown constraint {other:?}")),
    }
    Ok(true)
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Requirement {
    /// What it holds on the heap, for caches that count what they keep.
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.alternatives.capacity() * size_of::<Atom>()
    }

    /// `cuda>=X.Y`: what an image built on CUDA X.Y needs when it declares nothing else.
    pub fn at_least(version: CudaVersion) -> Self {
        Self {
            text: format!("cuda>={version}"),
            alternatives: vec![Atom { cuda: Some(version), ..Atom::default() }],
        }
    }

    /// What the requirement asks of a node, in terms of its labels. None when
    /// every node meets it, or when no alternative can be written as node
    /// affinity (then nothing is required of the node here).
    pub fn driver_floor(&self) -> Option<DriverFloor> {
        let atoms = self.alternatives.iter().filter_map(|atom| atom.normalized()).collect();
        DriverFloor::from_atoms(atoms)
    }
}

/// An atom's upper driver bound as [`Atom::weakness`] orders it.
type Upper = Option<std::cmp::Reverse<DriverVersion>>;

/// The most alternatives a [`DriverFloor`] keeps: R4 multiplies every required node selector
/// term by them. Past it the first are kept, which only excludes nodes (docs/policy.md,
/// "The driver floor").
pub const MAX_ATOMS: usize = 16;

/// One alternative a node may meet: a CUDA floor and a driver range, ANDed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Atom {
    pub cuda: Option<CudaVersion>,
    /// Inclusive.
    pub driver_from: Option<DriverVersion>,
    /// Exclusive; only the major counts on the labels (rounded down).
    pub driver_below: Option<DriverVersion>,
}

impl Atom {
    /// Drops floors every node meets; None when no driver can meet it.
    fn normalized(mut self) -> Option<Self> {
        if self.cuda.is_some_and(|cuda| cuda <= ALWAYS_MET) {
            self.cuda = None;
        }
        // Bounds below the first major the labels can show are conservative:
        // `driver<536.5` keeps branch 535 and earlier.
        if let Some(below) = self.driver_below {
            self.driver_below = Some(DriverVersion { major: below.major, minor: 0 });
            let lowest = self.driver_from.unwrap_or(DriverVersion { major: 0, minor: 0 });
            if lowest.major >= below.major {
                return None;
            }
        }
        Some(self)
    }

    fn is_unconstrained(&self) -> bool {
        self.cuda.is_none() && self.driver_from.is_none() && self.driver_below.is_none()
    }

    /// Both at once; None when no node can meet both.
    fn and(&self, other: &Atom) -> Option<Atom> {
        let below = match (self.driver_below, other.driver_below) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Atom {
            cuda: self.cuda.max(other.cuda),
            driver_from: self.driver_from.max(other.driver_from),
            driver_below: below,
        }
        .normalized()
    }

    /// The atom's bounds as an order in which `self` is weaker than `other` (every node that meets
    /// `other` meets `self`) exactly when each of its three parts is at most `other`'s: no CUDA
    /// floor and no lower driver bound come first, and a higher upper driver bound before a lower
    /// one, no upper bound first of all.
    fn weakness(&self) -> (Option<CudaVersion>, Option<DriverVersion>, Upper) {
        (self.cuda, self.driver_from, self.driver_below.map(std::cmp::Reverse))
    }

    /// The one driver branch the atom allows, when that is all it says.
    fn single_branch(&self) -> Option<u32> {
        match (self.cuda, self.driver_from, self.driver_below) {
            (None, Some(from), Some(below)) if from.minor == 0 && below.major == from.major + 1 => {
                Some(from.major)
            }
            _ => None,
        }
    }
}

/// What a pod's GPU images need of a node's driver: alternatives (ORed), each a CUDA floor
/// and a driver range. Built by [`Requirement::driver_floor`], combined by [`DriverFloor::and`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverFloor {
    atoms: Vec<Atom>,
}

impl DriverFloor {
    /// The atoms no other atom is weaker than, in their order, at most [`MAX_ATOMS`] of them.
    ///
    /// Found in one sweep, in O(n log n): in the order of [`Atom::weakness`], an atom comes after
    /// every atom weaker than it, so it is subsumed when one of those kept before it has a driver
    /// range at least as wide; the kept ones' ranges are held as a staircase (`driver_from` -> the
    /// widest `driver_below` up to it).
    fn from_atoms(atoms: Vec<Atom>) -> Option<Self> {
        if atoms.is_empty() || atoms.iter().any(Atom::is_unconstrained) {
            return None;
        }
        let mut sorted = atoms;
        sorted.sort_unstable_by_key(Atom::weakness);
        sorted.dedup();
        let mut kept: Vec<Atom> = Vec::new();
        let mut staircase: BTreeMap<Option<DriverVersion>, Upper> = BTreeMap::new();
        for atom in sorted {
            let (_, from, below) = atom.weakness();
            let subsumed =
                staircase.range(..=from).next_back().is_some_and(|(_, widest)| *widest <= below);
            if subsumed {
                continue;
            }
            // The entries from `from` on whose ranges are no wider are
            // subsumed by this one for every atom still to come.
            while let Some((&key, &upper)) = staircase.range(from..).next() {
                if upper < below {
                    break;
                }
                staircase.remove(&key);
            }
            staircase.insert(from, below);
            kept.push(atom);
        }
        kept.sort_unstable();
        kept.truncate(MAX_ATOMS);
        Some(Self { atoms: kept })
    }

    /// A node must meet both. None when no node can (the images cannot run together on any driver).
    pub fn and(&self, other: &DriverFloor) -> Option<DriverFloor> {
        // A floor and itself: every pair of its atoms is subsumed by one of
        // them (most pods run one image in all their GPU containers).
        if self == other {
            return Some(self.clone());
        }
        let atoms: Vec<Atom> = self
            .atoms
            .iter()
            .flat_map(|a| other.atoms.iter().filter_map(move |b| a.and(b)))
            .collect();
        Self::from_atoms(atoms)
    }

    /// The floor's alternatives (ORed), for DRA selectors: those with a CUDA floor first,
    /// as the images write them.
    pub fn atoms(&self) -> impl Iterator<Item = &Atom> {
        let with_cuda = self.atoms.iter().filter(|atom| atom.cuda.is_some());
        with_cuda.chain(self.atoms.iter().filter(|atom| atom.cuda.is_none()))
    }

    /// The floor in the toolkit's requirement language (`cuda>=13.1 driver>=535.0,driver<536.0`),
    /// which [`Requirement`] reads back into the same floor.
    pub fn requirement_text(&self) -> String {
        self.atoms()
            .map(|atom| {
                let mut constraints = Vec::new();
                if let Some(cuda) = atom.cuda {
                    constraints.push(format!("cuda>={cuda}"));
                }
                if let Some(from) = atom.driver_from {
                    constraints.push(format!("driver>={}.{}", from.major, from.minor));
                }
                if let Some(below) = atom.driver_below {
                    constraints.push(format!("driver<{}.0", below.major));
                }
                constraints.join(",")
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether a driver supporting CUDA `cuda`, of version `driver` (major, minor), meets it.
    pub fn met_by(&self, cuda: CudaVersion, driver: (u32, u32)) -> bool {
        self.atoms.iter().any(|atom| {
            atom.cuda.is_none_or(|floor| cuda >= floor)
                && atom.driver_from.is_none_or(|floor| driver >= (floor.major, floor.minor))
                && atom.driver_below.is_none_or(|below| driver.0 < below.major)
        })
    }

    /// The node affinity as alternatives (ORed), each a list of expressions
    /// (ANDed), for both generations of GFD labels.
    pub fn alternatives(&self) -> Vec<Vec<Value>> {
        let mut out = Vec::new();
        for labels in [Labels::CURRENT, Labels::OLD] {
            // Alternatives that are exactly one driver branch become one `In`.
            let mut branches: Vec<u32> = Vec::new();
            for atom in &self.atoms {
                if let Some(branch) = atom.single_branch() {
                    branches.push(branch);
                    continue;
                }
                for cuda in cuda_alternatives(atom.cuda, labels) {
                    for driver in driver_alternatives(atom, labels) {
                        let mut expressions = cuda.clone();
                        expressions.extend(driver);
                        out.push(expressions);
                    }
                }
            }
            if !branches.is_empty() {
                branches.sort_unstable();
                branches.dedup();
                let values: Vec<String> = branches.iter().map(ToString::to_string).collect();
                out.push(vec![
                    json!({"key": labels.driver_major, "operator": "In", "values": values}),
                ]);
            }
        }
        out
    }
}

impl fmt::Display for DriverFloor {
    /// `CUDA 13.0 or branch 535, 550`, for the change summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let mut branches: Vec<String> = Vec::new();
        for atom in self.atoms() {
            if let Some(branch) = atom.single_branch() {
                branches.push(branch.to_string());
                continue;
            }
            let mut words = Vec::new();
            if let Some(cuda) = atom.cuda {
                words.push(format!("CUDA {cuda}"));
            }
            if let Some(from) = atom.driver_from {
                words.push(format!("driver >= {}.{}", from.major, from.minor));
            }
            if let Some(below) = atom.driver_below {
                words.push(format!("driver < {}", below.major));
            }
            parts.push(words.join(" and "));
        }
        if !branches.is_empty() {
            parts.push(format!("branch {}", branches.join(", ")));
        }
        f.write_str(&parts.join(" or "))
    }
}

#[derive(Clone, Copy)]
struct Labels {
    runtime_major: &'static str,
    runtime_minor: &'static str,
    driver_major: &'static str,
    driver_minor: &'static str,
}

impl Labels {
    const CURRENT: Labels = Labels {
        runtime_major: RUNTIME_MAJOR_LABEL,
        runtime_minor: RUNTIME_MINOR_LABEL,
        driver_major: DRIVER_MAJOR_LABEL,
        driver_minor: DRIVER_MINOR_LABEL,
    };
    const OLD: Labels = Labels {
        runtime_major: OLD_RUNTIME_MAJOR_LABEL,
        runtime_minor: OLD_RUNTIME_MINOR_LABEL,
        driver_major: OLD_DRIVER_MAJOR_LABEL,
        driver_minor: OLD_DRIVER_MINOR_LABEL,
    };
}

fn expression(key: &str, operator: &str, values: &[u32]) -> Value {
    let values: Vec<String> = values.iter().map(ToString::to_string).collect();
    json!({"key": key, "operator": operator, "values": values})
}

/// `major.minor >= floor` on a pair of labels, as alternatives (one empty one when every value is).
pub fn at_least(major_key: &str, minor_key: &str, major: u32, minor: u32) -> Vec<Vec<Value>> {
    if minor == 0 {
        if major == 0 {
            return vec![Vec::new()];
        }
        return vec![vec![expression(major_key, "Gt", &[major - 1])]];
    }
    vec![
        vec![expression(major_key, "Gt", &[major])],
        vec![expression(major_key, "In", &[major]), expression(minor_key, "Gt", &[minor - 1])],
    ]
}

fn cuda_alternatives(cuda: Option<CudaVersion>, labels: Labels) -> Vec<Vec<Value>> {
    match cuda {
        None => vec![Vec::new()],
        Some(v) => at_least(labels.runtime_major, labels.runtime_minor, v.major, v.minor),
    }
}

/// The driver range of an atom on the driver labels, as alternatives.
fn driver_alternatives(atom: &Atom, labels: Labels) -> Vec<Vec<Value>> {
    let major = labels.driver_major;
    let from = atom.driver_from;
    let Some(below) = atom.driver_below.map(|b| b.major) else {
        return match from {
            None => vec![Vec::new()],
            Some(from) => at_least(major, labels.driver_minor, from.major, from.minor),
        };
    };
    // Whole majors from `first` to `below - 1`.
    let range = |first: u32| -> Option<Vec<Value>> {
        if first >= below {
            return None;
        }
        if first == 0 {
            return Some(vec![expression(major, "Lt", &[below])]);
        }
        if below - first <= 16 {
            let all: Vec<u32> = (first..below).collect();
            return Some(vec![expression(major, "In", &all)]);
        }
        Some(vec![expression(major, "Gt", &[first - 1]), expression(major, "Lt", &[below])])
    };
    match from {
        None => range(0).into_iter().collect(),
        Some(from) if from.minor == 0 => range(from.major).into_iter().collect(),
        Some(from) => {
            let mut out = vec![vec![
                expression(major, "In", &[from.major]),
                expression(labels.driver_minor, "Gt", &[from.minor - 1]),
            ]];
            out.extend(range(from.major + 1));
            out
        }
    }
}

#[cfg(test)]
mod tests;
