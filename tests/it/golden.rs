//! Golden tests: every fixture of `tests/fixtures/` through the offline
//! `check`, in-process, compared with a checked-in JSON file.
//!
//! For each fixture `NN-name.yaml` and each of the modes `enforce` and
//! `warn`, the objects are loaded with [`gpu_policy::manifest::load`] and
//! evaluated together by one [`gpu_policy::admission::Checker`] exactly as
//! `gpu-policy check -f FILE --mode MODE` does by default: the default
//! [`Settings`], namespace `default` for objects that name none, no namespace
//! annotations. The result is compared with `tests/golden/NN-name.MODE.json`,
//! a pretty JSON array with one element per object:
//!
//! ```json
//! [{
//!   "report":  { ... },  // what `check -o json` prints for the object
//!   "changes": [{"rule": "...", "summary": "..."}],  // for a workload: what its pods will get
//!   "denial":  "gpu-policy: ..." | null,
//!   "mutated": { ... }   // pods only: the pod after the patch
//! }]
//! ```
//!
//! The comparison is semantic (JSON values, so key order does not matter);
//! on a mismatch the test prints a line diff and both texts.
//!
//! # Updating the golden files
//!
//! After an intended change of behaviour, regenerate them and review the diff
//! before committing:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test --test it golden::
//! git diff tests/golden
//! ```
//!
//! With `UPDATE_GOLDEN=1` the test rewrites every golden file (and deletes
//! golden files whose fixture is gone) instead of comparing.
//!
//! Besides the golden comparison this file checks, for every pod (the Pod
//! fixtures and pods built from the workload fixtures' templates), that the
//! patch is idempotent (re-evaluating the mutated pod yields no patch) and
//! that it keeps every field of the original outside the paths it touches.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gpu_policy::admission::Mode;
use gpu_policy::admission::checker::{Checker, ObjectReport, mutated};
use gpu_policy::settings::Settings;
use serde::Serialize;
use serde_json::{Value, json};

use crate::support::fixtures::{files, fixture, is_pod, load, objects_of, stem};
use crate::support::generated_docs::updating;
use crate::support::{fixtures, workloads::pod_of_workload};

const NAMESPACE: &str = "default";
pub(crate) const MODES: [Mode; 2] = [Mode::Enforce, Mode::Warn];
/// The uid of the workloads that own the pods made from their templates.
const OWNER_UID: &str = "00000000-0000-0000-0000-000000000001";

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The ResourceClaims, ResourceClaimTemplates and DeviceClasses of every
/// fixture: what `check -f tests/fixtures/` resolves DRA claims from.
fn claim_objects() -> &'static [Value] {
    static OBJECTS: OnceLock<Vec<Value>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        files()
            .iter()
            .flat_map(|path| load(path))
            .map(|doc| doc.object)
            .filter(|object| {
                matches!(
                    object["kind"].as_str(),
                    Some("ResourceClaim" | "ResourceClaimTemplate" | "DeviceClass")
                )
            })
            .collect()
    })
}

/// One object evaluated as `check -f tests/fixtures/` evaluates it.
fn check(object: &Value, mode: Mode) -> ObjectReport {
    let mut objects: Vec<&Value> = claim_objects().iter().collect();
    objects.push(object);
    Checker::new(&Settings::default(), mode, NAMESPACE)
        .with_input(&objects)
        .check_all(&objects)
        .pop()
        .expect("one report per object")
}

/// One change as the golden file shows it.
#[derive(Serialize)]
struct GoldenChange<'a> {
    rule: &'a str,
    summary: &'a str,
}

/// One element of a golden file. Fields serialise in this order, and the
/// report in the order of `check -o json`, so a reviewer reads the decision
/// first and the patched pod last.
#[derive(Serialize)]
struct GoldenEntry<'a> {
    report: &'a ObjectReport,
    changes: Vec<GoldenChange<'a>>,
    denial: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mutated: Option<Value>,
}

impl<'a> GoldenEntry<'a> {
    fn new(object: &Value, report: &'a ObjectReport) -> Self {
        GoldenEntry {
            report,
            changes: report
                .changes
                .iter()
                .map(|(rule, summary)| GoldenChange { rule: rule.as_str(), summary })
                .collect(),
            denial: report.denial.as_deref(),
            mutated: is_pod(object).then(|| {
                mutated(object, report).unwrap_or_else(|err| {
                    panic!("the patch of {} does not apply: {err}", report.name)
                })
            }),
        }
    }
}

