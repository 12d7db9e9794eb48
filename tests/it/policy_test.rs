//! `gpu-policy test`: the built binary on the examples' test file
//! (`examples/tests/examples.gpu-policy-test.yaml`, which every example
//! manifest's objects are pinned in), on expectations written wrong on
//! purpose, on bad test files; and its JUnit XML read by Python's
//! `xml.etree` (the tests' virtualenv, `tests/python/venv.sh`).
//!
//! Exit status contract: 0 every case passed (or was skipped), 1 a case
//! failed, 2 bad input, one line each on stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::fixtures;
use crate::support::process::{Run, gpu_policy};
use crate::support::script::run_ok;

/// The rows of the text table: (test, object, result), cut where the
/// header's columns start.
fn rows(run: &Run) -> Vec<(String, String, String)> {
    let mut lines = run.stdout.lines();
    let header: Vec<char> = lines.next().unwrap_or("").chars().collect();
    let start = |name: &str| {
        let text: String = header.iter().collect();
        let byte = text.find(name).unwrap_or_else(|| panic!("no {name} column: {text}"));
        text[..byte].chars().count()
    };
    let (test, object, result, why) =
        (start("TEST"), start("OBJECT"), start("RESULT"), start("WHY"));
    lines
        .take_while(|line| !line.is_empty())
        .map(|line| {
            let chars: Vec<char> = line.chars().collect();
            let cell = |from: usize, to: usize| -> String {
                chars[from.min(chars.len())..to.min(chars.len())]
                    .iter()
                    .collect::<String>()
                    .trim()
                    .to_owned()
            };
            (cell(test, object), cell(object, result), cell(result, why))
        })
        .collect()
}

/// The summary's counts: (passed, failed, skipped).
fn summary(run: &Run) -> (usize, usize, usize) {
    let line = run.last_line();
    let counts: Vec<usize> = line
        .rsplit(": ")
        .next()
        .unwrap_or("")
        .split(", ")
        .filter_map(|part| part.split_whitespace().next()?.parse().ok())
        .collect();
    match counts.as_slice() {
        [passed, failed, skipped] => (*passed, *failed, *skipped),
        _ => panic!("no summary line: {line}"),
    }
}

/// An absolute path of the repository, for test files in a temporary
/// folder.
fn repo(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative).display().to_string()
}

#[test]
fn the_examples_pass_their_test_file_which_pins_every_example_object() {
    let run = gpu_policy(&["test", "examples/"], None).success();
    let (passed, failed, skipped) = summary(&run);
    assert_eq!((failed, skipped), (0, 0), "{}", run.stdout);
    let rows = rows(&run);
    assert_eq!(rows.len(), passed);
    assert!(rows.iter().all(|(_, _, result)| result == "pass"));

    // Each example file is a test named after it, and each object `check`
    // reports of it has a case.
    let cases: BTreeMap<&str, BTreeSet<&str>> =
        rows.iter().fold(BTreeMap::new(), |mut cases, (test, object, _)| {
            cases.entry(test.as_str()).or_default().insert(object.as_str());
            cases
        });
    let manifests = fixtures::example_manifests();
    assert!(manifests.len() >= 14, "{manifests:?}");
    for file in manifests {
        let stem = file.file_stem().and_then(|s| s.to_str()).expect("a name");
        let checked = gpu_policy(&["check", "-o", "json", "-f", &file.display().to_string()], None);
        let reports: Vec<Value> = checked.json();
        for report in reports {
            let object = format!(
                "{}/{}/{}",
                report["kind"].as_str().unwrap_or(""),
                report["namespace"].as_str().unwrap_or(""),
                report["name"].as_str().unwrap_or("")
            );
            assert!(
                cases.get(stem).is_some_and(|objects| objects.contains(object.as_str())),
                "{}: {object} has no case in test {stem}",
                file.display()
            );
        }
    }
}

#[test]
fn the_examples_pass_on_the_admission_policies_where_they_cover_them() {
    let run = gpu_policy(&["test", "examples/", "--engine", "cel"], None).success();
    let (passed, failed, skipped) = summary(&run);
    assert_eq!(failed, 0, "{}", run.stdout);
    // Most cases run on the policies; the ones marked `engines: [webhook]`
    // (R4, DRA claims read from other objects, the webhook's own warnings
    // and annotation) are skipped, said so in the table.
    assert!(passed > 2 * skipped && skipped > 0, "{}", run.stdout);
    assert!(rows(&run).iter().any(|(test, object, result)| test == "r4-compute-affinity"
        && object == "Pod/default/needs-ampere"
        && result == "skip"));
    assert!(run.stdout.contains("skip    engines: webhook"), "{}", run.stdout);
}

