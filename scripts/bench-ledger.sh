#!/usr/bin/env bash
# The audience ledger under a crowd with churn (issue 23), measured against the bench's own
# ground truth:
#  1. N1 listeners (default 18,000) of the demo mount on one `throng serve` keeping its ledger
#     in SQLite; each listener's sessions last 5 to 120 s (it leaves and rejoins at once), for
#     HOLD (default 600 s). Then the ledger's sessions and listening hours over the run
#     (`throng report listening`) are compared with the bench's (`ground_truth` in
#     report.json), and the server's CPU per listener-second is printed.
#  2. Ledger on against off in the same run: two servers of the same binary, one with the
#     ledger and one with `[ledger] database = "off"`, N2 listeners (default 12,000) split
#     between them, the same churn, HOLD2 (default 240 s): each server's CPU per
#     listener-second, from /proc, and their ratio; ROUNDS rounds (default 2), the ledger on
#     the first port in odd rounds and on the second in even ones, and the ratios' geometric
#     mean; each round also prints the ratio over the hold alone (5 s after the ramp to 5 s
#     before the end: the churn without the ramp's and the teardown's connections).
# Loopback only (source addresses 127.0.0.2-127.0.0.40). The ledger's report timing over
# millions of sessions is a separate run:
#   cargo bench -p throng-server --bench ledger_report -- 10000000 /tmp/ledger-10m.db
#
#   scripts/bench-ledger.sh [N1] [N2]     # needs target/release/throng (built if missing)
#   ONLY=ab scripts/bench-ledger.sh        # part 2 only; OUT=dir for the reports
#   ONLY=ab ON_LEDGER='database = "off"' scripts/bench-ledger.sh   # an A/A control: the
#                                          # "on" server's [ledger] lines (OFF_LEDGER: the other's)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n1="${1:-18000}"
n2="${2:-12000}"
hold="${HOLD:-600}"
hold2="${HOLD2:-240}"
rounds="${ROUNDS:-2}"
bin="${BIN:-$PWD/target/release/throng}"
[ -x "$bin" ] || cargo build --release -p throng
work="$(mktemp -d)"
out="${OUT:-bench-results/ledger}"
mkdir -p "$out"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# serve NAME PORT LEDGER-TOML: starts a server, sets $pid.
serve() {
  cat >"$work/$1.toml" <<TOML
listen = ["127.0.0.1:$2"]
workers = 2
demo = true
demo-mount = "/$1.mp3"
[ledger]
$3
[authentication]
source-password = "bench-source"
admin-password = "bench-admin"
[logging]
access-log = ""
error-log = "$work/$1.err"
TOML
  "$bin" serve --config "$work/$1.toml" --state-dir "$work/state-$1" >"$work/$1.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$2/api/v1/status" >/dev/null 2>&1 && break
    sleep 0.1
  done
}

# CPU seconds (user + system) of process $1 so far.
cpu_s() {
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}

if [ "${ONLY:-}" != ab ]; then
echo "== 1. $n1 listeners with sessions of 5-120 s for ${hold} s, ledger in SQLite"
serve one 18521 "database = \"sqlite://$work/one.db\""
sleep 2
from=$(date +%s)
c0=$(cpu_s "$pid")
"$bin" bench run "http://127.0.0.1:18521/one.mp3" -n "$n1" --ramp 600 --hold "${hold}s" \
  --session-min 5s --session-max 120s --bitrate-kbps 64 --pid "$pid" --no-progress \
  --name "ledger-$n1" --out "$out/one" | tee "$out/one.txt" || true
c1=$(cpu_s "$pid")
sleep 3
to=$(( $(date +%s) + 60 ))
"$bin" report listening --from $((from - 60)) --to "$to" --mount /one.mp3 -c "$work/one.toml" \
  --state-dir "$work/state-one" > "$out/one-ledger.json"
ls -l "$work/one.db"* >> "$out/one.txt"
python3 - "$out/one/report.json" "$out/one-ledger.json" "$c0" "$c1" <<'PY' | tee -a "$out/one.txt"
import json, sys
bench = json.load(open(sys.argv[1]))["ground_truth"]["/one.mp3"]
ledger = json.load(open(sys.argv[2]))["total"]
cpu = float(sys.argv[4]) - float(sys.argv[3])
bs, bt = bench["sessions"], bench["listening_seconds"] / 3600
ls, lt = ledger["sessions"], ledger["tlh_hours"]
print(f"bench:  {bs} sessions, {bt:.3f} listening hours")
print(f"ledger: {ls} sessions, {lt:.3f} listening hours")
print(f"difference: sessions {100 * (ls - bs) / bs:+.3f} %, TLH {100 * (lt - bt) / bt:+.3f} %")
print(f"server CPU: {cpu:.1f} s, {1e6 * cpu / bench['listening_seconds']:.2f} us per listener-second")
PY
kill "$pid"; wait "$pid" 2>/dev/null || true
fi

