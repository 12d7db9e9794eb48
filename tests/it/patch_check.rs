//! The patches of the mutating webhook, applied by a second JSON Patch
//! implementation and validated against the Kubernetes schemas.
//!
//! The pods: every pod of `tests/fixtures/` and a pod made from every
//! workload template there, each created in a namespace with and without a
//! minimum compute capability and given an ephemeral debug container; and
//! pods of the property tests' generator (`tests/it/support/pods.rs`, fixed
//! seed), schema-valid ones and adversarial ones with unknown fields, each
//! created and, when it has ephemeral containers, given some of them by a
//! `pods/ephemeralcontainers` update; and generated pods holding GPUs
//! through DRA claims (`tests/it/support/claimed_pods.rs`), resolved from
//! the generated templates and claims beside them. Each request goes through what the
//! server does with a body: [`admission::decode`], [`admission::respond`] on
//! [`Endpoint::Mutate`] and [`admission::Answer::encode`]. The base64 patch of the
//! encoded review, the bytes the API server would apply, goes into a JSON
//! Lines file with the object and the object as `json_patch` patches it.
//!
//! `tests/patch_check/check.py`, run in the tests' virtualenv
//! (`tests/python/venv.sh`), applies every patch with the Python package
//! `jsonpatch` and requires the same object, and validates the patched pods
//! against the strict schemas of `kubernetes-validate` (no field Kubernetes
//! does not know, every type right) for Kubernetes 1.32 and the newest
//! version it ships, all but the adversarial ones, which carry unknown
//! fields on purpose.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::Command;
use std::time::Instant;

use crate::support::claimed_pods::{ClaimedCase, claimed_case, claimed_gpu};
use crate::support::fixtures;
use crate::support::oracles::containers;
use crate::support::pods::{Case, MIN_CC, Pods, case_of};
use crate::support::review::Review;
use crate::support::script::run_ok;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use gpu_policy::admission::{self, Endpoint};
use gpu_policy::policy::dra::tables::ClaimTables;
use gpu_policy::policy::{ClaimFacts, Evaluator};
use gpu_policy::settings::Settings;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

/// Generated pods of each kind. Validating a pod strictly costs about 5 ms
/// of CPU per Kubernetes version in Python (and writing it 3 ms in a debug
/// build): these keep the check near 20 s on two cores.
const SCHEMA_VALID_PODS: usize = 1500;
const ADVERSARIAL_PODS: usize = 1000;
/// Generated pods with DRA claims (adversarial, so not validated strictly).
const CLAIMED_PODS: usize = 200;

/// One request for the mutating webhook.
struct Admission {
    /// Names the case in failure messages.
    name: String,
    pod: Value,
    namespace: String,
    namespace_annotations: BTreeMap<String, String>,
    /// `Some(old pod)`: a `pods/ephemeralcontainers` update, else a create.
    old_pod: Option<Value>,
    /// Whether the pod has only fields Kubernetes knows.
    strict: bool,
    /// The ResourceClaimTemplates and ResourceClaims its claims resolve
    /// from; empty: no claim source (claims are unresolved).
    claim_objects: Vec<Value>,
}

/// What the file holds, as the summary of `check.py` must count it.
#[derive(Default)]
struct Counts {
    objects: usize,
    patches: usize,
    operations: usize,
    strict: usize,
}

fn fixture_pods() -> Vec<(String, Value)> {
    fixtures::pods("x7k2p", "5f0c8a52-2f5e-4b8e-9d59-1d1b0c3c0001")
        .into_iter()
        .map(|fixture_pod| (fixture_pod.label(), fixture_pod.pod))
        .collect()
}

fn namespace_of(pod: &Value) -> String {
    pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_owned()
}

