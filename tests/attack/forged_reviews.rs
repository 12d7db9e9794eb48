//! Forged reviews: anyone who reaches the port may POST an AdmissionReview
//! of their own making. A Namespace review naming any namespace makes the
//! server look at that namespace's pods and claims; a ResourceClaim review
//! made for a pod makes it read the pod. The answers name nothing of the
//! namespace unless client certificates are required, say nothing of
//! whether a pod exists, and a flood of such reviews from one caller costs
//! the API server a bounded number of requests.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::fake_api::FakeApi;
use crate::support::fake_api::dra::claim_for_pod;
use crate::support::server::{
    Connection, MUTATE, Options, Server, body_of, next_uid, opt_in_review, review, write_atomically,
};
use crate::support::tls::{client_config_as, test_ca, test_client};

/// The namespace the forged reviews name.
const NAMESPACE: &str = "lab";
const NAMESPACE_REVIEW: &str = "/validate/namespace?timeout=10s";
/// The names the namespace's objects have: none may leak without client
/// certificates.
const VIOLATING_POD: &str = "half-card";
const EXPORTER_POD: &str = "dcgm-exporter-x7";
const VIOLATING_CLAIM: &str = "every-gpu";
/// The look of one Namespace review lists the pods, the claims and the
/// claim templates of the namespace, a page each here.
const LISTS_PER_LOOK: usize = 3;
/// A caller's allowance of looks (the server's `NAMESPACE_LOOKS`): 3 at
/// once, then one per 10 s.
const LOOK_BURST: usize = 3;
const LOOK_INTERVAL: Duration = Duration::from_secs(10);
/// A caller's allowance of pod reads (`POD_READS`): 50, then 25 a second.
const POD_READ_BURST: usize = 50;
const POD_READS_PER_SECOND: f64 = 25.0;
/// The liveness bound of the attack suite: a legitimate answer in 1 s.
const ANSWER_BOUND: Duration = Duration::from_secs(1);

/// `lab`, not opted in, with a pod that violates the policy, a GPU
/// exporter that would lose its cards, and a claim that would be denied.
fn populate(api: &FakeApi) {
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": VIOLATING_POD, "namespace": NAMESPACE},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": EXPORTER_POD, "namespace": NAMESPACE},
        "spec": {"containers": [{"name": "c",
            "image": "nvcr.io/nvidia/k8s/dcgm-exporter:2.2.9"}]}}));
    api.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": VIOLATING_CLAIM, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "g",
            "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]}}}));
}

/// The server reading `api`, started as the attack suite starts them.
async fn serve(
    api: &FakeApi,
    client_auth: Option<(std::path::PathBuf, Vec<String>)>,
) -> (Server, tempfile::TempDir) {
    let options = Options { release: true, client_auth, ..Default::default() };
    Server::start_in_cluster_with(api, options).await
}

/// Each of `expected` is a line of `warnings`.
fn assert_lines(warnings: &str, expected: [String; 3]) {
    for line in expected {
        assert!(warnings.lines().any(|warning| warning == line), "{line} missing: {warnings}");
    }
}

