//! Every fixture, as a user applies it: each object of `tests/fixtures/`
//! (and `sharing/`) applied with `kubectl apply --dry-run=server -o json`
//! to the real API server with gpu-policy installed, against what
//! `gpu-policy check` says of the same object in the same mode.
//!
//! Where the policy acts (containers' and initContainers' `env`,
//! `runtimeClassName`, `affinity`, the `gpu-policy.io/` annotations; for a
//! workload those of its pod template) the object the API server returns is
//! the one `check -o yaml` prints; a denied object fails kubectl with the
//! message the violations of `check -o json` make; kubectl prints exactly
//! check's warnings. Fields the API server defaults (imagePullPolicy,
//! terminationMessagePath, ...) are not the policy's and are not compared.
//!
//! The fixtures name their namespaces: each test creates all of them in its
//! mode, the ServiceAccounts their pods run as, and the DRA claims for real
//! (the webhook resolves pods' claims from its watches), before it applies.

use std::collections::{BTreeMap, BTreeSet};

use gpu_policy::settings::Settings;
use serde_json::{Value, json};

use crate::support::control_plane::{ControlPlane, Webhook, WebhookOptions, pod_of, policy_fields};
use crate::support::fixtures::{all_objects, dir};
use crate::support::process::{self, Run};

/// The namespace of objects that name none, for kubectl and check alike.
const DEFAULT_NAMESPACE: &str = "default";
/// An `enforce` namespace of the tests' own, where they wait for the webhook
/// configurations and watches to take effect.
const PROBE: &str = "fixtures-probe";
/// What the API server prefixes the audit webhook's audit annotations with.
const AUDIT_PREFIX: &str = "audit.gpu-policy.io/";

/// One object of the fixtures and what `check` says of it in one mode.
struct Case {
    /// `<file stem>: <Kind> <namespace>/<name>`.
    label: String,
    object: Value,
    kind: String,
    namespace: String,
    name: String,
    /// Its element of `check -o json`.
    report: Value,
    /// Its document of `check -o yaml`: the object after mutation.
    checked: Value,
    /// Its changes as `check` prints them (`[rule] summary`); for a
    /// workload, those its pods will get.
    changes: Vec<String>,
}

impl Case {
    fn is_namespace(&self) -> bool {
        self.kind == "Namespace"
    }

    fn is_claim(&self) -> bool {
        matches!(self.kind.as_str(), "ResourceClaim" | "ResourceClaimTemplate")
    }

    fn allowed(&self) -> bool {
        self.report["allowed"] == true
    }

    fn warnings(&self) -> BTreeSet<String> {
        strings(&self.report["warnings"])
    }

    /// Each violation as `[rule] message`, without the `gpu-policy:` prefix.
    fn violations(&self) -> Vec<String> {
        let violations = self.report["violations"].as_array().cloned();
        violations
            .unwrap_or_default()
            .iter()
            .map(|v| {
                let message = v["message"].as_str().unwrap_or_default();
                let body = message.strip_prefix("gpu-policy: ").unwrap_or(message);
                format!("[{}] {body}", v["rule"].as_str().unwrap_or_default())
            })
            .collect()
    }

    /// The refusal the violations make (`docs/policy.md`).
    fn denial(&self) -> String {
        format!("gpu-policy: {}", self.violations().join("; "))
    }

    /// The audit annotations `audit` mode writes for it, as the API server
    /// logs them (`docs/policy.md#namespace-and-pod-annotations`).
    fn audit_annotations(&self) -> BTreeMap<String, String> {
        let mut annotations = BTreeMap::new();
        let mut add = |key: &str, value: String| {
            annotations.insert(format!("{AUDIT_PREFIX}{key}"), value);
        };
        if !self.violations().is_empty() {
            add("violations", self.violations().join("; "));
        }
        if self.kind == "Pod" && !self.changes.is_empty() {
            add("mutations", self.changes.join("; "));
        }
        // `check` does not print what the allowlist matched: the default
        // allowlist (`Settings::default`, the webhook's configuration here)
        // says it.
        let settings = Settings::default();
        let entry = settings
            .config()
            .allowlist
            .iter()
            .find(|e| e.matches(&self.namespace, &self.kind, &self.name));
        if let Some(entry) = entry {
            add("allowlisted", entry.to_string());
        }
        annotations
    }
}

