//! R2 `bounded-requests` for DRA objects: a ResourceClaim or ResourceClaimTemplate asks for
//! a bounded number of GPUs.
//!
//! Reads: `metadata.annotations`, the device requests ([`crate::policy::dra::claims`]);
//! `maxPerContainer`, the namespace's `maxPerPod`, the namespaces the allowlist names.
//!
//! Denies, naming the request and the fix: a GPU request with `allocationMode: All` (every
//! device of a node), or a count above `maxPerContainer`; a claim whose GPU requests together
//! exceed `maxPerPod`; `adminAccess: true` on a GPU request outside the namespaces an
//! allowlist entry names (monitoring lives there); a claim made for a pod whose claims
//! together exceed `maxPerPod` (`super::claim_pod_total`).
//!
//! Never denies a claim annotated `resource.kubernetes.io/extended-resource-claim: "true"`:
//! the scheduler makes those for `nvidia.com/gpu` limits served by DRA, checked on the pod.

use super::claim_pod_total;
use crate::kubernetes_version::{DraApi, KubernetesVersion, RequestShape};
use crate::policy::dra::claims::{ClaimSummary, DraCount};
use crate::policy::message::{Message, MessageTemplate, SEPARATOR};
use crate::policy::rules::cel::{Action, CelPolicy, Resources, Validation, Variable};
use crate::policy::rules::cel_text::{self as cel, Fill};
pub use crate::policy::rules::rule::ClaimInput;
use crate::policy::rules::rule::{ApiServer, Check, Coverage, Entry, Findings};
use crate::settings::Settings;

/// The annotation the scheduler sets on the claims it creates for extended resources served by DRA.
pub const EXTENDED_RESOURCE_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";

pub const ENTRY: Entry = Entry {
    check: Check::Claim(check),
    api_server: ApiServer::Policies {
        coverage: Coverage {
            enforced: "`allocationMode: All`, counts above `maxPerContainer`, the claim total against \
        `maxPerPod` and the namespace annotation, `adminAccess` outside the allowlist's \
        namespaces",
            webhook_only: "DeviceClasses that hand out GPUs by selector or extended resource name (the \
        policy knows `gpuDeviceClasses` by name only; DeviceClasses are other objects); a claim \
        made for a pod counted with the pod's other claims against `maxPerPod` (the pod and \
        its claims are other objects)",
        },
        policies,
    },
};

/// `{request}`: the request's name, quoted.
pub const ALL_DEVICES: MessageTemplate = MessageTemplate::new(
    "request {request} asks for every GPU of a node (allocationMode: All); \
     use allocationMode: ExactCount with a count",
);
pub const ABOVE_CONTAINER_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "request {request} asks for {count} GPUs, above the maximum of {maximum} per container; \
     lower its count",
);
pub const ADMIN_ACCESS: MessageTemplate = MessageTemplate::new(
    "request {request} sets adminAccess on a GPU class, allowed only in namespaces the \
     allowlist names; remove adminAccess",
);
/// After [`MAX_LISTED`] problems of single requests.
pub const MORE: MessageTemplate =
    MessageTemplate::new("and {more} more like these in the claim's other requests");
pub const ABOVE_POD_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "the claim's GPU requests total {total}, above the maximum of {maximum} per pod here; \
     split the claim or lower the counts",
);

/// R2 on a claim: its requests, and their total.
pub fn check(input: &ClaimInput<'_>) -> Findings {
    if input.extended_resource {
        return Findings::default();
    }
    let monitoring = input
        .settings
        .config()
        .allowlist
        .iter()
        .any(|entry| entry.namespace == input.namespace_name);
    let mut findings = Findings {
        violations: problems(
            input.summary,
            input.settings.config().max_per_container,
            input.namespace.max_per_pod,
            monitoring,
        ),
        ..Findings::default()
    };
    claim_pod_total::check(input, &mut findings);
    findings
}

/// How many problems of single requests a denial names; the rest are counted ([`MORE`]).
pub const MAX_LISTED: usize = 3;

