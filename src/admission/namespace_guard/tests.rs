use super::*;
use crate::document::Document;
use crate::policy::testing::leaked;
use rstest::rstest;
use serde_json::Value;
use serde_json::json;

fn namespace(mode: Option<&str>) -> Value {
    match mode {
        Some(mode) => {
            json!({"metadata": {"name": "ml", "labels": {MODE_LABEL: mode, "team": "a"}}})
        }
        None => json!({"metadata": {"name": "ml", "labels": {"team": "a"}}}),
    }
}

fn run(old: Option<&str>, new: Option<&str>, groups: &[&str]) -> Result<(), String> {
    run_check(old, new, groups).map_err(|refusal| Message::new(refusal).into_string())
}

fn run_check(old: Option<&str>, new: Option<&str>, groups: &[&str]) -> Result<(), LabelRefusal> {
    let groups: Vec<Cow<'_, str>> = groups.iter().map(|g| Cow::Borrowed(*g)).collect();
    let requester = Requester { username: "alice", groups: &groups };
    let (old, new) = (namespace(old), namespace(new));
    let (old, new) = (Document::from_value(&old), Document::from_value(&new));
    check(Some(old.root()), Some(new.root()), requester, &["system:masters".to_owned()])
}

#[rstest]
// tightening and keeping: anyone
#[case(None, Some("audit"), true)]
#[case(None, Some("enforce"), true)]
#[case(Some("audit"), Some("warn"), true)]
#[case(Some("warn"), Some("enforce"), true)]
#[case(Some("enforce"), Some("enforce"), true)]
#[case(None, None, true)]
// loosening: denied
#[case(Some("enforce"), Some("warn"), false)]
#[case(Some("enforce"), Some("audit"), false)]
#[case(Some("warn"), Some("audit"), false)]
#[case(Some("enforce"), None, false)]
#[case(Some("audit"), None, false)]
// a value that is not a mode: denied
#[case(None, Some("enforcing"), false)]
#[case(Some("enforce"), Some("Enforce"), false)]
// an unknown old value counts as absent
#[case(Some("bogus"), Some("audit"), true)]
fn ordinary_users(#[case] old: Option<&str>, #[case] new: Option<&str>, #[case] allowed: bool) {
    assert_eq!(run(old, new, &["system:authenticated"]).is_ok(), allowed);
}

#[test]
fn admins_may_loosen() {
    assert!(run(Some("enforce"), None, &["system:masters"]).is_ok());
    let requester = Requester { username: "root-admin", groups: &[] };
    let (old, new) = (namespace(Some("enforce")), namespace(Some("audit")));
    assert!(
        check(Some(leaked(&old)), Some(leaked(&new)), requester, &["root-admin".to_owned()])
            .is_ok()
    );
}

#[test]
fn denial_names_the_change_and_who_may() {
    assert_eq!(
            run(Some("enforce"), Some("warn"), &[]),
            Err("gpu-policy: changing gpu-policy.io/mode from \"enforce\" to \"warn\" loosens GPU policy; only members of system:masters may".to_owned())
        );
}

#[test]
fn deleting_a_namespace_is_allowed() {
    let old = namespace(Some("enforce"));
    let requester = Requester { username: "alice", groups: &[] };
    assert!(check(Some(leaked(&old)), None, requester, &[]).is_ok());
}

#[rstest]
#[case(None, Some("audit"), Some(Mode::Audit))]
#[case(Some("audit"), Some("enforce"), Some(Mode::Enforce))]
#[case(Some("enforce"), Some("enforce"), None)]
#[case(Some("enforce"), Some("warn"), None)]
#[case(Some("warn"), None, None)]
#[case(None, Some("bogus"), None)]
fn tightening_is_detected(
    #[case] old: Option<&str>,
    #[case] new: Option<&str>,
    #[case] expected: Option<Mode>,
) {
    let (old, new) = (namespace(old), namespace(new));
    assert_eq!(tightened_to(Some(leaked(&old)), Some(leaked(&new))), expected);
}

