//! Real writes: pods created for real are stored as the webhook mutated
//! them and stay so when applied again; `kubectl debug` gets its ephemeral
//! container pinned; DRA claims and templates are admitted or denied as
//! `gpu-policy check` decides them, and a pod's claims are resolved from the
//! webhook's watches.
//!
//! Every object is compared with what `check -o json` says of it: the
//! decision, the denial message, the warnings, and the fields gpu-policy
//! writes into a pod (the mutations annotation, `runtimeClassName`,
//! `affinity`, every container's `env`). What the API server adds itself
//! (defaults, default tolerations) and what only a cluster knows (a
//! RuntimeClass's overhead) are not compared.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::control_plane::{
    ControlPlane, MODE_LABEL, SETTLE, Webhook, WebhookOptions, policy_fields,
};
use crate::support::fixtures::objects_of;
use crate::support::gpu_pod;
use crate::support::process::{self, Run};
use crate::support::server::patched;

/// The label the API server requires on a namespace before a claim there
/// may set `adminAccess` (DRAAdminAccess); without it the API server
/// refuses such a claim itself, before any webhook is asked.
const ADMIN_ACCESS_LABEL: &str = "resource.kubernetes.io/admin-access=true";

const CUDA: &str = "nvidia/cuda:12.6.3-base-ubuntu24.04";
/// `kubectl apply` client-side, and server-side.
const CLIENT: &str = "--server-side=false";
const SERVER: &str = "--server-side=true";

/// What one admission came to, as the user sees it.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// The denial message, after `denied the request: `.
    denial: Option<String>,
    /// The warnings, in order, each once (kubectl prints a warning once).
    warnings: Vec<String>,
    /// [`written`] of the stored pod; null for other kinds.
    written: Value,
}

fn label(object: &Value) -> String {
    let [kind, namespace, name] = ["/kind", "/metadata/namespace", "/metadata/name"]
        .map(|field| object.pointer(field).and_then(Value::as_str).unwrap_or("?"));
    format!("{kind} {namespace}/{name}")
}

fn dedup(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

/// What `gpu-policy check -o json --mode MODE` says of each object of
/// `input`, checked together (the claims of its pods resolve from the
/// templates, claims and DeviceClasses among them).
fn check(input: &[Value], mode: &str) -> Vec<Outcome> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": input}).to_string();
    let args = ["check", "-o", "json", "--mode", mode, "-f", "-"];
    let run = process::gpu_policy(&args, Some(&list));
    assert!(run.code == 0 || run.code == 1, "check failed: {run:?}");
    let reports = run.json();
    assert_eq!(reports.len(), input.len(), "{reports:?}");
    let text = |v: &Value| v.as_str().expect("a string").to_owned();
    input
        .iter()
        .zip(&reports)
        .map(|(object, report)| {
            // As the webhook words a denial: one prefix, `[rule] body`s.
            let violation = |v: &Value| {
                let body = text(&v["message"]).replacen("gpu-policy: ", "", 1);
                format!("[{}] {body}", text(&v["rule"]))
            };
            let violations = report["violations"].as_array().expect("violations");
            let parts: Vec<String> = violations.iter().map(violation).collect();
            let denial = (report["allowed"] == false).then(|| match report.get("error") {
                Some(error) => text(error),
                None => format!("gpu-policy: {}", parts.join("; ")),
            });
            let warnings = report["warnings"].as_array().expect("warnings");
            let written = if object["kind"] == "Pod" && denial.is_none() {
                let patch = serde_json::from_value(report["patch"].clone()).expect("JSON Patch");
                policy_fields(&patched(object, &patch))
            } else {
                Value::Null
            };
            Outcome { denial, warnings: dedup(warnings.iter().map(text)), written }
        })
        .collect()
}

