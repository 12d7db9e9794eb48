//! Pods that hold GPUs through DRA resource claims, resolved against the
//! generated ResourceClaimTemplates and ResourceClaims of the same input
//! (as `gpu-policy check` resolves them): the patch applies, is idempotent
//! and keeps unknown fields; claimed GPU containers are not pinned and the
//! others are; a claim that does not resolve adds a warning and nothing
//! else.

use gpu_policy::document::Document;
use gpu_policy::policy::{Scope, Subject};

use super::*;
use crate::support::claimed_pods::{
    ClaimedCase, claimed_case, claimed_gpu, unresolved_claims, without_unresolved,
};
use crate::support::counted_claims::pods::evaluate;

fn evaluate_claimed(pod: &Value, claimed: &ClaimedCase) -> Result<Evaluation, TestCaseError> {
    let case = &claimed.case;
    let namespace_settings = SETTINGS.for_namespace(&case.namespace_annotations);
    let document = Document::from_value(pod);
    let subject = Subject::pod(document.root(), &case.namespace, Scope::Whole);
    match evaluate(&subject, &claimed.objects, &SETTINGS, &namespace_settings) {
        Ok(evaluation) => Ok(evaluation),
        other => Err(TestCaseError::fail(format!(
            "a well-formed pod with claims was not evaluated: {other:?}"
        ))),
    }
}

fn unresolved_notices(evaluation: &Evaluation) -> usize {
    evaluation.notices.iter().filter(|n| n.kind == NoticeKind::UnresolvedClaim).count()
}

proptest! {
    #![proptest_config(config(300))]

    /// The patch applies, a second evaluation of the patched pod changes
    /// nothing and finds the same violations, and the unknown keys, the
    /// pod's claims and every container's resources survive.
    #[test]
    fn claimed_pods_are_patched_idempotently(claimed in claimed_case()) {
        let pod = &claimed.case.pod;
        let evaluation = evaluate_claimed(pod, &claimed)?;
        let patched = apply(pod, &evaluation.patch)?;
        let again = evaluate_claimed(&patched, &claimed)?;
        prop_assert!(
            again.patch.is_empty(),
            "the patched pod is changed again: {:?}\n{}", again.changes, patched
        );
        prop_assert_eq!(&again.violations, &evaluation.violations);
        let mut pointers = Vec::new();
        unknown_key_pointers(pod, "", &mut pointers);
        for pointer in &pointers {
            prop_assert_eq!(pod.pointer(pointer), patched.pointer(pointer), "{}", pointer);
        }
        prop_assert_eq!(&pod["spec"]["resourceClaims"], &patched["spec"]["resourceClaims"]);
        for ((_, before), (_, after)) in containers(pod).into_iter().zip(containers(&patched)) {
            prop_assert_eq!(&before["resources"], &after["resources"]);
        }
    }

    /// In a pod that is not allowlisted, a container holding a GPU through
    /// a resolved claim has no `NVIDIA_VISIBLE_DEVICES` after the patch;
    /// every other container (ephemeral ones, and those whose claims do not
    /// resolve or hold no GPU, included) has exactly one, `void`.
    #[test]
    fn claimed_gpu_containers_are_not_pinned(claimed in claimed_case()) {
        let pod = &claimed.case.pod;
        if pod_allowlisted(pod, &claimed.case.namespace) {
            return Ok(());
        }
        let evaluation = evaluate_claimed(pod, &claimed)?;
        let patched = apply(pod, &evaluation.patch)?;
        for ((kind, before), (_, after)) in containers(pod).into_iter().zip(containers(&patched)) {
            let entries = visible_devices_entries(after);
            let name = &before["name"];
            if claimed_gpu(pod, &claimed.objects, kind, before) {
                prop_assert!(entries.is_empty(), "claimed GPU container {} keeps {:?}", name, entries);
            } else {
                prop_assert_eq!(entries.len(), 1, "{:?} container {}: {:?}", kind, name, entries);
                prop_assert_eq!(literal(entries[0]), Some("void"), "{}", name);
            }
        }
    }

    /// A claim that does not resolve is never a reason to deny: the pod is
    /// decided and patched exactly as the same pod without the uses of that
    /// claim, and gets one warning per such claim (the first three; the
    /// rest share one).
    #[test]
    fn unresolved_claims_only_warn(claimed in claimed_case()) {
        let pod = &claimed.case.pod;
        let evaluation = evaluate_claimed(pod, &claimed)?;
        let stripped = without_unresolved(pod, &claimed.objects);
        let reference = evaluate_claimed(&stripped, &claimed)?;
        // Unresolved claims never add a violation. The only ones they lift
        // need a container to hold no GPU (the reserved runtime class, a
        // privileged container), which an unresolved claim may well hold.
        // (A device-paths message may name fewer containers.)
        let lifting = |rule: String| rule == "runtime-class" || rule == "device-paths";
        for violation in &evaluation.violations {
            prop_assert!(
                reference.violations.contains(violation)
                    || (lifting(violation.rule.to_string())
                        && reference.violations.iter().any(|v| v.rule == violation.rule)),
                "{:?}", violation
            );
        }
        for lifted in reference.violations.iter().filter(|v| !evaluation.violations.contains(v)) {
            prop_assert!(lifting(lifted.rule.to_string()), "{:?}", lifted);
        }
        prop_assert_eq!(&evaluation.patch, &reference.patch);
        let unresolved = unresolved_claims(pod, &claimed.objects).len();
        let expected = unresolved.min(3) + usize::from(unresolved > 3);
        prop_assert_eq!(unresolved_notices(&evaluation), expected, "{:?}", evaluation.notices);
        prop_assert_eq!(unresolved_notices(&reference), 0, "{:?}", reference.notices);
        // Every other notice of the reference is still given (the one about
        // privileged GPU containers may name more of them).
        for notice in &reference.notices {
            prop_assert!(
                evaluation.notices.contains(notice)
                    || (notice.kind == NoticeKind::PrivilegedGpuContainer
                        && evaluation.notices.iter().any(|n| n.kind == notice.kind)),
                "{:?}", notice
            );
        }
    }
}
