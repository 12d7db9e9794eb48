use serde_json::{Value, json};

use crate::policy::dra::claims::{ClaimKind, read_spec};
use crate::policy::dra::owner::{Fetched, GeneratedClaim, MAX_POD_CLAIMS, OwnerPod, ReadClaim};
use crate::policy::testing::{evaluate_claim_for, leaked, messages_of, owner_read};
use crate::policy::{Evaluation, NoticeKind, RuleId};
use crate::settings::Settings;

const NAMESPACE: &str = "ml";

/// The pod `trainer` (UID `uid-1`) as stored: one container holding each
/// of its pod claims, `(name, source)` with source
/// `{"resourceClaimTemplateName": ...}` or `{"resourceClaimName": ...}`.
fn pod(claims: &[(&str, Value)]) -> Value {
    let entries: Vec<Value> = claims
        .iter()
        .map(|(name, source)| {
            let mut entry = source.clone();
            entry["name"] = json!(name);
            entry
        })
        .collect();
    let uses: Vec<Value> = claims.iter().map(|(name, _)| json!({"name": name})).collect();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": NAMESPACE, "uid": "uid-1"},
        "spec": {"resourceClaims": entries,
            "containers": [{"name": "ctr", "image": "busybox", "resources": {"claims": uses}}]}})
}

fn template_entry(template: &str) -> Value {
    json!({"resourceClaimTemplateName": template})
}

fn claim_entry(claim: &str) -> Value {
    json!({"resourceClaimName": claim})
}

/// One request of `count` GPUs, as a claim's `spec`.
fn gpus(count: u64) -> Value {
    json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}})
}

fn template(name: &str, count: u64) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"spec": gpus(count)}})
}

fn shared_claim(name: &str, count: u64) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": gpus(count)})
}

/// The claim the resource claim controller makes for trainer's pod claim
/// `pod_claim`, of `count` GPUs.
fn made_for_trainer(pod_claim: &str, count: u64) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": format!("trainer-{pod_claim}-x1"), "namespace": NAMESPACE,
            "annotations": {"resource.kubernetes.io/pod-claim-name": pod_claim},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "trainer",
                "uid": "uid-1", "controller": true}]},
        "spec": gpus(count)})
}

fn evaluate(
    claim: &Value,
    owner: &OwnerPod<'_>,
    cached: &[Value],
    annotations: &[(&str, &str)],
) -> Evaluation {
    evaluate_claim_for(claim, Some(owner), cached, annotations, &Settings::default())
}

fn denials(evaluation: &Evaluation) -> Vec<String> {
    messages_of(evaluation, RuleId::BoundedRequests)
}

fn uncounted(evaluation: &Evaluation) -> Vec<&str> {
    evaluation.notice_bodies(NoticeKind::UncountedPodClaims)
}

#[test]
fn two_templates_of_eight_created_after_the_pod_give_it_no_sixteen() {
    let stored =
        pod(&[("first", template_entry("eight-a")), ("second", template_entry("eight-b"))]);
    let owner = owner_read(&stored, Vec::new(), Vec::new());
    let templates = [template("eight-a", 8), template("eight-b", 8)];

    // The first claim made, before the second template exists: counted
    // alone, and said so.
    let first = made_for_trainer("first", 8);
    let evaluation = evaluate(&first, &owner, &templates[..1], &[]);
    assert_eq!(denials(&evaluation), Vec::<String>::new());
    assert_eq!(
        uncounted(&evaluation),
        ["bounded-requests: claim \"second\" not counted: ResourceClaimTemplate \"eight-b\" not \
          found"]
    );

    // The second, once its template exists: counted with the first's.
    let second = made_for_trainer("second", 8);
    let evaluation = evaluate(&second, &owner, &templates, &[]);
    assert_eq!(
        denials(&evaluation),
        ["gpu-policy: pod \"trainer\" would get 16 GPUs from its claims \
          \"second\" 8 (this claim), \"first\" 8, above the maximum of 8 per pod here; lower \
          the claims' counts or split the pod"]
    );
    assert!(uncounted(&evaluation).is_empty());
}

