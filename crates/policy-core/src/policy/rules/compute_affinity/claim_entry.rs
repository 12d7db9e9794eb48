//! R4's entry on ResourceClaims (mutating): the floors of the pod a claim is made for
//! (`claim_floors.rs`), then the namespace's GPU products (`claim_products.rs`), their selectors
//! written into the same lists (`claim_selectors.rs`).
//!
//! Reads and changes: what the two checks read and change; nothing of its own.

use super::claim_selectors::MadeLists;
use super::{claim_floors, claim_products};
use crate::policy::rules::rule::{ApiServer, Check, ClaimInput, Entry, Findings};

pub const ENTRY: Entry = Entry {
    check: Check::Claim(check),
    api_server: ApiServer::WebhookOnly {
        reason: "what a claim's pod needs comes from the pod's images, another object, which a \
        policy on the claim cannot read; the GPU products' selector is made from the namespace's \
        gpu-products annotation, read and narrowed to gpuProducts by the webhook",
    },
};

pub fn check(input: &ClaimInput<'_>) -> Findings {
    let mut made = MadeLists::default();
    let mut findings = claim_floors::check(input, &mut made);
    let products = claim_products::check(input, &mut made);
    findings.changes.extend(products.changes);
    findings.violations.extend(products.violations);
    findings.notices.extend(products.notices);
    findings
}
