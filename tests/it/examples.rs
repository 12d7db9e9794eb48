//! The example manifests of `examples/` say what `gpu-policy check` decides
//! for each of their objects, in their header ("Expected with `gpu-policy
//! check -f ...`"); the program must agree, object for object. The DRA
//! examples are also checked message for message.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::fixtures;

/// `gpu-policy check -o json -f file` (enforce mode): one report per object.
fn check(file: &Path) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
        .args(["check", "-o", "json", "-f"])
        .arg(file)
        .output()
        .expect("the binary runs");
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// The header's expectations: ("Kind namespace/name", allowed).
fn expected(file: &Path) -> Vec<(String, bool)> {
    let text = std::fs::read_to_string(file).expect("readable");
    text.lines()
        .take_while(|line| line.starts_with('#'))
        .filter_map(|line| {
            let words: Vec<&str> = line.trim_start_matches('#').split_whitespace().collect();
            let (kind, object, decision) = (words.first()?, words.get(1)?, words.get(2)?);
            let allowed = if decision.starts_with("allowed") {
                true
            } else if decision.starts_with("DENIED") {
                false
            } else {
                return None;
            };
            (kind.starts_with(char::is_uppercase) && object.contains('/'))
                .then(|| (format!("{kind} {object}"), allowed))
        })
        .collect()
}

fn label(report: &Value) -> String {
    format!(
        "{} {}/{}",
        report["kind"].as_str().unwrap_or(""),
        report["namespace"].as_str().unwrap_or(""),
        report["name"].as_str().unwrap_or("")
    )
}

#[test]
fn every_example_is_decided_as_its_header_says() {
    let files = fixtures::example_manifests();
    assert!(files.len() >= 14, "{files:?}");
    for file in files {
        let found: Vec<(String, bool)> =
            check(&file).iter().map(|report| (label(report), report["allowed"] == true)).collect();
        assert_eq!(found, expected(&file), "{}", file.display());
    }
}

/// (example, object, violations, warnings, containers pinned to void)
type DraCase = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

const DRA: &[DraCase] = &[
    (
        "dra-compute-floors",
        "Pod default/on-a-p100",
        &[
            "gpu-policy: container \"train\" uses ResourceClaim \"shared-p100\", allocated a device below what its image needs (compute capability >= 7.5): gpu-0 of pool node-1 has compute capability 6.0; use a claim whose devices meet it",
        ],
        &[],
        &[],
    ),
    ("dra-claimed-gpu", "Pod default/dra-trainer", &[], &[], &["log-shipper"]),
    (
        "dra-unresolved-claim",
        "Pod default/dra-unresolved",
        &[],
        &[
            "gpu-policy: claim \"gpu\" unresolved, container \"train\" stays pinned: ResourceClaimTemplate \"elsewhere\" not found",
        ],
        &["train"],
    ),
    (
        "dra-allocation-mode-all",
        "ResourceClaimTemplate default/every-gpu",
        &[
            "gpu-policy: request \"gpu\" asks for every GPU of a node (allocationMode: All); use allocationMode: ExactCount with a count",
        ],
        &[],
        &[],
    ),
    (
        "dra-allocation-mode-all",
        "ResourceClaim default/one-or-all",
        &[
            "gpu-policy: request \"gpu\" asks for every GPU of a node (allocationMode: All); use allocationMode: ExactCount with a count",
        ],
        &[],
        &[],
    ),
    (
        "dra-count-above-max",
        "ResourceClaim default/sixteen-gpus",
        &[
            "gpu-policy: request \"gpu\" asks for 16 GPUs, above the maximum of 8 per container; lower its count",
            "gpu-policy: the claim's GPU requests total 16, above the maximum of 8 per pod here; split the claim or lower the counts",
        ],
        &[],
        &[],
    ),
    (
        "dra-count-above-max",
        "ResourceClaimTemplate default/six-and-four",
        &[
            "gpu-policy: the claim's GPU requests total 10, above the maximum of 8 per pod here; split the claim or lower the counts",
        ],
        &[],
        &[],
    ),
    (
        "dra-count-above-max",
        "Pod default/claimed-and-plugin",
        &[
            "gpu-policy: the pod needs 4 nvidia.com/gpu (init and sidecar containers included) and 6 GPUs through resource claims, above the maximum of 8 per pod here",
        ],
        &[],
        &[],
    ),
    (
        "dra-admin-access",
        "ResourceClaim ml/watch-every-gpu",
        &[
            "gpu-policy: request \"gpu\" sets adminAccess on a GPU class, allowed only in namespaces the allowlist names; remove adminAccess",
        ],
        &[],
        &[],
    ),
    ("dra-admin-access", "ResourceClaim kube-system/watch-every-gpu", &[], &[], &[]),
    (
        "dra-extended-resource-claim",
        "ResourceClaim ml/trainer-extended-resources-x7k2q",
        &[],
        &[],
        &[],
    ),
    (
        "dra-privileged",
        "Pod default/privileged-claim",
        &[],
        &[
            "gpu-policy: privileged container \"train\" sees every GPU of the node, not only the ones requested",
        ],
        &[],
    ),
    (
        "dra-privileged",
        "Pod default/privileged-helper",
        &[
            "gpu-policy: container \"helper\" must not be privileged without a GPU: a privileged container sees every GPU of the node; drop privileged, or request nvidia.com/gpu in limits",
        ],
        &[],
        &[],
    ),
];

