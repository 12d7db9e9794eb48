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
                [Step::Key("spec"), Step::Key("containers"), Step::Index(at), Step::Key("env")],
            );
            add(path, serde_json::json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]))
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
    Evaluation { violations: violations(count), ..Evaluation::default() }
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
    assert!(denial.ends_with(&format!("; and {} more", thousands(3_000 - shown))), "{denial}");
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
    let full: Vec<String> = (0..=MAX_WARNINGS).map(|at| format!("gpu-policy: w{at}")).collect();
    let kept = bounded_warnings(&full);
    assert_eq!(kept.len(), MAX_WARNINGS);
    assert_eq!(kept.get(..MAX_WARNINGS - 1), full.get(..MAX_WARNINGS - 1));
    assert_eq!(
        kept.last().map(String::as_str),
        Some("gpu-policy: and 2 more warnings (gpu-policy check prints them all)")
    );
    // Long ones: the characters bind before the count.
    let long: Vec<String> = (0..3_000)
        .map(|at| format!("gpu-policy: [bounded-requests] would deny: {at} {}", "x".repeat(300)))
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
        decision.warnings.last().is_some_and(|w| w.contains("more warnings")),
        "{:?}",
        decision.warnings
    );
}

#[test]
fn audit_annotations_are_capped_with_a_count_of_the_rest() {
    let decision = decide(Mode::Audit, ObjectKind::Pod, &with_violations(3_000));
    let violations = decision.audit_annotations.get("violations").cloned().unwrap_or_default();
    assert!(violations.len() <= MAX_AUDIT_ANNOTATION_BYTES);
    let shown = violations.matches("[bounded-requests]").count();
    assert!(
        violations.ends_with(&format!("; and {} more", thousands(3_000 - shown))),
        "{violations}"
    );
    let few = decide(Mode::Audit, ObjectKind::Pod, &with_violations(2));
    assert_eq!(few.audit_annotations.get("violations").map(|v| v.matches("; ").count()), Some(1));
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
    assert_eq!(
        serde_json::from_slice::<Value>(&decision.encoded_patch).ok(),
        serde_json::to_value(&within.patch).ok()
    );

    let over = pins(100_000);
    let decision = decide(Mode::Enforce, ObjectKind::Pod, &over);
    assert!(!decision.allowed);
    assert!(decision.over_patch_budget);
    assert!(!decision.carries_patch());
    let denial = decision.denial.unwrap_or_default();
    assert_eq!(
        denial,
        "gpu-policy: the changes this pod needs are a patch of 100,000 operations, more than \
         the 256 KiB one answer carries: make them in the manifest (gpu-policy check -o yaml \
         prints it changed), or split the pod"
    );

    let warned = decide(Mode::Warn, ObjectKind::Pod, &over);
    assert!(warned.allowed && !warned.carries_patch());
    assert_eq!(
        warned.warnings_in_full.first().map(String::as_str),
        Some(format!("gpu-policy: would deny: {}", &denial["gpu-policy: ".len()..]).as_str())
    );

    let audited = decide(Mode::Audit, ObjectKind::Pod, &over);
    assert!(audited.allowed && audited.warnings.is_empty());
    assert_eq!(
        audited.audit_annotations.get(PATCH_ANNOTATION).map(String::as_str),
        denial.strip_prefix("gpu-policy: ")
    );

    // A workload template is never patched: no budget to be over.
    let template = ObjectKind::Workload(crate::admission::Workload::Deployment);
    assert!(decide(Mode::Enforce, template, &over).allowed);
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
            decision.audit_annotations.get(UNENFORCED_FLOOR_ANNOTATION).map(String::as_str),
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
        // What the answer carries is the evaluation's patch.
        assert!(
            !(decision.carries_patch()
                && unlabelled.patch.iter().any(|op| op.path().to_string().contains("affinity"))),
            "{mode}"
        );
    }
    // The warning, cut to a kubectl line, still names the cause.
    let enforce = decide(Mode::Enforce, ObjectKind::Pod, &unlabelled);
    assert!(
        enforce.warnings.iter().any(|w| w.contains("GPU Feature Discovery")),
        "{:?}",
        enforce.warnings
    );
    let labelled = on(NodeGpus::of(&gpus, Some((8, 0))).with_driver_labels());
    for mode in Mode::ALL {
        let decision = decide(mode, ObjectKind::Pod, &labelled);
        assert!(!decision.audit_annotations.contains_key(UNENFORCED_FLOOR_ANNOTATION), "{mode}");
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
            .map(|at| Notice::new(NoticeKind::UnenforcedFloor, format!("{at} {}", "x".repeat(900))))
            .collect(),
        ..Evaluation::default()
    };
    let decision = decide(Mode::Audit, ObjectKind::Pod, &evaluation);
    let annotation =
        decision.audit_annotations.get(UNENFORCED_FLOOR_ANNOTATION).cloned().unwrap_or_default();
    assert!(annotation.len() <= MAX_AUDIT_ANNOTATION_BYTES, "{}", annotation.len());
    assert!(annotation.ends_with(" more"), "{annotation}");
}

