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
# of fixture 07 and the CUDA-image pod of fixture 09 on /mutate, the
# Deployment of fixture 07 on /validate/enforce, and the DRA pod on /mutate.
#
# Registry mode is measured the same way, against table mode instead of
# the baseline: the GPU pod with its image moved to a static registry on
# loopback (scripts/oci_registry.py; CUDA 12.8 on a forward-compatible
# driver branch), sent to a server in registry mode that has the image
# cached (looked up before the first run) and to one in table mode whose
# table has an entry for it. Both must make the same patch.
#
# The DRA pod (fixture 21: two containers sharing one claimed GPU, and a
# log shipper) needs its claim resolved: it goes to a third server, reading
# a static API server on loopback (scripts/static_api.py) that has the
# claim's ResourceClaimTemplate, the DeviceClass and the namespace, and is
# measured against the baseline like the others.
#
# The servers run on loopback, pinned to SERVER_CPUS, the load tool to
# LOADGEN_CPUS, so the two do not take each other's core. Every run's JSON
# goes to $OUT/results.jsonl; the tables of medians are printed and
# written to $OUT/table.md.
#
# BUSY_POLL=1 runs the load tool with --busy-poll: it never sleeps, so
# that an answer never has to wake it. On loopback the server's kernel
# time pays for waking the tool, and pays more the slower the server is
# (the tool waits, and sleeps, more often); over a network the client's
# wake-up is the client's own (docs/performance.md).
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
REGISTRY_PORT=18445
TABLE_MODE_PORT=18446
TABLE_MODE_METRICS_PORT=18081
REGISTRY_MODE_PORT=18447
REGISTRY_MODE_METRICS_PORT=18082
API_PORT=18448
CLUSTER_PORT=18449
CLUSTER_METRICS_PORT=18083
SNI=gpu-policy.gpu-policy.svc
# The registry's image: CUDA 12.8 on a forward-compatible driver branch, so
# that both modes add a compute capability and a driver floor.
IMAGE="127.0.0.1:$REGISTRY_PORT/vllm/vllm-openai:v0.11.0"
REQUIRE_CUDA="cuda>=12.8 brand=tesla,driver>=535,driver<536"

# The servers as the image ships them: built with a profile of their own
# serving (scripts/release-build.sh), the echo trained and built the same
# way, so that the two are compared built alike. PGO=0 measures the plain
# release build of both instead.
PGO=${PGO:-1}
cargo build --release --locked --example loadgen
loadgen=${CARGO_TARGET_DIR:-target}/release/examples/loadgen
if [ "$PGO" = 1 ]; then
    scripts/release-build.sh --echo
    gpu_policy_bin=target/pgo/bin/gpu-policy
    echo_bin=target/pgo/bin/echo_server
    build="profile-guided (scripts/release-build.sh)"
else
    cargo build --release --locked --bin gpu-policy --example echo_server
    gpu_policy_bin=${CARGO_TARGET_DIR:-target}/release/gpu-policy
    echo_bin=${CARGO_TARGET_DIR:-target}/release/examples/echo_server
    build="plain release (cargo build --release)"
fi
busy_poll=()
if [ "${BUSY_POLL:-0}" = 1 ]; then
    busy_poll=(--busy-poll)
    build="$build; the load tool never sleeping (--busy-poll)"
fi
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
start_scratch

start_server() { # name port metrics_port serve-args...: sets server_pid
    local name=$1 port=$2 metrics_port=$3
    shift 3
    taskset -c "$SERVER_CPUS" "$gpu_policy_bin" serve "$@" \
        --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics_port" \
        --certs-dir "$work/certs" > "$work/$name.log" 2>&1 &
    server_pid=$!
    pids+=("$server_pid")
    wait_ready "$metrics_port" "$work/$name.log"
}

start_server gpu-policy "$GPU_POLICY_PORT" "$METRICS_PORT" --no-cluster
gpu_policy_pid=$server_pid
# The same certificate directory: one CA verifies both servers.
taskset -c "$SERVER_CPUS" "$echo_bin" \
    --listen "127.0.0.1:$ECHO_PORT" --certs-dir "$work/certs" 2> "$work/echo.log" &
