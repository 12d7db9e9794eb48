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
//! The containers' GPU counts are read once per request (`regularGpus`,
//! `initGpus`, `initPeaks`): the pod maximum, checked for each resource
//! of each container, then compares names instead of parsing quantities
//! again, which keeps a pod of tens of containers within the API server's
//! cost limits (see docs/policy.md, "Admission policy cost").
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
    // Each container's GPU resources, once per request: the names in
    // its limits, then those only in its requests, each with the count
    // the device plugin allocates. The pod checks below read these
    // instead of the containers' quantities.
    let gpus = |c: &str| {
        let (lim, req) = (limits(c), requests(c));
        let gpu = cel::gpu_resource(settings, "k");
        format!(
            "({lim}.filter(k, {gpu}).map(k, {{'k': k, 'n': {n}}}) \
             + {req}.filter(k, {gpu} && !(k in {lim})).map(k, {{'k': k, 'n': {n}}}))",
            n = count(c, "k"),
        )
    };
    // The count of resource k in a list of containers' GPU lists.
    let total =
        |lists: &str| format!("{lists}.map(l, l.filter(e, e.k == k).map(e, e.n).sum()).sum()");
    // Kubernetes' effective count of resource k: the steady state (regular
    // containers and sidecars) or an init container with the sidecars
    // started before it, whichever is higher.
    let steady = format!(
        "({} + {})",
        total("variables.regularGpus"),
        total("variables.initGpus.filter(i, i.sidecar).map(i, i.gpus)"),
    );
    let init_peak = format!(
        "variables.initPeaks.exists(p, {} + {} > variables.maxPerPod)",
        total("[p.init]"),
        total("p.sidecars"),
    );
    let over = format!("({steady} > variables.maxPerPod || {init_peak})");
    let above_pod = format!(
        "(variables.regularGpus + variables.initGpus.map(i, i.gpus))\
         .exists(l, l.exists(g, [g.k].exists(k, {over})))"
    );
    let init_gpus = format!(
        "variables.inits.map(c, {{'name': c.name, 'sidecar': {sc}, 'gpus': {g}}})",
        sc = sidecar("c"),
        g = gpus("c"),
    );
    // Each init container with the sidecars started before it.
    let init_peaks = "variables.initGpus.filter(i, !i.sidecar).map(i, {'init': i.gpus, \
         'sidecars': variables.initGpus.filter(s, s.sidecar \
             && variables.initNames.indexOf(s.name) < variables.initNames.indexOf(i.name))\
             .map(s, s.gpus)})";
    vec![
        // Every container's values are checked, ephemeral ones too (the API
        // server refuses resources on them; the webhook reads them anyway).
        Variable::new(
            "checked",
            &format!("variables.containers + ({})", cel::EPHEMERALS),
        ),
        Variable::new("initNames", "variables.inits.map(c, c.name)"),
        Variable::new("maxPerPod", &cel::max_per_pod(settings)),
        Variable::new(
            "regularGpus",
            &format!("variables.regulars.map(c, {})", gpus("c")),
        ),
        Variable::new("initGpus", &init_gpus),
        Variable::new("initPeaks", init_peaks),
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
