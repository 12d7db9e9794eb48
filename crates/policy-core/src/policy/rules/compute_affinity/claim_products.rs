//! R4 `compute-affinity` for a ResourceClaim in a namespace restricted to GPU products
//! (mutating): the devices the claim gets are of a product the namespace allows
//! (docs/policy.md, "GPU products of DRA claims").
//!
//! Reads: the namespace's GPU products ([`NamespaceSettings::gpu_products`]: the config's
//! `gpuProducts`, tightened by the namespace annotation `gpu-policy.io/gpu-products`); the
//! claim's device requests (`exactly`, each `firstAvailable` subrequest, or the flat v1beta1
//! request) and their `deviceClassName`. Never the pod a claim is made for: the products depend on
//! the namespace alone, so a claim made for a pod and one created on its own get the same.
//!
//! Changes: adds one selector, [`selector`], to every alternative of a GPU device class, unless it
//! carries it already (re-invocation); a ResourceClaimTemplate is never changed (the claims made
//! from it are). Nothing when the namespace allows any product.
//!
//! Denies: a claim with a GPU request when the selector would be longer than the API server
//! accepts ([`MAX_SELECTOR_BYTES`]): written, the claim would be refused; left out, its devices
//! could be of any product.
//!
//! [`NamespaceSettings::gpu_products`]: crate::settings::NamespaceSettings::gpu_products

use super::claim_selectors::{MadeLists, add_selector, gpu_alternatives};
use crate::policy::dra::claims::ClaimKind;
use crate::policy::dra::products::{MAX_SELECTOR_BYTES, TooLong, named, selector};
use crate::policy::message::quoted_list;
use crate::policy::rules::rule::{ClaimInput, Findings, Mutation};
use crate::settings::GPU_PRODUCTS_ANNOTATION;

/// The products' half of R4's claim entry ([`super::claim_entry`]); `made`: the selector lists
/// this evaluation made.
pub(super) fn check(input: &ClaimInput<'_>, made: &mut MadeLists) -> Findings {
    let mut findings = Findings::default();
    if input.kind != ClaimKind::Claim {
        return findings;
    }
    let Some(selector) = selector(&input.namespace.gpu_products) else {
        return findings;
    };
    let alternatives = gpu_alternatives(input);
    if alternatives.is_empty() {
        return findings;
    }
    let selector = match selector {
        Ok(selector) => selector,
        Err(TooLong(length)) => {
            let patterns: usize = input.namespace.gpu_products.lists().iter().map(Vec::len).sum();
            findings.violations.push(format!(
                "the GPU products allowed in namespace {:?} ({patterns} patterns of gpuProducts and \
                 {GPU_PRODUCTS_ANNOTATION}) make a device selector of {length} bytes, more than the \
                 {MAX_SELECTOR_BYTES} a claim's selector may hold: the claim cannot be held to \
                 them; allow fewer or shorter products",
                input.namespace_name
            ));
            return findings;
        }
    };
    let (operations, requests) = add_selector(&alternatives, &selector, made);
    if operations.is_empty() {
        return findings;
    }
    findings.changes.push(Mutation {
        summary: format!(
            "require a GPU product of {} of the devices of {} (namespace {})",
            named(&input.namespace.gpu_products),
            quoted_list("request", "requests", requests),
            input.namespace_name
        ),
        operations,
        overrides_author: false,
    });
    findings
}

#[cfg(test)]
mod tests;
