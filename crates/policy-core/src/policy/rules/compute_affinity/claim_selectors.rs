//! How R4 writes selectors into a ResourceClaim's GPU requests: the floors of the pod it is made
//! for ([`super::claim_floors`]) and the namespace's GPU products ([`super::claim_products`]), into
//! the same requests by one patch ([`super::claim_entry`] runs both).
//!
//! Reads: the claim's device requests (`exactly`, each `firstAvailable` subrequest, or the flat
//! v1beta1 request), their `deviceClassName` and `selectors`.
//!
//! Changes: appends a selector to every alternative of a GPU device class that does not carry it
//! already (re-invocation adds nothing). An alternative without `selectors` gets the list made by
//! the first selector written and the next ones appended to it, so two selectors of one evaluation
//! never make the list twice (the second `add` would replace the first).

use std::collections::BTreeSet;

use json_patch::PatchOperation;
use json_patch::jsonptr::PointerBuf;
use serde_json::{Value, json};

use crate::document::Json;

use crate::policy::patch::add;
use crate::policy::rules::rule::ClaimInput;

/// The alternatives (by JSON pointer) whose `selectors` list an earlier selector of this
/// evaluation made.
#[derive(Debug, Default)]
pub(super) struct MadeLists(BTreeSet<String>);

/// One alternative of a GPU device class: where it is, its request's name, the alternative.
pub(super) struct GpuAlternative<'a> {
    pub at: String,
    pub request: &'a str,
    pub alternative: Json<'a>,
}

/// Every alternative of a GPU device class of the claim, in the requests' order.
pub(super) fn gpu_alternatives<'a>(input: &ClaimInput<'a>) -> Vec<GpuAlternative<'a>> {
    let mut found = Vec::new();
    let listed = input.object.pointer("/spec/devices/requests").and_then(Json::as_array);
    for (index, request) in listed.into_iter().flatten().enumerate() {
        let name = request.get("name").and_then(Json::as_str).unwrap_or("");
        let base = format!("/spec/devices/requests/{index}");
        let mut places: Vec<(String, Json<'a>)> = Vec::new();
        if let Some(exactly) = request.get("exactly").filter(|v| v.is_object()) {
            places.push((format!("{base}/exactly"), exactly));
        } else if let Some(first) = request.get("firstAvailable").and_then(Json::as_array) {
            for (sub, alternative) in first.iter().enumerate() {
                places.push((format!("{base}/firstAvailable/{sub}"), alternative));
            }
        } else {
            places.push((base, request));
        }
        for (at, alternative) in places {
            let class = alternative.get("deviceClassName").and_then(Json::as_str);
            if class.is_some_and(|c| (input.is_gpu_class)(c)) {
                found.push(GpuAlternative { at, request: name, alternative });
            }
        }
    }
    found
}

/// The operations adding `selector` to each of `alternatives` that lacks it, and the names of the
/// requests changed (each once).
pub(super) fn add_selector<'a>(
    alternatives: &[GpuAlternative<'a>],
    selector: &str,
    made: &mut MadeLists,
) -> (Vec<PatchOperation>, Vec<&'a str>) {
    let mut operations = Vec::new();
    let mut requests: Vec<&str> = Vec::new();
    for GpuAlternative { at, request, alternative } in alternatives {
        let Some(operation) = add_to(at, *alternative, selector, made) else {
            continue;
        };
        operations.push(operation);
        if requests.last() != Some(request) {
            requests.push(request);
        }
    }
    (operations, requests)
}

/// The operation adding `selector` to the alternative at `at` (a JSON pointer), or None when it
/// carries it already.
fn add_to(
    at: &str,
    alternative: Json<'_>,
    selector: &str,
    made: &mut MadeLists,
) -> Option<PatchOperation> {
    let entry = json!({"cel": {"expression": selector}});
    let path = |suffix: &str| PointerBuf::parse(format!("{at}/{suffix}")).ok();
    match alternative.get("selectors").and_then(Json::as_array) {
        Some(existing) => {
            let carried = existing
                .iter()
                .any(|s| s.pointer("/cel/expression").and_then(Json::as_str) == Some(selector));
            if carried {
                return None;
            }
            path("selectors/-").map(|p| add(p, entry))
        }
        None if made.0.contains(at) => path("selectors/-").map(|p| add(p, entry)),
        None => {
            made.0.insert(at.to_owned());
            path("selectors").map(|p| add(p, Value::Array(vec![entry])))
        }
    }
}
