#!/usr/bin/env bash
# WHEP (WebRTC) viewers against ICY listeners on the same Ogg/Opus mount of one `throng serve`
# (release build), one phase after the other in the same run: N ICY listeners, then N WHEP
# viewers (`throng bench run --whep`). Prints the server's CPU per listener-second and per
# viewer-second (from /proc/<pid>/stat over each phase) and the bench verdicts; the WHEP
# report (setup time p50/p99, packets per viewer-second, degraded viewers) is in
# $OUT/whep/report-whep.json. Usage: scripts/bench-whep.sh [N] [HOLD_SECS] [OUT]
set -euo pipefail
N="${1:-2000}"
HOLD="${2:-30}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
OUT="${3:-$root/bench-results/whep-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
(cd "$root" && cargo build --release -q -p throng)
bin="$root/target/release/throng"
tmp="$(mktemp -d)"
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
cp "$root/assets/test-tone.opus" "$tmp/tone.opus"
cat >"$tmp/throng.toml" <<TOML
listen = ["127.0.0.1:18800"]
workers = 2
[authentication]
source-password = "bench-source"
admin-password = "bench-admin"
[logging]
access-log = ""
[webrtc]
udp-listen = "127.0.0.1:18801"
[[mount]]
name = "/tone.opus"
file = "$tmp/tone.opus"
TOML
"$bin" serve -c "$tmp/throng.toml" 2>"$OUT/server.log" &
pid=$!
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
now() { date +%s.%N; }
phase() { # name, then the bench arguments
  local name="$1"; shift
  local c0 t0 c1 t1 rc=0
  c0="$(ticks)"; t0="$(now)"
  "$bin" bench run "$@" -n "$N" --ramp 200 --hold "${HOLD}s" --no-progress --out "$OUT/$name" \
    >"$OUT/$name.txt" 2>&1 || rc=$?
  c1="$(ticks)"; t1="$(now)"
  # Clock ticks are 1/100 s: µs of server CPU per client-second over the whole phase.
  awk -v c="$((c1 - c0))" -v t0="$t0" -v t1="$t1" -v n="$N" -v name="$name" -v rc="$rc" \
    'BEGIN { printf "%s: %d clients, %.1f s, server CPU %.1f us per client-second, bench exit %d\n",
             name, n, t1 - t0, c * 10000 / (n * (t1 - t0)), rc }' | tee -a "$OUT/summary.txt"
}
phase icy "http://127.0.0.1:18800/tone.opus"
phase whep --whep "http://127.0.0.1:18800/whep/tone.opus"
cat "$OUT/whep/report-whep.json"
