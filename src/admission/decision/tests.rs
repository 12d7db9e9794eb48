//! The caps of what a decision says: the denial, the warnings, the audit
//! annotations and the patch. Under every cap the output is what it was;
//! over it, what fits and a count of the rest.

use json_patch::PatchOperation;
use json_patch::jsonptr::Pointer;
use serde_json::Value;

use super::*;
use crate::policy::patch::{Step, add, pointer_below};
use crate::policy::{Change, RuleId, Violation};

/// `count` violations of bounded-requests, each naming its own resource.
fn violations(count: usize) -> Vec<Violation> {
    (0..count)
        .map(|at| Violation {
            rule: RuleId::BoundedRequests,
            message: Message::new(format_args!(
                "container \"train\" must set limits.nvidia.com/mig-{at}g.{at}gb: a GPU request \
                 needs an equal limit"
            )),
        })
        .collect()
}

/// A pin of `void` in each of `containers` containers: one change, one
/// operation each.
fn pins(containers: usize) -> Evaluation {
    let patch: Vec<PatchOperation> = (0..containers)
        .map(|at| {
            let path = pointer_below(
                Pointer::root(),
                [
                    Step::Key("spec"),
                    Step::Key("containers"),
                    Step::Index(at),
                    Step::Key("env"),
                ],
            );
            add(
                path,
                serde_json::json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]),
            )
        })
        .collect();
    Evaluation {
        changes: vec![Change {
            rule: RuleId::VisibleDevices,
            summary: "pin NVIDIA_VISIBLE_DEVICES=void in many containers".to_owned(),
            operations: 0..patch.len(),
            overrides_author: false,
        }],
        patch,
        ..Evaluation::default()
    }
}

fn with_violations(count: usize) -> Evaluation {
    Evaluation {
        violations: violations(count),
        ..Evaluation::default()
    }
}

/// Under the cap, the denial is every violation joined, as it always was.
#[test]
fn a_denial_under_its_cap_lists_every_violation() {
    let evaluation = with_violations(3);
    let decision = decide(Mode::Enforce, ObjectKind::Pod, &evaluation);
    let joined = evaluation
        .violations
        .iter()
        .map(|v| format!("[{}] {}", v.rule, v.message.body()))
        .collect::<Vec<_>>()
        .join("; ");
    assert_eq!(decision.denial, Some(format!("gpu-policy: {joined}")));
}

#[test]
fn a_denial_over_its_cap_counts_the_violations_left_out() {
    let evaluation = with_violations(3_000);
    let decision = decide(Mode::Enforce, ObjectKind::Pod, &evaluation);
    let denial = decision.denial.unwrap_or_default();
    assert!(denial.len() <= MAX_DENIAL_BYTES, "{} bytes", denial.len());
    let shown = denial.matches("[bounded-requests]").count();
    assert!(shown > 10, "{denial}");
    assert!(
        denial.ends_with(&format!("; and {} more", thousands(3_000 - shown))),
        "{denial}"
    );
    assert!(!denial.contains('\n'));
}

/// Warnings: each cut to one line, at most sixteen and 2,048 characters,
/// the last counting the rest; up to sixteen short ones, all of them.
#[test]
fn warnings_are_capped_in_count_and_characters() {
    for count in [0, 1, MAX_WARNINGS] {
        let full: Vec<String> = (0..count).map(|at| format!("gpu-policy: w{at}")).collect();
        assert_eq!(bounded_warnings(&full), full);
    }
    let full: Vec<String> = (0..=MAX_WARNINGS)
        .map(|at| format!("gpu-policy: w{at}"))
        .collect();
    let kept = bounded_warnings(&full);
    assert_eq!(kept.len(), MAX_WARNINGS);
    assert_eq!(kept.get(..MAX_WARNINGS - 1), full.get(..MAX_WARNINGS - 1));
    assert_eq!(
        kept.last().map(String::as_str),
        Some("gpu-policy: and 2 more warnings (gpu-policy check prints them all)")
    );
    // Long ones: the characters bind before the count.
    let long: Vec<String> = (0..3_000)
        .map(|at| {
            format!(
                "gpu-policy: [bounded-requests] would deny: {at} {}",
                "x".repeat(300)
            )
        })
        .collect();
    let kept = bounded_warnings(&long);
    let chars: usize = kept.iter().map(|w| w.chars().count()).sum();
    assert!(chars <= MAX_WARNINGS_CHARS, "{chars}");
    assert!(kept.len() <= MAX_WARNINGS);
    assert!(kept.iter().all(|w| w.chars().count() <= MAX_WARNING_CHARS));
    let more = 3_000 - (kept.len() - 1);
    assert_eq!(
        kept.last().cloned(),
        Some(format!(
            "gpu-policy: and {} more warnings (gpu-policy check prints them all)",
            thousands(more)
        ))
    );
}

