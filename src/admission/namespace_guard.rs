//! The namespace guard: the `gpu-policy.io/mode` label is itself policy.
//!
//! Reads: the label on the old and new Namespace; the requesting user and
//! groups; the configured `policyAdmins`.
//!
//! Denies loosening the mode (enforce -> warn -> audit -> absent) unless the
//! user or one of their groups is a policy admin, and denies a value that is
//! not a mode (it would silently switch the policy off). Tightening is open
//! to anyone, as is deleting the namespace.
//!
//! Warns, when a namespace is opted in or tightened, about what already
//! runs there ([`OptInFindings`], fed one object at a time): by
//! count, or by name when every caller is authenticated ([`Disclosure`]),
//! since anyone may forge a Namespace review naming any namespace.

use std::borrow::Cow;

use crate::document::Json;

use super::decision::{Mode, namespace_settings, warning};
use crate::policy::dra::claims::ClaimKind;
use crate::policy::{ClusterFacts, Evaluator, Message, RuleId, Scope, Subject};
use crate::settings::{MODE_LABEL, Settings};

/// How strict a label value is: higher is stricter. An absent or unknown
/// value admits everything.
fn strictness(mode: Option<Mode>) -> u8 {
    match mode {
        Some(Mode::Enforce) => 3,
        Some(Mode::Warn) => 2,
        Some(Mode::Audit) => 1,
        None => 0,
    }
}

fn label(namespace: Option<Json<'_>>) -> Option<&str> {
    namespace?
        .get("metadata")?
        .get("labels")?
        .get(MODE_LABEL)?
        .as_str()
}

fn describe(value: Option<&str>) -> String {
    value.map_or_else(|| "absent".to_owned(), |v| format!("{v:?}"))
}

/// Who is asking.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub username: &'a str,
    pub groups: &'a [Cow<'a, str>],
}

/// `Err` carries the denial message.
pub fn check(
    old: Option<Json<'_>>,
    new: Option<Json<'_>>,
    requester: Requester<'_>,
    policy_admins: &[String],
) -> Result<(), String> {
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
                return Err(Message::new(format_args!(
                    "label {MODE_LABEL}={value:?} is not a mode; use enforce, warn or audit"
                ))
                .into_string());
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
    Err(Message::new(format_args!(
        "changing {MODE_LABEL} from {} to {} loosens GPU policy; only members of {} may",
        describe(before),
        describe(after),
        policy_admins.join(", ")
    ))
    .into_string())
}

/// The mode a namespace moves to when the label change tightens the
/// policy (absent -> audit -> warn -> enforce); None otherwise.
pub fn tightened_to(old: Option<Json<'_>>, new: Option<Json<'_>>) -> Option<Mode> {
    let after = label(new)?.parse::<Mode>().ok()?;
    let before = label(old).and_then(|value| value.parse::<Mode>().ok());
    (strictness(Some(after)) > strictness(before)).then_some(after)
}

/// How many objects are shown by name before "and N more".
const NAMED: usize = 5;

/// Whether the opt-in warnings may name the namespace's objects.
///
/// Anyone who reaches the webhook may forge a Namespace review naming any
/// namespace; only when every caller must present a client certificate is
/// the answer known to go to the API server (which shows it to whoever
/// changed the label, and only if they may change it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disclosure {
    /// Client certificates are required: the objects are named.
    Names,
    /// Counts, and the command that names them with the rights of whoever
    /// runs it.
    Counts,
}

/// How many objects of one finding there are, and the first [`NAMED`]
/// names: bounded however many the namespace holds.
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
/// Pod Security Admission's warnings: the pods that would be denied, the
/// pods that would lose the cards they see today (GPU infrastructure that
/// needs an allowlist entry first), and the ResourceClaims and
/// ResourceClaimTemplates that would be denied. Fed one object at a
/// time; holds counts and a few names, whatever the namespace holds.
#[derive(Debug, Default)]
pub struct OptInFindings {
    violating_pods: Tally,
    losing_cards: Tally,
    violating_claims: Tally,
    /// Set when the namespace holds more objects than were read: how many
    /// of each kind were.
    read_only: Option<usize>,
}

