//! `gpu-policy-bounded-requests`: R2 on Pods and workload templates, in CEL.
//!
//! Reads the same fields as the rule (`resources.requests` and
//! `resources.limits` of init, sidecar and regular containers, the
//! namespace's `gpu-policy.io/max-gpus-per-pod` annotation) and denies the
//! same: a GPU request without a limit, a request that differs from the
//! limit, a value that is not a whole non-negative quantity, a container
//! above `maxPerContainer`, an effective pod count (Kubernetes' formula,
//! sidecars included) above `maxPerPod`.
//!
//! Not here: the GPUs of DRA claims (the policy cannot resolve a claim)
//! and the largest node's capacity (it cannot list nodes); the webhook
//! checks both.

use super::cel_text::{self as cel, count, limits, requests, sidecar, whole};
use super::{Validation, Variable};
use crate::settings::Settings;

pub fn variables(settings: &Settings) -> Vec<Variable> {
    let gpu = cel::gpu_resource(settings, "k");
    let max = settings.config().max_per_container;
    let (lim, req) = (limits("c"), requests("c"));
    let invalid = format!(
        "variables.checked.filter(c, \
         {lim}.exists(k, {gpu} && !{wl}) || {req}.exists(k, {gpu} && !{wr}))",
        wl = whole(&format!("{lim}[k]")),
        wr = whole(&format!("{req}[k]")),
    );
    let without_limit = format!(
        "variables.checked.filter(c, {req}.exists(k, {gpu} && {nr} && !(k in {lim})))",
        nr = cel::nonzero(&format!("{req}[k]")),
    );
    let not_limit = format!(
        "variables.checked.filter(c, {req}.exists(k, {gpu} && k in {lim} && {wr} && {wl} \
         && quantity({req}[k]).compareTo(quantity({lim}[k])) != 0))",
        wl = whole(&format!("{lim}[k]")),
        wr = whole(&format!("{req}[k]")),
    );
    let above_container = format!(
        "variables.checked.filter(c, \
         {lim}.exists(k, {gpu} && {wl} && quantity({lim}[k]).asInteger() > {max}) \
         || {req}.exists(k, {gpu} && !(k in {lim} && {wl2}) && {wr} \
            && quantity({req}[k]).asInteger() > {max}))",
        wl = whole(&format!("{lim}[k]")),
        wl2 = whole(&format!("{lim}[k]")),
        wr = whole(&format!("{req}[k]")),
    );
    // Kubernetes' effective count of resource k: the steady state (regular
    // containers and sidecars) or an init container with the sidecars
    // started before it, whichever is higher.
    let steady = format!(
        "(variables.regulars.map(c, {rc}).sum() \
         + variables.inits.filter(c, {sc}).map(c, {rc}).sum())",
        rc = count("c", "k"),
        sc = sidecar("c"),
    );
    // Each init container with the sidecars started before it
    // (`initPeaks`), paired once for every resource and container.
    let init_peak = format!(
        "variables.initPeaks.exists(p, {ci} + p.sidecars.map(s, {cs}).sum() \
         > variables.maxPerPod)",
        ci = count("p.init", "k"),
        cs = count("s", "k"),
    );
    let init_peaks = format!(
        "variables.inits.filter(i, !{si}).map(i, {{'init': i, 'sidecars': \
         variables.inits.filter(s, {ss} \
             && variables.initNames.indexOf(s.name) < variables.initNames.indexOf(i.name))}})",
        si = sidecar("i"),
        ss = sidecar("s"),
    );
    let over = format!("({steady} > variables.maxPerPod || {init_peak})");
    let above_pod = format!(
        "variables.containers.exists(c, {lim}.exists(k, {gpu} && {over}) \
         || {req}.exists(k, {gpu} && {over}))"
    );
    vec![
        // Every container's values are checked, ephemeral ones too (the API
        // server refuses resources on them; the webhook reads them anyway).
        Variable::new(
            "checked",
            &format!("variables.containers + ({})", cel::EPHEMERALS),
        ),
        Variable::new("initNames", "variables.inits.map(c, c.name)"),
        Variable::new("maxPerPod", &cel::max_per_pod(settings)),
        Variable::new("initPeaks", &init_peaks),
        Variable::new("invalidValue", &invalid),
        Variable::new("requestWithoutLimit", &without_limit),
        Variable::new("requestNotLimit", &not_limit),
        Variable::new("aboveContainerMaximum", &above_container),
        Variable::new("abovePodMaximum", &above_pod),
    ]
}

pub fn validations(settings: &Settings) -> Vec<Validation> {
    let max = settings.config().max_per_container;
    let phrase = |list: &str| cel::containers_phrase(list);
    vec![
        Validation::new(
            "size(variables.invalidValue) == 0",
            &format!(
                "'gpu-policy: ' + {} + ': a GPU request or limit is not a whole, non-negative \
                 number; GPUs are whole devices: use an integer such as \"1\"'",
                phrase("variables.invalidValue")
            ),
        ),
        Validation::new(
            "size(variables.requestWithoutLimit) == 0",
            &format!(
                "'gpu-policy: ' + {} + ' must set a limit for each GPU request: a GPU request \
                 needs an equal limit'",
                phrase("variables.requestWithoutLimit")
            ),
        ),
        Validation::new(
            "size(variables.requestNotLimit) == 0",
            &format!(
                "'gpu-policy: ' + {} + ': a GPU request differs from its limit; GPUs cannot \
                 be overcommitted, set them equal'",
                phrase("variables.requestNotLimit")
            ),
        ),
        Validation::new(
            "size(variables.aboveContainerMaximum) == 0",
            &format!(
                "'gpu-policy: ' + {} + ' must not ask for more than {max} GPUs per container; \
                 split the work or lower the limit'",
                phrase("variables.aboveContainerMaximum")
            ),
        ),
        Validation::new(
            "!variables.abovePodMaximum",
            "'gpu-policy: the pod needs more GPUs (init and sidecar containers included) than \
             the maximum of ' + string(variables.maxPerPod) + ' per pod here; \
             split the work or lower the limits'",
        ),
    ]
}
