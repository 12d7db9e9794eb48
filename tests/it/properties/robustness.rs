//! Arbitrary and damaged input never panics the evaluation.

use super::*;

proptest! {
    #![proptest_config(config(2000))]

    /// Arbitrary JSON never panics the evaluation, as a Pod or as any
    /// workload; when it is read, its patch applies.
    #[test]
    fn arbitrary_json_never_panics_the_evaluation(value in arbitrary_json()) {
        let kinds = std::iter::once(ObjectKind::Pod)
            .chain(Workload::ALL.into_iter().map(ObjectKind::Workload));
        for kind in kinds {
            if let Ok(Some(evaluation)) = evaluate_as(&value, kind, "default", &BTreeMap::new()) {
                apply(&value, &evaluation.patch)?;
                for mode in Mode::ALL {
                    check_warnings(&decide(mode, kind, &evaluation).warnings)?;
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(1000))]

    /// A generated pod with one subtree replaced by arbitrary JSON (or
    /// removed) never panics; when it is read, its patch applies and the
    /// patched pod needs no further change.
    #[test]
    fn damaged_pods_never_panic_and_stay_idempotent(
        case in case(),
        at in any::<Index>(),
        remove in prop::bool::weighted(0.2),
        replacement in arbitrary_json(),
    ) {
        let mut pointers = Vec::new();
        all_pointers(&case.pod, "", &mut pointers);
        let pointer = at.get(&pointers).clone();
        let mut pod = case.pod.clone();
        let (parent, last) = pointer.rsplit_once('/').unwrap_or(("", ""));
        let removed = remove
            && pod
                .pointer_mut(parent)
                .and_then(Value::as_object_mut)
                .is_some_and(|map| {
                    map.remove(&last.replace("~1", "/").replace("~0", "~")).is_some()
                });
        if !removed && let Some(slot) = pod.pointer_mut(&pointer) {
            *slot = replacement;
        }
        let namespace_annotations = &case.namespace_annotations;
        let result = evaluate_as(&pod, ObjectKind::Pod, &case.namespace, namespace_annotations);
        if let Ok(Some(evaluation)) = result {
            let patched = apply(&pod, &evaluation.patch)?;
            let again = evaluate_as(&patched, ObjectKind::Pod, &case.namespace, namespace_annotations);
            match again {
                Ok(Some(again)) => prop_assert!(
                    again.patch.is_empty(),
                    "not idempotent at {}: {:?}\npod: {}", pointer, again.changes, pod
                ),
                other => return Err(TestCaseError::fail(format!(
                    "patched pod no longer readable: {other:?}\npod: {pod}"
                ))),
            }
        }
    }
}
