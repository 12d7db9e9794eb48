//! `audit`'s policy reports (`gpu_policy::reports`): built from every
//! fixture and validated against the upstream CRDs (`tests/crds/`), and
//! written by `audit --write-reports` into the fake API server (created,
//! rewritten whole, deleted when their namespace has nothing left; the
//! report API chosen or found).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gpu_policy::admission::Mode;
use gpu_policy::admission::checker::{Checker, ObjectReport};
use gpu_policy::reports::{self, Outcome, Report, ReportApi, Timestamp};
use gpu_policy::settings::Settings;
use serde_json::{Value, json};

use crate::support::fake_api::{FakeApi, reports as served_reports};
use crate::support::fixtures;
use crate::support::process::{Run, gpu_policy_beside};
use crate::support::report_crds::{self, row, rows};

const AT: Timestamp = Timestamp { seconds: 1_767_225_600, nanos: 0 };

/// Every fixture's objects, each evaluated in its namespace as `audit`
/// evaluates a namespace (one checker for the namespace, the claims of its
/// objects resolving among them), in `mode`; and one Pod that cannot be
/// read, for the `error` result.
fn audit_fixtures(mode: Mode) -> Vec<ObjectReport> {
    let settings = Settings::default();
    let mut objects = fixtures::audited_objects();
    objects.push((
        "unreadable".into(),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "bad", "namespace": "fixture-unreadable", "uid": "u-bad"},
            "spec": {"containers": "not a list"}}),
    ));
    let mut by_namespace: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for (_, object) in &objects {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("default");
        by_namespace.entry(namespace.to_owned()).or_default().push(object);
    }
    by_namespace
        .iter()
        .flat_map(|(namespace, objects)| {
            Checker::new(&settings, mode, namespace).with_input(objects).check_all(objects)
        })
        .collect()
}

fn outcomes(report: &Report) -> BTreeSet<Outcome> {
    report.results.iter().map(|r| r.result).collect()
}

/// Every report of every fixture, in both APIs, is what its CRD accepts
/// (strictly: no field the schema would prune), counts its results in its
/// summary, and reports each evaluated object; all five outcomes occur.
#[test]
fn every_fixture_makes_reports_their_crds_accept() {
    let objects = audit_fixtures(Mode::Enforce);
    let evaluated: BTreeSet<&str> =
        objects.iter().filter(|o| !o.ignored).filter_map(|o| o.facts.uid.as_deref()).collect();
    let mut documents = Vec::new();
    for api in ReportApi::ALL {
        let built = reports::build(&objects, api, AT);
        assert!(built.len() >= 10, "{api}: a report per namespace");
        let mut seen = BTreeSet::new();
        let mut outcomes_seen = BTreeSet::new();
        for report in &built {
            assert_eq!(
                report.summary.total(),
                report.results.len() as u64,
                "{api} {}: the summary adds up",
                report.display_name()
            );
            for outcome in Outcome::ALL {
                let counted = report.results.iter().filter(|r| r.result == outcome).count();
                assert_eq!(report.summary.count(outcome), counted as u64, "{outcome:?}");
            }
            for result in &report.results {
                let resource = &result.resources[0];
                assert_eq!(
                    resource.namespace.as_deref(),
                    report.metadata.namespace.as_deref(),
                    "a result is in its object's namespace's report"
                );
                seen.extend(resource.uid.clone());
            }
            // A pass is alone: an object with a finding has no pass.
            let mut by_object: BTreeMap<&str, Vec<Outcome>> = BTreeMap::new();
            for result in &report.results {
                let uid = result.resources[0].uid.as_deref().unwrap_or_default();
                by_object.entry(uid).or_default().push(result.result);
            }
            for (uid, found) in by_object {
                assert!(
                    !found.contains(&Outcome::Pass) || found == [Outcome::Pass],
                    "{uid}: {found:?}"
                );
            }
            outcomes_seen.extend(outcomes(report));
            documents.push(serde_json::to_value(report).expect("serialises"));
        }
        let seen: BTreeSet<&str> = seen.iter().map(String::as_str).collect();
        assert_eq!(seen, evaluated, "{api}: every evaluated object, and only those");
        assert_eq!(outcomes_seen, Outcome::ALL.into_iter().collect(), "{api}: every outcome");
    }
    match report_crds::validate(&documents) {
        Ok(summary) => assert!(summary.ends_with(", 0 problems"), "{summary}"),
        Err(problems) => panic!("the CRDs refuse the reports:\n{problems}"),
    }
}

/// The results read the findings as typed, not the warnings a mode gives:
/// the same reports whatever the namespace's mode.
#[test]
fn reports_do_not_depend_on_the_namespace_mode() {
    let enforce = reports::build(&audit_fixtures(Mode::Enforce), ReportApi::OpenReports, AT);
    for mode in [Mode::Warn, Mode::Audit] {
        let other = reports::build(&audit_fixtures(mode), ReportApi::OpenReports, AT);
        assert_eq!(other, enforce, "{mode}");
    }
}