fn strings(value: &Value) -> BTreeSet<String> {
    let items = value.as_array().cloned().unwrap_or_default();
    items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()
}

/// The changes of each object in `check`'s text output, in order: every
/// object has one line in the first column, its findings are indented, and
/// a summary line ends the output.
fn changes_of(text: &str) -> Vec<Vec<String>> {
    let mut blocks: Vec<Vec<String>> = Vec::new();
    for line in text.lines() {
        let Some(finding) = line.strip_prefix("  ") else {
            blocks.push(Vec::new());
            continue;
        };
        let change =
            finding.strip_prefix("change    ").or_else(|| finding.strip_prefix("pod change"));
        if let Some(change) = change {
            let block = blocks.last_mut().expect("a finding follows its object");
            block.push(change.trim_start().to_owned());
        }
    }
    blocks.pop();
    blocks
}

/// Every fixture with what `check -f tests/fixtures --mode MODE` says of it
/// in each output: `-o json`, `-o yaml` and the text.
fn check(mode: &str) -> Vec<Case> {
    let root = dir().display().to_string();
    let run = |output: &str| {
        let args =
            ["check", "-f", &root, "--mode", mode, "--namespace", DEFAULT_NAMESPACE, "-o", output];
        let run = process::gpu_policy(&args, None);
        assert!(run.code <= 1, "check -o {output}: {run:?}");
        run
    };
    let reports = run("json").json();
    let yaml = run("yaml").stdout;
    let checked = gpu_policy::manifest::load(&["-".into()], &mut yaml.as_bytes())
        .unwrap_or_else(|err| panic!("check -o yaml is YAML: {err}\n{yaml}"));
    let changes = changes_of(&run("text").stdout);
    let documents = all_objects();
    assert_eq!(reports.len(), documents.len(), "one report per object");
    assert_eq!(checked.len(), documents.len(), "one YAML document per object");
    assert_eq!(changes.len(), documents.len(), "one text block per object");
    documents
        .into_iter()
        .zip(reports)
        .zip(checked)
        .zip(changes)
        .map(|((((stem, object), report), checked), changes)| {
            let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
            let kind = text("/kind").unwrap_or_default().to_owned();
            let name = text("/metadata/name").unwrap_or_default().to_owned();
            let namespace = text("/metadata/namespace").unwrap_or(DEFAULT_NAMESPACE).to_owned();
            assert_eq!(
                (report["kind"].as_str(), report["name"].as_str()),
                (Some(kind.as_str()), Some(name.as_str())),
                "check's reports follow the fixtures' order"
            );
            Case {
                label: format!("{stem}: {kind} {namespace}/{name}"),
                object,
                kind,
                namespace,
                name,
                report,
                checked: checked.object,
                changes,
            }
        })
        .collect()
}

/// The gpu-policy warnings kubectl printed (`Warning: gpu-policy: ...`).
fn warnings_of(stderr: &str) -> BTreeSet<String> {
    stderr
        .lines()
        .filter_map(|line| line.strip_prefix("Warning: "))
        .filter(|warning| warning.starts_with("gpu-policy"))
        .map(str::to_owned)
        .collect()
}

/// A Deployment asking for more cards than a container may have: the
/// validating webhook of an `enforce` namespace refuses it.
fn too_many_cards(namespace: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: too-many\n  namespace: {namespace}\n\
         spec:\n  selector:\n    matchLabels: {{app: x}}\n  template:\n    metadata:\n      \
         labels: {{app: x}}\n    spec:\n      containers:\n      - name: app\n        image: ubuntu\n        \
         resources:\n          limits:\n            nvidia.com/gpu: 99\n"
    )
}

