//! Memory per review for every shape of JSON: the smallest values a body
//! can hold (numbers of one digit, empty objects, one-character strings,
//! tiny resource names, deep nesting), each filling a review near the
//! body limit, on the paths the rules read and off them. One such review
//! must peak within four bodies of the server's warmed-up base (the body
//! itself included), as `e2e/memory.rs` measures an ordinary large pod;
//! sixteen of the pods at once (~2.8 MB each, a long
//! `spec.securityContext.supplementalGroups`) must keep the peak under
//! [`PEAK_RSS`].
//!
//! Every answer must be an AdmissionReview of HTTP 200: an object too
//! dense to read within the budget is denied, never answered with a 5xx.

use std::net::{IpAddr, Ipv4Addr};

use gpu_policy::server::MAX_BODY_BYTES;

use serde_json::{Value, json};

use crate::PEAK_RSS;
use crate::support::large_pods::warmed_up_base;
use crate::support::server::{MUTATE, Reply, Server, body_of, next_uid, review};

const MIB: f64 = (1 << 20) as f64;

/// The one large review of each shape: just under the body limit.
const LARGE_BODY: usize = MAX_BODY_BYTES - (64 << 10);
/// How many bodies one review may hold above the base.
const BODY_FACTOR: u64 = 4;

/// The concurrent attack of the issue: how many, and each body's size.
const CONCURRENT: usize = 16;
const CONCURRENT_BODY: usize = 2_800_000;
/// The callers they come from: each may have 40 MiB of bodies in flight
/// (the server's per-caller share), and 16 such bodies are 45 MB, so two
/// callers get every review decoded rather than some answered 429.
const CALLERS: [IpAddr; 2] =
    [IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3))];

/// A hostile shape: where in a small pod it puts `count` repetitions of
/// its element.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// `spec.securityContext.supplementalGroups`: numbers of one digit,
    /// on no path a rule reads.
    SupplementalGroups,
    /// `spec.tolerations`: empty objects, on a path R3 reads whole.
    EmptyTolerations,
    /// `metadata.annotations`: one-character values under short keys,
    /// which every rule may read.
    TinyAnnotations,
    /// `resources.limits` of the one container: tiny resource names.
    TinyResourceNames,
    /// `spec.affinity`: lists nested 200 deep, over and over (the reader
    /// refuses more than 255 levels).
    DeepNesting,
}

impl Shape {
    const ALL: [Shape; 5] = [
        Shape::SupplementalGroups,
        Shape::EmptyTolerations,
        Shape::TinyAnnotations,
        Shape::TinyResourceNames,
        Shape::DeepNesting,
    ];

    fn pod(self, count: usize) -> Value {
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "dense", "namespace": "ml", "annotations": {}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                "resources": {"limits": {"cpu": "1"}}}]},
        });
        match self {
            Shape::SupplementalGroups => {
                let groups: Vec<u32> = (0..count).map(|i| (i % 10) as u32).collect();
                pod["spec"]["securityContext"] = json!({"supplementalGroups": groups});
            }
            Shape::EmptyTolerations => {
                pod["spec"]["tolerations"] = Value::Array(vec![json!({}); count]);
            }
            Shape::TinyAnnotations => {
                let annotations: serde_json::Map<String, Value> =
                    (0..count).map(|i| (short_key(i), json!("x"))).collect();
                pod["metadata"]["annotations"] = Value::Object(annotations);
            }
            Shape::TinyResourceNames => {
                let limits: serde_json::Map<String, Value> =
                    (0..count).map(|i| (short_key(i), json!("1"))).collect();
                pod["spec"]["containers"][0]["resources"]["limits"] = Value::Object(limits);
            }
            Shape::DeepNesting => {
                let nest = |_| (0..DEPTH).fold(json!([]), |inner, _| Value::Array(vec![inner]));
                let nests: Vec<Value> = (0..count).map(nest).collect();
                pod["spec"]["affinity"] = json!({"nests": nests});
            }
        }
        pod
    }
}

/// How deep [`Shape::DeepNesting`] nests.
const DEPTH: usize = 200;

