//! One container of a pod as the view reads it ([`super::pod::PodView::parse`]).

use crate::cuda::{DISABLE_REQUIRE_ENV, REQUIRE_CUDA_ENV};
use crate::document::{Json, Object};
use json_patch::jsonptr::{Pointer, PointerBuf};

use super::patch::{Step, pointer_below};

use super::dra::claims::DraCount;
use super::quantity::GpuCount;
use crate::settings::HAMI_CARDS;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContainerKind {
    /// An init container that runs to completion before the next one starts.
    Init,
    /// An init container with `restartPolicy: Always`: runs beside the regular ones all along.
    Sidecar,
    Regular,
    Ephemeral,
}

/// One GPU resource of a container as written: the raw request and limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuResource<'a> {
    pub name: &'a str,
    pub request: Option<GpuCount>,
    pub limit: Option<GpuCount>,
}

impl GpuResource<'_> {
    /// The count the device plugin would allocate: the limit, else the request, when whole.
    pub fn count(&self) -> u64 {
        self.limit.or(self.request).and_then(GpuCount::whole).unwrap_or(0)
    }

    /// Whether the container asks for this resource at all. A zero limit is
    /// not a request; an unreadable value is treated as one, because its
    /// author evidently meant to ask for a card (R2 denies it anyway).
    pub fn asks(&self) -> bool {
        [self.request, self.limit].into_iter().flatten().any(|count| !count.is_zero())
    }
}

/// The variable the nvidia runtime reads to pick the cards a container
/// sees (R1's subject; KAI's webhook writes it for a share).
pub const VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";

/// The only `env` variables any rule reads; the server's decoding leaves the others out.
pub const READ_ENV_NAMES: [&str; 3] = [VISIBLE_DEVICES, REQUIRE_CUDA_ENV, DISABLE_REQUIRE_ENV];

/// An `env` entry, with its index in the container's `env` list.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvEntry<'a> {
    pub index: usize,
    pub name: &'a str,
    pub raw: Object<'a>,
}

impl EnvEntry<'_> {
    /// The literal value, when the entry has one and no `valueFrom`.
    pub fn literal(&self) -> Option<&str> {
        if self.raw.contains_key("valueFrom") {
            return None;
        }
        self.raw.get("value").and_then(Json::as_str)
    }
}

#[derive(Debug, Clone)]
pub struct Container<'a> {
    pub name: &'a str,
    pub kind: ContainerKind,
    /// The list of the pod spec it is in (`containers`, `initContainers`,
    /// `ephemeralContainers`) and its index there ([`Container::pointer_to`]).
    pub list: &'static str,
    pub index: usize,
    pub image: Option<&'a str>,
    /// `None` when the container has no `env` field.
    pub env: Option<Vec<EnvEntry<'a>>>,
    pub gpu_resources: Vec<GpuResource<'a>>,
    pub mount_paths: Vec<&'a str>,
    /// `resources.claims[]`: the pod claims the container uses.
    pub claims: Vec<ClaimUse<'a>>,
    /// The GPUs its resolved DRA claims give it (set by [`super::dra::resolution::resolve`]).
    pub dra_gpus: Option<DraCount>,
    /// It uses a claim that cannot be resolved (set by `resolve`): it may
    /// hold a GPU, so no check that needs it to hold none denies it.
    pub unresolved_claim: bool,
    /// `securityContext.privileged: true`: the container sees every device of the node.
    pub privileged: bool,
    /// HAMi's share values (`nvidia.com/gpumem`, ...), as written: one card's share, never cards.
    pub shares: Vec<GpuResource<'a>>,
    /// The container holding a KAI-Scheduler fraction (set by [`super::sharing::mark`]).
    pub kai_share: bool,
    /// Cards a sharing scheme gives it without a resource naming them, counted as `nvidia.com/gpu`
    /// (set by `mark`): HAMi's implied 1, the devices of a KAI fraction.
    pub implied_cards: u64,
}

/// One entry of a container's `resources.claims[]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimUse<'a> {
    /// The name of an entry of the pod's `spec.resourceClaims[]`.
    pub name: &'a str,
    /// Narrows the use to one request of the claim (`request` or `request/subrequest`).
    pub request: Option<&'a str>,
}

impl Container<'_> {
    /// The JSON pointer of `steps` below the container, under the pod spec at `spec` (none: own).
    pub fn pointer_to(&self, spec: &Pointer, steps: &[Step<'_>]) -> PointerBuf {
        let container = [Step::Key(self.list), Step::Index(self.index)];
        pointer_below(spec, container.into_iter().chain(steps.iter().copied()))
    }

    /// A GPU container: it asks for a GPU resource, or uses a resolved DRA claim that holds a GPU
    /// request. Ephemeral containers cannot have resources.
    pub fn is_gpu(&self) -> bool {
        self.kind != ContainerKind::Ephemeral
            && (self.dra_gpus.is_some() || self.is_device_plugin_gpu())
    }

    /// A GPU container whose cards the nvidia runtime hands it: a GPU
    /// resource in its limits or requests, a HAMi share, or a KAI fraction
    /// (its `NVIDIA_VISIBLE_DEVICES` from KAI's ConfigMap).
    pub fn is_device_plugin_gpu(&self) -> bool {
        self.kind != ContainerKind::Ephemeral
            && (self.kai_share
                || self.gpu_resources.iter().any(GpuResource::asks)
                || self.shares.iter().any(GpuResource::asks))
    }

    /// This container's count of one GPU resource, plus the cards a sharing scheme implies.
    pub fn count_of(&self, resource: &str) -> u64 {
        let implied = if resource == HAMI_CARDS { self.implied_cards } else { 0 };
        self.gpu_resources
            .iter()
            .filter(|r| r.name == resource)
            .map(GpuResource::count)
            .fold(implied, u64::saturating_add)
    }
}
