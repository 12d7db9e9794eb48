//! The Kubernetes semver CEL library
//! (`k8s.io/apiserver/pkg/cel/library/semverlib.go`). Upstream parses with
//! `github.com/blang/semver/v4`'s `Parse`; the `semver` crate accepts the
//! same strings (strict semver 2.0: no leading zeros, numbers within
//! uint64), but for numeric pre-release identifiers above uint64, which
//! blang refuses and [`Semver::parse`] refuses too. The error wording is
//! the crate's.
//!
//! Reads: a version string. Allows expressions to call
//! - `semver(string)`: strict semver 2.0 (`1.2.3`, optional `-pre.release`
//!   and `+build.meta`), an error otherwise;
//! - `semver(string, bool)`: with `true`, normalized first as upstream's
//!   `normalizeAndParse` does (a leading `v` dropped, a missing minor or
//!   patch filled with `0`, leading zeros removed; no whitespace trimmed);
//! - `isSemver(string)`, `isSemver(string, bool)`: whether `semver` would
//!   succeed;
//! - `<Semver>.isGreaterThan(<Semver>)`, `isLessThan`, `compareTo` (-1, 0,
//!   1), `major()`, `minor()`, `patch()`; `==` between semvers.
//!
//! Precedence is semver 2.0's, as blang's `Compare`: a pre-release sorts
//! below its release, numeric identifiers below alphanumeric ones, and
//! build metadata is ignored (`1.0.0+a == 1.0.0+b`).

use cel::common::types::{CelBool, CelInt, CelString};
use cel::{DeclarationError, Env, ExecutionError};
use std::cmp::Ordering;
use std::fmt;

super::opaque_val!(
    /// The CEL type name upstream gives semvers (`apiservercel.SemverType`);
    /// equal when `apiservercel.Semver.Equal` (`Version.EQ`) says so.
    Semver,
    SEMVER_TYPE,
    "kubernetes.Semver"
);

/// A parsed semantic version (`kubernetes.Semver` in CEL).
#[derive(Debug, Clone)]
pub struct Semver(semver::Version);

/// Why a string is not a semantic version: the parser's message, after
/// the `Could not parse semver: ` upstream puts in front of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Could not parse semver: {0}")]
pub struct SemverError(String);

impl SemverError {
    /// The parser's own message, without the prefix.
    pub fn reason(&self) -> &str {
        &self.0
    }
}

fn error(reason: impl Into<String>) -> SemverError {
    SemverError(reason.into())
}

impl Semver {
    /// blang's `semver.Parse`: strict `MAJOR.MINOR.PATCH[-PRE][+BUILD]`.
    pub fn parse(s: &str) -> Result<Semver, SemverError> {
        let version = semver::Version::parse(s).map_err(|e| error(e.to_string()))?;
        // blang reads numeric pre-release identifiers as uint64s.
        let numeric = |id: &&str| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit());
        if let Some(id) =
            version.pre.split('.').filter(numeric).find(|id| id.parse::<u64>().is_err())
        {
            return Err(error(format!("value of pre-release identifier {id:?} exceeds u64::MAX")));
        }
        Ok(Semver(version))
    }

    /// `semver(s, true)`: upstream's `normalizeAndParse`, blang's
    /// `ParseTolerant` without its whitespace trimming.
    pub fn parse_normalized(s: &str) -> Result<Semver, SemverError> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s
            .splitn(3, '.')
            .map(|p| {
                if p.len() <= 1 {
                    return p.to_owned();
                }
                // Leading zeros go; a part left empty, or starting with
                // anything but a digit (a pre-release), gets one `0` back.
                let trimmed = p.trim_start_matches('0');
                if trimmed.as_bytes().first().is_some_and(u8::is_ascii_digit) {
                    trimmed.to_owned()
                } else {
                    format!("0{trimmed}")
                }
            })
            .collect();
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err(error("short version cannot contain PreRelease/Build meta data"));
            }
            parts.resize(3, "0".to_owned());
        }
        Semver::parse(&parts.join("."))
    }

    /// The major version.
    pub fn major(&self) -> u64 {
        self.0.major
    }

    /// The minor version.
    pub fn minor(&self) -> u64 {
        self.0.minor
    }

    /// The patch version.
    pub fn patch(&self) -> u64 {
        self.0.patch
    }

    /// blang's `Version.Compare`: semver 2.0 precedence.
    pub fn compare(&self, other: &Semver) -> Ordering {
        self.0.cmp_precedence(&other.0)
    }
}

