#!/usr/bin/env bash
# The bench beyond one machine, measured on this one (issue 43, docs/BENCHMARKS.md): network
# namespaces as hosts, joined by a bridge in a switch namespace (nothing changes in the root
# namespace): a Throng cluster (an origin and EDGES edges relaying its demo mount, each process
# holding at most 20,000 files) in `srv`, three `throng bench agent`s in `a1` `a2` `a3` (each
# with ten source addresses of its own), and the controller in `ctl`. Three runs, each
# listeners ramped at RAMP/s and held HOLD s, listeners spread round-robin over every server:
#
#   agents-N     N listeners over the three agents (default 60,000)
#   agents-SMALL SMALL listeners over the three agents (default 6,000): the controller's CPU
#                against agents-N's (flat in listeners)
#   one-ONE      ONE listeners from `ctl` alone, no agents (default 18,000): the bench's CPU per
#                listener-second of one machine, against the agents'
#
# Prints each run's verdict and the figures the issue asks for. Reports in OUT/<run>/.
# Needs root (ip netns), target/release/throng (cargo build --release) and iproute2.
#
# usage: scripts/bench-agents.sh [N=60000] [HOLD=40] [SMALL=6000] [ONE=18000] [EDGES=3] [RAMP=3000] [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-60000}
HOLD=${2:-40}
SMALL=${3:-6000}
ONE=${4:-18000}
EDGES=${5:-3}
RAMP=${6:-3000}
OUT=${7:-$root/bench-results/agents}
THRONG=${THRONG:-$root/target/release/throng}
[ -x "$THRONG" ] || { echo "build first: cargo build --release -p throng" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "needs root (ip netns)" >&2; exit 2; }
mkdir -p "$OUT"
export THRONG_BENCH_TOKEN="bench-agents-$$-$RANDOM"

p="tba$$"
x=$((200 + RANDOM % 50)); y=$((RANDOM % 250))
net="10.$x.$y"
hosts=(srv ctl a1 a2 a3)
pids=()
cleanup() {
  set +e
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 1
  for h in "${hosts[@]}" sw; do
    for pid in $(ip netns pids "$p-$h" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$p-$h" 2>/dev/null
  done
}
trap cleanup EXIT INT TERM

ip netns add "$p-sw"
ip -n "$p-sw" link add br0 type bridge
ip -n "$p-sw" link set br0 up
i=0
for h in "${hosts[@]}"; do
  i=$((i + 1))
  ip netns add "$p-$h"
  ip -n "$p-$h" link set lo up
  ip -n "$p-$h" link add eth0 type veth peer name "h$i" netns "$p-sw"
  ip -n "$p-sw" link set "h$i" master br0 up
  ip -n "$p-$h" addr add "$net.$i/24" dev eth0
  for k in $(seq 0 9); do ip -n "$p-$h" addr add "$net.$((100 + i * 10 + k))/24" dev eth0; done
  ip -n "$p-$h" link set eth0 up
done
addr() { # host -> primary address
  local j=0
  for h in "${hosts[@]}"; do j=$((j + 1)); [ "$h" = "$1" ] && { echo "$net.$j"; return; }; done
}
range() { # host -> its ten extra addresses
  local j=0
  for h in "${hosts[@]}"; do j=$((j + 1)); [ "$h" = "$1" ] && { echo "$net.$((100 + j * 10))-$net.$((109 + j * 10))"; return; }; done
}
inns() { local h=$1; shift; ip netns exec "$p-$h" "$@"; }

srv=$(addr srv)
HOST=$srv inns srv "$root/scripts/run-cluster.sh" 8300 "$EDGES" overflow "$OUT/servers" 1000 &
cluster=$!
pids+=("$cluster")
urls=()
for k in $(seq 0 "$EDGES"); do urls+=("http://$srv:$((8300 + k))/demo.mp3"); done
# Every edge's relay is up before the first listener.
for u in "${urls[@]}"; do
  for _ in $(seq 1 120); do
    # curl exits 28 at --max-time on a live stream: the code is what counts.
    code=$(inns ctl curl -s -o /dev/null --max-time 1 -w '%{http_code}' "$u" 2>/dev/null || true)
    [ "$code" = 200 ] && break
    sleep 0.5
  done
done
agents=()
for a in a1 a2 a3; do
  inns "$a" "$THRONG" bench agent --listen "$(addr "$a"):7700" --name "$a" \
    --bind-range "$(range "$a")" >"$OUT/$a.log" 2>&1 &
  pids+=($!)
  agents+=("$(addr "$a"):7700")
done
list=$(IFS=,; echo "${agents[*]}")
for a in a1 a2 a3; do
  for _ in $(seq 1 60); do grep -q "listening on" "$OUT/$a.log" && break; sleep 0.5; done
done

run() { # name listeners [agents]
  local name=$1 n=$2 ag=${3:-}
  local extra=()
  [ -n "$ag" ] && extra=(--agents "$ag" --agent-wait 30s)
  local range_ctl
  range_ctl=$(range ctl)
  echo "== $name: $n listeners${ag:+ over the agents}"
  inns ctl "$THRONG" bench run "${urls[@]}" -n "$n" --ramp "$RAMP" --hold "${HOLD}s" \
    --pid "$cluster" --bind-range "$range_ctl" --no-progress --out "$OUT/$name" "${extra[@]}" \
    >"$OUT/$name.txt" 2>&1 || true
  head -1 "$OUT/$name.txt"
}
run "agents-$N" "$N" "$list"
sleep 5
run "agents-$SMALL" "$SMALL" "$list"
sleep 5
run "one-$ONE" "$ONE"

python3 - "$OUT" "$N" "$SMALL" "$ONE" <<'PY'
import json, sys
out, n, small, one = sys.argv[1], *sys.argv[2:]
def rep(name):
    return json.load(open(f"{out}/{name}/report.json"))
big, sm, solo = rep(f"agents-{n}"), rep(f"agents-{small}"), rep(f"one-{one}")
def secs(r):
    return len(r["timeline"])
print()
print("| run | verdict | listeners | bench CPU per listener-second (µs) | server CPU per listener-second (µs) | controller CPU (% of a core) |")
print("|---|---|---:|---:|---:|---:|")
for name, r in [(f"agents-{n}", big), (f"agents-{small}", sm), (f"one-{one}", solo)]:
    s = r["summary"]
    ctl = 100 * r["process_cpu_s"] / max(1, secs(r))
    print(f"| {name} | {'PASS' if s['pass'] else 'FAIL'} | {s['started']:,} | "
          f"{s.get('bench_cpu_us_per_listener_second') or 0:.2f} | "
          f"{s.get('server_cpu_us_per_listener_second') or 0:.2f} | {ctl:.2f} |")
print()
for a in big["agents"]:
    print(f"agent {a['name']}: {a['started']:,} listeners, offset {a['clock_offset_ms']:+.3f} ms "
          f"± {a['clock_uncertainty_ms']:.3f}, engines {a['engines_cpu_s']:.1f} s CPU, "
          f"starved {a['starved']}, failed {a['failed']}")
b1 = big["summary"].get("bench_cpu_us_per_listener_second") or 0
b0 = solo["summary"].get("bench_cpu_us_per_listener_second") or 1
c1 = big["process_cpu_s"] / max(1, secs(big))
c0 = sm["process_cpu_s"] / max(1, secs(sm))
print(f"\nbench CPU per listener-second, agents / one machine: {b1 / b0:.3f}")
print(f"controller CPU per second, {n} / {small} listeners: {c1 / max(c0, 1e-9):.3f}")
PY
