use super::*;
use rstest::rstest;

const HELLO_256: &str = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
const HELLO_512: &str = "sha512:9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043";

#[test]
fn content_hashes_to_its_digest_or_fails() {
    for text in [HELLO_256, HELLO_512] {
        let digest = Digest::parse(text).unwrap_or_else(|err| panic!("{err:?}"));
        assert_eq!(digest.verify("blob", b"hello"), Ok(()));
        let err = digest.verify("blob", b"hello!");
        assert!(
            err.as_ref().is_err_and(|f| f.reason.starts_with("blob does not match its digest")),
            "{err:?}"
        );
    }
    assert_eq!(Digest::sha256_of(b"hello").as_str(), HELLO_256);
}

#[rstest]
#[case("sha256:2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824")]
#[case("sha256:2cf24dba")]
#[case("sha256:../../v2/other/blobs/x")]
#[case("sha384:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")]
#[case("md5:5d41402abc4b2a76b9719d911017c592")]
#[case("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")]
#[case("")]
fn only_canonical_digests_are_read(#[case] text: &str) {
    let err = Digest::parse(text);
    assert!(
        err.as_ref().is_err_and(|f| f.reason.contains("is not a sha256 or sha512 digest")),
        "{text}: {err:?}"
    );
}