echo_pid=$!
pids+=("$echo_pid")

python3 scripts/oci_registry.py "$REGISTRY_PORT" vllm/vllm-openai v0.11.0 \
    CUDA_VERSION=12.8.1 "NVIDIA_REQUIRE_CUDA=$REQUIRE_CUDA" 2> "$work/registry.log" &
pids+=("$!")
printf '%s\n' "imageResolution:" "  table:" \
    "  - pattern: '^127\\.0\\.0\\.1:$REGISTRY_PORT/vllm/vllm-openai:'" \
    "    cudaVersion: \"12.8\"" "    requireCuda: \"$REQUIRE_CUDA\"" > "$work/table-mode.yaml"
printf '%s\n' "imageResolution:" "  mode: registry" \
    "  registries: [\"127.0.0.1:$REGISTRY_PORT\"]" \
    "  insecureRegistries: [\"127.0.0.1:$REGISTRY_PORT\"]" > "$work/registry-mode.yaml"
# The DRA pod's server: the cluster is a static API server.
static_api_cluster "$API_PORT" "$work/kubeconfig"
start_server gpu-policy-cluster "$CLUSTER_PORT" "$CLUSTER_METRICS_PORT" \
    --kubeconfig "$work/kubeconfig"
cluster_pid=$server_pid
grep -q "connected to the API server" "$work/gpu-policy-cluster.log" \
    || { echo "the DRA pod's server is not reading the static API server"; exit 1; }
start_server table-mode "$TABLE_MODE_PORT" "$TABLE_MODE_METRICS_PORT" \
    --no-cluster --config "$work/table-mode.yaml"
table_mode_pid=$server_pid
start_server registry-mode "$REGISTRY_MODE_PORT" "$REGISTRY_MODE_METRICS_PORT" \
    --no-cluster --config "$work/registry-mode.yaml"
registry_mode_pid=$server_pid
# The GPU pod of fixture 07, its image on the registry.
python3 -c '
import json, sys
review = json.load(sys.stdin)
review["request"]["object"]["spec"]["containers"][0]["image"] = sys.argv[1]
json.dump(review, sys.stdout, separators=(",", ":"))' "$IMAGE" \
    < benches/reviews/gpu-pod.json > "$work/cached-image-pod.json"

# name  path  body  the two servers compared (half load: half of the
# second one's median saturation throughput)
cases=(
    "gpu-pod /mutate benches/reviews/gpu-pod.json baseline gpu-policy"
    "cpu-pod /mutate benches/reviews/cpu-pod.json baseline gpu-policy"
    "gpu-deployment /validate/enforce benches/reviews/gpu-deployment.json baseline gpu-policy"
    "dra-pod /mutate benches/reviews/dra-pod.json baseline gpu-policy-cluster"
    "cached-image-pod /mutate $work/cached-image-pod.json table-mode registry-mode"
)

# Each review takes the path it is meant to measure.
answer() { # port path body
    curl -sf --cacert "$work/certs/ca.crt" --resolve "$SNI:$1:127.0.0.1" \
        -H 'Content-Type: application/json' --data-binary "@$3" "https://$SNI:$1$2?timeout=10s"
}
wait_tls "$ECHO_PORT" "$work/certs/ca.crt"
answer "$GPU_POLICY_PORT" /mutate benches/reviews/gpu-pod.json | grep -q '"patch"' \
    || { echo "the GPU pod got no patch"; exit 1; }
answer "$GPU_POLICY_PORT" /mutate benches/reviews/cpu-pod.json | grep -q '"patch"' \
    || { echo "the CPU pod got no patch"; exit 1; }
answer "$GPU_POLICY_PORT" /validate/enforce benches/reviews/gpu-deployment.json \
    | grep -q '"allowed":true' || { echo "the Deployment was not allowed"; exit 1; }
