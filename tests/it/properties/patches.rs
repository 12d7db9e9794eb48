//! The patch as a whole: it applies, is idempotent, keeps what no rule may
//! touch, and its record lists the rules that made it.

use super::*;

proptest! {
    #![proptest_config(config(1000))]

    /// Evaluation never panics and reads every well-formed pod; the
    /// evaluation's patch, and in enforce mode the decision's, applies to the
    /// original object.
    #[test]
    fn every_patch_applies_to_the_pod(case in case()) {
        let evaluation = evaluate_pod(&case.pod, &case)?;
        apply(&case.pod, &evaluation.patch)?;
        prop_assert_eq!(evaluation.patch.is_empty(), evaluation.changes.is_empty());
        let decision = decide(Mode::Enforce, ObjectKind::Pod, &evaluation);
        // What the answer carries, read back from its bytes.
        let carried: Vec<PatchOperation> = match decision.carries_patch() {
            true => serde_json::from_slice(&decision.encoded_patch)
                .map_err(|err| TestCaseError::fail(err.to_string()))?,
            false => Vec::new(),
        };
        apply(&case.pod, &carried)?;
        prop_assert_eq!(decision.allowed, evaluation.violations.is_empty());
        prop_assert_eq!(decision.denial.is_some(), !decision.allowed);
        if decision.allowed {
            prop_assert_eq!(&carried, &evaluation.patch);
        } else {
            prop_assert!(carried.is_empty(), "a denied pod got a patch");
            let denial = decision.denial.unwrap_or_default();
            prop_assert!(denial.starts_with("gpu-policy:"), "denial {:?}", denial);
        }
        for violation in &evaluation.violations {
            prop_assert!(violation.message.starts_with("gpu-policy:"), "{:?}", violation);
        }
        check_warnings(&decision.warnings)?;
    }

    /// Idempotence (webhook re-invocation): the patched pod needs no
    /// further change, and mutating it neither adds nor removes violations.
    #[test]
    fn a_patched_pod_needs_no_further_change(case in case()) {
        let (evaluation, patched) = patched(&case)?;
        let again = evaluate_pod(&patched, &case)?;
        prop_assert!(
            again.patch.is_empty() && again.changes.is_empty(),
            "second evaluation changes the pod again: {:?}\npatched pod: {}",
            again.changes,
            patched
        );
        prop_assert_eq!(&again.violations, &evaluation.violations);
    }

    /// Everything the rules may not touch survives the patch: unknown
    /// keys at every level, labels and annotations with `/` and `~` in their
    /// keys, resources, volumes, container fields other than `env`, the
    /// other env entries in order, and the affinity outside the required
    /// node selector terms.
    #[test]
    fn fields_no_rule_may_touch_survive_the_patch(case in case()) {
        let (_, patched) = patched(&case)?;
        let original = &case.pod;

        let mut pointers = Vec::new();
        unknown_key_pointers(original, "", &mut pointers);
        for pointer in &pointers {
            prop_assert_eq!(
                original.pointer(pointer),
                patched.pointer(pointer),
                "unknown key at {} changed",
                pointer
            );
        }

        same_except(original, &patched, &["metadata", "spec"], "")?;
        match original.get("metadata") {
            Some(metadata @ Value::Object(_)) => {
                same_except(metadata, &patched["metadata"], &["annotations"], "/metadata")?;
                match metadata.get("annotations") {
                    Some(annotations @ Value::Object(_)) => same_except(
                        annotations,
                        &patched["metadata"]["annotations"],
                        &[MUTATIONS],
                        "/metadata/annotations",
                    )?,
                    before => {
                        let after = patched["metadata"].get("annotations");
                        prop_assert!(
                            after == before
                                || after.and_then(Value::as_object).is_some_and(|a| {
                                    a.keys().all(|k| k == MUTATIONS)
                                }),
                            "annotations {:?} became {:?}",
                            before,
                            after
                        );
                    }
                }
            }
            before => {
                let after = patched.get("metadata");
                prop_assert!(
                    after == before
                        || after.and_then(Value::as_object).is_some_and(|m| {
                            m.keys().all(|k| k == "annotations")
                                && m["annotations"]
                                    .as_object()
                                    .is_some_and(|a| a.keys().all(|k| k == MUTATIONS))
                        }),
                    "metadata {:?} became {:?}",
                    before,
                    after
                );
            }
        }

        let spec = &original["spec"];
        let after = &patched["spec"];
        let mut except = vec!["runtimeClassName", "affinity", "tolerations"];
        except.extend(LISTS);
        same_except(spec, after, &except, "/spec")?;
        // Tolerations are only added, after the pod's own.
        if let Some(own) = spec.get("tolerations").and_then(Value::as_array) {
            let kept = after["tolerations"].as_array().and_then(|list| list.get(..own.len()));
            prop_assert_eq!(kept, Some(own.as_slice()), "the pod's tolerations changed");
        }
        if spec["runtimeClassName"].as_str().is_some_and(|c| !c.is_empty()) {
            prop_assert_eq!(&spec["runtimeClassName"], &after["runtimeClassName"]);
        }
        for field in LISTS {
            prop_assert_eq!(spec.get(field).is_some(), after.get(field).is_some());
            let before: &[Value] = spec[field].as_array().map_or(&[], Vec::as_slice);
            let now: &[Value] = after[field].as_array().map_or(&[], Vec::as_slice);
            prop_assert_eq!(before.len(), now.len(), "/spec/{} changed length", field);
            for (index, (b, a)) in before.iter().zip(now).enumerate() {
                let at = format!("/spec/{field}/{index}");
                same_except(b, a, &["env"], &at)?;
                let others = |c: &Value| -> Vec<Value> {
                    env_of(c).into_iter().filter(|e| e["name"] != NVD).cloned().collect()
                };
                prop_assert_eq!(others(b), others(a), "{}/env: other entries changed", at);
                if !b["env"].is_array() {
                    prop_assert!(
                        a.get("env") == b.get("env")
                            || a["env"].as_array().is_some_and(|env| env.len() == 1
                                && env[0] == json!({"name": NVD, "value": "void"})),
                        "{}/env {:?} became {:?}",
                        at,
                        b.get("env"),
                        a.get("env")
                    );
                }
            }
        }
        if let Some(affinity @ Value::Object(_)) = spec.get("affinity") {
            same_except(affinity, &after["affinity"], &["nodeAffinity"], "/spec/affinity")?;
            if let Some(node @ Value::Object(_)) = affinity.get("nodeAffinity") {
                let at = "/spec/affinity/nodeAffinity";
                same_except(node, &after["affinity"]["nodeAffinity"], &[REQUIRED], at)?;
                if let Some(required @ Value::Object(_)) = node.get(REQUIRED) {
                    same_except(
                        required,
                        &after["affinity"]["nodeAffinity"][REQUIRED],
                        &["nodeSelectorTerms"],
                        "/spec/affinity/nodeAffinity/required…",
                    )?;
                }
            }
        }
    }

    /// `gpu-policy.io/mutations` lists exactly the rules that changed the
    /// pod (merged with what an earlier invocation recorded), each once.
    #[test]
    fn mutations_annotation_lists_the_rules_that_changed_the_pod(case in case()) {
        let (evaluation, patched) = patched(&case)?;
        let changed: BTreeSet<String> =
            evaluation.changes.iter().map(|c| c.rule.to_string()).collect();
        for rule in &changed {
            prop_assert!(MUTATING_RULES.contains(&rule.as_str()), "rule {} made a change", rule);
        }
        let before = mutation_tokens(&case.pod);
        let after = mutation_tokens(&patched);
        if changed.is_empty() {
            prop_assert!(evaluation.patch.is_empty());
            prop_assert_eq!(before, after);
        } else {
            let Some(tokens) = after else {
                return Err(TestCaseError::fail(format!(
                    "changes {changed:?} but no {MUTATIONS} annotation: {}",
                    patched["metadata"]
                )));
            };
            let unique: BTreeSet<String> = tokens.iter().cloned().collect();
            prop_assert_eq!(unique.len(), tokens.len(), "duplicate tokens in {:?}", tokens);
            let mut expected = changed.clone();
            expected.extend(before.unwrap_or_default());
            prop_assert_eq!(unique, expected);
        }
    }
}

