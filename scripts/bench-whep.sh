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
# With SOURCE=mp3 the mount is an MP3 one instead (issue 25): /bursts.mp3, live, its source the
# bench again (`--latency-bursts`): an MP3 file made here by ffmpeg (20 s, 64 kbit/s 44.1 kHz
# stereo, 200 ms of 1 kHz tone at the start of every second, silence between) pushed in real
# time and looped. Its WHEP viewers get it transcoded to Opus once for the mount and time each
# burst's onset from the Opus packet sizes: mouth-to-ear latency from the source writing the
# burst's MP3 frame to the onset packet's arrival, an upper bound (it includes LAME's ~25 ms
# encoder delay). The ICY phase loads the same live mount; its latency is not measured (that
# would take decoding the MP3). The transcoder thread's CPU (`transcode` in /proc/<pid>/task) is
# printed for the WHEP phase.
# Each phase's server CPU is printed twice: over the whole phase (ramp, hold, teardown) and over
# the hold only (every client connected). FRAME_MS sets `[webrtc] transcode-frame-ms` (the Opus
# packet time of transcoded mounts; unset: the server's default); SERVER_LOG sets the server's
# log filter (e.g. `info,throng_whep_stats=debug` for the WHEP engines' stats each second).
# MIX=1 runs both at once instead (N ICY listeners and N WHEP viewers) and reads each path's CPU
# from its own server threads over the hold (see `mixed` below).
# Usage: [PORT=18800] [SOURCE=opus|mp3] [FRAME_MS=20..80] [MIX=1] [BIN=path/to/throng] scripts/bench-whep.sh [N] [HOLD_SECS]
# [OUT] (the server takes TCP PORT and UDP PORT+1; BIN skips the build).
set -euo pipefail
N="${1:-2000}"
HOLD="${2:-30}"
PORT="${PORT:-18800}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
OUT="${3:-$root/bench-results/whep-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
SOURCE="${SOURCE:-opus}"
if [ -n "${BIN:-}" ]; then
  bin="$BIN"
else
  (cd "$root" && cargo build --release -q -p throng)
  bin="${CARGO_TARGET_DIR:-$root/target}/release/throng"
fi
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
# The viewers all come from loopback addresses: the cap on sessions not connected yet per
# address (32 by default, issue 28) would refuse most of a 200-a-second ramp with 503.
[limits]
pending-per-address = 100000
# A ledger of this run's own, not the one a newer or older build left in the state directory.
[ledger]
database = "sqlite://$tmp/ledger.db"
[webrtc]
udp-listen = "127.0.0.1:$((PORT + 1))"
${FRAME_MS:+transcode-frame-ms = $FRAME_MS}
TOML
if [ "$SOURCE" = mp3 ]; then
  # No Xing/Info frame: every frame of the file is audio, so its media time is the tone's.
  ffmpeg -nostdin -v error -y -f lavfi \
    -i "aevalsrc='if(lt(mod(t,1),0.2),0.5*sin(2*PI*1000*t),0)':s=44100:c=stereo" \
    -t 20 -c:a libmp3lame -b:a 64k -write_xing 0 "$tmp/bursts.mp3"
