//! The server's memory under the largest reviews the API server sends: its
//! peak resident set (`VmHWM` of `/proc/<pid>/status`) while it answers
//! AdmissionReviews of pods near the 3 MiB limit, over TLS as the API
//! server speaks. The base is its `VmRSS` once ready and warmed up by a
//! few small reviews of the same path. Each test runs its own server, so
//! each peak is that test's alone.
//!
//! The pods are CPU-only, so `/mutate` pins `NVIDIA_VISIBLE_DEVICES=void`
//! into every container: each answer is checked to be that patch, applied
//! to the pod, before any figure is judged.

use gpu_policy::server::MAX_BODY_BYTES;
use json_patch::Patch;
use serde_json::{Value, json};

use crate::support::large_pods::{Shape, pod_sized_to, warmed_up_base};
use crate::support::pods::{MUTATIONS, NVD};
use crate::support::server::{
    MUTATE, Options, Reply, Server, body_of, next_uid, patch_of, patched, review,
};

const MIB: f64 = (1 << 20) as f64;

/// The shape the issue names: 200 containers of 300 env entries each.
const SHAPE: Shape = Shape { containers: 200, env_per_container: 300 };

/// The one large review: just under the server's body limit.
const LARGE_BODY: usize = MAX_BODY_BYTES - (64 << 10);
/// How many times its body one review may hold above the base.
const BODY_FACTOR: u64 = 4;

/// The concurrent reviews: how many, each body's size, and the peak they
/// may reach together. The server decodes as many reviews at once as it
/// has worker threads, one per CPU it may run on, so on more CPUs the
/// same reviews peak higher.
const CONCURRENT: usize = 16;
const CONCURRENT_BODY: usize = 2_300_000;
const CONCURRENT_PEAK: u64 = 100 << 20;

/// The large pod whose review under `uid` is `size` bytes.
fn pod_of_review_size(size: usize, uid: &str) -> Value {
    pod_sized_to("large", SHAPE, size, |pod| body_of(&review(pod, uid, false)).len())
}

#[tokio::test(flavor = "multi_thread")]
async fn one_review_near_the_body_limit_peaks_within_four_bodies_of_the_base() {
    let server = Server::start(Options::default(), None).await;
    let base = warmed_up_base(&server).await;

    let uid = next_uid();
    let pod = pod_of_review_size(LARGE_BODY, &uid);
    let body = body_of(&review(&pod, &uid, false));
    let body_len = body.len();
    let mut connection = server.connect().await;
    let reply = connection
        .post(MUTATE, body)
        .await
        .unwrap_or_else(|err| panic!("{err}; log:\n{}", server.log()));
    let peak = server.memory("VmHWM");
    assert_pins_alone(&pod, &pinning_patch(&reply, &uid));

    let bound = base + BODY_FACTOR * body_len as u64;
    eprintln!(
        "one review of {:.2} MiB: base {:.1} MiB, peak {:.1} MiB, \
         {:.1} MiB above the base = {:.1} bodies (bound {:.1} MiB)",
        body_len as f64 / MIB,
        base as f64 / MIB,
        peak as f64 / MIB,
        peak.saturating_sub(base) as f64 / MIB,
        peak.saturating_sub(base) as f64 / body_len as f64,
        bound as f64 / MIB,
    );
    assert!(
        peak <= bound,
        "one review of {body_len} bytes: peak RSS {:.1} MiB is over base {:.1} MiB + \
         {BODY_FACTOR} x the body = {:.1} MiB ({:.1} bodies above the base)",
        peak as f64 / MIB,
        base as f64 / MIB,
        bound as f64 / MIB,
        peak.saturating_sub(base) as f64 / body_len as f64,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sixteen_concurrent_reviews_of_2_3_mb_peak_under_100_mib() {
    let server = Server::start(Options::default(), None).await;
    let base = warmed_up_base(&server).await;

    let sizing_uid = next_uid();
    let pod = pod_of_review_size(CONCURRENT_BODY, &sizing_uid);
    // Every body is built, and every connection open, before the first
    // byte is sent, so that the reviews reach the server together. The
    // reviews differ in their uid alone.
    let mut request = review(&pod, &sizing_uid, false);
    let requests: Vec<(String, Vec<u8>)> = (0..CONCURRENT)
        .map(|_| {
            let uid = next_uid();
            request["request"]["uid"] = json!(uid);
            let body = body_of(&request);
            assert_eq!(body.len(), CONCURRENT_BODY, "uids are of one length");
            (uid, body)
        })
        .collect();
    let replies = server.post_together(MUTATE, requests, &[]).await;
    let peak = server.memory("VmHWM");
    // One pod, one answer: the first patch is applied and checked, and
    // every other answer must carry the same.
    let patches: Vec<Patch> =
        replies.iter().map(|(uid, reply)| pinning_patch(reply, uid)).collect();
    assert_pins_alone(&pod, &patches[0]);
    for ((uid, _), patch) in replies.iter().zip(&patches) {
        assert!(*patch == patches[0], "{uid}: a patch unlike the first");
    }

    let above = peak.saturating_sub(base);
    eprintln!(
        "{CONCURRENT} concurrent reviews of {:.2} MB ({:.2} MiB) each: base {:.1} MiB, \
         peak {:.1} MiB (bound {:.1} MiB), {:.1} MiB above the base = {:.1} bodies \
         ({:.2} for each review)",
        CONCURRENT_BODY as f64 / 1e6,
        CONCURRENT_BODY as f64 / MIB,
        base as f64 / MIB,
        peak as f64 / MIB,
        CONCURRENT_PEAK as f64 / MIB,
        above as f64 / MIB,
        above as f64 / CONCURRENT_BODY as f64,
        above as f64 / (CONCURRENT * CONCURRENT_BODY) as f64,
    );
    assert!(
        peak <= CONCURRENT_PEAK,
        "{CONCURRENT} concurrent reviews of {CONCURRENT_BODY} bytes: peak RSS {:.1} MiB is over \
         {:.1} MiB (base {:.1} MiB, {:.1} bodies above it)",
        peak as f64 / MIB,
        CONCURRENT_PEAK as f64 / MIB,
        base as f64 / MIB,
        above as f64 / CONCURRENT_BODY as f64,
    );
}

/// The patch of `reply`, which answers review `uid` with HTTP 200 and
/// allows it.
fn pinning_patch(reply: &Reply, uid: &str) -> Patch {
    let response = reply.admission(uid);
    assert_eq!(response["allowed"], true, "{uid}: {response}");
    patch_of(&response).unwrap_or_else(|| panic!("{uid}: no patch: {response}"))
}

/// `patch` appends the pin to the env of every container of `pod`, writes
/// the mutations annotation, and changes nothing else.
fn assert_pins_alone(pod: &Value, patch: &Patch) {
    let mut after = patched(pod, patch);
    assert_eq!(after["metadata"]["annotations"][MUTATIONS], "visible-devices");
    let pin = json!({"name": NVD, "value": "void"});
    let containers = after["spec"]["containers"].as_array_mut().expect("containers");
    assert_eq!(containers.len(), SHAPE.containers);
    for container in containers.iter_mut() {
        let name = container["name"].clone();
        let env = container["env"].as_array_mut().expect("env");
        assert_eq!(env.len(), SHAPE.env_per_container + 1, "{name}");
        assert_eq!(env.pop().as_ref(), Some(&pin), "{name}");
    }
    // With the pins and the annotation taken out again, nothing else moved.
    after["metadata"].as_object_mut().expect("metadata").remove("annotations");
    assert!(after == *pod, "the patch changed more than the pins");
}
