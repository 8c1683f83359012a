#!/usr/bin/env bash
# Soak test: one `throng serve` under churn for DURATION seconds (default 1800, 30 minutes),
# sampling its resident memory (VmRSS from /proc/PID/status, and RssAnon: VmRSS less the
# pages of the binary and libraries, which grow as more code runs), open file descriptors
# (/proc/PID/fd), threads and CPU time every 10 s into OUT/soak.csv, then plotting memory and
# fds against time (OUT/soak.svg, and OUT/soak.png when rsvg-convert (librsvg2-bin) is there).
#
# The churn, all on loopback:
#   - 300 listeners (`throng bench run --profile churn`) spread over four mounts, 5 of them
#     leaving and rejoining every second, and any that fails reconnecting after 2 s;
#   - /live.mp3: an ffmpeg source that disconnects every ~3 minutes and comes back 5 s later
#     (its listeners fall back to the demo mount and come back: fallback-override);
#   - /live2.mp3: an ffmpeg source that disconnects every 40-70 s (no fallback: its listeners
#     are closed and reconnect);
#   - /relay.mp3: a [[relay]] of /live.mp3 pulled from the same server over HTTP;
#   - /demo.mp3: the built-in looped file mount.
# Everything it starts is stopped when it ends (or on Ctrl-C). It exits non-zero if the server
# died during the run. It needs ffmpeg and curl (scripts/install-deps.sh), a release build
# (`cargo build --release -p throng`, or THRONG=/path/to/throng) and builds the plot helper
# (crates/bench/src/bin/soak-plot.rs) itself.
#
# Usage: scripts/soak.sh [DURATION_SECONDS] [OUT_DIR]
#   SOAK_LISTENERS (300), SOAK_CHURN (5 listeners/s leaving and rejoining), SOAK_INTERVAL (10 s)
#   and THRONG (the binary) change the defaults.
#   e.g. scripts/soak.sh 1800 target/soak && cp target/soak/soak.png docs/soak.png
set -euo pipefail