/// Equal precedence: build metadata is ignored, as upstream's `Equal`
/// (`Version.EQ`) ignores it.
impl PartialEq for Semver {
    fn eq(&self, other: &Semver) -> bool {
        self.compare(other) == Ordering::Equal
    }
}
impl Eq for Semver {}

/// blang's `Version.String`.
impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Registers the semver library on `env`. `isGreaterThan`, `isLessThan` and
/// `compareTo` are overloads next to the quantity library's, as upstream
/// declares them: the receiver's type picks one.
pub(crate) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(SEMVER_TYPE.to_owned())?;
    cel::add_overload!(env, fn semver: (CelString) -> Result<Semver>)?;
    cel::add_overload!(env, fn semver_normalize: (CelString, CelBool) -> Result<Semver>, name = "semver")?;
    cel::add_overload!(env, fn is_semver: (CelString) -> CelBool)?;
    cel::add_overload!(env, fn is_semver_normalize: (CelString, CelBool) -> CelBool, name = "isSemver")?;
    cel::add_member_overload!(env, fn semver_is_greater_than: (Semver, Semver) -> CelBool, name = "isGreaterThan")?;
    cel::add_member_overload!(env, fn semver_is_less_than: (Semver, Semver) -> CelBool, name = "isLessThan")?;
    cel::add_member_overload!(env, fn semver_compare_to: (Semver, Semver) -> CelInt, name = "compareTo")?;
    cel::add_member_overload!(env, fn semver_major: (Semver) -> CelInt, name = "major")?;
    cel::add_member_overload!(env, fn semver_minor: (Semver) -> CelInt, name = "minor")?;
    cel::add_member_overload!(env, fn semver_patch: (Semver) -> CelInt, name = "patch")?;
    Ok(())
}

/// `semver(string, bool)`: normalized first when the flag is set; the
/// parse error as the result's.
fn semver_normalize(s: &CelString<'_>, normalize: &CelBool) -> Result<Semver, ExecutionError> {
    let parse = if *normalize.inner() { Semver::parse_normalized } else { Semver::parse };
    parse(s.inner()).map_err(|e| ExecutionError::function_error("semver", e))
}

/// `semver(string)`.
fn semver(s: &CelString<'_>) -> Result<Semver, ExecutionError> {
    semver_normalize(s, &false.into())
}

/// `isSemver(string, bool)`: whether `semver` would succeed.
fn is_semver_normalize(s: &CelString<'_>, normalize: &CelBool) -> CelBool {
    semver_normalize(s, normalize).is_ok().into()
}

fn is_semver(s: &CelString<'_>) -> CelBool {
    is_semver_normalize(s, &false.into())
}

/// `<Semver>.isGreaterThan(<Semver>)`: `Compare == 1`.
fn semver_is_greater_than(a: &Semver, b: &Semver) -> CelBool {
    (a.compare(b) == Ordering::Greater).into()
}

/// `<Semver>.isLessThan(<Semver>)`: `Compare == -1`.
fn semver_is_less_than(a: &Semver, b: &Semver) -> CelBool {
    (a.compare(b) == Ordering::Less).into()
}

/// `<Semver>.compareTo(<Semver>)`: `Compare`.
fn semver_compare_to(a: &Semver, b: &Semver) -> CelInt {
    (a.compare(b) as i64).into()
}

// `types.Int(v.Major)` converts Go's uint64 to int64 by wrapping: a number
// above 2^63-1 comes out negative upstream, and here too.
fn wrap(n: u64) -> CelInt {
    (n as i64).into()
}

fn semver_major(v: &Semver) -> CelInt {
    wrap(v.major())
}

fn semver_minor(v: &Semver) -> CelInt {
    wrap(v.minor())
}

fn semver_patch(v: &Semver) -> CelInt {
    wrap(v.patch())
}

#[cfg(test)]
mod tests;
