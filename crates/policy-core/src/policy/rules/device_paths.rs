//! R6 `device-paths` (validating): no other way to a card than the device plugin
//! (docs/policy.md, "R6 device-paths").
//!
//! Reads: `spec.volumes[].hostPath.path`; `volumeMounts[].mountPath` of every container in
//! scope (new ephemeral ones included); `metadata.annotations` of the pod or template.
//!
//! Denies, in pods that are not allowlisted:
//! - hostPath volumes at `/dev/nvidia*` (`nvidiactl`, `nvidia0`, `nvidia-uvm`, `nvidia-caps/...`)
//!   or a folder above (`/dev`, `/`), the path normalised (`//`, `/./`, `..`, trailing `/`);
//! - mounts at or under `/var/run/nvidia-container-devices`: with the hardened toolkit's
//!   `accept-nvidia-visible-devices-as-volume-mounts` such a mount *is* a device request;
//! - annotations with key prefix `cdi.k8s.io` (or ending `.cdi.k8s.io`) whose value names an
//!   NVIDIA device (`nvidia.com/...`, `management.nvidia.com/...`): a CDI runtime injects it;
//! - privileged containers in scope that are not GPU containers: they see every
//!   `/dev/nvidia*` of the node.
//!
//! Warns (or with `privilegedGpu: deny` denies) privileged GPU containers: they see every
//! card of the node, not only their own. Allows every other hostPath, mount, annotation.

use std::borrow::Cow;

use super::rule::{ApiServer, Check, Coverage, Entry, Findings, Rule, RuleInput, Severity};
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::container::ContainerKind;
use crate::policy::message::{CONTAINER, MessageTemplate, Notice, NoticeKind, Noun};
use crate::policy::rules::cel::{CelPolicy, Validation, Variable};
use crate::policy::rules::cel_sharing as sharing;
use crate::policy::rules::cel_text::{self as cel, Fill};
use crate::settings::{PrivilegedGpu, Settings};

pub const DEVICE_LIST_MOUNT: &str = "/var/run/nvidia-container-devices";

pub const RULE: Rule = Rule {
    name: "device-paths",
    severity: Severity::High,
    entries: &[Entry {
        check: Check::Pod(check),
        api_server: ApiServer::Policies {
            coverage: Coverage {
                enforced: "hostPath volumes at `/`, `/dev`, `/dev/nvidia*`; mounts at \
        `/var/run/nvidia-container-devices`; CDI annotations naming NVIDIA devices; privileged \
        containers without a GPU; privileged ephemeral containers; with `privilegedGpu: deny`, \
        privileged GPU containers (a container naming a claim included)",
                webhook_only: "`..` in a mount path is not resolved (the API server already rejects it in a \
        hostPath); a privileged container naming a DRA claim is not denied (the claim may hold \
        a GPU); the warning about privileged GPU containers (a policy warns only what it \
        would deny)",
            },
            policies,
        },
    }],
};

pub const HOST_PATH_VOLUME: Noun = Noun::new("hostPath volume", "hostPath volumes");
pub const ANNOTATION: Noun = Noun::new("annotation", "annotations");
pub const EPHEMERAL_CONTAINER: Noun = Noun::new("ephemeral container", "ephemeral containers");
/// The verb of [`PRIVILEGED_GPU`], agreeing with its containers.
pub const SEES: Noun = Noun::new("sees", "see");

