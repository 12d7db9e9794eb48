# Shared by scripts/bench.sh and scripts/soak.sh (sourced, not run).

# wait_ready METRICS_PORT LOG: waits up to 10 s for `gpu-policy serve` to
# answer /readyz on METRICS_PORT; otherwise prints its LOG and fails.
wait_ready() {
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$1/readyz" > /dev/null && return 0
        sleep 0.1
    done
    echo "gpu-policy did not become ready:" >&2
    cat "$2" >&2
    return 1
}
