#!/usr/bin/env bash
# Regenerates the man pages (deploy/man/*.1) and shell completions
# (deploy/completions/{throng.bash,_throng,throng.fish}) from the clap definitions in
# crates/throng/src/cli.rs, through the hidden `throng manpage` and `throng completions`
# subcommands. Run it after changing a flag or a help text, and commit the result: the test
# `deploy::generated_files_are_up_to_date` (crates/throng/tests/it/deploy.rs) fails while the
# committed files differ from what the binary generates.
#
# usage: deploy/generate.sh [PATH_TO_THRONG_BINARY]   (default: builds target/debug/throng)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
bin="${1:-}"
if [ -z "$bin" ]; then
  (cd "$root" && cargo build -q -p throng)
  bin="$root/target/debug/throng"
fi

rm -rf "$here/man" "$here/completions"
mkdir -p "$here/man" "$here/completions"
"$bin" manpage --out "$here/man"
"$bin" completions bash >"$here/completions/throng.bash"
"$bin" completions zsh >"$here/completions/_throng"
"$bin" completions fish >"$here/completions/throng.fish"
echo "generate: wrote $(ls "$here/man" | wc -l) man pages and 3 completion scripts under $here"
