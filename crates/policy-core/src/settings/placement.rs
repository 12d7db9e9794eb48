//! GPU placement: which GPU products a namespace's pods may land on (`gpuProducts`, tightened by
//! the namespace annotation `gpu-policy.io/gpu-products`), the tolerations GPU pods get
//! (`gpuTolerations`), and whether a pod that asks for no GPU may tolerate a GPU taint
//! (`denyCpuPodsOnGpuNodes`). docs/policy.md, "GPU placement".

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::document::Json;

/// Namespace annotation: the GPU products (GFD's `nvidia.com/gpu.product` values, `*` globs)
/// the namespace's GPU pods may use, within the cluster's `gpuProducts`.
pub const GPU_PRODUCTS_ANNOTATION: &str = "gpu-policy.io/gpu-products";
/// The GFD label naming a node's GPU product (`NVIDIA-H100-80GB-HBM3`).
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// The most patterns one list may hold: each becomes a value of a node selector requirement and
/// a part of a claim's CEL selector.
pub const MAX_PRODUCT_PATTERNS: usize = 64;
/// GFD's product label is a label value: at most 63 characters.
const MAX_PATTERN_BYTES: usize = 63;
/// The longest product name: a DRA device's string attribute (`productName`) holds 64 bytes.
const MAX_PRODUCT_BYTES: usize = 64;
/// The most tolerations `gpuTolerations` may list.
pub const MAX_GPU_TOLERATIONS: usize = 32;

/// One product pattern: a GFD product label value in which `*` matches any run of characters.
#[derive(Debug, Clone)]
pub struct ProductPattern {
    text: String,
    /// `^...$` over the GFD form (`NVIDIA-H100-80GB-HBM3`).
    label: Regex,
}

impl PartialEq for ProductPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for ProductPattern {}

impl ProductPattern {
    /// Reads one pattern. Err: why, for a message.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("an empty product".to_owned());
        }
        if text.len() > MAX_PATTERN_BYTES {
            return Err(format!("{text:?} is longer than a label value ({MAX_PATTERN_BYTES})"));
        }
        if let Some(bad) = text
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '*')))
        {
            return Err(format!(
                "{text:?} holds {bad:?}: a product is a label value (letters, digits, '-', '_', \
                 '.'), with '*' for any run of characters"
            ));
        }
        let label = Regex::new(&label_regex(text)).map_err(|err| err.to_string())?;
        Ok(ProductPattern { text: text.to_owned(), label })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Holds a `*`.
    pub fn is_glob(&self) -> bool {
        self.text.contains('*')
    }

    /// Whether a GFD product label value matches.
    pub fn matches(&self, product: &str) -> bool {
        self.label.is_match(product)
    }

    /// A regular expression (RE2 syntax, as CEL's `matches` reads it) that matches the product
    /// as GFD labels it and as the NVIDIA DRA driver names it in its `productName` attribute:
    /// GFD writes the driver's spaces as `-` (`NVIDIA H100 80GB HBM3` is labelled
    /// `NVIDIA-H100-80GB-HBM3`), so a `-` of the pattern matches either.
    pub fn device_regex(&self) -> String {
        let parts: Vec<String> = self
            .text
            .split('*')
            .map(|part| part.split('-').map(regex::escape).collect::<Vec<_>>().join("[- ]"))
            .collect();
        format!("^{}$", parts.join(".*"))
    }
}

/// `^...$` with `*` as `.*`, everything else literal.
fn label_regex(text: &str) -> String {
    let parts: Vec<String> = text.split('*').map(regex::escape).collect();
    format!("^{}$", parts.join(".*"))
}

impl fmt::Display for ProductPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Reads a list of patterns (the config's, or the annotation's comma list). Err: why.
pub fn parse_patterns<'a>(
    items: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<ProductPattern>, String> {
    let mut patterns: Vec<ProductPattern> = Vec::new();
    for item in items {
        let pattern = ProductPattern::parse(item)?;
        if !patterns.contains(&pattern) {
            patterns.push(pattern);
        }
        if patterns.len() > MAX_PRODUCT_PATTERNS {
            return Err(format!("more than {MAX_PRODUCT_PATTERNS} products"));
        }
    }
    Ok(patterns)
}

/// The GPU products a namespace's GPU pods may use: a product is allowed when every list in force
/// (the cluster's `gpuProducts`, the namespace's annotation) has a pattern matching it. No list:
/// any product.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProductSet {
    /// Each list in force, the cluster's first; none of them empty.
    lists: Vec<Vec<ProductPattern>>,
}

impl ProductSet {
    /// The set of the lists, each one tightening the ones before (empty lists allow any product).
    pub fn new(lists: impl IntoIterator<Item = Vec<ProductPattern>>) -> Self {
        ProductSet { lists: lists.into_iter().filter(|list| !list.is_empty()).collect() }
    }

    /// Every product is allowed.
    pub fn is_any(&self) -> bool {
        self.lists.is_empty()
    }

    /// The lists in force, the cluster's first.
    pub fn lists(&self) -> &[Vec<ProductPattern>] {
        &self.lists
    }

    /// Whether a product (GFD's label value) is allowed.
    pub fn allows(&self, product: &str) -> bool {
        // No product is longer than a DRA string attribute (64 bytes; a label value holds 63): a
        // pod's own value of a megabyte is refused before every pattern scans it.
        product.len() <= MAX_PRODUCT_BYTES
            && self.lists.iter().all(|list| list.iter().any(|pattern| pattern.matches(product)))
    }

