//! `gpu-policy-bounded-requests-claims`: R2 on ResourceClaims and
//! ResourceClaimTemplates in CEL, in the `resource.k8s.io` version the
//! target release registers for (v1; v1beta1 before 1.34).
//!
//! Reads `devices.requests[]` of a claim's `spec` or a template's
//! `spec.spec` (`exactly`, or in v1beta1 the request itself, or each
//! `firstAvailable` alternative where the release has them:
//! `deviceClassName`, `allocationMode`, `count`, `adminAccess`), the
//! claim's annotations, the namespace's `gpu-policy.io/max-gpus-per-pod`
//! annotation and the allowlist's namespaces.
//!
//! Denies a GPU request with `allocationMode: All`, a GPU request above
//! `maxPerContainer` (a `firstAvailable` request counts as its largest GPU
//! alternative), a claim whose GPU requests total more than `maxPerPod`,
//! and `adminAccess` on a GPU request outside the allowlist's namespaces.
//! Never denies the claims the scheduler creates for extended resources.
//!
//! Not here: a DeviceClass counts as a GPU class by its name in
//! `gpuDeviceClasses` only (the webhook also reads the DeviceClasses of
//! the cluster: their selectors and extended resource names).

use super::cel_text::{self as cel, Fill};
use super::object::{Validation, Variable};
use crate::kubernetes_version::{DraApi, RequestShape};
use crate::policy::message::{Message, SEPARATOR};
use crate::policy::rules::claim_requests::{
    ABOVE_CONTAINER_MAXIMUM, ABOVE_POD_MAXIMUM, ADMIN_ACCESS, ALL_DEVICES, EXTENDED_RESOURCE_CLAIM,
    MAX_LISTED, MORE,
};
use crate::settings::Settings;

/// The match conditions: an update that leaves the spec alone, and the
/// scheduler's own claims, are not judged.
pub fn match_conditions() -> Vec<Variable> {
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

/// The alternatives of a request `r` as `dra` writes them: the request
/// itself (v1beta1) or its `exactly`, then its `firstAvailable` entries
/// where the release has them. A field the release's schema lacks is never
/// named, so that the policy type-checks without warnings.
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

pub fn variables(settings: &Settings, dra: DraApi) -> Vec<Variable> {
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
            &format!(
                "request.namespace in {}",
                cel::string_list(namespaces.iter().copied())
            ),
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
        &[
            request(),
            ("count", Fill::cel("string(n)")),
            ("maximum", Fill::words(max)),
        ],
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

/// The message of `requestProblems`: the first [`MAX_LISTED`] problems in
/// order, then how many more, as the webhook lists them. (No `flatten` in
/// the CEL of Kubernetes 1.30: a problem is listed when fewer than
/// `MAX_LISTED` come before it, its request's earlier ones included.)
fn request_problems_message() -> String {
    let separator = cel::string(SEPARATOR);
    let more = cel::message(
        MORE,
        &[(
            "more",
            Fill::cel(format!(
                "string(ps.map(x, size(x.ps)).sum() - {MAX_LISTED})"
            )),
        )],
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

pub fn validations(_settings: &Settings) -> Vec<Validation> {
    vec![
        Validation::new(
            "size(variables.requestProblems) == 0",
            &request_problems_message(),
        ),
        Validation::new(
            "size(variables.allDevices) > 0 \
             || variables.counts.map(r, r.count).sum() <= variables.maxPerPod",
            &cel::full_message(
                ABOVE_POD_MAXIMUM,
                &[
                    (
                        "total",
                        Fill::cel("string(variables.counts.map(r, r.count).sum())"),
                    ),
                    ("maximum", Fill::cel("string(variables.maxPerPod)")),
                ],
            ),
        ),
    ]
}
