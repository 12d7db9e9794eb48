//! `gpu-policy-bounded-requests-claims`: R2 on ResourceClaims and
//! ResourceClaimTemplates (resource.k8s.io/v1) in CEL.
//!
//! Reads `devices.requests[]` of a claim's `spec` or a template's
//! `spec.spec` (`exactly`, or each `firstAvailable` alternative:
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

use super::cel_text::{self as cel};
use super::{Validation, Variable};
use crate::policy::claim_requests::EXTENDED_RESOURCE_CLAIM;
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

pub fn variables(settings: &Settings) -> Vec<Variable> {
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
                 dyn(((has(r.exactly) ? [r.exactly] : []) \
                  + (has(r.firstAvailable) ? r.firstAvailable : []))\
                 .filter(a, has(a.deviceClassName) && a.deviceClassName in {classes}))}})\
                 .filter(r, size(r.alternatives) > 0)"
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
        Variable::new(
            "adminAccess",
            "variables.gpuRequests.filter(r, r.alternatives.exists(a, \
             has(a.adminAccess) && a.adminAccess == true))",
        ),
    ]
}

pub fn validations(settings: &Settings) -> Vec<Validation> {
    let max = settings.config().max_per_container;
    // One message per request, as the webhook's, joined.
    let each = |list: &str, text: &str| {
        format!("'gpu-policy: ' + {list}.map(r, 'request \"' + r.name + '\" {text}').join('; ')")
    };
    vec![
        Validation::new(
            "size(variables.allDevices) == 0",
            &each(
                "variables.allDevices",
                "asks for every GPU of a node (allocationMode: All); \
                 use allocationMode: ExactCount with a count",
            ),
        ),
        Validation::new(
            &format!("!variables.counts.exists(r, r.count > {max})"),
            &format!(
                "'gpu-policy: ' + variables.counts.filter(r, r.count > {max}).map(r, 'request \"' \
                 + r.name + '\" asks for ' + string(r.count) + ' GPUs, above the maximum of {max} \
                 per container; lower its count').join('; ')"
            ),
        ),
        Validation::new(
            "variables.adminAllowed || size(variables.adminAccess) == 0",
            &each(
                "variables.adminAccess",
                "sets adminAccess on a GPU class, allowed only in namespaces the allowlist \
                 names; remove adminAccess",
            ),
        ),
        Validation::new(
            "size(variables.allDevices) > 0 \
             || variables.counts.map(r, r.count).sum() <= variables.maxPerPod",
            "'gpu-policy: the claim\\'s GPU requests total ' \
             + string(variables.counts.map(r, r.count).sum()) + ', above the maximum of ' \
             + string(variables.maxPerPod) + ' per pod here; split the claim or lower the counts'",
        ),
    ]
}
