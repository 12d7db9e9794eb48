//! R4 `compute-affinity` for GPU containers whose GPUs come through DRA claims, in a namespace
//! restricted to GPU products: the claims the pod only references (`resourceClaimName`) were
//! made without its pod, so nothing held their devices to the namespace's products when they were
//! allocated (a claim made in another namespace's state, or before the restriction). The claims
//! made for a pod get the products' selector themselves ([`super::claim_products`]).
//!
//! Reads: the namespace's GPU products (`gpuProducts`, tightened by `gpu-policy.io/gpu-products`);
//! the GPU containers holding GPUs through claims ([`super::dra_floors::holds_claimed_gpus`]);
//! from the cluster (or `check`'s input) the claims, the devices allocated to their GPU requests
//! and the `productName` their ResourceSlices publish. For a pod that already exists (`audit`),
//! the claims made for it from templates too.
//!
//! Checks: a claim allocated a device of `gpu.nvidia.com` whose product the namespace does not
//! allow is a violation (the driver's `NVIDIA H100 80GB HBM3` is read as GFD's
//! `NVIDIA-H100-80GB-HBM3`; a device that publishes no product passes, as the selector lets it).
//! An unallocated referenced claim whose GPU requests do not all carry the products' selector
//! gets a notice naming it.

use super::dra_floors::holds_claimed_gpus;
use super::pod_claims::{claims_in_use, named_devices};
use crate::policy::container::Container;
use crate::policy::dra::products::{allows_device, named, selector};
use crate::policy::message::{Notice, NoticeKind};
use crate::policy::rules::rule::{Findings, RuleInput};

/// R4's check of the products of the devices a pod's claims got.
pub(super) fn check(input: &RuleInput<'_, '_>, findings: &mut Findings) {
    let products = &input.namespace.gpu_products;
    let Some(selector) = selector(products) else {
        return;
    };
    let Some(claims) = input.claims else {
        return;
    };
    let in_claims = |c: &Container<'_>| holds_claimed_gpus(input, c);
    if !input.view.containers.iter().any(in_claims) {
        return;
    }
    for claim in claims_in_use(input, &in_claims) {
        let name = &claim.name;
        let users_text = claim.users_text();
        match &claim.allocated {
            Some(devices) => {
                let outside: Vec<String> = devices
                    .iter()
                    .filter_map(|d| {
                        let versions = claims.device_versions(&d.driver, &d.pool, &d.device)?;
                        let product = versions.product_name?;
                        (!allows_device(products, &product))
                            .then(|| format!("{} of pool {} is {product:?}", d.device, d.pool))
                    })
                    .collect();
                if outside.is_empty() {
                    continue;
                }
                findings.violations.push(format!(
                    "{users_text} {} ResourceClaim {name:?}, allocated a GPU of a product namespace \
                     {:?} does not allow ({}): {}; use a claim whose devices are of those products",
                    claim.verb(),
                    input.namespace_name,
                    named(products),
                    named_devices(outside)
                ));
            }
            None if claim.referenced => {
                let carried = |selectors: &Vec<String>| {
                    selector.as_ref().is_ok_and(|selector| selectors.contains(selector))
                };
                let gpu_alternatives = || {
                    claim
                        .summary
                        .requests
                        .iter()
                        .filter(|r| r.gpu.is_some())
                        .flat_map(|r| &r.gpu_selectors)
                };
                if !claim.summary.selectors_dropped && gpu_alternatives().all(carried) {
                    continue;
                }
                findings.notices.push(Notice::new(
                    NoticeKind::UnguaranteedClaimProducts,
                    format!(
                        "ResourceClaim {name:?} ({users_text}) may get a GPU of a product \
                         namespace {:?} does not allow ({}): not every GPU request carries the \
                         products' selector; create the claim again to get it",
                        input.namespace_name,
                        named(products)
                    ),
                ));
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests;
