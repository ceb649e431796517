#!/usr/bin/env bash
# Hostile suite for the MCP 2026-07-28 paths (issue 34; not in CI; a minute
# or two): listen floods, task floods, requestState replayed, tampered with
# and taken to another client, oversized inputResponses, Mcp-Param-* headers
# and _meta of every size, server/discover and tools/list floods, and
# tasks/stream of guessed and foreign task ids, one after another beside a
# canary task stream that must lose nothing. Prints each attack's server
# CPU, peak RSS and what the attacker got (scripts/hostile.py has the
# details). .ci/run runs it on the debug build.
#
#   scripts/hostile.sh
#   CANARY=8000 scripts/hostile.sh     (the canary task's events)
#   PROFILE=debug scripts/hostile.sh   (the debug build, as .ci/run does: the
#                                       refusals and the canary are the same;
#                                       CPU figures are not)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${PROFILE:-release}
case $profile in
  release) cargo build --release -q -p gapless-server-bin ;;
  debug) cargo build -q -p gapless-server-bin ;;
  *) echo "PROFILE must be release or debug" >&2; exit 2 ;;
esac
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"target/$profile/gapless-server" --bind "127.0.0.1:$port" --max-memory 512M --request-state-ttl-secs 3 >/tmp/gapless-hostile.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
  sleep 0.1
done
PORT=$port PID=$pid python3 scripts/hostile.py
