//! The GPU sharing schemes (`gpuSharing`) in CEL, as `bounded_requests::sharing` decides them
//! (docs/policy.md, "GPU sharing"). A scheme that is off contributes no variable, and `false`
//! or no text where a piece would test it.
//!
//! Bounds: KAI's `gpu-fraction` is a decimal of at most 32 characters (Rust's and Go's float
//! grammar, no `inf`/`nan`), read with `double()` (rounding as the webhook's parser does); an
//! exponent of 30 or more is decided without `double()` (the value is then 0 or at least 10,
//! and `double()` fails past the largest float). `gpu-memory` and `gpu-fraction-num-devices`
//! are at most 19 digits, not all zeros; a count of 19 significant digits is taken as above
//! `maxPerContainer` unconverted (it may not fit an `int`; exact for any maximum below
//! 10^18) and adds 1 card to the pod (denied either way). Containers are found by name: the
//! API server refuses two containers of one name.

use super::cel::{Validation, Variable};
use super::cel_text::{
    self as cel, Fill, invalid_reason, limits, nonzero, read_once, requests, string, string_list,
    whole,
};
use crate::policy::message::{CONTAINER, Message, SEPARATOR};
use crate::policy::rules::bounded_requests::sharing::{
    FRACTION_CONTAINER, FRACTION_DEVICES, GPU_FRACTION, GPU_MEMORY, KAI_BESIDE_CARDS, KAI_BOTH,
    KAI_CONFIGMAP, KAI_CONTAINER, KAI_DEVICES, KAI_DEVICES_ABOVE_MAXIMUM, KAI_FRACTION, KAI_MEMORY,
    SHARE_ABOVE_PERCENT, SHARE_INVALID, SHARE_NOT_LIMIT, SHARE_WITHOUT_LIMIT,
};
use crate::policy::sharing::VISIBLE_DEVICES as VARIABLE;
use crate::settings::{HAMI_CARDS, HAMI_CORES, HAMI_MEMORY_PERCENTAGE, HAMI_RESOURCES, Settings};

fn kai_on(settings: &Settings) -> bool {
    settings.config().gpu_sharing.kai_scheduler.enabled
}

fn hami_on(settings: &Settings) -> bool {
    settings.config().gpu_sharing.hami.enabled
}

/// `variables.annotations[key]`, as CEL text.
fn annotation(key: &str) -> String {
    format!("variables.annotations[{}]", string(key))
}

/// `variables.annotations[key]` quoted in a message as the webhook quotes it (`{:?}`). `string()`
/// changes nothing at run time; it keeps the value a string for the cost estimate of a request
/// whose annotations lack the key (where the expression is never evaluated).
fn quoted_annotation(key: &str) -> Fill {
    Fill::cel(cel::quoted_name(&format!("string({})", annotation(key))))
}

/// `key in variables.annotations`, as CEL text.
fn annotated(key: &str) -> String {
    format!("{} in variables.annotations", string(key))
}

/// The variables the pieces below read, after `spec`, `inits` and `regulars`: the pod's
/// annotations, whether KAI holds a fraction in it, and the holder's name. None when KAI is off.
pub fn variables(settings: &Settings) -> Vec<Variable> {
    if !kai_on(settings) {
        return Vec::new();
    }
    let scheduler = string(&settings.config().gpu_sharing.kai_scheduler.scheduler_name);
    let named = annotation(FRACTION_CONTAINER);
    vec![
        Variable::new("annotations", cel::ANNOTATIONS),
        Variable::new(
            "kaiFraction",
            &format!(
                "has(variables.spec.schedulerName) && variables.spec.schedulerName == {scheduler} \
                 && ({} || {})",
                annotated(GPU_FRACTION),
                annotated(GPU_MEMORY)
            ),
        ),
        Variable::new(
            "kaiShare",
            &format!(
                "!variables.kaiFraction ? [] \
                 : {} \
                 ? ((variables.inits + variables.regulars).exists(x, x.name == {named}) \
                    ? [{named}] : []) \
                 : (size(variables.regulars) > 0 ? [variables.regulars[0].name] : [])",
                annotated(FRACTION_CONTAINER)
            ),
        ),
    ]
}

