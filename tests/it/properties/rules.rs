//! What each rule writes or denies: the pins, the runtime class, the
//! compute affinity and its terms, and the bounded GPU requests.

use super::*;

proptest! {
    #![proptest_config(config(1000))]

    /// After patching: every non-GPU container of a non-allowlisted pod
    /// has exactly one `NVIDIA_VISIBLE_DEVICES`, `void`; every GPU container
    /// has none; allowlisted pods keep their env; a GPU pod has a runtime
    /// class (its own if non-empty, else `nvidia`), a non-GPU pod keeps its
    /// own; a GPU pod with a minimum compute capability has it in every
    /// required term (for CUDA 13 images: `major Gt 7` or `major In [7]` and
    /// `minor Gt 4`), and a pod without one keeps its affinity.
    #[test]
    fn patched_pods_have_their_pins_runtime_class_and_affinity(case in case()) {
        let (_, patched) = patched(&case)?;
        let original = &case.pod;
        let allowlisted = pod_allowlisted(original, &case.namespace);
        let before = containers(original);
        let after = containers(&patched);
        prop_assert_eq!(before.len(), after.len());
        for ((kind, b), (_, a)) in before.iter().zip(&after) {
            let name = b["name"].as_str().unwrap_or("");
            let entries = visible_devices_entries(a);
            if allowlisted {
                prop_assert_eq!(b.get("env"), a.get("env"), "allowlisted {:?} env changed", name);
                continue;
            }
            match gpu_status(*kind, b) {
                Some(false) => {
                    prop_assert_eq!(
                        entries.len(), 1,
                        "non-GPU {:?} container {:?} has {} {} entries: {:?}",
                        kind, name, entries.len(), NVD, a.get("env")
                    );
                    prop_assert_eq!(
                        literal(entries[0]), Some("void"), "{:?}: {}", name, entries[0]
                    );
                }
                Some(true) => prop_assert!(
                    entries.is_empty(),
                    "GPU container {:?} keeps {:?}", name, entries
                ),
                None => {}
            }
        }

        let class_before = &original["spec"]["runtimeClassName"];
        let class_after = &patched["spec"]["runtimeClassName"];
        match pod_gpu(original) {
            Some(true) => {
                if class_before.as_str().is_some_and(|c| !c.is_empty()) {
                    prop_assert_eq!(class_before, class_after);
                } else {
                    prop_assert_eq!(class_after, &json!("nvidia"), "GPU pod without runtime class");
                }
            }
            Some(false) => prop_assert_eq!(
                original["spec"].get("runtimeClassName"),
                patched["spec"].get("runtimeClassName")
            ),
            None => {}
        }

        match pod_gpu(original) {
            Some(true) if fully_decided(original) => {
                let minimum = expected_minimum(original, &case.namespace_annotations)
                    .filter(|m| *m != (0, 0));
                let terms = required_terms(&patched).cloned().unwrap_or_default();
                match minimum {
                    Some(minimum) => {
                        prop_assert!(
                            !terms.is_empty(), "no required terms for minimum {:?}", minimum
                        );
                        for term in &terms {
                            prop_assert!(
                                term_guarantees(term, minimum),
                                "term {} admits cards below {:?}", term, minimum
                            );
                        }
                    }
                    None => prop_assert_eq!(
                        original["spec"].get("affinity"),
                        patched["spec"].get("affinity"),
                        "affinity changed without a minimum"
                    ),
                }
                let cuda13 = containers(original).into_iter().any(|(kind, c)| {
                    gpu_status(kind, c) == Some(true)
                        && c["image"].as_str().is_some_and(is_cuda13)
                });
                if cuda13 {
                    let literal_form = minimum.is_some_and(|m| m <= (8, 0));
                    for term in &terms {
                        prop_assert!(term_guarantees(term, (7, 5)), "CUDA 13 term {}", term);
                        if literal_form {
                            let e = match_expressions(term);
                            let gt7 = e.contains(&expression(MAJOR, "Gt", &["7"]));
                            let in7 = e.contains(&expression(MAJOR, "In", &["7"]))
                                && e.contains(&expression(MINOR, "Gt", &["4"]));
                            prop_assert!(gt7 || in7, "CUDA 13 term {} lacks the constraint", term);
                        }
                    }
                }
            }
            Some(false) => prop_assert_eq!(
                original["spec"].get("affinity"),
                patched["spec"].get("affinity"),
                "non-GPU pod's affinity changed"
            ),
            _ => {}
        }
    }

    /// Node selector terms are multiplied out: each original term that
    /// already carries an alternative stays as it is, every other term
    /// becomes one term per alternative (the original expressions first, the
    /// rest of the term unchanged), so the count is the spec's sum; no term
    /// is left without the constraint. An alternative is a compute
    /// alternative ANDed with a driver alternative when an image has a
    /// driver floor, so the driver floor too is ANDed into every existing
    /// term, never ORed beside it. Duplicate expressions are ignored here
    /// (see `no_duplicate_expression_is_added`); that re-evaluating adds
    /// nothing is `a_patched_pod_needs_no_further_change`.
    #[test]
    fn node_selector_terms_are_multiplied_out(case in case()) {
        let (_, patched) = patched(&case)?;
        let original = &case.pod;
        if pod_gpu(original) != Some(true) || !fully_decided(original) {
            return Ok(());
        }
        let alternatives = pod_alternatives(original, &case.namespace_annotations);
        if alternatives.is_empty() {
            return Ok(());
        }
        if has_driver_floor(original) {
            let drivers = driver_floor_alternatives();
            for term in required_terms(&patched).into_iter().flatten() {
                let e = match_expressions(term);
                prop_assert!(
                    drivers.iter().any(|d| d.iter().all(|x| e.contains(x))),
                    "term {} has no driver floor", term
                );
            }
        }
        let expected = expected_terms(original, &alternatives);
        let actual = required_terms(&patched).cloned().unwrap_or_default();
        let original_terms = required_terms(original).cloned().unwrap_or_default();
        let count: usize = original_terms
            .iter()
            .map(|t| {
                let e = match_expressions(t);
                if alternatives.iter().any(|a| a.iter().all(|x| e.contains(x))) {
                    1
                } else {
                    alternatives.len()
                }
            })
            .sum();
        let count = if original_terms.is_empty() { alternatives.len() } else { count };
        prop_assert_eq!(actual.len(), count, "terms: {}", Value::Array(actual.clone()));
        let normal =
            |terms: &[Value]| -> Vec<Value> { terms.iter().map(without_duplicates).collect() };
        prop_assert_eq!(normal(&actual), normal(&expected));
        for term in &original_terms {
            let e = match_expressions(term);
            prop_assert!(
                actual.iter().any(|t| match_expressions(t).starts_with(&e)),
                "original term {} lost its expressions", term
            );
        }
        for term in &actual {
            prop_assert!(
                alternatives.iter().any(|a| a.iter().all(|x| match_expressions(term).contains(x))),
                "term {} has no compute constraint", term
            );
        }
    }

    /// "No duplicate expression is added when the pod already carries
    /// it": no patched term has the same expression twice (the generator
    /// never writes duplicates itself).
    #[test]
    fn no_duplicate_expression_is_added(case in case()) {
        let (_, patched) = patched(&case)?;
        for term in required_terms(&patched).into_iter().flatten() {
            let expressions = match_expressions(term);
            for (index, e) in expressions.iter().enumerate() {
                prop_assert!(
                    !expressions[..index].contains(e),
                    "term {} repeats {}", term, e
                );
            }
        }
    }

    /// R2 denies exactly the pods the spec says (invalid or fractional
    /// values, a request without a limit, request != limit, more than 8 per
    /// container, an effective pod count with sidecars above the namespace
    /// maximum), and ignored annotations are reported as notices.
    #[test]
    fn gpu_requests_are_denied_exactly_as_the_rule_says(case in case()) {
        let evaluation = evaluate_pod(&case.pod, &case)?;
        let max = case.namespace_annotations.get(MAX_GPUS).map(String::as_str);
        let max_per_pod = match max {
            Some("2") => 2,
            _ => 8,
        };
        let expected = bounded_requests_violated(&case.pod, max_per_pod);
        let actual = evaluation.violations.iter().any(|v| v.rule.to_string() == "bounded-requests");
        prop_assert_eq!(
            actual, expected, "bounded-requests violations: {:?}", evaluation.violations
        );

        let mut notices = usize::from(matches!(max, Some("16" | "x")));
        let namespace_minimum = case.namespace_annotations.get(MIN_CC).map(String::as_str);
        notices += usize::from(namespace_minimum == Some("junk"));
        let namespace_minimum = namespace_minimum.and_then(capability);
        let pod_annotation = case.pod
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(MIN_CC))
            .and_then(Value::as_str);
        let ignored = pod_annotation.is_some_and(|raw| match capability(raw) {
            None => true,
            Some(value) => namespace_minimum.is_some_and(|n| value < n),
        });
        let gpu = pod_gpu(&case.pod);
        let (_, privileged_gpu) = privileged_findings(&case.pod, &case.namespace);
        notices += usize::from(privileged_gpu);
        if gpu == Some(true) {
            notices += usize::from(ignored);
            prop_assert_eq!(evaluation.notices.len(), notices, "notices: {:?}", evaluation.notices);
        } else if gpu == Some(false) {
            prop_assert!(
                evaluation.notices.len() == notices
                    || evaluation.notices.len() == notices + usize::from(ignored),
                "notices: {:?}", evaluation.notices
            );
        }
        for notice in &evaluation.notices {
            prop_assert!(notice.message.starts_with("gpu-policy:"), "{:?}", notice);
        }
    }

    /// R6 denies exactly the pods with a privileged container that is not a
    /// GPU container, and warns (one notice) exactly about pods with a
    /// privileged GPU container; allowlisted pods get neither.
    #[test]
    fn privileged_containers_are_denied_or_warned_as_the_rule_says(case in case()) {
        let evaluation = evaluate_pod(&case.pod, &case)?;
        let (denied, warned) = privileged_findings(&case.pod, &case.namespace);
        let privileged_violations = evaluation
            .violations
            .iter()
            .filter(|v| v.rule.to_string() == "device-paths" && v.message.contains("must not be privileged"))
            .count();
        prop_assert_eq!(privileged_violations > 0, denied, "{:?}", evaluation.violations);
        let privileged_notices = evaluation
            .notices
            .iter()
            .filter(|n| n.kind == NoticeKind::PrivilegedGpuContainer)
            .count();
        prop_assert_eq!(privileged_notices, usize::from(warned), "{:?}", evaluation.notices);
    }
}