/// A control plane with gpu-policy installed and in effect (both webhook
/// configurations), and every namespace the fixtures name in `mode` (`None`:
/// not opted in), each with the ServiceAccounts its pods run as.
async fn cluster_for(mode: Option<&str>, cases: &[Case]) -> Option<(ControlPlane, Webhook)> {
    let cluster = ControlPlane::start()?;
    let webhook = Webhook::install(&cluster, WebhookOptions::default()).await;
    cluster.namespace(PROBE, Some("enforce"));
    webhook.wait_effective(&cluster, PROBE);
    let refusal = too_many_cards(PROBE);
    cluster.eventually("the validating webhooks act on a dry run", || {
        let run = cluster.dry_run(&refusal);
        run.code != 0 && run.stderr.contains("admission webhook \"enforce.gpu-policy.io\"")
    });

    let mut namespaces = BTreeSet::new();
    let mut accounts = BTreeSet::new();
    for case in cases {
        if case.is_namespace() {
            namespaces.insert(case.name.clone());
            continue;
        }
        namespaces.insert(case.namespace.clone());
        let spec = pod_of(&case.object).map(|pod| &pod["spec"]);
        if let Some(account) = spec.and_then(|s| s["serviceAccountName"].as_str()) {
            accounts.insert((case.namespace.clone(), account.to_owned()));
        }
    }
    // `default` and `kube-system` exist: applying them adds the label.
    for namespace in &namespaces {
        cluster.namespace(namespace, mode);
    }
    for (namespace, name) in accounts {
        cluster.apply(&format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        ));
    }
    Some((cluster, webhook))
}

/// A GPU claim of the NVIDIA DRA driver in [`PROBE`], as a ResourceClaim
/// or (in a template) a ResourceClaimTemplate.
fn gpu_claim(kind: &str, name: &str) -> String {
    let claim = json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}});
    let spec = if kind == "ResourceClaimTemplate" { json!({ "spec": claim }) } else { claim };
    json!({"apiVersion": "resource.k8s.io/v1", "kind": kind,
           "metadata": {"name": name, "namespace": PROBE}, "spec": spec})
    .to_string()
}

/// Applies every object of the fixtures, in order, as a user would: the
/// ResourceClaims and ResourceClaimTemplates first and for real (`kubectl
/// create`), the rest with a server-side dry run. Namespaces are not
/// applied ([`cluster_for`] made them). With `watched`, waits after the
/// claims until the webhook's watches hold them: a claim and a template
/// created after them in [`PROBE`] resolve, so a pod using both stays as
/// sent (an unresolved claim leaves its container pinned).
fn apply_all<'a>(cluster: &ControlPlane, cases: &'a [Case], watched: bool) -> Vec<(&'a Case, Run)> {
    let mut runs = Vec::new();
    for case in cases.iter().filter(|c| c.is_claim()) {
        runs.push((case, cluster.create(&case.object.to_string())));
    }
    if watched {
        cluster.create(&gpu_claim("ResourceClaimTemplate", "probe-template")).success();
        cluster.create(&gpu_claim("ResourceClaim", "probe-claim")).success();
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "claims-probe", "namespace": PROBE},
            "spec": {"containers": [
                {"name": "a", "image": "ubuntu", "resources": {"claims": [{"name": "a"}]}},
                {"name": "b", "image": "ubuntu", "resources": {"claims": [{"name": "b"}]}}],
              "resourceClaims": [{"name": "a", "resourceClaimTemplateName": "probe-template"},
                                 {"name": "b", "resourceClaimName": "probe-claim"}]}});
        cluster.eventually("the webhook's watches hold the claims", || {
            let run = cluster.dry_run(&pod.to_string());
            run.code == 0 && policy_fields(&run.value()) == policy_fields(&pod)
        });
    }
    for case in cases.iter().filter(|c| !c.is_claim() && !c.is_namespace()) {
        runs.push((case, cluster.dry_run(&case.object.to_string())));
    }
    runs
}