/// A forged review opting `lab` in: its `warnings`, joined, and how long
/// the answer took.
async fn forge_opt_in(connection: &mut Connection) -> (String, Duration) {
    let uid = next_uid();
    let sent = Instant::now();
    let reply = connection
        .post(NAMESPACE_REVIEW, body_of(&opt_in_review(NAMESPACE, "enforce", &uid)))
        .await
        .unwrap_or_else(|err| panic!("the webhook answers: {err}"));
    let took = sent.elapsed();
    let response = reply.admission(&uid);
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = response["warnings"]
        .as_array()
        .map(|warnings| warnings.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default();
    (warnings, took)
}

/// The list requests of `lab`'s pods the API server received.
fn pod_lists(api: &FakeApi) -> usize {
    api.count_requests("GET", &[&format!("/api/v1/namespaces/{NAMESPACE}/pods")])
}

fn assert_no_names(warnings: &str) {
    for name in [VIOLATING_POD, EXPORTER_POD, VIOLATING_CLAIM] {
        assert!(!warnings.contains(name), "{name} leaked: {warnings}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_opt_in_gets_counts_not_names() {
    let _alone = crate::alone();
    let api = FakeApi::start().await;
    populate(&api);
    let (server, _scratch) = serve(&api, None).await;
    let mut connection = server.connect().await;

    let (warnings, _) = forge_opt_in(&mut connection).await;
    assert_no_names(&warnings);
    let audit = format!("`gpu-policy audit -n {NAMESPACE}`");
    assert_lines(
        &warnings,
        [
            format!(
                "gpu-policy: 1 existing pod(s) in {NAMESPACE} violate enforce mode; {audit} names them"
            ),
            format!(
                "gpu-policy: 1 pod(s) in {NAMESPACE} would lose their GPUs (void pin); allowlist them first; see {audit}"
            ),
            format!(
                "gpu-policy: 1 existing claim(s) in {NAMESPACE} violate enforce mode; {audit} names them"
            ),
        ],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_client_certificates_required_an_opt_in_names_the_objects() {
    let _alone = crate::alone();
    let dir = tempfile::tempdir().expect("tempdir");
    let (issuer, ca_pem) = test_ca();
    let ca_path = dir.path().join("client-ca.crt");
    write_atomically(&ca_path, ca_pem.as_bytes());
    let api = FakeApi::start().await;
    populate(&api);
    let (server, _scratch) = serve(&api, Some((ca_path, vec!["kube-apiserver".to_owned()]))).await;
    let (cert, key) = test_client(&issuer, "kube-apiserver", &[]);
    let config: Arc<ClientConfig> = client_config_as(&server.ca_pem, Some((&cert, &key)));
    let mut connection =
        Connection::tls(server.admission, config).await.unwrap_or_else(|err| panic!("{err}"));

    let (warnings, _) = forge_opt_in(&mut connection).await;
    assert_lines(
        &warnings,
        [
            format!(
                "gpu-policy: 1 existing pod(s) in {NAMESPACE} violate enforce mode: {VIOLATING_POD}"
            ),
            format!(
                "gpu-policy: new pods like {EXPORTER_POD} would lose their GPUs (void pin); allowlist them first"
            ),
            format!(
                "gpu-policy: 1 existing claim(s) in {NAMESPACE} violate enforce mode: ResourceClaim/{VIOLATING_CLAIM}"
            ),
        ],
    );
}

/// A flood of forged opt-ins from one caller: the API server is asked for
/// the burst of looks and one per interval, not one per review, and every
/// answer comes within the liveness bound.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_forged_opt_ins_costs_the_api_server_a_bounded_number_of_lists() {
    let _alone = crate::alone();
    const FLOOD: usize = 60;
    let api = FakeApi::start().await;
    populate(&api);
    let (server, _scratch) = serve(&api, None).await;
    let mut connection = server.connect().await;
    api.clear_requests();

    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut skipped = 0;
    let mut naming = 0;
    for _ in 0..FLOOD {
        let (warnings, took) = forge_opt_in(&mut connection).await;
        slowest = slowest.max(took);
        if [VIOLATING_POD, EXPORTER_POD, VIOLATING_CLAIM].iter().any(|name| warnings.contains(name))
        {
            naming += 1;
        }
        if warnings.contains("were not checked (too many namespace reviews)") {
            skipped += 1;
        }
    }
    let elapsed = started.elapsed();
    let looks = pod_lists(&api);
    let allowed =
        LOOK_BURST + (elapsed.as_secs_f64() / LOOK_INTERVAL.as_secs_f64()).ceil() as usize;
    eprintln!(
        "{FLOOD} forged opt-ins in {elapsed:?}: {looks} pod lists, {} requests in all, \
         {naming} answers naming objects, slowest answer {slowest:?}",
        api.requests().len()
    );
    assert_eq!(naming, 0, "answers named the namespace's objects");
    assert!(looks <= allowed, "{looks} looks, at most {allowed} allowed");
    assert!(looks >= 1, "the first review is looked at");
    assert_eq!(skipped, FLOOD - looks, "every review past the allowance says so");
    let lists = api.count_requests("GET", &[&format!("/namespaces/{NAMESPACE}/")]);
    assert!(lists <= allowed * LISTS_PER_LOOK, "{lists} lists: {:?}", api.requests());
    assert!(slowest < ANSWER_BOUND, "the slowest answer took {slowest:?}");
}

/// Callers do not share an allowance: once one has spent its looks, a
/// review from another address (the API server's, in a cluster) is still
/// looked at.
#[tokio::test(flavor = "multi_thread")]
async fn a_caller_that_spent_its_looks_leaves_others_theirs() {
    let _alone = crate::alone();
    let api = FakeApi::start().await;
    populate(&api);
    let (server, _scratch) = serve(&api, None).await;
    let mut attacker = server.connect_from(Ipv4Addr::new(127, 0, 0, 1).into()).await;
    for _ in 0..LOOK_BURST {
        let (warnings, _) = forge_opt_in(&mut attacker).await;
        assert!(warnings.contains("existing pod(s)"), "{warnings}");
    }
    let (refused, _) = forge_opt_in(&mut attacker).await;
    assert!(refused.contains("were not checked (too many namespace reviews)"), "{refused}");

    let mut other = server.connect_from(Ipv4Addr::new(127, 0, 0, 2).into()).await;
    let (warnings, _) = forge_opt_in(&mut other).await;
    assert!(
        warnings.contains(&format!("1 existing pod(s) in {NAMESPACE} violate enforce mode")),
        "{warnings}"
    );
}

/// A namespace holding more pods than a look reads: the look pages
/// through at most 20 pages of 10, and says that it stopped.
#[tokio::test(flavor = "multi_thread")]
async fn a_look_at_a_crowded_namespace_reads_a_bounded_number_of_pages() {
    let _alone = crate::alone();
    let api = FakeApi::start().await;
    populate(&api);
    for n in 0..600 {
        api.insert(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("web-{n:04}"), "namespace": NAMESPACE},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}));
    }
    let (server, _scratch) = serve(&api, None).await;
    let mut connection = server.connect().await;
    api.clear_requests();

    let (warnings, _) = forge_opt_in(&mut connection).await;
    let requests = api.requests();
    let pages: Vec<&String> = requests
        .iter()
        .filter(|(method, path)| {
            method == "GET" && path.starts_with(&format!("/api/v1/namespaces/{NAMESPACE}/pods"))
        })
        .map(|(_, path)| path)
        .collect();
    eprintln!("{} requests for the pods of a namespace of 602", pages.len());
    assert_eq!(pages.len(), 20, "{pages:?}");
    assert!(pages.iter().all(|path| path.contains("limit=10")), "{pages:?}");
    assert!(
        warnings.contains(&format!(
            "only the first 200 objects of each kind in {NAMESPACE} were checked"
        )),
        "{warnings}"
    );
    assert_no_names(&warnings);
}

/// The pod a forged claim names, and the claim, made for the pod of UID
/// `made_for`.
const POD: &str = "victim";
const CLAIM: &str = "victim-gpu-x7k2p";
const CLAIM_POD_UID: &str = "6d1f6a34-0c4e-4f51-9a2b-5e8c3f0d7a11";
const OTHER_UID: &str = "0b9e2c71-58d4-4c3a-8f6e-2a7d9c1b4e22";

/// A forged review of a claim made for `POD` on `/mutate`: the response,
/// without its uid.
async fn forge_claim(connection: &mut Connection) -> Value {
    let claim = claim_for_pod(NAMESPACE, CLAIM, POD, CLAIM_POD_UID, "gpu");
    let uid = next_uid();
    let reply = connection
        .post(MUTATE, body_of(&review(&claim, &uid, false)))
        .await
        .unwrap_or_else(|err| panic!("the webhook answers: {err}"));
    let mut response = reply.admission(&uid);
    response.as_object_mut().expect("an object").remove("uid");
    response
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_claim_cannot_tell_a_missing_pod_from_another_one() {
    let _alone = crate::alone();
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"gpu-policy.io/mode": "enforce"}}}));
    let (server, _scratch) = serve(&api, None).await;
    let mut connection = server.connect().await;

    let missing = forge_claim(&mut connection).await;
    api.insert(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE, "uid": OTHER_UID},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}));
    let another = forge_claim(&mut connection).await;
    assert_eq!(api.pod_gets(NAMESPACE, POD), 2, "both were read");
    assert_eq!(missing["allowed"], true, "{missing}");
    assert!(missing.get("warnings").is_some(), "{missing}");
    assert_eq!(
        serde_json::to_vec(&missing).expect("json"),
        serde_json::to_vec(&another).expect("json"),
        "missing: {missing}\nanother: {another}"
    );
    // The server's own log still tells them apart.
    server
        .wait_for_log(
            "the pod of that name is not the one the ResourceClaim was made for",
            Duration::from_secs(10),
        )
        .await;
}

