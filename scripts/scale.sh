#!/usr/bin/env bash
# Fleet scale: `gpu-policy serve` (release build) against the fake API
# server of the integration tests grown to a fleet: NAMESPACES opted-in
# namespaces with the policy's annotations, NODES GPU nodes with GPU
# feature discovery's labels, TEMPLATES ResourceClaimTemplates, the DRA
# driver's DeviceClasses and the `nvidia` RuntimeClass (tests/it/scale.rs,
# an ignored test, does the work; tests/it/support/fleet.rs builds the
# objects).
#
# Prints, and writes to $OUT/table.md (every load run's JSON to
# $OUT/results.jsonl):
#   - time to ready, RSS after a warm-up (WARM_UP of light load) and peak
#     RSS for a small cluster, for clusters with one source grown and for
#     the whole fleet, and the bytes per object each cache adds;
#   - /validate/enforce against a small-cluster server and the fleet server
#     side by side: saturation, then p50/p99 at half of the small cluster's
#     saturation throughput, the order flipping every round; server CPU
#     µs per request; RSS after the load.
# Fails when the fleet server decides wrongly, a request fails, or the
# fleet's RSS after the load is above RSS_GOAL_MIB.
#
# Run by hand, not in CI: it takes a few minutes and two cores.
# Usage: scripts/scale.sh   (NAMESPACES=10000 NODES=5000 TEMPLATES=20000
#        ROUNDS=3 DURATION=10s WARMUP=2s CONCURRENCY=16 WARM_UP=3s by default)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-target/scale}
mkdir -p "$OUT"
bin=${CARGO_TARGET_DIR:-target}/release

cargo build --release --locked --bin gpu-policy --example loadgen
# The test binary, built once so that its build is not timed.
cargo test --release --locked --test it --no-run

SCALE_LOADGEN=$(realpath "$bin/examples/loadgen") \
SCALE_NAMESPACES=${NAMESPACES:-10000} \
SCALE_NODES=${NODES:-5000} \
SCALE_TEMPLATES=${TEMPLATES:-20000} \
SCALE_ROUNDS=${ROUNDS:-3} \
SCALE_DURATION=${DURATION:-10s} \
SCALE_WARMUP=${WARMUP:-2s} \
SCALE_CONCURRENCY=${CONCURRENCY:-16} \
SCALE_WARM_UP=${WARM_UP:-3s} \
SCALE_SERVER_CPUS=${SERVER_CPUS:-0} \
SCALE_LOADGEN_CPUS=${LOADGEN_CPUS:-$(($(nproc) >= 2 ? 1 : 0))} \
SCALE_RSS_GOAL_MIB=${RSS_GOAL_MIB:-100} \
SCALE_OUT=$(realpath "$OUT") \
    cargo test --release --locked --test it scale::fleet_scale -- --ignored --nocapture --exact
