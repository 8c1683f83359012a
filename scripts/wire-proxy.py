#!/usr/bin/env python3
"""Logging TCP proxy: records what a client and a real server say to each other.

usage: wire-proxy.py LISTEN_PORT TARGET_PORT [SECONDS]   (both on 127.0.0.1)
Prints, per connection and direction, the first 600 bytes as a Python repr and
then only byte counts. Used to record the libshout <-> icecast2 exchange in
docs/peers.md.
"""
import socket, sys, threading, time
lp, tp = int(sys.argv[1]), int(sys.argv[2]); total = float(sys.argv[3]) if len(sys.argv) > 3 else 10
t0 = time.time(); lock = threading.Lock()
def log(*a):
    with lock: print('%6.3f' % (time.time() - t0), *a, flush=True)
def pump(src, dst, tag):
    shown = 0; n = 0
    try:
        while True:
            d = src.recv(65536)
            if not d: log(tag, f'EOF after {n} bytes'); break
            if shown < 600: log(tag, repr(d[:600 - shown])); shown += len(d)
            n += len(d); dst.sendall(d)
    except OSError as e: log(tag, f'{e!r} after {n} bytes')
    finally:
        try: dst.shutdown(socket.SHUT_WR)
        except OSError: pass
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('127.0.0.1', lp)); ls.listen(16); ls.settimeout(0.2); k = 0
while time.time() - t0 < total:
    try: c, _ = ls.accept()
    except socket.timeout: continue
    k += 1; s = socket.create_connection(('127.0.0.1', tp)); log(f'conn#{k} open')
    threading.Thread(target=pump, args=(c, s, f'conn#{k} C->S'), daemon=True).start()
    threading.Thread(target=pump, args=(s, c, f'conn#{k} S->C'), daemon=True).start()
time.sleep(0.2)