/// What a `kubectl create -o json` (or its dry run, or `kubectl debug`)
/// came to.
fn outcome(run: &Run) -> Outcome {
    let warnings = run.stderr.lines().filter_map(|l| l.strip_prefix("Warning: "));
    let (denial, written) = if run.code == 0 {
        let stored = run.value();
        (None, if stored["kind"] == "Pod" { policy_fields(&stored) } else { Value::Null })
    } else {
        // Any other refusal (the API server's own) is kept whole, so that
        // it shows in the comparison.
        let denial = match run.stderr.split_once("denied the request: ") {
            Some((_, message)) => message,
            None => &run.stderr,
        };
        (Some(denial.trim_end().to_owned()), Value::Null)
    };
    Outcome { denial, warnings: dedup(warnings.map(str::to_owned)), written }
}

/// Checks `input` in `mode`, then creates its objects from `first` on (the
/// ones before are context, created already) for real, one by one, and
/// asserts that each fares with the API server and the webhook as `check`
/// said. What depends on the webhook's watches (a claim, a DeviceClass or a
/// RuntimeClass created just before) is awaited with server-side dry runs
/// for up to [`SETTLE`]; the real create is compared whatever they gave.
/// Returns the stored objects (null when denied).
fn create_as_check_says(
    cluster: &ControlPlane,
    input: &[Value],
    first: usize,
    mode: &str,
) -> Vec<Value> {
    let expected = check(input, mode);
    let dry_run = ["create", "--dry-run=server", "-o", "json", "-f", "-"];
    let mut stored = Vec::new();
    for (object, want) in input.iter().zip(&expected).skip(first) {
        let text = object.to_string();
        let deadline = Instant::now() + SETTLE;
        while Instant::now() < deadline
            && outcome(&cluster.kubectl_stdin(&dry_run, Some(&text))) != *want
        {
            std::thread::sleep(Duration::from_millis(200));
        }
        let run = cluster.create(&text);
        let what = format!("{}: the API server (left), check (right)", label(object));
        assert_eq!(outcome(&run), *want, "{what}");
        stored.push(run.stdout.parse().unwrap_or_default()); // null when denied
    }
    stored
}

/// The webhook installed, the `nvidia` RuntimeClass created, and both in
/// effect for pods of the enforce namespace `namespace` (created).
async fn install(cluster: &ControlPlane, namespace: &str) -> Webhook {
    let webhook = Webhook::install(cluster, WebhookOptions::default()).await;
    cluster.namespace(namespace, Some("enforce"));
    cluster.apply(RUNTIME_CLASS);
    webhook.wait_effective(cluster, namespace);
    webhook
}

/// Whether one decision line of the webhook's log has every one of `parts`.
fn logged(webhook: &Webhook, parts: &[&str]) -> bool {
    let has_all = |line: &str| parts.iter().all(|part| line.contains(part));
    webhook.log().lines().any(has_all)
}

/// The documents of a YAML stream.
fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple(yaml).unwrap_or_else(|err| panic!("{err}:\n{yaml}"))
}

/// `kubectl debug` of pod `ml/POD`, adding the ephemeral container `name`.
fn debug(cluster: &ControlPlane, pod: &str, name: &str, image: &str, profile: &str) -> Run {
    let (image, profile) = (format!("--image={image}"), format!("--profile={profile}"));
    let flags = ["-c", name, &image, &profile, "--attach=false", "-q"];
    cluster.kubectl(&[&["debug", "-n", "ml", pod][..], &flags].concat())
}

/// The pin gpu-policy writes into a container without a GPU.
fn pinned() -> Value {
    json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])
}

/// The `env` of the container `name` of a stored pod.
fn env_of<'a>(pod: &'a Value, name: &str) -> &'a Value {
    let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
    let mut named = containers.filter(|c| c["name"] == name);
    let container = named.next().unwrap_or_else(|| panic!("no {name}: {pod}"));
    &container["env"]
}

// ---------------------------------------------------------------------------
// Pods written for real.

