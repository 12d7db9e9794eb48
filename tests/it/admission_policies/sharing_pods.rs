//! The property generator's pods ([`crate::support::pods::case`]) with the
//! GPU sharing schemes laid over some of them: KAI-Scheduler fraction pods
//! (`schedulerName`, the fraction annotations with valid and invalid
//! values, the container-name annotation, KAI's `configMapKeyRef` entry in
//! the holder or elsewhere, spelled right and wrong), HAMi share resources
//! (valid, invalid and above-100 values, in limits and requests, with and
//! without `nvidia.com/gpu`), and privileged containers, GPU ones among
//! them.
//!
//! The layer draws its own random numbers after the pod's, so the pods
//! underneath are the generator's own.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::support::pods::{Case, GPU_RESOURCES, LISTS, NVD, case, known_count, pick};

pub const SCHEDULERS: [&str; 3] = ["kai-scheduler", "kai-scheduler", "default-scheduler"];

/// `gpu-fraction` values below one, in every spelling KAI accepts.
pub const FRACTIONS: [&str; 8] =
    ["0.5", ".25", "5e-1", "0.999", "+0.5", "5E-0001", "0.0000000000000000000000000001", "1e-320"];

/// `gpu-fraction` values KAI refuses: the edges, and spellings of other
/// parsers.
pub const BAD_FRACTIONS: [&str; 21] = [
    "1",
    "1.",
    "0",
    "0.0",
    "1.5",
    "-0.5",
    "0.99999999999999999999",
    "1e-400",
    "1e999",
    "1e30",
    "0.0000000000000000000000001e29",
    "0.000000000000000000000000001e30",
    "abc",
    "",
    "0.5.5",
    "nan",
    "inf",
    "0x0.8p0",
    " 0.5",
    "0.5e",
    ".",
];

pub const MEMORIES: [&str; 4] = ["1024", "0001", "20000", "9999999999999999999"];

pub const BAD_MEMORIES: [&str; 7] = ["0", "1.5", "-1", "1Gi", "", "99999999999999999999", "+1"];

pub const DEVICES: [&str; 6] = ["1", "2", "3", "8", "02", "0000000000000000008"];

pub const BAD_DEVICES: [&str; 7] =
    ["9", "0", "x", "", "18446744073709551615", "9999999999999999999", "-1"];

/// A value of `good`, or now and then one of `bad`.
fn mostly(
    good: &'static [&'static str],
    bad: &'static [&'static str],
) -> impl Strategy<Value = &'static str> {
    prop_oneof![4 => pick(good), 1 => pick(bad)]
}

pub const CONFIGMAPS: [&str; 3] = ["kai-cm", "", "a-b"];

/// HAMi share values, quantities as JSON numbers and strings.
fn share_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(json!("30")),
        2 => Just(json!(3000)),
        2 => Just(json!("100")),
        1 => Just(json!("101")),
        2 => Just(json!("0")),
        1 => Just(json!(0)),
        1 => Just(json!("1Gi")),
        1 => Just(json!("500m")),
        1 => Just(json!("-1")),
        1 => Just(json!("abc")),
        1 => Just(json!("2000m")),
    ]
}