/// The fixture pods: created in a namespace without and with a minimum
/// compute capability, and given a debug container as `kubectl debug` does.
fn fixture_admissions() -> Vec<Admission> {
    let mut admissions = Vec::new();
    for (label, pod) in fixture_pods() {
        let namespace = namespace_of(&pod);
        // The DRA pods (20-24) name their claims as Kubernetes 1.31 and
        // later do (`resourceClaimTemplateName` beside `name`): every
        // supported release's schema has it.
        let strict = true;
        let minimum = BTreeMap::from([(MIN_CC.to_owned(), "8.0".to_owned())]);
        for (suffix, annotations) in [("", BTreeMap::new()), (" min 8.0", minimum)] {
            admissions.push(Admission {
                name: format!("fixture {label}{suffix}"),
                pod: pod.clone(),
                namespace: namespace.clone(),
                namespace_annotations: annotations,
                old_pod: None,
                strict,
                claim_objects: Vec::new(),
            });
        }
        let mut debugged = pod.clone();
        let target = pod["spec"]["containers"][0]["name"].clone();
        debugged["spec"]["ephemeralContainers"] = json!([{
            "name": "debugger-8zxqv",
            "image": "busybox:1.37",
            "targetContainerName": target,
            "stdin": true,
            "tty": true,
        }]);
        admissions.push(Admission {
            name: format!("fixture {label} debug"),
            pod: debugged,
            namespace,
            namespace_annotations: BTreeMap::new(),
            old_pod: Some(pod),
            strict,
            claim_objects: Vec::new(),
        });
    }
    admissions
}

/// `count` pods of the generator, always the same ones; every one created
/// and every third one that has ephemeral containers also updated, with the
/// last of them (or more) new.
fn generated_admissions(pods: Pods, count: usize) -> Vec<Admission> {
    // XorShift: ChaCha, the default, is slow in a debug build.
    let mut runner = TestRunner::new_with_rng(
        Config { rng_algorithm: RngAlgorithm::XorShift, ..Config::default() },
        TestRng::deterministic_rng(RngAlgorithm::XorShift),
    );
    let strategy = case_of(pods);
    let strict = pods == Pods::SchemaValid;
    let mut admissions = Vec::new();
    for index in 0..count {
        let Case { pod, namespace, namespace_annotations } =
            strategy.new_tree(&mut runner).expect("the pod generator never rejects").current();
        let name = format!("{pods:?} pod {index}");
        if let Some(ephemeral) = pod
            .pointer("/spec/ephemeralContainers")
            .and_then(Value::as_array)
            .filter(|list| !list.is_empty() && index % 3 == 0)
        {
            let mut old = pod.clone();
            old["spec"]["ephemeralContainers"] =
                Value::Array(ephemeral[..index % ephemeral.len()].to_vec());
            admissions.push(Admission {
                name: format!("{name} ephemeral update"),
                pod: pod.clone(),
                namespace: namespace.clone(),
                namespace_annotations: namespace_annotations.clone(),
                old_pod: Some(old),
                strict,
                claim_objects: Vec::new(),
            });
        }
        admissions.push(Admission {
            name,
            pod,
            namespace,
            namespace_annotations,
            old_pod: None,
            strict,
            claim_objects: Vec::new(),
        });
    }
    admissions
}

/// `count` generated pods with DRA claims, always the same ones, created.
fn claimed_admissions(count: usize) -> Vec<Admission> {
    let mut runner = TestRunner::new_with_rng(
        Config { rng_algorithm: RngAlgorithm::XorShift, ..Config::default() },
        TestRng::deterministic_rng(RngAlgorithm::XorShift),
    );
    let strategy = claimed_case();
    (0..count)
        .map(|index| {
            let ClaimedCase { case, objects } =
                strategy.new_tree(&mut runner).expect("the pod generator never rejects").current();
            Admission {
                name: format!("claimed pod {index}"),
                pod: case.pod,
                namespace: case.namespace,
                namespace_annotations: case.namespace_annotations,
                old_pod: None,
                strict: false,
                claim_objects: objects,
            }
        })
        .collect()
}

