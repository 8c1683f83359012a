#!/usr/bin/env python3
"""Tiny fake server used to record exactly what source clients send (docs/peers.md).

usage: wire-capture.py PORT MODE[,MODE...] [SECONDS]
Each accepted connection takes the next MODE (the last one repeats):
  100-200  reply 'HTTP/1.1 100 Continue\\r\\nContent-Length: 0\\r\\n\\r\\n' then 'HTTP/1.0 200 OK\\r\\n\\r\\n' (icecast 2.4.4)
  100      reply only the 100 Continue
  200      reply only 'HTTP/1.0 200 OK\\r\\n\\r\\n'
  401      401 + WWW-Authenticate (no Allow header), then close
  401allow 401 + WWW-Authenticate + Allow: GET, SOURCE, PUT, then close  (hypothesis for libshout)
  403      'HTTP/1.0 403 Forbidden' + small body, then close
  400      'HTTP/1.0 400 Bad Request' (what 2.4.4 answers to OPTIONS), then close
  204allow 'HTTP/1.1 204 No Content' + Allow incl. PUT/SOURCE (Icecast 2.5 OPTIONS *), then close
  none     reply nothing, just read
It prints the request head as a Python repr, then a timeline of what arrives;
bodies are saved to /tmp/wire-capture-body-PORT-N.bin.
"""
import socket, sys, time

port = int(sys.argv[1]); modes = sys.argv[2].split(','); total = float(sys.argv[3]) if len(sys.argv) > 3 else 6
REPLIES = {
    '100-200': [b'HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\n', b'HTTP/1.0 200 OK\r\n\r\n'],
    '100': [b'HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\n'],
    '200': [b'HTTP/1.0 200 OK\r\n\r\n'],
    '401': [b'HTTP/1.0 401 Authentication Required\r\nWWW-Authenticate: Basic realm="Icecast2 Server"\r\n'
            b'Content-Type: text/html; charset=utf-8\r\nContent-Length: 26\r\n\r\nYou need to authenticate\r\n'],
    '401allow': [b'HTTP/1.0 401 Authentication Required\r\nWWW-Authenticate: Basic realm="Icecast2 Server"\r\n'
                 b'Allow: GET, SOURCE, PUT\r\nContent-Length: 0\r\n\r\n'],
    '403': [b'HTTP/1.0 403 Forbidden\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 20\r\n\r\nMountpoint in use\r\n'],
    '400': [b'HTTP/1.0 400 Bad Request\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 17\r\n\r\nunknown request\r\n'],
    '204allow': [b'HTTP/1.1 204 No Content\r\nAllow: GET, POST, OPTIONS, SOURCE, PUT\r\nContent-Length: 0\r\n\r\n'],
    'none': [],
}
CLOSE = {'401', '401allow', '403', '400', '204allow'}
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('127.0.0.1', port)); ls.listen(5)
t0 = time.time(); n = 0
def ts(): return '%6.3f' % (time.time() - t0)
while time.time() - t0 < total:
    ls.settimeout(max(0.1, total - (time.time() - t0)))
    try: c, _ = ls.accept()
    except socket.timeout: break
    mode = modes[min(n, len(modes) - 1)]; n += 1
    print(f'{ts()} conn#{n} accepted, mode={mode}', flush=True)
    c.settimeout(0.5); buf = b''
    while b'\r\n\r\n' not in buf and time.time() - t0 < total:
        try: d = c.recv(65536)
        except socket.timeout: continue
        if not d: break
        buf += d
    head, sep, rest = buf.partition(b'\r\n\r\n')
    print(f'{ts()} conn#{n} head: {head + sep!r}', flush=True)
    if rest: print(f'{ts()} conn#{n} bytes after head before reply: {len(rest)} first={rest[:8]!r}', flush=True)
    for r in REPLIES[mode]:
        c.sendall(r); print(f'{ts()} conn#{n} sent {r[:60]!r}', flush=True); time.sleep(0.05)
    if mode in CLOSE:
        time.sleep(0.3)
        try:
            c.settimeout(0.3); d = c.recv(65536)
            print(f'{ts()} conn#{n} after reply got {len(d)} bytes {d[:40]!r}', flush=True)
        except Exception as e: print(f'{ts()} conn#{n} after reply: {e!r}', flush=True)
        c.close(); print(f'{ts()} conn#{n} closed by us', flush=True); continue
    got = len(rest); first = None; last_report = time.time()
    dump = open(f'/tmp/wire-capture-body-{port}-{n}.bin', 'wb'); dump.write(rest)
    while time.time() - t0 < total:
        try: d = c.recv(65536)
        except socket.timeout: continue
        except ConnectionResetError: print(f'{ts()} conn#{n} reset by peer'); break
        if not d: print(f'{ts()} conn#{n} EOF from client after {got} body bytes', flush=True); break
        if first is None: first = d[:16]; print(f'{ts()} conn#{n} first body bytes {first!r}', flush=True)
        got += len(d); dump.write(d)
        if time.time() - last_report > 1: print(f'{ts()} conn#{n} body so far {got}', flush=True); last_report = time.time()
    else:
        print(f'{ts()} conn#{n} capture window over, body bytes {got}', flush=True)
    c.close(); dump.close()
print(f'{ts()} done, {n} connections', flush=True)
