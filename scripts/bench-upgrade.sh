#!/usr/bin/env bash
# A binary upgrade (SIGUSR2) under load, measured by the verifying bench: N listeners of the
# demo mount (64 kbit/s MP3, ICY metadata on, every block checked) on one `throng serve`; 20 s
# into the hold the server upgrades itself in place. The bench reports starved and failed
# listeners. The same run with a restart (SIGTERM, then a new process on the same port), which
# is how any other Icecast-compatible server takes a new binary, is the peer. Loopback only;
# stops by itself (about 2 minutes).
#
#   scripts/bench-upgrade.sh [N]          # default N = 5000; needs target/release/throng
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n="${1:-5000}"
bin="$PWD/target/release/throng"
[ -x "$bin" ] || cargo build --release -p throng
port=18399
work="$(mktemp -d)"
trap 'pkill -f "serve --listen 127.0.0.1:$port" || true; rm -rf "$work"' EXIT
ramp=$(( n / 10 > 1000 ? n / 10 : 1000 ))
ramp_s=$(( (n + ramp - 1) / ramp ))

run() { # $1 = upgrade | restart
  local kind="$1"
  "$bin" serve --listen "127.0.0.1:$port" --state-dir "$work/state" >"$work/$kind.serve.log" 2>&1 &
  local pid=$!
  for _ in $(seq 50); do
    grep -q "serving on" "$work/$kind.serve.log" && break
    sleep 0.1
  done
  "$bin" bench run "http://127.0.0.1:$port/demo.mp3" -n "$n" --ramp "$ramp" --hold 40s \
    --icy --bitrate-kbps 64 --name "$kind" --out "$work/$kind" \
    >"$work/$kind.bench.txt" 2>&1 &
  local bench=$!
  sleep $(( ramp_s + 20 ))
  if [ "$kind" = upgrade ]; then
    kill -USR2 "$pid"
  else
    kill -TERM "$pid"
    wait "$pid" || true
    "$bin" serve --listen "127.0.0.1:$port" --state-dir "$work/state" >>"$work/$kind.serve.log" 2>&1 &
  fi
  wait "$bench" || true
  pkill -f "serve --listen 127.0.0.1:$port" || true
  sleep 1
  echo "== $kind"
  grep -E "^\| (listeners asked|peak streaming|streaming at end of hold|starved listeners|failed connections|delivered / expected bytes|frames checked|longest gap p99|verdict) " "$work/$kind.bench.txt"
  grep -E "upgrade: (the new process took over|took over)" "$work/$kind.serve.log" || true
}

run upgrade
run restart
