//! CPU: objects shaped to make a rule's work grow faster than the object.
//!
//! A pod author controls every field of a real review, and any caller can
//! forge one: each hostile shape of `benches/hostile/shapes.rs` (one per
//! dimension a rule reads: resource names, containers, env entries,
//! volumes, mounts, annotations, tolerations, affinity terms and
//! expressions, owner references, pod claims and their uses, a claim's
//! requests and subrequests) is sent at the body limit (3 MiB) to the
//! release binary. Every reader and rule is linear in the object, so
//! each review costs the server a fraction of a second of CPU (the
//! benchmark's target is 100 ms on one core; the bound here is a generous
//! [`CPU_PER_REVIEW`], read from `/proc/<pid>/stat`), and a legitimate
//! review sent while a hostile one is answered is answered within
//! [`LEGITIMATE_ANSWER`]. The shapes a pod's update reads twice (old and
//! new containers, env, affinity terms) are sent as updates too.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::review::Review;
use crate::support::server::{
    ENFORCE, MUTATE, Server, body_of, namespace_of, next_uid, pod_with_gpus, review,
};

#[allow(dead_code)]
#[path = "../../benches/hostile/shapes.rs"]
mod shapes;
use shapes::{HostileShape, SHAPES, Webhook};

/// The server's body limit (`server::MAX_BODY_BYTES`).
const BODY_LIMIT: usize = 3 * 1024 * 1024;

/// The most CPU time (user and system) one hostile review may cost the
/// server.
const CPU_PER_REVIEW: Duration = Duration::from_secs(1);

/// How soon a legitimate review is answered while a hostile one runs.
const LEGITIMATE_ANSWER: Duration = Duration::from_secs(1);

/// `/proc/<pid>/stat` counts CPU time in clock ticks of `USER_HZ`, which
/// is 100 on every architecture Linux runs the server on.
const TICKS_PER_SECOND: u64 = 100;

/// The user and system CPU time the process `pid` has used so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|err| panic!("/proc/{pid}/stat: {err}"));
    // The command name (field 2) may hold spaces: count from its `)`.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15, the 12th and 13th after it.
    let ticks: u64 =
        fields[11..13].iter().map(|field| field.parse::<u64>().expect("a tick count")).sum();
    Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND)
}

fn path(webhook: Webhook) -> &'static str {
    match webhook {
        Webhook::Mutate => MUTATE,
        Webhook::Enforce => ENFORCE,
    }
}

/// The review of `object` for request `uid`, as the API server sends it.
fn body(object: &Value, uid: &str) -> Vec<u8> {
    body_of(&review(object, uid, false))
}

/// The shapes also sent as a pod's UPDATE of itself, every container's
/// image changed (the rules then read the old pod beside the new one, and
/// hold each new image to the old container's).
const UPDATED: [&str; 3] = ["containers", "env", "affinity-terms"];

/// The UPDATE review of `object` from the same pod on a CUDA 12 image.
fn update_body(object: &Value, uid: &str) -> Vec<u8> {
    let mut old = object.clone();
    for container in old["spec"]["containers"].as_array_mut().into_iter().flatten() {
        container["image"] = json!("nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04");
    }
    body_of(&Review::update(object, &old, &namespace_of(object)).uid(uid).json())
}

/// What one hostile review cost: the server's CPU time for it, and how
/// long a legitimate review sent meanwhile waited.
struct Cost {
    count: usize,
    body_bytes: usize,
    cpu: Duration,
    legitimate: Duration,
}

/// Sends `shape` at the body limit, and a legitimate review while it is
/// answered; both answers are checked.
async fn attack(server: &Server, shape: &HostileShape, body: fn(&Value, &str) -> Vec<u8>) -> Cost {
    let uid = next_uid();
    let (count, object) = shapes::largest_within(shape, BODY_LIMIT, |o| body(o, &uid).len());
    let hostile_body = body(&object, &uid);
    let body_bytes = hostile_body.len();
    let mut hostile = server.connect().await;
    let mut legitimate = server.connect().await;
    let before = cpu_time(server.pid());
    let webhook = path(shape.webhook);
    let sent = tokio::spawn(async move { hostile.post(webhook, hostile_body).await });
    // The legitimate review follows the hostile one's body onto the wire.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let asked = Instant::now();
    let answer = legitimate.admit(MUTATE, &pod_with_gpus(1)).await;
    let waited = asked.elapsed();
    assert_eq!(answer["allowed"], true, "{}: {answer}", shape.name);
    let reply = sent.await.expect("the hostile request's task");
    let cpu = cpu_time(server.pid()).saturating_sub(before);
    let reply = reply.unwrap_or_else(|err| panic!("{}: {err}, after {cpu:?} of CPU", shape.name));
    let response = reply.admission(&uid);
    assert!(response["allowed"].is_boolean(), "{}: {response}", shape.name);
    Cost { count, body_bytes, cpu, legitimate: waited }
}

/// Each hostile shape costs the server at most [`CPU_PER_REVIEW`] of CPU,
/// and a legitimate review sent meanwhile is answered within
/// [`LEGITIMATE_ANSWER`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_hostile_shape_costs_a_fraction_of_a_second_and_blocks_no_one() {
    let _alone = crate::alone();
    let server = Server::start_release().await;
    let mut failures = Vec::new();
    let updated: Vec<&HostileShape> =
        SHAPES.iter().filter(|shape| UPDATED.contains(&shape.name)).collect();
    assert_eq!(updated.len(), UPDATED.len(), "a shape of {UPDATED:?} is gone");
    let updates = updated
        .into_iter()
        .map(|shape| (shape, "update", update_body as fn(&Value, &str) -> Vec<u8>));
    let creations =
        SHAPES.iter().map(|shape| (shape, "create", body as fn(&Value, &str) -> Vec<u8>));
    for (shape, operation, body) in creations.chain(updates) {
        let cost = attack(&server, shape, body).await;
        eprintln!(
            "{} ({operation}): {} items, {} bytes: {:?} of CPU; a legitimate review answered in {:?}",
            shape.name, cost.count, cost.body_bytes, cost.cpu, cost.legitimate
        );
        if cost.cpu > CPU_PER_REVIEW || cost.legitimate > LEGITIMATE_ANSWER {
            failures.push(format!(
                "{} ({}, {operation}): {:?} of CPU, a legitimate review answered in {:?}",
                shape.name, shape.grows, cost.cpu, cost.legitimate
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
