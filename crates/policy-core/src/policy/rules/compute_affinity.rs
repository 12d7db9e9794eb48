//! R4 `compute-affinity` (mutating): GPU pods land only on cards their CUDA build can run on,
//! with a driver that can run it, of the GPU products their namespace allows (docs/policy.md,
//! "R4 compute-affinity").
//!
//! Reads: whether the pod is a GPU pod; what its GPU containers' images need
//! (`crate::cuda::needs`: [`crate::policy::ImageFacts`] when the evaluator has them, else the
//! image table) and their `NVIDIA_REQUIRE_CUDA` / `NVIDIA_DISABLE_REQUIRE`; the pod
//! annotation `gpu-policy.io/min-compute-capability`; the namespace's minimum (cluster
//! default raised by the namespace annotation); the namespace's GPU products (`gpuProducts`
//! within the annotation `gpu-policy.io/gpu-products`, `product_affinity.rs`);
//! `spec.nodeSelector` and
//! `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`; of the nodes
//! (`NodeFacts`), their GPU allocatable, whether they carry GFD's labels, and the GPU products
//! they carry.
//!
//! Changes: the highest minimum `M.m`, on `nvidia.com/gpu.compute.major` / `.minor`
//! (`major > M-1` when `m == 0`, else `major > M OR (major == M AND minor > m-1)`), each
//! alternative ANDed with each of the images' driver floor (`crate::cuda::requirement`) and with
//! `nvidia.com/gpu.product In [...]` when the namespace restricts the products, is ANDed into
//! every existing required term: terms are ORed, so a term of its own would OR it away. A term
//! already carrying an alternative is left alone (re-evaluation adds nothing). Preferred affinity
//! and `nodeSelector` are never touched; with no minimum, no driver floor and no product
//! restriction nothing is injected. Updates: `update.rs` (nothing is computed again).
//!
//! Denies: a constraint that cannot be written (malformed affinity, too many terms); a GPU pod
//! pinned to products the namespace does not allow (`products.rs`); a product restriction that
//! allows none of the nodes' products (`product_affinity.rs`).
//!
//! Notices: no node's labels meet the minimum, or carry an allowed product (the pod would stay
//! Pending); GPU nodes exist but none carries the compute (or driver) labels, so that part is
//! left out (`computeAffinity.whenNodesUnlabelled: skip`) or written anyway (`require`); the
//! product globs have nothing to expand against; a pod annotation unreadable or below the
//! namespace's minimum is ignored.

use json_patch::jsonptr::Pointer;
use json_patch::{PatchOperation, ReplaceOperation};
use serde_json::Value;

use crate::document::Object;

pub mod claim_entry;
mod claim_floors;
mod claim_products;
mod claim_selectors;
mod dra_floors;
mod dra_products;
mod gfd_labels;
mod image_floors;
mod pod_claims;
mod product_affinity;
mod products;
mod update;

use super::rule::{ApiServer, Check, Entry, Findings, Mutation, Rule, RuleInput, Severity};
use crate::cuda::ComputeCapability;
use crate::cuda::requirement::{DriverFloor, at_least};
use crate::policy::container::Container;
use crate::policy::fields::member;
use crate::policy::message::{Notice, NoticeKind};
use crate::policy::patch::{add, json_len, object};
use crate::settings::WhenNodesUnlabelled;
use gfd_labels::{CUDA_LABELS, REQUIRED};
use image_floors::{Containers, base_minimum, image_floors, raise};
use product_affinity::product_affinity;

pub const RULE: Rule = Rule {
    name: "compute-affinity",
    severity: Severity::Medium,
    entries: &[
        Entry {
            check: Check::Pod(check),
            api_server: ApiServer::WebhookOnly {
                reason: "all of it: what an image needs comes from its registry (registry mode) or \
        the image table, with driver floors, and whether any node meets the minimum from the \
        cluster's nodes, as do the GPU products the namespace's globs expand to; a policy can \
        read neither registries nor other objects",
            },
        },
        claim_entry::ENTRY,
    ],
};

