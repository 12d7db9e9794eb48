#!/usr/bin/env bash
# Supply-chain checks: licenses, banned/duplicate crates, crate sources.
# The policy and the reason for every entry are in deny.toml.
#
# Installs cargo-deny (pinned: deny.toml is written for this version's format)
# if it is missing, compiling it from crates.io. After that a run takes about
# a second.
#
# The `advisories` check is not run: it needs the RustSec database from
# GitHub, which our machines cannot reach (see deny.toml).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DENY_VERSION=0.20.2

if ! cargo deny --version >/dev/null 2>&1; then
    echo "cargo-deny not found: installing cargo-deny ${CARGO_DENY_VERSION} from crates.io" >&2
    # Build in cargo install's own temporary directory, never in the project's
    # target dir (a CARGO_TARGET_DIR from the environment would lock it).
    # cargo-deny's own release profile asks for fat LTO in one codegen unit:
    # 7-9 minutes on 2 cores, against 2.3 minutes without (measured; a check
    # of this graph takes under a second either way).
    env -u CARGO_TARGET_DIR CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
        cargo install --locked "cargo-deny@${CARGO_DENY_VERSION}"
fi

installed=$(cargo deny --version | awk '{print $2}')
if [[ "$installed" != "$CARGO_DENY_VERSION" ]]; then
    echo "warning: cargo-deny ${installed} is installed, deny.toml is written for ${CARGO_DENY_VERSION}" >&2
    echo "         (cargo install --locked --force cargo-deny@${CARGO_DENY_VERSION} to match)" >&2
fi

# --locked: check Cargo.lock as committed, never re-resolve it.
# The three checks are named: a bare `cargo deny check` would add advisories.
exec cargo deny --locked check --show-stats bans licenses sources