/// Adds `pods` and `claims` (of their `kind`) in `ml` to `findings`.
fn add(
    findings: &mut OptInFindings,
    pods: &[Value],
    claims: &[Value],
    settings: &Settings,
    cluster: Option<&dyn ClusterFacts>,
) {
    for pod in pods {
        let document = Document::from_value(pod);
        findings.add_pod(document.root(), "ml", settings, cluster);
    }
    for claim in claims {
        let kind = claim["kind"].as_str().and_then(ClaimKind::of_kind);
        let kind = kind.expect("a claim kind");
        let document = Document::from_value(claim);
        findings.add_claim(kind, document.root(), "ml", settings, cluster);
    }
}

/// The warnings of a look that read `pods` and `claims` in one page
/// each, naming them (client certificates required).
fn opt_in_warnings(
    mode: Mode,
    namespace: &str,
    pods: &[Value],
    claims: &[Value],
    settings: &Settings,
    cluster: Option<&dyn ClusterFacts>,
) -> Vec<String> {
    let mut findings = OptInFindings::default();
    add(&mut findings, pods, claims, settings, cluster);
    findings.warnings(mode, namespace, Disclosure::Names)
}

#[test]
fn opting_in_lists_violating_pods_and_pods_that_would_lose_cards() {
    let pods = vec![
        json!({"metadata": {"name": "fine"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        json!({"metadata": {"name": "half-gpu"}, "spec": {"containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}}),
        json!({"metadata": {"name": "dcgm-exporter-x7"}, "spec": {"containers": [
                {"name": "c", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:2.2.9"}]}}),
        json!({"metadata": {"name": "my-exporter"}, "spec": {"containers": [
                {"name": "c", "image": "example/exporter", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}),
    ];
    let warnings = opt_in_warnings(Mode::Enforce, "ml", &pods, &[], &Settings::default(), None);
    assert_eq!(
        warnings,
        vec![
            "gpu-policy: 1 existing pod(s) in ml violate enforce mode: half-gpu",
            "gpu-policy: new pods like dcgm-exporter-x7, my-exporter would lose their GPUs (void pin); allowlist them first",
        ]
    );
    assert!(
        opt_in_warnings(Mode::Enforce, "ml", &pods[..1], &[], &Settings::default(), None)
            .is_empty()
    );
}

/// A pod claiming 6 GPUs through a template with 4 more from the
/// device plugin, and the template itself.
fn six_and_four() -> (Value, Value) {
    let pod = json!({"metadata": {"name": "ten-gpus"}, "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "six"}],
            "containers": [{"name": "c", "resources": {
                "claims": [{"name": "gpus"}], "limits": {"nvidia.com/gpu": "4"}}}]}});
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "six", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 6}}]}}}});
    (pod, template)
}

#[test]
fn opting_in_resolves_pods_claims_from_the_cluster() {
    use crate::policy::cluster::ClusterSnapshot;
    use crate::policy::dra::claims::ClaimKind;
    use crate::policy::dra::tables::KeptClaim;
    let (pod, template) = six_and_four();
    let settings = Settings::default();
    let unresolved =
        opt_in_warnings(Mode::Enforce, "ml", std::slice::from_ref(&pod), &[], &settings, None);
    assert!(unresolved.is_empty(), "{unresolved:?}");
    let mut cluster = ClusterSnapshot::default();
    cluster.dra.templates.insert(
        ("ml".to_owned(), "six".to_owned()),
        KeptClaim::of("six", &template, ClaimKind::Template),
    );
    let resolved = opt_in_warnings(Mode::Enforce, "ml", &[pod], &[], &settings, Some(&cluster));
    assert_eq!(
        resolved,
        vec!["gpu-policy: 1 existing pod(s) in ml violate enforce mode: ten-gpus"]
    );
}

#[test]
fn opting_in_names_the_claims_that_would_be_denied() {
    let (_, six) = six_and_four();
    let mut all = six.clone();
    all["metadata"]["name"] = json!("every-gpu");
    all["spec"]["spec"]["devices"]["requests"][0]["exactly"] =
        json!({"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"});
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "huge", "namespace": "ml"},
            "spec": {"devices": {"requests": [
                {"name": "g", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 9}}]}}});
    let warnings =
        opt_in_warnings(Mode::Warn, "ml", &[], &[six, all, claim], &Settings::default(), None);
    assert_eq!(
        warnings,
        vec![
            "gpu-policy: 2 existing claim(s) in ml violate warn mode: \
                 ResourceClaimTemplate/every-gpu, ResourceClaim/huge"
        ]
    );
}

/// The pods of `opting_in_lists_violating_pods...`, and a claim that
/// would be denied.
fn pods_and_claim_to_warn_about() -> (Vec<Value>, Value) {
    let pods = vec![
        json!({"metadata": {"name": "half-gpu"}, "spec": {"containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}}),
        json!({"metadata": {"name": "dcgm-exporter-x7"}, "spec": {"containers": [
                {"name": "c", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:2.2.9"}]}}),
    ];
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "huge", "namespace": "ml"},
            "spec": {"devices": {"requests": [
                {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 9}}]}}});
    (pods, claim)
}

#[test]
fn without_client_certificates_the_warnings_count_and_name_the_command() {
    let (pods, claim) = pods_and_claim_to_warn_about();
    let settings = Settings::default();
    let mut findings = OptInFindings::default();
    add(&mut findings, &pods, &[claim], &settings, None);
    assert_eq!(
        findings.warnings(Mode::Enforce, "ml", Disclosure::Counts),
        vec![
            "gpu-policy: 1 existing pod(s) in ml violate enforce mode; \
                 `gpu-policy audit -n ml` names them",
            "gpu-policy: 1 pod(s) in ml would lose their GPUs (void pin); allowlist them first; \
                 see `gpu-policy audit -n ml`",
            "gpu-policy: 1 existing claim(s) in ml violate enforce mode; \
                 `gpu-policy audit -n ml` names them",
        ]
    );
    let named = findings.warnings(Mode::Enforce, "ml", Disclosure::Names);
    assert_eq!(
        named,
        vec![
            "gpu-policy: 1 existing pod(s) in ml violate enforce mode: half-gpu",
            "gpu-policy: new pods like dcgm-exporter-x7 would lose their GPUs (void pin); \
                 allowlist them first",
            "gpu-policy: 1 existing claim(s) in ml violate enforce mode: ResourceClaim/huge",
        ]
    );
}

#[test]
fn counts_add_up_over_pages_and_names_stay_few() {
    let settings = Settings::default();
    let mut findings = OptInFindings::default();
    for page in 0..3 {
        let pods: Vec<Value> = (0..4)
            .map(|n| {
                json!({"metadata": {"name": format!("half-{page}-{n}")}, "spec": {"containers": [
                        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}})
            })
            .collect();
        add(&mut findings, &pods, &[], &settings, None);
    }
    assert_eq!(
        findings.warnings(Mode::Warn, "ml", Disclosure::Names),
        vec![
            "gpu-policy: 12 existing pod(s) in ml violate warn mode: half-0-0, half-0-1, \
                 half-0-2, half-0-3, half-1-0 and 7 more"
        ]
    );
    assert_eq!(findings.violating_pods.names.len(), NAMED);
    assert_eq!(
        findings.warnings(Mode::Warn, "ml", Disclosure::Counts),
        vec![
            "gpu-policy: 12 existing pod(s) in ml violate warn mode; \
                 `gpu-policy audit -n ml` names them"
        ]
    );
}

#[test]
fn a_look_that_did_not_read_everything_says_so() {
    let mut findings = OptInFindings::default();
    findings.read_only(200);
    assert_eq!(
        findings.warnings(Mode::Enforce, "ml", Disclosure::Counts),
        vec![
            "gpu-policy: only the first 200 objects of each kind in ml were checked; \
                 run `gpu-policy audit -n ml`"
        ]
    );
    assert_eq!(
        look_skipped("ml"),
        "gpu-policy: the pods and claims in ml were not checked (too many namespace \
             reviews); run `gpu-policy audit -n ml`"
    );
}