#[test]
fn warn_mode_warns_within_the_caps() {
    let decision = decide(Mode::Warn, ObjectKind::Pod, &with_violations(3_000));
    assert!(decision.allowed);
    assert_eq!(decision.warnings_in_full.len(), 3_000);
    assert!(decision.warnings.len() <= MAX_WARNINGS);
    assert!(
        decision
            .warnings
            .last()
            .is_some_and(|w| w.contains("more warnings")),
        "{:?}",
        decision.warnings
    );
}

#[test]
fn audit_annotations_are_capped_with_a_count_of_the_rest() {
    let decision = decide(Mode::Audit, ObjectKind::Pod, &with_violations(3_000));
    let violations = decision
        .audit_annotations
        .get("violations")
        .cloned()
        .unwrap_or_default();
    assert!(violations.len() <= MAX_AUDIT_ANNOTATION_BYTES);
    let shown = violations.matches("[bounded-requests]").count();
    assert!(
        violations.ends_with(&format!("; and {} more", thousands(3_000 - shown))),
        "{violations}"
    );
    let few = decide(Mode::Audit, ObjectKind::Pod, &with_violations(2));
    assert_eq!(
        few.audit_annotations
            .get("violations")
            .map(|v| v.matches("; ").count()),
        Some(1)
    );
}

/// One item longer than the room is cut and marked, and the rest counted.
#[test]
fn an_item_longer_than_the_room_is_cut() {
    let items = ["x".repeat(10_000), "y".to_owned()];
    let joined = joined_within(&items, |item, out| out.push_str(item), 100);
    assert!(joined.len() <= 100, "{joined}");
    assert!(joined.ends_with("…; and 1 more"), "{joined}");
    assert_eq!(joined_within::<String>(&[], |_, _| {}, 100), "");
}

/// A patch over its budget is never carried: enforce mode denies the pod,
/// the mutating webhook too (fail closed); warn mode says it would; audit
/// mode records it. Under the budget the patch is carried as it is.
#[test]
fn a_patch_over_its_budget_denies_in_enforce_mode() {
    let within = pins(100);
    let decision = decide(Mode::Enforce, ObjectKind::Pod, &within);
    assert!(decision.allowed && !decision.over_patch_budget);
    assert_eq!(decision.patch, within.patch);

    let over = pins(100_000);
    let decision = decide(Mode::Enforce, ObjectKind::Pod, &over);
    assert!(!decision.allowed);
    assert!(decision.over_patch_budget);
    assert!(decision.patch.is_empty());
    let denial = decision.denial.unwrap_or_default();
    assert_eq!(
        denial,
        "gpu-policy: the changes this pod needs are a patch of 100,000 operations, more than \
         the 256 KiB one answer carries: make them in the manifest (gpu-policy check -o yaml \
         prints it changed), or split the pod"
    );

    let warned = decide(Mode::Warn, ObjectKind::Pod, &over);
    assert!(warned.allowed && warned.patch.is_empty());
    assert_eq!(
        warned.warnings_in_full.first().map(String::as_str),
        Some(
            format!(
                "gpu-policy: would deny: {}",
                &denial["gpu-policy: ".len()..]
            )
            .as_str()
        )
    );

    let audited = decide(Mode::Audit, ObjectKind::Pod, &over);
    assert!(audited.allowed && audited.warnings.is_empty());
    assert_eq!(
        audited
            .audit_annotations
            .get(PATCH_ANNOTATION)
            .map(String::as_str),
        denial.strip_prefix("gpu-policy: ")
    );

    // A workload template is never patched: no budget to be over.
    let template = ObjectKind::Workload(crate::admission::Workload::Deployment);
    assert!(decide(Mode::Enforce, template, &over).allowed);
}

