//! R2 on the GPU sharing schemes: the share values of containers that hold part of a card
//! without asking for a whole one. Which container holds a share is the sharing model's
//! ([`crate::policy::sharing`]); docs/policy.md, "GPU sharing", has the schemes at length.
//!
//! Reads: the pod's annotations `gpu-fraction`, `gpu-memory`, `gpu-fraction-num-devices`,
//! `gpu-fraction-container-name` and `runai/shared-gpu-configmap` (KAI-Scheduler),
//! `spec.schedulerName`, and the containers' `nvidia.com/gpucores`, `nvidia.com/gpumem` and
//! `nvidia.com/gpumem-percentage` (HAMi), as `gpuSharing` enables them.
//!
//! - **KAI-Scheduler fractions.** A pod scheduled by KAI with `gpu-fraction` or `gpu-memory` holds
//!   a share in the container `gpu-fraction-container-name` names (init containers first), else the
//!   first regular one. It is a GPU container; its `NVIDIA_VISIBLE_DEVICES` from KAI's ConfigMap
//!   stays ([`is_kai_visible_devices`](crate::policy::sharing::is_kai_visible_devices)), and it is
//!   pinned until KAI's webhook wrote it
//!   ([`awaited_scheme`](crate::policy::sharing::awaited_scheme)). Only KAI binds such a pod and
//!   writes that ConfigMap: the scheduler name makes the annotation trustworthy. It counts as
//!   `gpu-fraction-num-devices` cards (default 1).
//! - **HAMi vGPU.** A container with a share value above zero is a GPU container; HAMi gives
//!   it `nvidia.com/gpu: 1` when it names no count, so it counts as one card (pinned until
//!   HAMi has). Share values are checked as such (whole, percentages at most 100, request
//!   equal to limit), never counted as cards.

use super::grouped::{Problem, grouped};
use crate::policy::container::GpuResource;
use crate::policy::message::{CONTAINER, MessageTemplate};
use crate::policy::pod::PodView;
use crate::policy::quantity::GpuCount;
use crate::policy::sharing::positive_integer;
pub use crate::policy::sharing::{
    FRACTION_CONTAINER, FRACTION_DEVICES, GPU_FRACTION, GPU_MEMORY, KAI_CONFIGMAP, KaiFraction,
};
use crate::settings::{HAMI_CARDS, HAMI_CORES, HAMI_MEMORY_PERCENTAGE, Settings};

/// Both KAI annotations.
pub const KAI_BOTH: MessageTemplate = MessageTemplate::new(
    "pod annotations gpu-fraction and gpu-memory cannot both be set \
     (KAI-Scheduler refuses the pod); keep one",
);
/// A KAI fraction beside whole cards: `{annotation}` is `gpu-fraction` or `gpu-memory`.
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
/// A HAMi share value that is no whole number: as [`super::INVALID_VALUE`].
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

/// R2 on the pod's share requests: KAI's fraction annotations as KAI
/// reads them, and HAMi's share values.
pub fn problems(view: &PodView<'_>, settings: &Settings) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(fraction) = view.kai_fraction(settings) {
        kai_problems(view, &fraction, settings, &mut found);
    }
    found.extend(grouped(
        view,
        |c| &c.shares,
        &share_problems,
        [SHARE_INVALID, SHARE_WITHOUT_LIMIT, SHARE_NOT_LIMIT, SHARE_ABOVE_PERCENT],
    ));
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
    let annotation = if fraction.fraction.is_some() { GPU_FRACTION } else { GPU_MEMORY };
    if fraction.fraction.is_some() && fraction.memory.is_some() {
        found.push(KAI_BOTH.format(&[]));
    }
    if !whole.is_empty() {
        found.push(
            KAI_BESIDE_CARDS
                .format(&[("annotation", &annotation), ("containers", &CONTAINER.list(whole))]),
        );
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

fn share_problems(share: &GpuResource<'_>) -> Vec<Problem> {
    let mut problems = Vec::new();
    let percent = [HAMI_CORES, HAMI_MEMORY_PERCENTAGE].contains(&share.name);
    let mut read = |field: &'static str, value: Option<GpuCount>| match value {
        Some(GpuCount::Invalid(reason)) => {
            problems.push(Problem::Invalid { field, reason: reason.to_string() });
            None
        }
        Some(GpuCount::Whole(n)) => {
            if percent && n > 100 {
                problems.push(Problem::Above { field, slot: "value", value: n });
            }
            Some(n)
        }
        None => None,
    };
    let limit = read("limits", share.limit);
    // The API server defaults a missing request to its limit, so the webhook sees a `requests` the
    // manifest never had: a request equal to its limit is judged once, as the limit, for `check`
    // and the webhook to say the same.
    let request = if share.request.is_some() && share.request == share.limit {
        limit
    } else {
        read("requests", share.request)
    };
    if share.limit.is_none() && share.request.is_some_and(|r| !r.is_zero()) {
        problems.push(Problem::RequestWithoutLimit);
    }
    if let (Some(request), Some(limit)) = (request, limit)
        && request != limit
    {
        problems.push(Problem::RequestNotLimit);
    }
    problems.dedup();
    problems
}

/// A decimal number strictly between 0 and 1 (`0.5`, `.25`, `5e-1`), as KAI accepts a fraction.
fn fraction_below_one(raw: &str) -> bool {
    let decimal = !raw.is_empty()
        && raw.len() <= 32
        && raw.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && raw.bytes().any(|b| b.is_ascii_digit());
    decimal && raw.parse::<f64>().is_ok_and(|value| value > 0.0 && value < 1.0)
}

#[cfg(test)]
mod tests;