/// `{volumes}`: [`HOST_PATH_VOLUME`]'s list.
pub const HOST_PATH: MessageTemplate = MessageTemplate::new(
    "{volumes} must not mount a host path that exposes /dev/nvidia*; \
     request nvidia.com/gpu in limits instead",
);
/// `{mount}`: [`DEVICE_LIST_MOUNT`].
pub const DEVICE_LIST: MessageTemplate = MessageTemplate::new(
    "{containers} must not mount {mount}, a device request to the NVIDIA runtime; \
     request nvidia.com/gpu in limits instead",
);
/// `{annotations}`: [`ANNOTATION`]'s list of the keys, sorted.
pub const CDI_ANNOTATIONS: MessageTemplate = MessageTemplate::new(
    "{annotations} must not inject NVIDIA devices through CDI; \
     request nvidia.com/gpu in limits instead",
);
pub const PRIVILEGED: MessageTemplate = MessageTemplate::new(
    "{containers} must not be privileged without a GPU: a privileged container sees \
     every GPU of the node; drop privileged, or request nvidia.com/gpu in limits",
);
/// `{containers}`: [`EPHEMERAL_CONTAINER`]'s list.
pub const PRIVILEGED_EPHEMERAL: MessageTemplate = MessageTemplate::new(
    "{containers} must not be privileged: a privileged container sees every GPU of \
     the node; use a kubectl debug profile other than sysadmin",
);
/// A notice with `privilegedGpu: warn`; `{sees}`: [`SEES`].
pub const PRIVILEGED_GPU: MessageTemplate = MessageTemplate::new(
    "privileged {containers} {sees} every GPU of the node, not only the ones requested",
);
/// With `privilegedGpu: deny`: `{notice}` is [`PRIVILEGED_GPU`]'s.
pub const PRIVILEGED_GPU_DENIED: MessageTemplate =
    MessageTemplate::new("{notice}; drop privileged (privilegedGpu: deny)");

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    let mut findings = Findings::default();
    if input.allowlisted.is_some() {
        return findings;
    }
    let view = input.view;
    if input.scope.is_whole() {
        let host_paths: Vec<&str> = view
            .volumes
            .iter()
            .filter(|volume| volume.host_path.is_some_and(exposes_nvidia_devices))
            .map(|volume| volume.name)
            .collect();
        if !host_paths.is_empty() {
            findings
                .violations
                .push(HOST_PATH.format(&[("volumes", &HOST_PATH_VOLUME.list(host_paths))]));
        }
        let mut annotations: Vec<(&str, &str)> = view
            .annotations
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| Some((key, value.as_str()?)))
            .filter(|(key, value)| is_cdi_key(key) && names_nvidia_device(value))
            .collect();
        annotations.sort_unstable();
        if !annotations.is_empty() {
            let keys = ANNOTATION.list(annotations.iter().map(|(k, _)| *k));
            findings.violations.push(CDI_ANNOTATIONS.format(&[("annotations", &keys)]));
        }
    }
    let mounting: Vec<&str> = view
        .containers
        .iter()
        .filter(|c| input.scope.includes(c))
        .filter(|c| c.mount_paths.iter().any(|path| is_device_list_mount(path)))
        .map(|c| c.name)
        .collect();
    if !mounting.is_empty() {
        findings.violations.push(
            DEVICE_LIST.format(&[
                ("containers", &CONTAINER.list(mounting)),
                ("mount", &DEVICE_LIST_MOUNT),
            ]),
        );
    }
    check_privileged(input, &mut findings);
    findings
}

/// Privileged containers: denied without a GPU; with one, warned or denied as `privilegedGpu` says.
fn check_privileged(input: &RuleInput<'_, '_>, findings: &mut Findings) {
    let privileged =
        input.view.containers.iter().filter(|c| input.scope.includes(c) && c.privileged);
    let (mut gpu, mut ephemeral, mut plain) = (Vec::new(), Vec::new(), Vec::new());
    for container in privileged {
        // A container whose claim cannot be resolved may hold a GPU: it is
        // warned about like a GPU container (and about the claim), not denied.
        if container.is_gpu() || container.unresolved_claim {
            gpu.push(container.name);
        } else if container.kind == ContainerKind::Ephemeral {
            ephemeral.push(container.name);
        } else {
            plain.push(container.name);
        }
    }
    if !plain.is_empty() {
        findings.violations.push(PRIVILEGED.format(&[("containers", &CONTAINER.list(plain))]));
    }
    if !ephemeral.is_empty() {
        // Ephemeral containers cannot request a GPU: dropping privileged is
        // the only fix (`kubectl debug --profile=sysadmin` sets it).
        findings.violations.push(
            PRIVILEGED_EPHEMERAL.format(&[("containers", &EPHEMERAL_CONTAINER.list(ephemeral))]),
        );
    }
    if !gpu.is_empty() {
        let message = PRIVILEGED_GPU
            .format(&[("sees", &SEES.of(gpu.len())), ("containers", &CONTAINER.list(gpu))]);
        match input.settings.config().privileged_gpu {
            PrivilegedGpu::Warn => {
                findings.notices.push(Notice::new(NoticeKind::PrivilegedGpuContainer, message))
            }
            PrivilegedGpu::Deny => {
                findings.violations.push(PRIVILEGED_GPU_DENIED.format(&[("notice", &message)]))
            }
        }
    }
}

