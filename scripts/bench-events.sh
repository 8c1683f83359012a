#!/usr/bin/env bash
# Now-playing events (/api/v1/events) under load, measured by `throng bench run --events`:
#  1. N1 subscribers (default 19,000) on one `throng serve`: every subscriber gets its
#     snapshot, then 5 title changes are made through the admin metadata command; the bench
#     reports delivery latency p50/p99/max, missed receipts and the server's RSS growth per
#     subscriber. The peer, in the same run: N1 ICY listeners of the demo mount on a fresh
#     server of the same binary and configuration (RSS growth per listener).
#  2. N4 subscribers (default 50,000) spread evenly over an origin and 3 relay edges pulling
#     the demo mount from it; the titles are changed on the origin and reach the edges' own
#     subscribers through the relay's ICY metadata. RSS per subscriber is read on the origin.
# Loopback only (source addresses 127.0.0.2-127.0.0.40), about 5 minutes.
#
#   scripts/bench-events.sh [N1] [N4]     # needs target/release/throng (built if missing)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n1="${1:-19000}"
n4="${2:-50000}"
bin="${BIN:-$PWD/target/release/throng}"
[ -x "$bin" ] || cargo build --release -p throng
work="$(mktemp -d)"
out="${OUT:-bench-results/events}"
mkdir -p "$out"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# serve NAME PORT EXTRA-TOML: starts a server, sets $pid.
serve() {
  cat >"$work/$1.toml" <<TOML
listen = ["127.0.0.1:$2"]
workers = 2
demo = ${DEMO:-true}
$3
[authentication]
source-password = "bench-source"
admin-password = "bench-admin"
[logging]
access-log = ""
error-log = "$work/$1.err"
TOML
  "$bin" serve --config "$work/$1.toml" --state-dir "$work/state" >"$work/$1.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$2/api/v1/status" >/dev/null 2>&1 && break
    sleep 0.1
  done
}

# The origin of an edge tier sends titles to its relays within a fraction of a second: a
# small ICY interval and write interval (its listeners are the relays).
fast_titles=$'[limits]\nmetaint = 1024\nwrite-interval-ms = 100'

echo "== 1. $n1 event subscribers on one process"
serve one 18501 ""
sleep 2
"$bin" bench run --events "http://127.0.0.1:18501/api/v1/events?mount=/demo.mp3" -n "$n1" \
  --ramp 2000 --admin-password bench-admin --pid "$pid" --no-progress \
  --name "events-$n1" --out "$out/one" | tee "$out/one.txt"
kill "$pid"; wait "$pid" 2>/dev/null || true

echo "== 1b. peer: $n1 ICY listeners on a fresh process"
serve peer 18502 ""
sleep 2
"$bin" bench run "http://127.0.0.1:18502/demo.mp3" -n "$n1" --ramp 2000 --hold 10s --icy \
  --bitrate-kbps 64 --pid "$pid" --no-progress --name "listeners-$n1" --out "$out/peer" \
  | tee "$out/peer.txt" || true
kill "$pid"; wait "$pid" 2>/dev/null || true

echo "== 2. $n4 event subscribers over an origin and 3 relay edges"
serve origin 18510 "$fast_titles"
origin=$pid
urls=("http://127.0.0.1:18510/api/v1/events?mount=/demo.mp3")
for e in 1 2 3; do
  DEMO=false serve "edge$e" $((18510 + e)) \
    $'[[relay]]\nserver = "127.0.0.1"\nport = 18510\nmount = "/demo.mp3"\nlocal-mount = "/demo.mp3"'
  urls+=("http://127.0.0.1:$((18510 + e))/api/v1/events?mount=/demo.mp3")
done
sleep 3
"$bin" bench run --events "${urls[@]}" -n "$n4" --ramp 3000 \
  --trigger-url "http://127.0.0.1:18510/demo.mp3" --admin-password bench-admin \
  --pid "$origin" --no-progress --name "events-$n4-4proc" --out "$out/tier" | tee "$out/tier.txt"