fi
THRONG_LOG="${SERVER_LOG:-info}" "$bin" serve -c "$tmp/throng.toml" 2>"$OUT/server.log" &
pid=$!
sleep 2
echo "throng $(git -C "$root" rev-parse --short HEAD), $N clients, hold ${HOLD}s" | tee "$OUT/summary.txt"
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# CPU ticks of the server's transcoder threads (alive now).
transcode_ticks() {
  local t=0 f
  for f in /proc/"$pid"/task/*; do
    if [ "$(cat "$f/comm" 2>/dev/null)" = transcode ]; then
      t=$((t + $(awk '{print $14 + $15}' "$f/stat")))
    fi
  done
  echo "$t"
}
now() { date +%s.%N; }
if [ "$SOURCE" = mp3 ]; then
  probe=(--latency-source "http://127.0.0.1:$PORT/bursts.mp3" --latency-bursts "$tmp/bursts.mp3"
    --source-password bench-source)
else
  probe=(--latency-source "http://127.0.0.1:$PORT/probe.opus" --source-password bench-source)
fi
phase() { # name, then the bench arguments
  local name="$1"; shift
  local c0 t0 c1 t1 rc=0
  # The lock is taken before the server's CPU is read, so waiting for it is not measured.
  exec 9>/tmp/throng-bench.lock
  flock 9
  c0="$(ticks)"; t0="$(now)"
  "$bin" bench run "$@" "${probe[@]}" -n "$N" --ramp 200 --hold "${HOLD}s" --no-progress \
    --out "$OUT/$name" >"$OUT/$name.txt" 2>&1 &
  local bench=$!
  # Hold only: every client connected (the ramp is N/200 s) until a few seconds before the
  # end, so setup and teardown are left out (the whole-phase figure below keeps them).
  ( sleep $((N / 200 + 3)); h0="$(ticks)"; hs0="$(now)"; sleep $((HOLD > 8 ? HOLD - 6 : 2))
    h1="$(ticks)"; hs1="$(now)"
    awk -v c="$((h1 - h0))" -v t0="$hs0" -v t1="$hs1" -v n="$N" -v name="$name" \
      'BEGIN { printf "%s: hold only, %.1f s, server CPU %.1f us per client-second\n",
               name, t1 - t0, c * 10000 / (n * (t1 - t0)) }' >>"$OUT/summary.txt" ) &
  local holdreader=$!
  # The transcoder stops with the last viewer: read its threads while the viewers hold.
  local x=0
  if [ "$SOURCE" = mp3 ] && [ "$name" = whep ]; then
    sleep $((N / 200 + 2 + HOLD / 2))
    local x0 s0; x0="$(transcode_ticks)"; s0="$(now)"
    sleep $((HOLD / 4 + 1))
    x="$(awk -v a="$x0" -v b="$(transcode_ticks)" -v s0="$s0" -v s1="$(now)" \
      'BEGIN { printf "%.1f", (b - a) * 10 / (s1 - s0) }')"
  fi
  wait "$bench" || rc=$?
  c1="$(ticks)"; t1="$(now)"
  wait "$holdreader" || true
  flock -u 9
  # Clock ticks are 1/100 s: µs of server CPU per client-second over the whole phase.
  awk -v c="$((c1 - c0))" -v t0="$t0" -v t1="$t1" -v n="$N" -v name="$name" -v rc="$rc" \
    'BEGIN { printf "%s: %d clients, %.1f s, server CPU %.1f us per client-second, bench exit %d\n",
             name, n, t1 - t0, c * 10000 / (n * (t1 - t0)), rc }' | tee -a "$OUT/summary.txt"
  if [ "$x" != 0 ]; then
    echo "$name: transcoder CPU $x ms per second (1 mount)" | tee -a "$OUT/summary.txt"
  fi
  grep -h "latency\|WHEP viewers\|setup\|bench CPU\|packets per" "$OUT/$name.txt" | tee -a "$OUT/summary.txt" || true
}
# CPU ticks of the server's threads whose name matches the shell pattern $1.
thread_ticks() {
  local t=0 f c
  for f in /proc/"$pid"/task/*; do
    c="$(cat "$f/comm" 2>/dev/null)" || continue
    # shellcheck disable=SC2254
    case "$c" in $1) t=$((t + $(awk '{print $14 + $15}' "$f/stat" 2>/dev/null || echo 0))) ;; esac
  done
  echo "$t"
}
# MIX=1: the ICY listeners and the WHEP viewers at the same time, each path's server CPU read
# from its own threads over the hold: the fan-out threads (`fanout-*`) write to the ICY
# listeners, the WHEP engines (`whep-*`) and the transcoder (`transcode`) serve the viewers.
# Both see the same box at the same moment, so its drift between two phases (on a shared VM
# the same phase moves by 10-20 % from one minute to the next) stays out of the ratio.
mixed() { # ICY URL, bitrate, WHEP URL
  exec 9>/tmp/throng-bench.lock
  flock 9
  "$bin" bench run --whep "$3" --pid "$pid" "${probe[@]}" -n "$N" --ramp 200 --hold "${HOLD}s" \
    --no-progress --out "$OUT/whep" >"$OUT/whep.txt" 2>&1 &
  local whep=$!
  sleep 3 # the bench's source makes the mount live
  "$bin" bench run "$1" --bitrate-kbps "$2" -n "$N" --ramp 200 --hold "$((HOLD - 3))s" \
    --no-progress --out "$OUT/icy" >"$OUT/icy.txt" 2>&1 &
  local icy=$!
  sleep $((N / 200 + 6))
  local i0 w0 x0 t0 i1 w1 x1 t1
  i0="$(thread_ticks 'fanout-*')"; w0="$(thread_ticks 'whep-*')"; x0="$(thread_ticks transcode)"; t0="$(now)"
  sleep $((HOLD > 14 ? HOLD - 12 : 2))
  i1="$(thread_ticks 'fanout-*')"; w1="$(thread_ticks 'whep-*')"; x1="$(thread_ticks transcode)"; t1="$(now)"
  wait "$whep" || true
  wait "$icy" || true
  flock -u 9
  awk -v i="$((i1 - i0))" -v w="$((w1 - w0))" -v x="$((x1 - x0))" -v t0="$t0" -v t1="$t1" -v n="$N" \
    'BEGIN { d = t1 - t0; ic = i * 10000 / (n * d); wc = (w + x) * 10000 / (n * d)
             printf "mixed, hold only, %.1f s: ICY %.1f us per listener-second (fanout-*), WHEP %.1f us per viewer-second (whep-* and transcode %.1f ms/s), WHEP / ICY %.1f\n",
               d, ic, wc, x * 10 / d, wc / ic }' | tee -a "$OUT/summary.txt"
  grep -h "latency\|WHEP viewers\|setup\|packets per\|verdict\|starved" "$OUT/whep.txt" "$OUT/icy.txt" | tee -a "$OUT/summary.txt" || true
}
if [ -n "${MIX:-}" ] && [ "$SOURCE" = mp3 ]; then
  mixed "http://127.0.0.1:$PORT/bursts.mp3" 64 "http://127.0.0.1:$PORT/whep/bursts.mp3"
elif [ -n "${MIX:-}" ]; then
  mixed "http://127.0.0.1:$PORT/probe.opus" 75 "http://127.0.0.1:$PORT/whep/probe.opus"
elif [ "$SOURCE" = mp3 ]; then
  phase icy "http://127.0.0.1:$PORT/bursts.mp3" --bitrate-kbps 64
  phase whep --whep "http://127.0.0.1:$PORT/whep/bursts.mp3" --pid "$pid"
else
  # The probe stream is 50 pages of 188 bytes a second: 75.2 kbit/s.
  phase icy "http://127.0.0.1:$PORT/probe.opus" --bitrate-kbps 75
  phase whep --whep "http://127.0.0.1:$PORT/whep/probe.opus" --pid "$pid"
fi
cat "$OUT/whep/report-whep.json"
