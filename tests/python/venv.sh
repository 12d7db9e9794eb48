#!/usr/bin/env bash
# Runs the Python of the tests' virtualenv with the given arguments (with
# none, only makes sure the virtualenv is ready).
#
# The virtualenv is target/test-venv, made on first use and updated when
# tests/python/requirements.txt changes; that needs python3 >= 3.10 (with
# venv) and PyPI. cargo runs test binaries in parallel and more than one
# may get here first: a lock on target/test-venv.lock lets one of them make
# the virtualenv while the others wait.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=target/test-venv
requirements=tests/python/requirements.txt

mkdir -p target
exec 9>target/test-venv.lock
flock 9
if [ ! -x "$venv/bin/python" ]; then
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || { echo "tests/python/venv.sh: python3 >= 3.10 is needed" >&2; exit 1; }
    # What an interrupted first run may have left.
    rm -rf "$venv"
    python3 -m venv "$venv"
fi
if ! cmp -s "$requirements" "$venv/.requirements"; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --requirement "$requirements"
    cp "$requirements" "$venv/.requirements"
fi
flock --unlock 9
exec 9>&-

if [ $# -gt 0 ]; then
    exec "$venv/bin/python" "$@"
fi