/// The CRD validation is not vacuous: a field the schema does not have,
/// and a severity it does not allow, are refused.
#[test]
fn the_crd_validation_refuses_what_the_schema_does_not_allow() {
    let objects = audit_fixtures(Mode::Enforce);
    let mut report =
        serde_json::to_value(&reports::build(&objects, ReportApi::PolicyReport, AT)[0])
            .expect("serialises");
    report["results"][0]["severity"] = "dire".into();
    report["summary"]["unknown"] = 1.into();
    let problems = report_crds::validate(&[report]).expect_err("refused");
    assert!(problems.contains("results.0.severity"), "{problems}");
    assert!(problems.contains("summary: Additional properties"), "{problems}");
}

// ---------------------------------------------------------------------------
// audit --write-reports against the fake API server

/// Two opted-in namespaces and one that is not: in `ml` a pod denied by
/// bounded-requests and one with nothing to say, in `infra` a CPU pod of a
/// CUDA image (visible-devices would pin it), in `other` a pod with nothing
/// to say.
fn seed(api: &FakeApi) {
    for (name, mode) in [("ml", Some("enforce")), ("infra", Some("warn")), ("other", None)] {
        let labels = mode.map_or(json!({}), |mode| json!({"gpu-policy.io/mode": mode}));
        api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}}));
    }
    api.insert(half_card(Some("500m")));
    // As the webhook admitted it: pinned to no card.
    let pinned = json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]);
    api.insert(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "ml"},
        "spec": {"containers": [{"name": "web", "image": "nginx", "env": pinned}]}}),
    );
    api.insert(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "cuda-notebook", "namespace": "infra"},
        "spec": {"containers": [{"name": "nb", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04"}]}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "idle", "namespace": "other"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "env": pinned}]}}));
}

/// The pod `ml/half-card`, asking for `gpus` cards (None: none at all).
fn half_card(gpus: Option<&str>) -> Value {
    let resources = gpus.map_or(json!({}), |n| json!({"limits": {"nvidia.com/gpu": n}}));
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "half-card", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}})
}

/// A report of `report_api` in `namespace`, as a test would leave one.
fn report_object(report_api: ReportApi, namespace: &str, name: &str, managed: bool) -> Value {
    let labels =
        if managed { json!({"app.kubernetes.io/managed-by": "gpu-policy"}) } else { json!({}) };
    json!({"apiVersion": report_api.api_version(), "kind": report_api.kind(reports::ReportScope::Namespaced),
        "metadata": {"name": name, "namespace": namespace, "labels": labels}, "results": []})
}

async fn audit(kubeconfig: &Path, args: &[&str]) -> Run {
    let mut all = vec!["audit".to_owned(), "--kubeconfig".to_owned()];
    all.push(kubeconfig.display().to_string());
    all.extend(args.iter().map(|a| (*a).to_owned()));
    gpu_policy_beside(all).await
}

/// The stored report of `namespace` (the one named gpu-policy).
fn stored(api: &FakeApi, report_api: ReportApi, namespace: &str) -> Option<Value> {
    served_reports::stored(api, report_api)
        .into_iter()
        .find(|r| r["metadata"]["namespace"] == namespace && r["metadata"]["name"] == "gpu-policy")
}

