#!/usr/bin/env bash
# Lints, renders and validates the Helm chart charts/gpu-policy offline and
# compares it with `gpu-policy manifests` (tests/chart/test_chart.py).
#
# The Python packages are those of tests/python/requirements.txt, in the
# virtualenv tests/python/venv.sh makes on first use (python3 >= 3.10 with
# venv, and PyPI). The binary is $GPU_POLICY_BIN when set (tests/it/chart.rs
# passes the one cargo built: no nested cargo), else target/debug/gpu-policy,
# built here (a no-op after `cargo test`).
#
# Arguments select tests by name; `--regenerate` instead writes the chart's
# bundled admission policies for its default config, per Kubernetes release
# (charts/gpu-policy/files/policies/); `--render VALUES_JSON` prints the
# objects rendered for those values as one JSON list.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ -z "${GPU_POLICY_BIN:-}" ]; then
    cargo build --quiet --bin gpu-policy
fi
exec bash tests/python/venv.sh tests/chart/test_chart.py "$@"
