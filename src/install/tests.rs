use super::*;

fn joined(base: &str, endpoint: Endpoint) -> String {
    WebhookUrl::parse(base)
        .unwrap_or_else(|reason| panic!("{base}: {reason}"))
        .join(endpoint.path())
}

#[test]
fn webhook_url_joins_each_path_with_one_slash() {
    for (base, expected) in [
        ("https://127.0.0.1:8443", "https://127.0.0.1:8443/mutate"),
        ("https://127.0.0.1:8443/", "https://127.0.0.1:8443/mutate"),
        ("https://host.docker.internal:8443//", "https://host.docker.internal:8443/mutate"),
        ("https://example.com/hooks", "https://example.com/hooks/mutate"),
        ("https://example.com/hooks/", "https://example.com/hooks/mutate"),
        ("https://[::1]:8443", "https://[::1]:8443/mutate"),
        // As the API server compares it: scheme and host lowercased,
        // the default port dropped.
        ("HTTPS://Example.COM:443", "https://example.com/mutate"),
    ] {
        assert_eq!(joined(base, Endpoint::Mutate), expected, "{base}");
    }
    assert_eq!(
        joined("https://127.0.0.1:8443/", Endpoint::Validate(Mode::Enforce)),
        "https://127.0.0.1:8443/validate/enforce"
    );
}

#[test]
fn webhook_url_is_refused_where_the_api_server_refuses_it() {
    for (text, reason) in [
        ("http://127.0.0.1:8443", "the scheme must be https, not http"),
        ("ftp://example.com", "the scheme must be https, not ftp"),
        ("https://", "a host is required"),
        ("https:///mutate", "a host is required"),
        ("https:example.com", "a host is required"),
        ("https:/example.com", "a host is required"),
        ("https:\\\\example.com", "a host is required"),
        ("https://user@example.com", "user information is not allowed"),
        ("https://:secret@example.com", "user information is not allowed"),
        ("https://example.com/?a=b", "a query is not allowed"),
        // Empty, but the paths would be joined after them.
        ("https://example.com/?", "a query is not allowed"),
        ("https://example.com/#top", "a fragment is not allowed"),
        ("https://example.com#", "a fragment is not allowed"),
        (" https://example.com", "whitespace and control characters are not allowed"),
        ("https://example.com\n", "whitespace and control characters are not allowed"),
        ("", "relative URL without a base"),
        ("127.0.0.1:8443", "relative URL without a base"),
        ("https://example.com:port", "invalid port number"),
    ] {
        assert_eq!(
            WebhookUrl::parse(text).map_err(|error| error.to_string()),
            Err(reason.to_owned()),
            "{text:?}"
        );
    }
}

#[test]
fn client_config_is_the_url_or_the_service_with_the_same_ca_bundle() {
    let service = InstallOptions { ca_bundle: Some("PEM".to_owned()), ..InstallOptions::default() };
    assert_eq!(
        client_config(&service, Endpoint::Namespace),
        json!({
            "service": {"name": NAME, "namespace": NAME, "path": "/validate/namespace", "port": 443},
            "caBundle": "UEVN",
        })
    );
    let url =
        InstallOptions { webhook_url: WebhookUrl::parse("https://127.0.0.1:8443").ok(), ..service };
    assert_eq!(
        client_config(&url, Endpoint::Namespace),
        json!({"url": "https://127.0.0.1:8443/validate/namespace", "caBundle": "UEVN"})
    );
}