/// The `nvidia` RuntimeClass with an overhead and a node selector: the API
/// server's RuntimeClass plugin, which checks a pod's overhead against its
/// class after the webhooks, must accept what gpu-policy injected.
const RUNTIME_CLASS: &str = "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  \
                             name: nvidia\nhandler: nvidia\noverhead:\n  podFixed:\n    \
                             cpu: 250m\n    memory: 64Mi\nscheduling:\n  nodeSelector:\n    \
                             nvidia.com/gpu.present: \"true\"\n";

/// A CUDA image without a GPU: it would see every card.
fn cpu_pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ml\nspec:\n  \
         containers:\n  - name: app\n    image: {CUDA}\n"
    )
}

#[tokio::test]
async fn pods_are_stored_mutated_and_applying_them_again_changes_nothing() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let webhook = install(&cluster, "ml").await;

    // Written with client-side and with server-side apply.
    let manifests = [
        ("train", gpu_pod().name("train").namespace("ml").container("app").manifest(), CLIENT),
        ("preprocess", cpu_pod("preprocess"), CLIENT),
        (
            "train-ssa",
            gpu_pod().name("train-ssa").namespace("ml").container("app").manifest(),
            SERVER,
        ),
        ("preprocess-ssa", cpu_pod("preprocess-ssa"), SERVER),
    ];
    let apply = |manifest: &str, flag: &str| {
        let run = cluster.kubectl_stdin(&["apply", flag, "-f", "-"], Some(manifest));
        run.success()
    };
    let get = |name: &str| cluster.get(&["pod", "-n", "ml", name]);
    for (name, manifest, flag) in &manifests {
        let run = apply(manifest, flag);
        assert!(!run.stderr.contains("Warning"), "{name}: {}", run.stderr);
        let stored = get(name);
        let expected = check(&documents(manifest), "enforce");
        let differ = format!("{name}: stored (left) and check (right) differ");
        assert_eq!(policy_fields(&stored), expected[0].written, "{differ}");
        let mutations = &stored["metadata"]["annotations"]["gpu-policy.io/mutations"];
        if name.starts_with("preprocess") {
            // The CUDA container without a GPU is pinned to void.
            assert_eq!(*env_of(&stored, "app"), pinned(), "{name}");
            assert_eq!(*mutations, "visible-devices", "{name}");
        } else {
            // The GPU pod runs under the class, with what the class brings,
            // which the API server's RuntimeClass plugin checked after the
            // webhook.
            let spec = &stored["spec"];
            let class = ["runtimeClassName", "overhead", "nodeSelector"].map(|f| spec[f].clone());
            let overhead = json!({"cpu": "250m", "memory": "64Mi"});
            let selector = json!({"nvidia.com/gpu.present": "true"});
            assert_eq!(class, [json!("nvidia"), overhead, selector], "{name}");
            assert!(env_of(&stored, "app").is_null(), "{stored}");
            let mutations = mutations.as_str().unwrap_or_default();
            assert!(mutations.starts_with("runtime-class"), "{mutations}");
        }
    }

    // Applying the same manifests again: server-side apply always sends a
    // PATCH of the pod (an UPDATE, which the webhook does not receive: pods
    // are registered for CREATE); client-side apply sends one only when its
    // three-way diff is not empty (the GPU pod's `nvidia.com/gpu: 1` differs
    // from the stored quantity "1"; the CPU pod is left "unchanged"). Either
    // way the API server finds nothing to change and writes nothing.
    let patches = |name: &str| {
        let events = cluster.audit_events();
        let patch_of = |event: &&Value| {
            let object = &event["objectRef"];
            event["verb"] == "patch"
                && object["resource"] == "pods"
                && object["subresource"].is_null()
                && object["name"] == name
                && event["responseStatus"]["code"] == 200
        };
        events.iter().filter(patch_of).count()
    };
    let mut updates = Vec::new();
    for (name, manifest, flag) in &manifests {
        let (before, patched_before) = (get(name), patches(name));
        let run = apply(manifest, flag);
        let after = get(name);
        let fields = ["/metadata/resourceVersion", "/metadata/generation"];
        for field in fields.into_iter().chain(["/metadata/annotations", "/spec"]) {
            let (now, then) = (after.pointer(field), before.pointer(field));
            assert_eq!(now, then, "{name}: {field}");
        }
        if !run.stdout.contains("unchanged") {
            cluster.eventually(&format!("the audit log has the PATCH of {name}"), || {
                patches(name) > patched_before
            });
            updates.push(*name);
        }
    }
    assert_eq!(updates, ["train", "train-ssa", "preprocess-ssa"]);
    let pod_update = [r#""kind":"Pod""#, r#""operation":"UPDATE""#];
    assert!(!logged(&webhook, &pod_update), "{}", webhook.log());

    // A real change on apply (a label) is written; the mutations stay.
    let before = get("preprocess");
    let labelled = cpu_pod("preprocess").replace("ml\n", "ml\n  labels: {stage: two}\n");
    apply(&labelled, CLIENT);
    let after = get("preprocess");
    let version = "/metadata/resourceVersion";
    assert_ne!(after.pointer(version), before.pointer(version));
    assert_eq!(
        (&after["metadata"]["labels"]["stage"], &after["spec"]),
        (&json!("two"), &before["spec"])
    );

    // `kubectl debug` adds an ephemeral container through the
    // pods/ephemeralcontainers subresource (an UPDATE): it holds no GPU,
    // even in a GPU pod, and is stored pinned.
    let run = debug(&cluster, "train", "dbg", CUDA, "general").success();
    assert!(!run.stderr.contains("Warning"), "{}", run.stderr);
    let stored = get("train");
    let ephemeral = stored["spec"]["ephemeralContainers"][0].clone();
    assert_eq!(ephemeral["name"], "dbg", "{stored}");
    let unpinned = format!("the debug container is stored unpinned: {ephemeral}");
    assert_eq!(ephemeral["env"], pinned(), "{unpinned}");
    // `check` of the pod as stored finds nothing more to change.
    let again = check(std::slice::from_ref(&stored), "enforce");
    assert_eq!(again[0].denial, None);
    assert_eq!(again[0].written, policy_fields(&stored), "check would change the stored pod");

    // A privileged debug container (`--profile=sysadmin`) would see every
    // card of the node: denied, with the message check gives for the pod
    // with that container.
    let refused = debug(&cluster, "train", "root", "busybox:1.36", "sysadmin");
    assert_ne!(refused.code, 0, "a privileged debug container was admitted");
    let mut with_root = stored;
    let root =
        json!({"name": "root", "image": "busybox:1.36", "securityContext": {"privileged": true}});
    let ephemerals = with_root["spec"]["ephemeralContainers"].as_array_mut();
    ephemerals.expect("ephemeral containers").push(root);
    let expected = check(&[with_root], "enforce");
    assert!(expected[0].denial.is_some(), "check denies it: {expected:?}");
    assert_eq!(outcome(&refused).denial, expected[0].denial);
    // A second debug container is pinned; the first is left as it was.
    debug(&cluster, "train", "dbg2", "busybox:1.36", "general").success();
    let ephemerals = get("train")["spec"]["ephemeralContainers"].clone();
    assert_eq!(ephemerals[0], ephemeral);
    assert_eq!(ephemerals[1]["name"], "dbg2");
    assert_eq!(ephemerals[1]["env"], pinned());
}

