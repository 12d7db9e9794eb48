//! R4 `compute-affinity` on an update of a pod (`Scope::Update`): the floors written at
//! creation kept, and images changed in place checked against where the pod runs
//! (docs/policy.md, "Pod updates").
//!
//! Reads: the old and new pod's
//! `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution` and
//! `spec.schedulingGates`; every GPU container's `image` in both; what the new images need
//! ([`image_floors`]); `spec.nodeName` and that node's GFD compute labels; the devices
//! allocated to a GPU container's claims (`cudaComputeCapability`, driver versions, as
//! [`dra_floors`] checks a shared claim).
//!
//! Changes: a re-apply replaces the required terms with the author's, without R4's
//! expressions (the floors, and the `nvidia.com/gpu.product` requirement); when that is all the
//! update changes there, the old terms are put back (an ungated pod's terms cannot change). The
//! floors and the namespace's products are not computed again: an update is never denied for a
//! product restriction the namespace got after the pod was created.
//!
//! Denies: a GPU container whose new image needs a higher compute capability than the pod's
//! GPUs have: the node's (bound pods), its claims' devices, or for an unbound pod the lowest
//! labelled GPU node its required affinity admits. Only the image table and the container's
//! env deny; a registry-only floor warns, as at creation. Nothing is concluded where the
//! node, or for an unbound pod every GPU node, carries no GFD labels.

use std::collections::{BTreeMap, BTreeSet};

use json_patch::PatchOperation;
use serde_json::{Map, Value};

use super::dra_floors;
use super::gfd_labels::{CUDA_LABELS, MAJOR_LABEL, MINOR_LABEL, REQUIRED};
use super::image_floors::image_floors;
use crate::cuda::ComputeCapability;
use crate::document::{Json, Object};
use crate::policy::container::{Container, ContainerKind};
use crate::policy::message::{CONTAINER, Notice, NoticeKind};
use crate::policy::patch::{Step, add, object, pointer_below};
use crate::policy::pod::PodView;
use crate::policy::rules::rule::{Findings, Mutation, RuleInput};
use crate::settings::PRODUCT_LABEL;

pub(super) fn check(input: &RuleInput<'_, '_>) -> Findings {
    let mut findings = Findings::default();
    let Some(old) = input.old else {
        return findings;
    };
    if let Some(change) = restored_terms(input.view, old) {
        findings.changes.push(change);
    }
    if input.allowlisted.is_none() {
        updated_images(input, old, &mut findings);
    }
    findings
}

/// The required node affinity's terms, when present.
fn required_terms<'v>(view: &PodView<'v>) -> Option<Json<'v>> {
    view.spec
        .get("affinity")?
        .get("nodeAffinity")?
        .get(REQUIRED)
        .filter(|required| !required.is_null())
}

/// Whether R4 writes expressions on this label. The product label counts whoever wrote the
/// expression: R4 ANDs its own beside the author's, and the terms cannot change on an ungated pod.
fn written_by_r4(key: &str) -> bool {
    key == MAJOR_LABEL
        || key == MINOR_LABEL
        || key == PRODUCT_LABEL
        || key.strip_prefix(CUDA_LABELS).is_some_and(|rest| rest.starts_with('.'))
}

/// The terms without R4's expressions, each once, as canonical JSON: R4 multiplies an author's term
/// by its alternatives, so one author term is several stored ones. A term left empty is no term.
fn authored_terms(required: Option<Json<'_>>) -> BTreeSet<String> {
    let terms =
        required.and_then(|required| required.get("nodeSelectorTerms")).and_then(Json::as_array);
    let mut authored = BTreeSet::new();
    for term in terms.into_iter().flatten() {
        let Some(term) = term.as_object() else {
            authored.insert(term.to_value().to_string());
            continue;
        };
        // Canonical text: the kept parts as values (sorted keys).
        let mut kept = Map::new();
        for (key, value) in term {
            if key == "matchExpressions"
                && let Some(expressions) = value.as_array()
            {
                let own: Vec<Value> = expressions
                    .iter()
                    .filter(|e| !e.get("key").and_then(Json::as_str).is_some_and(written_by_r4))
                    .map(Json::to_value)
                    .collect();
                if !own.is_empty() {
                    kept.insert(key.to_owned(), Value::Array(own));
                }
                continue;
            }
            if !value.is_null() {
                kept.insert(key.to_owned(), value.to_value());
            }
        }
        if !kept.is_empty() {
            authored.insert(Value::Object(kept).to_string());
        }
    }
    authored
}

