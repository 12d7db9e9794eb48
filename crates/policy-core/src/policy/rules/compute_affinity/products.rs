//! R4 `compute-affinity`: a GPU pod pinned to GPU products its namespace does not allow
//! (docs/policy.md, "GPU products").
//!
//! Reads: whether the pod is a GPU pod (device plugin, DRA or a sharing scheme); the namespace's
//! products ([`crate::settings::NamespaceSettings::gpu_products`]);
//! `spec.nodeSelector["nvidia.com/gpu.product"]`; the `nvidia.com/gpu.product` requirements with
//! operator `In` of `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
//!
//! Denies: a pod whose node selector names a product the set does not allow, or whose every
//! required node selector term has an `In` requirement on the product whose values the set
//! allows none of: such a pod can only run on products the namespace may not use. One term
//! that admits an allowed product (or says nothing of the product) keeps the pod: R4's own
//! requirement, ANDed into that term, narrows it to the allowed products. The message names the
//! products the pod asks for and those the namespace allows. Changes nothing.

use std::collections::BTreeSet;

use super::gfd_labels::REQUIRED;
use super::product_affinity::{listed, source};
use crate::document::Json;
use crate::policy::rules::rule::{Findings, RuleInput};
use crate::settings::{PRODUCT_LABEL, ProductSet};

pub(super) fn check(input: &RuleInput<'_, '_>, findings: &mut Findings) {
    let set = &input.namespace.gpu_products;
    if set.is_any() || !input.view.is_gpu_pod() {
        return;
    }
    let mut asked = BTreeSet::new();
    let mut places = Vec::new();
    let selected = input
        .view
        .spec
        .get("nodeSelector")
        .and_then(|selector| selector.get(PRODUCT_LABEL))
        .and_then(Json::as_str);
    if let Some(product) = selected.filter(|product| !set.allows(product)) {
        asked.insert(product);
        places.push(format!("spec.nodeSelector[{PRODUCT_LABEL}]"));
    }
    if let Some(elsewhere) = terms_elsewhere(input.view.spec.as_json(), set) {
        asked.extend(elsewhere);
        places.push("every required node affinity term".to_owned());
    }
    if places.is_empty() {
        return;
    }
    let noun = if asked.len() == 1 { "product" } else { "products" };
    findings.violations.push(format!(
        "the pod asks for GPU {noun} {} ({}), which this namespace does not allow: it allows \
         {set} ({}); ask for an allowed product, or leave {PRODUCT_LABEL} out and the allowed \
         products are required for you",
        listed(asked),
        places.join(" and "),
        source(input)
    ));
}

/// The products the required terms ask for, when every term asks only for products the set does
/// not allow; None when a term admits an allowed product, or there are no terms.
fn terms_elsewhere<'v>(spec: Json<'v>, set: &ProductSet) -> Option<BTreeSet<&'v str>> {
    let terms = spec
        .get("affinity")?
        .get("nodeAffinity")?
        .get(REQUIRED)?
        .get("nodeSelectorTerms")?
        .as_array()?;
    if terms.is_empty() {
        return None;
    }
    let mut asked = BTreeSet::new();
    for term in terms {
        let mut excluded = false;
        let requirements = term.get("matchExpressions").and_then(Json::as_array);
        for requirement in requirements.into_iter().flatten() {
            if let Some(values) = disallowed_values(requirement, set) {
                excluded = true;
                asked.extend(values);
            }
        }
        if !excluded {
            return None;
        }
    }
    Some(asked)
}

/// The values of `requirement` when it is `nvidia.com/gpu.product In [...]`, with at least one
/// value and none the set allows.
fn disallowed_values<'v>(requirement: Json<'v>, set: &ProductSet) -> Option<Vec<&'v str>> {
    if requirement.get("key")?.as_str()? != PRODUCT_LABEL
        || requirement.get("operator")?.as_str()? != "In"
    {
        return None;
    }
    let values: Vec<&str> =
        requirement.get("values")?.as_array()?.into_iter().filter_map(Json::as_str).collect();
    let none_allowed = !values.is_empty() && values.iter().all(|value| !set.allows(value));
    none_allowed.then_some(values)
}

#[cfg(test)]
mod tests;
