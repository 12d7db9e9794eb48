//! R2 `bounded-requests` (validating): every GPU request is a whole number
//! of devices that some node can actually give.
//!
//! Reads: `resources.requests` and `resources.limits` of init, sidecar and
//! regular containers, for the configured GPU resource names; the GPU count
//! of the pod's resolved DRA claims; the namespace's
//! `maxPerPod` (cluster config, lowered by the namespace annotation).
//!
//! Denies, naming container and resource:
//! - a GPU resource in `requests` without the same resource in `limits`;
//! - a request different from the limit;
//! - a value that is not a whole, non-negative Kubernetes quantity;
//! - a container above `maxPerContainer`;
//! - an effective pod count (Kubernetes' formula, sidecars included) above
//!   `maxPerPod`. The GPUs of the resolved DRA claims the containers use are
//!   added, each claim once: a claim is allocated for the pod's whole life,
//!   whichever container (init, sidecar or regular) uses it;
//! - with a cluster to read: an effective count above what the biggest node
//!   can allocate (`status.allocatable`): such a pod can never be scheduled.
//!
//! Sharing schemes (`sharing.rs`): a KAI fraction counts as the cards it
//! shares (`gpu-fraction-num-devices`, default 1) and its annotations are
//! checked as KAI reads them; a HAMi share without `nvidia.com/gpu` counts
//! as 1 card, and its values are checked as shares, never as cards.
//!
//! Allows: limits only (Kubernetes sets the request to the limit for
//! extended resources), request == limit, and a zero limit (not a request).
//! Applies to allowlisted pods too.

use std::collections::BTreeMap;

pub mod claim_requests;
mod claim_pod_total;
pub mod sharing;

use super::rule::{ApiServer, Check, Coverage, Entry, Findings, Rule, RuleInput, Severity};
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::container::GpuResource;
use crate::policy::dra::claims::DraCount;
use crate::policy::message::{CONTAINER, MessageTemplate};
use crate::policy::quantity::GpuCount;
use crate::policy::rules::cel::CelPolicy;
use crate::policy::rules::cel::{Validation, Variable};
use crate::policy::rules::cel_sharing;
use crate::policy::rules::cel_text::{
    self as cel, Fill, count, invalid_reason, read_once, sidecar, whole,
};
use crate::settings::{HAMI_CARDS, Settings};

/// The pods' entry, then the claims' ([`claim_requests::ENTRY`]).
pub const RULE: Rule = Rule {
    name: "bounded-requests",
    severity: Severity::Medium,
    entries: &[
        Entry {
            check: Check::Pod(check),
            api_server: ApiServer::Policies {
                coverage: Coverage {
                    enforced: "request without limit, request ≠ limit, values that are not whole non-negative \
        quantities, `maxPerContainer`, the effective pod count against `maxPerPod` (Kubernetes' \
        formula with sidecars), the namespace annotation; KAI fraction annotations and HAMi \
        share values, and the cards they imply",
                    webhook_only: "the GPUs of a pod's DRA claims added to its count (claims are other \
        objects); the largest node's allocatable GPUs (nodes are other objects)",
                },
                policies,
            },
        },
        claim_requests::ENTRY,
    ],
};

/// A value that is no GPU count: `{field}` is `limits` or `requests`,
/// `{reason}` a [`crate::policy::quantity::QuantityError`].
pub const INVALID_VALUE: MessageTemplate = MessageTemplate::new(
    "{containers}: {field}.{resource} {reason}; \
     GPUs are whole devices: use an integer such as \"1\"",
);
pub const REQUEST_WITHOUT_LIMIT: MessageTemplate = MessageTemplate::new(
    "{containers} must set limits.{resource}: a GPU request needs an equal limit",
);
pub const REQUEST_NOT_LIMIT: MessageTemplate = MessageTemplate::new(
    "{containers}: requests.{resource} differs from limits.{resource}; \
     GPUs cannot be overcommitted, set them equal",
);
pub const ABOVE_CONTAINER_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "{containers} must not ask for more than {maximum} {resource} \
     per container; split the work or lower the limit",
);
/// The effective pod count of one resource above `maxPerPod`.
pub const ABOVE_POD_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "the pod needs {count} {resource} (init and sidecar containers included), \
     above the maximum of {maximum} per pod here",
);
/// Webhook only: the policies cannot resolve a claim.
pub const CLAIMS_ABOVE_POD_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "the pod's resource claims hold {count} GPUs, above the maximum of \
     {maximum} per pod here; claim fewer devices",
);
/// Webhook only, as [`CLAIMS_ABOVE_POD_MAXIMUM`].
pub const WITH_CLAIMS_ABOVE_POD_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "the pod needs {count} {resource} (init and sidecar containers included) \
     and {claimed} GPUs through resource claims, above the maximum of \
     {maximum} per pod here",
);
/// Webhook only: the policies cannot list nodes.
pub const ABOVE_LARGEST_NODE: MessageTemplate = MessageTemplate::new(
    "the pod needs {count} {resource} but the biggest node offers \
     {largest}: it can never be scheduled",
);

