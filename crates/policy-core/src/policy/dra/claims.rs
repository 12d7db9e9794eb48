//! The device requests of a DRA claim, read from raw JSON: which ask for GPUs, how many, and
//! with admin access.
//!
//! Reads `devices.requests[]` of a ResourceClaim's `spec` or a template's `spec.spec`: in v1
//! and v1beta2 `requests[].exactly.{deviceClassName, allocationMode, count, adminAccess,
//! selectors}`, in v1beta1 the same fields flat; in all, `firstAvailable[]` subrequests, of
//! which a request counts as its largest GPU alternative.
//!
//! A GPU count is `count` (default 1) with `allocationMode: ExactCount` (the default); `All`
//! is every matching device of a node. `count` is an integer from 1 to u64::MAX (the API
//! server keeps an int64; `check`'s raw files may go higher). A float, negative, 0, string or
//! empty `allocationMode` (the API server defaults it, so only `check` sees it) is an
//! [`ObjectError`] naming the field. Totals ([`DraCount::plus`]) saturate and `All` absorbs
//! everything. `capacity.requests` is not read: a request takes `count` devices, shared or
//! not, and the API server validates capacity.

use std::fmt;

use crate::document::{Json, Object};
use crate::policy::fields::{
    FieldPath, ObjectError, as_object, member, objects, optional_bool, optional_object,
    optional_str,
};

/// How many GPUs a request (or a set of requests) may get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DraCount {
    Exactly(u64),
    /// `allocationMode: All`: every matching device of a node.
    All,
}

impl DraCount {
    /// The sum of two counts: `All` absorbs everything.
    pub fn plus(self, other: DraCount) -> DraCount {
        match (self, other) {
            (DraCount::Exactly(a), DraCount::Exactly(b)) => DraCount::Exactly(a.saturating_add(b)),
            _ => DraCount::All,
        }
    }
}

impl fmt::Display for DraCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DraCount::Exactly(n) => write!(f, "{n}"),
            DraCount::All => f.write_str("all (allocationMode: All)"),
        }
    }
}

/// One entry of `devices.requests[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    pub name: String,
    /// The GPUs it asks for; None when no alternative names a GPU class.
    pub gpu: Option<DraCount>,
    /// `adminAccess: true` on a GPU alternative.
    pub admin_access: bool,
    /// The CEL selectors of each GPU alternative (the request, or GPU `firstAvailable` entries).
    pub gpu_selectors: Vec<Vec<String>>,
}

/// What the policy knows of a claim or claim template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimSummary {
    pub requests: Vec<ClaimRequest>,
    /// Selectors past [`MAX_KEPT_SELECTOR_BYTES`], none kept: what they guarantee is unknown.
    pub selectors_dropped: bool,
}

impl ClaimSummary {
    /// Whether any request asks for a GPU.
    pub fn is_gpu(&self) -> bool {
        self.requests.iter().any(|r| r.gpu.is_some())
    }

    pub fn request(&self, name: &str) -> Option<&ClaimRequest> {
        self.requests.iter().find(|r| r.name == name)
    }

    /// The GPUs of the whole claim: every request together.
    pub fn gpu_total(&self) -> Option<DraCount> {
        self.requests.iter().filter_map(|r| r.gpu).reduce(DraCount::plus)
    }
}

/// Where the claim spec sits in the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClaimKind {
    /// A ResourceClaim: `spec`.
    Claim,
    /// A ResourceClaimTemplate: `spec.spec`.
    Template,
}

/// The API group of ResourceClaims and ResourceClaimTemplates.
pub const CLAIM_GROUP: &str = "resource.k8s.io";

impl ClaimKind {
    pub const ALL: [ClaimKind; 2] = [ClaimKind::Claim, ClaimKind::Template];

