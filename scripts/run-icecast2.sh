#!/usr/bin/env bash
# Runs Debian's icecast2 (2.4.4, the reference server) in the foreground on
# 127.0.0.1:PORT using bench/icecast/icecast.xml (copied to
# /tmp/throng-icecast2-PORT/icecast.xml with port and logdir substituted; logs in
# that directory). Ctrl-C / SIGTERM stops it.
#   usage: scripts/run-icecast2.sh [PORT]      (default 8100; not 8000 = Throng's)
# Source password / admin password: hackme-bench (loopback-only test config).
# icecast2 refuses to run as root: when run as root the config's <changeowner>
# makes it drop to user icecast2 / group icecast after binding. The fd limit is
# raised to the hard limit (20000 on the bench box); <clients> counts every
# connection, so a few below that is the real listener ceiling.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${1:-8100}"
case "$PORT" in ''|*[!0-9]*) echo "usage: $0 [PORT]" >&2; exit 2;; esac
command -v icecast2 >/dev/null || { echo "icecast2 missing: run scripts/install-deps.sh" >&2; exit 1; }

DIR="/tmp/throng-icecast2-$PORT"
mkdir -p "$DIR"
sed -e "s#<port>8100</port>#<port>$PORT</port>#" \
    -e "s#<logdir>[^<]*</logdir>#<logdir>$DIR</logdir>#" \
    bench/icecast/icecast.xml > "$DIR/icecast.xml"
if [ "$(id -u)" -eq 0 ]; then
  chown icecast2:icecast "$DIR"          # logs are opened after the uid switch
else
  # not root: <changeowner> would fail, drop it
  sed -i '/<changeowner>/,/<\/changeowner>/d' "$DIR/icecast.xml"
fi
: > "$DIR/error.log"; : > "$DIR/access.log"
[ "$(id -u)" -eq 0 ] && chown icecast2:icecast "$DIR/error.log" "$DIR/access.log"

if ss -Hltn "sport = :$PORT" | grep -q .; then
  echo "port $PORT already in use" >&2; exit 1
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "icecast2 on http://127.0.0.1:$PORT/ (fd limit $(ulimit -n), logs $DIR/)" >&2
exec icecast2 -c "$DIR/icecast.xml"
