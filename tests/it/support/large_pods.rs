//! Pods as large as the API server lets a review be: many containers of
//! many env entries each. Small objects and short strings are what make a
//! review's JSON tree largest for each byte of its body, so this is the
//! shape that weighs most on the webhook's memory (`e2e/memory.rs`).
//!
//! The pods are valid as the API server would send them: a CPU-only Pod in
//! [`NAMESPACE`], containers `c0`, `c1`, ... of one small image, each with
//! requests and env entries `VAR_00001`, `VAR_00002`, ... unique within it.

use serde_json::{Value, json};

use super::pods::MUTATIONS;
use super::server::{NAMESPACE, Server};

/// The image of every container.
pub const IMAGE: &str = "busybox:1.36";

/// How many containers a large pod has, and how many env entries each.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub containers: usize,
    pub env_per_container: usize,
}

impl Shape {
    pub fn env_entries(self) -> usize {
        self.containers * self.env_per_container
    }
}

/// A pod of `shape` whose env values are `value_len` bytes long, the first
/// `longer` of them (counted across containers) one byte longer.
pub fn large_pod(name: &str, shape: Shape, value_len: usize, longer: usize) -> Value {
    let containers: Vec<Value> = (0..shape.containers)
        .map(|c| {
            let env: Vec<Value> = (0..shape.env_per_container)
                .map(|e| {
                    let entry = c * shape.env_per_container + e;
                    let len = value_len + usize::from(entry < longer);
                    json!({"name": format!("VAR_{:05}", e + 1), "value": env_value(entry, len)})
                })
                .collect();
            json!({
                "name": format!("c{c}"),
                "image": IMAGE,
                "env": env,
                "resources": {
                    "requests": {"cpu": "10m", "memory": "16Mi"},
                    "limits": {"memory": "16Mi"},
                },
            })
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {"containers": containers, "restartPolicy": "Never"},
    })
}

/// A pod of `shape` whose review body is exactly `target` bytes, as
/// `body_len` measures the body of a review of a pod. The body grows by one
/// byte for each byte of one env value, so the values' lengths are solved
/// for, not searched.
pub fn pod_sized_to(
    name: &str,
    shape: Shape,
    target: usize,
    body_len: impl Fn(&Value) -> usize,
) -> Value {
    let empty_values = body_len(&large_pod(name, shape, 0, 0));
    let room = target.checked_sub(empty_values).unwrap_or_else(|| {
        panic!(
            "a pod of {shape:?} makes a body of {empty_values} bytes at the least, over {target}"
        )
    });
    let entries = shape.env_entries();
    let pod = large_pod(name, shape, room / entries, room % entries);
    assert_eq!(body_len(&pod), target, "the body grows by one byte per value byte");
    pod
}

/// `len` bytes of letters and digits, starting at a place that `entry`
/// picks, so that neighbouring values differ.
fn env_value(entry: usize, len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..len).map(|i| char::from(ALPHABET[(entry + i) % ALPHABET.len()])).collect()
}

/// Small reviews answered before the base is read, so that the base holds
/// what the first requests allocate for good (TLS sessions, the runtime's
/// buffers, the metrics' label sets).
const WARM_UP_REVIEWS: usize = 5;
const WARM_UP_SHAPE: Shape = Shape { containers: 2, env_per_container: 3 };

/// The server's `VmRSS` after it has answered [`WARM_UP_REVIEWS`] small
/// reviews of the path large ones take: the base a review's peak is
/// measured from.
pub async fn warmed_up_base(server: &Server) -> u64 {
    let mut connection = server.connect().await;
    let small = large_pod("small", WARM_UP_SHAPE, 8, 0);
    for _ in 0..WARM_UP_REVIEWS {
        let pinned = connection.mutated(&small).await;
        assert_eq!(pinned["metadata"]["annotations"][MUTATIONS], "visible-devices");
    }
    server.memory("VmRSS")
}
