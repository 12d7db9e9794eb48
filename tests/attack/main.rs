//! The attack suite: the server as a hostile caller inside the cluster
//! finds it. Nothing authenticates a caller by default, so anyone who can
//! reach the port may send anything, and a pod author controls every field
//! of a real review (docs/security.md). Each module is one class of attack,
//! run against the release binary when `GPU_POLICY_RELEASE_BINARY` names it
//! (`.ci/run` does), and judged on what a replica pays: its peak resident
//! set (`VmHWM` of `/proc/<pid>/status`), its open connections, and the
//! answers a legitimate caller gets while the attack runs.
//!
//! A test binary of its own, so that `cargo test` runs it alone, after or
//! before the others, and each test takes [`alone`]: every figure is then
//! one server's, on a machine that runs nothing else of the tests'. Run it
//! with `cargo test --test attack`.

// Each test holds `alone()` for the whole of its run, on a runtime of its
// own: the lock orders the tests, never two tasks of one runtime.
#![allow(clippy::await_holding_lock)]

use std::sync::{Mutex, MutexGuard, PoisonError};

#[path = "../it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

mod connections;
mod cpu_shapes;
mod forged_reviews;
mod labels_and_output;
mod memory_shapes;
mod registry_values;

/// One replica's peak resident set under any attack (the chart's limit is
/// 256Mi; docs/security.md).
pub const PEAK_RSS: u64 = 128 << 20;

/// Held for the whole of each test: the tests of this binary run one at a
/// time, whatever `--test-threads` says.
pub fn alone() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    // A test that failed while holding it leaves nothing to repair.
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}
