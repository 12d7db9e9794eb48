//! GPU sharing schemes: containers that hold part of a card without
//! asking for a whole one, and what R2 checks of their share values.
//!
//! Reads: the pod's annotations `gpu-fraction`, `gpu-memory`,
//! `gpu-fraction-num-devices`, `gpu-fraction-container-name` and
//! `runai/shared-gpu-configmap` (KAI-Scheduler), `spec.schedulerName`, and
//! the containers' `nvidia.com/gpucores`, `nvidia.com/gpumem` and
//! `nvidia.com/gpumem-percentage` (HAMi), as `gpuSharing` enables them.
//!
//! - **KAI-Scheduler fractions.** A pod scheduled by KAI
//!   (`gpuSharing.kaiScheduler.schedulerName`) with `gpu-fraction` or
//!   `gpu-memory` holds a share in one container, chosen by KAI's rule: the
//!   one `gpu-fraction-container-name` names (init containers first), else
//!   the first regular container. That container is a GPU container; its
//!   `NVIDIA_VISIBLE_DEVICES` from KAI's ConfigMap stays
//!   ([`is_kai_visible_devices`]), and until KAI's webhook has written it
//!   the container is pinned ([`awaited_scheme`]). Only KAI binds such a pod, and KAI's
//!   binder writes that ConfigMap: the scheduler name is what makes the
//!   annotation trustworthy. The share counts as `gpu-fraction-num-devices`
//!   cards (default 1) against the maximums.
//! - **HAMi vGPU.** A container with a share value above zero is a GPU
//!   container. HAMi gives it `nvidia.com/gpu: 1` when it names no card
//!   count, so it counts as one card (and is pinned until HAMi has); the share values are checked for what
//!   they are (whole numbers, percentages at most 100, request equal to
//!   limit), never counted as cards.

use std::collections::BTreeMap;

use crate::policy::message::{CONTAINER, MessageTemplate};
use crate::policy::pod::{Container, ContainerKind, EnvEntry, GpuResource, PodView};
use crate::policy::quantity::GpuCount;
use crate::policy::rules::visible_devices::VARIABLE;
use crate::settings::{HAMI_CARDS, HAMI_CORES, HAMI_MEMORY_PERCENTAGE, Settings};

pub const GPU_FRACTION: &str = "gpu-fraction";
pub const GPU_MEMORY: &str = "gpu-memory";
pub const FRACTION_DEVICES: &str = "gpu-fraction-num-devices";
pub const FRACTION_CONTAINER: &str = "gpu-fraction-container-name";
/// Written by KAI's webhook: the prefix of the ConfigMaps its binder fills.
pub const KAI_CONFIGMAP: &str = "runai/shared-gpu-configmap";

/// Both KAI annotations.
pub const KAI_BOTH: MessageTemplate = MessageTemplate::new(
    "pod annotations gpu-fraction and gpu-memory cannot both be set \
     (KAI-Scheduler refuses the pod); keep one",
);
/// A KAI fraction beside whole cards: `{annotation}` is `gpu-fraction` or
/// `gpu-memory`.
pub const KAI_BESIDE_CARDS: MessageTemplate = MessageTemplate::new(
    "pod annotation {annotation} asks for part of a card, so {containers} must not \
     also set limits.nvidia.com/gpu (KAI-Scheduler refuses the pod); keep one",
);
/// `{value}`: the annotation's value, quoted (`{:?}`).
pub const KAI_FRACTION: MessageTemplate = MessageTemplate::new(
    "pod annotation gpu-fraction={value} must be a number above 0 and below 1 \
     (part of one card); for whole cards set limits.nvidia.com/gpu",
);
pub const KAI_MEMORY: MessageTemplate =
    MessageTemplate::new("pod annotation gpu-memory={value} must be a whole number of MiB above 0");
pub const KAI_DEVICES: MessageTemplate = MessageTemplate::new(
    "pod annotation gpu-fraction-num-devices={value} must be a whole number above 0",
);
pub const KAI_DEVICES_ABOVE_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "pod annotation gpu-fraction-num-devices={value} asks for a share of {count} GPUs, \
     above the maximum of {maximum} per container",
);
pub const KAI_CONTAINER: MessageTemplate = MessageTemplate::new(
    "pod annotation gpu-fraction-container-name={value} names no container of the pod",
);
/// A HAMi share value that is no whole number: as
/// [`super::bounded_requests::INVALID_VALUE`].
pub const SHARE_INVALID: MessageTemplate = MessageTemplate::new(
    "{containers}: {field}.{resource} {reason}; a HAMi share is a whole number \
     (MiB for gpumem, percent for gpucores and gpumem-percentage)",
);
pub const SHARE_WITHOUT_LIMIT: MessageTemplate = MessageTemplate::new(
    "{containers} must set limits.{resource}: a HAMi share needs an equal limit",
);
pub const SHARE_NOT_LIMIT: MessageTemplate = MessageTemplate::new(
    "{containers}: requests.{resource} differs from limits.{resource}; set them equal",
);
pub const SHARE_ABOVE_PERCENT: MessageTemplate = MessageTemplate::new(
    "{containers}: {field}.{resource} is {value}, above 100 percent of a card",
);

