#!/usr/bin/env bash
# HLS against ICY on one `throng serve` (release build), in one run, so the ratios hold on a
# shared, noisy machine (docs/BENCHMARKS.md, "HLS output"):
#  1. server CPU per listener: N ICY listeners of the demo mount (64 kbit/s MP3), then N HLS
#     players of the same mount (`/hls/demo.mp3/index.m3u8`, SEG s segments), each for a 60 s hold,
#     the server sampled by the bench (--pid); the ratio is HLS ÷ ICY of "server CPU per 1k
#     listeners";
#  2. BIG HLS players (default 18,000) for a 60 s hold: starved players, segment TTFB, requests/s;
#  3. latency source to player of classic HLS: a player starts three segments from the live
#     edge (RFC 8216 6.3.3), so its latency is the wall clock minus the EXT-X-PROGRAM-DATE-TIME
#     of that segment (the time its first sample reached the server) when it starts; sampled
#     20 times, one second apart.
#  0. before them, the idle server's CPU over 30 s (demo mount and packager, no client), which
#     every phase pays whatever its listeners: the marginal ratio subtracts it from both.
# Loopback only; about 7 minutes. Prints the figures and leaves the reports in $OUT.
#
#   scripts/bench-hls.sh [N] [BIG]      # defaults 2000 and 18000 (BIG = 0: no big run);
#                                       # builds target/release/throng when missing
#   SEG=4 scripts/bench-hls.sh 2000 0   # the same with 4 s segments (default SEG=6, the
#                                       # server's default `segment-seconds`)
#   BLOCKING=1 scripts/bench-hls.sh 2000 0
#                                       # the server offers blocking playlist reload
#                                       # (`[hls] blocking-reload = true`; off by default) and
#                                       # the players use it
#   HLS_ARGS=--hls-no-blocking-reload BLOCKING=1 scripts/bench-hls.sh 2000 0
#                                       # offered, but players reload on the RFC 8216 timer
#                                       # (extra `bench run` flags)
#   PROXY=1 SEG=6 scripts/bench-hls.sh 2000 0
#                                       # the HLS players go through nginx (Debian package) as a
#                                       # caching proxy in front of Throng, as a CDN edge would:
#                                       # the CPU figure is then Throng's (the origin's) alone;
#                                       # segments are cached, per-session playlists are not
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n="${1:-2000}"
big="${2:-18000}"
bin="${BIN:-$PWD/target/release/throng}" # BIN: another build, e.g. a copy kept while rebuilding
[ -x "$bin" ] || cargo build --release -p throng
port=18411
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
seg="${SEG:-6}"
blocking=false
[ "${BLOCKING:-0}" = 1 ] && blocking=true
# The players come from 39 loopback addresses (or, through the proxy, one) at 1,000/s: above
# the default new HLS sessions per second of an address, so the load test raises it.
printf 'listen = ["127.0.0.1:%s"]\ndemo = true\n[hls]\nsegment-seconds = %s\nwindow = 6\nblocking-reload = %s\nnew-sessions-per-second = 100000\npending-per-address = 100000\n' "$port" "$seg" "$blocking" >"$out/throng.toml"
"$bin" serve --config "$out/throng.toml" >"$out/serve.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
wait_playlist() { # port: until it answers the demo mount's playlist (at most 10 s)
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$1/hls/demo.mp3/index.m3u8" >/dev/null 2>&1 && return
    sleep 0.1
  done
}
wait_playlist "$port"
sleep $(( 3 * seg )) # three segments in the window
hls_base="http://127.0.0.1:$port"
if [ "${PROXY:-0}" = 1 ]; then
  # nginx as a caching proxy, as crates/server/tests/it/hls.rs starts it, sized for N players.
  proxy_port=$((port + 1))
  ndir="$out/nginx"
  mkdir -p "$ndir"
  cat >"$ndir/nginx.conf" <<NGINX
daemon off;
master_process off;
worker_rlimit_nofile 20000;
pid $ndir/nginx.pid;
error_log $ndir/error.log;
events { worker_connections 16000; }
http {
  access_log off;
  client_body_temp_path $ndir/body;
  proxy_temp_path $ndir/proxy;
  fastcgi_temp_path $ndir/fcgi;
  uwsgi_temp_path $ndir/uwsgi;
  scgi_temp_path $ndir/scgi;
  proxy_cache_path $ndir/cache keys_zone=hls:10m;
  upstream throng { server 127.0.0.1:$port; keepalive 64; }
  server {
    listen 127.0.0.1:$proxy_port;
    location /hls/ {
      proxy_pass http://throng;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache hls;
      proxy_cache_lock on;
      proxy_cache_key \$uri\$is_args\$args;
    }
  }
}
NGINX
  nginx -c "$ndir/nginx.conf" -p "$ndir" 2>/dev/null &
  npid=$!
  trap 'kill "$pid" "$npid" 2>/dev/null || true' EXIT
  wait_playlist "$proxy_port"
  hls_base="http://127.0.0.1:$proxy_port"
