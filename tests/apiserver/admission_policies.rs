//! The admission policies in the API server's own CEL. No webhook is
//! installed: `gpu-policy manifests --admission-policies --mutating-policies`
//! is applied (server-side), and every fixture (`tests/fixtures/` and
//! `tests/fixtures/sharing/`) goes through `kubectl apply --dry-run=server`
//! in namespaces of one mode, against what `gpu-policy check --engine cel`
//! and `gpu-policy check` (the webhook's rules) say in that mode:
//!
//! - enforce: the same decision. The API server names the first denying
//!   policy only: its message must be one of the violations `check` lists.
//!   An admitted object is stored as `check -o yaml` prints it (each
//!   container's env, runtimeClassName, affinity, annotations; a workload's
//!   pod template's);
//! - warn: admitted unchanged, one `Warning:` per violation `check` lists;
//! - audit: admitted unchanged, no warning, each violation in the audit
//!   event's `validation.policy.admission.k8s.io/validation_failure`.
//!
//! `check` runs on each object alone: like the policies, it then cannot
//! resolve the pod's DRA claims (with them the webhook does not pin the
//! claimed containers, a documented limit of the policies). The webhook's
//! R4 affinity and `gpu-policy.io/mutations` annotation are its own: the
//! stored object is held to the webhook's env and runtimeClassName, and to
//! `check --engine cel` in every field.
//!
//! And kube-controller-manager's type checking (its policy status
//! controller, run alone) finds nothing to warn about in any policy.

use std::cell::Cell;
use std::path::Path;
use std::time::{Duration, Instant};

use gpu_policy::manifest::{self, Document};
use serde_json::{Value, json};

use crate::support::control_plane::{ControlPlane, NVIDIA_RUNTIME_CLASS, policy_fields};
use crate::support::{fixtures, process};

/// A violation: the rule of the policy that found it, and its message.
type Violation = (String, String);

/// What one admission decided.
#[derive(Debug)]
struct Verdict {
    allowed: bool,
    /// Sorted.
    violations: Vec<Violation>,
    /// The object as stored (or as `check -o yaml` prints it), when allowed.
    stored: Option<Value>,
}

/// The audit annotation of the violations of `Audit` bindings.
const AUDIT_KEY: &str = "validation.policy.admission.k8s.io/validation_failure";

/// `gpu-policy-device-paths` -> `device-paths`; the claims policy is R2's.
fn rule_of(policy: &str) -> String {
    let name = policy.strip_prefix("gpu-policy-").unwrap_or(policy);
    name.strip_suffix("-claims").unwrap_or(name).to_owned()
}

/// The violation in `...ValidatingAdmissionPolicy 'P' with binding 'B'<separator>MSG`.
fn parse_violation(text: &str, separator: &str) -> Option<Violation> {
    let rest = text.split_once("ValidatingAdmissionPolicy '")?.1;
    let (policy, rest) = rest.split_once("' with binding '")?;
    let message = rest.split_once(separator)?.1;
    Some((rule_of(policy), message.to_owned()))
}

/// A control plane with the generated policies applied and effective, and
/// every namespace `namespaces` names labelled with `mode`.
struct Cluster {
    plane: ControlPlane,
    mode: &'static str,
    dry_runs: Cell<usize>,
    /// The MutatingAdmissionPolicies rendered for the cluster's release
    /// (none before 1.34; 1.34 leaves the pin to the webhook).
    mutating: Vec<String>,
}

impl Cluster {
    /// `annotations`: `(namespace, key=value)`, set before the policies
    /// act (their namespace cache sees the probes' namespace after them).
    fn start(
        mode: &'static str,
        namespaces: &[String],
        annotations: &[(&str, &str)],
    ) -> Option<Self> {
        let plane = ControlPlane::start()?;
        plane.apply(NVIDIA_RUNTIME_CLASS);
        plane.apply(&NVIDIA_RUNTIME_CLASS.replace("nvidia", "kata"));
        for namespace in namespaces {
            plane.namespace(namespace, Some(mode));
        }
        for (namespace, annotation) in annotations {
            plane.kubectl(&["annotate", "namespace", namespace, annotation]).success();
        }
        plane.namespace("probe", Some(mode));
        let mutating = install_policies(&plane);
        let cluster = Self { plane, mode, dry_runs: Cell::new(0), mutating };
        cluster.wait_effective();
        Some(cluster)
    }

