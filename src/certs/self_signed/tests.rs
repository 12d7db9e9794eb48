use std::fs;
use std::net::IpAddr;

use super::*;
use crate::certs::pki::DAY;
use crate::certs::testing::{EXTRA, generate_into, read, sans};
use crate::certs::{CertificateResolver, DEFAULT_DNS_NAMES};

#[test]
fn generates_three_files_with_a_private_key() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("certs");
    let files = generate_into(&dir);

    assert!(!files.reused);
    assert_eq!(files.ca, dir.join("ca.crt"));
    assert_eq!(files.cert, dir.join("tls.crt"));
    assert_eq!(files.key, dir.join("tls.key"));
    for path in [&files.ca, &files.cert, &files.key] {
        assert!(path.is_file(), "{} missing", path.display());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = fs::metadata(&files.key).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Only the three files: no temporary file is left behind.
    assert_eq!(fs::read_dir(&dir).expect("ls").count(), 3);
}

#[test]
fn serving_cert_covers_default_names_ip_and_extra_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = ensure_self_signed(tmp.path(), &[EXTRA.to_owned()]).expect("generate");
    let (dns, ips) = sans(&read(&files.cert));
    for name in DEFAULT_DNS_NAMES.iter().copied().chain([EXTRA]) {
        assert!(dns.iter().any(|d| d == name), "{name} not in {dns:?}");
    }
    assert_eq!(ips, vec![IpAddr::from([127, 0, 0, 1])]);

    let der = CertificateDer::from_pem_slice(&read(&files.cert)).expect("pem");
    let (_, leaf) = x509_parser::parse_x509_certificate(&der).expect("x509");
    let ca_der = CertificateDer::from_pem_slice(&read(&files.ca)).expect("pem");
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).expect("x509");
    assert_eq!(leaf.issuer().to_string(), ca.subject().to_string());
    assert_eq!(ca.subject().to_string(), "CN=gpu-policy CA");
    assert!(ca.is_ca());
    assert!(!leaf.is_ca());
    let lifetime = leaf.validity().not_after.timestamp() - unix_now();
    assert!((364 * DAY..=366 * DAY).contains(&lifetime), "{lifetime}");
    let ca_lifetime = ca.validity().not_after.timestamp() - unix_now();
    assert!((3649 * DAY..=3651 * DAY).contains(&ca_lifetime));
}
#[test]
fn second_call_reuses_the_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let extra = [EXTRA.to_owned()];
    let first = ensure_self_signed(tmp.path(), &extra).expect("first");
    let before = [read(&first.ca), read(&first.cert), read(&first.key)];

    let second = ensure_self_signed(tmp.path(), &extra).expect("second");
    assert!(second.reused);
    assert_eq!([read(&second.ca), read(&second.cert), read(&second.key)], before);

    // Default names are always wanted, so asking for fewer still reuses.
    assert!(ensure_self_signed(tmp.path(), &[]).expect("third").reused);
}

#[test]
fn uncovered_extra_name_regenerates() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let first = generate_into(tmp.path());
    let before = read(&first.cert);

    let second = ensure_self_signed(tmp.path(), &[EXTRA.to_owned()]).expect("second");
    assert!(!second.reused);
    assert_ne!(read(&second.cert), before);
    assert!(sans(&read(&second.cert)).0.iter().any(|d| d == EXTRA));
}

#[test]
fn extra_ip_becomes_an_ip_san_and_is_reused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let extra = ["10.0.0.7".to_owned(), " ".to_owned()];
    let first = ensure_self_signed(tmp.path(), &extra).expect("first");
    let (_, ips) = sans(&read(&first.cert));
    assert_eq!(ips, vec![IpAddr::from([127, 0, 0, 1]), IpAddr::from([10, 0, 0, 7])]);
    assert!(ensure_self_signed(tmp.path(), &extra).expect("second").reused);
}

#[test]
fn damaged_or_mismatched_files_regenerate() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = generate_into(tmp.path());

    fs::write(&files.key, b"garbage").expect("write");
    let again = generate_into(tmp.path());
    assert!(!again.reused);
    CertificateResolver::load(&again.cert, &again.key).expect("regenerated pair loads");

    // A key from another generation does not match tls.crt.
    let other = tempfile::tempdir().expect("tempdir");
    let other = generate_into(other.path());
    fs::copy(&other.key, &files.key).expect("copy");
    assert!(!generate_into(tmp.path()).reused);

    // A serving certificate from another CA does not chain to ca.crt.
    let current_ca = read(&files.ca);
    fs::copy(&other.ca, &files.ca).expect("copy");
    let replaced = generate_into(tmp.path());
    assert!(!replaced.reused);
    assert_ne!(read(&replaced.ca), current_ca);
    assert!(generate_into(tmp.path()).reused);
}

#[test]
fn expiring_serving_cert_regenerates() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = generate_into(tmp.path());
    let (ca, short) = generate(&wanted_names(&[]), unix_now(), 10).expect("generate");
    fs::write(&files.ca, &ca.cert).expect("write");
    fs::write(&files.cert, &short.cert).expect("write");
    fs::write(&files.key, &short.key).expect("write");

    let again = generate_into(tmp.path());
    assert!(!again.reused);
    let resolver = CertificateResolver::load(&again.cert, &again.key).expect("load");
    assert!(resolver.not_after() - unix_now() > 300 * DAY);
}
