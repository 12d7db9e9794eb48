#!/usr/bin/env bash
# A real Kubernetes control plane (etcd + kube-apiserver, no controller
# manager, no scheduler, no kubelet) built from source with Go and run on
# loopback, for tests and for trying the webhook by hand, at any Kubernetes
# version gpu-policy supports. No container runtime is needed. See
# `scripts/control-plane.sh --help`.
set -euo pipefail

# ---------------------------------------------------------------------------
# Supported versions: the one place to change them. After a change run
# `scripts/control-plane.sh gomod --all` to regenerate
# tests/control-plane/versions/*.mod and .sum, and commit them.
#
# One row per Kubernetes minor, oldest first (the last row is the default):
#   Kubernetes   the pinned patch release.
#   etcd         the etcd server built: the go.etcd.io/etcd/client/v3
#                (and server/v3) the release's go.mod requires: what its
#                apiserver is built with and its storage unit tests embed. The
#                etcd it deploys (build/dependencies.yaml, kubeadm) is the
#                same from 1.36 and a later patch of the same minor before
#                (1.32 and 1.33: 3.5.24, 1.34: 3.6.5, 1.35: 3.6.6); building
#                that one would raise the apiserver's own etcd client in the
#                shared Go module graph, which `gomod` refuses.
#   gates        feature gates `up` turns on (- for none) ...
#   runtime      ... and API versions (--runtime-config) it serves on top of
#                the release's defaults: the beta APIs gpu-policy uses that
#                are off by default there. DRA is beta in 1.32 and 1.33
#                (gate DynamicResourceAllocation off by default; without it
#                the API server drops pod.spec.resourceClaims, and
#                resource.k8s.io/v1beta1 - and v1beta2 from 1.33 - are beta
#                versions disabled by default) and GA, resource.k8s.io/v1 on
#                by default, from 1.34. MutatingAdmissionPolicy is beta in
#                1.34 and 1.35 (gate off by default, the admission plugin
#                only acts with it, admissionregistration.k8s.io/v1beta1
#                disabled by default) and GA, v1 on by default, from 1.36;
#                its 1.32 and 1.33 alpha is left off.
SUPPORTED=(
    # Kubernetes etcd   gates                          runtime
    "v1.32.13    v3.5.16 DynamicResourceAllocation=true resource.k8s.io/v1beta1=true"
    "v1.33.13    v3.5.21 DynamicResourceAllocation=true resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
    "v1.34.4     v3.6.4  MutatingAdmissionPolicy=true   admissionregistration.k8s.io/v1beta1=true"
    "v1.35.4     v3.6.5  MutatingAdmissionPolicy=true   admissionregistration.k8s.io/v1beta1=true"
    "v1.36.3     v3.6.8  -                              -"
    "v1.37.2     v3.7.0  -                              -"
)
# ---------------------------------------------------------------------------

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The one Go module directory (policy-status-controller's source is shared);
# each version has its own module file, used with `go -modfile`.
MOD_DIR=$ROOT/tests/control-plane
OUT_ROOT=${CONTROL_PLANE_OUT_DIR:-$ROOT/target/control-plane}

# Set by select_version from KUBERNETES_VERSION and the table above.
KUBERNETES_VERSION=${KUBERNETES_VERSION:-}
ETCD_VERSION=
OPT_IN_GATES=
OPT_IN_RUNTIME=
MODFILE=   # relative to $MOD_DIR; go derives the .sum from it
OUT_DIR=
BIN_DIR=
STAMP=

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
    local row v e gates runtime versions=""
    for row in "${SUPPORTED[@]}"; do
        read -r v e gates runtime <<< "$row"
        versions+=$(printf '\n  %-9s etcd %-7s opt-in: %s' "$v" "$e" \
            "$([[ $gates == - ]] && echo "none (the release's defaults serve it all)" ||
                echo "--feature-gates=$gates --runtime-config=$runtime")")
    done
    cat <<EOF2
Usage: scripts/control-plane.sh COMMAND [ARGS]

Builds and runs a Kubernetes control plane (etcd + kube-apiserver) from
source with Go, on 127.0.0.1, with no container runtime, at one of the
supported Kubernetes versions (KUBERNETES_VERSION; default the newest):
$versions

Commands:
  build [--force]  Build kube-apiserver, kubectl, etcd (and the policy
                   status controller of tests/control-plane/) of the
                   selected version into OUT/VERSION/bin/ (OUT is
                   target/control-plane unless CONTROL_PLANE_OUT_DIR says
                   otherwise) from tests/control-plane/ with its module file
                   tests/control-plane/versions/VERSION.mod (and .sum).
                   Skipped when that folder already holds binaries built
                   from the same module files and sources (--force
                   rebuilds). The default version also keeps OUT/bin as a
                   link to its folder. A cold build downloads ~600 MB of
                   modules, fills ~3 GB of Go build cache and takes about
                   10 minutes on 2 cores, per version.
  bin-dir          Print the selected version's bin folder (built or not).
  version          Print the selected version (v1.32.13 for 1.32).
  versions         Print the supported versions, oldest first, one a line.
  up DIR           Start etcd and kube-apiserver of the selected version
                   with all their state in DIR (created if missing; an
                   existing DIR is resumed with its certificates and etcd
                   data, by the version that made it only).
                   Builds first when needed. Turns on the version's opt-in
                   APIs above unless CONTROL_PLANE_OPT_IN=none. Returns once
                   /readyz answers ok, leaving both running, and prints the
                   KUBECONFIG to use.
  down DIR         Stop what \`up DIR\` started (SIGTERM, then wait). Does
                   nothing when nothing runs. DIR itself is kept.
  gomod [--all]    Regenerate the selected version's module files
                   (tests/control-plane/versions/VERSION.mod and .sum), or
                   every supported version's with --all, from the table at
                   the top of this script (needs the Go module proxy).
  -h, --help       This text.

What \`up DIR\` leaves in DIR:
  admin.kubeconfig         cluster-admin (client cert in group system:masters)
  env                      shell exports: KUBECONFIG, CONTROL_PLANE_* (URLs,
                           ports, paths, the bin folder); \`source DIR/env\`
  version                  the Kubernetes version; \`up DIR\` refuses another
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
  KUBERNETES_VERSION           the version to build and run: v1.32.13,
                               1.32.13 or the minor 1.32 (its pinned patch);
                               default the newest supported
  CONTROL_PLANE_OUT_DIR        build output root (default target/control-plane)
  CONTROL_PLANE_OPT_IN         "all" (default): \`up\` turns on the version's
                               opt-in APIs listed above; "none": the
                               release's defaults only
  CONTROL_PLANE_APISERVER_PORT, CONTROL_PLANE_ETCD_PORT,
  CONTROL_PLANE_ETCD_PEER_PORT fixed ports instead of free random ones
  CONTROL_PLANE_APISERVER_ARGS extra kube-apiserver flags (word-split),
                               e.g. "--feature-gates=Foo=true --v=4". They
                               come after the opt-in flags: kube-apiserver
                               adds up repeated --feature-gates and
                               --runtime-config, a key given again taking
                               the later value, so Foo=true is added to the
                               opt-in gates and
                               --feature-gates=DynamicResourceAllocation=false
                               turns that one off again (write gates without
                               the "kube:" prefix: kube-apiserver refuses a
                               mix)
  CONTROL_PLANE_READY_TIMEOUT  seconds to wait for /readyz (default 60)
  CONTROL_PLANE_STOP_TIMEOUT   seconds \`down\` waits after SIGTERM before
                               SIGKILL (default 30)
EOF2
}

die() {
    echo "control-plane: error: $*" >&2
    exit 1
}

note() { echo "control-plane: $*" >&2; }

need() {
    command -v "$1" > /dev/null 2>&1 || die "$1 is required but not found in PATH${2:+ ($2)}"
}

# The supported versions, one line: "v1.32.13 (1.32), v1.33.13 (1.33), ...".
supported_list() {
    local row v list=""
    for row in "${SUPPORTED[@]}"; do
        v=${row%% *}
        list+="${list:+, }$v ($(minor_of "$v"))"
    done
    echo "$list"
}

# v1.32.13 -> 1.32
minor_of() {
    local v=${1#v}
    echo "${v%.*}"
}

# select_version WANTED: sets KUBERNETES_VERSION, ETCD_VERSION, the opt-in
# flags and the paths from the table's row for WANTED (v1.32.13, 1.32.13 or
# 1.32; empty: the newest).
select_version() {
    local want=${1#v} row v etcd gates runtime
    [[ -n $want ]] || want=${SUPPORTED[-1]%% *}
    want=${want#v}
    for row in "${SUPPORTED[@]}"; do
        read -r v etcd gates runtime <<< "$row"
        if [[ $want == "${v#v}" || $want == "$(minor_of "$v")" ]]; then
            KUBERNETES_VERSION=$v
            ETCD_VERSION=$etcd
            OPT_IN_GATES=${gates#-}
            OPT_IN_RUNTIME=${runtime#-}
            MODFILE=versions/$v.mod
            OUT_DIR=$OUT_ROOT/$v
            BIN_DIR=$OUT_DIR/bin
            STAMP=$BIN_DIR/.stamp
            return 0
        fi
    done
    die "unsupported KUBERNETES_VERSION '$1'; supported: $(supported_list)"
}

# Every go command runs in our module with settings that do not depend on the
# caller's environment: no go.work of a parent directory, the selected
# version's module file and its .sum used as committed (a missing checksum is
# an error, not a silent change), and static binaries as upstream releases
# them. The module file is given relative to $MOD_DIR: GOFLAGS is split on
# spaces, which a checkout's path may contain.
run_go() {
    (cd "$MOD_DIR" && GOWORK=off GOFLAGS="-mod=readonly -modfile=$MODFILE" CGO_ENABLED=0 go "$@")
}

# v1.37.2 -> v0.37.2: the tag of the staging modules (k8s.io/api, ...) that
# are released together with a Kubernetes version.
staging_version() {
    local v=${1#v}
    echo "v0.${v#*.}"
}

# ---------------------------------------------------------------------------
# gomod

# The go.mod of k8s.io/kubernetes at the selected version, from the module
# cache (downloaded outside any module, so nothing of ours is touched).
kubernetes_gomod() {
    local tmp gomod
    tmp=$(mktemp -d)
    gomod=$(cd "$tmp" && GOWORK=off GOFLAGS='' go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p') || true
    rmdir "$tmp"
    [[ -f $gomod ]] || die "could not download the go.mod of k8s.io/kubernetes@$KUBERNETES_VERSION"
    echo "$gomod"
}

cmd_gomod() {
    need go "Go 1.26 or later"
    local gomod staging
    gomod=$(kubernetes_gomod)
    staging=$(staging_version "$KUBERNETES_VERSION")
    # k8s.io/kubernetes requires its staging modules as v0.0.0 and replaces
    # them with ./staging/...; replaces only apply in the main module, so a
    # module depending on it has to point each one at its released tag. The
    # list comes from that version's own go.mod.
    local mods
    mods=$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$gomod" | sort -u)
    [[ -n $mods ]] || die "no staging modules found in $gomod"

    mkdir -p "$MOD_DIR/versions"
    {
        echo "// Generated by scripts/control-plane.sh gomod from its table of supported"
        echo "// versions; change the table there and regenerate instead of editing this file."
        echo "module gpu-policy/tests/control-plane"
        echo
        echo "go 1.26.0"
        # The GODEBUG defaults the release's own binaries are built with:
        # godebug lines only apply in the main module.
        if grep -q '^godebug' "$gomod"; then
            echo
            grep '^godebug' "$gomod"
        fi
        echo
        echo "replace ("
        local m
        for m in $mods; do
            echo "	$m => $m $staging"
        done
        echo ")"
    } > "$MOD_DIR/$MODFILE"
    rm -f "$MOD_DIR/${MODFILE%.mod}.sum"
    (
        cd "$MOD_DIR"
        export GOWORK=off GOFLAGS="-mod=mod -modfile=$MODFILE"
        # `tool` directives (Go 1.24+) make the main packages part of the
        # module, so `go mod tidy` keeps every requirement they need.
        go get -tool "${KUBE_PKGS[@]/%/@$KUBERNETES_VERSION}" "$ETCD_PKG@$ETCD_VERSION"
        go mod tidy
    ) || die "could not resolve the modules of Kubernetes $KUBERNETES_VERSION and etcd $ETCD_VERSION"
    # Minimal version selection may raise a version when another requirement
    # asks for more; then something else than the release would be built.
    # Every module the release's go.mod requires must be selected at the
    # version it requires (its v0.0.0 staging modules are the replaced tags).
    local required selected moved
    required=$(awk '
        $1 == "require" && $2 == "(" { block = 1; next }
        block && $1 == ")" { block = 0; next }
        block && NF >= 2 && $1 !~ /^\/\// { print $1, $2 }
        $1 == "require" && $2 != "(" { print $2, $3 }' "$gomod" | awk '$2 != "v0.0.0"' | sort -u)
    selected=$(run_go list -m -f '{{.Path}} {{.Version}}' all | sort -u)
    required+=$'\n'"k8s.io/kubernetes $KUBERNETES_VERSION"$'\n'"go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    moved=$(comm -23 <(sort -u <<< "$required") <(echo "$selected") |
        awk 'NR == FNR { selected[$1] = $2; next } { print "  " $1 ": " $2 " required, " selected[$1] " selected" }' \
            <(echo "$selected") -)
    [[ -z $moved ]] ||
        die "the module graph of $MODFILE moved away from what k8s.io/kubernetes $KUBERNETES_VERSION" \
            "and etcd $ETCD_VERSION require:"$'\n'"$moved"
    note "wrote tests/control-plane/$MODFILE and .sum for Kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION"
}

# ---------------------------------------------------------------------------
# build

# What the binaries were built from; a change to any of it rebuilds.
stamp_content() {
    echo "kubernetes=$KUBERNETES_VERSION etcd=$ETCD_VERSION"
    cat "$MOD_DIR/$MODFILE" "$MOD_DIR/${MODFILE%.mod}.sum" "$MOD_DIR"/policy-status-controller/*.go |
        sha256sum | cut -d' ' -f1
}

is_built() {
    [[ -x $BIN_DIR/kube-apiserver && -x $BIN_DIR/kubectl && -x $BIN_DIR/etcd &&
        -x $BIN_DIR/policy-status-controller && -f $STAMP ]] &&
        [[ $(cat "$STAMP") == "$(stamp_content)" ]]
}

# README.md and docs/local-cluster.md point at OUT/bin: it stays a link to
# the default (newest) version's folder.
link_default_bin() {
    [[ $KUBERNETES_VERSION == "${SUPPORTED[-1]%% *}" ]] || return 0
    local link=$OUT_ROOT/bin
    # A folder there is a build of before the per-version layout.
    [[ -d $link && ! -L $link ]] && rm -rf "$link"
    ln -sfn "$KUBERNETES_VERSION/bin" "$link"
}

cmd_build() {
    local force=false
    case "${1:-}" in
        "") ;;
        --force) force=true ;;
        *) die "build: unknown argument '$1'" ;;
    esac
    [[ -f $MOD_DIR/$MODFILE && -f $MOD_DIR/${MODFILE%.mod}.sum ]] ||
        die "tests/control-plane/$MODFILE or its .sum is missing: run scripts/control-plane.sh gomod"
    # The committed module file must be the one for the table's row.
    if ! grep -Eq "^[[:space:]]*k8s\.io/kubernetes $KUBERNETES_VERSION([[:space:]]|$)" "$MOD_DIR/$MODFILE" ||
        ! grep -Eq "^[[:space:]]*go\.etcd\.io/etcd/server/v3 $ETCD_VERSION([[:space:]]|$)" "$MOD_DIR/$MODFILE"; then
        die "tests/control-plane/$MODFILE does not require k8s.io/kubernetes $KUBERNETES_VERSION and" \
            "go.etcd.io/etcd/server/v3 $ETCD_VERSION as scripts/control-plane.sh lists them:" \
            "run KUBERNETES_VERSION=$KUBERNETES_VERSION scripts/control-plane.sh gomod"
    fi
    if ! $force && is_built; then
        note "Kubernetes $KUBERNETES_VERSION and etcd $ETCD_VERSION already built in $BIN_DIR"
        link_default_bin
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
    link_default_bin
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
    local opt_in=()
    [[ -n $OPT_IN_GATES ]] && opt_in+=("--feature-gates=$OPT_IN_GATES")
    [[ -n $OPT_IN_RUNTIME ]] && opt_in+=("--runtime-config=$OPT_IN_RUNTIME")
    case "${CONTROL_PLANE_OPT_IN:-all}" in
        all) ((${#opt_in[@]} == 0)) || note "opt-in for Kubernetes $KUBERNETES_VERSION: ${opt_in[*]}" ;;
        none) opt_in=() ;;
        *) die "CONTROL_PLANE_OPT_IN must be 'all' or 'none', not '$CONTROL_PLANE_OPT_IN'" ;;
    esac
    need openssl "to make the cluster's certificates"
    need setsid
    mkdir -p "$1"
    local dir
    dir=$(cd "$1" && pwd)
    if pid_alive "$dir/etcd.pid" etcd || pid_alive "$dir/kube-apiserver.pid" kube-apiserver; then
        die "a control plane already runs in $dir: scripts/control-plane.sh down $dir"
    fi
    # etcd's data and what the apiserver stored are not made to move between
    # versions here (no migration, and etcd refuses to be downgraded).
    if [[ -f $dir/version && $(cat "$dir/version") != "$KUBERNETES_VERSION" ]]; then
        die "$dir holds a control plane of Kubernetes $(cat "$dir/version"), not $KUBERNETES_VERSION:" \
            "resume it with KUBERNETES_VERSION=$(cat "$dir/version") or use another DIR"
    fi
    is_built || cmd_build
    echo "$KUBERNETES_VERSION" > "$dir/version"

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
    # Deliberately word-split: a list of flags. After the opt-in ones:
    # kube-apiserver merges repeated --feature-gates and --runtime-config,
    # the later value of a key winning, so the caller's add to ours or
    # override them.
    # shellcheck disable=SC2206
    [[ -n ${CONTROL_PLANE_APISERVER_ARGS:-} ]] && extra=($CONTROL_PLANE_APISERVER_ARGS)
    # Flags as a kubeadm cluster has them where it matters to a webhook
    # (Node,RBAC authorization, privileged pods allowed, service-account
    # tokens), minus what needs a node (kubelet client, front proxy); every
    # one exists in all the supported versions.
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
        "${opt_in[@]}" \
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

main() {
    local row
    case "${1:-}" in
        -h | --help | help) usage && exit 0 ;;
        "") usage >&2 && exit 2 ;;
        # Stopping needs no version: only the pid files in DIR.
        down) shift && cmd_down "$@" && exit 0 ;;
        versions)
            [[ $# -eq 1 ]] || die "versions takes no arguments"
            for row in "${SUPPORTED[@]}"; do echo "${row%% *}"; done
            exit 0
            ;;
        build | up | bin-dir | version | gomod) ;;
        *) die "unknown command '$1' (see scripts/control-plane.sh --help)" ;;
    esac
    select_version "$KUBERNETES_VERSION"
    case "$1" in
        build) shift && cmd_build "$@" ;;
        up) shift && cmd_up "$@" ;;
        bin-dir)
            [[ $# -eq 1 ]] || die "bin-dir takes no arguments"
            echo "$BIN_DIR"
            ;;
        version)
            [[ $# -eq 1 ]] || die "version takes no arguments"
            echo "$KUBERNETES_VERSION"
            ;;
        gomod)
            case "${2:-}" in
                "") cmd_gomod ;;
                --all)
                    [[ $# -eq 2 ]] || die "gomod takes no arguments after --all"
                    for row in "${SUPPORTED[@]}"; do
                        select_version "${row%% *}"
                        cmd_gomod
                    done
                    ;;
                *) die "gomod: unknown argument '$2'" ;;
            esac
            ;;
    esac
}

# On one line: bash reads a script as it runs it, so this keeps a script
# edited during a long build from being read on from a shifted offset.
main "$@"; exit