echo "== 2. ledger on against off, $n2 listeners over two servers, ${hold2} s, ${rounds} rounds"
# Each round starts two fresh servers; the ledger alternates between the first port (listed
# first to the bench, its server started first) and the second, so what differs between the
# two places (the order the servers start in, the order the bench opens them in, the port)
# weighs on both sides alike over an even number of rounds.
ratios=()
for round in $(seq "$rounds"); do
  if [ $((round % 2)) = 1 ]; then on_port=18531; off_port=18532; else on_port=18532; off_port=18531; fi
  # The server on the first port is started first, so the start order alternates with the
  # ledger too (an A/A control, both servers without a ledger, put 2.4 % more CPU on the one
  # started first).
  start_on() { serve on "$on_port" "${ON_LEDGER:-database = \"sqlite://$work/on-$round.db\"}"; on=$pid; }
  start_off() { serve off "$off_port" "${OFF_LEDGER:-database = \"off\"}"; off=$pid; }
  if [ "$on_port" = 18531 ]; then start_on; start_off; else start_off; start_on; fi
  sleep 2
  # The writer thread's own CPU (the ledger's cost, less the few statements a listener runs to
  # hand its start and end over).
  ledger_tid() { { grep -l '^throng-ledger$' /proc/"$1"/task/*/comm || true; } | head -1 | cut -d/ -f5; }
  ltid=$(ledger_tid "$on")
  lcpu_s() {
    if [ -n "$ltid" ]; then awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$on/task/$ltid/stat"; else echo 0; fi
  }
  l0=$(lcpu_s)
  on0=$(cpu_s "$on"); off0=$(cpu_s "$off")
  # The hold alone as well (every listener connected, churning; the ramp and the teardown
  # left out): both servers' CPU from 5 s after the ramp to 5 s before the end.
  ramp_s=$(( n2 / 600 ))
  ( sleep $((ramp_s + 5)); echo "$(cpu_s "$on") $(cpu_s "$off")" >"$work/hold0"
    sleep $((hold2 - 10)); echo "$(cpu_s "$on") $(cpu_s "$off")" >"$work/hold1" ) &
  holdreader=$!
  "$bin" bench run "http://127.0.0.1:18531/$( [ "$on_port" = 18531 ] && echo on || echo off ).mp3" \
    "http://127.0.0.1:18532/$( [ "$on_port" = 18532 ] && echo on || echo off ).mp3" -n "$n2" \
    --ramp 600 --hold "${hold2}s" --session-min 5s --session-max 120s --bitrate-kbps 64 \
    --no-progress --name "ledger-ab-$n2-$round" --out "$out/ab-$round" | tee "$out/ab-$round.txt" || true
  on1=$(cpu_s "$on"); off1=$(cpu_s "$off")
  l1=$(lcpu_s)
  wait "$holdreader" || true
  read -r hon0 hoff0 <"$work/hold0"; read -r hon1 hoff1 <"$work/hold1"
  python3 -c "import sys; a,b,c,d=map(float,sys.argv[1:]); print(f'hold only: ledger on CPU {b-a:.1f} s, off {d-c:.1f} s, on / off {(b-a)/(d-c):.3f} (listeners split evenly)')" \
    "$hon0" "$hon1" "$hoff0" "$hoff1" | tee -a "$out/ab-$round.txt"
  ratio=$(python3 - "$out/ab-$round/report.json" "$on0" "$on1" "$off0" "$off1" "$l0" "$l1" "$round" "$on_port" <<'PY' | tee -a "$out/ab-$round.txt" | tee /dev/stderr | tail -1
import json, sys
gt = json.load(open(sys.argv[1]))["ground_truth"]
on_cpu = float(sys.argv[3]) - float(sys.argv[2])
off_cpu = float(sys.argv[5]) - float(sys.argv[4])
on_us = 1e6 * on_cpu / gt["/on.mp3"]["listening_seconds"]
off_us = 1e6 * off_cpu / gt["/off.mp3"]["listening_seconds"]
print(f"round {sys.argv[8]}, ledger on port {sys.argv[9]}:")
print(f"ledger on:  {gt['/on.mp3']['sessions']} sessions, CPU {on_cpu:.1f} s, {on_us:.2f} us per listener-second")
print(f"ledger off: {gt['/off.mp3']['sessions']} sessions, CPU {off_cpu:.1f} s, {off_us:.2f} us per listener-second")
ledger_cpu = float(sys.argv[7]) - float(sys.argv[6])
sessions = gt["/on.mp3"]["sessions"]
print(f"ledger writer thread: CPU {ledger_cpu:.2f} s, {1e6 * ledger_cpu / max(sessions, 1):.1f} us per session, "
      f"{100 * ledger_cpu / on_cpu:.2f} % of its server's CPU")
print(f"on / off: {on_us / off_us:.3f}")
print(f"{on_us / off_us:.5f}")
PY
  )
  ratios+=("$ratio")
  kill "$on" "$off"; wait "$on" "$off" 2>/dev/null || true
done
python3 - "${ratios[@]}" <<'PY' | tee "$out/ab-summary.txt"
import math, sys
r = [float(x) for x in sys.argv[1:]]
g = math.exp(sum(math.log(x) for x in r) / len(r))
print("on / off by round: " + ", ".join(f"{x:.3f}" for x in r))
print(f"on / off over {len(r)} rounds (geometric mean): {g:.3f}")
PY