/// The containers a patch pins to `void`, by name.
fn pinned(report: &Value, object: &Value) -> Vec<String> {
    let patch: json_patch::Patch =
        serde_json::from_value(report["patch"].clone()).expect("a JSON patch");
    let mut after = object.clone();
    json_patch::patch(&mut after, &patch).expect("the patch applies");
    after["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            c["env"].as_array().is_some_and(|env| {
                env.iter().any(|e| e["name"] == "NVIDIA_VISIBLE_DEVICES" && e["value"] == "void")
            })
        })
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_dra_examples_say_what_they_show() {
    for (example, object, violations, warnings, pins) in DRA {
        let file = PathBuf::from(format!("examples/{example}.yaml"));
        let reports = check(&file);
        let report = reports
            .iter()
            .find(|r| label(r) == *object)
            .unwrap_or_else(|| panic!("{example}: no {object}"));
        let messages = |key: &str, field: Option<&str>| -> Vec<String> {
            report[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| field.map_or(v, |f| &v[f]).as_str().map(str::to_owned))
                .collect()
        };
        assert_eq!(messages("violations", Some("message")), *violations, "{object}");
        assert_eq!(messages("warnings", None), *warnings, "{object}");
        let text = std::fs::read_to_string(&file).expect("readable");
        let manifest = serde_saphyr::from_multiple::<Value>(&text)
            .expect("YAML")
            .into_iter()
            .find(|o| {
                object.ends_with(&format!("/{}", o["metadata"]["name"].as_str().unwrap_or("")))
                    && object.starts_with(o["kind"].as_str().unwrap_or("-"))
            })
            .expect("the object");
        assert_eq!(pinned(report, &manifest), *pins, "{object}");
    }
}

/// The README's DRA example is the program's own output: every
/// `$ gpu-policy check ...` block of the README, run, prints what follows
/// it.
#[test]
fn the_readme_shows_the_programs_real_output() {
    let readme = std::fs::read_to_string("README.md").expect("README.md");
    let mut lines = readme.lines();
    let mut checked = 0;
    while let Some(line) = lines.next() {
        let Some(args) = line.strip_prefix("$ gpu-policy check ") else {
            continue;
        };
        let shown: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        let output = Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
            .arg("check")
            .args(args.split_whitespace())
            .output()
            .expect("the binary runs");
        let printed = String::from_utf8_lossy(&output.stdout);
        assert_eq!(printed.lines().collect::<Vec<_>>(), shown, "{line}");
        checked += 1;
    }
    assert!(checked >= 1, "no `$ gpu-policy check` block in README.md");
}