    /// `kubectl apply --dry-run=server` of one object, as the API server
    /// decided it. With `wait` false, None when the audit event (audit
    /// mode) is not written yet.
    fn try_admit(&self, object: &Value, wait: bool) -> Option<Verdict> {
        let n = self.dry_runs.get() + 1;
        self.dry_runs.set(n);
        // A field manager of its own names the request in the audit log.
        let manager = format!("dry-run-{n}");
        let args = ["apply", "--dry-run=server", "-o", "json", "--field-manager", &manager];
        let run = self
            .plane
            .kubectl_stdin(&[&args[..], &["-f", "-"]].concat(), Some(&object.to_string()));
        let mut violations = Vec::new();
        for line in run.stderr.lines() {
            if let Some(v) = parse_violation(line, "' denied request: ").filter(|_| run.code != 0) {
                violations.push(v);
            } else if let Some(v) = line
                .strip_prefix("Warning: Validation failed for ")
                .and_then(|l| parse_violation(l, "': "))
            {
                violations.push(v);
            } else {
                panic!("{object}\nneither a policy's denial nor its warning: {line}\n{run:?}");
            }
        }
        let allowed = run.code == 0;
        assert!(allowed || violations.len() == 1, "{object}\n{run:?}");
        if self.mode == "audit" {
            let find = || self.audit_violations(&manager);
            let audited = match wait {
                true => {
                    let mut found = None;
                    self.plane.eventually("the dry run's audit event", || {
                        found = find();
                        found.is_some()
                    });
                    found
                }
                false => find(),
            };
            violations.extend(audited?);
        }
        violations.sort();
        let stored = allowed.then(|| run.value());
        Some(Verdict { allowed, violations, stored })
    }

    fn admit(&self, object: &Value) -> Verdict {
        self.try_admit(object, true).unwrap_or_else(|| unreachable!("waited for the audit event"))
    }

    /// The violations the audit event of the request made by `manager`
    /// holds; None while it is not written.
    fn audit_violations(&self, manager: &str) -> Option<Vec<Violation>> {
        let events = self.plane.audit_events();
        let needle = format!("fieldManager={manager}&");
        let event = events.iter().find(|e| {
            e["stage"] == "ResponseComplete"
                && e["requestURI"].as_str().is_some_and(|uri| format!("{uri}&").contains(&needle))
        })?;
        let Some(failures) = event["annotations"][AUDIT_KEY].as_str() else {
            return Some(Vec::new());
        };
        let failures: Vec<Value> = serde_json::from_str(failures).expect("audit annotation");
        let violation = |f: &Value| {
            let text = |key: &str| f[key].as_str().unwrap_or_default().to_owned();
            (rule_of(&text("policy")), text("message"))
        };
        Some(failures.iter().map(violation).collect())
    }

    /// Waits until every policy acts on its [`PROBES`] object, and in
    /// enforce namespaces the mutating ones on the last two.
    fn wait_effective(&self) {
        let probes: Vec<Value> = manifest::parse(PROBES, "probes", false)
            .expect("probes")
            .into_iter()
            .map(|d| d.object)
            .collect();
        let rules = ["bounded-requests", "device-paths", "runtime-class", "bounded-requests"];
        for (rule, probe) in rules.iter().zip(&probes) {
            self.plane.eventually(&format!("{rule} acts on {probe}"), || {
                self.try_admit(probe, false)
                    .is_some_and(|v| v.violations.iter().any(|(r, _)| r == rule))
            });
        }
        if self.mode == "enforce" {
            let acted = |probe: &Value, field: &str| {
                let stored = self.admit(probe).stored.unwrap_or_default();
                policy_fields(&stored)[field].clone()
            };
            self.plane.eventually("the mutating policies act", || {
                (!self.mutates("env")
                    || acted(&probes[4], "env")["containers/app"][0]["value"] == "void")
                    && (!self.mutates("runtimeClassName")
                        || acted(&probes[5], "runtimeClassName") == "nvidia")
            });
        }
    }

