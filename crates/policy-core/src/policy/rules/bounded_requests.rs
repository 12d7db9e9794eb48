//! R2 `bounded-requests` (validating): every GPU request is a whole number of devices that
//! some node can actually give (docs/policy.md, "R2 bounded-requests").
//!
//! Reads: `resources.requests` and `resources.limits` of init, sidecar and regular
//! containers, for the GPU resource names; the GPU count of the pod's resolved DRA claims;
//! the namespace's `maxPerPod` (cluster config, lowered by the namespace annotation).
//!
//! Denies, naming container and resource: a GPU request without the same resource in
//! `limits`, or different from the limit; a value that is not a whole, non-negative
//! quantity; a container above `maxPerContainer`; an effective pod count (Kubernetes'
//! formula, sidecars included) above `maxPerPod`, each resolved claim the containers use
//! added once (a claim is allocated for the pod's whole life, whichever container uses it);
//! with a cluster, a count above the biggest node's `status.allocatable` (never schedulable).
//!
//! Sharing (`sharing.rs`): a KAI fraction counts as `gpu-fraction-num-devices` cards
//! (default 1), its annotations checked as KAI reads them; a HAMi share without
//! `nvidia.com/gpu` counts as 1 card, its values checked as shares, never as cards.
//!
//! Allows: limits only (Kubernetes sets the request to the limit for extended resources),
//! request == limit, a zero limit. Applies to allowlisted pods too.

mod claim_pod_total;
pub mod claim_requests;
mod grouped;
pub mod sharing;

use grouped::{Problem, grouped};

use super::rule::{ApiServer, Check, Coverage, Entry, Findings, Rule, RuleInput, Severity};
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::container::GpuResource;
use crate::policy::dra::claims::DraCount;
use crate::policy::message::MessageTemplate;
use crate::policy::quantity::GpuCount;
use crate::policy::rules::cel::{CelPolicy, Validation, Variable};
use crate::policy::rules::cel_sharing;
use crate::policy::rules::cel_text::{self as cel, Fill, count, read_once, sidecar, whole};
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

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    let mut findings = Findings::default();
    if !input.scope.is_whole() {
        return findings;
    }
    let view = input.view;
    let max_per_container = input.settings.config().max_per_container;
    findings.violations = grouped(
        view,
        |c| &c.gpu_resources,
        &|resource| problems_of(resource, max_per_container),
        [INVALID_VALUE, REQUEST_WITHOUT_LIMIT, REQUEST_NOT_LIMIT, ABOVE_CONTAINER_MAXIMUM],
    );
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
            problems.push(Problem::Invalid { field, reason: reason.to_string() });
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
        problems.push(Problem::Above { field: "", slot: "maximum", value: max_per_container });
    }
    problems
}

// The CEL side, `gpu-policy-bounded-requests`: the checks above on Pods and workload
// templates, the shares' (`cel_sharing.rs`) included.
//
// A validation has one message, so several violations of one kind are joined with
// `policy::message::SEPARATOR`; the variables only messages read (`...Keys`, `podCounts`)
// are evaluated only when a validation fails. Limits and requests are read once per check
// (`cel_text::read_once`: `limits(c)` builds an empty map each time the field is absent),
// and GPU counts once per request (`regularGpus`, `initGpus`, `initPeaks`), so the pod
// maximum compares names instead of parsing again: that keeps a pod of tens of containers
// within the API server's cost limits (docs/policy.md, "Admission policy cost").

fn variables(settings: &Settings) -> Vec<Variable> {
    let gpu = cel::gpu_resource(settings, "k");
    let max = settings.config().max_per_container;
    // Each container's limits and requests are read once (`m.l`, `m.r`).
    let once = read_once("c");
    let (lim, req) = ("m.l", "m.r");
    let (wl, wr) = (whole("m.l[k]"), whole("m.r[k]"));
    // Each problem: the containers that have it (the tests of their limits and requests), and for
    // its message, read only there, each one's resources it has it for (for values, `[field,
    // resource, reason]`), as the webhook names them: `{'name', 'ks'}`, in `<problem>Keys`.
    let nr = cel::nonzero("m.r[k]");
    let differ = format!("quantity({req}[k]).compareTo(quantity({lim}[k])) != 0");
    let above = |side: &str| format!("quantity({side}[k]).asInteger() > {max}");
    let problems = [
        (
            "invalidValue",
            vec![(lim, format!("{gpu} && !{wl}")), (req, format!("{gpu} && !{wr}"))],
            Some(cel::invalid_keys(&gpu, &gpu)),
        ),
        ("requestWithoutLimit", vec![(req, format!("{gpu} && {nr} && !(k in {lim})"))], None),
        (
            "requestNotLimit",
            vec![(req, format!("{gpu} && k in {lim} && {wr} && {wl} && {differ}"))],
            None,
        ),
        (
            "aboveContainerMaximum",
            vec![
                (lim, format!("{gpu} && {wl} && {}", above(lim))),
                (req, format!("{gpu} && !(k in {lim} && {wl}) && {wr} && {}", above(req))),
            ],
            None,
        ),
    ];
    let (mut containers, mut keys) = (Vec::new(), Vec::new());
    for (name, tests, ks) in problems {
        let joined = |each: &str, by: &str| {
            let parts: Vec<String> =
                tests.iter().map(|(side, test)| format!("{side}.{each}(k, {test})")).collect();
            parts.join(by)
        };
        let any = joined("exists", " || ");
        containers.push(Variable::new(
            name,
            &format!("variables.checked.filter(c, {once}.exists(m, {any}))"),
        ));
        let ks = ks.unwrap_or_else(|| joined("filter", " + "));
        keys.push(Variable::new(&format!("{name}Keys"), &cel::keys(name, &ks)));
    }
    // Each container's GPU resources, once per request: the names in its limits, then those only in
    // its requests, each with the count the device plugin allocates. The pod checks below read
    // these instead of the containers' quantities.
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
    // Kubernetes' effective count of resource k: the steady state (regular containers and sidecars)
    // or an init container with the sidecars started before it, whichever is higher.
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
    ]);
    variables.extend(containers.into_iter().chain(keys));
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
    let resource = || ("resource", Fill::cel("k"));
    let problems = [
        ("invalidValue", INVALID_VALUE, cel::invalid_slots().to_vec()),
        ("requestWithoutLimit", REQUEST_WITHOUT_LIMIT, vec![resource()]),
        ("requestNotLimit", REQUEST_NOT_LIMIT, vec![resource()]),
        (
            "aboveContainerMaximum",
            ABOVE_CONTAINER_MAXIMUM,
            vec![("maximum", Fill::words(max)), resource()],
        ),
    ];
    let mut validations: Vec<Validation> = problems
        .into_iter()
        .map(|(list, template, slots)| {
            Validation::new(
                &format!("size(variables.{list}) == 0"),
                &cel::grouped_messages(&format!("variables.{list}Keys"), template, &slots),
            )
        })
        .collect();
    validations.push(Validation::new(
        "!variables.abovePodMaximum",
        "'gpu-policy: ' + variables.podCounts",
    ));
    validations.extend(cel_sharing::bounded_validations(settings));
    validations
}

fn policies(settings: &Settings, _: KubernetesVersion) -> Vec<CelPolicy> {
    vec![CelPolicy::pod_validations(false, variables(settings), validations(settings))]
}

#[cfg(test)]
mod tests;