proptest! {
    // About three generated pods in four are denied, and a denied pod is
    // never stored: room for the rejects of 300 stored ones.
    #![proptest_config(ProptestConfig { max_global_rejects: 4096, ..config(300) })]

    /// Idempotence on UPDATE: a stored pod updated to itself needs nothing,
    /// and an update that sends the author's spec back (a second `kubectl
    /// apply` at its most extreme: every field the webhook changed back as
    /// the author wrote it) is made the stored pod again.
    #[test]
    fn an_update_that_sends_the_authors_spec_back_is_made_the_stored_pod(case in case()) {
        let (evaluation, stored) = patched(&case)?;
        // A denied pod is never stored.
        prop_assume!(evaluation.violations.is_empty());
        let unchanged = evaluate_update(&stored, &stored, &case)?;
        prop_assert!(unchanged.patch.is_empty(), "{:?}", unchanged.changes);
        let mut reapplied = case.pod.clone();
        reapplied["metadata"] = stored["metadata"].clone();
        let update = evaluate_update(&reapplied, &stored, &case)?;
        prop_assert!(update.violations.is_empty(), "{:?}", update.violations);
        let after = apply(&reapplied, &update.patch)?;
        prop_assert_eq!(&after, &stored, "changes {:?}", update.changes);
    }
}