    /// The products the set names without a glob that every list allows: what it allows of
    /// products no node is known to carry.
    pub fn literals(&self) -> Vec<&str> {
        let mut literals: Vec<&str> = self
            .lists
            .iter()
            .flatten()
            .filter(|pattern| !pattern.is_glob())
            .map(ProductPattern::as_str)
            .filter(|product| self.allows(product))
            .collect();
        literals.sort_unstable();
        literals.dedup();
        literals
    }

    /// The products a node affinity lists: the known products (the nodes' labels) the set allows,
    /// and the literals it allows, sorted, each once.
    pub fn expand<'a>(&'a self, known: &'a [String]) -> Vec<&'a str> {
        let mut products: Vec<&str> = known
            .iter()
            .map(String::as_str)
            .filter(|product| self.allows(product))
            .chain(self.literals())
            .collect();
        products.sort_unstable();
        products.dedup();
        products
    }

    /// Some list holds a glob.
    pub fn has_globs(&self) -> bool {
        self.lists.iter().flatten().any(ProductPattern::is_glob)
    }
}

impl fmt::Display for ProductSet {
    /// `H100*,B200*` or, with two lists, `H100*,B200* within A*,B*`; `any product` for none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lists.is_empty() {
            return f.write_str("any product");
        }
        let lists: Vec<String> = self
            .lists
            .iter()
            .rev()
            .map(|list| list.iter().map(ProductPattern::as_str).collect::<Vec<_>>().join(","))
            .collect();
        f.write_str(&lists.join(" within "))
    }
}

/// A Kubernetes toleration, as `gpuTolerations` lists it and Kubernetes validates it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Toleration {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<TolerationOperator>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TolerationOperator {
    Exists,
    Equal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

impl Toleration {
    /// What Kubernetes' validation would refuse of it, on one line.
    pub fn problem(&self) -> Option<String> {
        let exists = self.operator == Some(TolerationOperator::Exists);
        if self.key.is_empty() {
            return Some(
                "a GPU toleration names the key of the GPU taint (an empty key tolerates every \
                 taint)"
                    .to_owned(),
            );
        }
        if !valid_key(&self.key) {
            return Some(format!("key {:?} is not a label key", self.key));
        }
        if exists && !self.value.is_empty() {
            return Some(format!("key {:?}: operator Exists takes no value", self.key));
        }
        if !self.value.is_empty() && !valid_value(&self.value) {
            return Some(format!("value {:?} is not a label value", self.value));
        }
        if self.toleration_seconds.is_some() && self.effect != Some(TaintEffect::NoExecute) {
            return Some(format!("key {:?}: tolerationSeconds needs effect NoExecute", self.key));
        }
        None
    }

    /// As the pod spec writes it.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// `nvidia.com/gpu=present:NoSchedule`, `nvidia.com/gpu:NoSchedule` (any value), as kubectl
    /// writes taints.
    pub fn taint_text(&self) -> String {
        let mut text = self.key.clone();
        if self.operator != Some(TolerationOperator::Exists) && !self.value.is_empty() {
            text.push('=');
            text.push_str(&self.value);
        }
        if let Some(effect) = self.effect {
            text.push(':');
            text.push_str(effect.as_str());
        }
        text
    }
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of up to 63 characters.
fn valid_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|prefix| {
        !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    prefix_ok && !name.is_empty() && valid_value(name)
}

/// A label value: up to 63 characters, alphanumerics, `-`, `_` and `.`, alphanumeric at both ends.
fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && value.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && value.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// Whether a pod's toleration (raw JSON) tolerates the taint a GPU toleration is written for:
/// its key (or an empty key with `Exists`: every taint), its value (`Exists`, or equal; a GPU
/// toleration with `Exists` stands for a taint of any value) and its effect (empty: every
/// effect).
pub fn tolerates(pod_toleration: Json<'_>, gpu: &Toleration) -> bool {
    let text = |key: &str| pod_toleration.get(key).and_then(Json::as_str);
    let operator = text("operator").unwrap_or("Equal");
    let key = text("key").unwrap_or("");
    let effect = text("effect").unwrap_or("");
    let key_matches = match (key.is_empty(), operator) {
        (true, "Exists") => true,
        (true, _) => false,
        (false, _) => key == gpu.key,
    };
    let value_matches = operator == "Exists"
        || gpu.operator == Some(TolerationOperator::Exists)
        || text("value").unwrap_or("") == gpu.value;
    let effect_matches =
        effect.is_empty() || gpu.effect.is_none_or(|gpu_effect| gpu_effect.as_str() == effect);
    key_matches && value_matches && effect_matches
}

/// Whether a pod's toleration (raw JSON) is the same as one to add, as Kubernetes compares
/// tolerations when it merges them: key, operator (default `Equal`), value, effect and
/// `tolerationSeconds`. What a pod already carries is not added again.
pub fn same_toleration(a: Json<'_>, b: &serde_json::Value) -> bool {
    let field = |key: &str, default: &'static str| {
        let a = a.get(key).and_then(Json::as_str).unwrap_or(default);
        a == b.get(key).and_then(serde_json::Value::as_str).unwrap_or(default)
    };
    ["key", "value", "effect"].iter().all(|key| field(key, ""))
        && field("operator", "Equal")
        && match (a.get("tolerationSeconds"), b.get("tolerationSeconds")) {
            (None, None) => true,
            (Some(a), Some(b)) => a == *b,
            _ => false,
        }
}

#[cfg(test)]
mod tests;