/// The container holds the pod's KAI fraction; None when KAI is off.
pub fn holder(settings: &Settings, c: &str) -> Option<String> {
    kai_on(settings).then(|| format!("({c}.name in variables.kaiShare)"))
}

/// The resource name `k` is one of HAMi's shares; None when HAMi is off.
pub fn share_resource(settings: &Settings, k: &str) -> Option<String> {
    hami_on(settings).then(|| format!("{k} in {}", string_list(HAMI_RESOURCES)))
}

/// The container is a GPU container the nvidia runtime serves: it asks for a GPU resource, or holds
/// a share of a card (KAI's fraction, a HAMi share; the policy must declare [`variables`]).
pub fn asks_gpu(settings: &Settings, c: &str) -> String {
    let (lim, req) = (limits(c), requests(c));
    let gpu = match share_resource(settings, "k") {
        Some(share) => format!("({} || {share})", cel::gpu_resource(settings, "k")),
        None => cel::gpu_resource(settings, "k"),
    };
    let holder = match holder(settings, c) {
        Some(holder) => format!(" || {holder}"),
        None => String::new(),
    };
    format!(
        "({lim}.exists(k, {gpu} && {nl}) || {req}.exists(k, {gpu} && {nr}){holder})",
        nl = nonzero(&format!("{lim}[k]")),
        nr = nonzero(&format!("{req}[k]")),
    )
}

/// The container asks for a HAMi share; None when HAMi is off. Its limits
/// and requests are each read once (`q`).
fn hami_asks(settings: &Settings, c: &str) -> Option<String> {
    let share = share_resource(settings, "k")?;
    Some(format!(
        "[{}, {}].exists(q, q.exists(k, {share} && {}))",
        limits(c),
        requests(c),
        nonzero("q[k]"),
    ))
}

/// The container names a card count (`nvidia.com/gpu`, in its limits or
/// requests, whatever the value), when that is a GPU resource.
fn names_cards(settings: &Settings, c: &str) -> String {
    if !settings.is_gpu_resource(HAMI_CARDS) {
        return "false".to_owned();
    }
    let cards = string(HAMI_CARDS);
    format!("({cards} in {} || {cards} in {})", limits(c), requests(c))
}

/// The cards a sharing scheme gives the container without a resource naming them, counted as
/// `nvidia.com/gpu`: the devices of KAI's fraction (`variables.kaiDevices`), else HAMi's implied 1.
/// None when both schemes are off.
pub fn implied_cards(settings: &Settings, c: &str) -> Option<String> {
    let hami = hami_asks(settings, c)
        .map(|asks| format!("({asks} && !{} ? 1 : 0)", names_cards(settings, c)));
    match (holder(settings, c), hami) {
        (None, None) => None,
        (Some(holder), None) => Some(format!("({holder} ? variables.kaiDevices : 0)")),
        (None, Some(hami)) => Some(hami),
        (Some(holder), Some(hami)) => Some(format!("({holder} ? variables.kaiDevices : {hami})")),
    }
}

/// `env` entry `e` is the `NVIDIA_VISIBLE_DEVICES` KAI's webhook wrote.
pub fn kai_entry(e: &str) -> String {
    let variable = string(VARIABLE);
    let prefix = annotation(KAI_CONFIGMAP);
    let reference = format!("{e}.valueFrom.configMapKeyRef");
    format!(
        "(has({e}.name) && {e}.name == {variable} && !has({e}.value) && has({e}.valueFrom) \
         && has({reference}) && has({reference}.key) && {reference}.key == {variable} \
         && {annotated} && {prefix} != '' \
         && [has({reference}.name) ? {reference}.name : ''].exists(n, [n.split('-')].exists(p, \
             p[size(p) - 1].matches('^i?[0-9]+$') && n == {prefix} + '-' + p[size(p) - 1])))",
        annotated = annotated(KAI_CONFIGMAP),
    )
}

/// R1's variable, after [`variables`]: KAI's webhook has written its
/// entry in the holder's `env`. None when KAI is off.
pub fn written_variables(settings: &Settings) -> Vec<Variable> {
    if !kai_on(settings) {
        return Vec::new();
    }
    vec![Variable::new(
        "kaiWritten",
        &format!(
            "(variables.inits + variables.regulars).exists(c, c.name in variables.kaiShare \
             && (has(c.env) ? c.env : []).exists(e, {}))",
            kai_entry("e")
        ),
    )]
}