    /// Whether a MutatingAdmissionPolicy installed here writes `field`
    /// (`env`: the pin; `runtimeClassName`).
    fn mutates(&self, field: &str) -> bool {
        let policy = match field {
            "env" => "gpu-policy-visible-devices",
            "runtimeClassName" => "gpu-policy-runtime-class",
            _ => return false,
        };
        self.mutating.iter().any(|name| name == policy)
    }
}

/// In namespace `probe`: an object for each validating policy that only
/// it denies (the API server names one denying policy only), then a pod
/// without a GPU and one with.
const PROBES: &str = r#"
{kind: Pod, apiVersion: v1, metadata: {name: many-gpus, namespace: probe}, spec: {containers: [
  {name: app, image: x, resources: {limits: {nvidia.com/gpu: 99}}}]}}
---
{kind: Pod, apiVersion: v1, metadata: {name: host-dev, namespace: probe}, spec: {
  containers: [{name: app, image: x}], volumes: [{name: dev, hostPath: {path: /dev}}]}}
---
{kind: Pod, apiVersion: v1, metadata: {name: reserved, namespace: probe}, spec: {
  runtimeClassName: nvidia, containers: [{name: app, image: x}]}}
---
{kind: ResourceClaim, apiVersion: resource.k8s.io/v1, metadata: {name: all-gpus, namespace: probe},
 spec: {devices: {requests: [{name: gpus, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}}]}}}