/// When R1 replaced a value the author wrote, applying the same manifest
/// again asks to put it back; the webhook makes its pin again on the update
/// (docs/policy.md, "Pod updates"), so the apply succeeds, client- and
/// server-side, and stores nothing new. Recreated (`kubectl replace
/// --force`), the pod is pinned again.
#[tokio::test]
async fn a_replaced_author_value_survives_a_second_apply() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let _webhook = install(&cluster, "ml").await;
    let all = format!("{CUDA}\n    env:\n    - {{name: NVIDIA_VISIBLE_DEVICES, value: all}}\n");
    for (name, flag) in [("client", CLIENT), ("server", SERVER)] {
        let manifest = cpu_pod(name).replace(&format!("{CUDA}\n"), &all);
        let apply = ["apply", flag, "-f", "-"];
        cluster.kubectl_stdin(&apply, Some(&manifest)).success();
        let before = cluster.get(&["pod", "-n", "ml", name]);
        assert_eq!(*env_of(&before, "app"), pinned());
        let again = cluster.kubectl_stdin(&apply, Some(&manifest));
        assert_eq!(again.code, 0, "{flag}: {again:?}");
        let after = cluster.get(&["pod", "-n", "ml", name]);
        assert_eq!(after["spec"], before["spec"], "{flag}");
        assert_eq!(
            after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
            "{flag}"
        );
        // Recreated, it is pinned again.
        cluster.kubectl_stdin(&["replace", "--force", "-f", "-"], Some(&manifest)).success();
        let recreated = cluster.get(&["pod", "-n", "ml", name]);
        assert_ne!(recreated["metadata"]["uid"], before["metadata"]["uid"]);
        assert_eq!(*env_of(&recreated, "app"), pinned(), "{flag}");
    }
}

