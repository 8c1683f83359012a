#!/usr/bin/env bash
# Runs a Throng cluster on this machine in the foreground: an origin on HOST:BASE serving
# the built-in demo mount (/demo.mp3, a 64 kbit/s MP3 tone paced in real time) and EDGES edges
# on BASE+1 ... BASE+EDGES, each relaying /demo.mp3 from the origin (`[[relay]]` with the edge
# credentials, so the origin never redirects the relay) and reporting to it every 2 s
# (`[cluster] origin`). REDIRECT is the origin's `[cluster] redirect` (default overflow; `all`
# makes it a pure director). Each server runs one fan-out shard (7 processes share 2 cores).
# Stops everything on SIGTERM/SIGINT (throng bench compare sends SIGTERM to the process group). Configs and logs go to a temporary directory, removed at exit;
# with LOGDIR the servers' logs are copied there first. The bench's listeners come from 39
# loopback addresses standing for 100,000 clients, so `pending-per-address` is raised.
#
# WRITE_INTERVAL_MS is every server's `[limits] write-interval-ms` (default 1000, the server's
# default): the fan-out's cost follows the writes per listener per second, so 1500 cuts the
# writes by a third (each then carries 1.5 s of audio, well inside a player's burst-on-connect
# buffer). The edges' relay connections are written at every tick of the origin's shard (a tenth
# of the interval) whatever it is. EDGES=0 runs the origin alone (the single-process CPU peer).
#
# HOST (environment, default 127.0.0.1) is the address every server listens on and the edges
# reach the origin at (scripts/bench-agents.sh runs the cluster in a network namespace).
#
# usage: scripts/run-cluster.sh [BASE=8300] [EDGES=6] [REDIRECT=overflow] [LOGDIR] [WRITE_INTERVAL_MS=1000]
# Used by bench/scenarios/cluster-100k.toml and cluster-redirect.toml (scripts/bench-cluster.sh).
set -euo pipefail

BASE=${1:-8300}
EDGES=${2:-6}
REDIRECT=${3:-overflow}
LOGDIR=${4:-}
WRITE_INTERVAL_MS=${5:-1000}
HOST=${HOST:-127.0.0.1}
HERE=$(cd "$(dirname "$0")" && pwd)
THRONG=${THRONG:-$HERE/../target/release/throng}
SECRET=bench-cluster-secret
DIR=$(mktemp -d /tmp/throng-cluster.XXXXXX)
pids=()

stop() {
  trap - TERM INT EXIT
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$LOGDIR" ]; then mkdir -p "$LOGDIR" && cp "$DIR"/*.log "$LOGDIR"/ 2>/dev/null || true; fi
  rm -rf "$DIR"
}
trap 'stop; exit 0' TERM INT
trap stop EXIT

# common INTERVAL_MS: the settings every server shares.
common() {
  cat <<EOT
workers = 1
[limits]
pending-per-address = 100000
write-interval-ms = $1
[authentication]
source-password = "hackme-bench"
admin-password = "hackme-bench"
[logging]
access-log = ""
EOT
}

{
  echo "listen = [\"$HOST:$BASE\"]"
  echo "demo = true"
  common "$WRITE_INTERVAL_MS"
  printf '[cluster]\nsecret = "%s"\nredirect = "%s"\nedge-timeout = 10\n' "$SECRET" "$REDIRECT"
} >"$DIR/origin.toml"
"$THRONG" serve --config "$DIR/origin.toml" --state-dir "$DIR" >"$DIR/origin.log" 2>&1 &
pids+=($!)

for i in $(seq 1 "$EDGES"); do
  port=$((BASE + i))
  {
    echo "listen = [\"$HOST:$port\"]"
    common "$WRITE_INTERVAL_MS"
    printf '[[relay]]\nserver = "%s"\nport = %s\nmount = "/demo.mp3"\nusername = "edge"\npassword = "%s"\n' "$HOST" "$BASE" "$SECRET"
    printf '[cluster]\norigin = "http://%s:%s"\npublic-url = "http://%s:%s"\nsecret = "%s"\nreport-interval = 2\n' "$HOST" "$BASE" "$HOST" "$port" "$SECRET"
  } >"$DIR/edge$i.toml"
  "$THRONG" serve --config "$DIR/edge$i.toml" --state-dir "$DIR" >"$DIR/edge$i.log" 2>&1 &
  pids+=($!)
done

wait -n "${pids[@]}" || true
echo "run-cluster: a server exited early; logs:" >&2
tail -n 5 "$DIR"/*.log >&2 || true
stop
exit 1
