//! `gpu-policy manifests`, `webhook-config/` and the Dockerfile agree with
//! the program.

use std::process::Command;

use clap::Parser;
use gpu_policy::admission::Endpoint;
use gpu_policy::cli::Cli;
use gpu_policy::kubernetes_version::{KubernetesVersion, NEWEST, OLDEST};
use gpu_policy::settings::{Config, Settings};
use rstest::rstest;
use serde_json::Value;

use crate::support::kubernetes_validate::{newest_version, validate_strict};
use crate::support::process::{self, Run};

/// `gpu-policy manifests ARGS`, which must succeed: its YAML and objects.
fn manifests(args: &[&str]) -> (String, Vec<Value>) {
    let text = run_manifests(args).success().stdout;
    let objects: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    (text, objects)
}

fn run_manifests(args: &[&str]) -> Run {
    let args: Vec<&str> = std::iter::once("manifests").chain(args.iter().copied()).collect();
    process::gpu_policy(&args, None)
}

/// The clientConfig of every webhook entry, mutating first.
fn client_configs(objects: &[Value]) -> Vec<&Value> {
    ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
        .into_iter()
        .flat_map(|kind| find(objects, kind)["webhooks"].as_array().expect("webhooks"))
        .map(|webhook| &webhook["clientConfig"])
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"))
}