/// Written, rewritten whole when a violation is fixed, deleted when the
/// namespace has nothing left; reports gpu-policy did not write are left
/// alone. With OpenReports alone served, auto picks it.
#[tokio::test(flavor = "multi_thread")]
async fn write_reports_creates_rewrites_and_deletes_them() {
    let api = FakeApi::start().await;
    served_reports::serve(&api, ReportApi::OpenReports);
    seed(&api);
    api.insert(report_object(ReportApi::OpenReports, "ml", "someone-elses", false));
    api.insert(report_object(ReportApi::OpenReports, "gone", "gpu-policy", true));
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());

    let run = audit(&kubeconfig, &["--write-reports"]).await;
    assert_eq!(run.code, 0, "the findings are in the reports: {run:?}");
    assert_eq!(
        run.lines(),
        [
            "wrote Report infra/gpu-policy: 0 fail, 1 warn, 0 error, 0 skip, 0 pass",
            "wrote Report ml/gpu-policy: 1 fail, 1 warn, 0 error, 0 skip, 1 pass",
            "deleted Report gone/gpu-policy: no audited object left",
        ],
        "{run:?}"
    );
    assert_eq!(
        api.count_requests(
            "PATCH",
            &[
                "/apis/openreports.io/v1alpha1/namespaces/ml/reports/gpu-policy?",
                "fieldManager=gpu-policy-audit",
                "force=true"
            ]
        ),
        1
    );
    let ml = stored(&api, ReportApi::OpenReports, "ml").expect("the ml report");
    assert_eq!(
        rows(&ml),
        [
            row("fail", "bounded-requests", "half-card"),
            // A GPU pod gets the runtime class, denied or not.
            row("warn", "runtime-class", "half-card"),
            row("pass", "", "web")
        ]
    );
    assert_eq!(ml["summary"], json!({"pass": 1, "fail": 1, "warn": 1, "error": 0, "skip": 0}));
    assert_eq!(ml["source"], "gpu-policy");
    let pod_uid =
        api.get("v1", "Pod", Some("ml"), "half-card").expect("pod")["metadata"]["uid"].clone();
    assert_eq!(ml["results"][0]["resources"][0]["uid"], pod_uid);
    let infra = stored(&api, ReportApi::OpenReports, "infra").expect("the infra report");
    assert_eq!(rows(&infra), [row("warn", "visible-devices", "cuda-notebook")]);
    assert_eq!(stored(&api, ReportApi::OpenReports, "other"), None, "not opted in");

    // Fixed: one whole card. The report is rewritten: no fail left.
    api.insert(half_card(Some("1")));
    let run = audit(&kubeconfig, &["--write-reports"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let rewritten = stored(&api, ReportApi::OpenReports, "ml").expect("the ml report");
    assert_eq!(rewritten["metadata"]["uid"], ml["metadata"]["uid"], "updated in place");
    let rewritten_results = rows(&rewritten);
    assert!(
        rewritten_results.iter().all(|(result, _, _)| result != "fail"),
        "{rewritten_results:?}"
    );
    assert!(
        rewritten_results.contains(&row("warn", "runtime-class", "half-card")),
        "a GPU pod would get the runtime class: {rewritten_results:?}"
    );
    assert_eq!(rewritten["summary"]["fail"], 0);

    // infra's only pod is gone: so is its report.
    api.remove("v1", "Pod", Some("infra"), "cuda-notebook");
    let run = audit(&kubeconfig, &["--write-reports"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.lines().last().copied(),
        Some("deleted Report infra/gpu-policy: no audited object left"),
        "{run:?}"
    );
    let left: Vec<String> = served_reports::stored(&api, ReportApi::OpenReports)
        .iter()
        .map(|r| {
            format!(
                "{}/{}",
                r["metadata"]["namespace"].as_str().unwrap_or(""),
                r["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(left, ["ml/gpu-policy", "ml/someone-elses"]);
}

/// `--report-api`: auto takes OpenReports when both are served, else
/// PolicyReport; a choice the cluster does not serve, or no API at all, is
/// an error on one line, before anything is written.
#[tokio::test(flavor = "multi_thread")]
async fn the_report_api_is_chosen_or_found() {
    let api = FakeApi::start().await;
    seed(&api);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());

    let run = audit(&kubeconfig, &["--write-reports"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        run.stderr.trim_end(),
        "gpu-policy: the cluster serves neither openreports.io/v1alpha1 Reports nor \
         wgpolicyk8s.io/v1alpha2 PolicyReports: install the CRDs of one"
    );
    assert_eq!(api.count_requests("PATCH", &[]), 0);

    served_reports::serve(&api, ReportApi::PolicyReport);
    let run = audit(&kubeconfig, &["--write-reports", "--report-api", "auto"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("wrote PolicyReport ml/gpu-policy: 1 fail"), "{run:?}");
    let ml = stored(&api, ReportApi::PolicyReport, "ml").expect("a PolicyReport");
    assert_eq!(ml["apiVersion"], "wgpolicyk8s.io/v1alpha2");
    assert_eq!(ml.get("source"), None, "PolicyReport has no report-level source");

    let run = audit(&kubeconfig, &["--write-reports", "--report-api", "openreports"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        run.stderr.trim_end(),
        "gpu-policy: the cluster does not serve openreports.io/v1alpha1 Reports: install its CRDs"
    );

    served_reports::serve(&api, ReportApi::OpenReports);
    let run = audit(&kubeconfig, &["--write-reports"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("wrote Report ml/gpu-policy"), "{run:?}");
    assert!(stored(&api, ReportApi::OpenReports, "ml").is_some());

    // A choice is held to, and the other API's reports are left alone.
    api.remove("v1", "Pod", Some("ml"), "half-card");
    let run = audit(&kubeconfig, &["--write-reports", "--report-api", "wgpolicyk8s"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("wrote PolicyReport ml/gpu-policy: 0 fail"), "{run:?}");
    let open = stored(&api, ReportApi::OpenReports, "ml").expect("still there");
    assert_eq!(open["summary"]["fail"], 1);
}

/// With `-n`, only that namespace's report is written, and only its
/// stale one deleted.
#[tokio::test(flavor = "multi_thread")]
async fn one_namespace_is_written_and_cleaned_alone() {
    let api = FakeApi::start().await;
    served_reports::serve(&api, ReportApi::OpenReports);
    seed(&api);
    api.insert(report_object(ReportApi::OpenReports, "gone", "gpu-policy", true));
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());

    let run = audit(&kubeconfig, &["-n", "other", "--write-reports"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.lines(),
        ["wrote Report other/gpu-policy: 0 fail, 0 warn, 0 error, 0 skip, 1 pass"]
    );
    assert!(stored(&api, ReportApi::OpenReports, "gone").is_some());
    assert!(stored(&api, ReportApi::OpenReports, "ml").is_none());

    api.remove("v1", "Pod", Some("other"), "idle");
    let run = audit(&kubeconfig, &["-n", "other", "--write-reports"]).await;
    assert_eq!(run.lines(), ["deleted Report other/gpu-policy: no audited object left"]);
    assert!(stored(&api, ReportApi::OpenReports, "gone").is_some());
}

/// `-o policyreport` and `-o openreports` print the reports as YAML and
/// write nothing; with `--write-reports` and `-o`, stdout is the output
/// asked for and the lines of what was written go to stderr.
#[tokio::test(flavor = "multi_thread")]
async fn reports_print_as_yaml() {
    let api = FakeApi::start().await;
    served_reports::serve(&api, ReportApi::OpenReports);
    seed(&api);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());

    for (output, api_version, kind) in [
        ("policyreport", "wgpolicyk8s.io/v1alpha2", "PolicyReport"),
        ("openreports", "openreports.io/v1alpha1", "Report"),
    ] {
        let run = audit(&kubeconfig, &["-A", "-o", output]).await;
        assert_eq!(run.code, 1, "a violation, as with every output: {run:?}");
        let documents: Vec<Value> = serde_saphyr::from_multiple(&run.stdout).expect("YAML");
        let shown: Vec<(&str, &str, &str)> = documents
            .iter()
            .map(|d| {
                (
                    d["apiVersion"].as_str().unwrap_or(""),
                    d["kind"].as_str().unwrap_or(""),
                    d["metadata"]["namespace"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [(api_version, kind, "infra"), (api_version, kind, "ml"), (api_version, kind, "other")],
            "{output}"
        );
        assert!(
            report_crds::validate(&documents).is_ok(),
            "{output}: the CRD accepts what is printed"
        );
    }
    assert_eq!(api.count_requests("PATCH", &[]), 0, "-o writes nothing");

    let run = audit(&kubeconfig, &["--write-reports", "-o", "json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json().len(), 3, "{run:?}");
    assert!(run.stderr.contains("wrote Report ml/gpu-policy: 1 fail"), "{run:?}");

    let run = audit(&kubeconfig, &["--report-api", "openreports"]).await;
    assert_eq!(run.code, 2, "--report-api needs --write-reports: {run:?}");
}

/// The fake's server-side apply: it creates, then replaces all but the
/// metadata it merges, and wants a field manager.
#[tokio::test(flavor = "multi_thread")]
async fn the_fake_applies_as_one_field_manager() {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    let fake = FakeApi::start().await;
    served_reports::serve(&fake, ReportApi::OpenReports);
    let gvk = GroupVersionKind::gvk("openreports.io", "v1alpha1", "Report");
    let api: Api<DynamicObject> = Api::namespaced_with(
        fake.client(),
        "ml",
        &ApiResource::from_gvk_with_plural(&gvk, "reports"),
    );
    let params = PatchParams::apply("test").force();
    let first = json!({"apiVersion": "openreports.io/v1alpha1", "kind": "Report",
        "metadata": {"name": "r", "labels": {"a": "1"}}, "source": "x", "results": [{"policy": "p"}]});
    let created = api.patch("r", &params, &Patch::Apply(&first)).await.expect("created");
    let second = json!({"apiVersion": "openreports.io/v1alpha1", "kind": "Report",
        "metadata": {"name": "r", "labels": {"b": "2"}}, "results": []});
    let updated = api.patch("r", &params, &Patch::Apply(&second)).await.expect("updated");
    assert_eq!(updated.metadata.uid, created.metadata.uid);
    assert_eq!(updated.data.get("source"), None, "a field no longer applied is gone");
    assert_eq!(updated.data["results"], json!([]));
    let labels = updated.metadata.labels.unwrap_or_default();
    assert_eq!(labels.len(), 2, "labels merged: {labels:?}");

    let url = format!("{}/apis/openreports.io/v1alpha1/namespaces/ml/reports/r", fake.url());
    crate::support::fake_api::install_crypto_provider();
    let answer = reqwest::Client::new()
        .patch(url)
        .header("content-type", "application/apply-patch+yaml")
        .body(second.to_string())
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status().as_u16(), 422, "no fieldManager");
}
