//! R4 in the server: the one GET of the pod a ResourceClaim is made for,
//! before the claim is evaluated (`admission::claim_owner_to_read` names
//! it), so the rule reads the floors the pod recorded without touching the
//! network.
//!
//! A pod that cannot be read never gets its claim denied: the claim is
//! admitted unchanged, with a warning (the rule's notice) and this log line.
//!
//! Anyone may forge a claim's review naming any pod: the read is taken
//! from the caller's allowance (`ClusterReads::pod_read`), and the answer
//! is the same whether no pod of that name exists or another one does
//! ([`OwnerPod::NotFound`]); only the log line tells them apart.

use std::time::Duration;

use crate::admission::AdmissionRequest;

use crate::admission::{Endpoint, claim_owner_to_read};
use crate::cluster::pod_metadata;
use crate::policy::dra::allocation::OwnerPod;
use crate::telemetry::bounded_field;

use super::cluster_reads::{Caller, ClusterReads};
use super::record::{NAME_BYTES, NAMESPACE_BYTES, UID_BYTES};

/// How long the read may take: well within the API server's webhook
/// timeout (10 s by default), and a claim is admitted unchanged past it.
pub const OWNER_READ_BUDGET: Duration = Duration::from_secs(2);

/// Why a caller's claim was admitted without reading its pod: its
/// allowance of reads is spent.
const NO_ALLOWANCE: &str = "too many claims from this caller at once";

/// The pod the claim in `request` is made for, as read; None when the
/// request is not a claim made for a pod on the mutating webhook.
/// `client`: None with `--no-cluster`.
pub async fn read(
    client: Option<&kube::Client>,
    reads: &ClusterReads,
    caller: Caller,
    request: &AdmissionRequest<'_>,
    endpoint: Endpoint,
) -> Option<OwnerPod> {
    let (namespace, made_for) = claim_owner_to_read(request, endpoint)?;
    let pod = made_for.pod.as_str();
    let read = match client {
        None => OwnerPod::Unreadable("no cluster connection (--no-cluster)".to_owned()),
        Some(_) if !reads.pod_read(caller) => OwnerPod::Unreadable(NO_ALLOWANCE.to_owned()),
        // Boxed: the client's request is a future of some 2 KiB, which
        // would otherwise sit in (and be moved with) the future of every
        // request the webhook answers, claim or not.
        Some(client) => {
            match Box::pin(pod_metadata(client, &namespace, pod, OWNER_READ_BUDGET)).await {
                Ok(Some(metadata)) => OwnerPod::Read {
                    uid: metadata.uid,
                    annotations: metadata.annotations,
                },
                Ok(None) => OwnerPod::NotFound,
                Err(error) => OwnerPod::Unreadable(error),
            }
        }
    };
    // The names and UIDs come from the review: cut as on the decision line.
    let namespace = &*bounded_field(&namespace, NAMESPACE_BYTES);
    let pod = &*bounded_field(pod, NAME_BYTES);
    let claim_pod_uid = &*bounded_field(&made_for.pod_uid, UID_BYTES);
    let request_uid = &*bounded_field(&request.uid, UID_BYTES);
    match &read {
        OwnerPod::Read { uid, .. } if *uid != made_for.pod_uid => {
            tracing::warn!(
                namespace, pod, uid = request_uid, pod_uid = %uid, claim_pod_uid,
                "the pod of that name is not the one the ResourceClaim was made for; the claim \
                 is admitted unchanged"
            );
            // The answer of a pod not found: see OwnerPod::NotFound.
            return Some(OwnerPod::NotFound);
        }
        OwnerPod::Read { .. } => {}
        OwnerPod::NotFound => tracing::warn!(
            namespace,
            pod,
            uid = request_uid,
            "the pod a ResourceClaim is made for was not found; the claim is admitted unchanged"
        ),
        OwnerPod::Unreadable(error) => tracing::warn!(
            namespace, pod, uid = request_uid, %error,
            "cannot read the pod a ResourceClaim is made for; the claim is admitted unchanged"
        ),
    }
    Some(read)
}