pub use gfd_labels::{MAJOR_LABEL, MINOR_LABEL};
/// What the compute labels' names start with, for messages.
const COMPUTE_LABELS: &str = "nvidia.com/gpu.compute";

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    if input.scope.is_update() {
        return update::check(input);
    }
    let mut findings = Findings::default();
    if !input.scope.is_whole() || !input.view.is_gpu_pod() {
        return findings;
    }
    let mode = input.settings.config().dra_compute_affinity;
    products::check(input, &mut findings);
    let base = base_minimum(input, &mut findings.notices);
    let on_nodes =
        |c: &Container<'_>| c.is_gpu() && (c.is_device_plugin_gpu() || mode.node_labels());
    if input.view.containers.iter().any(on_nodes) {
        node_affinity(input, base.clone(), &on_nodes, &mut findings);
    }
    if mode.claims() {
        dra_floors::check(input, base, &mut findings);
    }
    dra_products::check(input, &mut findings);
    findings
}

/// The floors of the `which` containers, as node affinity.
fn node_affinity(
    input: &RuleInput<'_, '_>,
    base: Option<(ComputeCapability, String)>,
    which: Containers<'_>,
    findings: &mut Findings,
) {
    let images = image_floors(input, true, which, &mut findings.notices);
    let mut minimum = raise(base.clone(), images.compute);
    let mut driver_floor = images.driver;
    let unlabelled = unlabelled_parts(input, minimum.as_ref(), driver_floor.as_ref());
    if !unlabelled.is_empty() {
        let when = input.settings.config().compute_affinity.when_nodes_unlabelled;
        findings.notices.push(unlabelled_notice(
            &unlabelled,
            minimum.as_ref(),
            driver_floor.as_ref(),
            when,
        ));
        if when == WhenNodesUnlabelled::Skip {
            if unlabelled.compute {
                minimum = None;
            }
            if unlabelled.driver {
                driver_floor = None;
            }
        }
    }
    let compute = minimum.as_ref().map(|(minimum, _)| alternatives(*minimum)).unwrap_or_default();
    let driver = driver_floor.as_ref().map(|(floor, _)| floor.alternatives()).unwrap_or_default();
    let floors = product(&compute, &driver);
    // The products are ANDed into every alternative of the floors, in the same terms, so the
    // affinity is written once.
    let products = product_affinity(input, findings);
    let alternatives = match &products {
        Some(products) => product(&floors, &[vec![products.expression.clone()]]),
        None => floors,
    };
    if alternatives.is_empty() {
        return;
    }
    if let (Some(nodes), Some((minimum, _))) = (input.nodes, &minimum) {
        let present = nodes.compute_capabilities();
        if !present.is_empty() && present.iter().all(|cc| cc < minimum) {
            let listed: Vec<String> = present.iter().map(ToString::to_string).collect();
            findings.notices.push(Notice::new(
                NoticeKind::UnmetComputeCapability,
                format!(
                    "compute-affinity: no node has compute capability >= {minimum} \
                     (nodes have {}); the pod will stay Pending",
                    listed.join(", ")
                ),
            ));
        }
    }
    // One summary per part, so each warning fits a kubectl line; the first carries the operation.
    let mut summaries = Vec::new();
    let mut words = Vec::new();
    if let Some((minimum, source)) = &minimum {
        summaries.push(format!("require GPU compute capability >= {minimum} ({source})"));
        words.push(format!("compute capability >= {minimum}"));
    }
    if let Some((floor, source)) = &driver_floor {
        let same = minimum.as_ref().is_some_and(|(_, s)| s == source);
        let source = if same { "same image" } else { source.as_str() };
        summaries.push(format!("require a driver for {floor} ({source})"));
        words.push(format!("driver for {floor}"));
    }
    if let Some(products) = &products {
        summaries.push(products.summary.clone());
        words.push(products.words.clone());
    }
    let words = words.join(" and ");
    match constrain(input.view.spec, input.view.spec_pointer(), &alternatives) {
        Ok(Some(operation)) => {
            let mut operations = vec![operation];
            for summary in summaries {
                findings.changes.push(Mutation {
                    summary,
                    operations: std::mem::take(&mut operations),
                    overrides_author: false,
                });
            }
        }
        Ok(None) => {}
        Err(why) => {
            let message = match why {
                Unconstrained::Malformed(field) => format!(
                    "{field} is malformed, so the {words} constraint cannot be added; fix the \
                     affinity"
                ),
                Unconstrained::TooLarge { terms, alternatives } => format!(
                    "the {terms} required node selector terms, each multiplied by the \
                     {alternatives} alternatives of the {words} constraint, would be more \
                     than a pod can hold; merge the terms"
                ),
            };
            // A denial never depends on a registry answer: only what the
            // table, the annotations and the namespace's products ask for may deny.
            let kept = Parts { compute: minimum.is_some(), driver: driver_floor.is_some() };
            if input.images.is_some()
                && products.is_none()
                && !needs_constraint_without_registry(input, base, which, kept)
            {
                findings.notices.push(Notice::new(
                    NoticeKind::ImageTableFallback,
                    format!("compute-affinity: {message}"),
                ));
            } else {
                findings.violations.push(message);
            }
        }
    }
}