/// The AdmissionReview v1 the API server sends for the admission: a
/// CREATE by the ReplicaSet controller, or `kubectl debug` adding an
/// ephemeral container.
fn review_body(admission: &Admission, uid: &str) -> Vec<u8> {
    let review = match &admission.old_pod {
        None => Review::create(&admission.pod, &admission.namespace).user(
            "system:serviceaccount:kube-system:replicaset-controller",
            &["system:serviceaccounts", "system:authenticated"],
        ),
        Some(old) => Review::update(&admission.pod, old, &admission.namespace)
            .sub_resource("ephemeralcontainers")
            .user("dev@example.com", &["system:authenticated"]),
    };
    review.uid(uid).body()
}

/// Runs the admission as the server does and returns the patch bytes of
/// the encoded response (None: no patch).
fn mutate(admission: &Admission, uid: &str, settings: &Settings) -> Option<Vec<u8>> {
    let name = &admission.name;
    let body = review_body(admission, uid);
    let request = admission::decode(&body)
        .unwrap_or_else(|err| panic!("{name}: the review does not decode: {err}"));
    let namespace_settings = settings.for_namespace(&admission.namespace_annotations);
    let objects: Vec<&Value> = admission.claim_objects.iter().collect();
    let input = ClaimTables::collect(&objects, &admission.namespace, settings);
    let evaluator = Evaluator {
        settings,
        namespace: &namespace_settings,
        cluster: None,
        nodes: None,
        claims: (!objects.is_empty()).then_some(&input as &dyn ClaimFacts),
        images: None,
        claim_owner: None,
    };
    let subject = admission::subject(&request, Endpoint::Mutate);
    let answer = admission::respond(&request, Endpoint::Mutate, &subject, &evaluator);
    let encoded =
        answer.encode(&request.uid).unwrap_or_else(|err| panic!("{name}: does not encode: {err}"));
    let review: Value = serde_json::from_slice(&encoded).expect("the response is JSON");
    let response = &review["response"];
    assert_eq!(response["uid"], uid, "{name}: {review}");
    // The mutating webhook only mutates: denials come from the validating one.
    assert_eq!(response["allowed"], true, "{name}: {review}");
    let patch = response.get("patch")?;
    assert_eq!(response["patchType"], "JSONPatch", "{name}: {review}");
    let patch = patch.as_str().expect("the patch is a base64 string");
    Some(BASE64.decode(patch).expect("the patch is base64"))
}

