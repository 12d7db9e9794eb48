#!/usr/bin/env bash
# Lints, renders and validates the Helm chart charts/gpu-policy offline and
# compares it with `gpu-policy manifests` (tests/chart/test_chart.py).
#
# Needs python3 >= 3.10 (with venv) and PyPI on the first run: the packages go
# into a virtualenv in target/chart-venv, reused while the pins below do not
# change. The binary is $GPU_POLICY_BIN when set (tests/chart.rs passes the
# one cargo built: no nested cargo), else target/debug/gpu-policy, built here
# (a no-op after `cargo test`).
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=target/chart-venv
requirements="helm-python-sdk==0.2.2 kubernetes-validate==1.37.0 pyyaml==6.0.4"

if [ ! -x "$venv/bin/python" ]; then
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || { echo "tests/chart/run.sh: python3 >= 3.10 is needed" >&2; exit 1; }
    python3 -m venv "$venv"
fi
if [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$requirements" ]; then
    # shellcheck disable=SC2086 # one word per requirement
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $requirements
    echo "$requirements" > "$venv/.requirements"
fi

if [ -z "${GPU_POLICY_BIN:-}" ]; then
    cargo build --quiet --bin gpu-policy
fi
exec "$venv/bin/python" tests/chart/test_chart.py "$@"