impl OptInFindings {
    /// Evaluates one of the namespace's pods; its DRA claims resolve
    /// through the cluster view.
    pub fn add_pod(
        &mut self,
        pod: Json<'_>,
        namespace: &str,
        settings: &Settings,
        cluster: Option<&dyn ClusterFacts>,
    ) {
        let namespace_settings = namespace_settings(settings, cluster, Some(namespace));
        let evaluator = Evaluator::of_cluster(settings, &namespace_settings, cluster, None);
        let name = pod
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .unwrap_or("(unnamed)");
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

    /// Evaluates one of the namespace's ResourceClaims or
    /// ResourceClaimTemplates: one the policy would deny (bounded-requests,
    /// or a malformed request) is counted.
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
        let name = claim
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .unwrap_or("(unnamed)");
        let denied = match evaluator.evaluate(&Subject::claim(claim, kind, namespace)) {
            Ok(evaluation) => !evaluation.violations.is_empty(),
            Err(_) => true,
        };
        if denied {
            self.violating_claims
                .add(&format!("{}/{name}", kind.as_str()));
        }
    }

    /// The namespace holds more objects than were read: `read` of each
    /// kind were.
    pub fn read_only(&mut self, read: usize) {
        self.read_only = Some(read);
    }

    /// The warnings for the namespace moving to `mode`, naming the
    /// objects only as `disclosure` allows.
    pub fn warnings(&self, mode: Mode, namespace: &str, disclosure: Disclosure) -> Vec<String> {
        let mut warnings = Vec::new();
        let audit = format!("`gpu-policy audit -n {namespace}` names them");
        let mut say = |text: std::fmt::Arguments<'_>| {
            warnings.push(warning(Message::new(text).as_str()));
        };
        let pods = &self.violating_pods;
        if pods.count > 0 {
            match disclosure {
                Disclosure::Names => say(format_args!(
                    "{} existing pod(s) in {namespace} violate {mode} mode: {}",
                    pods.count,
                    pods.named()
                )),
                Disclosure::Counts => say(format_args!(
                    "{} existing pod(s) in {namespace} violate {mode} mode; {audit}",
                    pods.count
                )),
            }
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
        let claims = &self.violating_claims;
        if claims.count > 0 {
            match disclosure {
                Disclosure::Names => say(format_args!(
                    "{} existing claim(s) in {namespace} violate {mode} mode: {}",
                    claims.count,
                    claims.named()
                )),
                Disclosure::Counts => say(format_args!(
                    "{} existing claim(s) in {namespace} violate {mode} mode; {audit}",
                    claims.count
                )),
            }
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

/// The warning when the objects already in `namespace` were not looked
/// at: the caller has made too many such looks lately, or others are
/// running.
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
    let runtime_class = spec
        .and_then(|spec| spec.get("runtimeClassName"))
        .and_then(Json::as_str);
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
mod tests {
    use super::*;
    use crate::document::Document;
    use crate::policy::testing::leaked;
    use rstest::rstest;
    use serde_json::Value;
    use serde_json::json;

    fn namespace(mode: Option<&str>) -> Value {
        match mode {
            Some(mode) => {
                json!({"metadata": {"name": "ml", "labels": {MODE_LABEL: mode, "team": "a"}}})
            }
            None => json!({"metadata": {"name": "ml", "labels": {"team": "a"}}}),
        }
    }

    fn run(old: Option<&str>, new: Option<&str>, groups: &[&str]) -> Result<(), String> {
        let groups: Vec<Cow<'_, str>> = groups.iter().map(|g| Cow::Borrowed(*g)).collect();
        let requester = Requester {
            username: "alice",
            groups: &groups,
        };
        let (old, new) = (namespace(old), namespace(new));
        let (old, new) = (Document::from_value(&old), Document::from_value(&new));
        check(
            Some(old.root()),
            Some(new.root()),
            requester,
            &["system:masters".to_owned()],
        )
    }

    #[rstest]
    // tightening and keeping: anyone
    #[case(None, Some("audit"), true)]
    #[case(None, Some("enforce"), true)]
    #[case(Some("audit"), Some("warn"), true)]
    #[case(Some("warn"), Some("enforce"), true)]
    #[case(Some("enforce"), Some("enforce"), true)]
    #[case(None, None, true)]
    // loosening: denied
    #[case(Some("enforce"), Some("warn"), false)]
    #[case(Some("enforce"), Some("audit"), false)]
    #[case(Some("warn"), Some("audit"), false)]
    #[case(Some("enforce"), None, false)]
    #[case(Some("audit"), None, false)]
    // a value that is not a mode: denied
    #[case(None, Some("enforcing"), false)]
    #[case(Some("enforce"), Some("Enforce"), false)]
    // an unknown old value counts as absent
    #[case(Some("bogus"), Some("audit"), true)]
    fn ordinary_users(#[case] old: Option<&str>, #[case] new: Option<&str>, #[case] allowed: bool) {
        assert_eq!(run(old, new, &["system:authenticated"]).is_ok(), allowed);
    }

    #[test]
    fn admins_may_loosen() {
        assert!(run(Some("enforce"), None, &["system:masters"]).is_ok());
        let requester = Requester {
            username: "root-admin",
            groups: &[],
        };
        let (old, new) = (namespace(Some("enforce")), namespace(Some("audit")));
        assert!(
            check(
                Some(leaked(&old)),
                Some(leaked(&new)),
                requester,
                &["root-admin".to_owned()]
            )
            .is_ok()
        );
    }

    #[test]
    fn denial_names_the_change_and_who_may() {
        assert_eq!(
            run(Some("enforce"), Some("warn"), &[]),
            Err("gpu-policy: changing gpu-policy.io/mode from \"enforce\" to \"warn\" loosens GPU policy; only members of system:masters may".to_owned())
        );
    }

    #[test]
    fn deleting_a_namespace_is_allowed() {
        let old = namespace(Some("enforce"));
        let requester = Requester {
            username: "alice",
            groups: &[],
        };
        assert!(check(Some(leaked(&old)), None, requester, &[]).is_ok());
    }

    #[rstest]
    #[case(None, Some("audit"), Some(Mode::Audit))]
    #[case(Some("audit"), Some("enforce"), Some(Mode::Enforce))]
    #[case(Some("enforce"), Some("enforce"), None)]
    #[case(Some("enforce"), Some("warn"), None)]
    #[case(Some("warn"), None, None)]
    #[case(None, Some("bogus"), None)]
    fn tightening_is_detected(
        #[case] old: Option<&str>,
        #[case] new: Option<&str>,
        #[case] expected: Option<Mode>,
    ) {
        let (old, new) = (namespace(old), namespace(new));
        assert_eq!(
            tightened_to(Some(leaked(&old)), Some(leaked(&new))),
            expected
        );
    }

    /// Adds `pods` and `claims` (of their `kind`) in `ml` to `findings`.
    fn add(
        findings: &mut OptInFindings,
        pods: &[Value],
        claims: &[Value],
        settings: &Settings,
        cluster: Option<&dyn ClusterFacts>,
    ) {
        for pod in pods {
            let document = Document::from_value(pod);
            findings.add_pod(document.root(), "ml", settings, cluster);
        }
        for claim in claims {
            let kind = claim["kind"].as_str().and_then(ClaimKind::of_kind);
            let kind = kind.expect("a claim kind");
            let document = Document::from_value(claim);
            findings.add_claim(kind, document.root(), "ml", settings, cluster);
        }
    }

    /// The warnings of a look that read `pods` and `claims` in one page
    /// each, naming them (client certificates required).
    fn opt_in_warnings(
        mode: Mode,
        namespace: &str,
        pods: &[Value],
        claims: &[Value],
        settings: &Settings,
        cluster: Option<&dyn ClusterFacts>,
    ) -> Vec<String> {
        let mut findings = OptInFindings::default();
        add(&mut findings, pods, claims, settings, cluster);
        findings.warnings(mode, namespace, Disclosure::Names)
    }

    #[test]
    fn opting_in_lists_violating_pods_and_pods_that_would_lose_cards() {
        let pods = vec![
            json!({"metadata": {"name": "fine"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
            json!({"metadata": {"name": "half-gpu"}, "spec": {"containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}}),
            json!({"metadata": {"name": "dcgm-exporter-x7"}, "spec": {"containers": [
                {"name": "c", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:2.2.9"}]}}),
            json!({"metadata": {"name": "my-exporter"}, "spec": {"containers": [
                {"name": "c", "image": "example/exporter", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}),
        ];
        let warnings = opt_in_warnings(Mode::Enforce, "ml", &pods, &[], &Settings::default(), None);
        assert_eq!(
            warnings,
            vec![
                "gpu-policy: 1 existing pod(s) in ml violate enforce mode: half-gpu",
                "gpu-policy: new pods like dcgm-exporter-x7, my-exporter would lose their GPUs (void pin); allowlist them first",
            ]
        );
        assert!(
            opt_in_warnings(
                Mode::Enforce,
                "ml",
                &pods[..1],
                &[],
                &Settings::default(),
                None
            )
            .is_empty()
        );
    }

    /// A pod claiming 6 GPUs through a template with 4 more from the
    /// device plugin, and the template itself.
    fn six_and_four() -> (Value, Value) {
        let pod = json!({"metadata": {"name": "ten-gpus"}, "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "six"}],
            "containers": [{"name": "c", "resources": {
                "claims": [{"name": "gpus"}], "limits": {"nvidia.com/gpu": "4"}}}]}});
        let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "six", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 6}}]}}}});
        (pod, template)
    }

    #[test]
    fn opting_in_resolves_pods_claims_from_the_cluster() {
        use crate::policy::cluster::ClusterSnapshot;
        use crate::policy::dra::claims::ClaimKind;
        use crate::policy::dra::tables::KeptClaim;
        let (pod, template) = six_and_four();
        let settings = Settings::default();
        let unresolved = opt_in_warnings(
            Mode::Enforce,
            "ml",
            std::slice::from_ref(&pod),
            &[],
            &settings,
            None,
        );
        assert!(unresolved.is_empty(), "{unresolved:?}");
        let mut cluster = ClusterSnapshot::default();
        cluster.dra.templates.insert(
            ("ml".to_owned(), "six".to_owned()),
            KeptClaim::of("six", &template, ClaimKind::Template),
        );
        let resolved = opt_in_warnings(Mode::Enforce, "ml", &[pod], &[], &settings, Some(&cluster));
        assert_eq!(
            resolved,
            vec!["gpu-policy: 1 existing pod(s) in ml violate enforce mode: ten-gpus"]
        );
    }

    #[test]
    fn opting_in_names_the_claims_that_would_be_denied() {
        let (_, six) = six_and_four();
        let mut all = six.clone();
        all["metadata"]["name"] = json!("every-gpu");
        all["spec"]["spec"]["devices"]["requests"][0]["exactly"] =
            json!({"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"});
        let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "huge", "namespace": "ml"},
            "spec": {"devices": {"requests": [
                {"name": "g", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 9}}]}}});
        let warnings = opt_in_warnings(
            Mode::Warn,
            "ml",
            &[],
            &[six, all, claim],
            &Settings::default(),
            None,
        );
        assert_eq!(
            warnings,
            vec![
                "gpu-policy: 2 existing claim(s) in ml violate warn mode: \
                 ResourceClaimTemplate/every-gpu, ResourceClaim/huge"
            ]
        );
    }

    /// The pods of `opting_in_lists_violating_pods...`, and a claim that
    /// would be denied.
    fn pods_and_claim_to_warn_about() -> (Vec<Value>, Value) {
        let pods = vec![
            json!({"metadata": {"name": "half-gpu"}, "spec": {"containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}}),
            json!({"metadata": {"name": "dcgm-exporter-x7"}, "spec": {"containers": [
                {"name": "c", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:2.2.9"}]}}),
        ];
        let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "huge", "namespace": "ml"},
            "spec": {"devices": {"requests": [
                {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 9}}]}}});
        (pods, claim)
    }

    #[test]
    fn without_client_certificates_the_warnings_count_and_name_the_command() {
        let (pods, claim) = pods_and_claim_to_warn_about();
        let settings = Settings::default();
        let mut findings = OptInFindings::default();
        add(&mut findings, &pods, &[claim], &settings, None);
        assert_eq!(
            findings.warnings(Mode::Enforce, "ml", Disclosure::Counts),
            vec![
                "gpu-policy: 1 existing pod(s) in ml violate enforce mode; \
                 `gpu-policy audit -n ml` names them",
                "gpu-policy: 1 pod(s) in ml would lose their GPUs (void pin); allowlist them first; \
                 see `gpu-policy audit -n ml`",
                "gpu-policy: 1 existing claim(s) in ml violate enforce mode; \
                 `gpu-policy audit -n ml` names them",
            ]
        );
        let named = findings.warnings(Mode::Enforce, "ml", Disclosure::Names);
        assert_eq!(
            named,
            vec![
                "gpu-policy: 1 existing pod(s) in ml violate enforce mode: half-gpu",
                "gpu-policy: new pods like dcgm-exporter-x7 would lose their GPUs (void pin); \
                 allowlist them first",
                "gpu-policy: 1 existing claim(s) in ml violate enforce mode: ResourceClaim/huge",
            ]
        );
    }

    #[test]
    fn counts_add_up_over_pages_and_names_stay_few() {
        let settings = Settings::default();
        let mut findings = OptInFindings::default();
        for page in 0..3 {
            let pods: Vec<Value> = (0..4)
                .map(|n| {
                    json!({"metadata": {"name": format!("half-{page}-{n}")}, "spec": {"containers": [
                        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}})
                })
                .collect();
            add(&mut findings, &pods, &[], &settings, None);
        }
        assert_eq!(
            findings.warnings(Mode::Warn, "ml", Disclosure::Names),
            vec![
                "gpu-policy: 12 existing pod(s) in ml violate warn mode: half-0-0, half-0-1, \
                 half-0-2, half-0-3, half-1-0 and 7 more"
            ]
        );
        assert_eq!(findings.violating_pods.names.len(), NAMED);
        assert_eq!(
            findings.warnings(Mode::Warn, "ml", Disclosure::Counts),
            vec![
                "gpu-policy: 12 existing pod(s) in ml violate warn mode; \
                 `gpu-policy audit -n ml` names them"
            ]
        );
    }

    #[test]
    fn a_look_that_did_not_read_everything_says_so() {
        let mut findings = OptInFindings::default();
        findings.read_only(200);
        assert_eq!(
            findings.warnings(Mode::Enforce, "ml", Disclosure::Counts),
            vec![
                "gpu-policy: only the first 200 objects of each kind in ml were checked; \
                 run `gpu-policy audit -n ml`"
            ]
        );
        assert_eq!(
            look_skipped("ml"),
            "gpu-policy: the pods and claims in ml were not checked (too many namespace \
             reviews); run `gpu-policy audit -n ml`"
        );
    }
}