/// What differs between what kubectl gave for `case` and what `check` says
/// of it: the outcome, the denial, the warnings, the object where the
/// policy acts.
fn differences_from_check(case: &Case, run: &Run) -> Vec<String> {
    let mut found = Vec::new();
    let printed = warnings_of(&run.stderr);
    if printed != case.warnings() {
        found.push(format!(
            "warnings: kubectl printed {printed:#?}\ncheck says {:#?}",
            case.warnings()
        ));
    }
    match (case.allowed(), run.code == 0) {
        (true, true) => {
            let stored = policy_fields(&run.value());
            let checked = policy_fields(&case.checked);
            if stored != checked {
                found.push(format!(
                    "where the policy acts, the API server gave\n{stored:#}\ncheck -o yaml gives\n{checked:#}"
                ));
            }
        }
        (true, false) => found.push(format!("check admits it; kubectl failed:\n{}", run.stderr)),
        (false, true) => {
            found.push(format!("check denies it ({}); the API server admitted it", case.denial()))
        }
        (false, false) => {
            let refusal = run
                .stderr
                .lines()
                .find_map(|line| line.split_once(" denied the request: ").map(|(_, m)| m));
            if refusal != Some(case.denial().as_str()) {
                found.push(format!(
                    "denial: kubectl printed\n{}\ncheck's violations make\n{}",
                    run.stderr,
                    case.denial()
                ));
            }
        }
    }
    found
}

/// What differs from an object the webhook never saw: refused, warned
/// about, or changed where the policy acts.
fn differences_from_sent(case: &Case, run: &Run) -> Vec<String> {
    if run.code != 0 {
        return vec![format!("refused:\n{}", run.stderr)];
    }
    let mut found = Vec::new();
    if run.stderr.contains("gpu-policy") {
        found.push(format!("gpu-policy spoke:\n{}", run.stderr));
    }
    let (stored, sent) = (policy_fields(&run.value()), policy_fields(&case.object));
    if stored != sent {
        found.push(format!("changed: the API server gave\n{stored:#}\nsent was\n{sent:#}"));
    }
    found
}

/// Fails with every difference found, each under its fixture's label.
#[track_caller]
fn assert_none(
    what: &str,
    runs: &[(&Case, Run)],
    differences: impl Fn(&Case, &Run) -> Vec<String>,
) {
    let report: Vec<String> = runs
        .iter()
        .flat_map(|(case, run)| {
            differences(case, run)
                .into_iter()
                .map(move |difference| format!("--- {}: {difference}", case.label))
        })
        .collect();
    assert!(
        report.is_empty(),
        "{} difference(s) {what} over {} objects:\n{}",
        report.len(),
        runs.len(),
        report.join("\n")
    );
}

/// How the audit log names an object: (resource, namespace, name).
fn key_of(case: &Case) -> (String, String, String) {
    let resource = format!("{}s", case.kind.to_lowercase());
    (resource, case.namespace.clone(), case.name.clone())
}

/// The gpu-policy audit annotations of the API server's audit events for
/// each object's creation (dry runs included), by (resource, namespace,
/// name), once the log holds as many creations of each as `cases`.
fn logged_annotations(
    cluster: &ControlPlane,
    cases: &[&Case],
) -> BTreeMap<(String, String, String), Vec<BTreeMap<String, String>>> {
    let mut wanted: BTreeMap<_, usize> = BTreeMap::new();
    for case in cases {
        *wanted.entry(key_of(case)).or_default() += 1;
    }
    let read = || {
        let mut logged: BTreeMap<_, Vec<BTreeMap<String, String>>> = BTreeMap::new();
        for event in cluster.audit_events() {
            let target = &event["objectRef"];
            if event["verb"] != "create" || event["stage"] != "ResponseComplete" {
                continue;
            }
            let field = |name: &str| target[name].as_str().unwrap_or_default().to_owned();
            let key = (field("resource"), field("namespace"), field("name"));
            if !wanted.contains_key(&key) || !target["subresource"].is_null() {
                continue;
            }
            let annotations = event["annotations"].as_object().into_iter().flatten();
            let ours = annotations
                .filter(|(key, _)| key.contains("gpu-policy.io/"))
                .map(|(key, value)| (key.clone(), value.as_str().unwrap_or_default().to_owned()))
                .collect();
            logged.entry(key).or_default().push(ours);
        }
        logged
    };
    cluster.eventually("the audit log holds every creation", || {
        let logged = read();
        wanted.iter().all(|(key, count)| logged.get(key).map_or(0, Vec::len) >= *count)
    });
    read()
}

