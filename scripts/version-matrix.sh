#!/usr/bin/env bash
# Runs the apiserver suite (cargo test --test apiserver) against the real
# control plane of each Kubernetes version given, and writes what it measured
# into the table of docs/compatibility.md. See
# `scripts/version-matrix.sh --help`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONTROL_PLANE=$ROOT/scripts/control-plane.sh
DOC=$ROOT/docs/compatibility.md
LOG_DIR=$ROOT/target/version-matrix
BEGIN='<!-- version-matrix:begin -->'
END='<!-- version-matrix:end -->'
HEADER='| Kubernetes | apiserver suite | failed tests | measured |'
RULE='| --- | --- | --- | --- |'

usage() {
    cat <<EOF
Usage: scripts/version-matrix.sh [VERSION...]

For each Kubernetes VERSION (v1.32.13, 1.32.13 or 1.32; default: every
version scripts/control-plane.sh supports, oldest first), one at a time:
builds its control plane (scripts/control-plane.sh build; nothing when
built), runs

  KUBERNETES_VERSION=VERSION GPU_POLICY_REQUIRE_CONTROL_PLANE=1 \\
      cargo test --test apiserver

with the output of both in target/version-matrix/VERSION.log, and writes
its row into the table between the lines
  $BEGIN
  $END
of docs/compatibility.md (the file is created with only those two lines if
it does not exist): Kubernetes version, tests passed and failed, the names
of the failed ones, the date (UTC). Rows of versions not run keep what an
earlier run measured.

Exits non-zero when any version failed: its build, the suite, or a suite
that did not report (see its log).
EOF
}

die() {
    echo "version-matrix: error: $*" >&2
    exit 1
}

note() { echo "version-matrix: $*" >&2; }

# table_rows FILE: the rows of the measured table in FILE (between the
# markers, without the header and its rule).
table_rows() {
    awk -v begin="$BEGIN" -v end="$END" -v header="$HEADER" -v rule="$RULE" '
        $0 == begin { inside = 1; next }
        $0 == end { inside = 0; next }
        inside && /^\|/ && $0 != header && $0 != rule { print }' "$1"
}

# row VERSION LOG BUILT STATUS: the table row of one run, from the libtest
# summary lines ("test result: ok. 36 passed; 0 failed; ...") and the names
# of the failed tests ("test NAME ... FAILED") in LOG; STATUS is cargo
# test's exit status. Fails (status 1) when the version failed.
row() {
    local version=$1 log=$2 built=$3 status=$4 passed failed names today
    today=$(date -u +%Y-%m-%d)
    if [[ $built != yes ]]; then
        echo "| ${version#v} | control plane did not build | — | $today |"
        return 1
    fi
    if ! grep -q '^test result: ' "$log"; then
        echo "| ${version#v} | did not run (see target/version-matrix/$version.log) | — | $today |"
        return 1
    fi
    passed=$(sed -n 's/^test result: .* \([0-9][0-9]*\) passed;.*/\1/p' "$log" | awk '{ n += $1 } END { print n + 0 }')
    failed=$(sed -n 's/^test result: .* \([0-9][0-9]*\) failed;.*/\1/p' "$log" | awk '{ n += $1 } END { print n + 0 }')
    # shellcheck disable=SC2016 # the backquotes are Markdown's
    names=$(sed -n 's/^test \(.*\) \.\.\. FAILED$/`\1`/p' "$log" | sort -u | paste -sd, - | sed 's/,/, /g')
    local suite="$passed passed, $failed failed"
    [[ $status == 0 ]] || ((failed > 0)) || suite+=" (cargo test exited $status)"
    echo "| ${version#v} | $suite | ${names:-—} | $today |"
    [[ $status == 0 && $failed == 0 ]]
}

# write_table NEW_ROWS: replaces the block between the markers of $DOC with
# the header and the rows of NEW_ROWS and of the old block, a version's new
# row replacing its old one, sorted by version.
write_table() {
    local new=$1 tmp rows
    rows=$(
        {
            printf '%s\n' "$new"
            table_rows "$DOC"
        } | awk -F'|' 'NF > 1 { v = $2; gsub(/ /, "", v); if (!(v in seen)) { seen[v] = 1; print } }' |
            sort -t'|' -k2,2V
    )
    tmp=$(mktemp "$DOC.XXXXXX")
    awk -v begin="$BEGIN" -v end="$END" -v table="$HEADER"$'\n'"$RULE"$'\n'"$rows" '
        $0 == begin { print; print ""; print table; print ""; inside = 1; next }
        $0 == end { inside = 0 }
        !inside { print }' "$DOC" > "$tmp"
    mv "$tmp" "$DOC"
}

main() {
    case "${1:-}" in
        -h | --help) usage && return 0 ;;
    esac
    command -v cargo > /dev/null 2>&1 || die "cargo is required but not found in PATH"

    local versions=() arg v
    if (($# == 0)); then
        mapfile -t versions < <(bash "$CONTROL_PLANE" versions)
    else
        for arg in "$@"; do
            v=$(KUBERNETES_VERSION=$arg bash "$CONTROL_PLANE" version) || exit 1
            versions+=("$v")
        done
    fi

    # Checked first, so that no run is lost to a document without its place.
    mkdir -p "$(dirname "$DOC")"
    [[ -f $DOC ]] || printf '%s\n%s\n' "$BEGIN" "$END" > "$DOC"
    [[ $(grep -cxF "$BEGIN" "$DOC") == 1 && $(grep -cxF "$END" "$DOC") == 1 ]] ||
        die "${DOC#"$ROOT"/} needs the lines '$BEGIN' and '$END', once each, where the table goes"

    mkdir -p "$LOG_DIR"
    local rows=() failed=() log built status line start
    for v in "${versions[@]}"; do
        log=$LOG_DIR/$v.log
        start=$SECONDS
        note "Kubernetes $v: building its control plane, then the apiserver suite (log: ${log#"$ROOT"/})"
        built=yes status=0
        KUBERNETES_VERSION=$v bash "$CONTROL_PLANE" build > "$log" 2>&1 || built=no
        if [[ $built == yes ]]; then
            (cd "$ROOT" && KUBERNETES_VERSION=$v GPU_POLICY_REQUIRE_CONTROL_PLANE=1 \
                cargo test --test apiserver) >> "$log" 2>&1 || status=$?
        fi
        if line=$(row "$v" "$log" "$built" "$status"); then :; else failed+=("$v"); fi
        rows+=("$line")
        note "Kubernetes $v: $(cut -d'|' -f3 <<< "$line" | sed 's/^ *//; s/ *$//') ($((SECONDS - start)) s)"
    done

    write_table "$(printf '%s\n' "${rows[@]}")"
    note "wrote the table of ${DOC#"$ROOT"/}"
    if ((${#failed[@]} > 0)); then
        die "failed: ${failed[*]} (logs in ${LOG_DIR#"$ROOT"/}/)"
    fi
}

main "$@"
