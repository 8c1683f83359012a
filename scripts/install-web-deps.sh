#!/usr/bin/env bash
# Installs the npm packages of the browser tests (crates/server/tests/it/web_page.rs) into
# crates/server/tests/web/node_modules: icecast-metadata-player, the CORS web player whose
# browser bundle the test serves from a page on another origin. Idempotent: nothing is fetched
# when the pinned version is already there. Called by scripts/install-deps.sh.
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/crates/server/tests/web"
want=$(sed -n 's/.*"icecast-metadata-player": *"\([^"]*\)".*/\1/p' "$dir/package.json")
have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$dir/node_modules/icecast-metadata-player/package.json" 2>/dev/null | head -1 || true)
if [ "$have" != "$want" ]; then
  command -v npm >/dev/null || { echo "install-web-deps: npm missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
  echo "install-web-deps: installing icecast-metadata-player $want" >&2
  npm install --prefix "$dir" --no-audit --no-fund --no-package-lock --loglevel=error >&2
fi
ls "$dir"/node_modules/icecast-metadata-player/build/icecast-metadata-player-*.main.min.js >/dev/null
