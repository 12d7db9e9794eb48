//! The GPU products a namespace allows ([`ProductSet`]) as the CEL selector R4 adds to a claim's
//! GPU requests ([`selector`]), and as the judgement of an allocated device
//! ([`allows_device`]); the tests hold the two to the same answers.
//!
//! The NVIDIA DRA driver names a device's product in its string attribute `productName`
//! (`NVIDIA H100 80GB HBM3`) where GPU Feature Discovery labels the node with it, spaces written
//! as `-` (`NVIDIA-H100-80GB-HBM3`). The patterns are GFD's: the selector matches both forms
//! ([`ProductPattern::device_regex`]) and the judgement reads the driver's spaces as `-`.
//!
//! Guarded as the floors are ([`super::floor`]): a CEL error aborts the whole allocation, so a
//! device of another driver passes, and so does a device of `gpu.nvidia.com` that does not publish
//! `productName`. The driver publishes it as a string; the selector does not test its type, since
//! the API server prices any `type()` comparison above a claim selector's cost limit and refuses
//! the claim ("too complex, exceeds cost limit", on 1.32 to 1.37).

use super::tables::GPU_DRIVER;
use crate::policy::message::{LISTED_NAMES, and_more};
use crate::policy::rules::cel_text::string;
use crate::settings::{ProductPattern, ProductSet};

/// The NVIDIA DRA driver's attribute naming a device's product.
pub const PRODUCT_ATTRIBUTE: &str = "productName";

/// The longest selector the API server accepts in a claim (`resource.CELSelectorExpressionMaxLength`).
pub const MAX_SELECTOR_BYTES: usize = kubernetes_cel::device::MAX_EXPRESSION_BYTES;

/// A selector longer than the API server accepts: its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong(pub usize);

/// The CEL selector a device must meet to be of an allowed product: every list of the set has a
/// pattern matching its `productName`. None when the set allows any product; Err when the selector
/// would be longer than [`MAX_SELECTOR_BYTES`].
///
/// `device.driver != "gpu.nvidia.com" || !("productName" in device.attributes["gpu.nvidia.com"])
/// || (device.attributes["gpu.nvidia.com"].productName.matches('^A$|^B$') && ...)`: one `matches`
/// per list, its patterns' expressions as alternatives (the shortest text, and one match per list).
pub fn selector(products: &ProductSet) -> Option<Result<String, TooLong>> {
    if products.is_any() {
        return None;
    }
    let attributes = format!("device.attributes[\"{GPU_DRIVER}\"]");
    let lists: Vec<String> = products
        .lists()
        .iter()
        .map(|list| {
            let alternatives: Vec<String> = list.iter().map(ProductPattern::device_regex).collect();
            format!("{attributes}.{PRODUCT_ATTRIBUTE}.matches({})", string(&alternatives.join("|")))
        })
        .collect();
    let text = format!(
        "device.driver != \"{GPU_DRIVER}\" || !(\"{PRODUCT_ATTRIBUTE}\" in {attributes}) || \
         ({})",
        lists.join(" && ")
    );
    Some(if text.len() > MAX_SELECTOR_BYTES { Err(TooLong(text.len())) } else { Ok(text) })
}

/// Whether a device whose `productName` is `product` (the driver's form, spaces and all) is of a
/// product the set allows.
pub fn allows_device(products: &ProductSet, product: &str) -> bool {
    products.allows(&product.replace(' ', "-"))
}

/// The set for a message, as its `Display` (`H100*,B200* within A*,B*`, the namespace's list
/// first) with at most [`LISTED_NAMES`] patterns of each list, then how many more.
pub fn named(products: &ProductSet) -> String {
    if products.is_any() {
        return products.to_string();
    }
    let lists: Vec<String> = products
        .lists()
        .iter()
        .rev()
        .map(|list| {
            let listed: Vec<&str> =
                list.iter().take(LISTED_NAMES).map(ProductPattern::as_str).collect();
            let more = list.len().saturating_sub(LISTED_NAMES);
            let mut text = listed.join(",");
            if more > 0 {
                text = format!("{text} {}", and_more(more));
            }
            text
        })
        .collect();
    lists.join(" within ")
}

#[cfg(test)]
mod tests;