    pub fn of_kind(kind: &str) -> Option<ClaimKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    fn spec_path(self) -> &'static str {
        match self {
            ClaimKind::Claim => "spec",
            ClaimKind::Template => "spec.spec",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimKind::Claim => "ResourceClaim",
            ClaimKind::Template => "ResourceClaimTemplate",
        }
    }

    /// The plural resource name, as webhook rules and RBAC name it.
    pub fn resource(self) -> &'static str {
        match self {
            ClaimKind::Claim => "resourceclaims",
            ClaimKind::Template => "resourceclaimtemplates",
        }
    }
}

/// The request of `request` or `request/subrequest` (a `firstAvailable` alternative), as a
/// container's claim use and an allocation result name it.
pub fn base_request(request: &str) -> &str {
    request.split('/').next().unwrap_or(request)
}

/// One device alternative of a request as written: the whole request
/// (`exactly`, or the flat v1beta1 shape) or one `firstAvailable` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAlternative {
    pub class: Option<String>,
    pub count: DraCount,
    pub admin_access: bool,
    /// `selectors[].cel.expression`, as written.
    pub selectors: Vec<String>,
}

/// One entry of `devices.requests[]` as written, before its device classes are judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    pub name: String,
    pub alternatives: Vec<DeviceAlternative>,
}

/// A claim's requests as written. The cluster caches keep this, so that
/// which classes are GPU classes is decided when a claim is read: a
/// DeviceClass that arrives after the claim still counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimSpec {
    pub requests: Vec<RequestSpec>,
    /// The selectors together were past [`MAX_KEPT_SELECTOR_BYTES`]: none are kept.
    pub selectors_dropped: bool,
}

/// The most bytes of CEL selectors kept of one claim: the API server allows 32 requests of 32
/// selectors of 10 KiB each, and a cache keeps every claim of the cluster.
pub const MAX_KEPT_SELECTOR_BYTES: usize = 16 * 1024;

impl ClaimSpec {
    /// What the policy knows of the claim, `is_gpu_class` telling which device classes are GPUs.
    pub fn summary(&self, is_gpu_class: &dyn Fn(&str) -> bool) -> ClaimSummary {
        let requests = self
            .requests
            .iter()
            .map(|request| {
                let gpu_alternatives = request
                    .alternatives
                    .iter()
                    .filter(|a| a.class.as_deref().is_some_and(is_gpu_class));
                ClaimRequest {
                    name: request.name.clone(),
                    gpu: gpu_alternatives.clone().map(|a| a.count).max(),
                    admin_access: gpu_alternatives.clone().any(|a| a.admin_access),
                    gpu_selectors: gpu_alternatives.map(|a| a.selectors.clone()).collect(),
                }
            })
            .collect();
        ClaimSummary { requests, selectors_dropped: self.selectors_dropped }
    }
}

/// Reads the requests of a whole ResourceClaim or ResourceClaimTemplate
/// object. `is_gpu_class` says which device classes hand out GPUs.
pub fn parse_object(
    object: Json<'_>,
    kind: ClaimKind,
    is_gpu_class: &dyn Fn(&str) -> bool,
) -> Result<ClaimSummary, ObjectError> {
    Ok(read_object(object, kind)?.summary(is_gpu_class))
}

/// Reads the requests of a whole ResourceClaim or ResourceClaimTemplate object as written.
pub fn read_object(object: Json<'_>, kind: ClaimKind) -> Result<ClaimSpec, ObjectError> {
    let spec = match kind {
        ClaimKind::Claim => object.get("spec"),
        ClaimKind::Template => object.get("spec").and_then(|s| s.get("spec")),
    };
    let keys = [kind.spec_path()];
    let path = FieldPath::Keys(&keys);
    match spec.filter(|spec| !spec.is_null()) {
        None => Err(path.error("is missing")),
        Some(spec) => read_spec_at(spec, &path),
    }
}

/// Reads the requests of a claim spec as written; `at` is the spec's dotted path, for errors.
pub fn read_spec(spec: Json<'_>, at: &str) -> Result<ClaimSpec, ObjectError> {
    read_spec_at(spec, &FieldPath::Keys(&[at]))
}