/// The message bodies of what a claim must fix.
fn problems(
    summary: &ClaimSummary,
    max_per_container: u64,
    max_per_pod: u64,
    admin_allowed: bool,
) -> Vec<String> {
    let mut found = Vec::new();
    for request in &summary.requests {
        let name = format!("{:?}", request.name);
        match request.gpu {
            None => continue,
            Some(DraCount::All) => found.push(ALL_DEVICES.format(&[("request", &name)])),
            Some(DraCount::Exactly(count)) if count > max_per_container => {
                found.push(ABOVE_CONTAINER_MAXIMUM.format(&[
                    ("request", &name),
                    ("count", &count),
                    ("maximum", &max_per_container),
                ]));
            }
            Some(DraCount::Exactly(_)) => {}
        }
        if request.admin_access && !admin_allowed {
            found.push(ADMIN_ACCESS.format(&[("request", &name)]));
        }
    }
    if found.len() > MAX_LISTED {
        // One short line for a person, even for thousands of requests.
        let more = found.len() - MAX_LISTED;
        found.truncate(MAX_LISTED);
        found.push(MORE.format(&[("more", &more)]));
    }
    if let Some(DraCount::Exactly(total)) = summary.gpu_total()
        && total > max_per_pod
    {
        found.push(ABOVE_POD_MAXIMUM.format(&[("total", &total), ("maximum", &max_per_pod)]));
    }
    found
}

// The CEL side, `gpu-policy-bounded-requests-claims`: the checks above in the `resource.k8s.io`
// version the target release registers for (v1; v1beta1 before 1.34), a `firstAvailable` request
// counting as its largest GPU alternative where the release has them.

/// The match conditions: an update that leaves the spec alone, and the
/// scheduler's own claims, are not judged.
fn match_conditions() -> Vec<Variable> {
    vec![
        Variable::new(
            "spec-changed",
            "request.operation != 'UPDATE' || oldObject == null || !has(object.spec) \
             || !has(oldObject.spec) || object.spec != oldObject.spec",
        ),
        Variable::new(
            "not-extended-resource-claim",
            &format!(
                "!has(object.metadata) || !has(object.metadata.annotations) \
                 || !({k} in object.metadata.annotations) \
                 || object.metadata.annotations[{k}] != 'true'",
                k = cel::string(EXTENDED_RESOURCE_CLAIM)
            ),
        ),
    ]
}

/// The alternatives of a request `r` as `dra` writes them: the request itself (v1beta1) or its
/// `exactly`, then its `firstAvailable` entries where the release has them. A field the release's
/// schema lacks is never named, so that the policy type-checks without warnings.
fn alternatives(dra: DraApi) -> String {
    let exact = match dra.shape {
        RequestShape::Exactly => "(has(r.exactly) ? [r.exactly] : [])",
        RequestShape::Flat => "(has(r.deviceClassName) ? [r] : [])",
    };
    if dra.first_available {
        format!("({exact} + (has(r.firstAvailable) ? r.firstAvailable : []))")
    } else {
        exact.to_owned()
    }
}

fn variables(settings: &Settings, dra: DraApi) -> Vec<Variable> {
    let config = settings.config();
    let classes = cel::string_list(config.gpu_device_classes.iter().map(String::as_str));
    let namespaces = config.allowlist_namespaces();
    vec![
        Variable::new(
            "devices",
            "object.kind == 'ResourceClaim' \
             ? (has(object.spec) && has(object.spec.devices) ? object.spec.devices : {}) \
             : (has(object.spec) && has(object.spec.spec) && has(object.spec.spec.devices) \
                ? object.spec.spec.devices : {})",
        ),
        Variable::new(
            "requests",
            "has(variables.devices.requests) ? variables.devices.requests : []",
        ),
        // Per request: its GPU alternatives (the exact request, or the
        // firstAvailable entries naming a GPU class).
        Variable::new(
            "gpuRequests",
            &format!(
                "variables.requests.map(r, {{'name': dyn(r.name), 'alternatives': \
                 dyn({alternatives}\
                 .filter(a, has(a.deviceClassName) && a.deviceClassName in {classes}))}})\
                 .filter(r, size(r.alternatives) > 0)",
                alternatives = alternatives(dra),
            ),
        ),
        Variable::new(
            "allDevices",
            "variables.gpuRequests.filter(r, r.alternatives.exists(a, \
             has(a.allocationMode) && a.allocationMode == 'All'))",
        ),
        Variable::new(
            "counts",
            "variables.gpuRequests.filter(r, !r.alternatives.exists(a, \
             has(a.allocationMode) && a.allocationMode == 'All'))\
             .map(r, {'name': dyn(r.name), 'count': \
                dyn(r.alternatives.map(a, has(a.count) ? a.count : 1).max())})",
        ),
        Variable::new("maxPerPod", &cel::max_per_pod(settings)),
        Variable::new(
            "adminAllowed",
            &format!("request.namespace in {}", cel::string_list(namespaces.iter().copied())),
        ),
        Variable::new("requestProblems", &request_problems(settings)),
    ]
}

