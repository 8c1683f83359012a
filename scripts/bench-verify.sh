#!/usr/bin/env bash
# Every listener verified, at what cost (issue 37, docs/BENCHMARKS.md): one `throng serve` on its
# embedded defaults (the 64 kbit/s demo mount) and N ICY listeners ramped at RAMP/s, held HOLD s,
# every listener's frames walked as they arrive; the bench's CPU per listener-second against
# the server's, both read over the same hold of the same run (the bench's engines from their own
# rusage, the server's process from /proc). ROUNDS runs one after the other. With FLOOR=1 each
# round also runs the receive floor against the same server (crates/bench/examples/
# read_floor.rs: as many listeners received and dropped, nothing verified, the same 20 ms
# polls), the lowest ratio any receiving load generator reaches on this box.
#
# usage: scripts/bench-verify.sh [N=18000] [HOLD=40] [ROUNDS=3] [RAMP=5000] [PORT=8790] [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-18000}
HOLD=${2:-40}
ROUNDS=${3:-3}
RAMP=${4:-5000}
PORT=${5:-8790}
OUT=${6:-$root/bench-results/verify}
THRONG=${THRONG:-$root/target/release/throng}
[ -x "$THRONG" ] || { echo "build first: cargo build --release -p throng" >&2; exit 2; }
FLOOR_BIN=${FLOOR_BIN:-$root/target/release/examples/read_floor}
if [ "${FLOOR:-0}" = 1 ] && [ ! -x "$FLOOR_BIN" ]; then
  echo "build first: cargo build --release -p throng-bench --example read_floor" >&2; exit 2
fi
mkdir -p "$OUT"
state=$(mktemp -d /tmp/throng-verify.XXXXXX)
"$THRONG" serve --listen "127.0.0.1:$PORT" --state-dir "$state" >"$OUT/server.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null; rm -rf "$state"' EXIT
for _ in $(seq 1 50); do grep -q "serving on" "$OUT/server.log" && break; sleep 0.2; done
sleep 2
for r in $(seq 1 "$ROUNDS"); do
  "$THRONG" bench run "http://127.0.0.1:$PORT/demo.mp3" -n "$N" --ramp "$RAMP" \
    --hold "${HOLD}s" --pid "$srv" --no-progress --out "$OUT/round-$r" \
    >"$OUT/round-$r.txt" 2>&1 || true
  python3 - "$OUT/round-$r/report.json" "$r" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["summary"]
b, v = s.get("bench_cpu_us_per_listener_second"), s.get("server_cpu_us_per_listener_second")
print(f"round {sys.argv[2]}: {'PASS' if s['pass'] else 'FAIL'}, {s['started']:,} listeners, "
      f"{s['frames_checked']:,} frames verified, media rate {s.get('media_rate') or 0:.3f}; "
      f"bench {b:.2f} µs, server {v:.2f} µs per listener-second: bench/server {b / v:.3f}")
PY
  sleep 3
  if [ "${FLOOR:-0}" = 1 ]; then
    echo "round $r: $("$FLOOR_BIN" "127.0.0.1:$PORT" /demo.mp3 "$N" "$HOLD" "$srv")"
    sleep 3
  fi
done