---
{kind: Pod, apiVersion: v1, metadata: {name: cpu, namespace: probe}, spec: {containers: [{name: app, image: x}]}}
---
{kind: Pod, apiVersion: v1, metadata: {name: gpu, namespace: probe}, spec: {containers: [
  {name: app, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}}
"#;

/// `manifests --admission-policies --mutating-policies` for the cluster's
/// release, applied; the names of its MutatingAdmissionPolicies.
fn install_policies(plane: &ControlPlane) -> Vec<String> {
    let manifests = plane.manifests(&["--admission-policies", "--mutating-policies"]);
    plane.apply(&manifests);
    manifest::parse(&manifests, "manifests", false)
        .expect("manifests")
        .into_iter()
        .filter(|d| d.object["kind"] == "MutatingAdmissionPolicy")
        .filter_map(|d| d.object["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// `gpu-policy check [--engine cel] --mode MODE -o json` and `-o yaml` on
/// `input` (a file, or `-` with `stdin`), with `extra` arguments: a verdict
/// per object.
fn check(input: &str, stdin: Option<&str>, mode: &str, cel: bool, extra: &[&str]) -> Vec<Verdict> {
    let run = |output: &str| {
        let mut args = vec!["check", "-f", input, "--mode", mode, "-o", output];
        args.extend(extra);
        if cel {
            args.extend(["--engine", "cel"]);
        }
        let run = process::gpu_policy(&args, stdin);
        assert!(run.code <= 1, "{args:?}: {run:?}");
        run
    };
    let reports = run("json").json();
    let objects = manifest::parse(&run("yaml").stdout, "check -o yaml", false)
        .unwrap_or_else(|err| panic!("check -o yaml: {err}"));
    assert_eq!(reports.len(), objects.len(), "{input}");
    reports
        .iter()
        .zip(objects)
        .map(|(report, object)| {
            let allowed = report["allowed"] == true;
            let text = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();
            let violations = report["violations"].as_array().into_iter().flatten();
            let mut violations: Vec<Violation> =
                violations.map(|v| (text(v, "rule"), text(v, "message"))).collect();
            violations.sort();
            Verdict { allowed, violations, stored: allowed.then_some(object.object) }
        })
        .collect()
}

/// The namespaces the fixtures name or create.
fn namespaces(files: &[Input]) -> Vec<String> {
    let objects = files.iter().flat_map(|(_, d, _)| d).map(|d| &d.object);
    let names = objects.filter_map(|o| match o["kind"].as_str() {
        Some("Namespace") => o["metadata"]["name"].as_str(),
        _ => o["metadata"]["namespace"].as_str(),
    });
    let names: std::collections::BTreeSet<&str> = names.chain(["default"]).collect();
    names.into_iter().map(str::to_owned).collect()
}

/// A file of objects, its documents, and what `check` is told of their
/// namespace.
type Input = (String, Vec<Document>, Vec<&'static str>);

/// Objects the fixtures lack, each reaching a path of the policies in the
/// API server: the pod maximum (sidecars, init containers, a HAMi share's
/// card, a workload), a container maximum, claims, device paths, a class
/// that is not a GPU one, env entries rewritten, and a pod of 10 sidecars
/// and 10 containers of 10 env entries each (the cost limits: within them,
/// docs/policy.md says). One resource each: with several, the policies
/// join the webhook's messages into one.
const EXTRAS: &str = r#"
{kind: Pod, apiVersion: v1, metadata: {name: two-big, namespace: extra}, spec: {containers: [
  {name: a, image: x, resources: {limits: {nvidia.com/gpu: 9}}},
  {name: b, image: x, resources: {limits: {nvidia.com/gpu: 12}}}]}}
---
{kind: Pod, apiVersion: v1, metadata: {name: init-peak, namespace: extra}, spec: {
  initContainers: [{name: s, image: x, restartPolicy: Always, resources: {limits: {nvidia.com/gpu: 3}}},
                   {name: i, image: x, resources: {limits: {nvidia.com/gpu: 7}}}],
  containers: [{name: a, image: x, resources: {limits: {nvidia.com/gpu: 4}}},
               {name: b, image: x, resources: {limits: {nvidia.com/mig-1g.5gb: 2}}}]}}
---
{kind: Deployment, apiVersion: apps/v1, metadata: {name: spread, namespace: extra}, spec: {
  selector: {matchLabels: {app: spread}}, template: {metadata: {labels: {app: spread}}, spec: {containers: [
    {name: a, image: x, resources: {limits: {nvidia.com/gpu: 5}}},
    {name: b, image: x, resources: {limits: {nvidia.com/gpu: 5}}}]}}}}
---
{kind: Pod, apiVersion: v1, metadata: {name: share-and-cards, namespace: extra}, spec: {containers: [
  {name: a, image: x, resources: {limits: {nvidia.com/gpumem: 1000}}},
  {name: b, image: x, resources: {limits: {nvidia.com/gpu: 8}}}]}}
---
{kind: ResourceClaim, apiVersion: resource.k8s.io/v1, metadata: {name: every-gpu, namespace: extra},
 spec: {devices: {requests: [{name: all, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}}]}}}
---
{kind: ResourceClaimTemplate, apiVersion: resource.k8s.io/v1, metadata: {name: nine, namespace: extra},
 spec: {spec: {devices: {requests: [{name: nine, exactly: {deviceClassName: gpu.nvidia.com, count: 9}}]}}}}
---
{kind: ResourceClaim, apiVersion: resource.k8s.io/v1, metadata: {name: two-fives, namespace: extra},
 spec: {devices: {requests: [{name: a, exactly: {deviceClassName: gpu.nvidia.com, count: 5}},
   {name: b, firstAvailable: [{name: big, deviceClassName: gpu.nvidia.com, count: 5},
                              {name: small, deviceClassName: mig.nvidia.com}]}]}}}
---
{kind: Pod, apiVersion: v1, metadata: {name: device-paths, namespace: extra,
  annotations: {cdi.k8s.io/gpu: nvidia.com/gpu=all}}, spec: {
  containers: [{name: a, image: x, volumeMounts: [{name: list, mountPath: /var/run/nvidia-container-devices},
                                                  {name: dev, mountPath: /host-dev}]}],
  volumes: [{name: list, emptyDir: {}}, {name: dev, hostPath: {path: /dev/nvidia0}}]}}
---
{kind: Pod, apiVersion: v1, metadata: {name: kata-gpu, namespace: extra}, spec: {runtimeClassName: kata,
  containers: [{name: a, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}}
---
{kind: Pod, apiVersion: v1, metadata: {name: env, namespace: extra}, spec: {containers: [
  {name: cpu, image: nvidia/cuda:12.6.3-base-ubuntu24.04, env: [{name: A, value: "1"},
    {name: NVIDIA_VISIBLE_DEVICES, value: all}, {name: B, valueFrom: {configMapKeyRef: {name: cm, key: b}}}]},
  {name: gpu, image: x, env: [{name: NVIDIA_VISIBLE_DEVICES, value: "0,1"}, {name: C, value: "3"}],
   resources: {limits: {nvidia.com/gpu: 1}}}]}}
"#;

/// A pod in a namespace whose annotation lowers the pod maximum to 2.
const LIMITED: &str = "{kind: Pod, apiVersion: v1, metadata: {name: three, namespace: limited}, \
    spec: {containers: [{name: a, image: x, resources: {limits: {nvidia.com/gpu: 3}}}]}}";
const LIMIT: &str = "gpu-policy.io/max-gpus-per-pod=2";

/// The fixtures, then [`EXTRAS`] (with the pod of many containers) and
/// [`LIMITED`], written to `dir`.
fn inputs(dir: &Path) -> Vec<Input> {
    let mut inputs: Vec<Input> = fixtures::all_files()
        .iter()
        .map(|path| (path.display().to_string(), fixtures::load(path), vec![]))
        .collect();
    let container = |name: String, sidecar: bool| {
        let env: Vec<Value> =
            (0..10).map(|i| json!({"name": format!("V{i}"), "value": "x"})).collect();
        let mut c = json!({"name": name, "image": "x", "env": env,
                           "resources": {"limits": {"nvidia.com/gpu": "1"}}});
        if sidecar {
            c["restartPolicy"] = json!("Always");
        }
        c
    };
    let many = json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "many", "namespace": "extra"}, "spec": {
        "initContainers": (0..10).map(|i| container(format!("s{i}"), true)).collect::<Vec<_>>(),
        "containers": (0..10).map(|i| container(format!("c{i}"), false)).collect::<Vec<_>>()}});
    let extras = format!("{EXTRAS}---\n{many}\n");
    for (name, text, args) in [
        ("extras.yaml", extras.as_str(), vec![]),
        ("limited.yaml", LIMITED, vec!["--namespace-annotation", LIMIT]),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        inputs.push((path.display().to_string(), fixtures::load(&path), args));
    }
    inputs
}

/// Every fixture and extra object through the API server in a namespace of
/// `mode`, held to both engines of `check`.
fn fixtures_in(mode: &'static str) {
    let scratch = tempfile::tempdir().expect("tempdir");
    let files = inputs(scratch.path());
    let Some(cluster) = Cluster::start(mode, &namespaces(&files), &[("limited", LIMIT)]) else {
        return;
    };
    // Where resource.k8s.io/v1 is not served, check reads the DRA objects
    // as the cluster is sent them.
    let files: Vec<Input> = files
        .into_iter()
        .map(|(path, documents, args)| {
            let text = std::fs::read_to_string(&path).expect("input");
            if !text.contains("resource.k8s.io/v1") || cluster.plane.serves("resource.k8s.io/v1") {
                return (path, documents, args);
            }
            let name = Path::new(&path).file_name().and_then(|n| n.to_str());
            let served = scratch.path().join(format!("served-{}", name.unwrap_or("input.yaml")));
            std::fs::write(&served, cluster.plane.served_dra_yaml(&text)).expect("write");
            let documents = fixtures::load(&served);
            (served.display().to_string(), documents, args)
        })
        .collect();
    let (mut compared, mut denied, mut violations, mut changed) = (0, 0, 0, 0);
    let mut unrepresentable = 0;
    let release = cluster.plane.kube_version();
    for (path, documents, args) in &files {
        let mut cel_args = args.clone();
        cel_args.extend(["--kube-version", release.as_str()]);
        let by_cel = check(path, None, mode, true, &cel_args);
        assert_eq!(by_cel.len(), documents.len(), "{path}");
        for (document, cel) in documents.iter().zip(&by_cel) {
            let object = &document.object;
            if object["kind"] == "Namespace" {
                continue;
            }
            // `firstAvailable` is served from 1.34 (1.33: behind an alpha
            // gate): before, the API server refuses the claim.
            if cluster.plane.minor() < 34 && object.to_string().contains("firstAvailable") {
                unrepresentable += 1;
                continue;
            }
            let label = format!(
                "{mode}: {} {}/{}",
                fixtures::stem(Path::new(path.as_str())),
                object["kind"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default()
            );
            let alone = object.to_string();
            let webhook = check("-", Some(&alone), mode, false, args).pop().expect("one report");
            let server = cluster.admit(object);
            for (engine, expected) in [("check --engine cel", cel), ("check", &webhook)] {
                assert_eq!(
                    server.allowed, expected.allowed,
                    "{label}: the API server {server:#?}\n{engine} {expected:#?}"
                );
                match server.allowed {
                    // The API server reports the first denial only.
                    false => assert!(
                        expected.violations.contains(&server.violations[0]),
                        "{label}: the API server denied with {:?}\n{engine} says {:#?}",
                        server.violations[0],
                        expected.violations
                    ),
                    // Before 1.37 the API server's audit annotation of a
                    // request holds its first failed validation only.
                    true if mode == "audit" && cluster.plane.minor() < 37 => assert!(
                        server.violations.len() == expected.violations.len().min(1)
                            && server.violations.iter().all(|v| expected.violations.contains(v)),
                        "{label}: the API server audited {:?}\n{engine} says {:#?}",
                        server.violations,
                        expected.violations
                    ),
                    true => assert_eq!(
                        server.violations, expected.violations,
                        "{label}: the API server's violations (left), {engine}'s (right)"
                    ),
                }
            }
            if server.allowed {
                let [stored, by_cel, by_webhook] = [&server.stored, &cel.stored, &webhook.stored]
                    .map(|o| policy_fields(o.as_ref().expect("allowed")));
                assert_eq!(
                    stored, by_cel,
                    "{label}: stored (left), check --engine cel -o yaml (right)"
                );
                for field in ["env", "runtimeClassName"].into_iter().filter(|f| cluster.mutates(f))
                {
                    assert_eq!(
                        stored[field], by_webhook[field],
                        "{label}: {field}: stored (left), check -o yaml (right)"
                    );
                }
                changed += usize::from(stored != policy_fields(object));
            }
            if matches!(object["kind"].as_str(), Some("ResourceClaim" | "ResourceClaimTemplate"))
                && server.allowed
            {
                // The pods after it name it: created for real.
                let created = cluster.plane.create(&alone);
                assert_eq!(created.code, 0, "{label}: {created:?}");
            }
            compared += 1;
            denied += usize::from(!server.allowed);
            violations += server.violations.len();
        }
    }
    let objects: usize = files.iter().map(|(_, d, _)| d.len()).sum();
    assert_eq!(
        compared,
        objects - 6 - unrepresentable,
        "every object but the 6 Namespaces and what the release cannot hold"
    );
    // What the release cannot hold was denied where it can.
    let denied_at_least = 18 - unrepresentable;
    // Before 1.37 an audit event holds one failure per request.
    let audited_at_least = match cluster.plane.minor() {
        ..37 => 15,
        _ => 20,
    };
    match mode {
        // Without mutating policies (before 1.34) nothing is changed.
        "enforce" if cluster.mutating.is_empty() => {
            assert!(denied >= denied_at_least && changed == 0, "{denied} denied, {changed} changed")
        }
        // 1.34 leaves the pin to the webhook: only runtime classes change.
        "enforce" if !cluster.mutates("env") => assert!(
            denied >= denied_at_least && changed >= 10,
            "{denied} denied, {changed} changed"
        ),
        "enforce" => assert!(
            denied >= denied_at_least && changed >= 20,
            "{denied} denied, {changed} changed"
        ),
        "audit" => assert!(
            denied == 0 && violations >= audited_at_least && changed == 0,
            "{denied} denied, {violations} violations, {changed} changed"
        ),
        _ => assert!(
            denied == 0 && violations >= 20 && changed == 0,
            "{denied} denied, {violations} violations, {changed} changed"
        ),
    }
}

#[tokio::test]
async fn enforce_namespaces_decide_and_mutate_every_fixture_as_check_does() {
    fixtures_in("enforce");
}

#[tokio::test]
async fn warn_namespaces_warn_about_every_fixture_as_check_does() {
    fixtures_in("warn");
}

#[tokio::test]
async fn audit_namespaces_audit_every_fixture_as_check_does() {
    fixtures_in("audit");
}

/// A policy whose expression names a field Pods lack: the type checker
/// must warn about it, or its silence about the others proves nothing.
const MISTYPED: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: mistyped}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  validations: [{expression: "object.spec.containerz.size() > 0"}]
"#;

/// Polls `condition` until `deadline`; the panic shows `log`.
fn poll_until(deadline: Instant, what: &str, log: &Path, mut condition: impl FnMut() -> bool) {
    while !condition() {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("not by the deadline: {what}\n{log}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[tokio::test]
async fn the_policies_type_check_against_the_api_servers_schemas() {
    let Some(plane) = ControlPlane::start() else {
        return;
    };
    let mutating_policies = install_policies(&plane);
    plane.apply(MISTYPED);
    let _controller = plane.start_policy_status_controller();
    let mut policies = Vec::new();
    // Seconds per policy: each expression is checked for every kind the
    // policy matches.
    let deadline = Instant::now() + Duration::from_secs(300);
    let log = plane.dir.join("policy-status-controller.log");
    poll_until(deadline, "every policy's status.observedGeneration", &log, || {
        policies = plane.get(&["validatingadmissionpolicies"])["items"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        policies.len() == 5
            && policies
                .iter()
                .all(|p| p["status"]["observedGeneration"] == p["metadata"]["generation"])
    });
    for policy in &policies {
        let name = policy["metadata"]["name"].as_str().unwrap_or_default();
        let warnings = &policy["status"]["typeChecking"]["expressionWarnings"];
        if name == "mistyped" {
            assert!(
                warnings.to_string().contains("undefined field 'containerz'"),
                "the type checker runs: {policy}"
            );
        } else {
            assert!(warnings.as_array().is_none_or(Vec::is_empty), "{name}: {warnings:#}");
        }
    }
    // MutatingAdmissionPolicy (v1.37) has no status; should it get a type
    // check, it must be as quiet. Before 1.34 there is none.
    if mutating_policies.is_empty() {
        return;
    }
    let mutating = plane.get(&["mutatingadmissionpolicies"])["items"].clone();
    assert_eq!(mutating.as_array().map(Vec::len), Some(mutating_policies.len()), "{mutating}");
    for policy in mutating.as_array().into_iter().flatten() {
        let warnings = &policy["status"]["typeChecking"]["expressionWarnings"];
        assert!(warnings.as_array().is_none_or(Vec::is_empty), "{policy}");
    }
}

/// Without the webhook, `gpu-policy-webhook-annotations` puts the
/// webhook's annotations back on a pod's update, in the API server's own
/// CEL: an overwrite and a removal change nothing, other annotations do.
#[tokio::test]
async fn the_annotation_policy_keeps_the_webhooks_record_on_update() {
    let Some(cluster) = Cluster::start("enforce", &[], &[]) else {
        return;
    };
    if !cluster.mutating.iter().any(|name| name == "gpu-policy-webhook-annotations") {
        println!(
            "skipped: Kubernetes {} serves no MutatingAdmissionPolicy",
            cluster.plane.kube_version()
        );
        return;
    }
    let plane = &cluster.plane;
    // A pod of its own per try: the policy may take a moment to act, and
    // once an overwrite went through, the overwritten value is the record.
    let mut attempt = 0;
    let mut after = Value::Null;
    let record = "visible-devices";
    let needs = r#"{"computeCapability":"7.5"}"#;
    plane.eventually("the policy puts the record back", || {
        attempt += 1;
        let name = format!("recorded-{attempt}");
        plane
            .create(&format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: probe\n  \
                 annotations:\n    gpu-policy.io/mutations: {record}\n    \
                 gpu-policy.io/gpu-needs: '{needs}'\nspec:\n  containers:\n  - name: app\n    \
                 image: x\n"
            ))
            .success();
        let pod = format!("pod/{name}");
        plane
            .kubectl(&["annotate", "--overwrite", "-n", "probe", &pod, "gpu-policy.io/mutations="])
            .success();
        plane
            .kubectl(&["annotate", "-n", "probe", &pod, "gpu-policy.io/gpu-needs-", "team=vision"])
            .success();
        after = plane.get(&["pod", "-n", "probe", &name])["metadata"]["annotations"].clone();
        after["gpu-policy.io/mutations"] == record
    });
    assert_eq!(after["gpu-policy.io/gpu-needs"], needs, "{after}");
    assert_eq!(after["team"], "vision", "{after}");
}