/// A test of the R2 example with expectations written wrong: half-a-card
/// allowed with no violation, limit-only's patched object without its
/// runtime class, a message that matches nothing.
fn wrong_expectations(dir: &Path) -> PathBuf {
    let expected = dir.join("expected/limit-only.yaml");
    std::fs::create_dir_all(dir.join("expected")).expect("create a folder");
    std::fs::write(
        &expected,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: limit-only\n  annotations:\n    \
         gpu-policy.io/mutations: runtime-class\nspec:\n  containers:\n  - name: infer\n    \
         image: registry.example/infer:1.0\n    resources:\n      limits:\n        \
         nvidia.com/gpu: \"2000m\"\n",
    )
    .expect("write the expected object");
    let file = dir.join("wrong.gpu-policy-test.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: gpu-policy.io/v1alpha1\nkind: Test\nname: \"limits <team-a> & 'b'\"\n\
             resources: [{r2:?}]\ncases:\n\
             - object: Pod/half-a-card\n  allowed: true\n  violations: []\n\
             - object: Pod/limit-only\n  patched: {{file: expected/limit-only.yaml}}\n\
             - object: Pod/too-many-cards\n  messages: [\"per container\", \"/above the maximum of 4/\"]\n\
             - object: Pod/request-not-limit\n  allowed: false\n",
            r2 = repo("examples/r2-bounded-requests.yaml")
        ),
    )
    .expect("write the test file");
    file
}

#[test]
fn a_wrong_expectation_fails_naming_the_object_the_rule_and_the_difference() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = wrong_expectations(dir.path());
    let run = gpu_policy(&[Path::new("test"), &file], None);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let lines = run.lines();
    for wanted in [
        "  Pod/default/half-a-card: [bounded-requests] allowed: expected true, got false (\"gpu-policy: [bounded-requests] container \\\"infer\\\": limits.nvidia.com/gpu is not a whole number; GPUs are whole devices: use an integer such as \\\"1\\\"\")",
        "  Pod/default/half-a-card: [bounded-requests] violations: expected none, got \"gpu-policy: container \\\"infer\\\": limits.nvidia.com/gpu is not a whole number; GPUs are whole devices: use an integer such as \\\"1\\\"\"",
        "  Pod/default/limit-only: [runtime-class] patched /spec/runtimeClassName: expected absent, got \"nvidia\"",
        "  Pod/default/too-many-cards: [bounded-requests] messages: expected each message matching \"per container\" or /above the maximum of 4/, got \"gpu-policy: the pod needs 16 nvidia.com/gpu (init and sidecar containers included), above the maximum of 8 per pod here\"",
        "  Pod/default/too-many-cards: messages: expected a message matching /above the maximum of 4/, got \"gpu-policy: container \\\"train\\\" must not ask for more than 8 nvidia.com/gpu per container; split the work or lower the limit\" and \"gpu-policy: the pod needs 16 nvidia.com/gpu (init and sidecar containers included), above the maximum of 8 per pod here\"",
    ] {
        assert!(lines.contains(&wanted), "missing {wanted}\nin:\n{}", run.stdout);
    }
    let results: Vec<(String, String)> =
        rows(&run).into_iter().map(|(_, object, result)| (object, result)).collect();
    assert_eq!(
        results,
        [
            ("Pod/default/half-a-card", "FAIL"),
            ("Pod/default/limit-only", "FAIL"),
            ("Pod/default/too-many-cards", "FAIL"),
            ("Pod/default/request-not-limit", "pass"),
        ]
        .map(|(o, r)| (o.to_owned(), r.to_owned()))
    );
    assert_eq!(summary(&run), (1, 3, 0));
}

/// Python's `xml.etree` reads the report and prints what it found, one
/// JSON document: the root's counts and each testcase's suite, name,
/// result and failure message.
const READ_JUNIT: &str = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = []
for suite in root.iter("testsuite"):
    for case in suite.iter("testcase"):
        failure = case.find("failure")
        cases.append({
            "suite": suite.get("name"),
            "name": case.get("name"),
            "result": "fail" if failure is not None else ("skip" if case.find("skipped") is not None else "pass"),
            "message": failure.get("message") if failure is not None else None,
            "text": failure.text if failure is not None else None,
        })
