#!/usr/bin/env bash
# Counts the instructions `gpu-policy serve` and the echo baseline
# (examples/echo_server.rs) spend per request, by phase, with valgrind's
# callgrind. Instruction counts do not depend on what else the machine is
# doing, so they tell apart changes of a few percent that load figures
# (scripts/bench.sh) cannot.
#
# Each server runs under callgrind; once it is ready, its counters are
# zeroed, the load tool sends one review on one kept-alive connection for
# DURATION, and the counters are dumped. The cost of a phase is the
# inclusive cost of its function (all threads, the log writer's included),
# divided by the number of requests answered.
#
# The DRA pod's claim names a ResourceClaimTemplate: its server reads a
# static API server on loopback (scripts/static_api.py), as in
# scripts/bench.sh, so that the claim resolves.
#
# CACHE_SIM=1 also simulates the caches (valgrind's model of this
# machine's): beside the instructions, the misses of the first-level
# instruction cache per request, by phase. Code that runs once per request
# and does not fit that cache is fetched again on every request, a cost
# the instruction count does not show (docs/performance.md).
#
# BINARIES=pgo measures the profile-guided builds that the image ships and
# the load runs compare (target/pgo/bin, from scripts/release-build.sh
# --echo) instead of building with symbols: without symbols there are no
# phases, only the totals.
#
# Usage: scripts/callgrind.sh   (DURATION=20s by default; REVIEWS names
# the reviews of benches/reviews/ to measure: gpu-pod cpu-pod
# gpu-deployment dra-pod)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

DURATION=${DURATION:-20s}
REVIEWS=${REVIEWS:-gpu-pod cpu-pod gpu-deployment dra-pod}
OUT=${OUT:-target/callgrind}
CACHE_SIM=${CACHE_SIM:-0}
valgrind_args=(--tool=callgrind)
events=Ir
if [ "$CACHE_SIM" = 1 ]; then
    valgrind_args+=(--cache-sim=yes)
    events=Ir,I1mr
fi
GPU_POLICY_PORT=18543
METRICS_PORT=18180
ECHO_PORT=18544
API_PORT=18548
SNI=gpu-policy.gpu-policy.svc

if [ "${BINARIES:-profiling}" = pgo ]; then
    gpu_policy_bin=target/pgo/bin/gpu-policy
    echo_bin=target/pgo/bin/echo_server
    for file in "$gpu_policy_bin" "$echo_bin"; do
        [ -x "$file" ] || { echo "no $file: run scripts/release-build.sh --echo first" >&2; exit 1; }
    done
    # The client is not measured: the plain build, as scripts/bench.sh's.
    cargo build --release --locked --example loadgen
    loadgen_bin=${CARGO_TARGET_DIR:-target}/release/examples/loadgen
else
    # Symbols and line tables, in a target directory of their own so that
    # the shipped release build stays as it is.
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/profiling}
    CARGO_PROFILE_RELEASE_STRIP=none CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
        cargo build --release --locked --bin gpu-policy --example loadgen --example echo_server
    gpu_policy_bin=$CARGO_TARGET_DIR/release/gpu-policy
    echo_bin=$CARGO_TARGET_DIR/release/examples/echo_server
    loadgen_bin=$CARGO_TARGET_DIR/release/examples/loadgen
fi
mkdir -p "$OUT"
start_scratch
static_api_cluster "$API_PORT" "$work/kubeconfig"

endpoint_of() { # review -> path
    case $1 in
        *deployment*) echo /validate/enforce ;;
        *) echo /mutate ;;
    esac
}

cluster_of() { # review -> the serve flag of its cluster
    case $1 in
        dra-*) echo "--kubeconfig $work/kubeconfig" ;;
        *) echo --no-cluster ;;
    esac
}

# The phases of gpu-policy's request path, by the function that does each.
phases=(
    "decode|gpu_policy::admission::wire::decode"
    "policy|gpu_policy::admission::respond::answer"
    "encode|gpu_policy::admission::answer::Answer::encode"
    "record|gpu_policy::server::record::record"
    # The writer thread's loop is inlined into the thread's entry, which
    # callgrind names after the file it was inlined from.
    "log writer|telemetry/batch_writer.rs:std::sys::backtrace::__rust_begin_short_backtrace"
    "free request|core::ptr::drop_in_place<gpu_policy::admission::wire::AdmissionRequest>"
)
# Without symbols there are no phases to find.
if [ "${BINARIES:-profiling}" = pgo ]; then
    phases=()
fi

