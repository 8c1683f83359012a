#!/usr/bin/env bash
# Runs every test of the project: installs the third-party peers the interoperability tests
# use (ffmpeg, libshout-tools, icecast2, curl; via apt-get, skipped when already installed),
# checks the module layers (no upward import, no import cycle), then checks formatting, runs
# clippy with warnings as errors, runs the whole test suite, and fuzzes every parser briefly.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -- --nocapture  # extra arguments are passed to `cargo test --workspace`
#
# Needs no terminal: it runs the same way under CI (CI=true) as from a shell.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Colours only on a terminal; plain text in CI logs and redirected output.
if [ -t 1 ]; then color=auto; else color=never; fi
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-$color}"
export DEBIAN_FRONTEND=noninteractive
# The browser tests (crates/server/tests/it/web_page.rs) fail instead of skipping when Chromium
# or icecast-metadata-player is missing: install-deps.sh below installs both.
export THRONG_REQUIRE_BROWSER=1

step() {
  printf '\n==> %s\n' "$*"
}

step "install test dependencies (scripts/install-deps.sh)"
scripts/install-deps.sh </dev/null

step "module layers (scripts/check-layers.py: crates/*/layers.txt)"
scripts/check-layers.py --self-test
scripts/check-layers.py crates/server crates/bench

step "cargo fmt --all -- --check"
cargo fmt --all -- --check --color "$color"

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test --workspace $*"
cargo test --workspace "$@"

# A short fuzz pass over every parser (crates/fuzz, corpus in crates/fuzz/corpus), with a fixed
# seed so a run is reproducible (THRONG_FUZZ_SEED picks another); a crash fails the run and is
# saved under crates/fuzz/crashes/<target>/ with the seed that reproduces it.
fuzz_seed="${THRONG_FUZZ_SEED:-20261122}"
# The debug build: it reuses what `cargo test` just built (a release build of the server costs
# minutes) and it checks integer overflow, which the release profile does not.
step "short fuzz pass (throng-fuzz all --inputs 10000 --seed $fuzz_seed)"
cargo run -p throng-fuzz -- all --inputs 10000 --seed "$fuzz_seed"

step "all tests passed"