/// An answer whose every field is set: a patch, warnings that need
/// escapes, audit annotations.
fn full_answer() -> Answer {
    let mut answer = Answer {
        allowed: true,
        encoded_patch: br#"[{"op":"remove","path":"/a"}]"#.to_vec(),
        warnings: vec!["w1".to_owned(), "w \"2\"".to_owned()],
        ..Answer::default()
    };
    for key in ["violations", "mutations", "allowlisted", "a", "z"] {
        answer.audit_annotations.insert(key.to_owned(), format!("{key} value"));
    }
    answer
}

#[test]
fn encoding_writes_the_audit_annotations_in_key_order() {
    let answer = Answer { encoded_patch: Vec::new(), warnings: Vec::new(), ..full_answer() };
    let text = String::from_utf8(answer.encode("u").unwrap_or_default()).unwrap_or_default();
    assert_eq!(
        text,
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true,"status":{},"auditAnnotations":{"a":"a value","allowlisted":"allowlisted value","mutations":"mutations value","violations":"violations value","z":"z value"}}}"#
    );
}

/// The answer is kube's `AdmissionResponse` as kube writes it, in its
/// order, but for the patch (base64 rather than an array of numbers) and
/// the audit annotations (after it, in key order); a denial's status is
/// kube's `Status::failure` with code 403.
#[test]
fn encoding_writes_kubes_fields_in_kubes_order_with_a_base64_patch() {
    use kube::core::Status;
    use kube::core::admission::AdmissionResponse;
    let allowed = full_answer();
    let denied = Answer::denied("no \"x\"");
    for answer in [allowed, denied] {
        let mut kubes = AdmissionResponse::invalid("");
        kubes.uid = "u".to_owned();
        kubes.allowed = answer.allowed;
        kubes.result = match &answer.denial {
            Some(message) => Status::failure(message, "Forbidden").with_code(403),
            None => Status::default(),
        };
        if !answer.encoded_patch.is_empty() {
            let patch = serde_json::from_slice(&answer.encoded_patch).unwrap_or_default();
            kubes = kubes.with_patch(patch).unwrap_or_else(|err| panic!("{err}"));
        }
        if !answer.warnings.is_empty() {
            kubes.warnings = Some(answer.warnings.clone());
        }
        let kubes = serde_json::to_string(&kubes).unwrap_or_default();
        let mut expected: Vec<(String, Value)> = members(&kubes, "")
            .into_iter()
            .filter(|(key, _)| key != "patch" && key != "auditAnnotations")
            .collect();
        if !answer.encoded_patch.is_empty() {
            let base64 = base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                &answer.encoded_patch,
            );
            expected.push(("patch".into(), Value::from(base64)));
        }
        if !answer.audit_annotations.is_empty() {
            let annotations = serde_json::to_value(&answer.audit_annotations).unwrap_or_default();
            expected.push(("auditAnnotations".into(), annotations));
        }
        let bytes = answer.encode("u").unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let review: Vec<String> = members(&text, "").into_iter().map(|(key, _)| key).collect();
        assert_eq!(review, ["apiVersion", "kind", "response"]);
        assert_eq!(members(&text, "/response"), expected, "{text}");
    }
}