/// A KAI-Scheduler fraction request, as the pod's annotations spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KaiFraction<'a> {
    pub fraction: Option<&'a str>,
    pub memory: Option<&'a str>,
    pub devices: Option<&'a str>,
    pub container: Option<&'a str>,
}

/// The pod's KAI fraction request, when KAI sharing is on and KAI
/// schedules the pod.
pub fn kai_fraction<'a>(view: &PodView<'a>, settings: &Settings) -> Option<KaiFraction<'a>> {
    let kai = &settings.config().gpu_sharing.kai_scheduler;
    if !kai.enabled || view.scheduler_name != Some(kai.scheduler_name.as_str()) {
        return None;
    }
    let fraction = KaiFraction {
        fraction: view.annotation(GPU_FRACTION),
        memory: view.annotation(GPU_MEMORY),
        devices: view.annotation(FRACTION_DEVICES),
        container: view.annotation(FRACTION_CONTAINER),
    };
    (fraction.fraction.is_some() || fraction.memory.is_some()).then_some(fraction)
}

/// Marks the containers that hold a share, and the cards each implies.
pub fn mark(view: &mut PodView<'_>, settings: &Settings) {
    if let Some(fraction) = kai_fraction(view, settings) {
        let devices = fraction.devices.map_or(Some(1), positive_integer);
        let holder = match fraction.container {
            // KAI looks among the init containers first.
            Some(name) => {
                let named = |kinds: &[ContainerKind]| {
                    view.containers
                        .iter()
                        .position(|c| kinds.contains(&c.kind) && c.name == name)
                };
                named(&[ContainerKind::Init, ContainerKind::Sidecar])
                    .or_else(|| named(&[ContainerKind::Regular]))
            }
            None => view
                .containers
                .iter()
                .position(|c| c.kind == ContainerKind::Regular),
        };
        if let Some(container) = holder.and_then(|at| view.containers.get_mut(at)) {
            container.kai_share = true;
            container.implied_cards = devices.unwrap_or(1);
        }
    }
    for container in &mut view.containers {
        let names_cards = container.gpu_resources.iter().any(|r| r.name == HAMI_CARDS);
        if !names_cards && container.shares.iter().any(GpuResource::asks) {
            container.implied_cards = container.implied_cards.max(1);
        }
    }
}

/// The scheme whose webhook has yet to act on a share container: KAI's
/// writes the share's `NVIDIA_VISIBLE_DEVICES` (replacing an entry of that
/// name), HAMi's the card count `nvidia.com/gpu`. Until then R1 pins the
/// container, so a pod no such webhook acts on (the scheme not installed,
/// a pod bound by `nodeName`) sees no card through its image's `ENV`; the
/// scheme's webhook replaces the pin (KAI), or the reinvocation after it
/// removes it (HAMi).
pub fn awaited_scheme(container: &Container<'_>, view: &PodView<'_>) -> Option<&'static str> {
    if container.kai_share {
        let written = container
            .env
            .iter()
            .flatten()
            .any(|entry| is_kai_visible_devices(entry, view));
        return (!written).then_some("KAI-Scheduler");
    }
    let share_only = container.dra_gpus.is_none()
        && container.shares.iter().any(GpuResource::asks)
        && !container.gpu_resources.iter().any(|r| r.name == HAMI_CARDS);
    share_only.then_some("HAMi")
}

