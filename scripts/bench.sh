#!/usr/bin/env bash
# Measures `gpu-policy serve` against the echo baseline (examples/echo_server.rs:
# the same TLS/HTTP stack answering `allowed: true`) with the load tool
# (examples/loadgen.rs), in one run, alternating the two servers:
#
#   1. saturation: ROUNDS rounds; in each, every review is sent to both
#      servers in turn (the order flips every round) as fast as they answer;
#   2. half load: the same at half of gpu-policy's median saturation
#      throughput for that review, sent to both servers.
#
# The reviews (benches/reviews/) are the ones of `cargo bench`: the GPU pod
# of fixture 07 and the CUDA-image pod of fixture 09 on /mutate, and the
# Deployment of fixture 07 on /validate/enforce. The servers run on
# loopback, pinned to SERVER_CPUS, the load tool to LOADGEN_CPUS, so the
# two do not take each other's core. Every run's JSON goes to
# $OUT/results.jsonl; the table of medians is printed and written to
# $OUT/table.md.
#
# Usage: scripts/bench.sh   (ROUNDS=3 DURATION=10s CONCURRENCY=16 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONCURRENCY=${CONCURRENCY:-16}
OUT=${OUT:-target/bench}
SERVER_CPUS=${SERVER_CPUS:-0}
# The other core when there is one.
LOADGEN_CPUS=${LOADGEN_CPUS:-$(($(nproc) >= 2 ? 1 : 0))}
GPU_POLICY_PORT=18443
METRICS_PORT=18080
ECHO_PORT=18444
SNI=gpu-policy.gpu-policy.svc

cargo build --release --locked --bin gpu-policy --example loadgen --example echo_server
bin=target/release
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

taskset -c "$SERVER_CPUS" "$bin/gpu-policy" serve --no-cluster \
    --listen "127.0.0.1:$GPU_POLICY_PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --certs-dir "$work/certs" > "$work/gpu-policy.log" 2>&1 &
gpu_policy_pid=$!
pids+=("$gpu_policy_pid")
wait_ready "$METRICS_PORT" "$work/gpu-policy.log"
# The same certificate directory: one CA verifies both servers.
taskset -c "$SERVER_CPUS" "$bin/examples/echo_server" \
    --listen "127.0.0.1:$ECHO_PORT" --certs-dir "$work/certs" 2> "$work/echo.log" &
echo_pid=$!
pids+=("$echo_pid")

# name  path  body
cases=(
    "gpu-pod /mutate benches/reviews/gpu-pod.json"
    "cpu-pod /mutate benches/reviews/cpu-pod.json"
    "gpu-deployment /validate/enforce benches/reviews/gpu-deployment.json"
)

# Each review takes the path it is meant to measure.
answer() { # port path body
    curl -sf --cacert "$work/certs/ca.crt" --resolve "$SNI:$1:127.0.0.1" \
        -H 'Content-Type: application/json' --data-binary "@$3" "https://$SNI:$1$2?timeout=10s"
}
for _ in $(seq 50); do answer "$ECHO_PORT" /mutate benches/reviews/gpu-pod.json > /dev/null && break; sleep 0.1; done
answer "$GPU_POLICY_PORT" /mutate benches/reviews/gpu-pod.json | grep -q '"patch"' \
    || { echo "the GPU pod got no patch"; exit 1; }
answer "$GPU_POLICY_PORT" /mutate benches/reviews/cpu-pod.json | grep -q '"patch"' \
    || { echo "the CPU pod got no patch"; exit 1; }
answer "$GPU_POLICY_PORT" /validate/enforce benches/reviews/gpu-deployment.json \
    | grep -q '"allowed":true' || { echo "the Deployment was not allowed"; exit 1; }

load() { # server case path body load [rate]
    local port=$GPU_POLICY_PORT pid=$gpu_policy_pid rate=()
    if [ "$1" = baseline ]; then port=$ECHO_PORT pid=$echo_pid; fi
    if [ -n "${6:-}" ]; then rate=(--rate "$6"); fi
    taskset -c "$LOADGEN_CPUS" "$bin/examples/loadgen" \
        --url "https://127.0.0.1:$port$3?timeout=10s" --ca "$work/certs/ca.crt" \
        --server-name "$SNI" --body "$4" --concurrency "$CONCURRENCY" \
        --duration "$DURATION" --warmup "$WARMUP" "${rate[@]}" \
        --server-pid "$pid" --label "$1 $2 $5" --output json \
        | tee -a "$OUT/results.jsonl" \
        | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%-40s %8.0f req/s  p99 %6.0f µs  failed %d" % (r["label"], r["throughput_rps"], r["latency_us"]["p99"], r["failed"]))'
}

order() { # round -> the two servers, the first one alternating
    if [ $(($1 % 2)) -eq 1 ]; then echo "baseline gpu-policy"; else echo "gpu-policy baseline"; fi
}

for round in $(seq "$ROUNDS"); do
    for case in "${cases[@]}"; do
        read -r name path body <<< "$case"
        for server in $(order "$round"); do load "$server" "$name" "$path" "$body" saturation; done
    done
done
for case in "${cases[@]}"; do
    read -r name path body <<< "$case"
    half=$(python3 - "$OUT/results.jsonl" "gpu-policy $name saturation" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print(round(statistics.median(r["throughput_rps"] for r in runs if r["label"] == sys.argv[2]) / 2))
EOF
)
    eval "half_${name//-/_}=$half"
done
for round in $(seq "$ROUNDS"); do
    for case in "${cases[@]}"; do
        read -r name path body <<< "$case"
        rate_var="half_${name//-/_}"
        for server in $(order "$round"); do
            load "$server" "$name" "$path" "$body" half "${!rate_var}"
        done
    done
done

python3 scripts/bench_report.py "$OUT/results.jsonl" \
    --rounds "$ROUNDS" --duration "$DURATION" --concurrency "$CONCURRENCY" \
    | tee "$OUT/table.md"
