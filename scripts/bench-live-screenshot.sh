#!/usr/bin/env bash
# The picture in docs/LOAD-TESTING.md "Live": a run watched as it happens. One `throng serve`
# (the demo mount, HLS on), a Prometheus (Debian's package) scraping the bench's
# `--metrics-listen` every second, and a scenario of two groups (ICY listeners ramped in two
# stages, HLS players) run for about 50 s; near its end headless Chromium takes Prometheus's
# own graph page of the live series (listeners streaming by group, media seconds delivered per
# second, TTFB p99 by group) as a PNG.
#
# usage: scripts/bench-live-screenshot.sh [OUT=docs/img/bench-live-prometheus.png] [PORT=8810]
# Needs target/release/throng (cargo build --release -p throng), prometheus and chromium
# (scripts/install-deps.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$root/docs/img/bench-live-prometheus.png}
PORT=${2:-8810}
THRONG=${THRONG:-$root/target/release/throng}
[ -x "$THRONG" ] || { echo "build first: cargo build --release -p throng" >&2; exit 2; }
for bin in prometheus chromium; do
  command -v "$bin" >/dev/null || { echo "$bin missing: scripts/install-deps.sh" >&2; exit 2; }
done
work=$(mktemp -d /tmp/throng-live.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
metrics=$((PORT + 1))
web=$((PORT + 2))

cat >"$work/throng.toml" <<EOF
listen = ["127.0.0.1:$PORT"]
demo = true
[hls]
enabled = true
segment-seconds = 2
EOF
"$THRONG" serve -c "$work/throng.toml" --state-dir "$work/state" >"$work/server.log" 2>&1 &
pids+=($!)
srv=$!

cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: throng-bench
    static_configs:
      - targets: ['127.0.0.1:$metrics']
EOF
(cd "$work" && exec prometheus --config.file=prometheus.yml --storage.tsdb.path=data \
  --web.listen-address="127.0.0.1:$web") >"$work/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$web/-/ready" >/dev/null 2>&1 && break
  sleep 0.3
done
# HLS players start three segments from the live edge: wait for them.
for _ in $(seq 1 60); do
  variant=$(curl -sf "http://127.0.0.1:$PORT/hls/demo.mp3/index.m3u8" 2>/dev/null | grep -v '^#' | tail -1 || true)
  [ -n "$variant" ] && [ "$(curl -sf "http://127.0.0.1:$PORT/hls/demo.mp3/$variant" | grep -c EXTINF || true)" -ge 3 ] && break
  sleep 0.5
done

cat >"$work/live.toml" <<EOF
name = "live"
[params]
base = "http://127.0.0.1:$PORT"
[[stage]]
target = 1000
duration = "10s"
[[stage]]
target = 1000
duration = "12s"
[[stage]]
target = 2000
duration = "10s"
[[stage]]
target = 2000
duration = "18s"
[[group]]
name = "icy"
mode = "icy"
urls = ["\${base}/demo.mp3"]
share = 0.8
icy-metadata = true
[[group]]
name = "hls"
mode = "hls"
urls = ["\${base}/hls/demo.mp3/index.m3u8"]
share = 0.2
EOF
"$THRONG" bench run "$work/live.toml" --pid "$srv" --no-progress --out "$work/out" \
  --metrics-listen "127.0.0.1:$metrics" --metrics-linger 30s >"$work/bench.txt" 2>&1 &
bench=$!
pids+=("$bench")
sleep 48

enc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
q0=$(enc 'sum by (group) (throng_bench_listeners{state="streaming"})')
q1=$(enc 'sum by (group) (rate(throng_bench_media_seconds_total[5s]))')
q2=$(enc 'histogram_quantile(0.99, sum by (group, le) (rate(throng_bench_ttfb_seconds_bucket[10s])))')
url="http://127.0.0.1:$web/graph?g0.expr=$q0&g0.tab=0&g0.range_input=1m&g1.expr=$q1&g1.tab=0&g1.range_input=1m&g2.expr=$q2&g2.tab=0&g2.range_input=1m"
mkdir -p "$(dirname "$OUT")"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,2450 \
  --virtual-time-budget=10000 --user-data-dir="$work/chromium" --screenshot="$OUT" "$url" \
  >"$work/chromium.log" 2>&1 || { cat "$work/chromium.log" >&2; exit 1; }
wait "$bench" || true
head -1 "$work/bench.txt"
echo "screenshot: $OUT"