/// The resources of every rule of `webhook`, in order.
fn rule_resources(webhook: &Value) -> Vec<&str> {
    webhook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["resources"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect()
}

#[test]
fn checked_in_webhook_config_is_what_the_program_prints() {
    let (printed, _) = manifests(&[]);
    let checked_in = std::fs::read_to_string("webhook-config/gpu-policy.yaml").expect("checked in");
    assert!(
        printed == checked_in,
        "webhook-config/gpu-policy.yaml is stale: run `cargo run -- manifests > webhook-config/gpu-policy.yaml`"
    );
    let kustomization =
        std::fs::read_to_string("webhook-config/kustomization.yaml").expect("kustomization");
    let kustomization: Value = serde_saphyr::from_str(&kustomization).expect("YAML");
    assert_eq!(kustomization["resources"], serde_json::json!(["gpu-policy.yaml"]));
}

/// Every object `gpu-policy manifests` prints, with each set of arguments
/// (one `#[case]` each), is valid against the strict schemas of the oldest
/// supported Kubernetes release and of the newest one kubernetes-validate
/// ships: no unknown field, no wrong type, no kind the release does not serve.
/// Every supported release: the install and the admission policies
/// rendered for it (`--kube-version`) validate against that release's own
/// schemas, the mutating policies included where it serves them (v1beta1
/// in 1.34 and 1.35, v1 from 1.36).
#[rstest]
#[case::install(&[])]
#[case::admission_policies(&["--admission-policies", "--mutating-policies"])]
#[case::webhook_url(&["--webhook-url", "https://127.0.0.1:8443"])]
fn manifests_for_each_release_pass_its_strict_schema_validation(#[case] args: &[&str]) {
    let shipped = KubernetesVersion::parse(&newest_version()).expect("a release");
    assert!(shipped >= NEWEST, "kubernetes-validate has no schemas of Kubernetes {NEWEST}");
    for release in KubernetesVersion::supported() {
        let version = release.to_string();
        let mut all = args.to_vec();
        all.extend(["--kube-version", &version]);
        let (yaml, objects) = manifests(&all);
        let mutating = objects.iter().filter(|o| o["kind"] == "MutatingAdmissionPolicy").count();
        if args.contains(&"--mutating-policies") {
            assert_eq!(mutating > 0, release.mutating_policies().is_some(), "{version}");
        }
        if let Err(problems) = validate_strict(&yaml, &version) {
            panic!(
                "`gpu-policy manifests {}` against Kubernetes {version}:\n{}",
                all.join(" "),
                problems.join("\n")
            );
        }
    }
}

/// The claim rules name the release's `resource.k8s.io` version: v1beta1
/// before 1.34, v1 from it; the default is the newest release.
#[test]
fn claim_rules_follow_the_kube_version() {
    let claim_versions = |args: &[&str]| -> Vec<String> {
        let (_, objects) = manifests(args);
        let mut versions: Vec<String> =
            ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
                .into_iter()
                .flat_map(|kind| {
                    find(&objects, kind)["webhooks"].as_array().cloned().unwrap_or_default()
                })
                .flat_map(|webhook| webhook["rules"].as_array().cloned().unwrap_or_default())
                .filter(|rule| rule["apiGroups"] == serde_json::json!(["resource.k8s.io"]))
                .map(|rule| rule["apiVersions"].to_string())
                .collect();
        versions.dedup();
        versions
    };
    assert_eq!(claim_versions(&["--kube-version", "v1.32.13"]), [r#"["v1beta1"]"#]);
    assert_eq!(claim_versions(&["--kube-version", "1.33"]), [r#"["v1beta1"]"#]);
    assert_eq!(claim_versions(&["--kube-version", "1.34"]), [r#"["v1"]"#]);
    assert_eq!(claim_versions(&[]), [r#"["v1"]"#]);
}

/// What a release does not serve is said on stderr, and the output is
/// still what it serves; a release before the supported range is refused
/// on one line.
#[test]
fn kube_version_notes_and_refusals() {
    let run =
        run_manifests(&["--admission-policies", "--mutating-policies", "--kube-version", "1.33"])
            .success();
    assert_eq!(
        run.stderr.trim(),
        "gpu-policy: note: no MutatingAdmissionPolicies: Kubernetes 1.33 does not serve them \
         (v1beta1 from 1.34, when turned on; v1 from 1.36); the webhook makes their changes"
    );
    assert!(!run.stdout.contains("MutatingAdmissionPolicy"));
    let run =
        run_manifests(&["--admission-policies", "--mutating-policies", "--kube-version", "1.34"])
            .success();
    let notes: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[1].starts_with("gpu-policy: note: gpu-policy-visible-devices left out: the CEL of Kubernetes 1.34 lacks"), "{notes:?}");
    assert!(!run.stdout.contains("name: gpu-policy-visible-devices\n"));
    let run = run_manifests(&["--kube-version", "1.31"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr.lines().next(),
        Some(
            "error: invalid value '1.31' for '--kube-version <VERSION>': Kubernetes 1.31 is older than \
         the oldest supported release, 1.32 (supported: 1.32 to 1.37)"
        )
    );
}

/// The schema check above can fail: an unknown field, a wrong type and a
/// kind the release does not serve are each reported, the last although
/// kubernetes-validate itself only warns about it.
#[test]
fn strict_schema_validation_rejects_what_kubernetes_would() {
    let version = OLDEST.to_string();
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
    assert_eq!(validate_strict(config_map, &version), Ok(()));
    for (yaml, expected) in [
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nsurprise: 1\n",
            "'surprise' was unexpected",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 1}\n",
            "data.a: 1 is not of type 'string'",
        ),
        // MutatingAdmissionPolicy v1 is GA in 1.36: 1.32 has no schema for it.
        (
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata: {name: x}\n",
            "Couldn't find schema for kind MutatingAdmissionPolicy",
        ),
    ] {
        let stream = format!("{config_map}---\n{yaml}");
        let problems = validate_strict(&stream, &version).expect_err(yaml);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains(expected), "{problems:?}");
    }
}

#[test]
fn the_install_has_every_object() {
    let (_, objects) = manifests(&[]);
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "Secret",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
}

/// What the server reads cluster-wide, and nothing it does not: the DRA
/// caches list and watch (ResourceSlices among them), pods are listed (the
/// namespace guard) and read one at a time (a claim made for a pod).
#[test]
fn the_cluster_role_grants_what_the_server_reads() {
    let (_, objects) = manifests(&[]);
    let rules = find(&objects, "ClusterRole")["rules"].as_array().cloned().unwrap_or_default();
    let verbs = |group: &str, resource: &str| -> Vec<String> {
        rules
            .iter()
            .filter(|r| r["apiGroups"] == serde_json::json!([group]))
            .filter(|r| {
                r["resources"].as_array().is_some_and(|list| list.iter().any(|x| x == resource))
            })
            .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(verbs("", "pods"), ["get", "list"]);
    for resource in ["resourceclaims", "resourceclaimtemplates"] {
        assert_eq!(verbs("resource.k8s.io", resource), ["get", "list", "watch"], "{resource}");
    }
    for resource in ["deviceclasses", "resourceslices"] {
        assert_eq!(verbs("resource.k8s.io", resource), ["list", "watch"], "{resource}");
    }
}

#[test]
fn webhook_entries_follow_the_spec() {
    let (_, objects) = manifests(&[]);
    let mutating = &find(&objects, "MutatingWebhookConfiguration")["webhooks"];
    let validating = &find(&objects, "ValidatingWebhookConfiguration")["webhooks"];
    let all: Vec<&Value> =
        mutating.as_array().into_iter().chain(validating.as_array()).flatten().collect();
    let paths: Vec<&str> =
        all.iter().filter_map(|w| w["clientConfig"]["service"]["path"].as_str()).collect();
    let expected: Vec<&str> = Endpoint::ALL.iter().map(|e| e.path()).collect();
    assert_eq!(paths, expected);
    for webhook in &all {
        assert_eq!(webhook["sideEffects"], "None", "{webhook}");
        assert_eq!(webhook["admissionReviewVersions"], serde_json::json!(["v1"]));
        assert_eq!(webhook["timeoutSeconds"], 5);
        assert_eq!(webhook["matchPolicy"], "Equivalent");
        let excluded =
            webhook["namespaceSelector"]["matchExpressions"].as_array().into_iter().flatten().any(
                |e| {
                    e["key"] == "kubernetes.io/metadata.name"
                        && e["operator"] == "NotIn"
                        && e["values"][0] == "gpu-policy"
                },
            );
        assert!(excluded, "own namespace not excluded: {webhook}");
        assert!(webhook["clientConfig"].get("caBundle").is_none());
    }
    let policies: Vec<&str> = all.iter().filter_map(|w| w["failurePolicy"].as_str()).collect();
    assert_eq!(policies, vec!["Fail", "Fail", "Ignore", "Ignore", "Fail"]);
    assert_eq!(mutating[0]["reinvocationPolicy"], "IfNeeded");
    // A pod's own updates, narrowed by the match condition every webhook
    // that takes pods carries.
    for webhook in all.iter().filter(|w| rule_resources(w).contains(&"pods")) {
        assert_eq!(
            webhook["matchConditions"][0]["name"],
            gpu_policy::install::POD_UPDATE_CONDITION_NAME,
            "{webhook}"
        );
    }
    assert_eq!(
        rule_resources(&mutating[0]),
        vec!["pods", "pods/ephemeralcontainers", "pods", "resourceclaims"]
    );
    assert_eq!(
        mutating[0]["rules"][2],
        serde_json::json!({"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["UPDATE"], "resources": ["pods"], "scope": "Namespaced"})
    );
    // A claim made for a pod gets gpu-policy's selector at its creation:
    // v1 only, CREATE only, where pods are mutated.
    assert_eq!(
        mutating[0]["rules"][3],
        serde_json::json!({"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["resourceclaims"], "scope": "Namespaced"})
    );
    let validated = rule_resources(&validating[0]);
    for kind in [
        "pods",
        "deployments",
        "replicasets",
        "statefulsets",
        "daemonsets",
        "jobs",
        "cronjobs",
        "replicationcontrollers",
        "podtemplates",
    ] {
        assert!(validated.contains(&kind), "{kind} not validated");
    }
    // Claims and templates: on the three validating webhooks, v1 only
    // (older versions arrive converted).
    for webhook in validating.as_array().into_iter().flatten().take(3) {
        let claims = webhook["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["apiGroups"] == serde_json::json!(["resource.k8s.io"]))
            .unwrap_or_else(|| panic!("no claim rule: {webhook}"));
        assert_eq!(
            claims["resources"],
            serde_json::json!(["resourceclaims", "resourceclaimtemplates"])
        );
        assert_eq!(claims["apiVersions"], serde_json::json!(["v1"]));
        assert_eq!(claims["operations"], serde_json::json!(["CREATE", "UPDATE"]));
        assert_eq!(webhook["matchPolicy"], "Equivalent");
    }
    let guard = &validating[3];
    assert_eq!(guard["objectSelector"]["matchExpressions"][0]["key"], "gpu-policy.io/mode");
    assert_eq!(guard["objectSelector"]["matchExpressions"][0]["operator"], "Exists");
}

#[test]
fn flags_change_what_they_say() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        .expect("write");
    let (_, objects) = manifests(&[
        "--namespace",
        "platform",
        "--image",
        "registry.example/gpu-policy:1.2.3",
        "--replicas",
        "3",
        "--failure-policy",
        "Ignore",
        "--ca-bundle-file",
        ca.to_str().expect("path"),
    ]);
    let deployment = find(&objects, "Deployment");
    assert_eq!(deployment["metadata"]["namespace"], "platform");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example/gpu-policy:1.2.3");
    let validating = &find(&objects, "ValidatingWebhookConfiguration")["webhooks"];
    assert_eq!(validating[0]["failurePolicy"], "Ignore");
    assert_eq!(validating[0]["clientConfig"]["service"]["namespace"], "platform");
    assert!(validating[0]["clientConfig"]["caBundle"].is_string());
    let bad = Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
        .args(["manifests", "--failure-policy", "Sometimes"])
        .output()
        .expect("runs");
    assert_eq!(bad.status.code(), Some(2));
}

/// A server outside the cluster: every entry calls the URL, and what runs
/// the server in the cluster is left out; its identity and RBAC are not.
#[test]
fn webhook_url_registers_every_entry_by_url_and_keeps_the_rbac() {
    let (_, default) = manifests(&[]);
    let (_, objects) = manifests(&["--webhook-url", "https://host.k3d.internal:9443/hooks/"]);
    let kinds = |objects: &[Value]| -> Vec<String> {
        objects.iter().map(|o| o["kind"].as_str().expect("kind").to_owned()).collect()
    };
    let expected: Vec<String> = kinds(&default)
        .into_iter()
        .filter(|kind| {
            !["ConfigMap", "Deployment", "Service", "PodDisruptionBudget"].contains(&kind.as_str())
        })
        .collect();
    assert_eq!(kinds(&objects), expected);
    // Identity and RBAC exactly as in the cluster install.
    for object in &objects {
        if !object["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration")) {
            assert!(default.contains(object), "changed: {object}");
        }
    }
    // The entries differ from the cluster install's in clientConfig only.
    let without_client_config = |objects: &[Value]| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration")))
            .map(|o| {
                let mut o = o.clone();
                for webhook in o["webhooks"].as_array_mut().expect("webhooks") {
                    webhook.as_object_mut().expect("entry").remove("clientConfig");
                }
                o
            })
            .collect()
    };
    assert_eq!(without_client_config(&objects), without_client_config(&default));
    let mut urls = Vec::new();
    for client_config in client_configs(&objects) {
        let client_config = client_config.as_object().expect("clientConfig");
        // No service, and no caBundle: the server's --cert-secret fills it.
        assert_eq!(client_config.keys().collect::<Vec<_>>(), ["url"], "{client_config:?}");
        urls.push(client_config["url"].as_str().expect("url").to_owned());
    }
    let base = "https://host.k3d.internal:9443/hooks";
    assert_eq!(
        urls,
        [
            format!("{base}/mutate"),
            format!("{base}/validate/enforce"),
            format!("{base}/validate/warn"),
            format!("{base}/validate/audit"),
            format!("{base}/validate/namespace"),
        ]
    );
}

/// --ca-bundle-file and --namespace work with the URL form as without it;
/// a trailing `/` on a bare host does not double the `/`.
#[test]
fn webhook_url_takes_the_ca_bundle_and_the_namespace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.crt");
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    std::fs::write(&ca, pem).expect("write");
    let ca = ca.to_str().expect("path");
    let url = ["--webhook-url", "https://host.docker.internal:8443/"];
    let (_, with_url) =
        manifests(&[&url[..], &["--namespace", "platform", "--ca-bundle-file", ca]].concat());
    let (_, with_service) = manifests(&["--namespace", "platform", "--ca-bundle-file", ca]);
    let with_url_configs = client_configs(&with_url);
    let with_service_configs = client_configs(&with_service);
    assert_eq!(with_url_configs.len(), Endpoint::ALL.len());
    for ((by_url, by_service), endpoint) in
        with_url_configs.iter().zip(&with_service_configs).zip(Endpoint::ALL)
    {
        assert_eq!(by_url["url"], format!("https://host.docker.internal:8443{}", endpoint.path()));
        assert!(by_url.get("service").is_none(), "{by_url}");
        assert!(by_url["caBundle"].is_string(), "{by_url}");
        assert_eq!(by_url["caBundle"], by_service["caBundle"]);
        assert_eq!(by_service["service"]["namespace"], "platform");
    }
    let subjects: Vec<&Value> = with_url
        .iter()
        .filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("RoleBinding")))
        .map(|o| &o["subjects"][0]["namespace"])
        .collect();
    assert!(!subjects.is_empty());
    assert!(subjects.iter().all(|ns| *ns == "platform"), "{subjects:?}");
    // The guard policies name the ServiceAccount of that namespace.
    let policy = |name: &str| {
        with_url
            .iter()
            .find(|o| o["kind"] == "ValidatingAdmissionPolicy" && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no policy {name}"))
    };
    assert_eq!(
        policy("gpu-policy-webhook-configurations")["spec"]["matchConditions"][0]["expression"],
        "request.userInfo.username == 'system:serviceaccount:platform:gpu-policy'"
    );
    assert_eq!(
        policy("gpu-policy-service-account-tokens")["spec"]["matchConstraints"]["namespaceSelector"],
        serde_json::json!({"matchLabels": {"kubernetes.io/metadata.name": "platform"}})
    );
    assert!(with_url.iter().all(|o| {
        with_service.contains(o)
            || o["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration"))
    }));
}

#[rstest]
#[case::http("http://127.0.0.1:8443", "the scheme must be https, not http")]
#[case::no_host("https://", "a host is required")]
#[case::no_authority("https:///mutate", "a host is required")]
#[case::user_info("https://admin:secret@127.0.0.1", "user information is not allowed")]
#[case::query("https://127.0.0.1/?x=1", "a query is not allowed")]
#[case::fragment("https://127.0.0.1/#top", "a fragment is not allowed")]
#[case::not_a_url("127.0.0.1:8443", "relative URL without a base")]
#[case::whitespace(" https://127.0.0.1:8443", "whitespace and control characters are not allowed")]
fn webhook_url_is_checked_as_the_api_server_checks_it(#[case] url: &str, #[case] reason: &str) {
    let run = run_manifests(&["--webhook-url", url]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
    assert_eq!(run.stderr, format!("gpu-policy: --webhook-url {url}: {reason}\n"));
}

/// A newline in the URL is shown escaped: the error stays one line.
#[test]
fn webhook_url_error_is_one_line() {
    let run = run_manifests(&["--webhook-url", "https://127.0.0.1:8443\n"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "gpu-policy: --webhook-url https://127.0.0.1:8443\\n: \
         whitespace and control characters are not allowed\n"
    );
}

/// The namespace goes into object paths and the guard policies' CEL
/// strings: a name Kubernetes would refuse is refused, in one line.
#[test]
fn a_namespace_that_is_not_a_dns_label_is_refused() {
    let run = run_manifests(&["--namespace", "gpu' || true || '"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr
            .starts_with("gpu-policy: --namespace \"gpu' || true || '\" is not a namespace name")
            && run.stderr.lines().count() == 1,
        "{}",
        run.stderr
    );
}

/// What only shapes the objects the URL form leaves out, or another output
/// altogether, is refused with it rather than ignored.
#[rstest]
#[case::image(&["--image", "registry.example/gpu-policy:1.2.3"], "--image")]
#[case::replicas(&["--replicas", "3"], "--replicas")]
#[case::admission_policies(&["--admission-policies"], "--admission-policies")]
fn webhook_url_conflicts_with_the_in_cluster_flags(#[case] args: &[&str], #[case] flag: &str) {
    let run = run_manifests(&[&["--webhook-url", "https://127.0.0.1:8443"], args].concat());
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("cannot be used with") && run.stderr.contains(flag),
        "{}",
        run.stderr
    );
}

#[test]
fn the_deployment_runs_the_server_with_valid_flags_and_config() {
    let (_, objects) = manifests(&[]);
    let container = &find(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> =
        container["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    assert_eq!(args.first(), Some(&"serve"));
    let parsed = Cli::try_parse_from(std::iter::once("gpu-policy").chain(args.iter().copied()));
    assert!(parsed.is_ok(), "{:?}", parsed.err());
    let config = find(&objects, "ConfigMap")["data"]["config.yaml"].as_str().expect("config.yaml");
    let settings = Settings::from_yaml(config, "ConfigMap").expect("the shipped config loads");
    assert_eq!(settings.config(), &Config::default());
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
}

#[test]
fn the_dockerfile_builds_what_ci_builds() {
    let dockerfile = std::fs::read_to_string("Dockerfile").expect("Dockerfile");
    let ci = std::fs::read_to_string(".ci/run").expect(".ci/run");
    // The build stage's command: the profile-guided build, whose binary the runtime stage copies.
    // CI builds the same release profile with the same flags, without the profile (half the
    // CPU), and parses the script.
    let build = "bash scripts/release-build.sh";
    assert!(dockerfile.contains(&format!("RUN {build}")), "Dockerfile does not run `{build}`");
    assert!(
        ci.contains("cargo build --release --locked --bin gpu-policy"),
        ".ci/run does not build the release binary"
    );
    assert!(
        ci.contains("for script in scripts/*.sh tests/*/*.sh; do bash -n \"$script\"; done"),
        ".ci/run does not parse the scripts"
    );
    assert!(
        dockerfile.contains("COPY --from=build /src/target/pgo/bin/gpu-policy /gpu-policy"),
        "the image does not ship the binary scripts/release-build.sh makes"
    );
    let script = std::fs::read_to_string("scripts/release-build.sh").expect("release-build.sh");
    assert!(script.contains("--release --locked"));
    assert!(script.contains("cp \"$optimised/gpu-policy\" target/pgo/bin/gpu-policy"));
    // The optimised build names the load tool as the instrumented one does:
    // otherwise the dependencies' features, and so their symbols, differ
    // from the profile's.
    assert!(script.contains("examples=(--example loadgen)"));
    assert!(script.contains("optimise gpu-policy target/pgo --bin gpu-policy --example loadgen"));
    // Everything the script reads is copied into the build stage.
    for dir in ["crates", "src", "benches", "examples", "scripts"] {
        assert!(
            dockerfile.contains(&format!("COPY {dir} ./{dir}")),
            "the build stage does not copy {dir}/"
        );
    }
    assert!(dockerfile.contains("ENTRYPOINT [\"/gpu-policy\"]"));
    assert!(dockerfile.contains("CMD [\"serve\"]"));
    let user = dockerfile.lines().find_map(|line| line.strip_prefix("USER ")).expect("a USER line");
    assert!(
        user.split(':').all(|part| part.parse::<u32>().is_ok_and(|id| id != 0)),
        "USER must be a non-root numeric UID, not {user:?}"
    );
    let stages = dockerfile.lines().filter(|l| l.starts_with("FROM ")).count();
    assert!(stages >= 2, "multi-stage build expected");
}

#[test]
fn the_configmap_and_the_allowlist_roles_come_from_one_config_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "allowlist:\n  - {namespace: gpu-ops, kind: DaemonSet, name: dcgm-exporter}\n\
         gpuResources: [nvidia.com/gpu, nvidia.com/vgpu]\n",
    )
    .expect("write");
    let (_, objects) = manifests(&["--config", path.to_str().expect("path")]);
    let carried = find(&objects, "ConfigMap")["data"]["config.yaml"].as_str().expect("config.yaml");
    let carried = Settings::from_yaml(carried, "ConfigMap").expect("the server accepts it");
    let expected = Settings::load(&path).expect("valid");
    assert_eq!(carried.config(), expected.config());
    let roles: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Role" && o["metadata"]["name"] == "gpu-policy-allowlist")
        .collect();
    assert_eq!(roles.len(), 1, "{roles:#?}");
    assert_eq!(roles[0]["metadata"]["namespace"], "gpu-ops");
    assert_eq!(
        roles[0]["rules"],
        serde_json::json!([{"apiGroups": ["apps"], "resources": ["daemonsets"],
            "resourceNames": ["dcgm-exporter"], "verbs": ["list", "watch"]}])
    );
    let binding = objects
        .iter()
        .find(|o| o["kind"] == "RoleBinding" && o["metadata"]["namespace"] == "gpu-ops")
        .expect("a RoleBinding in gpu-ops");
    assert_eq!(binding["roleRef"]["name"], "gpu-policy-allowlist");

    std::fs::write(&path, "maxPerPod: lots\n").expect("write");
    let bad = Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
        .args(["manifests", "--config"])
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("config.yaml"), "{stderr}");

    // RBAC cannot grant names by prefix: a namePrefix entry's kind is
    // granted in its one namespace without resourceNames, and only there.
    std::fs::write(
        &path,
        "allowlist:\n\
         - {namespace: dra, kind: ReplicaSet, namePrefix: mps-control-daemon-}\n\
         - {namespace: dra, kind: ReplicaSet, name: static-mps}\n\
         - {namespace: dra, kind: DaemonSet, name: kubelet-plugin}\n\
         - {namespace: other, kind: ReplicaSet, name: mps-control-daemon-x}\n",
    )
    .expect("write");
    let (_, objects) = manifests(&["--config", path.to_str().expect("path")]);
    let role = |namespace: &str| {
        objects
            .iter()
            .find(|o| {
                o["kind"] == "Role"
                    && o["metadata"]["name"] == "gpu-policy-allowlist"
                    && o["metadata"]["namespace"] == namespace
            })
            .unwrap_or_else(|| panic!("no allowlist Role in {namespace}: {objects:#?}"))
    };
    assert_eq!(
        role("dra")["rules"],
        serde_json::json!([
            {"apiGroups": ["apps"], "resources": ["replicasets"],
             "verbs": ["list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["daemonsets"],
             "resourceNames": ["kubelet-plugin"],
             "verbs": ["list", "watch"]},
        ])
    );
    assert_eq!(
        role("other")["rules"],
        serde_json::json!([{"apiGroups": ["apps"], "resources": ["replicasets"],
            "resourceNames": ["mps-control-daemon-x"], "verbs": ["list", "watch"]}])
    );
    let carried = find(&objects, "ConfigMap")["data"]["config.yaml"].as_str().expect("config.yaml");
    assert!(carried.contains("namePrefix: mps-control-daemon-"), "{carried}");
}
