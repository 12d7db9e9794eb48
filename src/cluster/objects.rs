//! One object read by name, as the API server sends it, while a claim's
//! review waits (`server::claim_owner`): the Pod a ResourceClaim is made
//! for, and the claims and templates it names that the caches do not know
//! yet. Pods are not watched (a cache of every pod would cost far more than
//! one GET per claim made). Each read is within the review's deadline, its
//! body at most [`MAX_OBJECT_BYTES`].

use std::time::Duration;

use axum::http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use kube::Client;
use kube::core::Status;
use tokio::time::Instant;

// An API server's message may span lines; a log or a warning takes one.
use crate::manifest::one_line;
use crate::policy::dra::claims::ClaimKind;

use super::dra_watches::{DRA_GROUP, DRA_VERSIONS};
use super::names::{is_dns_label, is_dns_subdomain};

/// The most bytes of one object read. etcd stores an object of at most
/// 1.5 MiB (its `--max-request-bytes`), managedFields included; the same
/// object as JSON, with the defaults the API server fills in, stays well
/// within this. A larger answer is not read to its end.
pub const MAX_OBJECT_BYTES: usize = 8 << 20;

/// None when it does not exist (404), or cannot (a name no pod may have:
/// no request). `budget`, the time all the review's reads were given, is
/// named in the reason when `deadline` passes.
pub async fn pod_text(
    client: &Client,
    namespace: &str,
    name: &str,
    deadline: Instant,
    budget: Duration,
) -> Result<Option<String>, ObjectReadError> {
    if !is_dns_label(namespace) || !is_dns_subdomain(name) {
        // No pod has that name (and it would change the path).
        return Ok(None);
    }
    let path = format!("/api/v1/namespaces/{namespace}/pods/{name}");
    object_text(client, path, deadline, budget).await
}

/// The ResourceClaim or ResourceClaimTemplate `namespace/name` of
/// `resource.k8s.io/<version>` as JSON text, as [`pod_text`] reads a pod.
/// A version not among those read is never asked for: None.
pub async fn claim_text(
    client: &Client,
    version: &str,
    namespace: &str,
    kind: ClaimKind,
    name: &str,
    deadline: Instant,
    budget: Duration,
) -> Result<Option<String>, ObjectReadError> {
    if !is_dns_label(namespace) || !is_dns_subdomain(name) || !DRA_VERSIONS.contains(&version) {
        return Ok(None);
    }
    let resource = kind.resource();
    let path = format!("/apis/{DRA_GROUP}/{version}/namespaces/{namespace}/{resource}/{name}");
    object_text(client, path, deadline, budget).await
}

/// One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectReadError {
    #[error("{0}")]
    Request(String),
    #[error("the API server's answer is over {} MiB", MAX_OBJECT_BYTES >> 20)]
    TooLarge,
    #[error("the API server answered {code} {said}")]
    Status { code: u16, said: String },
    #[error("the API server's answer is not UTF-8")]
    NotUtf8,
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

impl ObjectReadError {
    fn request(error: &dyn std::fmt::Display) -> Self {
        Self::Request(one_line(&error.to_string()))
    }
}

async fn object_text(
    client: &Client,
    path: String,
    deadline: Instant,
    budget: Duration,
) -> Result<Option<String>, ObjectReadError> {
    let request = Request::get(path)
        .header(header::ACCEPT, "application/json")
        .body(kube::client::Body::empty())
        .map_err(|error| ObjectReadError::request(&error))?;
    let read = async {
        let response =
            client.send(request).await.map_err(|error| ObjectReadError::request(&error))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_OBJECT_BYTES)
            .collect()
            .await
            .map_err(|error| match error.downcast::<http_body_util::LengthLimitError>() {
                Ok(_) => ObjectReadError::TooLarge,
                Err(error) => ObjectReadError::request(&error),
            })?
            .to_bytes();
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let said = match serde_json::from_slice::<Status>(&body) {
                Ok(status) => format!("{}: {}", status.reason, status.message),
                Err(_) => format!(": {}", String::from_utf8_lossy(&body)),
            };
            return Err(ObjectReadError::Status { code: status.as_u16(), said: one_line(&said) });
        }
        String::from_utf8(body.to_vec()).map(Some).map_err(|_| ObjectReadError::NotUtf8)
    };
    tokio::time::timeout_at(deadline, read).await.unwrap_or(Err(ObjectReadError::TimedOut(budget)))
}

#[cfg(test)]
mod tests;