DURATION=${1:-1800}
OUT=${2:-target/soak}
ROOT=${SOAK_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
THRONG=${THRONG:-$ROOT/target/release/throng}
LISTENERS=${SOAK_LISTENERS:-300}
INTERVAL=${SOAK_INTERVAL:-10}
CHURN=${SOAK_CHURN:-5}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$THRONG" ] || { echo "soak: no $THRONG (cargo build --release -p throng)" >&2; exit 2; }
command -v ffmpeg >/dev/null || { echo "soak: ffmpeg missing (scripts/install-deps.sh)" >&2; exit 2; }

PIDS=()
cleanup() {
  # Each PID, then its children (a source loop's `timeout`, which passes the signal to ffmpeg).
  for p in "${PIDS[@]}"; do
    kids=$(pgrep -P "$p" || true)
    kill "$p" 2>/dev/null || true
    for k in $kids; do kill "$k" 2>/dev/null || true; done
  done
  PIDS=()
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# A free loopback port (the relay needs the port in the configuration).
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PW=soak-source-pw
cat >"$OUT/throng.toml" <<EOF
demo = true
[authentication]
source-password = "$PW"
admin-password = "soak-admin-pw"
[limits]
source-timeout = 5
[logging]
access-log = "$OUT/access.log"
level = "info"
[[relay]]
server = "127.0.0.1"
port = $PORT
mount = "/live.mp3"
local-mount = "/relay.mp3"
[[mount]]
name = "/live.mp3"
fallback-mount = "/demo.mp3"
fallback-override = true
[[mount]]
name = "/relay.mp3"
fallback-mount = "/demo.mp3"
fallback-override = true
EOF
: >"$OUT/access.log"

THRONG_STATE_DIR="$OUT/state" "$THRONG" serve --config "$OUT/throng.toml" \
  --listen "127.0.0.1:$PORT" 2>"$OUT/server.log" &
SERVER=$!
PIDS+=("$SERVER")
for _ in $(seq 100); do
  grep -q "serving on" "$OUT/server.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "serving on" "$OUT/server.log" || { echo "soak: the server did not start" >&2; cat "$OUT/server.log" >&2; exit 1; }
BASE="http://127.0.0.1:$PORT"

# A source that pushes the demo file to MOUNT, disconnecting after ON seconds (plus up to
# JITTER), coming back after OFF seconds, until the soak ends.
source_loop() {
  local mount=$1 on=$2 jitter=$3 off=$4
  while true; do
    timeout -s INT $((on + RANDOM % (jitter + 1))) ffmpeg -nostdin -v error -re -stream_loop -1 \
      -i "$ROOT/assets/demo.mp3" -c copy -content_type audio/mpeg -f mp3 \
      "icecast://source:$PW@127.0.0.1:$PORT$mount" >/dev/null 2>&1 || true
    sleep "$off"
  done
}
source_loop /live.mp3 170 20 5 &
PIDS+=($!)
source_loop /live2.mp3 40 30 2 &
PIDS+=($!)
sleep 3

"$THRONG" bench run -n "$LISTENERS" --ramp 50 --profile churn --churn-rate "$CHURN" \
  --hold "${DURATION}s" --reconnect-after 2s --no-progress \
  --name soak --out "$OUT/bench" \
  "$BASE/live.mp3" "$BASE/relay.mp3" "$BASE/demo.mp3" "$BASE/live2.mp3" \
  >"$OUT/bench.log" 2>&1 &
BENCH=$!
PIDS+=("$BENCH")

# Sampling, every INTERVAL seconds, until DURATION is over.
TICKS=$(getconf CLK_TCK)
echo "seconds,rss_kib,fds,threads,cpu_seconds,listeners,rss_anon_kib" >"$OUT/soak.csv"
START=$(date +%s)
while true; do
  now=$(date +%s)
  t=$((now - START))
  if ! kill -0 "$SERVER" 2>/dev/null; then
    echo "soak: the server died after ${t}s" >&2
    tail -20 "$OUT/server.log" >&2
    exit 1
  fi
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER/status")
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$SERVER/status")
  anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$SERVER/status")
  fds=$(find "/proc/$SERVER/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  cpu=$(awk -v hz="$TICKS" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$SERVER/stat")
  listeners=$(curl -s --max-time 5 "$BASE/status-json.xsl" |
    grep -o '"listeners":[0-9]*' | awk -F: '{s += $2} END {print s + 0}')
  echo "$t,$rss,$fds,$threads,$cpu,$listeners,$anon" >>"$OUT/soak.csv"
  [ "$t" -ge "$DURATION" ] && break
  sleep "$INTERVAL"
done

# The bench ends by itself just after (its hold is DURATION): let it write its report.
for _ in $(seq 60); do kill -0 "$BENCH" 2>/dev/null || break; sleep 1; done

# The plot, then the summary: first sample after the ramp (60 s) against the last one.
cleanup
trap - EXIT INT TERM
(cd "$ROOT" && cargo run -q --release -p throng-bench --bin soak-plot -- "$OUT/soak.csv" "$OUT/soak.svg")
if command -v rsvg-convert >/dev/null; then
  rsvg-convert -b white "$OUT/soak.svg" -o "$OUT/soak.png"
else
  echo "soak: no rsvg-convert (apt-get install librsvg2-bin): the plot is $OUT/soak.svg only" >&2
fi
awk -F, -v d="$DURATION" '
  NR == 1 { next }
  $1 >= 60 && !s { s = 1; r0 = $2; f0 = $3; t0 = $1; c0 = $5 }
  { r1 = $2; f1 = $3; t1 = $1; c1 = $5; if ($2 > rmax) rmax = $2; if ($3 > fmax) fmax = $3 }
  END {
    printf "soak: %d s, RSS %d KiB at %d s -> %d KiB at %d s (max %d KiB); fds %d -> %d (max %d); server CPU %.1f %%\n",
      d, r0, t0, r1, t1, rmax, f0, f1, fmax, 100 * (c1 - c0) / (t1 - t0)
  }' "$OUT/soak.csv"
grep -c "" "$OUT/access.log" | sed 's/^/soak: access-log lines: /'
grep -E "^(Listeners|Starved|Failed)|failed|starved" "$OUT/bench.log" | head -5 || true
