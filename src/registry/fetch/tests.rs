use super::*;

#[test]
fn a_tagged_manifest_is_checked_against_the_digest_named() {
    let body = b"hello";
    let named = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    assert_eq!(
        tagged_digest(Some(named), body).map(|d| d.as_str().to_owned()),
        Ok(named.to_owned())
    );
    assert_eq!(tagged_digest(None, body).map(|d| d.as_str().to_owned()), Ok(named.to_owned()));
    let err = tagged_digest(Some(named), b"other");
    assert!(err.is_err_and(|f| f.reason.contains("does not match its digest")));
    assert!(tagged_digest(Some("sha256:short"), body).is_err());
}
