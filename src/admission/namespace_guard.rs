//! The namespace guard: the `gpu-policy.io/mode` label is itself policy.
//! Reads the label on the old and new Namespace, the requesting user and
//! groups, the configured `policyAdmins`. Denies loosening the mode unless
//! the requester is a policy admin, and a value that is not a mode (it would
//! silently switch the policy off); warns of what already runs in a
//! namespace opted in ([`OptInFindings`], [`Disclosure`]). docs/policy.md,
//! "Namespace guard", has the whole of it.

use std::borrow::Cow;

use crate::document::Json;

use super::answer::{Mode, namespace_settings, warning};
use crate::policy::dra::claims::ClaimKind;
use crate::policy::{ClusterFacts, Evaluator, Message, RuleId, Scope, Subject};
use crate::settings::{MODE_LABEL, Settings};

/// Higher is stricter; an absent or unknown value admits everything.
fn strictness(mode: Option<Mode>) -> u8 {
    match mode {
        Some(Mode::Enforce) => 3,
        Some(Mode::Warn) => 2,
        Some(Mode::Audit) => 1,
        None => 0,
    }
}

fn label(namespace: Option<Json<'_>>) -> Option<&str> {
    namespace?.get("metadata")?.get("labels")?.get(MODE_LABEL)?.as_str()
}

fn describe(value: Option<&str>) -> String {
    value.map_or_else(|| "absent".to_owned(), |v| format!("{v:?}"))
}

#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub username: &'a str,
    pub groups: &'a [Cow<'a, str>],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelRefusal {
    #[error("label {MODE_LABEL}={value:?} is not a mode; use enforce, warn or audit")]
    NotAMode { value: String },
    #[error(
        "changing {MODE_LABEL} from {before} to {after} loosens GPU policy; only members of \
         {admins} may"
    )]
    Loosened { before: String, after: String, admins: String },
}

pub fn check(
    old: Option<Json<'_>>,
    new: Option<Json<'_>>,
    requester: Requester<'_>,
    policy_admins: &[String],
) -> Result<(), LabelRefusal> {
    let Some(new) = new else {
        // DELETE: removing the namespace removes its pods too.
        return Ok(());
    };
    let (before, after) = (label(old), label(Some(new)));
    let after_mode = match after {
        None => None,
        Some(value) => match value.parse::<Mode>() {
            Ok(mode) => Some(mode),
            Err(_) => {
                let value = value.to_owned();
                return Err(LabelRefusal::NotAMode { value });
            }
        },
    };
    let before_mode = before.and_then(|value| value.parse::<Mode>().ok());
    if strictness(after_mode) >= strictness(before_mode) {
        return Ok(());
    }
    let is_admin = policy_admins.iter().any(|admin| {
        admin == requester.username || requester.groups.iter().any(|g| **g == **admin)
    });
    if is_admin {
        return Ok(());
    }
    Err(LabelRefusal::Loosened {
        before: describe(before),
        after: describe(after),
        admins: policy_admins.join(", "),
    })
}

/// The mode a namespace moves to when the label change tightens it.
pub fn tightened_to(old: Option<Json<'_>>, new: Option<Json<'_>>) -> Option<Mode> {
    let after = label(new)?.parse::<Mode>().ok()?;
    let before = label(old).and_then(|value| value.parse::<Mode>().ok());
    (strictness(Some(after)) > strictness(before)).then_some(after)
}

/// How many objects are shown by name before "and N more".
const NAMED: usize = 5;

/// Whether the opt-in warnings may name the namespace's objects: anyone
/// may forge a Namespace review naming any namespace, and only when every
/// caller presents a client certificate does the answer surely go to the
/// API server (which shows it to whoever may change the label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disclosure {
    Names,
    /// Counts, and the command that names them with its runner's rights.
    Counts,
}

#[derive(Debug, Default)]
struct Tally {
    count: usize,
    names: Vec<String>,
}

impl Tally {
    fn add(&mut self, name: &str) {
        self.count = self.count.saturating_add(1);
        if self.names.len() < NAMED {
            self.names.push(name.to_owned());
        }
    }

    fn named(&self) -> String {
        let shown = self.names.join(", ");
        match self.count.saturating_sub(self.names.len()) {
            0 => shown,
            more => format!("{shown} and {more} more"),
        }
    }
}

/// What a look at a namespace being opted in (or tightened) found, like
/// Pod Security Admission's warnings: the pods and claims that would be
/// denied, and the pods that would lose the cards they see today (GPU
/// infrastructure that needs an allowlist entry first). Fed one object at
/// a time; holds counts and a few names.
#[derive(Debug, Default)]
pub struct OptInFindings {
    violating_pods: Tally,
    losing_cards: Tally,
    violating_claims: Tally,
    /// How many of each kind were read, when not all.
    read_only: Option<usize>,
}