#[test]
fn a_claim_made_already_counts_as_the_pods_status_names_it() {
    let stored = pod(&[("first", template_entry("gone")), ("second", template_entry("two"))]);
    let made = shared_claim("trainer-first-x1", 7);
    let generated = vec![GeneratedClaim {
        pod_claim: "first".to_owned(),
        claim: Some("trainer-first-x1".to_owned()),
    }];
    let owner = owner_read(&stored, generated, Vec::new());
    // The template is gone; the claim made from it is what the pod holds.
    let evaluation = evaluate(&made_for_trainer("second", 2), &owner, &[made], &[]);
    assert_eq!(denials(&evaluation).len(), 1, "{:?}", evaluation.violations);
    assert!(denials(&evaluation)[0].contains("would get 9 GPUs"));

    // A pod claim the controller made nothing for counts nothing.
    let generated = vec![GeneratedClaim { pod_claim: "first".to_owned(), claim: None }];
    let owner = owner_read(&stored, generated, Vec::new());
    let evaluation = evaluate(&made_for_trainer("second", 2), &owner, &[template("gone", 8)], &[]);
    assert_eq!(denials(&evaluation), Vec::<String>::new());
    assert!(uncounted(&evaluation).is_empty());
}

#[test]
fn what_was_read_beside_the_pod_is_counted_and_what_was_not_is_said() {
    let stored = pod(&[
        ("mine", template_entry("one")),
        ("new", template_entry("fresh")),
        ("slow", claim_entry("slow-claim")),
    ]);
    let fresh = read_spec(leaked(&gpus(4)), "spec").unwrap_or_default();
    let read = vec![
        ReadClaim {
            kind: ClaimKind::Template,
            name: "fresh".to_owned(),
            read: Fetched::Found(fresh),
        },
        ReadClaim {
            kind: ClaimKind::Claim,
            name: "slow-claim".to_owned(),
            read: Fetched::Unread("no answer within 2s".to_owned()),
        },
    ];
    let owner = owner_read(&stored, Vec::new(), read);
    let evaluation = evaluate(&made_for_trainer("mine", 1), &owner, &[], &[]);
    assert_eq!(denials(&evaluation), Vec::<String>::new());
    assert_eq!(
        uncounted(&evaluation),
        ["bounded-requests: claim \"slow\" not counted: ResourceClaim \"slow-claim\" not read: \
          no answer within 2s"]
    );
    // The uncounted one cannot make a pod over the maximum allowed.
    let evaluation = evaluate(&made_for_trainer("mine", 5), &owner, &[], &[]);
    assert_eq!(denials(&evaluation).len(), 1, "{:?}", evaluation.notices);
}

#[test]
fn a_claim_two_entries_name_counts_once_and_the_namespace_maximum_applies() {
    let stored = pod(&[
        ("mine", template_entry("mine")),
        ("a", claim_entry("shared")),
        ("b", claim_entry("shared")),
    ]);
    let owner = owner_read(&stored, Vec::new(), Vec::new());
    let cached = [shared_claim("shared", 4)];
    let evaluation = evaluate(&made_for_trainer("mine", 4), &owner, &cached, &[]);
    assert_eq!(denials(&evaluation), Vec::<String>::new());
    let evaluation = evaluate(
        &made_for_trainer("mine", 2),
        &owner,
        &cached,
        &[("gpu-policy.io/max-gpus-per-pod", "4")],
    );
    assert_eq!(
        denials(&evaluation),
        ["gpu-policy: pod \"trainer\" would get 6 GPUs from its claims \
          \"mine\" 2 (this claim), \"a\" 4, above the maximum of 4 per pod here; lower the \
          claims' counts or split the pod"]
    );
}