measure() { # server review -> one line of figures
    local server=$1 review=$2 port out
    out="$OUT/$server-$review.out"
    rm -f "$out"
    if [ "$server" = echo ]; then
        port=$ECHO_PORT
        valgrind "${valgrind_args[@]}" --callgrind-out-file="$out" \
            "$echo_bin" --listen "127.0.0.1:$port" \
            --certs-dir "$work/certs" 2> "$work/$server.log" &
    else
        port=$GPU_POLICY_PORT
        valgrind "${valgrind_args[@]}" --callgrind-out-file="$out" \
            "$gpu_policy_bin" serve $(cluster_of "$review") \
            --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$METRICS_PORT" \
            --certs-dir "$work/certs" > "$work/$server.log" 2>&1 &
    fi
    local pid=$!
    pids+=("$pid")
    local body=benches/reviews/$review.json path
    path=$(endpoint_of "$review")
    if [ "$server" != echo ]; then
        # Ready: the cluster's caches (if any) are filled.
        for _ in $(seq 600); do
            curl -sf "http://127.0.0.1:$METRICS_PORT/readyz" > /dev/null && break
            sleep 0.2
        done
    fi
    for _ in $(seq 600); do
        curl -sf --cacert "$work/certs/ca.crt" --resolve "$SNI:$port:127.0.0.1" \
            -H 'Content-Type: application/json' --data-binary "@$body" \
            "https://$SNI:$port$path?timeout=10s" > /dev/null && break
        sleep 0.2
    done
    callgrind_control --zero "$pid" > /dev/null 2>&1
    local report
    report=$("$loadgen_bin" --url "https://127.0.0.1:$port$path?timeout=10s" \
        --ca "$work/certs/ca.crt" --server-name "$SNI" --body "$body" \
        --concurrency 1 --duration "$DURATION" --warmup 0s --timeout 60s --output json)
    callgrind_control --dump "$pid" > /dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    local requests
    requests=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["failed"] == 0, r; print(r["requests"])' "$report")
    # callgrind_control --dump writes <out>.<n>; the counts since the zeroing.
    local dump
    dump=$(ls "$out".* | sort -V | tail -1)
    python3 - "$server" "$review" "$requests" "$dump" "$events" "${phases[@]}" <<'EOF'
import json, re, subprocess, sys
server, review, requests, dump, events, *phases = sys.argv[1:]
requests = int(requests)
events = events.split(",")
text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                       "--show=" + ",".join(events), dump],
                      capture_output=True, text=True, check=True).stdout
# A line: one count per event, each with its share in parentheses (a zero
# is a lone "."), then the function.
line_re = re.compile(r"^\s*" + r"\s+".join([r"([\d,]+|\.)(?:\s+\([^)]*\))?"] * len(events))
                     + r"\s+(.*)$")
totals = None
inclusive = {}
for line in text.splitlines():
    found = line_re.match(line)
    if not found:
        continue
    counts = [int(c.replace(",", "").replace(".", "0")) for c in found.groups()[:-1]]
    if "PROGRAM TOTALS" in line:
        totals = counts
        continue
    name = found.group(len(events) + 1).split(" [", 1)[0]
    inclusive[name] = max(counts, inclusive.get(name, counts))
row = {"server": server, "review": review, "requests": requests,
       "total": round(totals[0] / requests)}
misses = {"total": round(totals[1] / requests)} if len(events) > 1 else None
for phase in phases:
    label, function = phase.split("|", 1)
    found = [counts for name, counts in inclusive.items() if name.endswith(function)]
    best = max(found) if found else [0] * len(events)
    row[label] = round(best[0] / requests)
    if misses is not None:
        misses[label] = round(best[1] / requests)
if misses is not None:
    row["i1 misses"] = misses
print(json.dumps(row))
EOF
}

: > "$OUT/results.jsonl"
# gpu-policy writes the certificates, which the echo server reads.
for review in $REVIEWS; do
    for server in gpu-policy echo; do
        measure "$server" "$review" | tee -a "$OUT/results.jsonl"
    done
done
python3 - "$OUT/results.jsonl" "${phases[@]}" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
labels = [p.split("|", 1)[0] for p in sys.argv[2:]]
rest_column = " | the rest |" if labels else " |"
rest_rule = " | ---: |" if labels else " |"


def table(title, count):
    print(title + "\n")
    print("| review | echo | gpu-policy | ratio" + "".join(f" | {label}" for label in labels) + rest_column)
    print("| --- | ---: | ---: | ---:" + " | ---:" * len(labels) + rest_rule)
    for review in dict.fromkeys(r["review"] for r in rows):
        echo = count(next(r for r in rows if r["review"] == review and r["server"] == "echo"))
        ours = count(next(r for r in rows if r["review"] == review and r["server"] == "gpu-policy"))
        phases = [ours[label] for label in labels]
        rest = f" | {ours['total'] - sum(phases):,}" if labels else ""
        print(f"| {review} | {echo['total']:,} | {ours['total']:,} | {echo['total'] / ours['total']:.2f}"
              + "".join(f" | {p:,}" for p in phases) + rest + " |")


table("Instructions per request (callgrind, one connection):", lambda row: row)
if all("i1 misses" in r for r in rows):
    print()
    table("First-level instruction-cache misses per request (callgrind's cache simulation):",
          lambda row: row["i1 misses"])
EOF