print(json.dumps({"tag": root.tag, "tests": root.get("tests"), "failures": root.get("failures"), "cases": cases}))
"#;

fn read_junit(path: &Path) -> Value {
    let (stdout, _) = run_ok(
        Command::new("bash").arg("tests/python/venv.sh").args(["-c", READ_JUNIT]).arg(path),
        "reading the JUnit report with xml.etree",
    );
    serde_json::from_str(stdout.trim()).expect("the script prints JSON")
}

#[test]
fn junit_output_is_xml_with_a_testcase_per_case() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = wrong_expectations(dir.path());
    let report = dir.path().join("report.xml");
    // On stdout with -o junit, and into --junit-file beside the table.
    let run = gpu_policy(&[Path::new("test"), &file, Path::new("-o"), Path::new("junit")], None);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let stdout_report = dir.path().join("stdout.xml");
    std::fs::write(&stdout_report, &run.stdout).expect("write the report");
    let table = gpu_policy(&[Path::new("test"), &file, Path::new("--junit-file"), &report], None);
    assert_eq!(table.code, 1);
    assert!(table.stdout.starts_with("FILE "), "{}", table.stdout);

    for path in [&stdout_report, &report] {
        let parsed = read_junit(path);
        assert_eq!(parsed["tag"], "testsuites");
        assert_eq!((&parsed["tests"], &parsed["failures"]), (&"4".into(), &"3".into()));
        let cases = parsed["cases"].as_array().expect("cases");
        assert_eq!(cases.len(), 4);
        // The test's name, with every character XML escapes, read back as written.
        assert!(cases.iter().all(|c| c["suite"] == "limits <team-a> & 'b'"), "{parsed}");
        assert_eq!(cases[0]["name"], "Pod/default/half-a-card");
        assert_eq!(cases[0]["result"], "fail");
        assert_eq!(
            cases[0]["message"],
            "Pod/default/half-a-card: [bounded-requests] allowed: expected true, got false (\"gpu-policy: [bounded-requests] container \\\"infer\\\": limits.nvidia.com/gpu is not a whole number; GPUs are whole devices: use an integer such as \\\"1\\\"\")"
        );
        // The failure's text: every difference, one per line.
        assert_eq!(cases[0]["text"].as_str().map(|t| t.lines().count()), Some(2));
        assert_eq!(cases[3]["result"], "pass");
    }
}

#[test]
fn bad_test_files_exit_2_with_one_line_each_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let r2 = repo("examples/r2-bounded-requests.yaml");
    let head =
        format!("apiVersion: gpu-policy.io/v1alpha1\nkind: Test\nname: t\nresources: [{r2:?}]\n");
    let files: [(&str, String, &str); 7] = [
        (
            "a-unknown-key",
            format!("{head}cases: [{{object: Pod/half-a-card, alowed: false}}]\n"),
            "cases[0].alowed: unknown field `alowed`, expected one of `object`, `engines`, ",
        ),
        (
            "b-unknown-rule",
            format!("{head}cases: [{{object: Pod/half-a-card, violations: [r2]}}]\n"),
            "cases[0].violations[0]: unknown rule \"r2\" (the rules: visible-devices, ",
        ),
        (
            "c-unknown-engine",
            format!(
                "{head}engines: [kyverno]\ncases: [{{object: Pod/half-a-card, allowed: false}}]\n"
            ),
            "engines[0]: unknown variant `kyverno`, expected `webhook` or `cel`",
        ),
        (
            "d-missing-resource",
            "apiVersion: gpu-policy.io/v1alpha1\nkind: Test\nname: t\nresources: [nowhere.yaml]\n\
             cases: [{object: Pod/p, allowed: true}]\n"
                .to_owned(),
            "resources[0]: cannot read ",
        ),
        ("e-invalid-yaml", "kind: [\n".to_owned(), "invalid YAML: "),
        (
            "f-bad-config",
            format!(
                "{head}config: {{maxPerPod: many}}\ncases: [{{object: Pod/half-a-card, allowed: false}}]\n"
            ),
            "config: ",
        ),
        (
            "g-wrong-type",
            format!("{head}cases: [{{object: Pod/half-a-card, allowed: \"no\"}}]\n"),
            "cases[0].allowed: invalid type: string \"no\", expected a boolean",
        ),
    ];
    for (name, text, _) in &files {
        std::fs::write(dir.path().join(format!("{name}.gpu-policy-test.yaml")), text)
            .expect("write a test file");
    }
    // A file of another name in the folder is not read.
    std::fs::write(dir.path().join("notes.yaml"), "not: [a test").expect("write");
    let run = gpu_policy(&[Path::new("test"), dir.path()], None);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "", "nothing runs on bad input");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), files.len(), "{}", run.stderr);
    for ((name, _, wanted), line) in files.iter().zip(&lines) {
        let prefix = format!(
            "gpu-policy: {}: ",
            dir.path().join(format!("{name}.gpu-policy-test.yaml")).display()
        );
        let rest = line.strip_prefix(&prefix).unwrap_or_else(|| panic!("{name}: {line}"));
        assert!(rest.starts_with(wanted), "{name}: {line}");
    }

    let empty = tempfile::tempdir().expect("a temporary folder");
    let run = gpu_policy(&[Path::new("test"), empty.path()], None);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        format!(
            "gpu-policy: {}: no test file (*.gpu-policy-test.yaml) in it\n",
            empty.path().display()
        )
    );
}

