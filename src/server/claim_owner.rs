//! The reads of a ResourceClaim's review before it is evaluated:
//! docs/architecture.md, "Where cluster facts enter"; what a forged review
//! learns: docs/security.md, "What a forged review can make the server do,
//! and learn".

use std::time::Duration;

use tokio::sync::SemaphorePermit;
use tokio::time::Instant;

use crate::admission::AdmissionRequest;
use crate::admission::owner::{OwnerRead, claims_to_read, pod_uid, read_claim};
use crate::cluster::{claim_text, pod_text};
use crate::policy::ClaimFacts;
use crate::policy::dra::allocation::MadeFor;
use crate::settings::Settings;
use crate::telemetry::bounded_field;

use super::cluster_reads::{Caller, ClusterReads};
use super::record::{NAME_BYTES, NAMESPACE_BYTES, UID_BYTES};

/// The reads of one claim, together: well within the API server's webhook
/// timeout (10 s by default). Past it the claim is judged with what was
/// read.
pub const OWNER_READ_BUDGET: Duration = Duration::from_secs(2);

const NO_ALLOWANCE: &str = "too many claims from this caller at once";

const NO_TURN: &str = "too many claims' pods being read at once";

fn unreadable(why: &str) -> OwnerRead {
    OwnerRead::Unreadable(why.to_owned())
}

pub struct OwnerReading<'s> {
    pub read: OwnerRead,
    _turn: Option<SemaphorePermit<'s>>,
}

pub struct ReadContext<'s> {
    /// None with `--no-cluster`.
    pub client: Option<&'s kube::Client>,
    pub reads: &'s ClusterReads,
    pub settings: &'s Settings,
    /// Which claims and templates need no read.
    pub claims: Option<&'s dyn ClaimFacts>,
}

/// The pod `namespace/made_for.pod`, as read, with its claims and
/// templates the caches do not know.
pub async fn read<'s>(
    context: ReadContext<'s>,
    caller: Caller,
    request: &AdmissionRequest<'_>,
    namespace: String,
    made_for: MadeFor,
) -> Option<OwnerReading<'s>> {
    let deadline = Instant::now() + OWNER_READ_BUDGET;
    let reads = context.reads;
    let (read, turn) = match context.client {
        None => (Ok(unreadable("no cluster connection (--no-cluster)")), None),
        Some(client) => {
            match tokio::time::timeout_at(deadline, reads.owners_at_once.acquire()).await {
                Ok(Ok(turn)) if reads.pod_read(caller) => {
                    // Boxed: the client's futures are some KiB, else moved
                    // with every request's. The pod's claims are read in the
                    // version this one came in: one the API server serves.
                    let version = request.kind.version.as_ref();
                    let read = Box::pin(read_pod(
                        client, &context, caller, version, &namespace, &made_for, deadline,
                    ));
                    (read.await, Some(turn))
                }
                Ok(Ok(_)) => (Ok(unreadable(NO_ALLOWANCE)), None),
                _ => (Ok(unreadable(NO_TURN)), None),
            }
        }
    };
    // Cut as on the decision line.
    let namespace = &*bounded_field(&namespace, NAMESPACE_BYTES);
    let pod = &*bounded_field(&made_for.pod, NAME_BYTES);
    let request_uid = &*bounded_field(&request.uid, UID_BYTES);
    let read = match read {
        Ok(read) => read,
        Err(OtherPod { uid: other_uid }) => {
            let claim_pod_uid = &*bounded_field(&made_for.pod_uid, UID_BYTES);
            tracing::warn!(
                namespace, pod, uid = request_uid, pod_uid = %other_uid, claim_pod_uid,
                "the pod of that name is not the one the ResourceClaim was made for; the claim \
                 is admitted unchanged"
            );
            // The answer of a pod not found: see OwnerRead::NotFound.
            return Some(OwnerReading { read: OwnerRead::NotFound, _turn: turn });
        }
    };
    match &read {
        OwnerRead::Read { .. } => {}
        OwnerRead::NotFound => tracing::warn!(
            namespace,
            pod,
            uid = request_uid,
            "the pod a ResourceClaim is made for was not found; the claim is admitted unchanged"
        ),
        OwnerRead::Unreadable(error) => tracing::warn!(
            namespace, pod, uid = request_uid, %error,
            "cannot read the pod a ResourceClaim is made for; the claim is admitted unchanged"
        ),
    }
    let reading = OwnerReading { read, _turn: turn };
    Some(reading)
}

#[derive(Debug, thiserror::Error)]
#[error("the pod of that name has the UID {uid}, not the one the claim names")]
struct OtherPod {
    uid: String,
}

async fn read_pod(
    client: &kube::Client,
    context: &ReadContext<'_>,
    caller: Caller,
    version: &str,
    namespace: &str,
    made_for: &MadeFor,
    deadline: Instant,
) -> Result<OwnerRead, OtherPod> {
    let text = match pod_text(client, namespace, &made_for.pod, deadline, OWNER_READ_BUDGET).await {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(OwnerRead::NotFound),
        Err(error) => return Ok(OwnerRead::Unreadable(error.to_string())),
    };
    if let Some(uid) = pod_uid(&text)
        && uid != made_for.pod_uid
    {
        return Err(OtherPod { uid });
    }
    let (generated, to_read) =
        claims_to_read(&text, made_for, namespace, context.settings, context.claims);
    let mut claims = Vec::with_capacity(to_read.len());
    for (kind, name) in to_read {
        // Past the deadline nothing is sent, nor taken from the allowance.
        let text = if Instant::now() >= deadline {
            Err(format!("no answer within {OWNER_READ_BUDGET:?}"))
        } else if context.reads.pod_read(caller) {
            claim_text(client, version, namespace, kind, &name, deadline, OWNER_READ_BUDGET)
                .await
                .map_err(|error| error.to_string())
        } else {
            Err(NO_ALLOWANCE.to_owned())
        };
        claims.push(read_claim(kind, name, text));
    }
    Ok(OwnerRead::Read { text, generated, claims })
}
