//! R4 `compute-affinity`: the GPU products a namespace allows, as the node selector requirement
//! R4 ANDs into every alternative of the required node affinity it writes for device-plugin GPU
//! containers (docs/policy.md, "GPU products").
//!
//! Reads: the namespace's products ([`crate::settings::NamespaceSettings::gpu_products`]: the
//! config's `gpuProducts` within the namespace annotation `gpu-policy.io/gpu-products`); of the
//! nodes ([`crate::policy::cluster::NodeFacts`]), the products GFD's `nvidia.com/gpu.product`
//! names on the GPU nodes and whether any GPU node carries that label;
//! `computeAffinity.whenNodesUnlabelled`.
//!
//! Changes: nothing itself. It gives `nvidia.com/gpu.product In [E]` for `compute_affinity.rs` to
//! write with its floors, E being the nodes' products the set allows and the products the set
//! names without a glob. The requirement is a restriction the operator configured, so it is
//! written even where no GPU node carries the label (the pod then waits for GFD, with a warning).
//!
//! Denies: a set that allows none of the products the GPU nodes carry (and names no product
//! without a glob); with `whenNodesUnlabelled: require`, a set of globs with no product known to
//! expand them against. Notices: with `skip`, such a set is not written; no GPU node carries the
//! label, or none carries an allowed product (the pod would stay Pending).

use serde_json::{Map, Value};

use crate::policy::message::{
    LISTED_NAMES, MAX_LISTED_NAME_BYTES, Notice, NoticeKind, and_more, prefix_within,
};
use crate::policy::rules::rule::{Findings, RuleInput};
use crate::settings::{GPU_PRODUCTS_ANNOTATION, PRODUCT_LABEL, ProductSet, WhenNodesUnlabelled};

/// The product requirement R4 writes, and how it is described.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ProductAffinity {
    /// `{key: nvidia.com/gpu.product, operator: In, values: [...]}`.
    pub expression: Value,
    /// `require GPU product in [A, B] (source)`: the change, for people.
    pub summary: String,
    /// `GPU product in [A, B]`: the constraint, in messages naming it.
    pub words: String,
}

/// The product requirement for the namespace's device-plugin GPU pods, or None when every product
/// is allowed or the set cannot be written (said in `findings`).
pub(super) fn product_affinity(
    input: &RuleInput<'_, '_>,
    findings: &mut Findings,
) -> Option<ProductAffinity> {
    let set = &input.namespace.gpu_products;
    if set.is_any() {
        return None;
    }
    let known = input.nodes.map(|nodes| nodes.gpu_products()).unwrap_or_default();
    let allowed = set.expand(&known);
    let source = source(input);
    if allowed.is_empty() {
        unwritable(input, set, &known, source, findings);
        return None;
    }
    let words = format!("GPU product in [{}]", listed(allowed.iter().copied()));
    if let Some(notice) = pending(input, set, &known, &words) {
        findings.notices.push(notice);
    }
    Some(ProductAffinity {
        expression: product_expression(&allowed),
        summary: format!("require {words} ({source})"),
        words,
    })
}

/// `{key: nvidia.com/gpu.product, operator: In, values}`.
pub(super) fn product_expression(values: &[&str]) -> Value {
    let mut expression = Map::new();
    expression.insert("key".to_owned(), Value::String(PRODUCT_LABEL.to_owned()));
    expression.insert("operator".to_owned(), Value::String("In".to_owned()));
    let values = values.iter().map(|value| Value::String((*value).to_owned())).collect();
    expression.insert("values".to_owned(), Value::Array(values));
    Value::Object(expression)
}

/// Where the namespace's list comes from, for messages.
pub(super) fn source(input: &RuleInput<'_, '_>) -> String {
    let from_config = !input.settings.gpu_products().is_empty();
    let lists = input.namespace.gpu_products.lists().len();
    let annotation = format!("namespace annotation {GPU_PRODUCTS_ANNOTATION}");
    match (from_config, lists) {
        (true, 1) => "gpuProducts".to_owned(),
        (true, _) => format!("gpuProducts and {annotation}"),
        (false, _) => annotation,
    }
}

/// `A, B, C`: at most [`LISTED_NAMES`] products, each cut to [`MAX_LISTED_NAME_BYTES`] (a pod's
/// own values may be of any length), then how many more there are.
pub(super) fn listed<'s>(products: impl IntoIterator<Item = &'s str>) -> String {
    let mut products = products.into_iter();
    let mut text: Vec<String> = products
        .by_ref()
        .take(LISTED_NAMES)
        .map(|product| prefix_within(product, MAX_LISTED_NAME_BYTES).to_owned())
        .collect();
    let more = products.count();
    if more > 0 {
        text.push(and_more(more));
    }
    text.join(", ")
}

/// The set allows no product R4 can name: the nodes carry products, none allowed (a violation);
/// or it holds only globs and no product is known to expand them against.
fn unwritable(
    input: &RuleInput<'_, '_>,
    set: &ProductSet,
    known: &[String],
    source: String,
    findings: &mut Findings,
) {
    if !known.is_empty() {
        findings.violations.push(format!(
            "no GPU node carries a GPU product this namespace allows: it allows {set} ({source}), \
             the GPU nodes carry {}; allow one of the products the nodes carry, or add nodes of \
             an allowed product",
            listed(known.iter().map(String::as_str))
        ));
        return;
    }
    let cause = match input.nodes {
        None => "no node is known".to_owned(),
        Some(_) => format!("no GPU node carries GPU Feature Discovery's {PRODUCT_LABEL}"),
    };
    let remedy = "deploy GPU Feature Discovery on the GPU nodes, or name the products without \
                  globs (gpu-policy check expands globs against --nodes or --node-products)";
    match input.settings.config().compute_affinity.when_nodes_unlabelled {
        WhenNodesUnlabelled::Skip => findings.notices.push(Notice::new(
            NoticeKind::UnenforcedFloor,
            format!(
                "compute-affinity: {cause} to expand the GPU products {set} ({source}) against, \
                 so no GPU product is required; {remedy}"
            ),
        )),
        WhenNodesUnlabelled::Require => findings.violations.push(format!(
            "{cause} to expand the GPU products {set} ({source}) against, so the GPU product \
             constraint cannot be written (computeAffinity.whenNodesUnlabelled: require); \
             {remedy}"
        )),
    }
}

/// Why a pod constrained to `words` will stay Pending, when the nodes say so: no GPU node carries
/// the product label, or none carries an allowed product.
fn pending(
    input: &RuleInput<'_, '_>,
    set: &ProductSet,
    known: &[String],
    words: &str,
) -> Option<Notice> {
    let nodes = input.nodes?;
    if known.is_empty() {
        if !nodes.gpu_node_labels().product_unlabelled() {
            return None;
        }
        return Some(Notice::new(
            NoticeKind::UnmetComputeCapability,
            format!(
                "compute-affinity: no GPU node carries GPU Feature Discovery's {PRODUCT_LABEL}, \
                 so no node meets {words} and the pod will stay Pending until GPU Feature \
                 Discovery labels the nodes"
            ),
        ));
    }
    if known.iter().any(|product| set.allows(product)) {
        return None;
    }
    Some(Notice::new(
        NoticeKind::UnmetComputeCapability,
        format!(
            "compute-affinity: no GPU node carries an allowed GPU product (the nodes carry {}), \
             so no node meets {words}; the pod will stay Pending",
            listed(known.iter().map(String::as_str))
        ),
    ))
}