/// The golden entries of one fixture in one mode, as a value (to compare)
/// and as text (to write and show; it keeps the field order of the structs,
/// where a `Value` would sort the keys).
fn actual_golden(path: &Path, mode: Mode) -> (Value, String) {
    let documents = load(path);
    let objects: Vec<&Value> = documents.iter().map(|d| &d.object).collect();
    let reports = Checker::new(&Settings::default(), mode, NAMESPACE)
        .with_input(&objects)
        .check_all(&objects);
    let entries: Vec<GoldenEntry<'_>> = documents
        .iter()
        .zip(&reports)
        .map(|(doc, report)| GoldenEntry::new(&doc.object, report))
        .collect();
    let value = serde_json::to_value(&entries).expect("golden entries serialise");
    let mut text = serde_json::to_string_pretty(&entries).expect("golden entries serialise");
    text.push('\n');
    (value, text)
}

fn golden_path(dir: &Path, fixture: &Path, mode: Mode) -> PathBuf {
    dir.join(format!("{}.{mode}.json", stem(fixture)))
}

/// A line diff (longest common subsequence), `-` expected, `+` actual, with
/// two lines of context around each change.
fn line_diff(expected: &str, actual: &str) -> String {
    let old: Vec<&str> = expected.lines().collect();
    let new: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0usize; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            lines.push((' ', old[i]));
            i += 1;
            j += 1;
        } else if i < old.len() && (j == new.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            lines.push(('-', old[i]));
            i += 1;
        } else {
            lines.push(('+', new[j]));
            j += 1;
        }
    }
    let near_change = |at: usize| {
        let from = at.saturating_sub(2);
        let to = (at + 3).min(lines.len());
        lines[from..to].iter().any(|(tag, _)| *tag != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (at, (tag, line)) in lines.iter().enumerate() {
        if near_change(at) {
            let _ = writeln!(out, "{tag} {line}");
            skipped = false;
        } else if !skipped {
            out.push_str("  ...\n");
            skipped = true;
        }
    }
    out
}

#[test]
fn fixtures_match_golden_files() {
    compare_with_golden(&files(), &golden_dir());
}

/// Each fixture's golden entries in both modes against the files of
/// `golden` (rewritten with `UPDATE_GOLDEN=1`), and no file there that no
/// fixture produces.
pub(crate) fn compare_with_golden(fixtures: &[PathBuf], golden: &Path) {
    let update = updating();
    let mut expected_files = Vec::new();
    let mut failures = Vec::new();
    for fixture in fixtures {
        for mode in MODES {
            let path = golden_path(golden, fixture, mode);
            expected_files.push(path.clone());
            let (actual, actual_text) = actual_golden(fixture, mode);
            if update {
                std::fs::create_dir_all(golden).expect("create the golden directory");
                std::fs::write(&path, &actual_text)
                    .unwrap_or_else(|err| panic!("write {}: {err}", path.display()));
                continue;
            }
            let Ok(expected_text) = std::fs::read_to_string(&path) else {
                failures.push(format!(
                    "{}: missing; run `UPDATE_GOLDEN=1 cargo test --test it golden::`",
                    path.display()
                ));
                continue;
            };
            let expected: Value = match serde_json::from_str(&expected_text) {
                Ok(value) => value,
                Err(err) => {
                    failures.push(format!("{}: not JSON: {err}", path.display()));
                    continue;
                }
            };
            if expected != actual {
                failures.push(format!(
                    "{} differs from the result for {} in {mode} mode\n\
                     --- diff (- expected, + actual) ---\n{}\
                     --- expected ---\n{expected_text}--- actual ---\n{actual_text}",
                    path.display(),
                    fixture.display(),
                    line_diff(&expected_text, &actual_text),
                ));
            }
        }
    }
    // No golden file without a fixture: a renamed fixture must not leave a
    // stale file behind.
    let present: Vec<PathBuf> = std::fs::read_dir(golden)
        .map(|entries| {
            entries
                .map(|e| e.expect("directory entry").path())
                .filter(|path| path.is_file())
                .collect()
        })
        .unwrap_or_default();
    for path in present {
        if !expected_files.contains(&path) {
            if update {
                std::fs::remove_file(&path)
                    .unwrap_or_else(|err| panic!("remove {}: {err}", path.display()));
            } else {
                failures.push(format!("{}: no fixture produces it", path.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden mismatch(es); if the change is intended, run \
         `UPDATE_GOLDEN=1 cargo test --test it golden::` and review `git diff tests/golden`\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn line_diff_shows_changed_lines_only_with_context() {
    let diff = line_diff("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nX\ne\nf\ng\n");
    assert_eq!(diff, "  ...\n  b\n  c\n- d\n+ X\n  e\n  f\n  ...\n");
}

/// Short description of a report for the decision table below.
fn decision(report: &ObjectReport) -> String {
    let rules = |items: Vec<String>| items.join(",");
    format!(
        "{} {}/{}: {} violations=[{}] changes=[{}] patch={}",
        report.kind,
        report.namespace,
        report.name,
        if report.ignored {
            "ignored"
        } else if report.allowed {
            "allowed"
        } else {
            "denied"
        },
        rules(report.violations.iter().map(|v| v.rule.to_string()).collect()),
        rules(report.changes.iter().map(|(r, _)| r.to_string()).collect()),
        report.patch.len(),
    )
}

/// The decisions docs/policy.md describes, independent of the golden files (so that
/// regenerating them blindly cannot hide a wrong decision).
#[test]
fn enforce_decisions_follow_the_spec() {
    let mut table = Vec::new();
    for fixture in files() {
        for doc in load(&fixture) {
            table.push(decision(&check(&doc.object, Mode::Enforce)));
        }
    }
    assert_eq!(
        table,
        vec![
            // Allowlisted (R5): no pin, no violation.
            "DaemonSet kube-system/nvidia-gpu-exporter: allowed violations=[] changes=[] patch=0",
            "DaemonSet kube-system/nvidia-device-plugin-daemonset: allowed violations=[] changes=[] patch=0",
            // Not in kube-system: not allowlisted. GFD runs privileged
            // without a GPU request, which only the allowlist permits.
            "DaemonSet default/gpu-feature-discovery: denied violations=[device-paths] changes=[visible-devices] patch=0",
            // Not allowlisted either, but not privileged: its pods get a void pin.
            "DaemonSet default/dcgm-exporter: allowed violations=[] changes=[visible-devices] patch=0",
            "Service default/dcgm-exporter: ignored violations=[] changes=[] patch=0",
            // Reserved runtime class without a GPU request.
            "DaemonSet default/nvidia-gpu-exporter: denied violations=[runtime-class] changes=[visible-devices] patch=0",
            // vectoradd-cuda12.5.0 is not in the image table: no affinity.
            "Pod default/gpu-pod: allowed violations=[] changes=[runtime-class] patch=2",
            "Pod default/gpu-operator-test: allowed violations=[] changes=[runtime-class] patch=2",
            "Deployment default/mistral-7b: allowed violations=[] changes=[runtime-class] patch=0",
            "Job axolotl-training/gemma3-melanoma-training: allowed violations=[] changes=[runtime-class] patch=0",
            "Deployment default/vllm-server: allowed violations=[] changes=[visible-devices] patch=0",
            "Deployment default/workload-1g-1: allowed violations=[] changes=[runtime-class] patch=0",
            "Pod default/train: allowed violations=[] changes=[runtime-class,compute-affinity] patch=3",
            "Pod default/ngc-train: allowed violations=[] changes=[runtime-class,compute-affinity] patch=3",
            // Two changes of R4: the compute floor and the driver floor.
            "Pod default/vllm-cu130: allowed violations=[] changes=[runtime-class,compute-affinity,compute-affinity] patch=3",
            // DRA quickstart: the claims and templates ask for bounded GPUs
            // (R2); the claimed containers hold a GPU (resolved from the
            // templates and claims of the input), so they are not
            // pinned; no runtime class (CDI injects the devices); ubuntu
            // and CUDA 11.6 sample images imply no compute capability.
            "Namespace default/gpu-test1: ignored violations=[] changes=[] patch=0",
            "ResourceClaimTemplate gpu-test1/single-gpu: allowed violations=[] changes=[] patch=0",
            "Pod gpu-test1/pod1: allowed violations=[] changes=[] patch=0",
            "Pod gpu-test1/pod2: allowed violations=[] changes=[] patch=0",
            "Namespace default/gpu-test2: ignored violations=[] changes=[] patch=0",
            "ResourceClaimTemplate gpu-test2/single-gpu: allowed violations=[] changes=[] patch=0",
            "Pod gpu-test2/pod: allowed violations=[] changes=[] patch=0",
            "Namespace default/gpu-test3: ignored violations=[] changes=[] patch=0",
            "ResourceClaim gpu-test3/single-gpu: allowed violations=[] changes=[] patch=0",
            "Pod gpu-test3/pod1: allowed violations=[] changes=[] patch=0",
            "Pod gpu-test3/pod2: allowed violations=[] changes=[] patch=0",
            "Namespace default/gpu-test5: ignored violations=[] changes=[] patch=0",
            "ResourceClaimTemplate gpu-test5/multiple-gpus: allowed violations=[] changes=[] patch=0",
            "Pod gpu-test5/pod0: allowed violations=[] changes=[] patch=0",
            // An nvidia.com/gpu limit served by DRA is a device-plugin GPU
            // pod for the policy: it gets the runtime class.
            "Namespace default/extended-resource-gpu-full: ignored violations=[] changes=[] patch=0",
            "Pod extended-resource-gpu-full/gpu-full-pod: allowed violations=[] changes=[runtime-class] patch=2",
        ]
    );
}

/// The privileged NVIDIA DaemonSet (GFD) stays allowed where the default
/// allowlist names it, and so do the pods it owns.
#[test]
fn privileged_gfd_is_allowed_in_kube_system() {
    let daemonset = &fixture("02");
    let in_kube_system = |object: &Value| {
        Checker::new(&Settings::default(), Mode::Enforce, "kube-system").check(object)
    };
    let report = in_kube_system(daemonset);
    assert!(report.allowed, "{:?}", report.violations);
    assert!(report.violations.is_empty() && report.warnings.is_empty());
    let pod = pod_of_workload(daemonset, "x7k2p", OWNER_UID).expect("GFD has a template");
    let report = in_kube_system(&pod);
    assert!(report.allowed, "{:?}", report.violations);
    assert!(report.violations.is_empty() && report.warnings.is_empty());
    // The same pod outside kube-system is denied.
    assert!(
        check(&pod, Mode::Enforce).violations.iter().any(|v| v.rule.to_string() == "device-paths")
    );
}

#[test]
fn seed_train_pod_gets_runtime_class_and_compute_affinity() {
    let pod = &fixture("11");
    let report = check(pod, Mode::Enforce);
    let after = mutated(pod, &report).expect("patch applies");
    assert_eq!(after["spec"]["runtimeClassName"], "nvidia");
    assert_eq!(
        after["spec"]["affinity"],
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["4"]}
            ]}]
        }}})
    );
    assert_eq!(
        after["metadata"]["annotations"]["gpu-policy.io/mutations"],
        "runtime-class,compute-affinity"
    );
    assert_eq!(
        report.changes[1].1,
        "require GPU compute capability >= 5.0 (image nvidia/cuda:12.6.3-base-ubuntu24.04)"
    );
}

