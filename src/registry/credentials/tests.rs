use super::*;

fn basic(user: &str, password: &str) -> RegistryAuth {
    RegistryAuth::Basic(user.to_owned(), password.to_owned())
}

fn same(a: &RegistryAuth, b: &RegistryAuth) -> bool {
    match (a, b) {
        (RegistryAuth::Anonymous, RegistryAuth::Anonymous) => true,
        (RegistryAuth::Basic(u1, p1), RegistryAuth::Basic(u2, p2)) => u1 == u2 && p1 == p2,
        _ => false,
    }
}

#[test]
fn reads_auth_and_username_password_entries() {
    let auth = STANDARD.encode("robot:s3cret:with-colon");
    let file = format!(
        r#"{{"auths": {{
                "registry.local:5000": {{"auth": "{auth}"}},
                "https://index.docker.io/v1/": {{"username": "hub", "password": "pw"}},
                "NVCR.io": {{"username": "$oauthtoken", "password": "key", "auth": "ignored"}},
                "acr.example.com": {{"identitytoken": "refresh"}}
            }}}}"#
    );
    let credentials = Credentials::from_docker_config(file.as_bytes());
    let Ok(credentials) = credentials else {
        panic!("{credentials:?}");
    };
    assert!(same(
        &credentials.auth_for("registry.local:5000"),
        &basic("robot", "s3cret:with-colon")
    ));
    assert!(same(&credentials.auth_for("docker.io"), &basic("hub", "pw")));
    assert!(same(&credentials.auth_for("nvcr.io"), &basic("$oauthtoken", "key")));
    assert!(same(&credentials.auth_for("acr.example.com"), &RegistryAuth::Anonymous));
    assert!(same(&credentials.auth_for("ghcr.io"), &RegistryAuth::Anonymous));
    let debug = format!("{credentials:?}");
    assert!(!debug.contains("s3cret") && !debug.contains("pw"), "{debug}");
}

#[test]
fn reads_the_older_dockercfg_form() {
    let file = br#"{"quay.io": {"username": "u", "password": "p"}}"#;
    let credentials = Credentials::from_docker_config(file).unwrap_or_default();
    assert_eq!(credentials.registries().collect::<Vec<_>>(), ["quay.io"]);
}

#[test]
fn bad_files_are_one_line_errors_without_their_content() {
    for (file, expected) in [
        (&b"{\"auths\": "[..], "not JSON"),
        (&b"[]"[..], "not a JSON object"),
        (&b"{\"auths\": []}"[..], "\"auths\" is not an object"),
        (
            &b"{\"auths\": {\"r.io\": {\"auth\": \"bm9jb2xvbg==\"}}}"[..],
            "registry \"r.io\": \"auth\" is not base64 of user:password",
        ),
    ] {
        let err = Credentials::from_docker_config(file).expect_err(expected).to_string();
        assert!(err.contains(expected), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }
    let missing = Credentials::load(Path::new("/nonexistent/.dockerconfigjson"));
    assert!(missing.is_err_and(|err| {
        err.to_string().starts_with("cannot read /nonexistent/.dockerconfigjson")
    }));
}
