#!/usr/bin/env bash
# The release build the image ships: `gpu-policy` optimised with a profile
# of its own serving (profile-guided optimisation).
#
#   1. an instrumented build of gpu-policy and the load tool
#      (target/pgo-instrumented);
#   2. training: `gpu-policy serve --no-cluster` on loopback answers each
#      review of benches/reviews/ on /mutate and /validate/enforce, sent by
#      the load tool for TRAIN_SECONDS each, and writes its profile when it
#      stops;
#   3. llvm-profdata (rustup's llvm-tools, added when missing) merges it;
#   4. the same release build with that profile (target/pgo), copied to
#      target/pgo/bin/gpu-policy.
#
# Why: the admission path runs a few hundred functions spread over a
# 15 MB binary. Laid out by the profile, hot code sits together and cold
# code (errors, the CLI, the cluster's lists) out of the way, which roughly
# halves the CPU per review on hosts where instruction-cache and TLB misses
# are dear (docs/performance.md). The build is otherwise `cargo build
# --release --locked --bin gpu-policy`, which still works and makes a
# correct, slower binary.
#
# With --echo the echo baseline (examples/echo_server.rs) is also trained
# the same way on the same reviews and built with its own profile
# (target/pgo-echo), to target/pgo/bin/echo_server: scripts/bench.sh
# compares the two built alike. gpu-policy's build does not change with it.
#
# Usage: scripts/release-build.sh [--echo]   (TRAIN_SECONDS=2 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

with_echo=false
case "${1:-}" in
    --echo) with_echo=true ;;
    "") ;;
    *) echo "usage: scripts/release-build.sh [--echo]" >&2; exit 2 ;;
esac
TRAIN_SECONDS=${TRAIN_SECONDS:-2}
TRAIN_PORT=${TRAIN_PORT:-18543}
TRAIN_METRICS_PORT=${TRAIN_METRICS_PORT:-18143}
SNI=gpu-policy.gpu-policy.svc

host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    rustup component add llvm-tools
fi
# An explicit --target keeps the flags off build scripts and proc macros:
# only the shipped code is instrumented and optimised.
instrumented=target/pgo-instrumented/$host/release
optimised=target/pgo/$host/release
profiles=$PWD/target/pgo-profiles
rm -rf "$profiles"
mkdir -p "$profiles"

examples=(--example loadgen)
if $with_echo; then examples+=(--example echo_server); fi
RUSTFLAGS="-Cprofile-generate=$profiles" CARGO_TARGET_DIR=target/pgo-instrumented \
    cargo build --release --locked --target "$host" --bin gpu-policy "${examples[@]}"

start_scratch
# train KIND BINARY: runs the server, sends it every review, stops it; its
# profile is left in $profiles.
train() {
    local kind=$1 binary=$2 server
    if [ "$kind" = gpu-policy ]; then
        LLVM_PROFILE_FILE="$profiles/gpu-policy-%p.profraw" "$binary" serve --no-cluster \
            --listen "127.0.0.1:$TRAIN_PORT" --metrics-listen "127.0.0.1:$TRAIN_METRICS_PORT" \
            --certs-dir "$work/certs" > "$work/$kind.log" 2>&1 &
        server=$!
        pids+=("$server")
        wait_ready "$TRAIN_METRICS_PORT" "$work/$kind.log"
    else
        # The echo serves the certificate gpu-policy made.
        LLVM_PROFILE_FILE="$profiles/echo-%p.profraw" "$binary" \
            --listen "127.0.0.1:$TRAIN_PORT" --certs-dir "$work/certs" 2> "$work/$kind.log" &
        server=$!
        pids+=("$server")
        wait_tls "$TRAIN_PORT" "$work/certs/ca.crt"
    fi
    for review in benches/reviews/*.json; do
        for path in /mutate /validate/enforce; do
            # The load tool's own profile is not wanted.
            LLVM_PROFILE_FILE="$work/loadgen-%p.profraw" "$instrumented/examples/loadgen" \
                --url "https://127.0.0.1:$TRAIN_PORT$path?timeout=10s" \
                --ca "$work/certs/ca.crt" --server-name "$SNI" --body "$review" \
                --concurrency 16 --duration "${TRAIN_SECONDS}s" --warmup 0s > "$work/loadgen.out" \
                || { echo "training: $review on $path failed:" >&2; cat "$work/loadgen.out" >&2; exit 1; }
        done
    done
    # The profile is written when the process exits.
    kill -TERM "$server"
    wait "$server" || true
}
train gpu-policy "$instrumented/gpu-policy"
if $with_echo; then train echo_server "$instrumented/examples/echo_server"; fi
# optimise NAME TARGET_DIR CARGO_TARGET...: merges NAME's profile and
# builds with it.
optimise() {
    local name=$1 dir=$2
    shift 2
    compgen -G "$profiles/$name-*.profraw" > /dev/null \
        || { echo "training wrote no profile for $name" >&2; exit 1; }
    "$profdata" merge -o "$profiles/$name.profdata" "$profiles/$name"-*.profraw
    RUSTFLAGS="-Cprofile-use=$profiles/$name.profdata" CARGO_TARGET_DIR=$dir \
        cargo build --release --locked --target "$host" "$@"
}
mkdir -p target/pgo/bin
# The load tool is built with it, as in the instrumented build: building an
# example resolves the dependencies' features with the dev-dependencies',
# and a crate whose features differ has other symbol names, which the
# profile would not match (its code would be built as if never run).
optimise gpu-policy target/pgo --bin gpu-policy --example loadgen
cp "$optimised/gpu-policy" target/pgo/bin/gpu-policy
if $with_echo; then
    optimise echo target/pgo-echo --example echo_server --example loadgen
    cp "target/pgo-echo/$host/release/examples/echo_server" target/pgo/bin/echo_server
fi
ls -l target/pgo/bin