# Only the DRA pod's log shipper is pinned: the claim was resolved.
dra_patch=$(answer "$CLUSTER_PORT" /mutate benches/reviews/dra-pod.json | python3 -c '
import base64, json, sys
response = json.load(sys.stdin)["response"]
assert "warnings" not in response, response["warnings"]
print(base64.b64decode(response["patch"]).decode())') \
    || { echo "the DRA pod's claim was not resolved"; exit 1; }
grep -q '/spec/containers/2/env' <<< "$dra_patch" && ! grep -q '/spec/containers/0/' <<< "$dra_patch" \
    || { echo "the DRA pod got the wrong patch: $dra_patch"; exit 1; }
patch_of() { # port body: the JSON Patch of a /mutate answer, decoded
    answer "$1" /mutate "$2" | python3 -c '
import base64, json, sys
print(base64.b64decode(json.load(sys.stdin)["response"].get("patch", "")).decode())'
}
# The first lookup may outlive the budget and finish in the background.
for _ in $(seq 50); do
    patch_of "$REGISTRY_MODE_PORT" "$work/cached-image-pod.json" | grep -q cuda.driver && break
    sleep 0.2
done
registry_patch=$(patch_of "$REGISTRY_MODE_PORT" "$work/cached-image-pod.json")
table_patch=$(patch_of "$TABLE_MODE_PORT" "$work/cached-image-pod.json")
grep -q cuda.driver <<< "$registry_patch" \
    || { echo "registry mode gave no driver floor: $registry_patch"; exit 1; }
[ "$registry_patch" = "$table_patch" ] || {
    printf 'registry and table mode patch differently:\n%s\n%s\n' "$registry_patch" "$table_patch"
    exit 1
}
registry_requests=$(wc -l < "$work/registry.log")

load() { # server case path body load [rate]
    local port=$GPU_POLICY_PORT pid=$gpu_policy_pid rate=()
    case $1 in
        baseline) port=$ECHO_PORT pid=$echo_pid ;;
        table-mode) port=$TABLE_MODE_PORT pid=$table_mode_pid ;;
        registry-mode) port=$REGISTRY_MODE_PORT pid=$registry_mode_pid ;;
        gpu-policy-cluster) port=$CLUSTER_PORT pid=$cluster_pid ;;
    esac
    if [ -n "${6:-}" ]; then rate=(--rate "$6"); fi
    taskset -c "$LOADGEN_CPUS" "$loadgen" \
        --url "https://127.0.0.1:$port$3?timeout=10s" --ca "$work/certs/ca.crt" \
        --server-name "$SNI" --body "$4" --concurrency "$CONCURRENCY" \
        --duration "$DURATION" --warmup "$WARMUP" "${rate[@]}" "${busy_poll[@]}" \
        --server-pid "$pid" --label "$1 $2 $5" --output json \
        | tee -a "$OUT/results.jsonl" \
        | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%-40s %8.0f req/s  p99 %6.0f µs  failed %d" % (r["label"], r["throughput_rps"], r["latency_us"]["p99"], r["failed"]))'
}

order() { # round first second -> the two servers, the first one alternating
    if [ $(($1 % 2)) -eq 1 ]; then echo "$2 $3"; else echo "$3 $2"; fi
}

for round in $(seq "$ROUNDS"); do
    for case in "${cases[@]}"; do
        read -r name path body first second <<< "$case"
        for server in $(order "$round" "$first" "$second"); do
            load "$server" "$name" "$path" "$body" saturation
        done
    done
done
for case in "${cases[@]}"; do
    read -r name path body first second <<< "$case"
    half=$(python3 - "$OUT/results.jsonl" "$second $name saturation" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print(round(statistics.median(r["throughput_rps"] for r in runs if r["label"] == sys.argv[2]) / 2))
EOF
)
    eval "half_${name//-/_}=$half"
done
for round in $(seq "$ROUNDS"); do
    for case in "${cases[@]}"; do
        read -r name path body first second <<< "$case"
        rate_var="half_${name//-/_}"
        for server in $(order "$round" "$first" "$second"); do
            load "$server" "$name" "$path" "$body" half "${!rate_var}"
        done
    done
done

python3 scripts/bench_report.py "$OUT/results.jsonl" \
    --rounds "$ROUNDS" --duration "$DURATION" --concurrency "$CONCURRENCY" --build "$build" \
    --registry-requests $(($(wc -l < "$work/registry.log") - registry_requests)) \
    | tee "$OUT/table.md"
