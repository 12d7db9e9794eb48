# Shared by the scripts of scripts/ (sourced, not run).

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

# wait_tls PORT CA: waits up to 5 s for a server on PORT to answer HTTPS as
# gpu-policy.gpu-policy.svc with a certificate CA verifies (any status: the
# echo baseline has no health endpoint); otherwise fails.
wait_tls() {
    local sni=gpu-policy.gpu-policy.svc
    for _ in $(seq 50); do
        curl -so /dev/null --cacert "$2" --resolve "$sni:$1:127.0.0.1" "https://$sni:$1/" \
            && return 0
        sleep 0.1
    done
    echo "nothing answered HTTPS on port $1" >&2
    return 1
}

# start_scratch: a scratch directory in $work, removed on exit together with
# the processes whose pids are added to the array `pids`.
start_scratch() {
    work=$(mktemp -d)
    pids=()
    trap stop_scratch EXIT
}

stop_scratch() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}

# static_api_cluster PORT KUBECONFIG: starts scripts/static_api.py on PORT
# (the namespace `ml`, a ResourceClaimTemplate, the DeviceClass, the
# RuntimeClass and a GPU node; watches that never send an event), adds its
# pid to `pids`, and writes a kubeconfig for it to KUBECONFIG.
static_api_cluster() {
    python3 scripts/static_api.py "$1" ml 2> "$work/api.log" &
    pids+=("$!")
    printf '%s\n' "apiVersion: v1" "kind: Config" \
        "clusters: [{name: static, cluster: {server: 'http://127.0.0.1:$1'}}]" \
        "users: [{name: static, user: {token: static}}]" \
        "contexts: [{name: static, context: {cluster: static, user: static}}]" \
        "current-context: static" > "$2"
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$1/version" > /dev/null && break; sleep 0.1; done
}
