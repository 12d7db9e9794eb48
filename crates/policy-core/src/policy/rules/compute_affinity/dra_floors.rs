//! R4 `compute-affinity` for GPU containers whose GPUs come through DRA claims
//! (`draComputeAffinity: claims`, the default, or `both`): the floors go into the claims, not
//! onto node labels. The pod's half; [`super::claim_floors`] writes the selector into the
//! claims made for it (docs/policy.md, "GPUs that come through DRA claims").
//!
//! Reads: the GPU containers holding GPUs through resolved claims and no device-plugin
//! resource, and those whose GPU resource a DeviceClass serves (`spec.extendedResourceName`:
//! the scheduler makes a claim for it); what their images need, raised to the namespace's
//! and pod annotation's minimum; the annotation `gpu-policy.io/gpu-needs`;
//! `spec.resourceClaims`; from the cluster (or `check`'s input) the claims and templates
//! named, the devices allocated and their ResourceSlice attributes.
//!
//! Changes: writes the needs into `gpu-policy.io/gpu-needs` ([`GpuNeeds::annotation_value`]),
//! overwriting a differing value and removing one on a pod that needs nothing: the claim
//! webhook trusts only what gpu-policy wrote. A summary names each template's selector.
//!
//! Checks claims the pod only references (`resourceClaimName`): one allocated a device below
//! the needs is a violation (the pod would crash on start; `audit` finds running ones); one
//! unallocated whose selectors do not guarantee the needs ([`GpuNeeds::guaranteed_by`]) gets
//! a notice naming the selector to add.

use std::collections::BTreeSet;

use crate::document::Json;

use super::image_floors::{Containers, image_floors, raise};
use super::pod_claims::{claims_in_use, gpu_request_names, named_devices};
use crate::cuda::ComputeCapability;
use crate::policy::container::Container;
use crate::policy::dra::Resolved;
use crate::policy::dra::claims::ClaimSummary;
use crate::policy::dra::floor::GpuNeeds;
use crate::policy::message::{Notice, NoticeKind, quoted_list};
use crate::policy::patch::{AnnotationsAt, Step, pointer_below, remove, set_annotation};
use crate::policy::pod::ClaimSource;
use crate::policy::rules::rule::{Findings, Mutation, RuleInput};
use crate::settings::GPU_NEEDS_ANNOTATION;

/// R4's DRA half, after the node affinity half.
pub(super) fn check(
    input: &RuleInput<'_, '_>,
    base: Option<(ComputeCapability, String)>,
    findings: &mut Findings,
) {
    let needs = pod_needs(input, base, &mut findings.notices);
    record(input, needs.as_ref(), findings);
    if let Some((needs, _, _)) = &needs {
        let in_claims = |c: &Container<'_>| holds_claimed_gpus(input, c);
        referenced_claims(input, needs, &in_claims, findings);
    }
}

/// On a pod's update: the `which` containers whose GPUs come through claims, their images' floors
/// against the devices already allocated to their claims (those made from templates included).
pub(super) fn allocated_below(
    input: &RuleInput<'_, '_>,
    which: Containers<'_>,
    findings: &mut Findings,
) {
    let in_claims = |c: &Container<'_>| which(c) && holds_claimed_gpus(input, c);
    if let Some((needs, _, _)) = needs_of(input, None, &in_claims, &mut findings.notices) {
        referenced_claims(input, &needs, &in_claims, findings);
    }
}

/// What the GPUs that come through claims need of a device (of the containers
/// [`holds_claimed_gpus`] finds): their images' floors raised to `base`, with where each floor
/// comes from; None when nothing. The claims made for the pod get it ([`super::claim_floors`]).
pub(super) fn pod_needs(
    input: &RuleInput<'_, '_>,
    base: Option<(ComputeCapability, String)>,
    notices: &mut Vec<Notice>,
) -> Option<(GpuNeeds, Option<String>, Option<String>)> {
    let in_claims = |c: &Container<'_>| holds_claimed_gpus(input, c);
    needs_of(input, base, &in_claims, notices)
}

/// [`pod_needs`] of the `in_claims` containers.
fn needs_of(
    input: &RuleInput<'_, '_>,
    base: Option<(ComputeCapability, String)>,
    in_claims: Containers<'_>,
    notices: &mut Vec<Notice>,
) -> Option<(GpuNeeds, Option<String>, Option<String>)> {
    if !input.view.containers.iter().any(in_claims) {
        return None;
    }
    let images = image_floors(input, true, in_claims, notices);
    let compute = raise(base, images.compute.clone());
    let driver = images.driver.clone().map(|(floor, _)| floor);
    let sources = images.images.iter().map(|i| (*i).to_owned()).collect();
    GpuNeeds::new(compute.as_ref().map(|(m, _)| *m), driver, sources)
        .map(|needs| (needs, compute.map(|(_, s)| s), images.driver.map(|(_, s)| s)))
}

/// A GPU container whose GPUs come through claims: it holds them through resolved claims and no
/// device-plugin resource, or a DeviceClass serves its GPU resource (`spec.extendedResourceName`:
/// the scheduler makes a claim for it).
pub(super) fn holds_claimed_gpus(input: &RuleInput<'_, '_>, container: &Container<'_>) -> bool {
    let serves_extended = || {
        input.claims.is_some_and(|claims| {
            container
                .gpu_resources
                .iter()
                .any(|r| r.asks() && claims.serves_extended_resource(r.name))
        })
    };
    container.is_gpu() && (!container.is_device_plugin_gpu() || serves_extended())
}