/// Whether a term of `required` carries an expression R4 writes.
fn carries_r4(required: Json<'_>) -> bool {
    required
        .get("nodeSelectorTerms")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|term| term.get("matchExpressions")?.as_array())
        .flatten()
        .any(|e| e.get("key").and_then(Json::as_str).is_some_and(written_by_r4))
}

/// The old required terms put back into the new pod, when they carry R4's
/// expressions and the update changed nothing else of them.
fn restored_terms(new: &PodView<'_>, old: &PodView<'_>) -> Option<Mutation> {
    let before = required_terms(old)?;
    let after = required_terms(new);
    if after == Some(before) || !carries_r4(before) {
        return None;
    }
    // A gated pod may still have terms added: they are the author's.
    let gated = |view: &PodView<'_>| {
        view.spec
            .get("schedulingGates")
            .and_then(Json::as_array)
            .is_some_and(|gates| !gates.is_empty())
    };
    if gated(old) || authored_terms(after) != authored_terms(Some(before)) {
        return None;
    }
    Some(Mutation {
        summary: "keep the node affinity on GPU compute capability, driver and product written \
            when the pod was created"
            .to_owned(),
        operations: vec![put(new.spec, new.spec_pointer(), before.to_value())],
        overrides_author: true,
    })
}

/// The operation that sets the required node affinity to `required`,
/// making `affinity` and `nodeAffinity` where the new pod has none.
fn put(
    spec: Object<'_>,
    spec_pointer: &json_patch::jsonptr::Pointer,
    required: Value,
) -> PatchOperation {
    let affinity = spec.get("affinity").and_then(Json::as_object);
    let node_affinity = affinity.and_then(|a| a.get("nodeAffinity")).and_then(Json::as_object);
    match (affinity, node_affinity) {
        (Some(_), Some(_)) => add(
            pointer_below(
                spec_pointer,
                [Step::Key("affinity"), Step::Key("nodeAffinity"), Step::Key(REQUIRED)],
            ),
            required,
        ),
        (Some(_), None) => add(
            pointer_below(spec_pointer, [Step::Key("affinity"), Step::Key("nodeAffinity")]),
            object(REQUIRED, required),
        ),
        (None, _) => add(
            pointer_below(spec_pointer, [Step::Key("affinity")]),
            object("nodeAffinity", object(REQUIRED, required)),
        ),
    }
}

