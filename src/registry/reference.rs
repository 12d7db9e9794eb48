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
/// Why a string longer than [`MAX_REFERENCE_LEN`] is no reference.
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
        .get_or_init(|| {
            RegexBuilder::new(REFERENCE_PATTERN)
                .unicode(false)
                .build()
                .ok()
        })
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
        (tag, None) => Reference::with_tag(
            registry,
            repository,
            tag.unwrap_or_else(|| "latest".to_owned()),
        ),
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
mod tests {
    use super::*;

    /// Every reference oci-client parses, this parser reads the same way.
    #[test]
    fn agrees_with_oci_client_on_valid_references() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let cases = [
            "ubuntu".to_owned(),
            "ubuntu:22.04".to_owned(),
            "library/ubuntu".to_owned(),
            "index.docker.io/ubuntu".to_owned(),
            "docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04".to_owned(),
            "nvcr.io/nvidia/pytorch:25.12-py3".to_owned(),
            "localhost/app".to_owned(),
            "localhost:5000/team/app:v1".to_owned(),
            "127.0.0.1:5000/a/b/c:_x".to_owned(),
            "test.com:tag".to_owned(),
            "test.com:5000".to_owned(),
            "a__b/c-d---e".to_owned(),
            format!("ghcr.io/org/app@{digest}"),
            format!("ghcr.io/org/app:v2@{digest}"),
            format!("ubuntu@sha512:{}", "b".repeat(128)),
        ];
        for image in cases {
            let ours = parse_reference(&image);
            let theirs = Reference::try_from(image.as_str());
            match (ours, theirs) {
                (Ok(ours), Ok(theirs)) => assert_eq!(ours, theirs, "{image}"),
                (ours, theirs) => panic!("{image}: ours {ours:?}, oci-client {theirs:?}"),
            }
        }
    }

    #[test]
    fn rejects_what_the_grammar_does_not_allow() {
        let long_repository = format!("team/{}", "a".repeat(260));
        let cases = [
            ("", "repository name must have at least one component"),
            ("Ubuntu", "invalid reference format"),
            ("ubuntu:", "invalid reference format"),
            ("ubuntu:t\u{e9}g", "invalid reference format"),
            ("ubuntu:-x", "invalid reference format"),
            ("ubuntu@sha256:abc", "invalid reference format"),
            ("a b", "invalid reference format"),
            (
                long_repository.as_str(),
                "repository name must not be more than 255 characters",
            ),
        ];
        for (image, reason) in cases {
            assert_eq!(parse_reference(image).err(), Some(reason), "{image:?}");
        }
        let short = format!("ubuntu@sha256:{}", "a".repeat(40));
        assert_eq!(
            parse_reference(&short).err(),
            Some("invalid checksum digest length")
        );
        let unknown = format!("ubuntu@md5:{}", "a".repeat(32));
        assert_eq!(
            parse_reference(&unknown).err(),
            Some("unsupported digest algorithm")
        );
    }

    #[test]
    fn a_tag_longer_than_128_characters_is_refused() {
        let tag = "t".repeat(129);
        assert!(parse_reference(&format!("ubuntu:{tag}")).is_err());
        assert!(parse_reference(&format!("ubuntu:{}", &tag[1..])).is_ok());
    }

    /// A name of 255 characters with the longest tag and digest is the
    /// longest reference; one character more in the name, or past that
    /// length at all, is refused.
    #[test]
    fn references_are_bounded_by_the_grammars_lengths() {
        assert_eq!(MAX_REFERENCE_LEN, 520);
        let name = format!("registry.example/{}", "n".repeat(255 - 17));
        let tag = "t".repeat(MAX_TAG_LEN);
        let digest = format!("sha512:{}", "a".repeat(128));
        let longest = format!("{name}:{tag}@{digest}");
        assert_eq!(longest.len(), MAX_REFERENCE_LEN);
        assert!(parse_reference(&longest).is_ok());
        assert_eq!(
            parse_reference(&format!("{name}n:{tag}")).err(),
            Some("repository name must not be more than 255 characters")
        );
        assert_eq!(
            parse_reference(&format!("{longest}a")).err(),
            Some(TOO_LONG)
        );
        assert_eq!(
            parse_reference(&"a".repeat(1_400_000)).err(),
            Some(TOO_LONG)
        );
        assert!(TOO_LONG.contains(&MAX_REFERENCE_LEN.to_string()));
    }
}