/// The container holds a share whose scheme's webhook has not acted yet
/// (R1 pins it meanwhile): the KAI holder without KAI's entry in its `env`
/// (`variables.kaiWritten`), a HAMi share without `nvidia.com/gpu`.
pub fn awaited(settings: &Settings, c: &str) -> String {
    let hami = match hami_asks(settings, c) {
        Some(asks) => format!("({asks} && !{})", names_cards(settings, c)),
        None => "false".to_owned(),
    };
    match holder(settings, c) {
        Some(holder) => format!("({holder} ? !variables.kaiWritten : {hami})"),
        None => hami,
    }
}

/// Whether `env` entry `e` of container `c` is kept in a GPU container:
/// KAI's own entry in the KAI holder.
pub fn keeps_entry(settings: &Settings, c: &str, e: &str) -> Option<String> {
    holder(settings, c).map(|holder| format!("({holder} && {})", kai_entry(e)))
}

/// A whole number above zero, digits only, at most 19 of them.
fn positive(v: &str) -> String {
    format!("({v}.matches('^[0-9]{{1,19}}$') && !{v}.matches('^0+$'))")
}

/// A decimal strictly between 0 and 1, as the webhook reads `gpu-fraction`.
fn fraction_below_one(v: &str) -> String {
    format!(
        "(size({v}) <= 32 \
         && {v}.matches('^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?$') \
         && !{v}.matches('[eE][+]?0*([3-9][0-9]|[1-9][0-9][0-9]+)$') \
         && double({v}) > 0.0 && double({v}) < 1.0)"
    )
}

/// R2's variables for the sharing schemes, after `checked` (every
/// container, ephemeral ones included) and [`variables`].
pub fn bounded_variables(settings: &Settings) -> Vec<Variable> {
    let mut out = Vec::new();
    let max = settings.config().max_per_container;
    if kai_on(settings) {
        let devices = annotation(FRACTION_DEVICES);
        out.push(Variable::new(
            "kaiDevices",
            &format!(
                "{} && size({devices}) <= 19 && {devices}.matches('^0*[1-9][0-9]{{0,17}}$') \
                 ? int({devices}) : 1",
                annotated(FRACTION_DEVICES)
            ),
        ));
        let cards = string(HAMI_CARDS);
        let whole_cards = match settings.is_gpu_resource(HAMI_CARDS) {
            true => format!(
                "variables.checked.filter(c, [{lim}].exists(l, {cards} in l && {n}))",
                lim = limits("c"),
                n = nonzero(&format!("l[{cards}]")),
            ),
            false => "[]".to_owned(),
        };
        out.push(Variable::new("kaiWholeCards", &whole_cards));
        let (fraction, memory) = (annotation(GPU_FRACTION), annotation(GPU_MEMORY));
        let asked = format!("({} ? '{GPU_FRACTION}' : '{GPU_MEMORY}')", annotated(GPU_FRACTION));
        let value = |key: &str| [("value", quoted_annotation(key))];
        // The count as the webhook reads it: leading zeros dropped, and 19
        // significant digits (too many for `int()`) as written.
        let count = format!(
            "{devices}.matches('^0*[1-9][0-9]{{0,17}}$') ? string(int({devices})) : {devices}"
        );
        let problems = [
            (
                format!("{} && {}", annotated(GPU_FRACTION), annotated(GPU_MEMORY)),
                cel::message(KAI_BOTH, &[]),
            ),
            (
                "size(variables.kaiWholeCards) > 0".to_owned(),
                cel::message(
                    KAI_BESIDE_CARDS,
                    &[
                        ("annotation", Fill::cel(asked)),
                        (
                            "containers",
                            Fill::cel(cel::quoted_list(CONTAINER, "variables.kaiWholeCards")),
                        ),
                    ],
                ),
            ),
            (
                format!("{} && !{}", annotated(GPU_FRACTION), fraction_below_one(&fraction)),
                cel::message(KAI_FRACTION, &value(GPU_FRACTION)),
            ),
            (
                format!("{} && !{}", annotated(GPU_MEMORY), positive(&memory)),
                cel::message(KAI_MEMORY, &value(GPU_MEMORY)),
            ),
            (
                format!("{} && !{}", annotated(FRACTION_DEVICES), positive(&devices)),
                cel::message(KAI_DEVICES, &value(FRACTION_DEVICES)),
            ),
            (
                format!(
                    "{} && {} && ({devices}.matches('^0*[1-9][0-9]{{0,17}}$') \
                     ? int({devices}) > {max} : true)",
                    annotated(FRACTION_DEVICES),
                    positive(&devices)
                ),
                cel::message(
                    KAI_DEVICES_ABOVE_MAXIMUM,
                    &[
                        ("value", quoted_annotation(FRACTION_DEVICES)),
                        ("count", Fill::cel(count)),
                        ("maximum", Fill::words(max)),
                    ],
                ),
            ),
            (
                format!("{} && size(variables.kaiShare) == 0", annotated(FRACTION_CONTAINER)),
                cel::message(KAI_CONTAINER, &value(FRACTION_CONTAINER)),
            ),
        ];
        let listed: Vec<String> =
            problems.iter().map(|(test, message)| format!("({test} ? [{message}] : [])")).collect();
        out.push(Variable::new(
            "kaiProblems",
            &format!("!variables.kaiFraction ? [] : {}", listed.join(" + ")),
        ));
    }
    if hami_on(settings) {
        out.push(Variable::new(
            "shareProblems",
            &format!(
                "variables.checked.filter(c, {}.exists(m, {}.exists(k, !{})))",
                read_once("c"),
                string_list(HAMI_RESOURCES),
                share_ok("m", "k")
            ),
        ));
        out.extend(share_keys());
        out.push(Variable::new("percentProblems", &percent_problems()));
    }
    out
}

