//! The attack suite: the server as a hostile caller inside the cluster
//! finds it. Nothing authenticates a caller by default, so anyone who can
//! reach the port may send anything, and a pod author controls every field
//! of a real review (docs/security.md). Each module is one class of attack,
//! run against the release binary when `GPU_POLICY_RELEASE_BINARY` names it
//! (`.ci/run` does), and judged on what a replica pays: its peak resident
//! set (`VmHWM` of `/proc/<pid>/status`), its open connections, and the
//! answers a legitimate caller gets while the attack runs.
//!
//! Run it with `cargo test --test it attack:: -- --test-threads 1`: each
//! test measures one process's peak, and parallel tests would share the
//! machine's two cores with it.

/// One replica's peak resident set under any attack (the chart's limit is
/// 256Mi; SPEC section 6).
pub const PEAK_RSS: u64 = 128 << 20;
mod connections;
mod forged_reviews;
mod labels_and_output;

mod cpu_shapes;
mod memory_shapes;
