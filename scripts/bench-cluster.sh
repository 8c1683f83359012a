#!/usr/bin/env bash
# Reproduces the cluster figures of docs/BENCHMARKS.md (issue 15): 100,000 listeners over an
# origin and 6 edges against one process serving 18,000 (bench/scenarios/cluster-100k.toml),
# then the origin as a redirect director (bench/scenarios/cluster-redirect.toml). Beside each
# bench report it writes, from a sampler running alongside, the origin's /api/v1/cluster view
# (per-edge listeners and redirects) and each server process's CPU seconds
# (cluster-samples.txt: time, pid, config, utime+stime in clock ticks, RSS in pages).
#
# usage: scripts/bench-cluster.sh [100k|redirect|all]     (default all)
# Needs `cargo build --release` first. Saturates a 2-core box for about 6 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
BIN=target/release/throng
[ -x "$BIN" ] || { echo "bench-cluster: build first: cargo build --release" >&2; exit 1; }

# Samples every 5 s while `$1` (the bench) runs: the origin's cluster view on port $2 and the
# CPU ticks and RSS of every `throng serve` process, into directory $3.
sample() {
  local bench=$1 port=$2 out=$3
  mkdir -p "$out"
  : >"$out/cluster-samples.txt"
  while kill -0 "$bench" 2>/dev/null; do
    local t
    t=$(date +%s)
    curl -s -m 2 -u admin:hackme-bench "http://127.0.0.1:$port/api/v1/cluster" \
      >"$out/cluster-view.json.tmp" 2>/dev/null && [ -s "$out/cluster-view.json.tmp" ] &&
      mv "$out/cluster-view.json.tmp" "$out/cluster-view-last.json" || true
    for pid in $(pgrep -f "$BIN serve" || true); do
      local cfg stat
      # Only this bench's servers (run-cluster.sh's temporary configs, or the single process on
      # :8310): other engineers' throng processes may run on a shared box.
      cfg=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -o 'throng-cluster\.[A-Za-z0-9]*/[a-z0-9]*\.toml\|--listen 127\.0\.0\.1:83[0-9][0-9]' | head -1 || true)
      [ -n "$cfg" ] || continue
      cfg=${cfg##*/}
      stat=$(cut -d' ' -f14,15,24 "/proc/$pid/stat" 2>/dev/null || true)
      [ -n "$stat" ] && echo "$t $pid ${cfg// /_} $stat" >>"$out/cluster-samples.txt"
    done
    sleep 5
  done
}

run() {
  local scenario=$1 port=$2 out=$3
  "$BIN" bench compare "$scenario" --no-progress &
  local bench=$!
  sample "$bench" "$port" "$out" &
  local sampler=$!
  local rc=0
  wait "$bench" || rc=$?
  wait "$sampler" || true
  return "$rc"
}

rc=0
if [ "$WHAT" = all ] || [ "$WHAT" = 100k ]; then
  run bench/scenarios/cluster-100k.toml 8300 bench-results/cluster-100k || rc=$?
fi
if [ "$WHAT" = all ] || [ "$WHAT" = redirect ]; then
  run bench/scenarios/cluster-redirect.toml 8320 bench-results/cluster-redirect || rc=$?
fi
exit "$rc"
