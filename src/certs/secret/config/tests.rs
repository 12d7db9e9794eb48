use super::*;

#[test]
fn secret_ref_parses_namespace_slash_name() {
    let parsed: SecretRef = "gpu-policy/gpu-policy-tls".parse().expect("parse");
    assert_eq!(parsed.namespace, "gpu-policy");
    assert_eq!(parsed.name, "gpu-policy-tls");
    assert_eq!(parsed.to_string(), "gpu-policy/gpu-policy-tls");
    for bad in ["name", "/name", "ns/", "ns/a/b", "NS/name", "ns/Name", "a.b/name"] {
        assert!(bad.parse::<SecretRef>().is_err(), "{bad} accepted");
    }
}

#[test]
fn wanted_names_add_the_service() {
    let secret: SecretRef = "ns/tls".parse().expect("parse");
    let config = RouteConfig {
        service: "hook".to_owned(),
        service_namespace: "ops".to_owned(),
        dns_names: vec!["extra.example.com".to_owned()],
        ..RouteConfig::new(secret, "dir")
    };
    let names = config.wanted_names();
    for name in ["localhost", "gpu-policy.gpu-policy.svc", "127.0.0.1"] {
        assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
    }
    assert!(names.iter().any(|n| n == "extra.example.com"));
    assert!(names.iter().any(|n| n == "hook.ops.svc"));
}
