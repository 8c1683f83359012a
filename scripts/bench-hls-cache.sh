#!/usr/bin/env bash
# HLS behind a cache (issue 24; docs/BENCHMARKS.md, "HLS behind a cache"): one `throng serve`
# (release build, the demo mount, shared playlists, `[hls] cache-log-listen`) behind Debian's
# nginx running the shipped deploy/nginx/hls-cache.conf; `throng bench` HLS players through
# nginx, one step per count given (default 500 then 2000), each a 60 s hold. Per step, from
# Throng's own /metrics and /proc: the origin's HLS requests/s (throng_hls_requests_total),
# the origin's CPU (% of one core, total and per 1,000 players), the HLS listeners Throng
# counted from nginx's logs, and the players' verdict; the bench reads Throng's /metrics
# (`--metrics-url`) and reports the origin's HLS requests/s and bytes/s itself (issue 24, item 7). Loopback only; about 1.5 min per step.
#
#   scripts/bench-hls-cache.sh [N...]    # default: 500 2000; SEG=6 (segment seconds)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
steps=("$@")
[ "${#steps[@]}" -gt 0 ] || steps=(500 2000)
bin="${BIN:-$PWD/target/release/throng}"
[ -x "$bin" ] || cargo build --release -p throng
seg="${SEG:-6}"
port=18421
proxy_port=18422
syslog_port=18423
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out/nginx"
# The cache is trusted for X-Forwarded-For (as deploy/nginx/hls-cache.conf asks): its players'
# loopback addresses, not its own, are capped per address. The audience ledger in the run's
# directory: not the user's, which another build may have migrated to a newer schema.
printf 'listen = ["127.0.0.1:%s"]\ndemo = true\n[hls]\nsegment-seconds = %s\ncache-log-listen = "127.0.0.1:%s"\n[paths]\nx-forwarded-for = ["127.0.0.1"]\n[ledger]\ndatabase = "sqlite://%s/ledger.db"\n' \
  "$port" "$seg" "$syslog_port" "$out" >"$out/throng.toml"
"$bin" serve --config "$out/throng.toml" >"$out/serve.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
nd="$out/nginx"
sed -e "s#/var/cache/nginx/throng-hls#$nd/cache#" -e "s#server 127.0.0.1:8000;#server 127.0.0.1:$port;#" \
  -e "s#listen 80;#listen 127.0.0.1:$proxy_port;#" -e "s#syslog:server=127.0.0.1:5140#syslog:server=127.0.0.1:$syslog_port#" \
  deploy/nginx/hls-cache.conf >"$nd/hls-cache.conf"
cat >"$nd/nginx.conf" <<NGINX
daemon off;
master_process off;
worker_rlimit_nofile 20000;
pid $nd/nginx.pid;
error_log $nd/error.log;
events { worker_connections 16000; }
http {
  access_log off;
  client_body_temp_path $nd/body;
  proxy_temp_path $nd/proxy;
  fastcgi_temp_path $nd/fcgi;
  uwsgi_temp_path $nd/uwsgi;
  scgi_temp_path $nd/scgi;
  include $nd/hls-cache.conf;
}
NGINX
nginx -c "$nd/nginx.conf" -p "$nd" 2>/dev/null &
npid=$!
trap 'kill "$pid" "$npid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$proxy_port/hls/demo.mp3/index.m3u8" >/dev/null 2>&1 && break
  sleep 0.1
done
sleep $((3 * seg))
metric() { # prefix: sum of the /metrics series starting with it
  curl -s "http://127.0.0.1:$port/metrics" | awk -v p="$1" 'index($0, p) == 1 { s += $NF } END { print s + 0 }'
}
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
listeners() { curl -s "http://127.0.0.1:$port/api/v1/status" | python3 -c "import json,sys; print(sum(m['listeners'] for m in json.load(sys.stdin)['mounts']))"; }
echo "| players | origin HLS requests/s | per 1,000 players | origin HLS bytes/s (bench) | origin CPU % of a core | per 1,000 players | counted listeners | starved | verdict |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for n in "${steps[@]}"; do
  "$bin" bench run "http://127.0.0.1:$proxy_port/hls/demo.mp3/index.m3u8" -n "$n" --ramp 500 --hold 60s \
    --metrics-url "http://127.0.0.1:$port/metrics" \
    --no-progress --name "cache-$n" --out "$out/cache-$n" >"$out/cache-$n.txt" 2>&1 &
  b=$!
  sleep $((n / 500 + 2 + 2 * seg)) # ramp, then every player in steady state
  r0=$(metric 'throng_hls_requests_total{mount="/demo.mp3"'); c0=$(ticks); t0=$(date +%s.%N)
  sleep 40
  r1=$(metric 'throng_hls_requests_total{mount="/demo.mp3"'); c1=$(ticks); t1=$(date +%s.%N)
  counted=$(listeners)
  wait "$b" || true
  python3 - "$n" "$r0" "$r1" "$c0" "$c1" "$t0" "$t1" "$counted" "$out/cache-$n/report.json" <<'PY'
import json, sys
n, r0, r1, c0, c1, t0, t1, counted, rep = sys.argv[1:]
dt = float(t1) - float(t0)
rate = (float(r1) - float(r0)) / dt
cpu = (float(c1) - float(c0)) / dt  # clock ticks (1/100 s) per second = % of a core
s = json.load(open(rep))["summary"]
obytes = s.get("origin_bytes_per_s")
ob = f"{obytes:.0f}" if obytes is not None else "-"
print(f"| {n} | {rate:.2f} | {rate * 1000 / int(n):.3f} | {ob} | {cpu:.2f} | {cpu * 1000 / int(n):.3f} | {counted} | {s['starved']} | {'PASS' if s['pass'] else 'FAIL'} |")
PY
  sleep $((2 * seg + 4)) # the sessions of this step expire
done
echo "reports: $out"