#[tokio::test]
async fn enforce_gives_what_check_gives_for_every_fixture() {
    let cases = check("enforce");
    let Some((cluster, _webhook)) = cluster_for(Some("enforce"), &cases).await else {
        return;
    };
    let runs = apply_all(&cluster, &cases, true);
    assert_none("from check --mode enforce", &runs, differences_from_check);
    // The test sees both outcomes and both kinds of change.
    let denied = runs.iter().filter(|(_, run)| run.code != 0).count();
    let mutated = cases.iter().filter(|c| policy_fields(&c.checked) != policy_fields(&c.object));
    assert!(denied >= 5 && mutated.count() >= 10, "{denied} denied");
}

#[tokio::test]
async fn warn_admits_every_fixture_with_checks_warnings() {
    let cases = check("warn");
    assert!(cases.iter().all(Case::allowed), "warn mode admits everything");
    let Some((cluster, _webhook)) = cluster_for(Some("warn"), &cases).await else {
        return;
    };
    let runs = apply_all(&cluster, &cases, true);
    assert_none("from check --mode warn", &runs, differences_from_check);
    assert_changes_nothing(&cases);
}

/// What `check -o yaml` gives is what was sent, where the policy acts: so
/// the API server, which gave what check gives, changed nothing.
#[track_caller]
fn assert_changes_nothing(cases: &[Case]) {
    for case in cases {
        let (checked, sent) = (policy_fields(&case.checked), policy_fields(&case.object));
        assert_eq!(checked, sent, "{}: check changed it", case.label);
    }
}

#[tokio::test]
async fn audit_admits_every_fixture_and_logs_checks_findings() {
    let cases = check("audit");
    assert!(cases.iter().all(Case::allowed), "audit mode admits everything");
    let Some((cluster, _webhook)) = cluster_for(Some("audit"), &cases).await else {
        return;
    };
    let runs = apply_all(&cluster, &cases, true);
    assert_none("from check --mode audit", &runs, differences_from_check);
    assert_changes_nothing(&cases);

    let applied: Vec<&Case> = runs.iter().map(|(case, _)| *case).collect();
    let logged = logged_annotations(&cluster, &applied);
    let mut expected: BTreeMap<_, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    for case in &applied {
        expected.entry(key_of(case)).or_default().push(case.audit_annotations());
    }
    let mut differences = Vec::new();
    for (key, mut wanted) in expected {
        // Objects of the same name (the sharing fixtures' `test-pod`) are
        // compared as a set: the log's order is not the requests'.
        let mut found = logged.get(&key).cloned().unwrap_or_default();
        wanted.sort();
        found.sort();
        if wanted != found {
            differences.push(format!("--- {key:?}: logged {found:#?}\ncheck says {wanted:#?}"));
        }
    }
    assert!(
        differences.is_empty(),
        "the audit log's gpu-policy annotations differ from check's findings:\n{}",
        differences.join("\n")
    );
    let annotated = applied.iter().filter(|c| !c.audit_annotations().is_empty());
    assert!(annotated.count() >= 10, "the fixtures have findings to log");
}

#[tokio::test]
async fn unlabelled_namespaces_get_every_fixture_as_sent() {
    let cases = check("enforce");
    let Some((cluster, _webhook)) = cluster_for(None, &cases).await else {
        return;
    };
    let runs = apply_all(&cluster, &cases, false);
    assert_none("from what was sent", &runs, differences_from_sent);
    // In enforce mode the same objects would have been refused or changed.
    let acted = cases
        .iter()
        .filter(|c| !c.allowed() || policy_fields(&c.checked) != policy_fields(&c.object));
    assert!(acted.count() >= 15);
}