fn read_spec_at(spec: Json<'_>, path: &FieldPath<'_>) -> Result<ClaimSpec, ObjectError> {
    let spec = as_object(spec, path)?;
    let Some(devices) = optional_object(spec, "devices", path)? else {
        return Ok(ClaimSpec::default());
    };
    let requests =
        objects(member(devices, "requests"), "requests", &path.key("devices"), |_, raw, at| {
            read_request(raw, at).map(Some)
        })?;
    let mut read = ClaimSpec { requests: requests.unwrap_or_default(), selectors_dropped: false };
    let kept: usize = read
        .requests
        .iter()
        .flat_map(|r| &r.alternatives)
        .flat_map(|a| &a.selectors)
        .map(String::len)
        .fold(0, usize::saturating_add);
    if kept > MAX_KEPT_SELECTOR_BYTES {
        for alternative in read.requests.iter_mut().flat_map(|r| &mut r.alternatives) {
            alternative.selectors = Vec::new();
        }
        read.selectors_dropped = true;
    }
    Ok(read)
}

fn read_request(request: Object<'_>, path: &FieldPath<'_>) -> Result<RequestSpec, ObjectError> {
    let name = optional_str(request, "name", path)?.unwrap_or("").to_owned();
    let first_available = |_, sub, at: &FieldPath<'_>| alternative(sub, at).map(Some);
    let alternatives = if let Some(exactly) = optional_object(request, "exactly", path)? {
        vec![alternative(exactly, &path.key("exactly"))?]
    } else if let Some(list) =
        objects(member(request, "firstAvailable"), "firstAvailable", path, first_available)?
    {
        list
    } else {
        // v1beta1: the request itself names the class.
        vec![alternative(request, path)?]
    };
    Ok(RequestSpec { name, alternatives })
}

fn alternative(fields: Object<'_>, path: &FieldPath<'_>) -> Result<DeviceAlternative, ObjectError> {
    let class = optional_str(fields, "deviceClassName", path)?.map(str::to_owned);
    let mode = optional_str(fields, "allocationMode", path)?;
    let count = match member(fields, "count") {
        None => 1,
        Some(value) => match value.as_u64() {
            Some(n) if n > 0 => n,
            _ => {
                // Anything but a number is named by its type: one short line.
                let problem = match value.as_number() {
                    Some(n) => format!("must be a whole number above 0, not {n}"),
                    None => format!("must be a whole number above 0, not {}", value.type_name()),
                };
                return Err(path.key("count").error(&problem));
            }
        },
    };
    let count = match mode {
        None | Some("ExactCount") => DraCount::Exactly(count),
        Some("All") => DraCount::All,
        Some(other) => {
            // Echoed in a denial: a long mode is cut, so the line stays short.
            const MAX_ECHOED_MODE_CHARS: usize = 32;
            let mut chars = other.chars();
            let head: String = chars.by_ref().take(MAX_ECHOED_MODE_CHARS).collect();
            let cut = if chars.next().is_some() { "…" } else { "" };
            return Err(path
                .key("allocationMode")
                .error(&format!("must be ExactCount or All, not {head:?}{cut}")));
        }
    };
    Ok(DeviceAlternative {
        class,
        count,
        admin_access: optional_bool(fields, "adminAccess", path)?.unwrap_or(false),
        selectors: selectors(fields, path)?,
    })
}

/// `selectors[].cel.expression`: a selector of another kind (none exists yet) is skipped.
fn selectors(fields: Object<'_>, path: &FieldPath<'_>) -> Result<Vec<String>, ObjectError> {
    let read = objects(member(fields, "selectors"), "selectors", path, |_, selector, at| {
        let Some(cel) = optional_object(selector, "cel", at)? else {
            return Ok(None);
        };
        Ok(optional_str(cel, "expression", &at.key("cel"))?.map(str::to_owned))
    })?;
    Ok(read.unwrap_or_default())
}

#[cfg(test)]
mod tests;