/// A distinct key of a few characters.
fn short_key(index: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut key = String::new();
    let mut rest = index;
    loop {
        key.push(char::from(ALPHABET[rest % ALPHABET.len()]));
        rest /= ALPHABET.len();
        if rest == 0 {
            return key;
        }
    }
}

/// The review of a pod of `shape` whose body is as near `target` bytes
/// as its elements allow, never over: solved from the bytes one more
/// element adds.
fn body_near(shape: Shape, target: usize, uid: &str) -> Vec<u8> {
    let len = |count| body_of(&review(&shape.pod(count), uid, false)).len();
    let base = len(1);
    let per_element = (len(1001) - base) as f64 / 1000.0;
    let mut count = ((target - base) as f64 / per_element) as usize;
    while len(count) > target {
        count -= count / 100 + 1;
    }
    let body = body_of(&review(&shape.pod(count), uid, false));
    assert!(body.len() > target * 9 / 10, "{shape:?}: {} bytes", body.len());
    body
}

/// The answer to review `uid`: an AdmissionReview of HTTP 200 for it.
fn answered(reply: &Reply, uid: &str) -> Value {
    let response = reply.admission(uid);
    assert!(response["allowed"].is_boolean(), "{uid}: {response}");
    response
}

#[tokio::test(flavor = "multi_thread")]
async fn one_review_of_any_shape_near_the_body_limit_peaks_within_four_bodies() {
    let _alone = crate::alone();
    let mut failures = Vec::new();
    for shape in Shape::ALL {
        let server = Server::start_release().await;
        let base = warmed_up_base(&server).await;
        let uid = next_uid();
        let body = body_near(shape, LARGE_BODY, &uid);
        let body_len = body.len();
        let mut connection = server.connect().await;
        let reply = connection
            .post(MUTATE, body)
            .await
            .unwrap_or_else(|err| panic!("{shape:?}: {err}; log:\n{}", server.log()));
        let peak = server.memory("VmHWM");
        let response = answered(&reply, &uid);
        let above = peak.saturating_sub(base);
        eprintln!(
            "{shape:?}: body {:.2} MiB, base {:.1} MiB, peak {:.1} MiB, {:.2} bodies above \
             the base; allowed: {}",
            body_len as f64 / MIB,
            base as f64 / MIB,
            peak as f64 / MIB,
            above as f64 / body_len as f64,
            response["allowed"],
        );
        if peak > base + BODY_FACTOR * body_len as u64 {
            failures.push(format!(
                "{shape:?}: peak {:.1} MiB is {:.2} bodies of {body_len} bytes above the base \
                 {:.1} MiB (at most {BODY_FACTOR})",
                peak as f64 / MIB,
                above as f64 / body_len as f64,
                base as f64 / MIB,
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn sixteen_concurrent_pods_of_small_numbers_stay_under_the_peak() {
    let _alone = crate::alone();
    let server = Server::start_release().await;
    let base = warmed_up_base(&server).await;
    // Every body is built, and every connection open, before the first
    // byte is sent, so that the reviews reach the server together.
    let requests: Vec<(String, Vec<u8>)> = (0..CONCURRENT)
        .map(|_| {
            let uid = next_uid();
            let body = body_near(Shape::SupplementalGroups, CONCURRENT_BODY, &uid);
            (uid, body)
        })
        .collect();
    for (uid, reply) in server.post_together(MUTATE, requests, &CALLERS).await {
        let response = answered(&reply, &uid);
        assert_eq!(response["allowed"], true, "{uid}: {response}");
    }
    let peak = server.memory("VmHWM");
    eprintln!(
        "{CONCURRENT} concurrent pods of {:.2} MB of small numbers: base {:.1} MiB, peak \
         {:.1} MiB (bound {:.1} MiB)",
        CONCURRENT_BODY as f64 / 1e6,
        base as f64 / MIB,
        peak as f64 / MIB,
        PEAK_RSS as f64 / MIB,
    );
    assert!(
        peak <= PEAK_RSS,
        "{CONCURRENT} concurrent reviews of {CONCURRENT_BODY} bytes: peak RSS {:.1} MiB is over \
         {:.1} MiB (base {:.1} MiB)",
        peak as f64 / MIB,
        PEAK_RSS as f64 / MIB,
        base as f64 / MIB,
    );
}