#[test]
fn cuda_deployment_without_gpu_gets_a_void_pin_as_pod_change() {
    let deployment = &fixture("09");
    for mode in MODES {
        let report = check(deployment, mode);
        assert!(report.allowed, "{mode}: {report:?}");
        assert!(report.patch.is_empty(), "templates are never mutated");
        // An addition the author did not write: no warning on a template.
        assert!(report.warnings.is_empty(), "{mode}: {:?}", report.warnings);
        assert_eq!(
            report
                .changes
                .iter()
                .map(|(rule, summary)| format!("[{rule}] {summary}"))
                .collect::<Vec<_>>(),
            vec![
                "[visible-devices] pin NVIDIA_VISIBLE_DEVICES=void in container \"vllm\" (no GPU limit)"
            ]
        );
    }
}

#[test]
fn exporter_outside_kube_system_is_denied_in_enforce_and_warned_in_warn() {
    let exporter = &fixture("04");
    let enforce = check(exporter, Mode::Enforce);
    assert!(!enforce.allowed);
    assert_eq!(enforce.violations.len(), 1);
    assert_eq!(
        enforce.violations[0].message,
        "gpu-policy: runtimeClassName \"nvidia\" is reserved for pods that request a GPU; \
         remove it, or request nvidia.com/gpu in limits"
    );
    assert!(
        enforce
            .denial
            .as_deref()
            .is_some_and(|d| d.starts_with("gpu-policy: [runtime-class] runtimeClassName"))
    );
    // The explicit NVIDIA_VISIBLE_DEVICES=all will be replaced: the author
    // wrote it, so the template is warned about it.
    assert_eq!(enforce.warnings.len(), 1, "{:?}", enforce.warnings);
    assert!(
        enforce.warnings[0].starts_with("gpu-policy: [visible-devices] ")
            && enforce.warnings[0].contains("replace NVIDIA_VISIBLE_DEVICES with void"),
        "{}",
        enforce.warnings[0]
    );

    let warn = check(exporter, Mode::Warn);
    assert!(warn.allowed);
    assert!(warn.patch.is_empty());
    assert_eq!(warn.warnings.len(), 2, "{:?}", warn.warnings);
    assert!(
        warn.warnings[0].starts_with("gpu-policy: [runtime-class] would deny: runtimeClassName")
    );
    for warning in &warn.warnings {
        assert!(warning.chars().count() < 120, "{warning}");
    }
}