/// Whether `entry` of the KAI share container is the variable KAI's
/// webhook wrote: from the ConfigMap `<prefix>-<n>` (`<prefix>-i<n>` for an
/// init container) that `runai/shared-gpu-configmap` names, key
/// `NVIDIA_VISIBLE_DEVICES`. Any other spelling is the author's.
pub fn is_kai_visible_devices(entry: &EnvEntry<'_>, view: &PodView<'_>) -> bool {
    let Some(prefix) = view.annotation(KAI_CONFIGMAP).filter(|p| !p.is_empty()) else {
        return false;
    };
    if entry.name != VARIABLE || entry.raw.contains_key("value") {
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
    key == Some(VARIABLE)
        && index.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// R2 on the pod's share requests: KAI's fraction annotations as KAI
/// reads them, and HAMi's share values.
pub fn problems(view: &PodView<'_>, settings: &Settings) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(fraction) = kai_fraction(view, settings) {
        kai_problems(view, &fraction, settings, &mut found);
    }
    found.extend(hami_problems(view));
    found
}

fn kai_problems(
    view: &PodView<'_>,
    fraction: &KaiFraction<'_>,
    settings: &Settings,
    found: &mut Vec<String>,
) {
    let whole: Vec<&str> = view
        .containers
        .iter()
        .filter(|c| {
            c.gpu_resources
                .iter()
                .any(|r| r.name == HAMI_CARDS && r.limit.is_some_and(|l| !l.is_zero()))
        })
        .map(|c| c.name)
        .collect();
    let annotation = if fraction.fraction.is_some() {
        GPU_FRACTION
    } else {
        GPU_MEMORY
    };
    if fraction.fraction.is_some() && fraction.memory.is_some() {
        found.push(KAI_BOTH.format(&[]));
    }
    if !whole.is_empty() {
        found.push(KAI_BESIDE_CARDS.format(&[
            ("annotation", &annotation),
            ("containers", &CONTAINER.list(whole)),
        ]));
    }
    let quoted = |raw: &str| format!("{raw:?}");
    if let Some(raw) = fraction.fraction
        && !fraction_below_one(raw)
    {
        found.push(KAI_FRACTION.format(&[("value", &quoted(raw))]));
    }
    if let Some(raw) = fraction.memory
        && positive_integer(raw).is_none()
    {
        found.push(KAI_MEMORY.format(&[("value", &quoted(raw))]));
    }
    let max_per_container = settings.config().max_per_container;
    match fraction.devices.map(|raw| (raw, positive_integer(raw))) {
        Some((raw, None)) => found.push(KAI_DEVICES.format(&[("value", &quoted(raw))])),
        Some((raw, Some(n))) if n > max_per_container => {
            found.push(KAI_DEVICES_ABOVE_MAXIMUM.format(&[
                ("value", &quoted(raw)),
                ("count", &n),
                ("maximum", &max_per_container),
            ]));
        }
        _ => {}
    }
    if let Some(name) = fraction.container
        && !view.containers.iter().any(|c| c.kai_share)
    {
        found.push(KAI_CONTAINER.format(&[("value", &quoted(name))]));
    }
}

/// One kind of problem with one share resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ShareProblem {
    Invalid { field: &'static str, reason: String },
    RequestWithoutLimit,
    RequestNotLimit,
    AbovePercent { field: &'static str, value: u64 },
}

fn hami_problems(view: &PodView<'_>) -> Vec<String> {
    let mut problems: BTreeMap<(&str, ShareProblem), Vec<&str>> = BTreeMap::new();
    for container in &view.containers {
        for share in &container.shares {
            for problem in share_problems(share) {
                problems
                    .entry((share.name, problem))
                    .or_default()
                    .push(container.name);
            }
        }
    }
    problems
        .into_iter()
        .map(|((resource, problem), names)| {
            let containers = CONTAINER.list(names);
            let who: [(&str, &dyn std::fmt::Display); 2] =
                [("containers", &containers), ("resource", &resource)];
            match problem {
                ShareProblem::Invalid { field, reason } => {
                    SHARE_INVALID.format(&[who[0], who[1], ("field", &field), ("reason", &reason)])
                }
                ShareProblem::RequestWithoutLimit => SHARE_WITHOUT_LIMIT.format(&who),
                ShareProblem::RequestNotLimit => SHARE_NOT_LIMIT.format(&who),
                ShareProblem::AbovePercent { field, value } => SHARE_ABOVE_PERCENT.format(&[
                    who[0],
                    who[1],
                    ("field", &field),
                    ("value", &value),
                ]),
            }
        })
        .collect()
}

fn share_problems(share: &GpuResource<'_>) -> Vec<ShareProblem> {
    let mut problems = Vec::new();
    let percent = [HAMI_CORES, HAMI_MEMORY_PERCENTAGE].contains(&share.name);
    let mut read = |field: &'static str, value: Option<GpuCount>| match value {
        Some(GpuCount::Invalid(reason)) => {
            problems.push(ShareProblem::Invalid {
                field,
                reason: reason.to_string(),
            });
            None
        }
        Some(GpuCount::Whole(n)) => {
            if percent && n > 100 {
                problems.push(ShareProblem::AbovePercent { field, value: n });
            }
            Some(n)
        }
        None => None,
    };
    let limit = read("limits", share.limit);
    // The API server defaults a missing request to its limit, so the
    // webhook sees a `requests` the manifest never had: a request equal to
    // its limit is judged once, as the limit, for `check` and the webhook
    // to say the same.
    let request = if share.request.is_some() && share.request == share.limit {
        limit
    } else {
        read("requests", share.request)
    };
    if share.limit.is_none() && share.request.is_some_and(|r| !r.is_zero()) {
        problems.push(ShareProblem::RequestWithoutLimit);
    }
    if let (Some(request), Some(limit)) = (request, limit)
        && request != limit
    {
        problems.push(ShareProblem::RequestNotLimit);
    }
    problems.dedup();
    problems
}

/// A whole number above zero, as KAI reads counts and MiB (digits only).
fn positive_integer(raw: &str) -> Option<u64> {
    if raw.is_empty() || raw.len() > 19 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok().filter(|n| *n > 0)
}

/// A decimal number strictly between 0 and 1 (`0.5`, `.25`, `5e-1`), as
/// KAI accepts a fraction.
fn fraction_below_one(raw: &str) -> bool {
    let decimal = !raw.is_empty()
        && raw.len() <= 32
        && raw
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && raw.bytes().any(|b| b.is_ascii_digit());
    decimal
        && raw
            .parse::<f64>()
            .is_ok_and(|value| value > 0.0 && value < 1.0)
}

#[cfg(test)]
#[path = "sharing_tests.rs"]
mod tests;