/// Lexically normalises an absolute path: no empty or `.` segments, `..` resolved, no trailing `/`;
/// the root is `/`. An already normal path, as nearly every mount path is, is returned as it is.
pub fn normalize(path: &str) -> Cow<'_, str> {
    // Split as bytes: a byte loop, where splitting the `str` on a `char`
    // searches for each separator anew (most of this check's cost).
    let normal = path == "/"
        || path.strip_prefix('/').is_some_and(|rest| {
            rest.as_bytes().split(|byte| *byte == b'/').all(|s| !matches!(s, b"" | b"." | b".."))
        });
    if normal {
        return Cow::Borrowed(path);
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    Cow::Owned(format!("/{}", segments.join("/")))
}

/// `/`, `/dev`, or anything at `/dev/nvidia*`.
fn exposes_nvidia_devices(host_path: &str) -> bool {
    let path = normalize(host_path);
    path == "/" || path == "/dev" || path.starts_with("/dev/nvidia")
}

fn is_device_list_mount(mount_path: &str) -> bool {
    let path = normalize(mount_path);
    path == DEVICE_LIST_MOUNT
        || path.strip_prefix(DEVICE_LIST_MOUNT).is_some_and(|rest| rest.starts_with('/'))
}

fn is_cdi_key(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    let prefix = prefix.to_ascii_lowercase();
    prefix == "cdi.k8s.io" || prefix.ends_with(".cdi.k8s.io")
}

/// CDI annotation values are comma-separated fully qualified device names (`vendor/class=name`).
fn names_nvidia_device(value: &str) -> bool {
    value.split(',').any(|device| {
        let device = device.trim().to_ascii_lowercase();
        device.starts_with("nvidia.com/") || device.starts_with("management.nvidia.com/")
    })
}

// The CEL side, `gpu-policy-device-paths`: the checks above, in the containers in scope (on
// `pods/ephemeralcontainers`, the ephemeral containers the update adds). `..` segments are not
// resolved (the API server already rejects them in a hostPath; a mount path with `..` is read as
// written).

/// The path's segments without the empty and `.` ones.
fn segments(path: &str) -> String {
    format!("{path}.split('/').filter(s, s != '' && s != '.')")
}

fn variables(settings: &Settings) -> Vec<Variable> {
    let device_list: Vec<&str> = DEVICE_LIST_MOUNT.split('/').filter(|s| !s.is_empty()).collect();
    let under_device_list = device_list
        .iter()
        .enumerate()
        .map(|(i, s)| format!("p[{i}] == {}", cel::string(s)))
        .collect::<Vec<_>>()
        .join(" && ");
    let mounts = "has(c.volumeMounts) ? c.volumeMounts : []";
    let (gpu, claims) = (sharing::asks_gpu(settings, "c"), cel::uses_claims("c"));
    // The privileged regular and init containers that also match `condition`.
    let privileged_containers = |condition: &str| {
        format!("variables.scopedContainers.filter(c, {} && {condition})", privileged("c"))
    };
    let mut variables = sharing::variables(settings);
    variables.extend([
        Variable::new("ephemeralUpdate", cel::EPHEMERAL_UPDATE),
        Variable::new("ephemerals", cel::EPHEMERALS),
        Variable::new("oldEphemeralNames", cel::OLD_EPHEMERAL_NAMES),
        Variable::new("scopedContainers", "variables.ephemeralUpdate ? [] : variables.containers"),
        Variable::new("scopedEphemerals", cel::NEW_EPHEMERALS),
        Variable::new("allowlisted", &cel::allowlisted(settings)),
        Variable::new(
            "hostPaths",
            &format!(
                "variables.ephemeralUpdate || !has(variables.spec.volumes) ? [] \
                 : variables.spec.volumes.filter(v, has(v.hostPath) && has(v.hostPath.path) \
                   && [{segs}].exists(p, size(p) == 0 \
                      || (p[0] == 'dev' && (size(p) == 1 || p[1].startsWith('nvidia')))))",
                segs = segments("v.hostPath.path"),
            ),
        ),
        Variable::new(
            "deviceListMounts",
            &format!(
                "(variables.scopedContainers + variables.scopedEphemerals).filter(c, \
                 ({mounts}).exists(m, has(m.mountPath) && [{segs}].exists(p, \
                   size(p) >= {n} && {under_device_list})))",
                segs = segments("m.mountPath"),
                n = device_list.len(),
            ),
        ),
        Variable::new(
            "cdiAnnotations",
            &format!(
                "variables.ephemeralUpdate ? [] : ({annotations}).filter(k, k.contains('/') \
                 && (k.split('/')[0].lowerAscii() == 'cdi.k8s.io' \
                     || k.split('/')[0].lowerAscii().endsWith('.cdi.k8s.io')) \
                 && ({annotations})[k].split(',').exists(d, \
                     d.trim().lowerAscii().startsWith('nvidia.com/') \
                     || d.trim().lowerAscii().startsWith('management.nvidia.com/')))",
                annotations = cel::ANNOTATIONS,
            ),
        ),
        Variable::new("privileged", &privileged_containers(&format!("!{gpu} && !{claims}"))),
        Variable::new(
            "privilegedEphemerals",
            &format!("variables.scopedEphemerals.filter(c, {})", privileged("c")),
        ),
    ]);
    if settings.config().privileged_gpu == PrivilegedGpu::Deny {
        variables.push(Variable::new(
            "privilegedGpus",
            &privileged_containers(&format!("({gpu} || {claims})")),
        ));
    }
    variables
}

