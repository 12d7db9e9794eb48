//! Workload templates and modes, and updates that add ephemeral containers.

use gpu_policy::admission::answer::bounded_warnings;
use gpu_policy::document::Document;
use gpu_policy::policy::{Subject, scope_for_update};

use super::*;

proptest! {
    #![proptest_config(config(1000))]

    /// Workload templates are validated, never mutated; modes: enforce
    /// allows exactly when there is no violation, warn allows with one
    /// warning per notice, violation and (pods) change (the answer carries
    /// what fits its warning budget), audit is silent; warnings start with
    /// `gpu-policy:` and fit in 119 characters. A
    /// template gets the same violations as the pod and an override warning
    /// exactly when an author-written `NVIDIA_VISIBLE_DEVICES` will go.
    #[test]
    fn templates_are_validated_never_mutated_in_every_mode(
        case in case(),
        kind in pick(&Workload::ALL),
        name in pick(&["web", "nvidia-gpu-exporter", "gpu-feature-discovery"]),
    ) {
        let pod_evaluation = evaluate_pod(&case.pod, &case)?;
        let warn = decide(Mode::Warn, ObjectKind::Pod, &pod_evaluation);
        prop_assert!(warn.allowed && !warn.carries_patch() && warn.denial.is_none());
        prop_assert_eq!(
            warn.warnings_in_full.len(),
            pod_evaluation.notices.len()
                + pod_evaluation.violations.len()
                + pod_evaluation.changes.len()
        );
        prop_assert_eq!(&warn.warnings, &bounded_warnings(&warn.warnings_in_full));
        check_warnings(&warn.warnings)?;
        let audit = decide(Mode::Audit, ObjectKind::Pod, &pod_evaluation);
        prop_assert!(audit.allowed && !audit.carries_patch() && audit.warnings.is_empty());
        prop_assert_eq!(
            audit.audit_annotations.contains_key("violations"),
            !pod_evaluation.violations.is_empty()
        );
        prop_assert_eq!(
            audit.audit_annotations.contains_key("mutations"),
            !pod_evaluation.changes.is_empty()
        );

        let workload = wrap(kind, &case.pod, name, &case.namespace);
        let object_kind = ObjectKind::Workload(kind);
        let namespace_annotations = &case.namespace_annotations;
        let evaluation = match evaluate_as(&workload, object_kind, &case.namespace, namespace_annotations) {
            Ok(Some(evaluation)) => evaluation,
            other => return Err(TestCaseError::fail(format!("{kind:?} not evaluated: {other:?}"))),
        };
        let allowlisted = workload_allowlisted(kind, name, &case.namespace);
        prop_assert_eq!(evaluation.allowlisted.is_some(), allowlisted);
        let overrides = evaluation.changes.iter().filter(|c| c.overrides_author).count();

        let enforce = decide(Mode::Enforce, object_kind, &evaluation);
        prop_assert!(!enforce.carries_patch(), "{:?} got a patch: {}", kind, String::from_utf8_lossy(&enforce.encoded_patch));
        prop_assert_eq!(enforce.allowed, evaluation.violations.is_empty());
        prop_assert_eq!(enforce.denial.is_some(), !enforce.allowed);
        prop_assert_eq!(enforce.warnings_in_full.len(), evaluation.notices.len() + overrides);
        prop_assert_eq!(&enforce.warnings, &bounded_warnings(&enforce.warnings_in_full));
        check_warnings(&enforce.warnings)?;

        let warn = decide(Mode::Warn, object_kind, &evaluation);
        prop_assert!(warn.allowed && !warn.carries_patch());
        prop_assert_eq!(
            warn.warnings_in_full.len(),
            evaluation.notices.len() + evaluation.violations.len() + overrides
        );
        prop_assert_eq!(&warn.warnings, &bounded_warnings(&warn.warnings_in_full));
        check_warnings(&warn.warnings)?;

        let audit = decide(Mode::Audit, object_kind, &evaluation);
        prop_assert!(audit.allowed && !audit.carries_patch() && audit.warnings.is_empty());
        prop_assert!(!audit.audit_annotations.contains_key("mutations"));

        if !allowlisted && !pod_allowlisted(&case.pod, &case.namespace) {
            prop_assert_eq!(&evaluation.violations, &pod_evaluation.violations);
            let summaries = |e: &Evaluation| -> Vec<String> {
                e.changes.iter().map(|c| c.summary.clone()).collect()
            };
            prop_assert_eq!(summaries(&evaluation), summaries(&pod_evaluation));
            if fully_decided(&case.pod) {
                let authored = containers(&case.pod).into_iter().any(|(kind, c)| {
                    let entries = visible_devices_entries(c);
                    match gpu_status(kind, c) {
                        Some(true) => !entries.is_empty(),
                        _ => entries.iter().any(|e| literal(e) != Some("void")),
                    }
                });
                let warned = enforce.warnings.iter().any(|w| w.contains(NVD));
                prop_assert_eq!(
                    warned, authored,
                    "template override warning: {:?}", enforce.warnings
                );
            }
        }
        if allowlisted {
            prop_assert!(
                evaluation.changes.iter().all(|c| c.rule.to_string() != "visible-devices")
            );
        }
    }

    /// A `pods/ephemeralcontainers` update touches only the new ephemeral
    /// containers (each pinned to `void`), plus the mutations record.
    #[test]
    fn an_ephemeral_update_only_touches_the_new_containers(case in case(), keep in any::<Index>()) {
        let pod = &case.pod;
        let Some(ephemeral) = pod["spec"]["ephemeralContainers"].as_array() else {
            return Ok(());
        };
        let kept = keep.index(ephemeral.len() + 1);
        let mut old = pod.clone();
        old["spec"]["ephemeralContainers"] = Value::Array(ephemeral[..kept].to_vec());
        let namespace_settings = SETTINGS.for_namespace(&case.namespace_annotations);
        let evaluator = Evaluator {
            settings: &SETTINGS,
            namespace: &namespace_settings,
            cluster: None,
            nodes: None,
            claims: None,
            images: None,
            claim_owner: None,
        };
        let (document, old) = (Document::from_value(pod), Document::from_value(&old));
        let subject = Subject::pod(document.root(), &case.namespace, scope_for_update(old.root()));
        let evaluation = match evaluator.evaluate(&subject) {
            Ok(evaluation) => evaluation,
            other => return Err(TestCaseError::fail(format!("not evaluated: {other:?}"))),
        };
        for operation in &evaluation.patch {
            let path = operation.path().to_string();
            let new_container = (kept..ephemeral.len())
                .any(|i| path.starts_with(&format!("/spec/ephemeralContainers/{i}/env")));
            let record = path == "/metadata"
                || path == "/metadata/annotations"
                || path == format!("/metadata/annotations/{}", escape(MUTATIONS));
            prop_assert!(new_container || record, "update patches {}", path);
        }
        let patched = apply(pod, &evaluation.patch)?;
        if !pod_allowlisted(pod, &case.namespace) {
            let now = patched["spec"]["ephemeralContainers"].as_array().cloned().unwrap_or_default();
            for c in &now[kept..] {
                let entries = visible_devices_entries(c);
                prop_assert_eq!(entries.len(), 1, "new ephemeral {}", c);
                prop_assert_eq!(literal(entries[0]), Some("void"));
            }
        }
    }
}
