//! The namespace guard's look at a namespace being opted in (or
//! tightened), each object evaluated on its own. Its bounds, against forged
//! reviews: docs/security.md, "What a forged review can make the server do,
//! and learn".

use std::time::Duration;

use crate::admission::namespace_guard::{self, Disclosure, OptInFindings};
use crate::admission::{AdmissionRequest, RawObject};
use crate::cluster::{self, Paged, Pages};
use crate::document::Document;
use crate::policy::ClusterFacts;
use crate::settings::Settings;

use crate::telemetry::bounded_field;

use super::cluster_reads::{Caller, ClusterReads, NAMESPACE_PAGE, NAMESPACE_PAGES};
use super::record::NAMESPACE_BYTES;

/// Pods and claims together; past it the change is admitted without the
/// warnings.
const LOOK_BUDGET: Duration = Duration::from_secs(2);

const PAGES: Pages = Pages { size: NAMESPACE_PAGE, max: NAMESPACE_PAGES };

pub struct NamespaceLook<'a> {
    /// None with `--no-cluster`: no look.
    pub client: Option<&'a kube::Client>,
    pub cluster: Option<&'a dyn ClusterFacts>,
    pub reads: &'a ClusterReads,
    /// The version of `resource.k8s.io` the caches watch; None: no claims
    /// are looked at.
    pub dra_version: Option<&'static str>,
    pub disclosure: Disclosure,
}

/// When a namespace is opted in or tightened, warns about the pods and
/// claims already there, as Pod Security Admission does.
pub async fn opt_in_warnings(
    look: NamespaceLook<'_>,
    caller: Caller,
    request: &AdmissionRequest<'_>,
    settings: &Settings,
) -> Vec<String> {
    let old = request.old_object.as_ref().map(RawObject::json);
    let new = request.object.as_ref().map(RawObject::json);
    let (Some(mode), Some(client)) = (namespace_guard::tightened_to(old, new), look.client) else {
        return Vec::new();
    };
    let namespace = &*request.name;
    // Cut as on the decision line.
    let logged = &*bounded_field(namespace, NAMESPACE_BYTES);
    let _look = match look.reads.namespace_look(caller) {
        Ok(permit) => permit,
        Err(refused) => {
            tracing::info!(namespace = logged, caller = %caller.0, ?refused, "no opt-in look");
            return vec![namespace_guard::look_skipped(namespace)];
        }
    };
    let cluster = look.cluster;
    let deadline = tokio::time::Instant::now() + LOOK_BUDGET;
    let mut findings = OptInFindings::default();
    // A page is read without an await: past the budget, the rest of it is
    // skipped.
    let within_budget = || tokio::time::Instant::now() < deadline;
    let pods = cluster::pods_in_pages(client, namespace, PAGES, |text| {
        if !within_budget() {
            return;
        }
        if let Ok(pod) = Document::parse(text) {
            findings.add_pod(pod.root(), namespace, settings, cluster);
        }
    });
    let pods = match tokio::time::timeout_at(deadline, pods).await {
        Ok(Ok(_)) if !within_budget() => {
            tracing::warn!(namespace = logged, budget = ?LOOK_BUDGET, "no opt-in warning: reading the pods took too long");
            return Vec::new();
        }
        Ok(Ok(paged)) => paged,
        Ok(Err(error)) => {
            tracing::warn!(namespace = logged, %error, "no opt-in warning: the pods were not listed");
            return Vec::new();
        }
        Err(_) => {
            tracing::warn!(namespace = logged, budget = ?LOOK_BUDGET, "no opt-in warning: listing the pods took too long");
            return Vec::new();
        }
    };
    let claims = async {
        let Some(version) = look.dra_version else {
            return Ok(Paged::Complete);
        };
        cluster::claims_in_pages(client, version, namespace, PAGES, |kind, text| {
            if !within_budget() {
                return;
            }
            if let Ok(claim) = Document::parse(text) {
                findings.add_claim(kind, claim.root(), namespace, settings, cluster);
            }
        })
        .await
    };
    let claims = match tokio::time::timeout_at(deadline, claims).await {
        Ok(Ok(paged)) => paged,
        Ok(Err(error)) => {
            tracing::warn!(namespace = logged, %error, "no opt-in warning about claims: not listed");
            Paged::Complete
        }
        Err(_) => {
            tracing::warn!(namespace = logged, budget = ?LOOK_BUDGET, "no opt-in warning about claims: listing them took too long");
            Paged::Complete
        }
    };
    if pods.and(claims) == Paged::Truncated {
        let read = usize::try_from(PAGES.size).unwrap_or(usize::MAX).saturating_mul(PAGES.max);
        findings.read_only(read);
    }
    findings.warnings(mode, namespace, look.disclosure)
}
