#!/usr/bin/env bash
# A real Kubernetes control plane (etcd + kube-apiserver, no controller
# manager, no scheduler, no kubelet) built from source with Go and run on
# loopback, for tests and for trying the webhook by hand. No container
# runtime is needed. See `scripts/control-plane.sh --help`.
set -euo pipefail

# ---------------------------------------------------------------------------
# Pinned versions: the one place to change them. After a change run
# `scripts/control-plane.sh gomod` to regenerate tests/control-plane/go.mod
# and go.sum, and commit both.
#
# Kubernetes 1.36 or later is required: MutatingAdmissionPolicy is GA (served
# as admissionregistration.k8s.io/v1, on by default) from 1.36, and
# resource.k8s.io/v1 (DRA) is served by default since 1.34.
KUBERNETES_VERSION=v1.37.2
# The etcd that this Kubernetes release is built and tested against: its
# build/dependencies.yaml, kubeadm's DefaultEtcdVersion and its go.mod
# (go.etcd.io/etcd/*/v3) all name 3.7.0. Using exactly the version that
# k8s.io/kubernetes requires also means the shared Go module graph does not
# move the apiserver's own etcd client to another version.
ETCD_VERSION=v3.7.0
# ---------------------------------------------------------------------------

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD_DIR=$ROOT/tests/control-plane
OUT_DIR=${CONTROL_PLANE_OUT_DIR:-$ROOT/target/control-plane}
BIN_DIR=$OUT_DIR/bin
STAMP=$BIN_DIR/.stamp

# Packages built, and the binary name each gets in $BIN_DIR.
KUBE_PKGS=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
ETCD_PKG=go.etcd.io/etcd/server/v3 # the etcd server's `package main`
# Ours, in tests/control-plane/: kube-controller-manager's
# ValidatingAdmissionPolicy status controller alone (it fills
# status.typeChecking), for the tests of the generated policies.
OWN_PKGS=(./policy-status-controller)

# The Service CIDR of the cluster. No kube-proxy runs, so nothing routes to
# it; the apiserver only needs it to allocate ClusterIPs (and its own
# `kubernetes` Service takes the first address, put into its serving cert).
SERVICE_CIDR=10.0.0.0/24
SERVICE_IP=10.0.0.1

