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
//! With `gpuSharing` (`sharing.rs`): the KAI holder counts the devices of
//! its fraction (`gpu-fraction-num-devices`, default 1) and a HAMi share
//! without `nvidia.com/gpu` counts 1, both under `nvidia.com/gpu` in the
//! pod's count (`steadyImplied`, and each init container's `implied`);
//! KAI's annotations are checked as KAI reads them (`kaiProblems`: both
//! annotations, a fraction beside a whole-card limit, a fraction outside
//! (0, 1), `gpu-memory` or the device count not a whole number above 0, a
//! device count above `maxPerContainer`, a container name naming none), and
//! HAMi's share values as shares, never as cards (`shareProblems`: whole
//! and non-negative, a request only beside an equal limit;
//! `percentProblems`: the percentages at most 100).
//!
//! The messages are the webhook's, from the rule's own templates
//! (`policy::rules::bounded_requests`, `policy::rules::sharing`): one per
//! resource (per value, for an invalid one), naming its containers, and
//! the pod's count of each resource above the maximum. A validation has
//! one message, so where the webhook reports several violations of one
//! kind (two resources above the container maximum) the policy joins their
//! messages with `policy::message::SEPARATOR`. The variables only messages
//! read (`...Keys`, `podCounts`) are evaluated only for a validation that
//! fails.
//!
//! Each container's limits and requests are read once per check
//! (`cel_text::read_once`): reading `limits(c)` again builds an empty map
//! each time the field is absent.
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

use super::cel_text::{self as cel, Fill, count, invalid_reason, read_once, sidecar, whole};
use super::object::{Validation, Variable};
use super::sharing;
use crate::policy::rules::bounded_requests::{
    ABOVE_CONTAINER_MAXIMUM, ABOVE_POD_MAXIMUM, INVALID_VALUE, REQUEST_NOT_LIMIT,
    REQUEST_WITHOUT_LIMIT,
};
use crate::settings::{HAMI_CARDS, Settings};