impl OptInFindings {
    pub fn add_pod(
        &mut self,
        pod: Json<'_>,
        namespace: &str,
        settings: &Settings,
        cluster: Option<&dyn ClusterFacts>,
    ) {
        let namespace_settings = namespace_settings(settings, cluster, Some(namespace));
        let evaluator = Evaluator::of_cluster(settings, &namespace_settings, cluster, None);
        let name = pod.pointer("/metadata/name").and_then(Json::as_str).unwrap_or("(unnamed)");
        let evaluated = evaluator.evaluate(&Subject::pod(pod, namespace, Scope::Whole));
        let Ok(evaluation) = evaluated else {
            return;
        };
        if !evaluation.violations.is_empty() {
            self.violating_pods.add(name);
        }
        // Pins and replacements cut a container off; removals from GPU
        // containers do not (the device plugin still gives them cards).
        let pinned = evaluation.changes.iter().any(|change| {
            change.rule == RuleId::VisibleDevices && !change.summary.starts_with("remove")
        });
        if pinned && sees_cards_today(pod, settings) {
            self.losing_cards.add(name);
        }
    }

    /// Counts a claim or claim template the policy would deny.
    pub fn add_claim(
        &mut self,
        kind: ClaimKind,
        claim: Json<'_>,
        namespace: &str,
        settings: &Settings,
        cluster: Option<&dyn ClusterFacts>,
    ) {
        let namespace_settings = namespace_settings(settings, cluster, Some(namespace));
        let evaluator = Evaluator::of_cluster(settings, &namespace_settings, cluster, None);
        let name = claim.pointer("/metadata/name").and_then(Json::as_str).unwrap_or("(unnamed)");
        let denied = match evaluator.evaluate(&Subject::claim(claim, kind, namespace)) {
            Ok(evaluation) => !evaluation.violations.is_empty(),
            Err(_) => true,
        };
        if denied {
            self.violating_claims.add(&format!("{}/{name}", kind.as_str()));
        }
    }

    pub fn read_only(&mut self, read: usize) {
        self.read_only = Some(read);
    }

    pub fn warnings(&self, mode: Mode, namespace: &str, disclosure: Disclosure) -> Vec<String> {
        let mut warnings = Vec::new();
        let audit = format!("`gpu-policy audit -n {namespace}` names them");
        let mut say = |text: std::fmt::Arguments<'_>| {
            warnings.push(warning(Message::new(text).as_str()));
        };
        let violating = |tally: &Tally, what: &str| {
            let which = match disclosure {
                Disclosure::Names => format!(": {}", tally.named()),
                Disclosure::Counts => format!("; {audit}"),
            };
            let count = tally.count;
            format!("{count} existing {what}(s) in {namespace} violate {mode} mode{which}")
        };
        if self.violating_pods.count > 0 {
            say(format_args!("{}", violating(&self.violating_pods, "pod")));
        }
        let losing = &self.losing_cards;
        if losing.count > 0 {
            match disclosure {
                Disclosure::Names => say(format_args!(
                    "new pods like {} would lose their GPUs (void pin); allowlist them first",
                    losing.named()
                )),
                Disclosure::Counts => say(format_args!(
                    "{} pod(s) in {namespace} would lose their GPUs (void pin); allowlist them \
                     first; see `gpu-policy audit -n {namespace}`",
                    losing.count
                )),
            }
        }
        if self.violating_claims.count > 0 {
            say(format_args!("{}", violating(&self.violating_claims, "claim")));
        }
        if let Some(read) = self.read_only {
            say(format_args!(
                "only the first {read} objects of each kind in {namespace} were checked; \
                 run `gpu-policy audit -n {namespace}`"
            ));
        }
        warnings
    }
}

/// The warning when the objects in `namespace` were not looked at.
pub fn look_skipped(namespace: &str) -> String {
    warning(
        Message::new(format_args!(
            "the pods and claims in {namespace} were not checked (too many namespace reviews); \
             run `gpu-policy audit -n {namespace}`"
        ))
        .as_str(),
    )
}

/// A pod that requests no GPU but evidently uses one today: it names a GPU
/// runtime class, writes `NVIDIA_VISIBLE_DEVICES` other than the pin, or
/// runs an NVIDIA image (the exporters, GFD, the device plugin).
fn sees_cards_today(pod: Json<'_>, settings: &Settings) -> bool {
    let config = settings.config();
    let spec = pod.get("spec");
    let runtime_class = spec.and_then(|spec| spec.get("runtimeClassName")).and_then(Json::as_str);
    if runtime_class.is_some_and(|class| config.gpu_runtime_classes.iter().any(|c| c == class)) {
        return true;
    }
    ["initContainers", "containers"]
        .iter()
        .filter_map(|field| spec?.get(field)?.as_array())
        .flat_map(|containers| containers.iter())
        .any(|container| {
            let image = container.get("image").and_then(Json::as_str).unwrap_or("");
            let nvidia_image = image.starts_with("nvcr.io/nvidia/")
                || image.contains("nvidia/")
                || image.contains("nvidia_");
            let writes_devices = container
                .get("env")
                .and_then(Json::as_array)
                .into_iter()
                .flat_map(|env| env.iter())
                .any(|entry| {
                    entry.get("name").and_then(Json::as_str) == Some("NVIDIA_VISIBLE_DEVICES")
                        && entry.get("value").and_then(Json::as_str)
                            != Some(config.visible_devices_pin.as_str())
                });
            nvidia_image || writes_devices
        })
}

#[cfg(test)]
mod tests;
