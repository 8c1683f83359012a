#!/usr/bin/env bash
# HTTPS fan-out cost (issue 12): one `throng serve` process with a plain and a TLS socket
# (ECDSA P-256 certificate made here with openssl), the demo mount (64 kbit/s MP3). The verifying
# bench connects N listeners over TLS (500/s), holds, leaves; then N plain listeners; then TLS and plain
# again (A B A B, one server process, so noise hits both alike); then 3,000 TLS listeners started at
# once for the handshake rate. Each bench run samples the server (`--pid`): CPU per
# 1,000 listeners over the hold, RSS growth per listener over the idle server of that run, and
# starved listeners. The TLS run goes first so its RSS growth starts from a server that never
# held a listener (later runs reuse memory the allocator kept). Loopback only; about 7 minutes.
#
#   scripts/bench-tls.sh [N] [HOLD]     # default N = 10000, HOLD = 30s; needs target/release/throng
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n="${1:-10000}"
hold="${2:-30s}"
bin="$PWD/target/release/throng"
[ -x "$bin" ] || cargo build --release -p throng
http=18480
https=18443
work="$(mktemp -d)"
serve_pid=""
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; echo "reports kept in $work" >&2' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
  -keyout "$work/key.pem" -out "$work/cert.pem" -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost -addext basicConstraints=critical,CA:FALSE 2>/dev/null
"$bin" serve --listen "127.0.0.1:$http" --tls-listen "127.0.0.1:$https" \
  --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" --source-password pw \
  --admin-password pw --state-dir "$work/state" >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do
  grep -q "serving on https" "$work/serve.log" && break
  sleep 0.1
done

run() { # $1 = name, $2 = listeners, $3 = URL, then extra bench flags
  local name="$1" count="$2" url="$3"
  shift 3
  echo "== $name: $count x $url" >&2
  "$bin" bench run "$url" -n "$count" --bitrate-kbps 64 --pid "$serve_pid" \
    --no-progress --name "$name" --out "$work/$name" "$@" >"$work/$name.txt" 2>&1 || true
  sleep 5
}
plain="http://127.0.0.1:$http/demo.mp3"
tls="https://localhost:$https/demo.mp3"
# Both kinds ramp at 500/s, below the handshake rate this box sustains while the bench (whose
# client side of each handshake costs as much again) shares its two cores.
run tls-1 "$n" "$tls" --ramp 500 --hold "$hold" --ca "$work/cert.pem"
run plain-1 "$n" "$plain" --ramp 500 --hold "$hold"
run tls-2 "$n" "$tls" --ramp 500 --hold "$hold" --ca "$work/cert.pem"
run plain-2 "$n" "$plain" --ramp 500 --hold "$hold"
# Handshake rate: 3,000 listeners started at once.
run handshakes 3000 "$tls" --ramp 100000 --hold 5s --ca "$work/cert.pem"

python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
def s(name):
    return json.load(open(f"{work}/{name}/report.json"))["summary"]
runs = {k: s(k) for k in ["tls-1", "plain-1", "tls-2", "plain-2", "handshakes"]}
print(f"{'run':<11} {'streaming':>9} {'starved':>7} {'failed':>6} {'CPU %/1k':>9} {'µs/l-s':>7} {'RSS B/l':>8} {'hs/s':>6} {'hs p50':>7} {'hs p99':>7}")
for k, r in runs.items():
    cpu = r.get("server_cpu_pct_per_1000")
    rss = r.get("server_rss_per_listener")
    print(f"{k:<11} {r['final_streaming']:>9} {r['starved']:>7} {r['failures_total']:>6} "
          f"{cpu if cpu is None else round(cpu, 3)!s:>9} {'-' if cpu is None else round(cpu * 10, 2)!s:>7} "
          f"{'-' if rss is None else round(rss)!s:>8} {r.get('tls_handshakes_peak_per_s', '-')!s:>6} "
          f"{r.get('tls_handshake_p50_ms', '-')!s:>7} {r.get('tls_handshake_p99_ms', '-')!s:>7}")
t = [runs[k]["server_cpu_pct_per_1000"] for k in ("tls-1", "tls-2")]
p = [runs[k]["server_cpu_pct_per_1000"] for k in ("plain-1", "plain-2")]
if None not in t + p:
    print(f"server CPU per listener-second, TLS / plain: {sum(t) / sum(p):.2f} "
          f"(run pairs: {t[0] / p[0]:.2f}, {t[1] / p[1]:.2f})")
print(f"user-space RSS growth per TLS listener (first run, idle server before): "
      f"{runs['tls-1']['server_rss_per_listener'] / 1024:.2f} KiB")
EOF