pub fn variables(settings: &Settings) -> Vec<Variable> {
    let gpu = cel::gpu_resource(settings, "k");
    let max = settings.config().max_per_container;
    // Each container's limits and requests are read once (`m.l`, `m.r`).
    let once = read_once("c");
    let (lim, req) = ("m.l", "m.r");
    let (wl, wr) = (whole("m.l[k]"), whole("m.r[k]"));
    let invalid = format!(
        "variables.checked.filter(c, {once}.exists(m, \
         {lim}.exists(k, {gpu} && !{wl}) || {req}.exists(k, {gpu} && !{wr})))",
    );
    let without_limit = format!(
        "variables.checked.filter(c, {once}.exists(m, \
         {req}.exists(k, {gpu} && {nr} && !(k in {lim}))))",
        nr = cel::nonzero("m.r[k]"),
    );
    let not_limit = format!(
        "variables.checked.filter(c, {once}.exists(m, {req}.exists(k, {gpu} && k in {lim} \
         && {wr} && {wl} && quantity({req}[k]).compareTo(quantity({lim}[k])) != 0)))",
    );
    let above_container = format!(
        "variables.checked.filter(c, {once}.exists(m, \
         {lim}.exists(k, {gpu} && {wl} && quantity({lim}[k]).asInteger() > {max}) \
         || {req}.exists(k, {gpu} && !(k in {lim} && {wl}) && {wr} \
            && quantity({req}[k]).asInteger() > {max})))",
    );
    // For the messages, each container of a problem with the resources
    // (or, for values, `<field>.<resource> <reason>`) it has it for, as
    // the webhook names them: `{'name', 'ks'}`. Read only by the messages.
    let keys = |list: &str, ks: &str| {
        format!(
            "variables.{list}.map(c, {{'name': dyn(c.name), 'ks': dyn({once}.map(m, {ks})[0])}})"
        )
    };
    // `[field, resource, reason]`, the slots of the message.
    let invalid_keys = keys(
        "invalidValue",
        &format!(
            "{lim}.filter(k, {gpu} && !{wl}).map(k, ['limits', string(k), {rl}]) \
             + {req}.filter(k, {gpu} && !{wr}).map(k, ['requests', string(k), {rr}])",
            rl = invalid_reason("m.l[k]"),
            rr = invalid_reason("m.r[k]"),
        ),
    );
    let without_limit_keys = keys(
        "requestWithoutLimit",
        &format!(
            "{req}.filter(k, {gpu} && {nr} && !(k in {lim}))",
            nr = cel::nonzero("m.r[k]")
        ),
    );
    let not_limit_keys = keys(
        "requestNotLimit",
        &format!(
            "{req}.filter(k, {gpu} && k in {lim} && {wr} && {wl} \
             && quantity({req}[k]).compareTo(quantity({lim}[k])) != 0)"
        ),
    );
    let above_container_keys = keys(
        "aboveContainerMaximum",
        &format!(
            "{lim}.filter(k, {gpu} && {wl} && quantity({lim}[k]).asInteger() > {max}) \
             + {req}.filter(k, {gpu} && !(k in {lim} && {wl}) && {wr} \
                && quantity({req}[k]).asInteger() > {max})"
        ),
    );
    // Each container's GPU resources, once per request: the names in
    // its limits, then those only in its requests, each with the count
    // the device plugin allocates. The pod checks below read these
    // instead of the containers' quantities.
    let gpus = |c: &str| {
        format!(
            "{once}.map(m, {lim}.filter(k, {gpu}).map(k, {{'k': dyn(k), 'n': dyn({n})}}) \
             + {req}.filter(k, {gpu} && !(k in {lim})).map(k, {{'k': dyn(k), 'n': dyn({n})}}))[0]",
            once = read_once(c),
            n = count(lim, req, "k"),
        )
    };
    // The cards a sharing scheme implies, under nvidia.com/gpu, are kept
    // beside the lists, once per container: in the steady state
    // (`steadyImplied`), in each init container's record and each peak.
    let implied = sharing::implied_cards(settings, "c");
    let cards = cel::string(HAMI_CARDS);
    let plus_implied = |n: &str| match implied {
        Some(_) => format!(" + (k == {cards} ? {n} : 0)"),
        None => String::new(),
    };
    // The count of resource k in a list of containers' GPU lists.
    let total =
        |lists: &str| format!("{lists}.map(l, l.filter(e, e.k == k).map(e, e.n).sum()).sum()");
    // Kubernetes' effective count of resource k: the steady state (regular
    // containers and sidecars) or an init container with the sidecars
    // started before it, whichever is higher.
    let steady = format!(
        "({} + {}{})",
        total("variables.regularGpus"),
        total("variables.initGpus.filter(i, i.sidecar).map(i, i.gpus)"),
        plus_implied("variables.steadyImplied"),
    );
    let peak = format!(
        "{} + {}{}",
        total("[p.init]"),
        total("p.sidecars"),
        plus_implied("p.implied"),
    );
    let init_peak = format!("variables.initPeaks.exists(p, {peak} > variables.maxPerPod)");
    let over = format!("({steady} > variables.maxPerPod || {init_peak})");
    // The effective count of resource k, for the message.
    let effective = format!("([{steady}] + variables.initPeaks.map(p, {peak})).max()");
    let mut above_pod = format!(
        "(variables.regularGpus + variables.initGpus.map(i, i.gpus))\
         .exists(l, l.exists(g, [g.k].exists(k, {over})))"
    );
    if implied.is_some() {
        // Cards only a sharing scheme implies name no resource to loop on.
        above_pod = format!("{above_pod} || [{cards}].exists(k, {over})");
    }
    let implied_field = match &implied {
        Some(n) => format!(", 'implied': dyn({n})"),
        None => String::new(),
    };
    let init_gpus = format!(
        "variables.inits.map(c, {{'name': dyn(c.name), 'sidecar': dyn({sc}), 'gpus': dyn({g}){implied_field}}})",
        sc = sidecar("c"),
        g = gpus("c"),
    );
    // Each init container with the sidecars started before it.
    let before = "variables.initGpus.filter(s, s.sidecar \
         && variables.initNames.indexOf(s.name) < variables.initNames.indexOf(i.name))";
    let init_peaks = match implied {
        None => format!(
            "variables.initGpus.filter(i, !i.sidecar).map(i, {{'init': dyn(i.gpus), \
             'sidecars': dyn({before}.map(s, s.gpus))}})"
        ),
        Some(_) => format!(
            "variables.initGpus.filter(i, !i.sidecar).map(i, [{before}].map(ss, \
             {{'init': dyn(i.gpus), 'sidecars': dyn(ss.map(s, s.gpus)), \
               'implied': dyn(i.implied + ss.map(s, s.implied).sum())}})[0])"
        ),
    };
    let mut variables = sharing::variables(settings);
    // Every container's values are checked, ephemeral ones too (the API
    // server refuses resources on them; the webhook reads them anyway).
    variables.push(Variable::new(
        "checked",
        &format!("variables.containers + ({})", cel::EPHEMERALS),
    ));
    variables.extend(sharing::bounded_variables(settings));
    variables.extend([
        Variable::new("initNames", "variables.inits.map(c, c.name)"),
        Variable::new("maxPerPod", &cel::max_per_pod(settings)),
        Variable::new(
            "regularGpus",
            &format!("variables.regulars.map(c, {})", gpus("c")),
        ),
        Variable::new("initGpus", &init_gpus),
        Variable::new("initPeaks", &init_peaks),
        Variable::new("invalidValue", &invalid),
        Variable::new("requestWithoutLimit", &without_limit),
        Variable::new("requestNotLimit", &not_limit),
        Variable::new("aboveContainerMaximum", &above_container),
        Variable::new("invalidValueKeys", &invalid_keys),
        Variable::new("requestWithoutLimitKeys", &without_limit_keys),
        Variable::new("requestNotLimitKeys", &not_limit_keys),
        Variable::new("aboveContainerMaximumKeys", &above_container_keys),
    ]);
    if let Some(n) = &implied {
        variables.push(Variable::new(
            "steadyImplied",
            &format!(
                "variables.regulars.map(c, {n}).sum() \
                 + variables.initGpus.filter(i, i.sidecar).map(i, i.implied).sum()"
            ),
        ));
    }
    // The resources each init and regular container names (and, with a
    // sharing scheme, the cards it implies), for the pod maximum's message.
    let mut pod_keys = "(variables.initGpus.map(i, {'name': dyn(i.name), 'ks': dyn(i.gpus.map(g, g.k))}) \
         + variables.regulars.map(c, c.name).map(n, {'name': dyn(n), \
           'ks': dyn(variables.regularGpus[variables.regulars.map(c, c.name).indexOf(n)].map(g, g.k))}))"
        .to_owned();
    if implied.is_some() {
        pod_keys = format!("({pod_keys} + [{{'name': dyn(''), 'ks': dyn([{cards}])}}])");
    }
    variables.push(Variable::new("podResourceKeys", &pod_keys));
    variables.push(Variable::new(
        "podCounts",
        &cel::each_first(
            "variables.podResourceKeys",
            &format!(
                "[{effective}].map(n, n > variables.maxPerPod ? {message} : '')[0]",
                message = cel::message(
                    ABOVE_POD_MAXIMUM,
                    &[
                        ("count", Fill::cel("string(n)")),
                        ("resource", Fill::cel("k")),
                        ("maximum", Fill::cel("string(variables.maxPerPod)")),
                    ]
                ),
            ),
        ),
    ));
    variables.push(Variable::new("abovePodMaximum", &above_pod));
    variables
}

