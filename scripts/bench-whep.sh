#!/usr/bin/env bash
# WHEP (WebRTC) viewers against ICY listeners on the same live Ogg/Opus mount of one
# `throng serve` (release build), one phase after the other in the same run. The bench itself
# is the mount's source (`--latency-source`: one 20 ms Opus packet per Ogg page, each stamped
# with its send time), so each phase also reports mouth-to-ear latency:
#   ICY phase:  N ICY listeners of /probe.opus (+ 4 ICY probe listeners reading the stamps);
#   WHEP phase: N WHEP viewers of /whep/probe.opus spread over worker processes (one per CPU),
#               reading the stamps from the RTP payloads (+ 4 ICY probes).
# Prints the server's CPU per listener-second and per viewer-second (from /proc/<pid>/stat over
# each phase) and the bench verdicts; the WHEP report (setup p50/p99, degraded viewers, latency
# p50/p99/max, bench CPU and memory per viewer) is $OUT/whep/report-whep.json. Every load phase
# holds /tmp/throng-bench.lock (flock, taken before the CPU is read) so engineers sharing the box do not overlap.
# Usage: [PORT=18800] scripts/bench-whep.sh [N] [HOLD_SECS] [OUT] (the server takes TCP PORT and
# UDP PORT+1).
set -euo pipefail
N="${1:-2000}"
HOLD="${2:-30}"
PORT="${PORT:-18800}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
OUT="${3:-$root/bench-results/whep-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
(cd "$root" && cargo build --release -q -p throng)
bin="$root/target/release/throng"
tmp="$(mktemp -d)"
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
cat >"$tmp/throng.toml" <<TOML
listen = ["127.0.0.1:$PORT"]
workers = 2
[authentication]
source-password = "bench-source"
admin-password = "bench-admin"
[logging]
access-log = ""
[webrtc]
udp-listen = "127.0.0.1:$((PORT + 1))"
TOML
"$bin" serve -c "$tmp/throng.toml" 2>"$OUT/server.log" &
pid=$!
sleep 2
echo "throng $(git -C "$root" rev-parse --short HEAD), $N clients, hold ${HOLD}s" | tee "$OUT/summary.txt"
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
now() { date +%s.%N; }
probe=(--latency-source "http://127.0.0.1:$PORT/probe.opus" --source-password bench-source)
phase() { # name, then the bench arguments
  local name="$1"; shift
  local c0 t0 c1 t1 rc=0
  # The lock is taken before the server's CPU is read, so waiting for it is not measured.
  exec 9>/tmp/throng-bench.lock
  flock 9
  c0="$(ticks)"; t0="$(now)"
  "$bin" bench run "$@" "${probe[@]}" -n "$N" --ramp 200 --hold "${HOLD}s" --no-progress \
    --out "$OUT/$name" >"$OUT/$name.txt" 2>&1 || rc=$?
  c1="$(ticks)"; t1="$(now)"
  flock -u 9
  # Clock ticks are 1/100 s: µs of server CPU per client-second over the whole phase.
  awk -v c="$((c1 - c0))" -v t0="$t0" -v t1="$t1" -v n="$N" -v name="$name" -v rc="$rc" \
    'BEGIN { printf "%s: %d clients, %.1f s, server CPU %.1f us per client-second, bench exit %d\n",
             name, n, t1 - t0, c * 10000 / (n * (t1 - t0)), rc }' | tee -a "$OUT/summary.txt"
  grep -h "latency\|WHEP viewers\|setup\|bench CPU\|packets per" "$OUT/$name.txt" | tee -a "$OUT/summary.txt" || true
}
# The probe stream is 50 pages of 188 bytes a second: 75.2 kbit/s.
phase icy "http://127.0.0.1:$PORT/probe.opus" --bitrate-kbps 75
phase whep --whep "http://127.0.0.1:$PORT/whep/probe.opus" --pid "$pid"
cat "$OUT/whep/report-whep.json"