// ---------------------------------------------------------------------------
// DRA: claims and templates, and pods that use them.

/// Claims and templates that R2 bounds (apiVersion and namespace added by
/// [`bounded_claims`]). The first [`BREAKING`] break it; the last is what
/// the scheduler creates for an `nvidia.com/gpu` limit that DRA serves.
const BOUNDED_CLAIMS: &str = r#"
kind: ResourceClaimTemplate
metadata: {name: every-gpu}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}}]}}}
---
kind: ResourceClaim
metadata: {name: one-or-all}
spec: {devices: {requests: [{name: gpu, firstAvailable: [
  {name: one-mig, deviceClassName: mig.nvidia.com},
  {name: all-gpus, deviceClassName: gpu.nvidia.com, allocationMode: All}]}]}}
---
kind: ResourceClaim
metadata: {name: nine-gpus}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 9}}]}}
---
kind: ResourceClaimTemplate
metadata: {name: five-and-five}
spec: {spec: {devices: {requests: [
  {name: big, exactly: {deviceClassName: gpu.nvidia.com, count: 5}},
  {name: more, exactly: {deviceClassName: gpu.nvidia.com, count: 5}}]}}}
---
kind: ResourceClaim
metadata: {name: watch-every-gpu}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, adminAccess: true}}]}}
---
kind: ResourceClaim
metadata: {name: two-gpus}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}]}}
---
kind: ResourceClaim
metadata: {name: every-nic}
spec: {devices: {requests: [{name: nic, exactly: {deviceClassName: rdma.example.com, allocationMode: All}}]}}
---
kind: ResourceClaim
metadata:
  name: gpu-full-pod-gpu
  annotations: {resource.kubernetes.io/extended-resource-claim: "true"}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 16}}]}}
"#;
const BREAKING: usize = 5;

/// [`BOUNDED_CLAIMS`] in `namespace`, those the cluster's release can
/// hold, each with whether it breaks R2: before 1.34 the API server drops
/// `firstAvailable` and `adminAccess` (alpha gates).
fn bounded_claims(cluster: &ControlPlane, namespace: &str) -> Vec<(Value, bool)> {
    let mut objects = documents(BOUNDED_CLAIMS);
    for object in &mut objects {
        object["apiVersion"] = json!("resource.k8s.io/v1");
        object["metadata"]["namespace"] = json!(namespace);
    }
    objects
        .into_iter()
        .enumerate()
        .map(|(index, object)| (object, index < BREAKING))
        .filter(|(object, _)| {
            let text = object.to_string();
            cluster.minor() >= 34
                || !(text.contains("firstAvailable") || text.contains("adminAccess"))
        })
        .collect()
}

