//! CEL text shared by the generated policies: literals, and the pod spec pieces every rule reads
//! (which kind holds it where, its containers, their GPU resources as quantities, the allowlist).
//!
//! Everything here is a string of CEL, built from the settings at generation: the settings are
//! baked into the expressions, so a policy is one self-contained object (see `mod.rs` for why).

use crate::policy::message::{
    CONTAINER, LIST_SEPARATOR, Message, MessageTemplate, Noun, Piece, SEPARATOR,
};
use crate::policy::quantity::QuantityError;
use crate::settings::{AllowlistEntry, HAMI_RESOURCES, Settings};

/// A CEL string literal: single-quoted, with `\` and `'` escaped.
pub fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A CEL list of string literals.
pub fn string_list<'s>(items: impl IntoIterator<Item = &'s str>) -> String {
    let items: Vec<String> = items.into_iter().map(string).collect();
    format!("[{}]", items.join(", "))
}

/// The pod spec of each kind the webhook validates: a Pod's own, a workload's template (a CronJob's
/// one level deeper, a PodTemplate's at `template`).
pub const POD_SPEC: &str = "object.kind == 'Pod' ? object.spec \
     : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec \
     : object.kind == 'PodTemplate' ? object.template.spec \
     : object.spec.template.spec";

/// The match condition that keeps objects without a pod spec (a workload
/// without a template) out, as the webhook leaves them alone.
pub const HAS_SPEC: &str = "object.kind == 'Pod' ? has(object.spec) \
     : object.kind == 'CronJob' ? has(object.spec) && has(object.spec.jobTemplate) \
         && has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) \
         && has(object.spec.jobTemplate.spec.template.spec) \
     : object.kind == 'PodTemplate' ? has(object.template) && has(object.template.spec) \
     : has(object.spec) && has(object.spec.template) && has(object.spec.template.spec)";

/// The annotations of the pod or of the template.
pub const ANNOTATIONS: &str = "object.kind == 'Pod' \
     ? (has(object.metadata) && has(object.metadata.annotations) ? object.metadata.annotations : {}) \
     : object.kind == 'CronJob' \
     ? (has(object.spec.jobTemplate.spec.template.metadata) \
         && has(object.spec.jobTemplate.spec.template.metadata.annotations) \
         ? object.spec.jobTemplate.spec.template.metadata.annotations : {}) \
     : object.kind == 'PodTemplate' \
     ? (has(object.template.metadata) && has(object.template.metadata.annotations) \
         ? object.template.metadata.annotations : {}) \
     : (has(object.spec.template.metadata) && has(object.spec.template.metadata.annotations) \
         ? object.spec.template.metadata.annotations : {})";

pub const INITS: &str = "has(variables.spec.initContainers) ? variables.spec.initContainers : []";
pub const REGULARS: &str = "has(variables.spec.containers) ? variables.spec.containers : []";
/// Init (sidecars included) and regular containers: the ones that can
/// hold a GPU. Ephemeral containers never can.
pub const CONTAINERS: &str = "variables.inits + variables.regulars";
/// The request is an update of `pods/ephemeralcontainers`. The API server leaves `subResource` out
/// of `request` when there is none (`omitempty` in the AdmissionRequest it converts): tested first.
pub const EPHEMERAL_UPDATE: &str =
    "has(request.subResource) && request.subResource == 'ephemeralcontainers'";
pub const EPHEMERALS: &str =
    "has(variables.spec.ephemeralContainers) ? variables.spec.ephemeralContainers : []";
/// The names of the ephemeral containers the pod had before the update.
pub const OLD_EPHEMERAL_NAMES: &str = "oldObject != null && has(oldObject.spec) \
     && has(oldObject.spec.ephemeralContainers) \
     ? oldObject.spec.ephemeralContainers.map(e, e.name) : []";
/// The ephemeral containers in scope: on an update of `pods/ephemeralcontainers`, those it adds.
pub const NEW_EPHEMERALS: &str = "variables.ephemeralUpdate \
     ? variables.ephemerals.filter(e, !(e.name in variables.oldEphemeralNames)) \
     : variables.ephemerals";

/// An init container that keeps running beside the others.
pub fn sidecar(c: &str) -> String {
    format!("(has({c}.restartPolicy) && {c}.restartPolicy == 'Always')")
}

/// The container's `resources.limits`, or an empty map.
pub fn limits(c: &str) -> String {
    format!("(has({c}.resources) && has({c}.resources.limits) ? {c}.resources.limits : {{}})")
}