/// For the message of `shareProblems`, the webhook's problems of each container there, as `{'name',
/// 'ks'}` records (see `cel_text::grouped_messages`): the values that are no whole number (`[field,
/// resource, reason]`; a request the same as its limit is judged once, as the limit), the requests
/// without a limit, and those that differ from it (the resource). Read only by the message.
fn share_keys() -> Vec<Variable> {
    let shares = format!("k in {}", string_list(HAMI_RESOURCES));
    let (wl, wr) = (whole("m.l[k]"), whole("m.r[k]"));
    let differ = "quantity(m.r[k]).compareTo(quantity(m.l[k])) != 0";
    // The request reads as its limit does: the same count, or no count for the same reason.
    let same = format!(
        "k in m.l && ({wl} ? {wr} && !({differ}) \
         : !{wr} && {} == {})",
        invalid_reason("m.l[k]"),
        invalid_reason("m.r[k]"),
    );
    let keys = |name: &str, ks: &str| Variable::new(name, &cel::keys("shareProblems", ks));
    vec![
        keys("shareInvalidKeys", &cel::invalid_keys(&shares, &format!("{shares} && !({same})"))),
        keys(
            "shareWithoutLimitKeys",
            &format!("m.r.filter(k, {shares} && !(k in m.l) && {})", nonzero("m.r[k]")),
        ),
        keys(
            "shareNotLimitKeys",
            &format!("m.r.filter(k, {shares} && k in m.l && {wl} && {wr} && {differ})"),
        ),
    ]
}

/// The message of `shareProblems`: the webhook's, one per problem and resource, naming containers.
fn share_message() -> String {
    let resource = || ("resource", Fill::cel("k"));
    let groups = [
        cel::grouped("variables.shareInvalidKeys", SHARE_INVALID, &cel::invalid_slots()),
        cel::grouped("variables.shareWithoutLimitKeys", SHARE_WITHOUT_LIMIT, &[resource()]),
        cel::grouped("variables.shareNotLimitKeys", SHARE_NOT_LIMIT, &[resource()]),
    ];
    format!(
        "{} + [{}].filter(t, t != '').join({})",
        string(Message::PREFIX),
        groups.join(", "),
        string(SEPARATOR)
    )
}