const SHARES: [&str; 3] =
    ["nvidia.com/gpucores", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage"];

/// Where in a pod spec: a list of [`LISTS`] and an index into it (taken
/// modulo its length).
type Target = (usize, usize);

fn target() -> impl Strategy<Value = Target> {
    (prop_oneof![3 => Just(1usize), 2 => Just(0), 1 => Just(2)], 0..4usize)
}

/// One HAMi share: each resource's value, where it goes (limits, requests,
/// both equal, both with the request changed), and what `nvidia.com/gpu`
/// becomes (kept, removed, 1 or 0 in limits).
#[derive(Debug, Clone)]
pub struct Share {
    target: Target,
    values: Vec<(&'static str, Value, u8)>,
    cards: u8,
}

fn share() -> impl Strategy<Value = Share> {
    (target(), prop::collection::vec((pick(&SHARES), share_value(), 0..8u8), 1..=3), 0..8u8)
        .prop_map(|(target, values, cards)| Share { target, values, cards })
}

/// A KAI fraction request.
#[derive(Debug, Clone)]
pub struct Kai {
    scheduler: &'static str,
    fraction: Option<&'static str>,
    memory: Option<&'static str>,
    devices: Option<&'static str>,
    /// The container `gpu-fraction-container-name` names, or one the pod
    /// does not have (None inside).
    container: Option<Option<Target>>,
    configmap: Option<&'static str>,
    /// KAI's entry: in the holder (None) or elsewhere, its name's shape,
    /// its key's, and whether it also has a `value`.
    entry: Option<(Option<Target>, u8, bool, bool)>,
}

fn kai() -> impl Strategy<Value = Kai> {
    (
        pick(&SCHEDULERS),
        (0..8u8, mostly(&FRACTIONS, &BAD_FRACTIONS), mostly(&MEMORIES, &BAD_MEMORIES)),
        prop::option::weighted(0.4, mostly(&DEVICES, &BAD_DEVICES)),
        prop::option::weighted(0.4, prop::option::weighted(0.8, target())),
        prop::option::weighted(0.7, pick(&CONFIGMAPS)),
        prop::option::weighted(
            0.6,
            (
                prop::option::weighted(0.2, target()),
                0..8u8,
                prop::bool::weighted(0.9),
                prop::bool::weighted(0.1),
            ),
        ),
    )
        .prop_map(
            |(scheduler, (which, fraction, memory), devices, container, configmap, entry)| Kai {
                scheduler,
                // Mostly one of the two; sometimes both, sometimes neither.
                fraction: matches!(which, 0..=3 | 6).then_some(fraction),
                memory: matches!(which, 4..=6).then_some(memory),
                devices,
                container,
                configmap,
                entry,
            },
        )
}

/// What is laid over one pod.
#[derive(Debug, Clone)]
pub struct Sharing {
    /// The pod's own GPU limits made what Kubernetes accepts first, so
    /// that the sharing schemes' own violations are not hidden behind
    /// others of the same rule.
    tidy: bool,
    kai: Option<Kai>,
    shares: Vec<Share>,
    privileged: Vec<Target>,
}

fn sharing() -> impl Strategy<Value = Sharing> {
    (
        prop::bool::weighted(0.5),
        prop::option::weighted(0.4, kai()),
        prop::collection::vec(share(), 0..=3),
        prop::bool::weighted(0.4),
        prop::collection::vec(target(), 0..=2),
        prop::bool::weighted(0.25),
    )
        .prop_map(|(tidy, kai, shares, hami, privileged, with_privileged)| Sharing {
            tidy,
            kai,
            shares: if hami { shares } else { Vec::new() },
            privileged: if with_privileged { privileged } else { Vec::new() },
        })
}

/// The generator's pods, a sharing scheme laid over some of them.
pub fn sharing_case() -> impl Strategy<Value = Case> {
    (case(), sharing()).prop_map(|(mut case, sharing)| {
        lay_over(&mut case.pod, &sharing);
        case
    })
}

fn object_at<'v>(parent: &'v mut Value, key: &str) -> Option<&'v mut Map<String, Value>> {
    let map = parent.as_object_mut()?;
    let slot = map.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut()
}

fn container_at(spec: &mut Value, (list, index): Target) -> Option<&mut Value> {
    let list = spec.get_mut(LISTS[list % LISTS.len()])?.as_array_mut()?;
    let len = list.len();
    if len == 0 {
        return None;
    }
    list.get_mut(index % len)
}

fn name_at(spec: &mut Value, at: Target) -> Option<String> {
    let container = container_at(spec, at)?;
    container.get("name")?.as_str().map(str::to_owned)
}

fn lay_over(pod: &mut Value, sharing: &Sharing) {
    if sharing.tidy
        && let Some(spec) = pod.get_mut("spec")
    {
        tidy(spec);
    }
    if let Some(kai) = &sharing.kai {
        lay_kai(pod, kai);
    }
    let Some(spec) = pod.get_mut("spec") else {
        return;
    };
    for share in &sharing.shares {
        lay_share(spec, share);
    }
    for at in &sharing.privileged {
        if let Some(container) = container_at(spec, *at)
            && let Some(context) = object_at(container, "securityContext")
        {
            context.insert("privileged".into(), json!(true));
        }
    }
}