/// The container's `resources.requests`, or an empty map.
pub fn requests(c: &str) -> String {
    format!("(has({c}.resources) && has({c}.resources.requests) ? {c}.resources.requests : {{}})")
}

/// The container names a DRA claim in `resources.claims`.
pub fn uses_claims(c: &str) -> String {
    format!("(has({c}.resources) && has({c}.resources.claims) && size({c}.resources.claims) > 0)")
}

/// Whether the resource name `k` is a GPU resource: each configured
/// pattern, `*` matching any run of characters. HAMi's share resources
/// never are while HAMi is on, even when a pattern matches them.
pub fn gpu_resource(settings: &Settings, k: &str) -> String {
    let shares: Vec<&str> =
        HAMI_RESOURCES.into_iter().filter(|name| settings.is_share_resource(name)).collect();
    let tests: Vec<String> = settings
        .config()
        .gpu_resources
        .iter()
        .enumerate()
        .filter_map(|(index, pattern)| {
            let excluded: Vec<&str> = shares
                .iter()
                .copied()
                .filter(|name| settings.gpu_resource_pattern_matches(index, name))
                .collect();
            match (pattern.contains('*'), excluded.is_empty()) {
                (false, true) => Some(format!("{k} == {}", string(pattern))),
                // The pattern is a share resource's name: it matches nothing.
                (false, false) => None,
                (true, _) => {
                    let regex: Vec<String> = pattern.split('*').map(regex_literal).collect();
                    let test =
                        format!("{k}.matches({})", string(&format!("^{}$", regex.join(".*"))));
                    Some(match excluded.is_empty() {
                        true => test,
                        false => format!("({test} && !({k} in {}))", string_list(excluded)),
                    })
                }
            }
        })
        .collect();
    match tests.len() {
        0 => "false".to_owned(),
        _ => format!("({})", tests.join(" || ")),
    }
}