usage() {
    cat <<EOF
Usage: scripts/control-plane.sh COMMAND [ARGS]

Builds and runs a Kubernetes control plane (etcd + kube-apiserver) from
source with Go, on 127.0.0.1, with no container runtime.
Pinned: Kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION.

Commands:
  build [--force]  Build kube-apiserver, kubectl, etcd (and the policy
                   status controller of tests/control-plane/) into
                   ${BIN_DIR#"$ROOT"/}/ from the Go module in
                   tests/control-plane/. Skipped when the binaries of the
                   pinned versions are already there (--force rebuilds).
                   A cold build downloads ~600 MB of modules, fills ~3 GB of
                   Go build cache and takes about 9 minutes on 2 cores.
  up DIR           Start etcd and kube-apiserver with all their state in DIR
                   (created if missing; an existing DIR is resumed with its
                   certificates and etcd data). Builds first when needed.
                   Returns once /readyz answers ok, leaving both running, and
                   prints the KUBECONFIG to use.
  down DIR         Stop what \`up DIR\` started (SIGTERM, then wait). Does
                   nothing when nothing runs. DIR itself is kept.
  gomod            Regenerate tests/control-plane/go.mod and go.sum from the
                   pinned versions (needs the Go module proxy).
  -h, --help       This text.

What \`up DIR\` leaves in DIR:
  admin.kubeconfig         cluster-admin (client cert in group system:masters)
  env                      shell exports: KUBECONFIG, CONTROL_PLANE_* (URLs,
                           ports, paths); \`source DIR/env\`
  apiserver.port etcd.port the ports chosen
  pki/                     CA (ca.crt, ca.key), apiserver serving cert, admin
                           and webhook client certs, service-account key pair
  webhook-kubeconfig.yaml  the client cert (CN=kube-apiserver-webhook-client,
                           signed by pki/ca.crt) the apiserver presents to
                           every admission webhook
  admission-config.yaml    --admission-control-config-file pointing at it
  audit-policy.yaml        RequestResponse for pods and DRA objects, Metadata
                           for the rest
  audit.log                the audit log
  etcd/                    etcd's data
  etcd.log kube-apiserver.log etcd.pid kube-apiserver.pid

Limits of a control plane without controllers:
  - Pods stay Pending (no scheduler, no kubelet).
  - No namespace (not even "default") gets a "default" ServiceAccount, and
    the ServiceAccount admission plugin rejects a pod without one, with
    --dry-run=server too: create it (kubectl create serviceaccount default
    -n NS), or start with CONTROL_PLANE_APISERVER_ARGS=
    --disable-admission-plugins=ServiceAccount.
  - Nothing finalizes namespace deletion or garbage-collects owned objects.
  - Services get a ClusterIP but nothing routes to it: register webhooks
    with clientConfig.url (https://127.0.0.1:PORT/...) and caBundle.

Environment:
  CONTROL_PLANE_OUT_DIR        build output (default target/control-plane)
  CONTROL_PLANE_APISERVER_PORT, CONTROL_PLANE_ETCD_PORT,
  CONTROL_PLANE_ETCD_PEER_PORT fixed ports instead of free random ones
  CONTROL_PLANE_APISERVER_ARGS extra kube-apiserver flags (word-split),
                               e.g. "--feature-gates=Foo=true --v=4"
  CONTROL_PLANE_READY_TIMEOUT  seconds to wait for /readyz (default 60)
  CONTROL_PLANE_STOP_TIMEOUT   seconds \`down\` waits after SIGTERM before
                               SIGKILL (default 30)
EOF
}

die() {
    echo "control-plane: error: $*" >&2
    exit 1
}

note() { echo "control-plane: $*" >&2; }

need() {
    command -v "$1" > /dev/null 2>&1 || die "$1 is required but not found in PATH${2:+ ($2)}"
}

# Every go command runs in our module with settings that do not depend on the
# caller's environment: no go.work of a parent directory, go.mod and go.sum
# used as committed (a missing checksum is an error, not a silent change),
# and static binaries as upstream releases them.
run_go() {
    (cd "$MOD_DIR" && GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0 go "$@")
}

# v1.37.2 -> v0.37.2: the tag of the staging modules (k8s.io/api, ...) that
# are released together with a Kubernetes version.
staging_version() {
    local v=${1#v}
    echo "v0.${v#*.}"
}

# ---------------------------------------------------------------------------
# gomod

cmd_gomod() {
    need go "Go 1.26 or later"
    mkdir -p "$MOD_DIR"
    local staging gomod
    staging=$(staging_version "$KUBERNETES_VERSION")
    # k8s.io/kubernetes requires its staging modules as v0.0.0 and replaces
    # them with ./staging/...; replaces only apply in the main module, so a
    # module depending on it has to point each one at its released tag. The
    # list comes from that version's own go.mod.
    gomod=$(cd "$MOD_DIR" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    [[ -f $gomod ]] || die "could not download the go.mod of k8s.io/kubernetes@$KUBERNETES_VERSION"
    local mods
    mods=$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$gomod" | sort -u)
    [[ -n $mods ]] || die "no staging modules found in $gomod"

    {
        echo "// Generated by scripts/control-plane.sh gomod from its pinned versions;"
        echo "// change the pins there and regenerate instead of editing this file."
        echo "module gpu-policy/tests/control-plane"
        echo
        echo "go 1.26.0"
        echo
        echo "replace ("
        local m
        for m in $mods; do
            echo "	$m => $m $staging"
        done
        echo ")"
    } > "$MOD_DIR/go.mod"
    rm -f "$MOD_DIR/go.sum"
    (
        cd "$MOD_DIR"
        export GOWORK=off GOFLAGS=-mod=mod
        # `tool` directives (Go 1.24+) make the main packages part of the
        # module, so `go mod tidy` keeps every requirement they need.
        go get -tool "${KUBE_PKGS[@]/%/@$KUBERNETES_VERSION}" "$ETCD_PKG@$ETCD_VERSION"
        go mod tidy
    )
    # Minimal version selection may raise a pin when the other side requires
    # more; that would build something else than what the script says.
    local got
    got=$(run_go list -m -f '{{.Path}} {{.Version}}' k8s.io/kubernetes go.etcd.io/etcd/server/v3)
    if ! grep -qx "k8s.io/kubernetes $KUBERNETES_VERSION" <<< "$got" ||
        ! grep -qx "go.etcd.io/etcd/server/v3 $ETCD_VERSION" <<< "$got"; then
        die "the module graph selected other versions than the pins:"$'\n'"$got"
    fi
    note "wrote tests/control-plane/go.mod and go.sum for Kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION"
}

# ---------------------------------------------------------------------------
# build

# What the binaries were built from; a change to any of it rebuilds.
stamp_content() {
    echo "kubernetes=$KUBERNETES_VERSION etcd=$ETCD_VERSION"
    cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$MOD_DIR"/policy-status-controller/*.go |
        sha256sum | cut -d' ' -f1
}

is_built() {
    [[ -x $BIN_DIR/kube-apiserver && -x $BIN_DIR/kubectl && -x $BIN_DIR/etcd &&
        -x $BIN_DIR/policy-status-controller && -f $STAMP ]] &&
        [[ $(cat "$STAMP") == "$(stamp_content)" ]]
}

cmd_build() {
    local force=false
    case "${1:-}" in
        "") ;;
        --force) force=true ;;
        *) die "build: unknown argument '$1'" ;;
    esac
    [[ -f $MOD_DIR/go.mod && -f $MOD_DIR/go.sum ]] ||
        die "tests/control-plane/go.mod or go.sum is missing: run scripts/control-plane.sh gomod"
    # The committed go.mod must be the one for the pins above.
    if ! grep -Eq "^[[:space:]]*k8s\.io/kubernetes $KUBERNETES_VERSION([[:space:]]|$)" "$MOD_DIR/go.mod" ||
        ! grep -Eq "^[[:space:]]*go\.etcd\.io/etcd/server/v3 $ETCD_VERSION([[:space:]]|$)" "$MOD_DIR/go.mod"; then
        die "tests/control-plane/go.mod does not require k8s.io/kubernetes $KUBERNETES_VERSION and" \
            "go.etcd.io/etcd/server/v3 $ETCD_VERSION as pinned in scripts/control-plane.sh:" \
            "run scripts/control-plane.sh gomod"
    fi
    if ! $force && is_built; then
        note "Kubernetes $KUBERNETES_VERSION and etcd $ETCD_VERSION already built in $BIN_DIR"
        return 0
    fi
    need go "Go 1.26 or later; the module proxy must be reachable for a cold build"
    note "building Kubernetes $KUBERNETES_VERSION (kube-apiserver, kubectl) and etcd $ETCD_VERSION with $(go version | cut -d' ' -f3)"

    # The version the binaries report (kubectl version, /version) is set at
    # link time, as Kubernetes' own build does (hack/lib/version.sh); without
    # it they say v0.0.0-master. The build date is the release's date from
    # the module proxy, so that a rebuild gives the same binaries.
    local v=${KUBERNETES_VERSION#v} date info ldflags pkg start=$SECONDS
    # Fetch every module first: a proxy that cannot be reached fails here
    # with go's own message instead of in the middle of the compile.
    note "downloading Go modules (about 600 MB into $(go env GOMODCACHE) when cold)"
    run_go mod download ||
        die "could not download the Go modules (GOPROXY=$(go env GOPROXY));" \
            "a cold build needs the Go module proxy"
    note "modules ready after $((SECONDS - start)) s"
    info=$(run_go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
        sed -n 's/^[[:space:]]*"Info": "\(.*\)",$/\1/p') || true
    date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info" 2> /dev/null) || true
    ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION"
        ldflags+=" -X $pkg.gitMajor=${v%%.*} -X $pkg.gitMinor=$(cut -d. -f2 <<< "$v")"
        ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit="
        ldflags+=" -X $pkg.buildDate=${date:-1970-01-01T00:00:00Z}"
    done

    # Build into a fresh directory and move into place at the end, so an
    # interrupted build never leaves binaries that look complete.
    local tmp
    mkdir -p "$OUT_DIR"
    tmp=$(mktemp -d "$OUT_DIR/.build.XXXXXX")
    BUILD_TMP=$tmp
    trap 'rm -rf "$BUILD_TMP"' EXIT
    # One `go build` for all three so the shared dependencies compile once and
    # in parallel. -o DIR names a binary after its package; the etcd main
    # package is go.etcd.io/etcd/server/v3, which comes out as "server".
    run_go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${KUBE_PKGS[@]}" "$ETCD_PKG" "${OWN_PKGS[@]}" ||
        die "go build failed (see above)"
    mv "$tmp/server" "$tmp/etcd"
    mkdir -p "$BIN_DIR"
    mv -f "$tmp/kube-apiserver" "$tmp/kubectl" "$tmp/etcd" "$tmp/policy-status-controller" "$BIN_DIR/"
    stamp_content > "$STAMP"
    rm -rf "$tmp"
    trap - EXIT
    note "built in $((SECONDS - start)) s into $BIN_DIR"
}

# ---------------------------------------------------------------------------
# up / down

# pid_alive PIDFILE NAME: the pid in PIDFILE runs a process whose command is
# NAME (so a pid recycled by an unrelated process is not taken for ours).
pid_alive() {
    local pid
    [[ -f $1 ]] || return 1
    pid=$(cat "$1")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2> /dev/null &&
        [[ $(basename "$(tr '\0' '\n' < "/proc/$pid/cmdline" 2> /dev/null | head -n1)") == "$2" ]]
}

# stop PIDFILE NAME: SIGTERM, wait up to CONTROL_PLANE_STOP_TIMEOUT seconds
# (30) for a clean shutdown, then SIGKILL. The processes are not our
# children, so poll instead of `wait`.
stop() {
    local pid i timeout=${CONTROL_PLANE_STOP_TIMEOUT:-30}
    if pid_alive "$1" "$2"; then
        pid=$(cat "$1")
        kill -TERM "$pid" 2> /dev/null || true
        for ((i = 0; i < timeout * 10; i++)); do
            kill -0 "$pid" 2> /dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2> /dev/null; then
            note "$2 (pid $pid) did not stop on SIGTERM within $timeout s; killing it"
            kill -KILL "$pid" 2> /dev/null || true
        fi
        note "stopped $2 (pid $pid)"
    fi
    rm -f "$1"
}

# A port on 127.0.0.1 with nothing listening. Taken from below the kernel's
# ephemeral range (32768-60999 by default) so that outgoing connections do
# not grab it between this check and the bind.
PICKED_PORTS=()
free_port() {
    local p i
    for ((i = 0; i < 200; i++)); do
        p=$((20000 + RANDOM % 12000))
        [[ " ${PICKED_PORTS[*]} " == *" $p "* ]] && continue
        # A refused connection means no listener.
        if ! (exec 3<> "/dev/tcp/127.0.0.1/$p") 2> /dev/null; then
            PICKED_PORTS+=("$p")
            echo "$p"
            return 0
        fi
    done
    die "found no free port on 127.0.0.1"
}

# start NAME DIR ARGS...: runs $BIN_DIR/NAME ARGS in its own session (so it
# outlives this script and the terminal, and a Ctrl-C in the caller's shell
# does not reach it) with its output in DIR/NAME.log and its pid in
# DIR/NAME.pid. The pid is written by the process itself before it execs, so
# it is the daemon's own.
start() {
    local name=$1 dir=$2
    shift 2
    rm -f "$dir/$name.pid" # left by a process that died without `down`
    # shellcheck disable=SC2016 # expanded by the inner bash
    setsid bash -c 'echo $$ > "$0"; exec "$@"' "$dir/$name.pid" "$BIN_DIR/$name" "$@" \
        < /dev/null >> "$dir/$name.log" 2>&1 &
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -s $dir/$name.pid ]] && return 0
        sleep 0.1
    done
    die "$name did not start"
}

fail_up() {
    local dir=$1 name=$2
    shift 2
    echo "control-plane: error: $*" >&2
    echo "---- last lines of $dir/$name.log ----" >&2
    tail -n 40 "$dir/$name.log" >&2 || true
    echo "----" >&2
    stop "$dir/kube-apiserver.pid" kube-apiserver
    stop "$dir/etcd.pid" etcd
    exit 1
}

# OpenSSL configuration for every certificate: our own file, so the result
# does not depend on the system's openssl.cnf.
write_openssl_cnf() {
    cat > "$1" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[serving]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
EOF
}

# issue PKI NAME SUBJECT EXTENSIONS: NAME.key (ECDSA P-256) and NAME.crt
# signed by the CA, unless they exist (an existing DIR keeps its PKI, so
# kubeconfigs and caBundles made for it stay valid across down/up).
issue() {
    local pki=$1 name=$2 subj=$3 ext=$4
    [[ -f $pki/$name.crt && -f $pki/$name.key ]] && return 0
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/$name.key" 2> /dev/null
    openssl req -new -config "$pki/openssl.cnf" -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr"
    openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
        -CAcreateserial -CAserial "$pki/ca.srl" -days 3650 \
        -extfile "$pki/openssl.cnf" -extensions "$ext" -out "$pki/$name.crt" 2> /dev/null
    rm -f "$pki/$name.csr"
}

make_pki() {
    local pki=$1
    mkdir -p "$pki"
    chmod 700 "$pki"
    write_openssl_cnf "$pki/openssl.cnf"
    if [[ ! -f $pki/ca.crt || ! -f $pki/ca.key ]]; then
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/ca.key" 2> /dev/null
        openssl req -x509 -new -config "$pki/openssl.cnf" -extensions ca -key "$pki/ca.key" \
            -subj "/CN=gpu-policy-control-plane-ca" -days 3650 -out "$pki/ca.crt"
    fi
    issue "$pki" apiserver "/CN=kube-apiserver" serving
    # Group system:masters is bound to cluster-admin by RBAC's bootstrap policy.
    issue "$pki" admin "/O=system:masters/CN=control-plane-admin" client
    issue "$pki" webhook-client "/CN=kube-apiserver-webhook-client" client
    # Service-account tokens (TokenRequest, projected tokens) are signed with
    # this RSA key: RS256 is what every token verifier accepts.
    if [[ ! -f $pki/sa.key || ! -f $pki/sa.pub ]]; then
        openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2> /dev/null
        openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
    fi
}

write_configs() {
    local dir=$1 port=$2 pki=$1/pki
    cat > "$dir/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: control-plane
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: control-plane
  context:
    cluster: control-plane
    user: admin
current-context: control-plane
EOF

    # The apiserver looks a webhook's credentials up by the webhook's host
    # (name.namespace.svc for a service, host:port for a URL); "*" matches
    # any, so every webhook sees this client certificate and a webhook
    # requiring mTLS can be tested.
    cat > "$dir/webhook-kubeconfig.yaml" <<EOF
apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: $pki/webhook-client.crt
    client-key: $pki/webhook-client.key
EOF

    cat > "$dir/admission-config.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $dir/webhook-kubeconfig.yaml
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $dir/webhook-kubeconfig.yaml
EOF

    # Full bodies for what the webhook admits (pods and DRA objects, so the
    # patches applied show in the log), metadata for everything else.
    cat > "$dir/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods", "pods/ephemeralcontainers"]
  - group: resource.k8s.io
    resources: ["resourceclaims", "resourceclaimtemplates"]
- level: Metadata
EOF
}

cmd_up() {
    [[ $# -eq 1 ]] || die "usage: scripts/control-plane.sh up DIR"
    need openssl "to make the cluster's certificates"
    need setsid
    mkdir -p "$1"
    local dir
    dir=$(cd "$1" && pwd)
    if pid_alive "$dir/etcd.pid" etcd || pid_alive "$dir/kube-apiserver.pid" kube-apiserver; then
        die "a control plane already runs in $dir: scripts/control-plane.sh down $dir"
    fi
    is_built || cmd_build

    local etcd_port etcd_peer_port api_port
    etcd_port=${CONTROL_PLANE_ETCD_PORT:-$(free_port)}
    PICKED_PORTS+=("$etcd_port")
    etcd_peer_port=${CONTROL_PLANE_ETCD_PEER_PORT:-$(free_port)}
    PICKED_PORTS+=("$etcd_peer_port")
    api_port=${CONTROL_PLANE_APISERVER_PORT:-$(free_port)}
    echo "$etcd_port" > "$dir/etcd.port"
    echo "$api_port" > "$dir/apiserver.port"

    make_pki "$dir/pki"
    write_configs "$dir" "$api_port"

    # Plain HTTP on loopback: only this machine's processes can reach it, and
    # it keeps the setup to one CA. The data is throwaway, so skipping fsync
    # is fine and makes writes much faster on slow CI disks.
    start etcd "$dir" \
        --name control-plane \
        --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" \
        --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
        --initial-cluster "control-plane=http://127.0.0.1:$etcd_peer_port" \
        --unsafe-no-fsync
    local i
    for ((i = 0; i < 200; i++)); do
        pid_alive "$dir/etcd.pid" etcd || fail_up "$dir" etcd "etcd exited"
        (exec 3<> "/dev/tcp/127.0.0.1/$etcd_port") 2> /dev/null && break
        sleep 0.1
    done
    ((i < 200)) || fail_up "$dir" etcd "etcd did not listen on port $etcd_port within 20 s"

    local pki=$dir/pki extra=()
    # Deliberately word-split: a list of flags.
    # shellcheck disable=SC2206
    [[ -n ${CONTROL_PLANE_APISERVER_ARGS:-} ]] && extra=($CONTROL_PLANE_APISERVER_ARGS)
    # Flags as a kubeadm cluster has them where it matters to a webhook
    # (Node,RBAC authorization, privileged pods allowed, service-account
    # tokens), minus what needs a node (kubelet client, front proxy).
    # MutatingAdmissionPolicy and resource.k8s.io/v1 are on by default in the
    # pinned release, so no --feature-gates or --runtime-config is needed.
    # The endpoint reconcilers refuse a loopback advertise address (it would
    # be published as the `kubernetes` Service's endpoint); with "none" the
    # Service is still created, without endpoints, and nothing routes to it
    # here anyway.
    start kube-apiserver "$dir" \
        --bind-address=127.0.0.1 \
        --advertise-address=127.0.0.1 \
        --endpoint-reconciler-type=none \
        --secure-port="$api_port" \
        --cert-dir="$pki" \
        --tls-cert-file="$pki/apiserver.crt" \
        --tls-private-key-file="$pki/apiserver.key" \
        --client-ca-file="$pki/ca.crt" \
        --etcd-servers="http://127.0.0.1:$etcd_port" \
        --service-cluster-ip-range="$SERVICE_CIDR" \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$pki/sa.pub" \
        --service-account-signing-key-file="$pki/sa.key" \
        --authorization-mode=Node,RBAC \
        --allow-privileged=true \
        --admission-control-config-file="$dir/admission-config.yaml" \
        --audit-policy-file="$dir/audit-policy.yaml" \
        --audit-log-path="$dir/audit.log" \
        --profiling=false \
        "${extra[@]}"

    local timeout=${CONTROL_PLANE_READY_TIMEOUT:-60} deadline out
    deadline=$((SECONDS + timeout))
    while :; do
        pid_alive "$dir/kube-apiserver.pid" kube-apiserver ||
            fail_up "$dir" kube-apiserver "kube-apiserver exited"
        out=$("$BIN_DIR/kubectl" --kubeconfig "$dir/admin.kubeconfig" --request-timeout=5s \
            get --raw /readyz 2> /dev/null) && [[ $out == ok ]] && break
        ((SECONDS < deadline)) ||
            fail_up "$dir" kube-apiserver "kube-apiserver was not ready within $timeout s"
        sleep 0.5
    done

    cat > "$dir/env" <<EOF
export KUBECONFIG=$(printf %q "$dir/admin.kubeconfig")
export CONTROL_PLANE_DIR=$(printf %q "$dir")
export CONTROL_PLANE_BIN_DIR=$(printf %q "$BIN_DIR")
export CONTROL_PLANE_APISERVER_URL=https://127.0.0.1:$api_port
export CONTROL_PLANE_ETCD_URL=http://127.0.0.1:$etcd_port
export CONTROL_PLANE_CA_FILE=$(printf %q "$pki/ca.crt")
export CONTROL_PLANE_AUDIT_LOG=$(printf %q "$dir/audit.log")
EOF
    note "kube-apiserver ready at https://127.0.0.1:$api_port (etcd at http://127.0.0.1:$etcd_port)"
    note "kubectl: $BIN_DIR/kubectl; stop with: scripts/control-plane.sh down $dir"
    echo "export KUBECONFIG=$dir/admin.kubeconfig"
}

cmd_down() {
    [[ $# -eq 1 ]] || die "usage: scripts/control-plane.sh down DIR"
    [[ -d $1 ]] || return 0
    local dir
    dir=$(cd "$1" && pwd)
    # The apiserver first, so it does not spend its shutdown retrying etcd.
    stop "$dir/kube-apiserver.pid" kube-apiserver
    stop "$dir/etcd.pid" etcd
}

# ---------------------------------------------------------------------------

case "${1:-}" in
    build) shift && cmd_build "$@" ;;
    up) shift && cmd_up "$@" ;;
    down) shift && cmd_down "$@" ;;
    gomod)
        [[ $# -eq 1 ]] || die "gomod takes no arguments"
        cmd_gomod
        ;;
    -h | --help | help) usage ;;
    "") usage >&2 && exit 2 ;;
    *) die "unknown command '$1' (see scripts/control-plane.sh --help)" ;;
esac
