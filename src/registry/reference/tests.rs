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
        (long_repository.as_str(), "repository name must not be more than 255 characters"),
    ];
    for (image, reason) in cases {
        assert_eq!(parse_reference(image).err(), Some(reason), "{image:?}");
    }
    let short = format!("ubuntu@sha256:{}", "a".repeat(40));
    assert_eq!(parse_reference(&short).err(), Some("invalid checksum digest length"));
    let unknown = format!("ubuntu@md5:{}", "a".repeat(32));
    assert_eq!(parse_reference(&unknown).err(), Some("unsupported digest algorithm"));
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
    assert_eq!(parse_reference(&format!("{longest}a")).err(), Some(TOO_LONG));
    assert_eq!(parse_reference(&"a".repeat(1_400_000)).err(), Some(TOO_LONG));
    assert!(TOO_LONG.contains(&MAX_REFERENCE_LEN.to_string()));
}