fi

bench() { # name url n [args...]
  local name="$1" url="$2" count="$3"
  shift 3
  "$bin" bench run "$url" -n "$count" --ramp 1000 --hold 60s --pid "$pid" --no-progress \
    --name "$name" --out "$out/$name" "$@" >"$out/$name.txt" 2>&1 || true
}
field() { # report field
  python3 -c "import json,sys; s=json.load(open('$out/$1/report.json'))['summary']; v=s.get('$2'); print('-' if v is None else (round(v,3) if isinstance(v,float) else v))"
}

# The idle server (demo mount, packager, no client) over 30 s: what every phase pays whatever
# its listeners, subtracted for the marginal figures below. % of one core, from /proc (1/100 s
# clock ticks).
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
c0=$(ticks)
sleep 30
idle=$(python3 -c "print(round(($(ticks) - $c0) / 30, 3))")
bench icy "http://127.0.0.1:$port/demo.mp3" "$n" --bitrate-kbps 64
# shellcheck disable=SC2086 # HLS_ARGS: flags, split on purpose
bench hls "$hls_base/hls/demo.mp3/index.m3u8" "$n" ${HLS_ARGS:-}
sleep $(( 2 * seg + 2 )) # the sessions of the CPU run expire
# shellcheck disable=SC2086
[ "$big" -gt 0 ] && bench hls-big "$hls_base/hls/demo.mp3/index.m3u8" "$big" ${HLS_ARGS:-}

python3 - "$port" >"$out/latency.txt" <<'PY'
import sys, time, urllib.request, datetime, statistics
port = sys.argv[1]
base = f"http://127.0.0.1:{port}/hls/demo.mp3/"
master = urllib.request.urlopen(base + "index.m3u8").read().decode()
media = base + [l for l in master.splitlines() if l and not l.startswith("#")][0]
lat = []
for _ in range(20):
    text = urllib.request.urlopen(media).read().decode()
    pdts = [l.split(":", 1)[1] for l in text.splitlines() if l.startswith("#EXT-X-PROGRAM-DATE-TIME:")]
    start = datetime.datetime.fromisoformat(pdts[-3].replace("Z", "+00:00")).timestamp()
    lat.append(time.time() - start)
    time.sleep(1)
print(f"latency_s median {statistics.median(lat):.1f} min {min(lat):.1f} max {max(lat):.1f}")
PY

echo "== server CPU per 1k listeners (% of a core), $n listeners, 60 s hold, $seg s segments$( [ "${PROXY:-0}" = 1 ] && echo ", HLS players through nginx")"
icy=$(field icy server_cpu_pct_per_1000)
hls=$(field hls server_cpu_pct_per_1000)
echo "ICY $icy   HLS $hls   HLS/ICY $(python3 -c "print(round($hls/$icy,3))" 2>/dev/null || echo -)"
# Per listener-second above the idle server: each phase's figure less idle ÷ (n ÷ 1000).
echo "idle server $idle % of a core; above it: $(python3 -c "
i = $idle * 1000 / $n
icy, hls = $icy - i, $hls - i
print(f'ICY {icy:.3f}   HLS {hls:.3f}   HLS/ICY {hls / icy:.3f}')" 2>/dev/null || echo -)"
echo "ICY verdict $(field icy pass), starved $(field icy starved); HLS verdict $(field hls pass), starved $(field hls starved), requests/s $(field hls requests_per_s)"
[ "$big" -gt 0 ] && echo "== $big HLS players, 60 s hold" && for f in listeners peak_streaming final_streaming starved failures_total requests_per_s ttfb_p50_ms ttfb_p99_ms server_cpu_user_pct server_cpu_sys_pct server_rss_max server_fds_max pass; do
  echo "$f $(field hls-big $f)"
done
echo "== latency source to player (classic HLS, $seg s segments, start 3 segments from the edge)"
cat "$out/latency.txt"
echo "reports: $out"
