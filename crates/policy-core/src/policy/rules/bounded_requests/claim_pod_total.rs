//! R2 `bounded-requests` for a ResourceClaim made for a pod from one of its templates: the
//! pod's claims together stay within `maxPerPod`, whatever order the pod and its templates
//! were created in (docs/policy.md, "A pod created before its templates"). A pod admitted
//! before its templates existed was only warned; its claims, made later one by one, are each
//! judged with the others, so it never gets more GPUs than it could have asked for.
//!
//! Reads: the claim's pod claim (`resource.kubernetes.io/pod-claim-name`), its GPU requests and
//! total (as [`super::claim_requests`] counts them); its owner pod ([`ClaimInput::owner`]): each
//! `spec.resourceClaims[]` entry (`resourceClaimName`, or `resourceClaimTemplateName` and the claim
//! `status.resourceClaimStatuses` made from it) and the requests of what it names (read beside the
//! pod or from the caches); the namespace's `maxPerPod`.
//!
//! Counts the claim under review once, in place of its template, and every other entry once
//! (a claim two entries name, once); an entry naming neither, or whose claim the status says
//! was not needed, counts nothing.
//!
//! Denies, when the claim holds GPUs and is within `maxPerPod` alone (beyond that
//! `claim_requests` denies it): a total above `maxPerPod`, naming the pod, its GPU claims and
//! the total; a pod listing more than [`MAX_POD_CLAIMS`] claims (not read). Notices only: a
//! claim or template that cannot be counted (not found yet, unreadable) while the others
//! stay within the maximum; a pod that cannot be read.

use std::collections::BTreeSet;

use crate::policy::dra::Resolved;
use crate::policy::dra::allocation::read_made_for;
use crate::policy::dra::claims::DraCount;
use crate::policy::dra::owner::{ClaimOrigin, MAX_POD_CLAIMS};
use crate::policy::message::{Notice, NoticeKind, and_more};
use crate::policy::rules::rule::{ClaimInput, ClaimOwner, Findings, OwnerInput};

/// How many of the pod's GPU claims a denial names, with their counts.
const MAX_NAMED: usize = 5;

/// R2 on a claim made for a pod from its template, with the pod's other claims.
pub(super) fn check(input: &ClaimInput<'_>, findings: &mut Findings) {
    let (Some(owner), Some(made_for)) = (input.owner, read_made_for(input.object)) else {
        return;
    };
    let Some(pod_claim) = made_for.pod_claim.as_deref() else {
        return;
    };
    let maximum = input.namespace.max_per_pod;
    let own = match input.summary.gpu_total() {
        Some(DraCount::Exactly(count)) if count <= maximum => count,
        // No GPU, or over the maximum on its own (claim_requests says so).
        _ => return,
    };
    let pod = made_for.pod.as_str();
    let owner = match owner {
        ClaimOwner::Read(owner) => owner,
        ClaimOwner::NotFound => {
            findings.notices.push(uncounted_pod(&format!(
                "its pod {pod:?} was not found with the UID it was made for"
            )));
            return;
        }
        ClaimOwner::Unreadable(why) => {
            findings.notices.push(uncounted_pod(&format!("cannot read its pod {pod:?}: {why}")));
            return;
        }
    };
    let entries = match owner.entries {
        Ok(entries) => entries,
        Err(listed) => {
            findings.violations.push(format!(
                "pod {pod:?} lists {listed} claims, more than the {MAX_POD_CLAIMS} gpu-policy \
                 counts against the maximum of GPUs per pod; use fewer claims in the pod"
            ));
            return;
        }
    };
    let mut counted = Counted {
        total: DraCount::Exactly(own),
        named: vec![(pod_claim.to_owned(), DraCount::Exactly(own), true)],
        uncounted: Vec::new(),
    };
    let mut claims_seen = BTreeSet::new();
    for entry in entries {
        match entry.origin {
            ClaimOrigin::UnderReview | ClaimOrigin::Nothing => {}
            ClaimOrigin::Claim(name) => {
                if claims_seen.insert(name) {
                    counted.add(entry.name, claim(owner, name));
                }
            }
            ClaimOrigin::Template { template, generated } => {
                let made = generated.map(|name| claim(owner, name));
                let resolved = match made {
                    Some(Resolved::Known(summary)) => Resolved::Known(summary),
                    _ => owner.claims.resource_claim_template(owner.pod.namespace_name, template),
                };
                let resolved = match resolved {
                    Resolved::Unknown => Resolved::Unreadable(format!(
                        "ResourceClaimTemplate {template:?} not found"
                    )),
                    other => other,
                };
                counted.add(entry.name, resolved);
            }
        }
    }
    let above = match counted.total {
        DraCount::Exactly(total) => total > maximum,
        DraCount::All => true,
    };
    if above {
        findings.violations.push(counted.denial(pod, maximum));
    } else if let Some(first) = counted.uncounted.first() {
        let others = counted.uncounted.len() - 1;
        let more = if others == 0 { String::new() } else { format!(" ({})", and_more(others)) };
        findings.notices.push(Notice::new(
            NoticeKind::UncountedPodClaims,
            format!("bounded-requests: {first}{more}"),
        ));
    }
}

/// The ResourceClaim `name` of the pod's namespace; one that is not found is named.
fn claim(owner: &OwnerInput<'_>, name: &str) -> Resolved {
    match owner.claims.resource_claim(owner.pod.namespace_name, name) {
        Resolved::Unknown => Resolved::Unreadable(format!("ResourceClaim {name:?} not found")),
        other => other,
    }
}

/// The notice of a claim whose pod was not read.
fn uncounted_pod(why: &str) -> Notice {
    Notice::new(
        NoticeKind::UncountedPodClaims,
        format!("bounded-requests: claim counted alone: {why}"),
    )
}

/// The pod's claims, as counted so far.
struct Counted {
    total: DraCount,
    /// The pod claims with GPUs: (name, count, the claim under review).
    named: Vec<(String, DraCount, bool)>,
    /// The pod claims not counted, and why.
    uncounted: Vec<String>,
}

impl Counted {
    fn add(&mut self, pod_claim: &str, resolved: Resolved) {
        match resolved {
            Resolved::Known(summary) => {
                if let Some(count) = summary.gpu_total() {
                    self.total = self.total.plus(count);
                    self.named.push((pod_claim.to_owned(), count, false));
                }
            }
            Resolved::Unknown => self.uncounted.push(format!("claim {pod_claim:?} not counted")),
            Resolved::Unreadable(why) => {
                self.uncounted.push(format!("claim {pod_claim:?} not counted: {why}"))
            }
        }
    }

    /// `pod "p" would get 16 GPUs from its claims "a" 8 (this claim), "b" 8, ...`: the GPU claims
    /// named (at most [`MAX_NAMED`]), the rest counted.
    fn denial(&self, pod: &str, maximum: u64) -> String {
        let mut listed: Vec<String> = self
            .named
            .iter()
            .take(MAX_NAMED)
            .map(|(name, count, this)| {
                let this = if *this { " (this claim)" } else { "" };
                format!("{name:?} {count}{this}")
            })
            .collect();
        if self.named.len() > MAX_NAMED {
            listed.push(and_more(self.named.len() - MAX_NAMED));
        }
        format!(
            "pod {pod:?} would get {} GPUs from its claims {}, above the maximum of {maximum} \
             per pod here; lower the claims' counts or split the pod",
            self.total,
            listed.join(", ")
        )
    }
}

#[cfg(test)]
mod tests;