#[test]
fn allowlisted_daemonsets_in_kube_system_are_left_alone() {
    for prefix in ["00", "01"] {
        let daemonset = &fixture(prefix);
        for mode in MODES {
            let report = check(daemonset, mode);
            assert_eq!(report.namespace, "kube-system");
            assert!(report.allowed, "{prefix} {mode}: {report:?}");
            assert!(report.violations.is_empty(), "{prefix} {mode}");
            assert!(report.changes.is_empty(), "{prefix} {mode}");
            assert!(report.warnings.is_empty(), "{prefix} {mode}");
        }
    }
    // The same exporter in the default namespace (04 names no namespace) is
    // not allowlisted: same name, other namespace.
    let elsewhere = check(&fixture("04"), Mode::Enforce);
    assert_eq!(elsewhere.namespace, "default");
    assert!(!elsewhere.allowed);
}

#[test]
fn the_service_of_the_dcgm_file_is_ignored() {
    let objects = objects_of("03");
    assert_eq!(objects.len(), 2);
    let service = check(&objects[1], Mode::Enforce);
    assert_eq!(service.kind, "Service");
    assert!(service.ignored && service.allowed);
    assert!(service.patch.is_empty() && service.warnings.is_empty());
}

#[test]
fn warn_mode_changes_nothing_and_warns_per_pod_change() {
    for fixture_path in files() {
        for doc in load(&fixture_path) {
            let enforce = check(&doc.object, Mode::Enforce);
            let warn = check(&doc.object, Mode::Warn);
            let name = &warn.name;
            assert!(warn.allowed, "{name}");
            assert!(warn.patch.is_empty(), "{name}");
            assert_eq!(warn.violations, enforce.violations, "{name}");
            assert_eq!(warn.changes, enforce.changes, "{name}");
            for warning in &warn.warnings {
                assert!(warning.starts_with("gpu-policy: "), "{warning}");
                assert!(warning.chars().count() < 120, "{warning}");
            }
            if is_pod(&doc.object) {
                assert_eq!(
                    warn.warnings.len(),
                    warn.changes.len() + warn.violations.len(),
                    "{name}: {:?}",
                    warn.warnings
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Idempotence and preservation of the pod patches.

/// The pods to check: the Pod fixtures, and one pod per workload fixture
/// built from its template as the controller would create it.
fn pods() -> Vec<(String, Value)> {
    fixtures::pods("abcde", OWNER_UID)
        .into_iter()
        .map(|fixture_pod| {
            let label = format!("{}:{}", fixture_pod.stem, fixture_pod.source["kind"]);
            let label = if fixture_pod.is_template() { format!("{label} template") } else { label };
            (label, fixture_pod.pod)
        })
        .collect()
}

fn tokens(pointer: &str) -> Vec<String> {
    if pointer.is_empty() {
        return Vec::new();
    }
    pointer
        .strip_prefix('/')
        .unwrap_or(pointer)
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn pointer_of(tokens: &[String]) -> String {
    tokens.iter().map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1"))).collect()
}

/// Every node of a JSON value with its path (the root excluded).
fn nodes<'v>(value: &'v Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, &'v Value)>) {
    let children: Vec<(String, &Value)> = match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
        _ => return,
    };
    for (key, child) in children {
        path.push(key);
        out.push((path.clone(), child));
        nodes(child, path, out);
        path.pop();
    }
}

/// The regions a patch may change: each operation's path, or, for an
/// operation on an array element, the whole array (the indices after it
/// shift).
fn touched_regions(report: &ObjectReport) -> Vec<Vec<String>> {
    report
        .patch
        .iter()
        .map(|op| {
            let mut path = tokens(op.path().as_str());
            let is_element =
                path.last().is_some_and(|last| last == "-" || last.parse::<usize>().is_ok());
            if is_element {
                path.pop();
            }
            path
        })
        .collect()
}

/// Every field of `before` is still in `after`; outside the touched regions
/// (and their ancestors) with the same value.
fn assert_preserved(label: &str, before: &Value, after: &Value, report: &ObjectReport) {
    let regions = touched_regions(report);
    let mut all = Vec::new();
    nodes(before, &mut Vec::new(), &mut all);
    assert!(!all.is_empty(), "{label}: empty object");
    for (path, value) in all {
        let inside = regions.iter().any(|region| path.starts_with(region));
        if inside {
            continue;
        }
        let pointer = pointer_of(&path);
        let Some(now) = after.pointer(&pointer) else {
            panic!("{label}: {pointer} disappeared after the patch {report:?}");
        };
        let ancestor = regions.iter().any(|region| region.starts_with(&path));
        if ancestor {
            // A container of a change: still there, same type.
            assert_eq!(
                std::mem::discriminant(now),
                std::mem::discriminant(value),
                "{label}: {pointer} changed type"
            );
        } else {
            assert_eq!(now, value, "{label}: {pointer} changed outside the patch");
        }
    }
}

/// The rules that changed the pod, in order, each once.
fn changed_rules(report: &ObjectReport) -> String {
    let mut rules: Vec<&str> = Vec::new();
    for (rule, _) in &report.changes {
        if !rules.contains(&rule.as_str()) {
            rules.push(rule.as_str());
        }
    }
    rules.join(",")
}

#[test]
fn pod_patches_are_idempotent_and_keep_everything_else() {
    let mut mutated_pods = 0;
    for (label, pod) in pods() {
        let report = check(&pod, Mode::Enforce);
        let after = mutated(&pod, &report)
            .unwrap_or_else(|err| panic!("{label}: the patch does not apply: {err}"));
        if report.allowed {
            assert_eq!(
                report.patch.is_empty(),
                report.changes.is_empty(),
                "{label}: changes without patch or the reverse"
            );
        } else {
            assert!(report.patch.is_empty(), "{label}: denied pods get no patch");
        }
        if !report.patch.is_empty() {
            mutated_pods += 1;
            assert_eq!(
                after.pointer("/metadata/annotations/gpu-policy.io~1mutations"),
                Some(&json!(changed_rules(&report))),
                "{label}: the mutations annotation lists the changing rules"
            );
        }
        assert_preserved(&label, &pod, &after, &report);

        let again = check(&after, Mode::Enforce);
        assert!(
            again.patch.is_empty(),
            "{label}: a second evaluation patches again: {:?}",
            again.patch
        );
        if report.allowed {
            assert!(again.changes.is_empty(), "{label}: {:?}", again.changes);
        } else {
            // Nothing was applied: the same verdict again.
            assert_eq!(again.changes, report.changes, "{label}");
        }
        assert_eq!(again.allowed, report.allowed, "{label}");
        assert_eq!(again.violations, report.violations, "{label}");

        // Warn mode never patches.
        let warn = check(&pod, Mode::Warn);
        assert!(warn.patch.is_empty(), "{label}");
        assert_eq!(mutated(&pod, &warn).ok(), Some(pod.clone()), "{label}");
    }
    // 05, 06, 11, the two of 12, 24, and the templates of 03, 07, 08, 09,
    // 10 (00 and 01 are allowlisted, 02 and 04 are denied, the DRA pods of
    // 20 to 23 need nothing).
    assert_eq!(mutated_pods, 11);
}

/// A workload's report describes the changes its pods will get: the pod
/// built from its template gets exactly those, and the same violations.
#[test]
fn workload_reports_predict_their_pods() {
    for fixture_path in files() {
        for doc in load(&fixture_path) {
            let Some(pod) = pod_of_workload(&doc.object, "abcde", OWNER_UID) else {
                continue;
            };
            let label = stem(&fixture_path);
            let workload = check(&doc.object, Mode::Enforce);
            let created = check(&pod, Mode::Enforce);
            assert_eq!(created.namespace, workload.namespace, "{label}");
            assert_eq!(created.changes, workload.changes, "{label}");
            assert_eq!(created.violations, workload.violations, "{label}");
            assert_eq!(created.allowed, workload.allowed, "{label}");
        }
    }
}

#[test]
fn void_pin_is_appended_and_nothing_else_of_the_env_changes() {
    // The dcgm-exporter pod (03) has two env entries of its own.
    let (_, pod) = pods().into_iter().find(|(label, _)| label.starts_with("03-")).expect("03 pod");
    let report = check(&pod, Mode::Enforce);
    let after = mutated(&pod, &report).expect("patch applies");
    assert_eq!(
        after["spec"]["containers"][0]["env"],
        json!([
            {"name": "DCGM_EXPORTER_LISTEN", "value": ":9400"},
            {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        ])
    );
    assert_eq!(after["metadata"]["annotations"]["gpu-policy.io/mutations"], "visible-devices");
    assert!(after["spec"].get("runtimeClassName").is_none());
}

#[test]
fn exporter_pod_in_kube_system_is_allowlisted_through_its_owner() {
    // 04's template with the namespace of the default allowlist entry: its
    // pods keep NVIDIA_VISIBLE_DEVICES=all and the nvidia runtime class.
    let mut daemonset = fixture("04");
    daemonset["metadata"]["namespace"] = json!("kube-system");
    assert!(check(&daemonset, Mode::Enforce).allowed);
    let pod = pod_of_workload(&daemonset, "abcde", OWNER_UID).expect("a template");
    let report = check(&pod, Mode::Enforce);
    assert!(report.allowed, "{report:?}");
    assert!(report.patch.is_empty(), "{:?}", report.patch);

    // Labels alone never allowlist: without the owner reference it is denied.
    let mut orphan = pod.clone();
    orphan["metadata"].as_object_mut().expect("metadata").remove("ownerReferences");
    let report = check(&orphan, Mode::Enforce);
    assert!(!report.allowed);
    assert_eq!(report.violations[0].rule.as_str(), "runtime-class");
}

#[test]
fn dra_quickstart_pods_keep_their_cards_and_get_no_runtime_class() {
    for stem in ["20", "21", "22", "23"] {
        let documents = objects_of(stem);
        let objects: Vec<&Value> = documents.iter().collect();
        for mode in MODES {
            let reports = Checker::new(&Settings::default(), mode, NAMESPACE)
                .with_input(&objects)
                .check_all(&objects);
            for (object, report) in objects.iter().zip(&reports) {
                if !is_pod(object) {
                    continue;
                }
                assert!(report.allowed, "{stem} {mode}: {report:?}");
                assert!(report.violations.is_empty(), "{stem} {mode}");
                assert!(report.changes.is_empty(), "{stem} {mode}: {:?}", report.changes);
                assert!(report.warnings.is_empty(), "{stem} {mode}: {:?}", report.warnings);
                assert!(report.patch.is_empty(), "{stem} {mode}");
            }
        }
        // The same pods without their claims' objects: unresolved, so
        // warned and pinned, never denied.
        for pod in objects.iter().filter(|o| is_pod(o)) {
            let alone = Checker::new(&Settings::default(), Mode::Enforce, NAMESPACE)
                .with_input(&[pod])
                .check_all(&[pod]);
            let report = &alone[0];
            assert!(report.allowed, "{stem}: {report:?}");
            assert!(
                report.warnings.iter().any(|w| w.contains("unresolved")),
                "{stem}: {:?}",
                report.warnings
            );
            assert!(
                report.changes.iter().all(|(rule, _)| rule.as_str() == "visible-devices"),
                "{stem}: {:?}",
                report.changes
            );
            assert!(!report.changes.is_empty(), "{stem}: pinned");
        }
    }
}