/// The image of each of the old pod's containers, by list and name (a
/// container's name and list cannot change): each new container finds its
/// old self in logarithmic time, however many there are.
fn old_images<'v>(old: &PodView<'v>) -> BTreeMap<(ContainerKind, &'v str), Option<&'v str>> {
    old.containers
        .iter()
        .map(|container| ((container.kind, container.name), container.image))
        .collect()
}

/// The GPU containers whose image changed, checked against the pod's GPUs: their claims' devices
/// (as R4 checks a shared claim at creation), else the node's or what the affinity admits.
fn updated_images(input: &RuleInput<'_, '_>, old: &PodView<'_>, findings: &mut Findings) {
    let before = old_images(old);
    let changed: BTreeSet<(ContainerKind, &str)> = input
        .view
        .containers
        .iter()
        .filter(|c| {
            c.is_gpu() && before.get(&(c.kind, c.name)).is_some_and(|image| *image != c.image)
        })
        .map(|c| (c.kind, c.name))
        .collect();
    if changed.is_empty() {
        return;
    }
    let changed_in = |c: &Container<'_>| changed.contains(&(c.kind, c.name));
    dra_floors::allocated_below(input, &changed_in, findings);
    let which = |c: &Container<'_>| changed_in(c) && !dra_floors::holds_claimed_gpus(input, c);
    if !input.view.containers.iter().any(which) {
        return;
    }
    let from_table =
        image_floors(input, false, &which, &mut Vec::new()).compute.map(|(floor, _)| floor);
    let floors = image_floors(input, true, &which, &mut findings.notices);
    let Some((needed, source)) = floors.compute else {
        return;
    };
    let Some((offered, place)) = offered(input) else {
        return;
    };
    if offered >= needed {
        return;
    }
    let names = CONTAINER.list(input.view.containers.iter().filter(|c| which(c)).map(|c| c.name));
    let body = format!(
        "{names}: {source} needs GPU compute capability >= {needed}, but {place} has \
         {offered}; run the image in a new pod, which gets a node that has it"
    );
    // A denial never rests on a registry answer alone.
    if from_table.is_some_and(|floor| floor > offered) {
        findings.violations.push(body);
    } else {
        findings.notices.push(Notice::new(
            NoticeKind::UnmetComputeCapability,
            format!("compute-affinity: {body}"),
        ));
    }
}

/// The lowest compute capability the pod's GPUs can have, and where that is said: the bound node's
/// labels; for a pod not yet bound, the lowest of the labelled GPU nodes its required node affinity
/// admits. None when nothing can be concluded.
fn offered(input: &RuleInput<'_, '_>) -> Option<(ComputeCapability, String)> {
    let nodes = input.nodes?;
    let node = input.view.spec.get("nodeName").and_then(Json::as_str);
    if let Some(node) = node.filter(|name| !name.is_empty()) {
        let capability = nodes.node(node)?.compute_capability?;
        return Some((capability, format!("node {node}")));
    }
    let floor = admitted(input.view);
    let lowest = nodes
        .compute_capabilities()
        .into_iter()
        .filter(|cc| floor.is_none_or(|floor| *cc >= floor))
        .min()?;
    Some((lowest, "the lowest GPU node the pod's required node affinity admits".to_owned()))
}

/// The lowest compute capability the required node affinity admits, from the expressions R4 writes
/// on GFD's labels (`major Gt M-1`, or `major In M` with `minor Gt m-1`): the lowest over the
/// terms, as the terms are ORed. None when some term leaves the capability open, or there is no
/// required affinity: then any GPU may be chosen.
fn admitted(view: &PodView<'_>) -> Option<ComputeCapability> {
    let required = required_terms(view)?;
    let terms = required.get("nodeSelectorTerms")?.as_array()?;
    let mut lowest: Option<ComputeCapability> = None;
    for term in terms {
        let floor = term_floor(term)?;
        if lowest.is_none_or(|low| floor < low) {
            lowest = Some(floor);
        }
    }
    lowest
}

/// What one term admits, by its expressions on the compute labels; None when it admits any.
fn term_floor(term: Json<'_>) -> Option<ComputeCapability> {
    let expressions = term.get("matchExpressions")?.as_array()?;
    let number = |e: Json<'_>| -> Option<u32> {
        let values = e.get("values")?.as_array()?;
        match values.len() {
            1 => values.iter().next()?.as_str()?.parse().ok(),
            _ => None,
        }
    };
    let on = |label: &str, operator: &str| {
        expressions.iter().find(|e| {
            e.get("key").and_then(Json::as_str) == Some(label)
                && e.get("operator").and_then(Json::as_str) == Some(operator)
        })
    };
    if let Some(major) = on(MAJOR_LABEL, "Gt").and_then(number) {
        return Some(ComputeCapability::new(major.checked_add(1)?, 0));
    }
    let major = on(MAJOR_LABEL, "In").and_then(number)?;
    let minor = on(MINOR_LABEL, "Gt").and_then(number).and_then(|m| m.checked_add(1)).unwrap_or(0);
    Some(ComputeCapability::new(major, minor))
}

#[cfg(test)]
mod tests;
