//! Image references parsed as the distribution grammar writes them, into
//! oci-client's [`Reference`].
//!
//! oci-client's own parser (`Reference::try_from`) compiles a pattern whose
//! tag class is Unicode `\w`: compiling it costs the process about 45 MiB
//! at the first registry-mode admission, a fifth of the chart's memory
//! limit, for tags that must be ASCII anyway (the distribution grammar's
//! `\w` is ASCII). This parser uses the same grammar with ASCII classes
//! and builds the [`Reference`] with oci-client's constructors, so the
//! normalisation (`ubuntu` is `docker.io/library/ubuntu:latest`) and what
//! the rest of the client sees are unchanged.

use std::sync::OnceLock;

use oci_client::Reference;
use regex::{Regex, RegexBuilder};

/// The longest name (registry and repository, as written or normalised)
/// the distribution grammar accepts.
const MAX_NAME_LEN: usize = 255;
/// The longest tag the grammar accepts (its pattern's bound).
const MAX_TAG_LEN: usize = 128;
/// The longest digest this client reads: `sha512:` and 128 hex digits.
const MAX_DIGEST_LEN: usize = 135;
/// The longest image reference: a name, a tag and a digest, each at its
/// longest. Anything longer is refused before it is matched, hashed or
/// kept.
pub const MAX_REFERENCE_LEN: usize = MAX_NAME_LEN + 1 + MAX_TAG_LEN + 1 + MAX_DIGEST_LEN;
pub(super) const TOO_LONG: &str = "longer than the 520 characters of the longest image reference";

/// The reference grammar of the distribution project, with its `\w`
/// spelled as the ASCII class it means there; groups: name, tag, digest.
const REFERENCE_PATTERN: &str = concat!(
    r"^((?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])",
    r"(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?/)?",
    r"[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?",
    r"(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?)",
    r"(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?",
    r"(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$",
);

fn reference_pattern() -> Option<&'static Regex> {
    static PATTERN: OnceLock<Option<Regex>> = OnceLock::new();
    PATTERN
        .get_or_init(|| RegexBuilder::new(REFERENCE_PATTERN).unicode(false).build().ok())
        .as_ref()
}

/// Parses `image` as an image reference, normalised as Docker does; the
/// error is a short phrase (`invalid reference format`).
pub(super) fn parse_reference(image: &str) -> Result<Reference, &'static str> {
    if image.is_empty() {
        return Err("repository name must have at least one component");
    }
    if image.len() > MAX_REFERENCE_LEN {
        return Err(TOO_LONG);
    }
    let captures = reference_pattern()
        .ok_or("the reference pattern did not compile")?
        .captures(image)
        .ok_or("invalid reference format")?;
    let name = captures.get(1).map_or("", |m| m.as_str());
    if name.len() > MAX_NAME_LEN {
        return Err("repository name must not be more than 255 characters");
    }
    let tag = captures.get(2).map(|m| m.as_str().to_owned());
    let digest = captures.get(3).map(|m| m.as_str().to_owned());
    let (registry, repository) = split_domain(name);
    if repository.len() > MAX_NAME_LEN {
        return Err("repository name must not be more than 255 characters");
    }
    if let Some(digest) = &digest {
        let hex_len = match digest.split_once(':') {
            Some(("sha256", hex)) => (hex.len(), 64),
            Some(("sha384", hex)) => (hex.len(), 96),
            Some(("sha512", hex)) => (hex.len(), 128),
            _ => return Err("unsupported digest algorithm"),
        };
        if hex_len.0 != hex_len.1 {
            return Err("invalid checksum digest length");
        }
    }
    Ok(match (tag, digest) {
        (Some(tag), Some(digest)) => {
            Reference::with_tag_and_digest(registry, repository, tag, digest)
        }
        (None, Some(digest)) => Reference::with_digest(registry, repository, digest),
        (tag, None) => {
            Reference::with_tag(registry, repository, tag.unwrap_or_else(|| "latest".to_owned()))
        }
    })
}

/// The registry and repository of a name: the first component is a
/// registry when it has a `.` or a `:` or is `localhost`, else the name is
/// on Docker Hub, where one-component names are under `library/`.
fn split_domain(name: &str) -> (String, String) {
    let (mut registry, mut repository) = match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_owned(), rest.to_owned())
        }
        _ => ("docker.io".to_owned(), name.to_owned()),
    };
    if registry == "index.docker.io" {
        registry = "docker.io".to_owned();
    }
    if registry == "docker.io" && !repository.contains('/') {
        repository = format!("library/{repository}");
    }
    (registry, repository)
}

#[cfg(test)]
mod tests;
