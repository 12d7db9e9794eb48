//! The GPU sharing schemes as the view reads them: which container holds a share ([`mark`]), what
//! scheme it still awaits ([`awaited_scheme`]), whether an `NVIDIA_VISIBLE_DEVICES` entry is the
//! one KAI's webhook wrote ([`is_kai_visible_devices`]), and the annotations KAI-Scheduler reads.
//! R2's checks of share values are `rules::bounded_requests::sharing`'s.

use super::container::{Container, ContainerKind, EnvEntry, GpuResource};
use crate::settings::{HAMI_CARDS, Settings};

pub use super::container::VISIBLE_DEVICES;

pub const GPU_FRACTION: &str = "gpu-fraction";
pub const GPU_MEMORY: &str = "gpu-memory";
pub const FRACTION_DEVICES: &str = "gpu-fraction-num-devices";
pub const FRACTION_CONTAINER: &str = "gpu-fraction-container-name";
/// Written by KAI's webhook: the prefix of the ConfigMaps its binder fills.
pub const KAI_CONFIGMAP: &str = "runai/shared-gpu-configmap";

/// A KAI-Scheduler fraction request, as the pod's annotations spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KaiFraction<'a> {
    pub fraction: Option<&'a str>,
    pub memory: Option<&'a str>,
    pub devices: Option<&'a str>,
    pub container: Option<&'a str>,
}

/// The pod's KAI fraction request, when KAI sharing is on and KAI schedules the pod
/// (`scheduler_name`); `annotation` looks up the pod's annotations.
pub fn kai_fraction<'a>(
    annotation: impl Fn(&str) -> Option<&'a str>,
    scheduler_name: Option<&str>,
    settings: &Settings,
) -> Option<KaiFraction<'a>> {
    let kai = &settings.config().gpu_sharing.kai_scheduler;
    if !kai.enabled || scheduler_name != Some(kai.scheduler_name.as_str()) {
        return None;
    }
    let fraction = KaiFraction {
        fraction: annotation(GPU_FRACTION),
        memory: annotation(GPU_MEMORY),
        devices: annotation(FRACTION_DEVICES),
        container: annotation(FRACTION_CONTAINER),
    };
    (fraction.fraction.is_some() || fraction.memory.is_some()).then_some(fraction)
}

/// Marks the containers of a pod that hold a share, and the cards each implies: the holder of the
/// pod's KAI fraction (`kai`), if any, and the containers with a HAMi share.
pub fn mark(containers: &mut [Container<'_>], kai: Option<&KaiFraction<'_>>) {
    if let Some(fraction) = kai {
        let devices = fraction.devices.map_or(Some(1), positive_integer);
        let holder = match fraction.container {
            // KAI looks among the init containers first.
            Some(name) => {
                let named = |kinds: &[ContainerKind]| {
                    containers.iter().position(|c| kinds.contains(&c.kind) && c.name == name)
                };
                named(&[ContainerKind::Init, ContainerKind::Sidecar])
                    .or_else(|| named(&[ContainerKind::Regular]))
            }
            None => containers.iter().position(|c| c.kind == ContainerKind::Regular),
        };
        if let Some(container) = holder.and_then(|at| containers.get_mut(at)) {
            container.kai_share = true;
            container.implied_cards = devices.unwrap_or(1);
        }
    }
    for container in containers.iter_mut() {
        let names_cards = container.gpu_resources.iter().any(|r| r.name == HAMI_CARDS);
        if !names_cards && container.shares.iter().any(GpuResource::asks) {
            container.implied_cards = container.implied_cards.max(1);
        }
    }
}

/// The scheme whose webhook has yet to act on a share container: KAI's writes the share's
/// `NVIDIA_VISIBLE_DEVICES`, HAMi's the card count `nvidia.com/gpu`. Until then R1 pins the
/// container, so a pod no such webhook acts on sees no card through its image's `ENV`.
/// `kai_configmap`: the pod's [`KAI_CONFIGMAP`] annotation.
pub fn awaited_scheme(
    container: &Container<'_>,
    kai_configmap: Option<&str>,
) -> Option<&'static str> {
    if container.kai_share {
        let written = container
            .env
            .iter()
            .flatten()
            .any(|entry| is_kai_visible_devices(entry, kai_configmap));
        return (!written).then_some("KAI-Scheduler");
    }
    let share_only = container.dra_gpus.is_none()
        && container.shares.iter().any(GpuResource::asks)
        && !container.gpu_resources.iter().any(|r| r.name == HAMI_CARDS);
    share_only.then_some("HAMi")
}

/// Whether `entry` of the KAI share container is the variable KAI's
/// webhook wrote: from the ConfigMap `<prefix>-<n>` (`<prefix>-i<n>` for an
/// init container) that `runai/shared-gpu-configmap` (`kai_configmap`)
/// names, key `NVIDIA_VISIBLE_DEVICES`. Any other spelling is the author's.
pub fn is_kai_visible_devices(entry: &EnvEntry<'_>, kai_configmap: Option<&str>) -> bool {
    let Some(prefix) = kai_configmap.filter(|p| !p.is_empty()) else {
        return false;
    };
    if entry.name != VISIBLE_DEVICES || entry.raw.contains_key("value") {
        return false;
    }
    let Some(reference) = entry
        .raw
        .get("valueFrom")
        .and_then(|from| from.get("configMapKeyRef"))
        .and_then(|r| r.as_object())
    else {
        return false;
    };
    let name = reference.get("name").and_then(|n| n.as_str()).unwrap_or("");
    let key = reference.get("key").and_then(|k| k.as_str());
    let index = name
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .map(|rest| rest.strip_prefix('i').unwrap_or(rest));
    key == Some(VISIBLE_DEVICES)
        && index.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A whole number above zero, as KAI reads counts and MiB (digits only).
pub fn positive_integer(raw: &str) -> Option<u64> {
    if raw.is_empty() || raw.len() > 19 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok().filter(|n| *n > 0)
}
