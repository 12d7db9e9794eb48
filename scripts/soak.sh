#!/usr/bin/env bash
# Soak: `gpu-policy serve` under a fixed rate for a minute while its
# serving certificate is replaced every 10 s and its config twice, then
# SIGTERM in the middle of more load.
#
# Passes when
#   - the minute of load has no failed request of any kind;
#   - every rotated certificate is the one served 2 s later, and both
#     config changes are taken (the log says so, the metric says success);
#   - under SIGTERM, no request that was written goes unanswered (the load
#     tool's `io`, `timeout`, `status` and `no_uid` counts are 0; refused
#     connections and requests never written are what a stopping server
#     causes, and the API server resends those), and the server exits 0;
#   - RSS at the end of the minute is less than 10% above RSS at 10 s.
#
# Usage: scripts/soak.sh   (RATE=1000 CONCURRENCY=8 SOAK_SECONDS=60 by default)
# Needs openssl (the CA and the rotated certificates) and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

RATE=${RATE:-1000}
CONCURRENCY=${CONCURRENCY:-8}
SECONDS_OF_LOAD=${SOAK_SECONDS:-60}
ROTATE_EVERY=10
PORT=18543
METRICS_PORT=18180
SNI=gpu-policy.gpu-policy.svc

cargo build --release --locked --bin gpu-policy --example loadgen
bin=target/release
work=$(mktemp -d)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
failed=0
check() { # condition-exit-code message
    if [ "$1" -eq 0 ]; then echo "ok: $2"; else echo "FAILED: $2"; failed=1; fi
}

# A CA, and serving certificates from it on demand.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=soak CA" -keyout "$work/ca.key" -out "$work/ca.crt" 2> /dev/null
serial=0
issue() { # writes tls.crt and tls.key, each replaced in one rename
    serial=$((serial + 1))
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "/CN=$SNI" -keyout "$work/next.key" -out "$work/next.csr" 2> /dev/null
    openssl x509 -req -in "$work/next.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" \
        -set_serial "$serial" -days 2 -out "$work/next.crt" \
        -extfile <(printf 'subjectAltName=DNS:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' "$SNI") \
        2> /dev/null
    mv "$work/next.key" "$work/tls.key"
    mv "$work/next.crt" "$work/tls.crt"
}
served_serial() {
    openssl s_client -connect "127.0.0.1:$PORT" -servername "$SNI" -CAfile "$work/ca.crt" \
        < /dev/null 2> /dev/null | openssl x509 -noout -serial 2> /dev/null | cut -d= -f2
}
issue
printf 'maxPerPod: 8\n' > "$work/config.yaml"

"$bin/gpu-policy" serve --no-cluster --listen "127.0.0.1:$PORT" \
    --metrics-listen "127.0.0.1:$METRICS_PORT" --tls-cert "$work/tls.crt" \
    --tls-key "$work/tls.key" --config "$work/config.yaml" --reload-interval 1 \
    > "$work/server.log" 2>&1 &
server_pid=$!
wait_ready "$METRICS_PORT" "$work/server.log"

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status"; }
load() { # seconds output
    "$bin/examples/loadgen" --url "https://127.0.0.1:$PORT/mutate?timeout=10s" \
        --ca "$work/ca.crt" --server-name "$SNI" --body benches/reviews/gpu-pod.json \
        --concurrency "$CONCURRENCY" --rate "$RATE" --warmup 0s --duration "$1" \
        --server-pid "$server_pid" --label soak --output json > "$2" || true
}

echo "soak: $SECONDS_OF_LOAD s at $RATE req/s over $CONCURRENCY connections"
load "${SECONDS_OF_LOAD}s" "$work/minute.json" &
load_pid=$!
start=$(date +%s)
rss_at_10=
rotations=0
rotations_served=0
config_changes=0
for second in $(seq 1 "$SECONDS_OF_LOAD"); do
    sleep $((start + second - $(date +%s))) 2> /dev/null || true
    [ "$second" -eq 10 ] && rss_at_10=$(rss)
    if [ $((second % ROTATE_EVERY)) -eq 0 ] && [ "$second" -lt "$SECONDS_OF_LOAD" ]; then
        issue
        rotations=$((rotations + 1))
        wanted=$(openssl x509 -in "$work/tls.crt" -noout -serial | cut -d= -f2)
        (sleep 2; [ "$(served_serial)" = "$wanted" ] && echo served >> "$work/rotations") &
    fi
    if [ "$second" -eq 25 ] || [ "$second" -eq 45 ]; then
        config_changes=$((config_changes + 1))
        printf 'maxPerPod: %d\n' $((8 - config_changes)) > "$work/config.tmp"
        mv "$work/config.tmp" "$work/config.yaml"
    fi
done
wait "$load_pid"
rss_at_end=$(rss)
sleep 2
rotations_served=$(wc -l < "$work/rotations" 2> /dev/null || echo 0)

python3 - "$work/minute.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency_us"]
print(f"  {r['requests']} requests, {r['throughput_rps']:.0f} req/s, failed {r['failed']} {r['failures']}")
print(f"  latency µs p50 {l['p50']:.0f} p99 {l['p99']:.0f} p99.9 {l['p999']:.0f} max {l['max']:.0f}")
if r.get("first_failure"):
    print(f"  first failure: {r['first_failure']}")
EOF
minute_failed=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["failed"] if r["requests"] > 0 else 1)' "$work/minute.json")
check "$((minute_failed != 0))" "no failed request in $SECONDS_OF_LOAD s ($minute_failed failed)"
check "$((rotations_served != rotations))" \
    "$rotations_served of $rotations rotated certificates served within 2 s"
config_reloads=$(grep -c '"config reloaded"' "$work/server.log" || true)
check "$((config_reloads != config_changes))" "$config_reloads of $config_changes config changes reloaded"
config_metric=0
curl -s "http://127.0.0.1:$METRICS_PORT/metrics" | grep -q 'reload_success{source="config"} 1' \
    || config_metric=1
check "$config_metric" "the config reload metric says success"
growth=$(python3 -c "print(f'{($rss_at_end / $rss_at_10 - 1) * 100:.1f}')")
check "$(python3 -c "print(int($rss_at_end >= 1.10 * $rss_at_10))")" \
    "RSS $((rss_at_10 / 1024)) MiB at 10 s, $((rss_at_end / 1024)) MiB at the end: $growth% (under 10%)"

# SIGTERM three seconds into ten seconds of load.
load 10s "$work/sigterm.json" &
load_pid=$!
sleep 3
kill -TERM "$server_pid"
set +e
wait "$server_pid"
server_exit=$?
set -e
server_pid=
wait "$load_pid"
python3 - "$work/sigterm.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"  under SIGTERM: {r['requests']} answered, not answered by kind: {r['failures']}")
EOF
unanswered=$(python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["failures"]; print(sum(v for k, v in f.items() if k not in ("connect", "unsent")))' "$work/sigterm.json")
check "$((unanswered != 0))" "every request written before SIGTERM answered ($unanswered unanswered)"
check "$server_exit" "the server exited with status $server_exit"

exit "$failed"