/// RE2 text matching `text` literally; special characters go in a
/// character class, which needs no backslash inside a CEL string.
fn regex_literal(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '.' | '+' | '?' | '(' | ')' | '|' | '{' | '}' | '$' | '^' | '*' => format!("[{c}]"),
            '[' => "[\\[]".to_owned(),
            ']' => "[\\]]".to_owned(),
            '\\' => "[\\\\]".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

/// A quantity usable as a GPU count: whole and not negative.
pub fn whole(v: &str) -> String {
    format!("(isQuantity({v}) && quantity({v}).isInteger() && quantity({v}).asInteger() >= 0)")
}

/// A value that asks for a device: anything but a zero quantity (an
/// unreadable value counts as asking, as in the webhook).
///
/// Not `sign()`: the API server declares it as a global function (`sign(<Quantity>)`,
/// `k8s.io/apiserver/pkg/cel/library/quantity.go`) although its documentation shows a method, and
/// refuses `quantity(v).sign()` when the policy is created; a comparison with zero reads the same
/// everywhere.
pub fn nonzero(v: &str) -> String {
    format!("(!isQuantity({v}) || {} != 0)", zero_compared(v))
}

/// `quantity(v)` compared with zero: -1, 0 or 1, as `sign` would give.
pub fn zero_compared(v: &str) -> String {
    format!("quantity({v}).compareTo(quantity('0'))")
}

/// Why the quantity `v` is no GPU count, as [`QuantityError`] says it (`v` is known not whole).
pub fn invalid_reason(v: &str) -> String {
    let says = |error: QuantityError| string(&error.to_string());
    format!(
        "(!isQuantity({v}) ? {malformed} \
         : {} < 0 ? {negative} \
         : quantity({v}).isGreaterThan(quantity('18446744073709551615')) ? {large} \
         : {fractional})",
        zero_compared(v),
        malformed = says(QuantityError::Malformed),
        negative = says(QuantityError::Negative),
        large = says(QuantityError::TooLarge),
        fractional = says(QuantityError::Fractional),
    )
}

/// The container's limits and requests, read once: a one-element list of `{'l': limits, 'r':
/// requests}` for `exists` or `map` to bind (`m.l`, `m.r`). Each read of [`limits`] builds an empty
/// map when the field is absent, which costs more than reading the bound value again.
pub fn read_once(c: &str) -> String {
    format!("[{{'l': {}, 'r': {}}}]", limits(c), requests(c))
}

/// The `{'name', 'ks'}` records ([`each_first`]) of the containers of `variables.{list}`: `ks` of
/// each one's limits and requests, read once ([`read_once`]: `m.l`, `m.r`).
pub fn keys(list: &str, ks: &str) -> String {
    format!(
        "variables.{list}.map(c, {{'name': dyn(c.name), 'ks': dyn({}.map(m, {ks})[0])}})",
        read_once("c")
    )
}

/// For [`keys`]: `[field, resource, reason]` of each value (of a resource `k` that is `is`) no
/// whole count; of a request, only where `request` holds too. [`invalid_slots`] read them.
pub fn invalid_keys(is: &str, request: &str) -> String {
    format!(
        "m.l.filter(k, {is} && !{wl}).map(k, ['limits', string(k), {rl}]) \
         + m.r.filter(k, {request} && !{wr}).map(k, ['requests', string(k), {rr}])",
        wl = whole("m.l[k]"),
        wr = whole("m.r[k]"),
        rl = invalid_reason("m.l[k]"),
        rr = invalid_reason("m.r[k]"),
    )
}

/// The slots of an invalid value's message, of an [`invalid_keys`] string.
pub fn invalid_slots() -> [(&'static str, Fill); 3] {
    [("field", Fill::cel("k[0]")), ("resource", Fill::cel("k[1]")), ("reason", Fill::cel("k[2]"))]
}

/// The count the device plugin allocates for resource `k` of the limits `lim` and requests `req`:
/// the limit, else the request, when whole; else 0.
pub fn count(lim: &str, req: &str, k: &str) -> String {
    format!(
        "({k} in {lim} ? ({wl} ? quantity({lim}[{k}]).asInteger() : 0) \
         : ({k} in {req} && {wr} ? quantity({req}[{k}]).asInteger() : 0))",
        wl = whole(&format!("{lim}[{k}]")),
        wr = whole(&format!("{req}[{k}]")),
    )
}

/// The `[Deny]`-worthy allowlist test: a Pod's controller owner reference,
/// or a workload itself, names an entry, in the request's namespace.
pub fn allowlisted(settings: &Settings) -> String {
    let entries = &settings.config().allowlist;
    let test = |kind: &str, name: &str| -> String {
        let tests: Vec<String> = entries.iter().map(|e| entry_test(e, kind, name)).collect();
        match tests.len() {
            0 => "false".to_owned(),
            _ => tests.join(" || "),
        }
    };
    format!(
        "object.kind == 'Pod' \
         ? (size(variables.controller) > 0 && ({owner})) \
         : ({workload})",
        owner = test("variables.controller[0].kind", "variables.controller[0].name"),
        workload = test(
            "object.kind",
            "(has(object.metadata) && has(object.metadata.name) ? object.metadata.name : '')"
        ),
    )
}

/// A Pod's owner references with `controller: true`.
pub const CONTROLLER: &str = "object.kind == 'Pod' && has(object.metadata) && has(object.metadata.ownerReferences) \
     ? object.metadata.ownerReferences.filter(r, has(r.controller) && r.controller == true) \
     : []";

fn entry_test(entry: &AllowlistEntry, kind: &str, name: &str) -> String {
    let names = match &entry.name_prefix {
        Some(prefix) => format!(
            "{name}.startsWith({p}) && size({name}) > {len}",
            p = string(prefix),
            len = prefix.chars().count()
        ),
        None => format!("{name} == {}", string(&entry.name)),
    };
    format!(
        "(request.namespace == {ns} && {kind} == {k} && {names})",
        ns = string(&entry.namespace),
        k = string(&entry.kind)
    )
}

/// The namespace's GPUs-per-pod maximum: the cluster's, lowered by the namespace annotation when
/// that is a whole number no higher (as the webhook reads it; anything else is ignored).
pub fn max_per_pod(settings: &Settings) -> String {
    let max = settings.config().max_per_pod;
    let annotation = string(crate::settings::MAX_GPUS_PER_POD_ANNOTATION);
    format!(
        "namespaceObject != null && has(namespaceObject.metadata.annotations) \
         && {annotation} in namespaceObject.metadata.annotations \
         && namespaceObject.metadata.annotations[{annotation}].trim().matches('^[+]?[0-9]{{1,18}}$') \
         && int(namespaceObject.metadata.annotations[{annotation}].trim()) <= {max} \
         ? int(namespaceObject.metadata.annotations[{annotation}].trim()) : {max}"
    )
}

/// One text per string of the lists `ks` of the records `recs` (a CEL list of `{'name', 'ks'}`, the
/// names unique): `text` of each string `k` the first time a record holds it, in the records' order
/// (one record's strings in the order its map's keys come), joined with `; `. `text` may read `rs`,
/// all the records. Lists cannot be flattened in the CEL of Kubernetes 1.30, so the texts are
/// joined at each level.
pub fn each_first(recs: &str, text: &str) -> String {
    format!(
        "[{recs}].map(rs, [rs.map(y, y.name)].map(ns, rs.map(r, r.ks.filter(k, \
         !rs.exists(x, ns.indexOf(x.name) < ns.indexOf(r.name) && k in x.ks))\
         .map(k, {text}).filter(t, t != '').join({sep})).filter(t, t != '').join({sep}))[0])[0]",
        sep = string(SEPARATOR)
    )
}

/// What fills a slot of a [`MessageTemplate`] in CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fill {
    /// A CEL expression of type string.
    Cel(String),
    /// Words known when the policy is generated (a setting).
    Words(String),
}

impl Fill {
    pub fn cel(expression: impl Into<String>) -> Self {
        Fill::Cel(expression.into())
    }

    pub fn words(words: impl ToString) -> Self {
        Fill::Words(words.to_string())
    }
}

/// The CEL string expression of `template`: its words as string literals,
/// each slot filled as `slots` says, concatenated with `+`. A slot
/// `slots` does not fill stays in the words (`{name}`), for a test to see.
pub fn message(template: MessageTemplate, slots: &[(&str, Fill)]) -> String {
    message_after("", template, slots)
}

/// [`message`] after the `gpu-policy: ` prefix: a whole `messageExpression`.
pub fn full_message(template: MessageTemplate, slots: &[(&str, Fill)]) -> String {
    message_after(Message::PREFIX, template, slots)
}

fn message_after(prefix: &str, template: MessageTemplate, slots: &[(&str, Fill)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut words = prefix.to_owned();
    for piece in template.pieces() {
        let fill = match piece {
            Piece::Words(text) => {
                words.push_str(text);
                continue;
            }
            Piece::Slot(name) => slots.iter().find(|(slot, _)| *slot == name),
        };
        match fill {
            Some((_, Fill::Words(text))) => words.push_str(text),
            Some((_, Fill::Cel(expression))) => {
                if !words.is_empty() {
                    parts.push(string(&words));
                    words.clear();
                }
                parts.push(operand(expression));
            }
            None => {
                if let Piece::Slot(name) = piece {
                    words.push_str(&format!("{{{name}}}"));
                }
            }
        }
    }
    if !words.is_empty() || parts.is_empty() {
        parts.push(string(&words));
    }
    parts.join(" + ")
}

/// An expression as an operand of `+`: parenthesised unless it is one name, call or index.
fn operand(expression: &str) -> String {
    let simple = !expression.contains([' ', '?', '+', '|', '&', '=', '<', '>', '!']);
    match simple {
        true => expression.to_owned(),
        false => format!("({expression})"),
    }
}

/// The webhook's messages of one problem: one per string of the records' `ks` (see [`each_first`]),
/// naming the records (containers) that hold it in the slot `{containers}`; `slots` fill the
/// others, reading the string as `k`. After the prefix: a whole `messageExpression`.
pub fn grouped_messages(recs: &str, template: MessageTemplate, slots: &[(&str, Fill)]) -> String {
    format!("{} + {}", string(Message::PREFIX), grouped(recs, template, slots))
}

/// [`grouped_messages`] without the prefix: `''` when the records hold nothing.
pub fn grouped(recs: &str, template: MessageTemplate, slots: &[(&str, Fill)]) -> String {
    let mut all =
        vec![("containers", Fill::cel(quoted_list(CONTAINER, "rs.filter(x, k in x.ks)")))];
    all.extend(slots.iter().cloned());
    each_first(recs, &message(template, &all))
}

/// `'"a", "b"'`: the names of a list of containers, quoted, for messages.
pub fn names(list: &str) -> String {
    format!("{list}.map(c, '\"' + c.name + '\"').join({})", string(LIST_SEPARATOR))
}

/// [`Noun::list`] of a list of records with a `name` (containers,
/// volumes): `container "a"` or `containers "a", "b"`.
pub fn quoted_list(noun: Noun, list: &str) -> String {
    format!(
        "(size({list}) == 1 ? {} : {}) + {}",
        string(&format!("{} ", noun.one)),
        string(&format!("{} ", noun.many)),
        names(list)
    )
}

/// A string quoted as the webhook's messages quote it (Rust's `{:?}`), without escapes: the same
/// for every name the API server accepts (DNS labels and subdomains) and every value without `"`,
/// `\` or control characters, which Rust escapes. Escaping them here would take `split` and `join`
/// over values as long as an annotation may be: measured, that multiplied the worst case of
/// `kaiProblems` by more than 1,000.
pub fn quoted_name(name: &str) -> String {
    format!("'\"' + {name} + '\"'")
}

#[cfg(test)]
mod tests;