/// A DeviceClass selecting the devices of `driver`, with more `spec`.
fn device_class(name: &str, driver: &str, mut spec: Value) -> Value {
    let selector = format!("device.driver == \"{driver}\"");
    spec["selectors"] = json!([{"cel": {"expression": selector}}]);
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
           "metadata": {"name": name}, "spec": spec})
}

/// A ResourceClaimTemplate in `ml` with one request of one device of `class`.
fn template(name: &str, class: &str) -> Value {
    let request = json!({"name": "dev", "exactly": {"deviceClassName": class}});
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": name, "namespace": "ml"},
           "spec": {"spec": {"devices": {"requests": [request]}}}})
}

/// A pod in `ml` whose containers (CUDA images) are `(name, whether it uses
/// the pod claim "gpu")`, that claim made from `template` if any.
fn claim_pod(name: &str, containers: &[(&str, bool)], template: Option<&str>) -> Value {
    let containers: Vec<Value> = containers
        .iter()
        .map(|&(container, uses)| match uses {
            true => json!({"name": container, "image": CUDA, "resources": {"claims": [{"name": "gpu"}]}}),
            false => json!({"name": container, "image": CUDA}),
        })
        .collect();
    let claims = template.map(|t| json!([{"name": "gpu", "resourceClaimTemplateName": t}]));
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
           "spec": {"containers": containers, "resourceClaims": claims.unwrap_or(json!([]))}})
}

#[tokio::test]
async fn dra_claims_and_templates_are_admitted_or_denied_as_check_says() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let webhook = install(&cluster, "strict").await;

    // The DRA driver's quickstart specs (tests/fixtures/20-24), their
    // namespaces opted in, with the driver's DeviceClasses (gpu.nvidia.com
    // serves nvidia.com/gpu limits too, as fixture 24 says).
    // DeviceClass.extendedResourceName arrives in 1.34.
    let extended = match cluster.minor() {
        ..34 => json!({}),
        _ => json!({"extendedResourceName": "nvidia.com/gpu"}),
    };
    let classes = vec![
        device_class("gpu.nvidia.com", "gpu.nvidia.com", extended),
        device_class("mig.nvidia.com", "gpu.nvidia.com", json!({})),
    ];
    create_as_check_says(&cluster, &classes, 0, "enforce");
    for prefix in ["20", "21", "22", "23", "24"] {
        let objects = objects_of(prefix).into_iter().filter(|o| o["kind"] != "Namespace");
        let input: Vec<Value> = classes.iter().cloned().chain(objects).collect();
        let namespace = input[2]["metadata"]["namespace"].as_str().expect("namespace");
        cluster.namespace(namespace, Some("enforce"));
        let stored = create_as_check_says(&cluster, &input, classes.len(), "enforce");
        assert!(stored.iter().all(|s| !s.is_null()), "fixture {prefix}: all admitted");
    }

    // Hand-made claims and templates that R2 bounds, in an enforce and in a
    // warn namespace; both allow adminAccess as far as the API server is
    // concerned, so that gpu-policy's allowlist is the only bar.
    for (namespace, mode) in [("strict", "enforce"), ("lenient", "warn")] {
        cluster.namespace(namespace, Some(mode)); // "strict" stays enforce
        let allow_admin = ["label", "namespace", namespace, ADMIN_ACCESS_LABEL];
        cluster.kubectl(&allow_admin).success();
        let (input, breaking): (Vec<Value>, Vec<bool>) =
            bounded_claims(&cluster, namespace).into_iter().unzip();
        for (index, said) in check(&input, mode).iter().enumerate() {
            let breaks = match mode {
                "enforce" => said.denial.is_some(),
                _ => said.warnings.iter().any(|w| w.contains("would deny")),
            };
            let what = label(&input[index]);
            assert_eq!(breaks, breaking[index], "check: {what} {said:?}");
        }
        let stored = create_as_check_says(&cluster, &input, 0, mode);
        let admitted = stored.iter().filter(|s| !s.is_null()).count();
        let denied = match mode {
            "enforce" => breaking.iter().filter(|b| **b).count(),
            _ => 0,
        };
        assert_eq!(admitted, input.len() - denied, "{mode}");
    }

    // A claim admitted under warn stays manageable once the namespace is
    // tightened: an UPDATE that leaves its spec alone (a label) is let
    // through unchecked, and the claim can be deleted.
    let enforce = format!("{MODE_LABEL}=enforce");
    let tighten = ["label", "namespace", "lenient", &enforce, "--overwrite"];
    cluster.kubectl(&tighten).success();
    let again = bounded_claims(&cluster, "lenient")
        .into_iter()
        .map(|(object, _)| object)
        .find(|object| object["metadata"]["name"] == "nine-gpus")
        .expect("the claim nine-gpus")
        .to_string()
        .replace("nine-gpus", "nine");
    let dry_run = ["create", "--dry-run=server", "-f", "-"];
    cluster.eventually("the enforce webhook decides in lenient", || {
        let run = cluster.kubectl_stdin(&dry_run, Some(&again));
        run.stderr.contains("webhook \"enforce.gpu-policy.io\" denied")
    });
    let claim = ["resourceclaim", "-n", "lenient", "nine-gpus"];
    let label_it = [&["label"][..], &claim, &["released=true"]].concat();
    cluster.kubectl(&label_it).success();
    let delete = [&["delete"][..], &claim].concat();
    cluster.kubectl(&delete).success();
    let unchecked = [r#""name":"nine-gpus""#, "UPDATE", "ignored"];
    assert!(logged(&webhook, &unchecked), "{}", webhook.log());
}

