//! One Pod's metadata, read once: its UID and annotations, for the
//! mutating webhook on a ResourceClaim's CREATE (a claim the resource
//! claim controller makes for a pod names the pod as its owner; what the
//! pod asked of it is in the pod's annotations).
//!
//! Pods are not watched (a cache of every pod of the cluster would cost far
//! more than one GET per claim made), so this is an API call on the request
//! path: bounded by the caller's budget, metadata only (kube asks for
//! `PartialObjectMetadata`, so the pod's spec and status are never
//! transferred), and every failure is one line for the caller to decide on.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::{Client, ResourceExt};

// An API server's message may span lines; a log or a warning takes one.
use crate::manifest::one_line;

use super::names::{is_dns_label, is_dns_subdomain};

/// What is read of a Pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodMetadata {
    pub uid: String,
    pub annotations: BTreeMap<String, String>,
}

/// The metadata of the Pod `namespace/name`, within `budget`: None when it
/// does not exist (404), or cannot (a name no pod may have: no request); the reason on one line on any other error, or when
/// the budget runs out (short: a warning carries it, after the pod's name).
pub async fn pod_metadata(
    client: &Client,
    namespace: &str,
    name: &str,
    budget: Duration,
) -> Result<Option<PodMetadata>, String> {
    if !is_dns_label(namespace) || !is_dns_subdomain(name) {
        // No pod has that name (and it would change the path).
        return Ok(None);
    }
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    match tokio::time::timeout(budget, api.get_metadata_opt(name)).await {
        Ok(Ok(None)) => Ok(None),
        Ok(Ok(Some(pod))) => Ok(Some(PodMetadata {
            uid: pod.uid().unwrap_or_default(),
            annotations: pod.metadata.annotations.unwrap_or_default(),
        })),
        Ok(Err(kube::Error::Api(status))) => Err(one_line(&format!(
            "the API server answered {} {}: {}",
            status.code, status.reason, status.message
        ))),
        Ok(Err(error)) => Err(one_line(&error.to_string())),
        Err(_) => Err(format!("no answer within {budget:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_one_line() {
        assert_eq!(
            one_line("cannot read: boom\n  at line 2\r\n"),
            "cannot read: boom at line 2"
        );
    }
}