/// The resources and fields of [`percent_problems`], in the webhook's order.
fn percent_fields() -> [(&'static str, &'static str); 4] {
    [
        (HAMI_CORES, "limits"),
        (HAMI_CORES, "requests"),
        (HAMI_MEMORY_PERCENTAGE, "limits"),
        (HAMI_MEMORY_PERCENTAGE, "requests"),
    ]
}

/// For each of [`percent_fields`], the containers whose value there is a percentage above 100, with
/// the value (`{'name', 'v'}`). A request equal to its limit is judged once, as the limit: the API
/// server defaults a missing request to the limit, and the webhook reports it once.
fn percent_problems() -> String {
    let lists: Vec<String> = percent_fields()
        .into_iter()
        .map(|(k, field)| {
            let key = string(k);
            let (own, other) = match field {
                "limits" => ("m.l", "m.r"),
                _ => ("m.r", "m.l"),
            };
            let value = format!("{own}[{key}]");
            let mut above = format!(
                "{key} in {own} && {} && quantity({value}).isGreaterThan(quantity('100'))",
                whole(&value)
            );
            if field == "requests" {
                let limit = format!("{other}[{key}]");
                above = format!(
                    "{above} && !({key} in {other} && {} \
                     && quantity({limit}).compareTo(quantity({value})) == 0)",
                    whole(&limit)
                );
            }
            format!(
                "variables.checked.map(c, {once}.map(m, {above} \
                 ? [{{'name': dyn(c.name), 'v': dyn(quantity({value}).asInteger())}}] : [])[0])\
                 .filter(l, size(l) > 0).map(l, l[0])",
                once = read_once("c"),
            )
        })
        .collect();
    format!("[{}]", lists.join(", "))
}

/// The message of [`percent_problems`]: the webhook's, one per value of a resource's field, the
/// containers of that value named together, in the order they come.
fn percent_message() -> String {
    let groups: Vec<String> = percent_fields()
        .into_iter()
        .enumerate()
        .map(|(i, (k, field))| {
            format!(
                "[variables.percentProblems[{i}]].map(f, \
                 f.filter(r, f.map(x, x.v).indexOf(r.v) == f.map(x, x.name).indexOf(r.name))\
                 .map(r, {message}))[0]",
                message = cel::message(
                    SHARE_ABOVE_PERCENT,
                    &[
                        (
                            "containers",
                            Fill::cel(cel::quoted_list(CONTAINER, "f.filter(x, x.v == r.v)")),
                        ),
                        ("field", Fill::words(field)),
                        ("resource", Fill::words(k)),
                        ("value", Fill::cel("string(r.v)")),
                    ],
                ),
            )
        })
        .collect();
    format!("{} + ({}).join({})", string(Message::PREFIX), groups.join(" + "), string(SEPARATOR))
}

/// HAMi's share `k` is as R2 wants it in the container whose limits and requests `m` holds (`m.l`,
/// `m.r`): each value a whole, non-negative number, and a request (other than zero) only beside an
/// equal limit. Percentages above 100 have messages of their own ([`percent_problems`]).
fn share_ok(m: &str, k: &str) -> String {
    let (l, r) = (format!("{m}.l[{k}]"), format!("{m}.r[{k}]"));
    format!(
        "((!({k} in {m}.l) || {wl}) \
         && (!({k} in {m}.r) || ({wr} && ({k} in {m}.l \
             ? !{wl} || quantity({r}).compareTo(quantity({l})) == 0 \
             : {rz} == 0))))",
        wl = whole(&l),
        wr = whole(&r),
        rz = cel::zero_compared(&r),
    )
}

/// R2's validations for the sharing schemes, over [`bounded_variables`].
pub fn bounded_validations(settings: &Settings) -> Vec<Validation> {
    let mut out = Vec::new();
    if kai_on(settings) {
        out.push(Validation::new(
            "size(variables.kaiProblems) == 0",
            &format!(
                "{} + variables.kaiProblems.join({})",
                string(Message::PREFIX),
                string(SEPARATOR)
            ),
        ));
    }
    if hami_on(settings) {
        out.push(Validation::new("size(variables.shareProblems) == 0", &share_message()));
        out.push(Validation::new(
            "variables.percentProblems.all(l, size(l) == 0)",
            &percent_message(),
        ));
    }
    out
}