/// JSON Pointer tokens with array indices as `N`, for the list of what the
/// patches touch.
fn shape(path: &str) -> String {
    path.split('/')
        .map(|token| {
            if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) { "N" } else { token }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Writes one line of the file: the patch exactly as the server encoded it.
fn write_line(
    out: &mut impl std::io::Write,
    admission: &Admission,
    patch: Option<&[u8]>,
    expected: &Value,
) {
    let text = |value: &Value| serde_json::to_string(value).expect("JSON serialises");
    let patch = match patch {
        Some(bytes) => {
            let text = std::str::from_utf8(bytes).expect("the patch is UTF-8");
            assert!(!text.contains('\n'), "the patch is on one line");
            text
        }
        None => "null",
    };
    writeln!(
        out,
        r#"{{"name":{},"strict":{},"object":{},"patch":{},"expected":{}}}"#,
        text(&json!(admission.name)),
        admission.strict,
        text(&admission.pod),
        patch,
        text(expected),
    )
    .expect("write the cases");
}

#[test]
fn patches_agree_with_python_jsonpatch_and_validate_strictly() {
    let started = Instant::now();
    let settings = Settings::default();
    let mut admissions = fixture_admissions();
    let fixtures = admissions.len();
    admissions.extend(generated_admissions(Pods::SchemaValid, SCHEMA_VALID_PODS));
    admissions.extend(generated_admissions(Pods::Adversarial, ADVERSARIAL_PODS));
    let claimed = claimed_admissions(CLAIMED_PODS);
    // Not vacuous: many of them hold a GPU through a resolved claim.
    let holding = claimed
        .iter()
        .filter(|a| {
            containers(&a.pod)
                .into_iter()
                .any(|(kind, c)| claimed_gpu(&a.pod, &a.claim_objects, kind, c))
        })
        .count();
    assert!(holding * 4 >= CLAIMED_PODS, "{holding} pods hold a claimed GPU");
    admissions.extend(claimed);

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("patches.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    let mut counts = Counts::default();
    let mut patched_fixtures = 0;
    let mut patched_strict = 0;
    let mut touched: BTreeMap<String, usize> = BTreeMap::new();
    for (index, admission) in admissions.iter().enumerate() {
        let uid = format!("7c1f0e4a-0000-4000-8000-{index:012x}");
        let patch = mutate(admission, &uid, &settings);
        let mut expected = admission.pod.clone();
        if let Some(bytes) = &patch {
            let operations: json_patch::Patch = serde_json::from_slice(bytes)
                .unwrap_or_else(|err| panic!("{}: not a JSON patch: {err}", admission.name));
            assert!(!operations.0.is_empty(), "{}: an empty patch", admission.name);
            json_patch::patch(&mut expected, &operations.0)
                .unwrap_or_else(|err| panic!("{}: does not apply: {err}", admission.name));
            counts.patches += 1;
            counts.operations += operations.0.len();
            patched_fixtures += usize::from(index < fixtures);
            patched_strict += usize::from(admission.strict);
            let paths: BTreeSet<String> =
                operations.0.iter().map(|op| shape(op.path().as_str())).collect();
            for path in paths {
                *touched.entry(path).or_default() += 1;
            }
        }
        counts.objects += 1;
        counts.strict += usize::from(admission.strict);
        write_line(&mut out, admission, patch.as_deref(), &expected);
    }
    out.flush().expect("write the cases");
    drop(out);
    let written = started.elapsed();

    // Not vacuous: most pods are patched, by every mutating rule. Of the
    // fixtures, 05, 06, 11, the two pods of 12 and the templates of 03, 07, 08, 09, 10 in
    // both namespaces (00, 01 are allowlisted, 02 and 04 are denied), and the
    // debug containers of all but 00 and 01. The 7 DRA pods of 20-24 add 7 in
    // each namespace and 7 debug containers: with no claim source here their
    // claimed containers stay pinned, and 24 gets the runtime class.
    assert_eq!(patched_fixtures, (10 + 7) + (10 + 7) + (12 + 7), "fixture admissions patched");
    assert!(
        patched_strict * 2 >= counts.strict,
        "{patched_strict} of {} schema-valid pods patched",
        counts.strict
    );
    for wanted in [
        "/spec/runtimeClassName",
        "/spec/affinity",
        "/spec/containers/N/env/-",
        "/spec/ephemeralContainers/N/env",
        "/metadata/annotations/gpu-policy.io~1mutations",
    ] {
        assert!(
            touched.get(wanted).is_some_and(|&n| n >= 10),
            "fewer than 10 patches touch {wanted}: {touched:?}"
        );
    }

    let (stdout, stderr) = run_ok(
        Command::new("bash")
            .arg("tests/python/venv.sh")
            .arg("tests/patch_check/check.py")
            .arg(&path),
        "the patch check",
    );
    let Counts { objects, patches, operations, strict } = counts;
    let expected = format!(
        "patch check: {objects} objects, {patches} patches ({operations} operations), \
         {strict} validated strictly"
    );
    let summary = stdout
        .lines()
        .find(|line| line.starts_with("patch check: "))
        .unwrap_or_else(|| panic!("no summary line:\n{stdout}\n{stderr}"));
    assert!(
        summary.starts_with(&expected) && summary.ends_with(", 0 failed"),
        "expected {expected:?} ... 0 failed, got:\n{stdout}\n{stderr}"
    );
    let mut report = String::new();
    for (path, n) in &touched {
        let _ = writeln!(report, "  {n:5} {path}");
    }
    println!(
        "{summary}\n{patched_fixtures} of {fixtures} fixture admissions and {patched_strict} of \
         {strict} schema-valid ones patched; written in {written:.1?}, checked in {:.1?}\n\
         patched paths:\n{report}",
        started.elapsed() - written
    );
}