#[tokio::test]
async fn pod_claims_resolve_from_the_webhook_watches() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let _webhook = install(&cluster, "ml").await;
    let class = |name: &str, driver: &str| device_class(name, driver, json!({}));
    let mut input = vec![
        class("gpu.nvidia.com", "gpu.nvidia.com"),
        class("cpu.example.com", "cpu.example.com"),
        template("one-gpu", "gpu.nvidia.com"),
        template("one-cpu", "cpu.example.com"),
        template("custom-gpu", "my-gpus.example.com"),
        claim_pod("trainer", &[("train", true), ("shipper", false)], Some("one-gpu")),
        claim_pod("cpu-claimed", &[("ctr", true)], Some("one-cpu")),
        claim_pod("unclaimed", &[("ctr", false)], None),
        claim_pod("unresolved", &[("ctr", true)], Some("missing")),
        // No DeviceClass says yet that my-gpus.example.com hands out GPUs.
        claim_pod("custom-before", &[("ctr", true)], Some("custom-gpu")),
    ];
    let stored = create_as_check_says(&cluster, &input, 0, "enforce");
    let pod = |name: &str| {
        let mut named = stored.iter().filter(|s| s["metadata"]["name"] == name);
        named.next().unwrap_or_else(|| panic!("{name}: not admitted"))
    };
    // The claimed container is a GPU container: not pinned, and the pod
    // gets no runtime class (the claimed devices come through CDI).
    let trainer = pod("trainer");
    assert!(env_of(trainer, "train").is_null(), "{trainer}");
    assert_eq!(*env_of(trainer, "shipper"), pinned());
    assert!(trainer["spec"]["runtimeClassName"].is_null());
    // A claim of a class that hands out no GPU, no claim, a claim that
    // cannot be resolved, a class not known to hand out GPUs: pinned.
    for name in ["cpu-claimed", "unclaimed", "unresolved", "custom-before"] {
        assert_eq!(*env_of(pod(name), "ctr"), pinned(), "{name}");
    }

    // The DeviceClass arrives, and says it hands out GPUs: from then on the
    // same template holds a GPU.
    input.push(class("my-gpus.example.com", "gpu.nvidia.com"));
    input.push(claim_pod("custom-after", &[("ctr", true)], Some("custom-gpu")));
    let stored = create_as_check_says(&cluster, &input, input.len() - 2, "enforce");
    assert!(env_of(&stored[1], "ctr").is_null(), "{}", stored[1]);
}