/// The annotation operation and its summaries: the needs, then each template's claims' selector.
fn record(
    input: &RuleInput<'_, '_>,
    needs: Option<&(GpuNeeds, Option<String>, Option<String>)>,
    findings: &mut Findings,
) {
    let view = input.view;
    let written = view.annotation(GPU_NEEDS_ANNOTATION);
    let Some((needs, compute_source, driver_source)) = needs else {
        if written.is_some() {
            let steps = [Step::Key("annotations"), Step::Key(GPU_NEEDS_ANNOTATION)];
            findings.changes.push(Mutation {
                summary: format!(
                    "remove {GPU_NEEDS_ANNOTATION}: only gpu-policy writes it, and the pod's \
                     claims need nothing"
                ),
                operations: vec![remove(pointer_below(view.metadata_pointer(), steps))],
                overrides_author: true,
            });
        }
        return;
    };
    let value = needs.annotation_value();
    if written == Some(value.as_str()) {
        return;
    }
    let at = AnnotationsAt {
        metadata: view.metadata_pointer(),
        has_metadata: view.has_metadata(),
        has_annotations: view.has_annotations(),
    };
    let sources: Vec<&str> =
        [compute_source, driver_source].into_iter().flatten().map(String::as_str).collect();
    let mut sources_text = sources.first().copied().unwrap_or("").to_owned();
    if let Some(second) = sources.get(1).filter(|s| **s != sources[0]) {
        sources_text = format!("{sources_text}; {second}");
    }
    findings.changes.push(Mutation {
        summary: format!(
            "require {needs} of the GPUs of the claims made for the pod ({sources_text}), \
             recorded in {GPU_NEEDS_ANNOTATION}"
        ),
        operations: vec![set_annotation(at, GPU_NEEDS_ANNOTATION, value)],
        overrides_author: written.is_some(),
    });
    let Some(claims) = input.claims else {
        return;
    };
    let pod = pod_name(input);
    let mut reported = BTreeSet::new();
    for pod_claim in &view.resource_claims {
        let ClaimSource::Template(template) = pod_claim.source else {
            continue;
        };
        if !reported.insert(template) {
            continue;
        }
        let Resolved::Known(summary) =
            claims.resource_claim_template(input.namespace_name, template)
        else {
            continue;
        };
        let requests = gpu_request_names(&summary);
        if requests.is_empty() {
            continue;
        }
        findings.changes.push(Mutation {
            summary: format!(
                "give the claims made for {pod} from {template}: {} the selector {}",
                quoted_list("request", "requests", requests),
                needs.selector()
            ),
            operations: Vec::new(),
            overrides_author: false,
        });
    }
}

/// The claims the pod only references, against the needs; for a pod that
/// already exists (`audit`), the claims made for it from templates too.
fn referenced_claims(
    input: &RuleInput<'_, '_>,
    needs: &GpuNeeds,
    in_claims: Containers<'_>,
    findings: &mut Findings,
) {
    let Some(claims) = input.claims else {
        return;
    };
    for claim in claims_in_use(input, in_claims) {
        let name = &claim.name;
        let users_text = claim.users_text();
        match &claim.allocated {
            Some(devices) => {
                let short: Vec<String> = devices
                    .iter()
                    .filter_map(|d| {
                        let versions = claims.device_versions(&d.driver, &d.pool, &d.device)?;
                        let lacks = needs.shortfall(&versions)?;
                        Some(format!("{} of pool {} has {lacks}", d.device, d.pool))
                    })
                    .collect();
                if short.is_empty() {
                    continue;
                }
                let whose =
                    if claim.users.len() == 1 { "its image needs" } else { "their images need" };
                findings.violations.push(format!(
                    "{users_text} {} ResourceClaim {name:?}, allocated a device below what \
                     {whose} ({needs}): {}; use a claim whose devices meet it",
                    claim.verb(),
                    named_devices(short)
                ));
            }
            None if claim.referenced => {
                if guaranteed(&claim.summary, needs) {
                    continue;
                }
                findings.notices.push(Notice::new(
                    NoticeKind::UnguaranteedClaimFloor,
                    format!(
                        "ResourceClaim {name:?} ({users_text}) may get a GPU below {needs}: add \
                         to its GPU requests the selector {}",
                        needs.selector()
                    ),
                ));
            }
            None => {}
        }
    }
}

/// The most selectors of one claim compiled and run to tell whether they guarantee the needs: each
/// is compiled and run on a few dozen probe devices, on the request path, and a claim's author
/// chooses how many there are. Real claims carry a handful; past this the claim is taken not to
/// guarantee them (a warning, never a denial).
const MAX_SELECTORS_JUDGED: usize = 32;

/// Every GPU alternative of every GPU request of the claim refuses the devices below the needs.
fn guaranteed(summary: &ClaimSummary, needs: &GpuNeeds) -> bool {
    let alternatives =
        || summary.requests.iter().filter(|r| r.gpu.is_some()).flat_map(|r| &r.gpu_selectors);
    let judged: usize = alternatives().map(Vec::len).sum();
    !summary.selectors_dropped
        && judged <= MAX_SELECTORS_JUDGED
        && alternatives().all(|selectors| needs.guaranteed_by(selectors))
}

/// `pod1`, `web-7d4-*` for a generated name, or `the pod`.
fn pod_name(input: &RuleInput<'_, '_>) -> String {
    let text = |key: &str| {
        input
            .view
            .metadata
            .and_then(|m| m.get(key))
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
    };
    match (text("name"), text("generateName")) {
        (Some(name), _) => name.to_owned(),
        (None, Some(prefix)) => format!("{prefix}*"),
        (None, None) => "the pod".to_owned(),
    }
}

#[cfg(test)]
mod tests;
