//! The Secret I/O of the route, and writing its pair into the certificates
//! directory.

use std::collections::BTreeMap;
use std::fs;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::verdict::{self, TlsData, Unmanageable, Verdict, evaluate, renewal_names};
use super::{SecretAction, SecretError, SecretRoute};
use crate::certs::PkiError;
use crate::certs::files::{create_dir, write_atomically};
use crate::certs::pki::{SERVING_VALIDITY_DAYS, issue, parse_pair};
use crate::certs::self_signed::generate;

impl SecretRoute {
    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.config.secret.namespace)
    }

    fn secret_error(&self, verb: &'static str, error: kube::Error) -> SecretError {
        let secret = &self.config.secret;
        SecretError::Api {
            verb,
            what: format!("Secret {secret}"),
            scope: format!(
                "secrets in namespace {} (resourceName {})",
                secret.namespace, secret.name
            ),
            source: Box::new(error),
        }
    }

    fn unusable(&self, reason: Unmanageable) -> SecretError {
        SecretError::Unusable { secret: self.config.secret.clone(), reason }
    }

    /// The Secret does not exist: the install creates it, empty, and the
    /// server has no right to create Secrets.
    fn missing(&self) -> SecretError {
        SecretError::Missing { secret: self.config.secret.clone() }
    }

    /// The pair to serve: the Secret's, filled, renewed or adopted as
    /// needed.
    pub(super) async fn ensure_secret(
        &self,
        now: i64,
    ) -> Result<(SecretAction, TlsData), SecretError> {
        let api = self.secrets();
        let name = self.config.secret.name.as_str();
        let existing = api
            .get_opt(name)
            .await
            .map_err(|error| self.secret_error("get", error))?
            .ok_or_else(|| self.missing())?;
        let data = self.read_data(&existing)?;
        let (action, updated) = match evaluate(&data, &self.names, now) {
            Verdict::Good => return Ok((SecretAction::Kept, data)),
            Verdict::Empty => (SecretAction::Filled, self.generate_all(now)?),
            Verdict::RenewLeaf(reason) => {
                let names = renewal_names(&self.names, &data);
                let leaf = issue(
                    &String::from_utf8_lossy(&data.ca_crt),
                    &String::from_utf8_lossy(&data.ca_key),
                    &names,
                    now,
                    SERVING_VALIDITY_DAYS,
                )
                .map_err(|source| self.generate_error(source))?;
                let updated = TlsData {
                    tls_crt: leaf.cert.into_bytes(),
                    tls_key: leaf.key.into_bytes(),
                    ..data
                };
                (SecretAction::Renewed { reason }, updated)
            }
            Verdict::RegenerateAll(reason) => {
                (SecretAction::Regenerated { reason }, self.generate_all(now)?)
            }
        };
        let mut secret = existing;
        secret.metadata.managed_fields = None;
        let entries = secret.data.get_or_insert_with(BTreeMap::new);
        for (key, value) in updated.entries() {
            entries.insert(key.to_owned(), ByteString(value.to_vec()));
        }
        // metadata.resourceVersion is the one read: a concurrent writer
        // makes this a 409 instead of a lost update.
        match api.replace(name, &PostParams::default(), &secret).await {
            Ok(_) => Ok((action, updated)),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let winner = self.reread(&api).await?;
                Ok((SecretAction::AdoptedConflict, winner))
            }
            Err(error) => Err(self.secret_error("update", error)),
        }
    }

    async fn reread(&self, api: &Api<Secret>) -> Result<TlsData, SecretError> {
        let secret = api
            .get_opt(&self.config.secret.name)
            .await
            .map_err(|error| self.secret_error("get", error))?
            .ok_or_else(|| self.unusable(Unmanageable::Deleted))?;
        self.read_data(&secret)
    }

    fn read_data(&self, secret: &Secret) -> Result<TlsData, SecretError> {
        verdict::read_data(secret).map_err(|reason| self.unusable(reason))
    }

    fn generate_error(&self, source: PkiError) -> SecretError {
        SecretError::Generate { secret: self.config.secret.clone(), source }
    }

    fn generate_all(&self, now: i64) -> Result<TlsData, SecretError> {
        let (ca, leaf) = generate(&self.names, now, SERVING_VALIDITY_DAYS)
            .map_err(|source| self.generate_error(source))?;
        Ok(TlsData {
            ca_crt: ca.cert.into_bytes(),
            ca_key: ca.key.into_bytes(),
            tls_crt: leaf.cert.into_bytes(),
            tls_key: leaf.key.into_bytes(),
        })
    }

    /// Writes the files whose bytes differ, key first. Refuses a pair that
    /// would not load, so the resolver never sees it.
    pub(super) fn write_files(&self, data: &TlsData) -> Result<bool, SecretError> {
        let (cert, key, ca) = (self.cert_path(), self.key_path(), self.ca_path());
        let secret = || self.config.secret.clone();
        parse_pair(&data.tls_crt, &data.tls_key, &cert, &key).map_err(|source| {
            SecretError::UnloadablePair { secret: secret(), source: Box::new(source) }
        })?;
        CertificateDer::from_pem_slice(&data.ca_crt)
            .map_err(|source| SecretError::UnreadableCa { secret: secret(), source })?;
        create_dir(&self.config.certs_dir)?;
        let mut written = false;
        for (path, bytes, private) in
            [(&key, &data.tls_key, true), (&cert, &data.tls_crt, false), (&ca, &data.ca_crt, false)]
        {
            if fs::read(path).is_ok_and(|on_disk| on_disk == *bytes) {
                continue;
            }
            write_atomically(path, bytes, private)?;
            written = true;
        }
        Ok(written)
    }
}
