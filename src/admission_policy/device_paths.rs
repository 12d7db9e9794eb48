//! `gpu-policy-device-paths`: R6 in CEL.
//!
//! Reads `spec.volumes[].hostPath.path`, `volumeMounts[].mountPath` and
//! `securityContext.privileged` of the containers in scope (every
//! container of a new pod or template; on `pods/ephemeralcontainers`, the
//! ephemeral containers the update adds), the annotations of the pod or
//! template, and the allowlist.
//!
//! Denies, in objects that are not allowlisted: hostPath volumes at `/`,
//! `/dev` or `/dev/nvidia*` (after dropping empty and `.` segments), mounts
//! at or under `/var/run/nvidia-container-devices`, CDI annotations naming
//! an NVIDIA device, and privileged containers that ask for no GPU and
//! hold no share of one (`sharing.rs`; privileged ephemeral containers
//! always). With `privilegedGpu: deny`, every privileged container in
//! scope: the GPU containers too, and those naming a DRA claim (the webhook
//! denies them whether the claim holds a GPU or not).
//!
//! Not here: `..` segments are not resolved (the API server already
//! rejects them in a hostPath; a mount path with `..` is read as written),
//! and with `privilegedGpu: warn` a privileged container naming a DRA claim
//! is not denied (the claim may hold a GPU; the webhook resolves it). The
//! warning about privileged GPU containers (`privilegedGpu: warn`) is the
//! webhook's.

use super::cel_text::{self as cel, Fill};
use super::object::{Validation, Variable};
use super::sharing;
use crate::policy::message::{CONTAINER, Noun};
use crate::policy::rules::device_paths::{
    ANNOTATION, CDI_ANNOTATIONS, DEVICE_LIST, DEVICE_LIST_MOUNT, EPHEMERAL_CONTAINER, HOST_PATH,
    HOST_PATH_VOLUME, PRIVILEGED, PRIVILEGED_EPHEMERAL, PRIVILEGED_GPU, PRIVILEGED_GPU_DENIED,
    SEES,
};
use crate::settings::{PrivilegedGpu, Settings};

/// The path's segments without the empty and `.` ones.
fn segments(path: &str) -> String {
    format!("{path}.split('/').filter(s, s != '' && s != '.')")
}

pub fn variables(settings: &Settings) -> Vec<Variable> {
    let device_list: Vec<&str> = DEVICE_LIST_MOUNT
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
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
        format!(
            "variables.scopedContainers.filter(c, {} && {condition})",
            privileged("c")
        )
    };
    let mut variables = sharing::variables(settings);
    variables.extend([
        Variable::new("ephemeralUpdate", cel::EPHEMERAL_UPDATE),
        Variable::new("ephemerals", cel::EPHEMERALS),
        Variable::new(
            "oldEphemeralNames",
            "oldObject != null && has(oldObject.spec) && has(oldObject.spec.ephemeralContainers) \
             ? oldObject.spec.ephemeralContainers.map(e, e.name) : []",
        ),
        Variable::new(
            "scopedContainers",
            "variables.ephemeralUpdate ? [] : variables.containers",
        ),
        Variable::new(
            "scopedEphemerals",
            "variables.ephemeralUpdate \
             ? variables.ephemerals.filter(e, !(e.name in variables.oldEphemeralNames)) \
             : variables.ephemerals",
        ),
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
        Variable::new(
            "privileged",
            &privileged_containers(&format!("!{gpu} && !{claims}")),
        ),
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
    format!(
        "(size({list}) == 1 ? {} : {})",
        cel::string(noun.one),
        cel::string(noun.many)
    )
}

pub fn validations(settings: &Settings) -> Vec<Validation> {
    let listed = |slot: &'static str, noun: Noun, list: &str| {
        (slot, Fill::cel(cel::quoted_list(noun, list)))
    };
    // The keys sorted, as the webhook names them (a map's keys come in any
    // order), each as a record with a `name`.
    let sorted_keys = "[variables.cdiAnnotations].map(d, d.map(i, d.filter(k, \
         size(d.filter(x, x < k)) == d.indexOf(i))[0]))[0].map(k, {'name': k})";
    let mut validations = vec![
        Validation::new(
            "variables.allowlisted || size(variables.hostPaths) == 0",
            &cel::full_message(
                HOST_PATH,
                &[listed("volumes", HOST_PATH_VOLUME, "variables.hostPaths")],
            ),
        ),
        Validation::new(
            "variables.allowlisted || size(variables.deviceListMounts) == 0",
            &cel::full_message(
                DEVICE_LIST,
                &[
                    listed("containers", CONTAINER, "variables.deviceListMounts"),
                    ("mount", Fill::words(DEVICE_LIST_MOUNT)),
                ],
            ),
        ),
        Validation::new(
            "variables.allowlisted || size(variables.cdiAnnotations) == 0",
            &cel::full_message(
                CDI_ANNOTATIONS,
                &[(
                    "annotations",
                    Fill::cel(format!(
                        "[{sorted_keys}].map(l, {})[0]",
                        cel::quoted_list(ANNOTATION, "l")
                    )),
                )],
            ),
        ),
        Validation::new(
            "variables.allowlisted || size(variables.privileged) == 0",
            &cel::full_message(
                PRIVILEGED,
                &[listed("containers", CONTAINER, "variables.privileged")],
            ),
        ),
        Validation::new(
            "variables.allowlisted || size(variables.privilegedEphemerals) == 0",
            &cel::full_message(
                PRIVILEGED_EPHEMERAL,
                &[listed(
                    "containers",
                    EPHEMERAL_CONTAINER,
                    "variables.privilegedEphemerals",
                )],
            ),
        ),
    ];
    if settings.config().privileged_gpu == PrivilegedGpu::Deny {
        let notice = cel::message(
            PRIVILEGED_GPU,
            &[
                listed("containers", CONTAINER, "variables.privilegedGpus"),
                (
                    "sees",
                    Fill::cel(agreeing(SEES, "variables.privilegedGpus")),
                ),
            ],
        );
        validations.push(Validation::new(
            "variables.allowlisted || size(variables.privilegedGpus) == 0",
            &cel::full_message(PRIVILEGED_GPU_DENIED, &[("notice", Fill::cel(notice))]),
        ));
    }
    validations
}