/// GPU placement in a test file: the namespace's products (its annotation), the fleet's
/// products (`nodeProducts`) the glob expands against, and `gpuTolerations`.
#[test]
fn a_test_file_places_gpu_pods_on_the_products_its_fleet_carries() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let gpu = |name: &str, spec: &str| {
        format!(
            "- inline: {{apiVersion: v1, kind: Pod, metadata: {{name: {name}}}, spec: {{{spec}\
             containers: [{{name: c, image: cuda, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]}}}}\n"
        )
    };
    let text = format!(
        "apiVersion: gpu-policy.io/v1alpha1\nkind: Test\nname: tiers\nengines: [webhook]\n\
         config: {{gpuTolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]}}\n\
         namespace: {{name: research, annotations: {{gpu-policy.io/gpu-products: \"NVIDIA-H100*\"}}}}\n\
         nodeProducts: [NVIDIA-H100-80GB-HBM3, NVIDIA-A10]\nresources:\n{}{}\
         - inline: {{apiVersion: v1, kind: Pod, metadata: {{name: web}}, spec: {{tolerations: \
         [{{operator: Exists}}], containers: [{{name: c, image: nginx}}]}}}}\n\
         cases:\n\
         - object: Pod/train\n  allowed: true\n  changes: [runtime-class, compute-affinity, \
         gpu-tolerations]\n  warnings: []\n\
         - object: Pod/pinned\n  allowed: false\n  violations: [compute-affinity]\n  \
         messages: [NVIDIA-A10, \"NVIDIA-H100*\"]\n\
         - object: Pod/web\n  allowed: true\n  changes: [visible-devices]\n  \
         warnings: [\"tolerates the GPU taint\"]\n",
        gpu("train", ""),
        gpu("pinned", "nodeSelector: {nvidia.com/gpu.product: NVIDIA-A10}, "),
    );
    let file = dir.path().join("tiers.gpu-policy-test.yaml");
    std::fs::write(&file, &text).expect("write the test file");
    let run = gpu_policy(&[Path::new("test"), &file], None);
    assert_eq!(run.code, 0, "{text}\n{}\n{}", run.stdout, run.stderr);
    assert_eq!(summary(&run), (3, 0, 0), "{}", run.stdout);

    // The product the glob expands to comes from nodeProducts: without the H100 there, the glob
    // allows none of the fleet's products and the GPU pod is denied.
    let without = text.replace("NVIDIA-H100-80GB-HBM3, ", "");
    std::fs::write(&file, &without).expect("write the test file");
    let run = gpu_policy(&[Path::new("test"), &file], None);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("Pod/research/train: [compute-affinity] allowed: expected true, got false"),
        "{}",
        run.stdout
    );

    // A glob is not a product a node carries.
    let glob = text.replace("nodeProducts: [NVIDIA-H100-80GB-HBM3", "nodeProducts: [NVIDIA-H100*");
    std::fs::write(&file, glob).expect("write the test file");
    let run = gpu_policy(&[Path::new("test"), &file], None);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(
            "nodeProducts: \"NVIDIA-H100*\" is a glob; list the products the nodes carry"
        ),
        "{}",
        run.stderr
    );
}