pub fn validations(settings: &Settings) -> Vec<Validation> {
    let max = settings.config().max_per_container;
    let grouped = |list: &str, template, slots: &[(&str, Fill)]| {
        cel::grouped_messages(&format!("variables.{list}Keys"), template, slots)
    };
    let resource = || ("resource", Fill::cel("k"));
    let mut validations = vec![
        Validation::new(
            "size(variables.invalidValue) == 0",
            &grouped(
                "invalidValue",
                INVALID_VALUE,
                &[
                    ("field", Fill::cel("k[0]")),
                    ("resource", Fill::cel("k[1]")),
                    ("reason", Fill::cel("k[2]")),
                ],
            ),
        ),
        Validation::new(
            "size(variables.requestWithoutLimit) == 0",
            &grouped("requestWithoutLimit", REQUEST_WITHOUT_LIMIT, &[resource()]),
        ),
        Validation::new(
            "size(variables.requestNotLimit) == 0",
            &grouped("requestNotLimit", REQUEST_NOT_LIMIT, &[resource()]),
        ),
        Validation::new(
            "size(variables.aboveContainerMaximum) == 0",
            &grouped(
                "aboveContainerMaximum",
                ABOVE_CONTAINER_MAXIMUM,
                &[("maximum", Fill::words(max)), resource()],
            ),
        ),
        Validation::new(
            "!variables.abovePodMaximum",
            "'gpu-policy: ' + variables.podCounts",
        ),
    ];
    validations.extend(sharing::bounded_validations(settings));
    validations
}
