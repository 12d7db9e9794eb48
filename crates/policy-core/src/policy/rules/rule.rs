//! What a rule is: what it reads ([`RuleInput`], [`AllowlistInput`], [`ClaimInput`]), what it
//! returns ([`Findings`], [`Mutation`], [`Exemption`]), its declaration ([`Rule`], [`Entry`],
//! [`Check`], [`Severity`]) and how the API server evaluates it without the webhook ([`ApiServer`],
//! [`Coverage`]). The rule files declare these; the registry (`rules/mod.rs`) lists them.

use json_patch::PatchOperation;
use serde::Serialize;

use super::cel::CelPolicy;
use crate::kubernetes_version::KubernetesVersion;

use crate::document::Json;
use crate::policy::cluster::{ClusterFacts, NodeFacts};
use crate::policy::dra::ClaimFacts;
use crate::policy::dra::claims::{ClaimKind, ClaimSummary};
use crate::policy::dra::owner::PodClaimEntry;
use crate::policy::images::ImageFacts;
use crate::policy::message::Notice;
use crate::policy::pod::PodView;
use crate::policy::subject::{Identity, Scope};
use crate::settings::{AllowlistEntry, NamespaceSettings, Settings};

/// What every rule gets.
#[derive(Clone, Copy)]
pub struct RuleInput<'a, 'v> {
    pub view: &'a PodView<'v>,
    pub settings: &'a Settings,
    pub namespace: &'a NamespaceSettings,
    pub scope: &'a Scope,
    /// The pod before the update, read as the new one is, its claims
    /// resolved: set only with [`Scope::Update`].
    pub old: Option<&'a PodView<'v>>,
    /// Set when rule 5 matched: the entry that exempts the pod.
    pub allowlisted: Option<&'a AllowlistEntry>,
    pub cluster: Option<&'a dyn ClusterFacts>,
    /// What the nodes carry: the cluster's, or the Nodes `check --nodes` was given.
    pub nodes: Option<&'a dyn NodeFacts>,
    /// Images resolved from their registries; the table covers the rest.
    pub images: Option<&'a dyn ImageFacts>,
    /// Where the pod's DRA claims are known: the cluster, or `check`'s input.
    pub claims: Option<&'a dyn ClaimFacts>,
    pub namespace_name: &'a str,
}

/// A change a rule makes to the object.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutation {
    /// What the change does, for people (`pin NVIDIA_VISIBLE_DEVICES=void in container "app"`).
    pub summary: String,
    pub operations: Vec<PatchOperation>,
    /// The change removes or replaces something the author wrote (as opposed
    /// to adding what they did not write). Templates are warned about these.
    pub overrides_author: bool,
}

/// What a rule returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    pub changes: Vec<Mutation>,
    /// What the object must fix, as message bodies naming the containers or fields and the fix.
    pub violations: Vec<String>,
    /// Inputs the rule ignored, and why (an unreadable annotation, say).
    pub notices: Vec<Notice>,
}

/// A rule, as its own file declares it; the registry line in
/// `rules/mod.rs` gives it its [`RuleId`](super::RuleId).
#[derive(Clone, Copy)]
pub struct Rule {
    /// Its stable name: what output, metrics, logs and the
    /// `gpu-policy.io/mutations` annotation show.
    pub name: &'static str,
    /// How much a violation weighs in the policy reports.
    pub severity: Severity,
    /// What it runs on, in the order they run: R2 and R4 have one for pods and one for DRA claims.
    pub entries: &'static [Entry],
}

/// What a rule runs on, its Rust check, and how the API server evaluates it without the webhook.
#[derive(Clone, Copy)]
pub struct Entry {
    pub check: Check,
    pub api_server: ApiServer,
}

/// `severity`, of the report schemas' `critical`, `high`, `medium`, `low`,
/// `info` (gpu-policy uses the middle three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    High,
    Medium,
    Low,
}

impl Severity {
    /// One step lower (`low` stays `low`).
    pub fn lower(self) -> Severity {
        match self {
            Severity::High => Severity::Medium,
            Severity::Medium | Severity::Low => Severity::Low,
        }
    }
}