/// The members of the object at `pointer` in `text`, in the order of the
/// text.
fn members(text: &str, pointer: &str) -> Vec<(String, Value)> {
    let document = crate::document::Document::parse(text).unwrap_or_else(|err| panic!("{err}"));
    let object = document.root().pointer(pointer).and_then(|at| at.as_object());
    let object = object.unwrap_or_else(|| panic!("no object at {pointer:?}: {text}"));
    object.iter().map(|(key, value)| (key.to_owned(), value.to_value())).collect()
}

/// The answer as a serde struct of the same fields writes it: the oracle
/// of `encode`, which writes the keys and constants as they are.
fn encoded_by_serde(uid: &str, answer: &Answer) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Review<'a> {
        #[serde(rename = "apiVersion")]
        api_version: &'a str,
        kind: &'a str,
        response: Response<'a>,
    }
    #[derive(serde::Serialize)]
    struct Response<'a> {
        uid: &'a str,
        allowed: bool,
        status: kube::core::Status,
        #[serde(rename = "patchType", skip_serializing_if = "Option::is_none")]
        patch_type: Option<&'a str>,
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        warnings: &'a [String],
        #[serde(skip_serializing_if = "Option::is_none")]
        patch: Option<String>,
        #[serde(rename = "auditAnnotations", skip_serializing_if = "BTreeMap::is_empty")]
        audit_annotations: &'a BTreeMap<String, String>,
    }
    let patch = (!answer.encoded_patch.is_empty()).then(|| {
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &answer.encoded_patch)
    });
    let status = if answer.allowed {
        kube::core::Status::default()
    } else {
        let message = answer.denial.clone().unwrap_or_else(|| Message::new("denied").into_string());
        let kept = prefix_within(&message, MAX_DENIAL_BYTES);
        let message = if kept.len() < message.len() { format!("{kept}…") } else { message };
        kube::core::Status::failure(&message, "Forbidden").with_code(403)
    };
    let review = Review {
        api_version: kube::core::admission::META_API_VERSION_V1,
        kind: kube::core::admission::META_KIND,
        response: Response {
            uid,
            allowed: answer.allowed,
            status,
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            warnings: &answer.warnings,
            audit_annotations: &answer.audit_annotations,
            patch,
        },
    };
    serde_json::to_vec(&review).unwrap_or_default()
}

proptest::proptest! {
    /// Whatever the answer holds (strings that need escapes, a denial of
    /// any length, any patch bytes), `encode` writes the bytes serde
    /// writes, the denial cut to `MAX_DENIAL_BYTES`.
    #[test]
    fn an_answer_is_the_bytes_serde_writes(
        uid in "(?s).{0,12}",
        allowed in proptest::prelude::any::<bool>(),
        denial in proptest::option::of("(?s).{1,12}"),
        long_denial in proptest::prelude::any::<bool>(),
        warnings in proptest::collection::vec("(?s).{0,8}", 0..3),
        patch in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        annotations in proptest::collection::vec(("(?s).{0,6}", "(?s).{0,6}"), 0..4),
    ) {
        let denial = denial.map(|text| if long_denial { text.repeat(MAX_DENIAL_BYTES) } else { text });
        let answer = Answer {
            allowed,
            denial,
            warnings,
            encoded_patch: patch,
            audit_annotations: annotations.into_iter().collect(),
            ..Answer::default()
        };
        let expected = encoded_by_serde(&uid, &answer);
        let bytes = answer.encode(&uid).unwrap_or_default();
        proptest::prop_assert_eq!(String::from_utf8_lossy(&bytes), String::from_utf8_lossy(&expected));
    }
}
