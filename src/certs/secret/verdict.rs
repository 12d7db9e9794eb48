//! The pure verdicts on a certificate Secret: may this route manage it,
//! and does its pair serve, or must the serving certificate be renewed or
//! everything regenerated. No API calls, no files, no clock.

use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::Secret;
use rcgen::{KeyPair, PublicKeyData as _};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::{CA_KEY, OPAQUE_SECRET_TYPE, TLS_SECRET_TYPE};
use crate::certs::pki::{
    DAY, SERVING_VALIDITY_DAYS, check_names, dedup_names, parse_pair, san_strings, verify_chain,
};
use crate::certs::{CA_FILE, CERT_FILE, KEY_FILE};

/// The four data entries of the Secret.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct TlsData {
    pub(super) ca_crt: Vec<u8>,
    pub(super) ca_key: Vec<u8>,
    pub(super) tls_crt: Vec<u8>,
    pub(super) tls_key: Vec<u8>,
}

impl fmt::Debug for TlsData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsData")
            .field("ca_crt", &String::from_utf8_lossy(&self.ca_crt))
            .field("tls_crt", &String::from_utf8_lossy(&self.tls_crt))
            .finish_non_exhaustive()
    }
}

impl TlsData {
    /// Every entry empty: the Secret as the install creates it.
    pub(super) fn is_empty(&self) -> bool {
        self.entries().iter().all(|(_, value)| value.is_empty())
    }

    pub(super) fn entries(&self) -> [(&'static str, &[u8]); 4] {
        [
            (CA_FILE, &self.ca_crt),
            (CA_KEY, &self.ca_key),
            (CERT_FILE, &self.tls_crt),
            (KEY_FILE, &self.tls_key),
        ]
    }
}

/// What the Secret's pair needs.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Good,
    /// Nothing in it yet: a new CA and serving certificate fill it.
    Empty,
    RenewLeaf(String),
    RegenerateAll(String),
}

/// The data keys the route writes; a Secret with any other is not its own.
const KEYS: [&str; 4] = [CA_FILE, CA_KEY, CERT_FILE, KEY_FILE];

/// The Secret's data, if this route may manage it: of type `Opaque` (as
/// the install creates it) or `kubernetes.io/tls`, with no key but the
/// route's own.
pub(super) fn read_data(secret: &Secret) -> Result<TlsData, String> {
    let type_ = secret.type_.as_deref().unwrap_or(OPAQUE_SECRET_TYPE);
    if type_ != OPAQUE_SECRET_TYPE && type_ != TLS_SECRET_TYPE {
        return Err(format!(
            "its type is {type_}, not {OPAQUE_SECRET_TYPE} or {TLS_SECRET_TYPE}; delete it or name \
             another Secret"
        ));
    }
    let foreign = secret
        .data
        .iter()
        .flatten()
        .map(|(key, _)| key.as_str())
        .find(|key| !KEYS.contains(key));
    if let Some(key) = foreign {
        return Err(format!(
            "it holds {key}, which gpu-policy never writes; name another Secret"
        ));
    }
    let get = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .map(|value| value.0.clone())
            .unwrap_or_default()
    };
    let data = TlsData {
        ca_crt: get(CA_FILE),
        ca_key: get(CA_KEY),
        tls_crt: get(CERT_FILE),
        tls_key: get(KEY_FILE),
    };
    if data.ca_key.is_empty() && !(data.ca_crt.is_empty() && data.tls_crt.is_empty()) {
        return Err(format!(
            "it holds no {CA_KEY}, so gpu-policy did not make it (cert-manager?); mount it and \
             pass --tls-cert/--tls-key instead"
        ));
    }
    Ok(data)
}

/// What the pair in `data` needs to serve `names` at `now`.
pub(super) fn evaluate(data: &TlsData, names: &[String], now: i64) -> Verdict {
    if data.is_empty() {
        return Verdict::Empty;
    }
    if data.ca_crt.is_empty() && data.ca_key.is_empty() {
        return Verdict::RegenerateAll("the Secret holds no CA".to_owned());
    }
    let ca = match check_ca(data, now) {
        Ok(ca) => ca,
        Err(reason) => return Verdict::RegenerateAll(reason),
    };
    match check_leaf(data, ca, names, now) {
        Ok(()) => Verdict::Good,
        Err(reason) => Verdict::RenewLeaf(reason),
    }
}

/// The names a renewed serving certificate covers: the wanted ones and
/// those the current one already covers, so no client loses its name.
pub(super) fn renewal_names(wanted: &[String], data: &TlsData) -> Vec<String> {
    let mut names = wanted.to_vec();
    names.extend(san_strings(&data.tls_crt));
    dedup_names(names)
}