#[test]
fn a_claim_over_the_maximum_alone_is_denied_once() {
    let stored = pod(&[("mine", template_entry("nine")), ("other", template_entry("one"))]);
    let owner = owner_read(&stored, Vec::new(), Vec::new());
    let evaluation = evaluate(&made_for_trainer("mine", 9), &owner, &[template("one", 1)], &[]);
    assert_eq!(
        denials(&evaluation),
        [
            "gpu-policy: request \"gpu\" asks for 9 GPUs, above the maximum \
             of 8 per container; lower its count",
            "gpu-policy: the claim's GPU requests total 9, above the maximum \
             of 8 per pod here; split the claim or lower the counts"
        ]
    );
}

#[test]
fn an_unbounded_claim_of_the_pod_puts_it_over_any_maximum() {
    let stored = pod(&[("mine", template_entry("mine")), ("all", claim_entry("every"))]);
    let owner = owner_read(&stored, Vec::new(), Vec::new());
    let every = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "every", "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]}}});
    let evaluation = evaluate(&made_for_trainer("mine", 1), &owner, &[every], &[]);
    assert_eq!(denials(&evaluation).len(), 1, "{:?}", evaluation.violations);
}

#[test]
fn a_pod_past_the_cap_gets_its_gpu_claims_refused() {
    let entries: Vec<(String, Value)> =
        (0..=MAX_POD_CLAIMS).map(|i| (format!("c{i}"), template_entry("one"))).collect();
    let entries: Vec<(&str, Value)> =
        entries.iter().map(|(name, source)| (name.as_str(), source.clone())).collect();
    let owner = owner_read(&pod(&entries), Vec::new(), Vec::new());
    let evaluation = evaluate(&made_for_trainer("c0", 1), &owner, &[], &[]);
    assert_eq!(
        denials(&evaluation),
        [format!(
            "gpu-policy: pod \"trainer\" lists 33 claims, more than the \
             {MAX_POD_CLAIMS} gpu-policy counts against the maximum of GPUs per pod; use fewer \
             claims in the pod"
        )]
    );
}

#[test]
fn claims_without_gpus_or_not_from_a_pod_claim_are_not_counted_with_the_pod() {
    let stored = pod(&[("mine", template_entry("nic")), ("big", template_entry("eight"))]);
    let owner = owner_read(&stored, Vec::new(), Vec::new());
    let cached = [template("eight", 8)];
    let mut nic = made_for_trainer("mine", 1);
    nic["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = json!("rdma.example.com");
    let evaluation = evaluate(&nic, &owner, &cached, &[]);
    assert!(evaluation.violations.is_empty() && evaluation.notices.is_empty());

    // The scheduler's claim for an extended resource: checked on the pod.
    let mut scheduler = made_for_trainer("mine", 1);
    scheduler["metadata"]["annotations"] =
        json!({"resource.kubernetes.io/extended-resource-claim": "true"});
    let evaluation = evaluate(&scheduler, &owner, &cached, &[]);
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);

    // Owned by the pod, but made from none of its pod claims.
    let mut unnamed = made_for_trainer("mine", 1);
    unnamed["metadata"]["annotations"] = json!({});
    let evaluation = evaluate(&unnamed, &owner, &cached, &[]);
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
}

#[test]
fn a_pod_that_cannot_be_read_leaves_the_claim_counted_alone() {
    let claim = made_for_trainer("mine", 8);
    for (owner, why) in [
        (OwnerPod::NotFound, "its pod \"trainer\" was not found with the UID it was made for"),
        (
            OwnerPod::Unreadable("no answer within 2s".to_owned()),
            "cannot read its pod \"trainer\": no answer within 2s",
        ),
    ] {
        let evaluation = evaluate(&claim, &owner, &[], &[]);
        assert!(evaluation.violations.is_empty());
        assert_eq!(
            uncounted(&evaluation),
            [format!("bounded-requests: claim counted alone: {why}")]
        );
    }
}
