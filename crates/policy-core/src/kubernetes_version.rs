//! The Kubernetes releases gpu-policy supports, and what each serves of the APIs the install
//! uses: the one table `manifests --kube-version`, the chart and docs/compatibility.md
//! ("What each release serves", printed from here) read. Which CEL functions a release
//! refuses is `kubernetes_cel::releases`' (by [`KubernetesVersion::minor`]).

use std::fmt;

/// A Kubernetes minor release (`1.<minor>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubernetesVersion {
    minor: u32,
}

/// The oldest release gpu-policy supports.
pub const OLDEST: KubernetesVersion = KubernetesVersion::new(32);
/// The newest release gpu-policy is tested against; rendering for a newer one renders for this one.
pub const NEWEST: KubernetesVersion = KubernetesVersion::new(37);

/// Why a text is not a supported Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("{0:?} is not a Kubernetes version (1.MINOR, v1.MINOR or v1.MINOR.PATCH)")]
    NotAVersion(String),
    #[error(
        "Kubernetes {found} is older than the oldest supported release, {OLDEST} (supported: {OLDEST} to {NEWEST})"
    )]
    TooOld { found: String },
}

/// The MutatingAdmissionPolicy API a release serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MutatingPolicyApi {
    /// `v1` or `v1beta1` of `admissionregistration.k8s.io`.
    pub version: &'static str,
    /// Served only when the cluster turns it on.
    pub opt_in: bool,
}

/// How a release's `resource.k8s.io` writes a device request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestShape {
    /// `requests[].exactly.{deviceClassName, count, ...}` (v1, v1beta2).
    Exactly,
    /// `requests[].{deviceClassName, count, ...}` (v1beta1).
    Flat,
}

/// The Dynamic Resource Allocation API a release serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DraApi {
    /// The version of `resource.k8s.io` the install registers for.
    pub version: &'static str,
    pub shape: RequestShape,
    /// Whether a request may list `firstAvailable` alternatives.
    pub first_available: bool,
    /// Served only when the cluster turns it on.
    pub opt_in: bool,
}

impl KubernetesVersion {
    pub const fn new(minor: u32) -> Self {
        Self { minor }
    }

    /// `1.33`, `v1.33`, `1.33.4`, `v1.33.4`, or what `kubectl version` and
    /// Helm's `.Capabilities.KubeVersion` print (`v1.33.4-eks-1234`,
    /// `v1.33.4+k3s1`). A release older than [`OLDEST`] is refused.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let not_a_version = || VersionError::NotAVersion(text.to_owned());
        let trimmed = text.strip_prefix('v').unwrap_or(text);
        let mut parts = trimmed.splitn(3, '.');
        let (Some("1"), Some(minor)) = (parts.next(), parts.next()) else {
            return Err(not_a_version());
        };
        // Managed offerings write `1.33+` for the minor.
        let minor = minor.strip_suffix('+').unwrap_or(minor);
        if minor.is_empty() || minor.len() > 3 || !minor.bytes().all(|b| b.is_ascii_digit()) {
            return Err(not_a_version());
        }
        if let Some(patch) = parts.next() {
            let digits = patch.split(['-', '+']).next().unwrap_or("");
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(not_a_version());
            }
        }
        let minor: u32 = minor.parse().map_err(|_| not_a_version())?;
        let version = Self::new(minor);
        if version < OLDEST {
            return Err(VersionError::TooOld { found: version.to_string() });
        }
        Ok(version)
    }

    pub fn minor(self) -> u32 {
        self.minor
    }

    /// Every supported release, oldest first.
    pub fn supported() -> impl Iterator<Item = Self> {
        (OLDEST.minor..=NEWEST.minor).map(Self::new)
    }

    /// The MutatingAdmissionPolicy API served, or None before 1.34.
    pub fn mutating_policies(self) -> Option<MutatingPolicyApi> {
        match self.minor {
            ..34 => None,
            34 | 35 => Some(MutatingPolicyApi { version: "v1beta1", opt_in: true }),
            _ => Some(MutatingPolicyApi { version: "v1", opt_in: false }),
        }
    }

    /// The `resource.k8s.io` API the install registers for.
    pub fn dra(self) -> DraApi {
        match self.minor {
            ..34 => DraApi {
                version: "v1beta1",
                shape: RequestShape::Flat,
                first_available: self.minor >= 33,
                opt_in: true,
            },
            _ => DraApi {
                version: "v1",
                shape: RequestShape::Exactly,
                first_available: true,
                opt_in: false,
            },
        }
    }
}

impl Default for KubernetesVersion {
    fn default() -> Self {
        NEWEST
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

#[cfg(test)]
mod tests;