fn lay_kai(pod: &mut Value, kai: &Kai) {
    let Some(spec) = pod.get_mut("spec") else {
        return;
    };
    if let Some(spec) = spec.as_object_mut() {
        spec.insert("schedulerName".into(), json!(kai.scheduler));
    }
    let named = match kai.container {
        Some(Some(at)) => Some(name_at(spec, at).unwrap_or_else(|| "nope".to_owned())),
        Some(None) => Some("nope".to_owned()),
        None => None,
    };
    // KAI's entry, in the container KAI would pick or elsewhere.
    if let Some((elsewhere, name_shape, right_key, with_value)) = kai.entry {
        let prefix = kai.configmap.unwrap_or("kai-cm");
        let name = match name_shape {
            0..=2 => format!("{prefix}-0"),
            3 => format!("{prefix}-i1"),
            4 => format!("{prefix}-x"),
            5 => format!("{prefix}-"),
            6 => format!("{prefix}-1-2"),
            _ => "other-0".to_owned(),
        };
        let key = if right_key { NVD } else { "devices" };
        let mut entry =
            json!({"name": NVD, "valueFrom": {"configMapKeyRef": {"name": name, "key": key}}});
        if with_value {
            entry["value"] = json!("all");
        }
        let holder = match (&named, elsewhere) {
            (_, Some(at)) => container_at(spec, at),
            (Some(named), None) => spec.as_object_mut().and_then(|spec| {
                spec.iter_mut()
                    .filter(|(list, _)| LISTS[..2].contains(&list.as_str()))
                    .filter_map(|(_, list)| list.as_array_mut())
                    .flatten()
                    .find(|c| c.get("name").and_then(Value::as_str) == Some(named.as_str()))
            }),
            (None, None) => spec
                .get_mut("containers")
                .and_then(Value::as_array_mut)
                .and_then(|list| list.first_mut()),
        };
        if let Some(container) = holder
            && let Some(map) = container.as_object_mut()
        {
            let env = map.entry("env").or_insert_with(|| json!([]));
            if !env.is_array() {
                *env = json!([]);
            }
            if let Some(list) = env.as_array_mut() {
                list.push(entry);
            }
        }
    }
    if !pod.get("metadata").is_some_and(Value::is_object) {
        pod["metadata"] = json!({"name": "pod-1"});
    }
    let Some(annotations) = object_at(&mut pod["metadata"], "annotations") else {
        return;
    };
    let mut set = |key: &str, value: Option<&str>| {
        if let Some(value) = value {
            annotations.insert(key.to_owned(), json!(value));
        }
    };
    set("gpu-fraction", kai.fraction);
    set("gpu-memory", kai.memory);
    set("gpu-fraction-num-devices", kai.devices);
    set("gpu-fraction-container-name", named.as_deref());
    set("runai/shared-gpu-configmap", kai.configmap);
}

fn lay_share(spec: &mut Value, share: &Share) {
    let Some(container) = container_at(spec, share.target) else {
        return;
    };
    let Some(resources) = object_at(container, "resources") else {
        return;
    };
    let mut side = |field: &str, name: &str, value: Option<Value>| {
        let slot = resources.entry(field).or_insert_with(|| json!({}));
        if !slot.is_object() {
            *slot = json!({});
        }
        if let Some(map) = slot.as_object_mut() {
            match value {
                Some(value) => map.insert(name.to_owned(), value),
                None => map.remove(name),
            };
        }
    };
    for (name, value, place) in &share.values {
        match place {
            0..=3 => side("limits", name, Some(value.clone())),
            4 => side("requests", name, Some(value.clone())),
            5 | 6 => {
                side("limits", name, Some(value.clone()));
                side("requests", name, Some(value.clone()));
            }
            _ => {
                side("limits", name, Some(value.clone()));
                side("requests", name, Some(json!("20")));
            }
        }
    }
    match share.cards {
        0 | 1 => {}
        2..=4 => {
            side("limits", "nvidia.com/gpu", None);
            side("requests", "nvidia.com/gpu", None);
        }
        5 | 6 => side("limits", "nvidia.com/gpu", Some(json!("1"))),
        _ => side("limits", "nvidia.com/gpu", Some(json!("0"))),
    }
}

/// Each GPU resource of each container as Kubernetes requires it of an
/// extended resource: a whole limit, a request only equal to it.
fn tidy(spec: &mut Value) {
    for list in LISTS {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers {
            let Some(resources) = container.get_mut("resources").and_then(Value::as_object_mut)
            else {
                continue;
            };
            for name in GPU_RESOURCES {
                let request = resources.get("requests").and_then(|r| r.get(name)).cloned();
                let limit = resources.get("limits").and_then(|l| l.get(name)).cloned();
                let Some(limit) = limit.or(request.clone()) else {
                    continue;
                };
                let limit = match known_count(&limit) {
                    Some(_) => limit,
                    None => json!(1),
                };
                for (field, present) in [("limits", true), ("requests", request.is_some())] {
                    if !present {
                        continue;
                    }
                    let slot = resources.entry(field).or_insert_with(|| json!({}));
                    if !slot.is_object() {
                        *slot = json!({});
                    }
                    if let Some(map) = slot.as_object_mut() {
                        map.insert(name.to_owned(), limit.clone());
                    }
                }
            }
        }
    }
}