/// Each GPU request with a problem, in order, and the webhook's message of
/// each of its problems (`{'name', 'ps'}`): `allocationMode: All` or a
/// count above `maxPerContainer`, then `adminAccess`.
fn request_problems(settings: &Settings) -> String {
    let max = settings.config().max_per_container;
    let request = || ("request", Fill::cel(cel::quoted_name("r.name")));
    let all = cel::message(ALL_DEVICES, &[request()]);
    let above = cel::message(
        ABOVE_CONTAINER_MAXIMUM,
        &[request(), ("count", Fill::cel("string(n)")), ("maximum", Fill::words(max))],
    );
    let admin = cel::message(ADMIN_ACCESS, &[request()]);
    format!(
        "variables.gpuRequests.map(r, {{'name': dyn(r.name), 'ps': dyn(\
         (r.alternatives.exists(a, has(a.allocationMode) && a.allocationMode == 'All') ? [{all}] \
          : [r.alternatives.map(a, has(a.count) ? a.count : 1).max()]\
            .filter(n, n > {max}).map(n, {above})) \
         + (!variables.adminAllowed && r.alternatives.exists(a, \
            has(a.adminAccess) && a.adminAccess == true) ? [{admin}] : []))}})\
         .filter(x, size(x.ps) > 0)"
    )
}

/// The message of `requestProblems`: the first [`MAX_LISTED`] problems in order, then how many
/// more, as the webhook lists them. (No `flatten` in the CEL of Kubernetes 1.30: a problem is
/// listed when fewer than `MAX_LISTED` come before it, its request's earlier ones included.)
fn request_problems_message() -> String {
    let separator = cel::string(SEPARATOR);
    let more = cel::message(
        MORE,
        &[("more", Fill::cel(format!("string(ps.map(x, size(x.ps)).sum() - {MAX_LISTED})")))],
    );
    format!(
        "{prefix} + [variables.requestProblems].map(ps, [ps.map(x, x.name)].map(ns, \
         ps.map(x, x.ps.filter(p, ps.filter(y, ns.indexOf(y.name) < ns.indexOf(x.name))\
         .map(y, size(y.ps)).sum() + x.ps.indexOf(p) < {MAX_LISTED}))\
         .filter(l, size(l) > 0).map(l, l.join({separator})).join({separator}))[0] \
         + (ps.map(x, size(x.ps)).sum() > {MAX_LISTED} ? {separator} + {more} : ''))[0]",
        prefix = cel::string(Message::PREFIX),
    )
}

fn validations(_settings: &Settings) -> Vec<Validation> {
    vec![
        Validation::new("size(variables.requestProblems) == 0", &request_problems_message()),
        Validation::new(
            "size(variables.allDevices) > 0 \
             || variables.counts.map(r, r.count).sum() <= variables.maxPerPod",
            &cel::full_message(
                ABOVE_POD_MAXIMUM,
                &[
                    ("total", Fill::cel("string(variables.counts.map(r, r.count).sum())")),
                    ("maximum", Fill::cel("string(variables.maxPerPod)")),
                ],
            ),
        ),
    ]
}

/// `gpu-policy-bounded-requests-claims`.
fn policies(settings: &Settings, release: KubernetesVersion) -> Vec<CelPolicy> {
    vec![CelPolicy {
        resources: Resources::Claims,
        match_conditions: match_conditions(),
        variables: variables(settings, release.dra()),
        action: Action::Validate(validations(settings)),
    }]
}

#[cfg(test)]
mod tests;