/// One kind of problem with one resource; containers sharing it are named
/// in one message.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Problem {
    InvalidValue { field: &'static str, reason: String },
    RequestWithoutLimit,
    RequestNotLimit,
    AboveContainerMaximum { maximum: u64 },
}

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    let mut findings = Findings::default();
    if !input.scope.is_whole() {
        return findings;
    }
    let view = input.view;
    let max_per_container = input.settings.config().max_per_container;
    // (resource, problem) -> container names, in a stable order.
    let mut problems: BTreeMap<(&str, Problem), Vec<&str>> = BTreeMap::new();
    for container in &view.containers {
        for resource in &container.gpu_resources {
            for problem in problems_of(resource, max_per_container) {
                problems.entry((resource.name, problem)).or_default().push(container.name);
            }
        }
    }
    for ((resource, problem), names) in problems {
        let containers = CONTAINER.list(names);
        let message = match problem {
            Problem::InvalidValue { field, reason } => INVALID_VALUE.format(&[
                ("containers", &containers),
                ("field", &field),
                ("resource", &resource),
                ("reason", &reason),
            ]),
            Problem::RequestWithoutLimit => REQUEST_WITHOUT_LIMIT
                .format(&[("containers", &containers), ("resource", &resource)]),
            Problem::RequestNotLimit => {
                REQUEST_NOT_LIMIT.format(&[("containers", &containers), ("resource", &resource)])
            }
            Problem::AboveContainerMaximum { maximum } => ABOVE_CONTAINER_MAXIMUM.format(&[
                ("containers", &containers),
                ("maximum", &maximum),
                ("resource", &resource),
            ]),
        };
        findings.violations.push(message);
    }
    findings.violations.extend(sharing::problems(view, input.settings));
    let max_per_pod = input.namespace.max_per_pod;
    let dra = view.dra_gpus;
    let counts = view.effective_counts();
    if let Some(dra) = dra
        && counts.is_empty()
        && dra > DraCount::Exactly(max_per_pod)
    {
        findings
            .violations
            .push(CLAIMS_ABOVE_POD_MAXIMUM.format(&[("count", &dra), ("maximum", &max_per_pod)]));
    }
    for (resource, count) in counts {
        let largest = input.cluster.and_then(|c| c.largest_allocatable(resource));
        if let Some(largest) = largest
            && count > largest
        {
            findings.violations.push(ABOVE_LARGEST_NODE.format(&[
                ("count", &count),
                ("resource", &resource),
                ("largest", &largest),
            ]));
        }
        match dra {
            None if count > max_per_pod => findings.violations.push(ABOVE_POD_MAXIMUM.format(&[
                ("count", &count),
                ("resource", &resource),
                ("maximum", &max_per_pod),
            ])),
            Some(dra) if DraCount::Exactly(count).plus(dra) > DraCount::Exactly(max_per_pod) => {
                findings.violations.push(WITH_CLAIMS_ABOVE_POD_MAXIMUM.format(&[
                    ("count", &count),
                    ("resource", &resource),
                    ("claimed", &dra),
                    ("maximum", &max_per_pod),
                ]));
            }
            _ => {}
        }
    }
    findings
}

fn problems_of(resource: &GpuResource<'_>, max_per_container: u64) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut whole = |field: &'static str, count: Option<GpuCount>| match count {
        Some(GpuCount::Invalid(reason)) => {
            problems.push(Problem::InvalidValue { field, reason: reason.to_string() });
            None
        }
        Some(GpuCount::Whole(n)) => Some(n),
        None => None,
    };
    let request = whole("requests", resource.request);
    let limit = whole("limits", resource.limit);
    match (resource.request, resource.limit) {
        (Some(request), None) if !request.is_zero() => problems.push(Problem::RequestWithoutLimit),
        _ => {}
    }
    if let (Some(request), Some(limit)) = (request, limit)
        && request != limit
    {
        problems.push(Problem::RequestNotLimit);
    }
    if limit.or(request).is_some_and(|n| n > max_per_container) {
        problems.push(Problem::AboveContainerMaximum { maximum: max_per_container });
    }
    problems
}

// The CEL side, `gpu-policy-bounded-requests`: the checks above on Pods
// and workload templates, the shares' (`cel_sharing.rs`) included.
//
// A validation has one message, so where the webhook reports several
// violations of one kind (two resources above the container maximum) the
// policy joins their messages with `policy::message::SEPARATOR`. The
// variables only messages read (`...Keys`, `podCounts`) are evaluated
// only for a validation that fails.
//
// Each container's limits and requests are read once per check
// (`cel_text::read_once`): reading `limits(c)` again builds an empty map
// each time the field is absent.
//
// The containers' GPU counts are read once per request (`regularGpus`,
// `initGpus`, `initPeaks`): the pod maximum, checked for each resource
// of each container, then compares names instead of parsing quantities
// again, which keeps a pod of tens of containers within the API server's
// cost limits (see docs/policy.md, "Admission policy cost").

fn variables(settings: &Settings) -> Vec<Variable> {
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
        &format!("{req}.filter(k, {gpu} && {nr} && !(k in {lim}))", nr = cel::nonzero("m.r[k]")),
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
    let implied = cel_sharing::implied_cards(settings, "c");
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
    let peak =
        format!("{} + {}{}", total("[p.init]"), total("p.sidecars"), plus_implied("p.implied"),);
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
    let mut variables = cel_sharing::variables(settings);
    // Every container's values are checked, ephemeral ones too (the API
    // server refuses resources on them; the webhook reads them anyway).
    variables
        .push(Variable::new("checked", &format!("variables.containers + ({})", cel::EPHEMERALS)));
    variables.extend(cel_sharing::bounded_variables(settings));
    variables.extend([
        Variable::new("initNames", "variables.inits.map(c, c.name)"),
        Variable::new("maxPerPod", &cel::max_per_pod(settings)),
        Variable::new("regularGpus", &format!("variables.regulars.map(c, {})", gpus("c"))),
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

fn validations(settings: &Settings) -> Vec<Validation> {
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
        Validation::new("!variables.abovePodMaximum", "'gpu-policy: ' + variables.podCounts"),
    ];
    validations.extend(cel_sharing::bounded_validations(settings));
    validations
}

fn policies(settings: &Settings, _: KubernetesVersion) -> Vec<CelPolicy> {
    vec![CelPolicy::pod_validations(false, variables(settings), validations(settings))]
}

#[cfg(test)]
mod tests;