/// The two parts of the constraint: a compute floor, a driver floor.
#[derive(Debug, Clone, Copy, Default)]
struct Parts {
    compute: bool,
    driver: bool,
}

impl Parts {
    fn is_empty(self) -> bool {
        !self.compute && !self.driver
    }
}

/// The parts of the constraint (a compute floor above 0.0, a driver floor) whose labels none of the
/// nodes that offer GPUs carries: an affinity on them is one no node can meet. When no node offers
/// a GPU resource (none known yet, or all scaled to zero, or GPUs only through DRA) nothing can be
/// concluded of the nodes that will come, and no part is.
fn unlabelled_parts(
    input: &RuleInput<'_, '_>,
    minimum: Option<&(ComputeCapability, String)>,
    driver: Option<&(DriverFloor, String)>,
) -> Parts {
    let Some(nodes) = input.nodes else {
        return Parts::default();
    };
    let labels = nodes.gpu_node_labels();
    Parts {
        compute: minimum.is_some_and(|(minimum, _)| !alternatives(*minimum).is_empty())
            && labels.compute_unlabelled(),
        driver: driver.is_some() && labels.driver_unlabelled(),
    }
}

/// The one warning of a pod whose floors are on labels no GPU node has.
fn unlabelled_notice(
    unlabelled: &Parts,
    minimum: Option<&(ComputeCapability, String)>,
    driver: Option<&(DriverFloor, String)>,
    when: WhenNodesUnlabelled,
) -> Notice {
    let mut parts = Vec::new();
    let mut labels = Vec::new();
    if let (true, Some((minimum, _))) = (unlabelled.compute, minimum) {
        parts.push(format!("compute capability >= {minimum}"));
        labels.push(format!("{COMPUTE_LABELS}.*"));
    }
    if let (true, Some((floor, _))) = (unlabelled.driver, driver) {
        parts.push(format!("a driver for {floor}"));
        labels.push(format!("{CUDA_LABELS}.*"));
    }
    let (parts, labels) = (parts.join(" and "), labels.join(" and "));
    let cause = "compute-affinity: no GPU node carries GPU Feature Discovery's labels";
    let remedy = format!("deploy GPU Feature Discovery, or set {labels} on the GPU nodes");
    match when {
        WhenNodesUnlabelled::Skip => {
            let verb = if unlabelled.compute && unlabelled.driver { "are" } else { "is" };
            Notice::new(
                NoticeKind::UnenforcedFloor,
                format!("{cause}, so {parts} {verb} not required; {remedy}"),
            )
        }
        WhenNodesUnlabelled::Require => Notice::new(
            NoticeKind::UnmetComputeCapability,
            format!(
                "{cause}, so no node meets {parts} (computeAffinity.whenNodesUnlabelled: \
                 require) and the pod will stay Pending; {remedy}"
            ),
        ),
    }
}

/// Whether the `which` containers need a constraint from the table and the
/// minimums alone, registry answers left out, in the parts `kept`.
fn needs_constraint_without_registry(
    input: &RuleInput<'_, '_>,
    base: Option<(ComputeCapability, String)>,
    which: Containers<'_>,
    kept: Parts,
) -> bool {
    let mut ignored = Vec::new();
    let images = image_floors(input, false, which, &mut ignored);
    (kept.driver && images.driver.is_some())
        || (kept.compute && raise(base, images.compute).is_some())
}

/// Every compute alternative ANDed with every driver alternative (either side may be absent).
fn product(compute: &[Vec<Value>], driver: &[Vec<Value>]) -> Vec<Vec<Value>> {
    match (compute.is_empty(), driver.is_empty()) {
        (_, true) => compute.to_vec(),
        (true, false) => driver.to_vec(),
        (false, false) => compute
            .iter()
            .flat_map(|c| {
                driver.iter().map(move |d| {
                    let mut both = c.clone();
                    both.extend(d.iter().filter(|e| !c.contains(e)).cloned());
                    both
                })
            })
            .collect(),
    }
}

