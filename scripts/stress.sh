#!/usr/bin/env bash
# Abuse test of the release server over loopback (not in CI; minutes):
# a flood of sessions that fill their rings with nobody reading, beside a
# canary that must lose nothing, then 1100 slowloris connections at an
# open-file limit of 1024. Reports peak RSS, open descriptors and the
# canary's completeness (scripts/stress.py has the details).
#
#   scripts/stress.sh                         defaults below
#   SESSIONS=100 MAX_MEMORY=256M scripts/stress.sh
#   PAD=3900 SESSIONS=320 MAX_MEMORY=2G scripts/stress.sh   (each flood event's pad)
#   STALL=1 SESSIONS=320 MAX_MEMORY=2G scripts/stress.sh    (each flooding session
#                                         opens its stream and never reads it)
set -euo pipefail
cd "$(dirname "$0")/.."
max_memory=${MAX_MEMORY:-512M}
cargo build --release -q -p gapless-server-bin
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bytes=$(python3 -c "import sys; s=sys.argv[1]; m={'K':10,'M':20,'G':30}; print(int(s[:-1])<<m[s[-1]] if s[-1] in m else int(s))" "$max_memory")
prlimit --nofile=1024 target/release/gapless-server --bind "127.0.0.1:$port" --max-memory "$max_memory" \
  --header-timeout-secs 5 --initialize-burst 100000 --max-sessions-per-client 100000 >/tmp/gapless-stress.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
  sleep 0.1
done
PORT=$port PID=$pid MAX_MEMORY=$bytes python3 scripts/stress.py