/// The CA certificate, when it and its key can sign a full-length serving
/// certificate.
fn check_ca(data: &TlsData, now: i64) -> Result<CertificateDer<'static>, String> {
    let ca = CertificateDer::from_pem_slice(&data.ca_crt).map_err(|e| format!("{CA_FILE}: {e}"))?;
    let (_, x509) =
        x509_parser::parse_x509_certificate(&ca).map_err(|e| format!("{CA_FILE}: {e}"))?;
    if !x509.is_ca() {
        return Err(format!("{CA_FILE} is not a CA certificate"));
    }
    let validity = x509.validity();
    if validity.not_before.timestamp() > now {
        return Err(format!("{CA_FILE} is not valid yet"));
    }
    let remaining = validity.not_after.timestamp().saturating_sub(now);
    if remaining < SERVING_VALIDITY_DAYS * DAY {
        return Err(format!(
            "{CA_FILE} expires in {} days, before a new serving certificate would",
            remaining / DAY
        ));
    }
    let key = std::str::from_utf8(&data.ca_key)
        .map_err(|e| e.to_string())
        .and_then(|pem| KeyPair::from_pem(pem).map_err(|e| e.to_string()))
        .map_err(|e| format!("{CA_KEY}: {e}"))?;
    if key.der_bytes() != x509.public_key().subject_public_key.data.as_ref() {
        return Err(format!("{CA_KEY} does not match {CA_FILE}"));
    }
    Ok(ca.clone())
}

/// Ok when the serving pair loads, verifies against `ca`, covers `names`
/// and has at least a third of its life left.
fn check_leaf(
    data: &TlsData,
    ca: CertificateDer<'_>,
    names: &[String],
    now: i64,
) -> Result<(), String> {
    let pair = parse_pair(
        &data.tls_crt,
        &data.tls_key,
        Path::new(CERT_FILE),
        Path::new(KEY_FILE),
    )
    .map_err(|e| e.to_string())?;
    verify_chain(ca, &pair.key.cert, now)
        .map_err(|e| format!("{CERT_FILE} does not verify against {CA_FILE}: {e}"))?;
    let Some(leaf) = pair.key.cert.first() else {
        return Err(format!("{CERT_FILE}: no certificate"));
    };
    let (_, x509) =
        x509_parser::parse_x509_certificate(leaf).map_err(|e| format!("{CERT_FILE}: {e}"))?;
    check_names(&x509, names).map_err(|e| format!("{CERT_FILE} {e}"))?;
    let validity = x509.validity();
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    let life = not_after.saturating_sub(not_before);
    let remaining = not_after.saturating_sub(now);
    if remaining.saturating_mul(3) < life {
        return Err(format!(
            "{CERT_FILE} has less than a third of its life left ({} hours of {} days)",
            remaining / 3600,
            life / DAY
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
        let installed = Secret {
            type_: Some(OPAQUE_SECRET_TYPE.to_owned()),
            ..Secret::default()
        };
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
            read_data(&docker).expect_err("another type"),
            "its type is kubernetes.io/dockerconfigjson, not Opaque or kubernetes.io/tls; delete \
             it or name another Secret"
        );
        let mut password = tls_secret(&fresh(now, 365));
        if let Some(data) = password.data.as_mut() {
            data.insert("password".to_owned(), ByteString(b"hunter2".to_vec()));
        }
        assert_eq!(
            read_data(&password).expect_err("a key of its own"),
            "it holds password, which gpu-policy never writes; name another Secret"
        );

        let mut cert_manager = tls_secret(&fresh(now, 365));
        if let Some(data) = cert_manager.data.as_mut() {
            data.remove(CA_KEY);
        }
        assert!(
            read_data(&cert_manager)
                .expect_err("no ca.key")
                .contains("ca.key")
        );

        let empty = Secret {
            type_: Some(TLS_SECRET_TYPE.to_owned()),
            ..Secret::default()
        };
        assert!(read_data(&empty).is_ok());
    }

    #[test]
    fn renewal_keeps_existing_names() {
        let now = unix_now();
        let ca = generate_ca(now, CA_VALIDITY_DAYS).expect("ca");
        let leaf = issue(
            &ca.cert,
            &ca.key,
            &["Other.Example.com".to_owned(), "10.0.0.1".to_owned()],
            now,
            1,
        )
        .expect("leaf");
        let mut all = names();
        all.extend(san_strings(leaf.cert.as_bytes()));
        let all = dedup_names(all);
        assert!(all.iter().any(|n| n == "Other.Example.com"));
        assert!(all.iter().any(|n| n == "10.0.0.1"));
        assert_eq!(dedup_names(vec!["a".into(), "A".into(), " ".into()]), ["a"]);
    }
}
