#!/usr/bin/env python3
"""The cost of the HLS cache-log stream at the origin (issue 24; docs/BENCHMARKS.md, "HLS behind
a cache"), apart from everything else: one `throng serve` (the demo mount, `[hls]
cache-log-listen`), N HLS sessions opened by fetching the multivariant playlist, then nginx-style
syslog lines (the `throng_hls` format of deploy/nginx/hls-cache.conf) for those sessions sent
over UDP at RATE lines/s for SECS seconds, one datagram per line, in 1 ms steps as a busy cache
sends them. Throng's CPU (/proc) is read over the send and over as long a quiet spell before
it (before the sessions open: they would expire in it); the difference per line is what a
line costs. Every line touches a session (a playlist) or is its sign of life (a segment), as
in steady state. Loopback only; stops by itself.

    scripts/bench-cache-log.py BIN [--rate 2000] [--secs 20] [--sessions 500]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, clock ticks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--secs", type=int, default=20)
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--port", type=int, default=18431)
    a = ap.parse_args()
    hz = os.sysconf("SC_CLK_TCK")
    syslog = a.port + 1
    d = tempfile.mkdtemp()
    with open(f"{d}/throng.toml", "w") as f:
        f.write(
            f'listen = ["127.0.0.1:{a.port}"]\ndemo = true\n[hls]\nsegment-seconds = 6\n'
            f'cache-log-listen = "127.0.0.1:{syslog}"\n'
            # Every session from 127.0.0.1: past the per-address bounds of new sessions (issue
            # 28). The lines come from 127.0.0.1 too, the default `cache-log-from` (issue 42).
            'new-sessions-per-second = 100000\npending-per-address = 100000\n'
            # No audience ledger: only the log path is measured (and no shared state file).
            '[ledger]\ndatabase = "off"\n'
        )
    log = open(f"{d}/serve.log", "w")
    srv = subprocess.Popen([a.bin, "serve", "--config", f"{d}/throng.toml"], stdout=log, stderr=log)
    try:
        base = f"http://127.0.0.1:{a.port}/hls/demo.mp3/"
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "index.m3u8", timeout=2).read()
                break
            except Exception:
                time.sleep(0.1)
        # The quiet spell: the demo mount and the packager alone.
        c0, t0 = ticks(srv.pid), time.time()
        time.sleep(a.secs)
        quiet = (ticks(srv.pid) - c0) / hz / (time.time() - t0)
        tokens = []
        for _ in range(a.sessions):
            text = urllib.request.urlopen(base + "index.m3u8", timeout=5).read().decode()
            uri = [l for l in text.splitlines() if l and not l.startswith("#")][0]
            tokens.append(uri.split("/")[1])
        media = urllib.request.urlopen(base + f"s/{tokens[0]}/index.m3u8", timeout=5).read()
        seg = [l for l in media.decode().splitlines() if l and not l.startswith("#")][-1]
        lines = []
        for i, t in enumerate(tokens):
            uri = f"/hls/demo.mp3/s/{t}/" + ("index.m3u8" if i % 2 else seg)
            rec = {"addr": f"203.0.113.{i % 250 + 1}", "uri": uri, "status": 200,
                   "bytes": 48213, "agent": "hls.js", "referer": "", "cache": "HIT"}
            lines.append(f"<190>Nov 27 05:00:00 cache1 throng: {json.dumps(rec)}".encode())
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        dest = ("127.0.0.1", syslog)
        sent = 0
        c0, t0 = ticks(srv.pid), time.time()
        step = 0.001
        while time.time() - t0 < a.secs:
            due = int((time.time() - t0) * a.rate)
            while sent < due:
                sock.sendto(lines[sent % len(lines)], dest)
                sent += 1
            time.sleep(step)
        time.sleep(0.3)  # the last batch is read
        busy = (ticks(srv.pid) - c0) / hz / (time.time() - t0)
        per_line_us = (busy - quiet) * (time.time() - t0) / sent * 1e6
        counted = json.load(urllib.request.urlopen(f"http://127.0.0.1:{a.port}/api/v1/status"))
        listeners = sum(m["listeners"] for m in counted["mounts"])
        print(f"| {a.rate} | {sent} | {quiet * 100:.2f} | {busy * 100:.2f} | {per_line_us:.1f} | {listeners} |")
    finally:
        srv.terminate()
        srv.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