/// What an entry runs on, with its Rust evaluation.
#[derive(Clone, Copy)]
pub enum Check {
    /// Runs first on a pod or pod template, wherever it is listed: the allowlist entry that exempts
    /// it, which the [`Check::Pod`] rules read ([`RuleInput::allowlisted`]).
    Allowlist(for<'a> fn(&AllowlistInput<'a>) -> Exemption<'a>),
    /// A pod or pod template, through its [`PodView`].
    Pod(fn(&RuleInput<'_, '_>) -> Findings),
    /// A ResourceClaim or ResourceClaimTemplate.
    Claim(fn(&ClaimInput<'_>) -> Findings),
}

impl Check {
    /// What it runs on, for people: `pods`, `claims`, `allowlist`.
    pub fn target(&self) -> &'static str {
        match self {
            Check::Allowlist(_) => "allowlist",
            Check::Pod(_) => "pods",
            Check::Claim(_) => "claims",
        }
    }
}

/// How the API server evaluates an entry with no webhook: the admission policies generated for it,
/// what they cover and what only the webhook does (docs/policy.md's coverage table prints these).
#[derive(Clone, Copy)]
pub enum ApiServer {
    /// Admission policies of its own, made from the settings for a release (none when the settings
    /// leave nothing to do: R3's injection with `runtimeClassName: ""`).
    Policies { coverage: Coverage, policies: fn(&Settings, KubernetesVersion) -> Vec<CelPolicy> },
    /// No policy of its own: the policies of other rules test it in their CEL.
    InOtherPolicies(Coverage),
    /// No admission policy at all, and why.
    WebhookOnly { reason: &'static str },
}

/// What the generated policies do of a rule, and what stays the webhook's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    pub enforced: &'static str,
    /// What only the webhook does, and why.
    pub webhook_only: &'static str,
}

impl ApiServer {
    pub fn policies(&self, settings: &Settings, release: KubernetesVersion) -> Vec<CelPolicy> {
        match self {
            ApiServer::Policies { policies, .. } => policies(settings, release),
            ApiServer::InOtherPolicies(_) | ApiServer::WebhookOnly { .. } => Vec::new(),
        }
    }

    /// What the policies enforce (`nothing` without any) and what stays the webhook's.
    pub fn coverage(&self) -> Coverage {
        match *self {
            ApiServer::Policies { coverage, .. } | ApiServer::InOtherPolicies(coverage) => coverage,
            ApiServer::WebhookOnly { reason } => {
                Coverage { enforced: "nothing", webhook_only: reason }
            }
        }
    }
}

/// What the allowlist stage reads: who the object is, where, and (when the
/// webhook can read it) the cluster, to verify a pod's owner.
#[derive(Clone, Copy)]
pub struct AllowlistInput<'a> {
    pub identity: Identity<'a>,
    pub namespace: &'a str,
    pub settings: &'a Settings,
    pub cluster: Option<&'a dyn ClusterFacts>,
}

/// What the allowlist stage decides: the entry that exempts the object, if
/// any, and why a matching entry does not.
#[derive(Debug, Default)]
pub struct Exemption<'a> {
    pub entry: Option<&'a AllowlistEntry>,
    pub notices: Vec<Notice>,
}

/// What the claim rules read.
#[derive(Clone, Copy)]
pub struct ClaimInput<'a> {
    /// The claim or claim template as sent, raw: what a patch is built on.
    pub object: Json<'a>,
    pub kind: ClaimKind,
    pub summary: &'a ClaimSummary,
    /// Whether a device class hands out GPUs (`gpuDeviceClasses`, and the
    /// DeviceClasses known here).
    pub is_gpu_class: &'a dyn Fn(&str) -> bool,
    /// The claim is one the scheduler made for a pod's extended resource
    /// (`resource.kubernetes.io/extended-resource-claim: "true"`).
    pub extended_resource: bool,
    /// The pod the claim is made for, when the webhook read it.
    pub owner: Option<&'a ClaimOwner<'a>>,
    pub settings: &'a Settings,
    pub namespace: &'a NamespaceSettings,
    pub namespace_name: &'a str,
}

/// The pod a claim is made for, as the claim rules read it.
#[derive(Clone, Copy)]
pub enum ClaimOwner<'a> {
    /// Read, with the UID the claim names.
    Read(OwnerInput<'a>),
    /// Not found with the UID the claim was made for: missing, or another pod of that name (one
    /// answer for both, see [`OwnerPod::NotFound`](crate::policy::dra::owner::OwnerPod::NotFound)).
    NotFound,
    /// Not read, or not readable as a pod: why, on one line.
    Unreadable(&'a str),
}

/// The pod a claim is made for, read.
#[derive(Clone, Copy)]
pub struct OwnerInput<'a> {
    /// The pod as the pod rules read it, its claims resolved through `claims`.
    pub pod: RuleInput<'a, 'a>,
    /// Its `spec.resourceClaims`, each with where it gets its devices; Err with their number past
    /// [`MAX_POD_CLAIMS`](crate::policy::dra::owner::MAX_POD_CLAIMS).
    pub entries: &'a Result<Vec<PodClaimEntry<'a>>, usize>,
    /// Where its claims resolve: the claim under review, what was read beside the pod, the caches.
    pub claims: &'a dyn ClaimFacts,
}