/// The webhook takes the patch out of the evaluation only when it carries
/// it.
#[test]
fn a_patch_over_its_budget_is_left_in_the_evaluation() {
    let mut over = pins(100_000);
    let decision = decide_taking_patch(Mode::Enforce, ObjectKind::Pod, &mut over);
    assert!(decision.patch.is_empty());
    assert_eq!(over.patch.len(), 100_000);
    let value: Value = serde_json::to_value(&decision.patch).unwrap_or_default();
    assert_eq!(value, Value::Array(Vec::new()));
}

/// A GPU pod on a fleet whose GPU nodes carry no GPU Feature Discovery
/// labels: in every mode the audit log records the floors R4 left out, and
/// nothing claims them (warn mode's would-change lines, audit mode's
/// mutations). A labelled fleet gets no such annotation.
#[test]
fn floors_left_out_are_recorded_in_every_mode() {
    use crate::policy::cluster::{ClusterSnapshot, NodeGpus};
    use crate::policy::testing::evaluate_on_nodes;
    let pod = serde_json::json!({"spec": {"containers": [{"name": "c",
        "image": "vllm/vllm-openai:v0.11.0-cu130",
        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    let on = |node: NodeGpus| {
        let fleet = ClusterSnapshot {
            nodes: [("gpu-1".to_owned(), node)].into_iter().collect(),
            ..ClusterSnapshot::default()
        };
        evaluate_on_nodes(&pod, &fleet, &Settings::default())
    };
    let gpus = [("nvidia.com/gpu", 4)];
    let unlabelled = on(NodeGpus::of(&gpus, None));
    let expected = "compute-affinity: no GPU node carries GPU Feature Discovery's labels, so \
        compute capability >= 7.5 and a driver for CUDA 13.0 or branch 535, 550, 565, 570, 575 \
        are not required; deploy GPU Feature Discovery, or set nvidia.com/gpu.compute.* and \
        nvidia.com/cuda.* on the GPU nodes";
    for mode in Mode::ALL {
        let decision = decide(mode, ObjectKind::Pod, &unlabelled);
        assert_eq!(
            decision
                .audit_annotations
                .get(UNENFORCED_FLOOR_ANNOTATION)
                .map(String::as_str),
            Some(expected),
            "{mode}"
        );
        let claims_a_floor = |text: &String| text.contains("compute capability >=");
        let said: Vec<&String> = decision
            .warnings_in_full
            .iter()
            .chain(decision.audit_annotations.get("mutations"))
            .filter(|text| claims_a_floor(text) && !text.contains("not required"))
            .collect();
        assert!(said.is_empty(), "{mode}: {said:?}");
        assert!(
            !decision
                .patch
                .iter()
                .any(|op| op.path().to_string().contains("affinity")),
            "{mode}"
        );
    }
    // The warning, cut to a kubectl line, still names the cause.
    let enforce = decide(Mode::Enforce, ObjectKind::Pod, &unlabelled);
    assert!(
        enforce
            .warnings
            .iter()
            .any(|w| w.contains("GPU Feature Discovery")),
        "{:?}",
        enforce.warnings
    );
    let labelled = on(NodeGpus::of(&gpus, Some((8, 0))).with_driver_labels());
    for mode in Mode::ALL {
        let decision = decide(mode, ObjectKind::Pod, &labelled);
        assert!(
            !decision
                .audit_annotations
                .contains_key(UNENFORCED_FLOOR_ANNOTATION),
            "{mode}"
        );
    }
    let warned = decide(Mode::Warn, ObjectKind::Pod, &labelled);
    assert!(
        warned
            .warnings_in_full
            .iter()
            .any(|w| w.contains("would require GPU compute capability >= 7.5")),
        "{:?}",
        warned.warnings_in_full
    );
}

/// The annotation is bounded as every audit annotation is.
#[test]
fn the_unenforced_floor_annotation_is_bounded() {
    use crate::policy::Notice;
    let evaluation = Evaluation {
        notices: (0..100)
            .map(|at| {
                Notice::new(
                    NoticeKind::UnenforcedFloor,
                    format!("{at} {}", "x".repeat(900)),
                )
            })
            .collect(),
        ..Evaluation::default()
    };
    let decision = decide(Mode::Audit, ObjectKind::Pod, &evaluation);
    let annotation = decision
        .audit_annotations
        .get(UNENFORCED_FLOOR_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    assert!(
        annotation.len() <= MAX_AUDIT_ANNOTATION_BYTES,
        "{}",
        annotation.len()
    );
    assert!(annotation.ends_with(" more"), "{annotation}");
}