fn privileged(c: &str) -> String {
    format!(
        "(has({c}.securityContext) && has({c}.securityContext.privileged) \
         && {c}.securityContext.privileged == true)"
    )
}

/// `noun` agreeing with the size of `list`, in CEL.
fn agreeing(noun: Noun, list: &str) -> String {
    format!("(size({list}) == 1 ? {} : {})", cel::string(noun.one), cel::string(noun.many))
}

fn validations(settings: &Settings) -> Vec<Validation> {
    // Each list of what the rule denies must be empty, unless allowlisted.
    let deny = |list: &str, template, slots: &[(&str, Fill)]| {
        Validation::new(
            &format!("variables.allowlisted || size(variables.{list}) == 0"),
            &cel::full_message(template, slots),
        )
    };
    let listed = |slot: &'static str, noun: Noun, list: &str| {
        (slot, Fill::cel(cel::quoted_list(noun, &format!("variables.{list}"))))
    };
    // The keys sorted, as the webhook names them (a map's keys come in any
    // order), each as a record with a `name`.
    let sorted_keys = "[variables.cdiAnnotations].map(d, d.map(i, d.filter(k, \
         size(d.filter(x, x < k)) == d.indexOf(i))[0]))[0].map(k, {'name': k})";
    let annotations = format!("[{sorted_keys}].map(l, {})[0]", cel::quoted_list(ANNOTATION, "l"));
    let mut validations = vec![
        deny("hostPaths", HOST_PATH, &[listed("volumes", HOST_PATH_VOLUME, "hostPaths")]),
        deny(
            "deviceListMounts",
            DEVICE_LIST,
            &[
                listed("containers", CONTAINER, "deviceListMounts"),
                ("mount", Fill::words(DEVICE_LIST_MOUNT)),
            ],
        ),
        deny("cdiAnnotations", CDI_ANNOTATIONS, &[("annotations", Fill::cel(annotations))]),
        deny("privileged", PRIVILEGED, &[listed("containers", CONTAINER, "privileged")]),
        deny(
            "privilegedEphemerals",
            PRIVILEGED_EPHEMERAL,
            &[listed("containers", EPHEMERAL_CONTAINER, "privilegedEphemerals")],
        ),
    ];
    if settings.config().privileged_gpu == PrivilegedGpu::Deny {
        let notice = cel::message(
            PRIVILEGED_GPU,
            &[
                listed("containers", CONTAINER, "privilegedGpus"),
                ("sees", Fill::cel(agreeing(SEES, "variables.privilegedGpus"))),
            ],
        );
        validations.push(deny(
            "privilegedGpus",
            PRIVILEGED_GPU_DENIED,
            &[("notice", Fill::cel(notice))],
        ));
    }
    validations
}

fn policies(settings: &Settings, _: KubernetesVersion) -> Vec<CelPolicy> {
    vec![CelPolicy::pod_validations(true, variables(settings), validations(settings))]
}

#[cfg(test)]
mod tests;