/// The constraint as alternatives (ORed) of expressions (ANDed). Empty when every card qualifies.
pub fn alternatives(minimum: ComputeCapability) -> Vec<Vec<Value>> {
    let ComputeCapability { major, minor } = minimum;
    let mut alternatives = at_least(MAJOR_LABEL, MINOR_LABEL, major, minor);
    alternatives.retain(|expressions| !expressions.is_empty());
    alternatives
}

/// The operation that ANDs the alternatives into every required node selector term, or None when
/// every term already carries one. `Err` names a field of the wrong shape.
fn constrain(
    spec: Object<'_>,
    spec_pointer: &Pointer,
    alternatives: &[Vec<Value>],
) -> Result<Option<PatchOperation>, Unconstrained> {
    let new_terms = || -> Value {
        Value::Array(
            alternatives
                .iter()
                // Built directly: `json!` would copy the expressions by serialising them.
                .map(|expressions| object("matchExpressions", Value::Array(expressions.clone())))
                .collect(),
        )
    };
    // Down to the terms; what is missing on the way is added whole.
    let keys = ["affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms"];
    let (mut path, mut field, mut parent) = (spec_pointer.to_buf(), "spec".to_owned(), spec);
    let mut terms = None;
    for (depth, key) in keys.into_iter().enumerate() {
        path.push_back(key);
        field = format!("{field}.{key}");
        let Some(value) = member(parent, key) else {
            let value = keys[depth + 1..].iter().rev().fold(new_terms(), |v, key| object(key, v));
            return Ok(Some(add(path, value)));
        };
        let malformed = || Unconstrained::Malformed(field.clone());
        match depth + 1 < keys.len() {
            true => parent = value.as_object().ok_or_else(malformed)?,
            false => terms = Some(value.as_array().ok_or_else(malformed)?),
        }
    }
    let existing = match terms {
        Some(terms) if !terms.is_empty() => terms,
        _ => return Ok(Some(add(path, new_terms()))),
    };
    let mut changed = false;
    // Grown as terms are written, which stops at the bound below: a reservation for every term
    // times every alternative would be taken before the bound is checked.
    let mut terms = Vec::new();
    // What the terms written so far take as JSON: each term the
    // constraint is ANDed into is written once per alternative.
    let mut written = 0usize;
    for (index, term) in existing.iter().enumerate() {
        // Copied into the patch: read as a value, one term at a time.
        let term = term.to_value();
        let field = || format!("{field}[{index}]");
        let object = term.as_object().ok_or_else(|| Unconstrained::Malformed(field()))?;
        let expressions: &[Value] = match object.get("matchExpressions").filter(|v| !v.is_null()) {
            None => &[],
            Some(Value::Array(list)) => list,
            Some(_) => {
                return Err(Unconstrained::Malformed(format!("{}.matchExpressions", field())));
            }
        };
        let carried = alternatives
            .iter()
            .any(|alternative| alternative.iter().all(|e| expressions.contains(e)));
        let copies = if carried { 1 } else { alternatives.len() };
        written = written.saturating_add(json_len(&term).saturating_mul(copies));
        if written > MAX_WRITTEN_TERMS_BYTES {
            return Err(Unconstrained::TooLarge {
                terms: existing.len(),
                alternatives: alternatives.len(),
            });
        }
        if carried {
            terms.push(term);
            continue;
        }
        changed = true;
        for alternative in alternatives {
            let mut multiplied = object.clone();
            let mut all = expressions.to_vec();
            // A term may already carry part of an alternative.
            for expression in alternative {
                if !all.contains(expression) {
                    all.push(expression.clone());
                }
            }
            multiplied.insert("matchExpressions".to_owned(), Value::Array(all));
            terms.push(Value::Object(multiplied));
        }
    }
    if !changed {
        return Ok(None);
    }
    Ok(Some(PatchOperation::Replace(ReplaceOperation { path, value: Value::Array(terms) })))
}

/// The most bytes of required node selector terms R4 writes: the API server keeps no object above
/// 1.5 MiB (etcd's request limit), so terms multiplied past it make a pod that can never be stored.
/// It bounds the patch by a constant, whatever the number of terms and of alternatives.
pub const MAX_WRITTEN_TERMS_BYTES: usize = 1536 * 1024;

/// Why the constraint cannot be ANDed into the required terms.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unconstrained {
    /// The field named has the wrong shape.
    Malformed(String),
    /// The terms multiplied by the alternatives would be larger than [`MAX_WRITTEN_TERMS_BYTES`].
    TooLarge { terms: usize, alternatives: usize },
}

#[cfg(test)]
mod tests;
