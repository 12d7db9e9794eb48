use k8s_openapi::ByteString;

use super::*;
use crate::certs::pki::{CA_VALIDITY_DAYS, generate_ca, issue, unix_now};

const NAMES: &[&str] = &["localhost", "gpu-policy.gpu-policy.svc", "127.0.0.1"];

fn names() -> Vec<String> {
    NAMES.iter().map(|n| (*n).to_owned()).collect()
}

fn fresh(now: i64, leaf_days: i64) -> TlsData {
    let ca = generate_ca(now, CA_VALIDITY_DAYS).expect("ca");
    let leaf = issue(&ca.cert, &ca.key, &names(), now, leaf_days).expect("leaf");
    TlsData {
        ca_crt: ca.cert.into_bytes(),
        ca_key: ca.key.into_bytes(),
        tls_crt: leaf.cert.into_bytes(),
        tls_key: leaf.key.into_bytes(),
    }
}

fn tls_secret(data: &TlsData) -> Secret {
    Secret {
        type_: Some(TLS_SECRET_TYPE.to_owned()),
        data: Some(
            data.entries()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), ByteString(v.to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

#[test]
fn fresh_pair_is_good() {
    let now = unix_now();
    assert_eq!(evaluate(&fresh(now, 365), &names(), now), Verdict::Good);
}

#[test]
fn leaf_with_less_than_a_third_left_is_renewed() {
    let now = unix_now();
    // 30 days long, 21 days in: 9 of 30 days left.
    let data = fresh(now - 21 * DAY, 30);
    match evaluate(&data, &names(), now) {
        Verdict::RenewLeaf(reason) => assert!(reason.contains("third"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // 19 days in: 11 of 30 left, still good.
    let data = fresh(now - 19 * DAY, 30);
    assert_eq!(evaluate(&data, &names(), now), Verdict::Good);
}

#[test]
fn uncovered_name_is_renewed() {
    let now = unix_now();
    let mut wanted = names();
    wanted.push("other.example.com".to_owned());
    match evaluate(&fresh(now, 365), &wanted, now) {
        Verdict::RenewLeaf(reason) => assert!(reason.contains("other.example.com"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn leaf_of_another_ca_is_renewed() {
    let now = unix_now();
    let mut data = fresh(now, 365);
    let other = fresh(now, 365);
    data.tls_crt = other.tls_crt;
    data.tls_key = other.tls_key;
    match evaluate(&data, &names(), now) {
        Verdict::RenewLeaf(reason) => assert!(reason.contains("does not verify"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unusable_ca_regenerates_everything() {
    let now = unix_now();
    let mut mismatched = fresh(now, 365);
    mismatched.ca_key = fresh(now, 365).ca_key;
    let mut garbage = fresh(now, 365);
    garbage.ca_crt = b"garbage".to_vec();
    let ca = generate_ca(now - 3000 * DAY, 3200).expect("old ca");
    let leaf = issue(&ca.cert, &ca.key, &names(), now, 30).expect("leaf");
    let expiring = TlsData {
        ca_crt: ca.cert.into_bytes(),
        ca_key: ca.key.into_bytes(),
        tls_crt: leaf.cert.into_bytes(),
        tls_key: leaf.key.into_bytes(),
    };
    let mut leaf_key_only = fresh(now, 365);
    leaf_key_only.ca_crt.clear();
    leaf_key_only.ca_key.clear();
    leaf_key_only.tls_crt.clear();
    for (data, expected) in [
        (mismatched, "does not match"),
        (garbage, "ca.crt"),
        (expiring, "expires in"),
        (leaf_key_only, "no CA"),
    ] {
        match evaluate(&data, &names(), now) {
            Verdict::RegenerateAll(reason) => assert!(reason.contains(expected), "{reason}"),
            other => panic!("{expected}: {other:?}"),
        }
    }
}

#[test]
fn an_empty_secret_is_filled() {
    let empty = TlsData {
        ca_crt: Vec::new(),
        ca_key: Vec::new(),
        tls_crt: Vec::new(),
        tls_key: Vec::new(),
    };
    assert_eq!(evaluate(&empty, &names(), unix_now()), Verdict::Empty);
    // As the install creates it: Opaque, no data at all.
    let installed = Secret { type_: Some(OPAQUE_SECRET_TYPE.to_owned()), ..Secret::default() };
    assert_eq!(read_data(&installed), Ok(empty));
}

#[test]
fn foreign_secrets_are_refused() {
    let now = unix_now();
    let mut opaque = tls_secret(&fresh(now, 365));
    opaque.type_ = Some(OPAQUE_SECRET_TYPE.to_owned());
    assert!(read_data(&opaque).is_ok());
    let mut docker = tls_secret(&fresh(now, 365));
    docker.type_ = Some("kubernetes.io/dockerconfigjson".to_owned());
    assert_eq!(
        read_data(&docker).expect_err("another type").to_string(),
        "its type is kubernetes.io/dockerconfigjson, not Opaque or kubernetes.io/tls; delete \
             it or name another Secret"
    );
    let mut password = tls_secret(&fresh(now, 365));
    if let Some(data) = password.data.as_mut() {
        data.insert("password".to_owned(), ByteString(b"hunter2".to_vec()));
    }
    assert_eq!(
        read_data(&password).expect_err("a key of its own").to_string(),
        "it holds password, which gpu-policy never writes; name another Secret"
    );

    let mut cert_manager = tls_secret(&fresh(now, 365));
    if let Some(data) = cert_manager.data.as_mut() {
        data.remove(CA_KEY);
    }
    assert!(read_data(&cert_manager).expect_err("no ca.key").to_string().contains("ca.key"));

    let empty = Secret { type_: Some(TLS_SECRET_TYPE.to_owned()), ..Secret::default() };
    assert!(read_data(&empty).is_ok());
}

#[test]
fn renewal_keeps_existing_names() {
    let now = unix_now();
    let ca = generate_ca(now, CA_VALIDITY_DAYS).expect("ca");
    let leaf =
        issue(&ca.cert, &ca.key, &["Other.Example.com".to_owned(), "10.0.0.1".to_owned()], now, 1)
            .expect("leaf");
    let mut all = names();
    all.extend(san_strings(leaf.cert.as_bytes()));
    let all = dedup_names(all);
    assert!(all.iter().any(|n| n == "Other.Example.com"));
    assert!(all.iter().any(|n| n == "10.0.0.1"));
    assert_eq!(dedup_names(vec!["a".into(), "A".into(), " ".into()]), ["a"]);
}