/// A forged claim whose pod's name is a path: kube puts a name into the
/// request's path as it is, so the read would ask the API server for
/// another resource (and say something of it). No pod can have that name:
/// no request leaves the webhook, and the claim gets a not-found's answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_pod_name_that_is_a_path_is_never_sent() {
    let _alone = crate::alone();
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"gpu-policy.io/mode": "enforce"}}}));
    let (server, _scratch) = serve(&api, None).await;
    let mut connection = server.connect().await;
    api.clear_requests();

    // .../namespaces/lab/pods/x/../../secrets/token: a Secret of lab.
    let name = "x/../../secrets/token";
    let claim = claim_for_pod(NAMESPACE, CLAIM, name, CLAIM_POD_UID, "gpu");
    let response = connection.admit(MUTATE, &claim).await;
    let sent: Vec<(String, String)> =
        api.requests().into_iter().filter(|(_, path)| !path.contains("watch=")).collect();
    eprintln!("requests for a pod named {name:?}: {sent:?}");
    assert!(sent.is_empty(), "{sent:?}");
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = response["warnings"].to_string();
    assert!(warnings.contains("was not found with the UID"), "{warnings}");
}

/// A flood of forged claims from one caller: the API server gets the burst
/// of pod reads and the rate, not one read per review.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_forged_claims_costs_the_api_server_a_bounded_number_of_reads() {
    let _alone = crate::alone();
    const FLOOD: usize = 400;
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"gpu-policy.io/mode": "enforce"}}}));
    let (server, _scratch) = serve(&api, None).await;
    let mut connection = server.connect().await;

    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut refused = 0;
    for _ in 0..FLOOD {
        let sent = Instant::now();
        let response = forge_claim(&mut connection).await;
        slowest = slowest.max(sent.elapsed());
        assert_eq!(response["allowed"], true, "{response}");
        if response["warnings"].to_string().contains("too many claims from this caller at once") {
            refused += 1;
        }
    }
    let elapsed = started.elapsed();
    let reads = api.pod_gets(NAMESPACE, POD);
    let allowed = POD_READ_BURST + (elapsed.as_secs_f64() * POD_READS_PER_SECOND).ceil() as usize;
    eprintln!(
        "{FLOOD} forged claims in {elapsed:?}: {reads} pod reads, slowest answer {slowest:?}"
    );
    assert!(reads <= allowed, "{reads} reads, at most {allowed} allowed");
    assert!(reads < FLOOD, "{reads} reads for {FLOOD} reviews");
    assert_eq!(refused, FLOOD - reads, "every review past the allowance says so");
    assert!(slowest < ANSWER_BOUND, "the slowest answer took {slowest:?}");
}
