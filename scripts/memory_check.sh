#!/usr/bin/env bash
# Issue 45's memory test (BENCHMARKS.md, "memory per session and per stream"):
# 10 000 idle sessions on one release node, in process, then each with its
# standalone GET open (`scripts/latency.sh local 10000 0`); fails when the
# node's RSS per open stream is over STREAM_KIB (default 12, the goal) or per
# idle session over SESSION_KIB (default 6, the goal: 4.6 with the ring's short
# first chunk, 8.1 without). Outside CI: it needs the release build and the e2e
# client, minutes of building that CI's budget does not have.
#   bash scripts/memory_check.sh
#   SESSIONS=2000 STREAM_KIB=12 SESSION_KIB=10 bash scripts/memory_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${SESSIONS:-10000}
stream_kib=${STREAM_KIB:-12}
session_kib=${SESSION_KIB:-6}
out=$(bash scripts/latency.sh local "$sessions" 0)
echo "$out"
line=$(echo "$out" | grep '^RSS:')
per_session=$(echo "$line" | sed -E 's/.*\+([0-9.]+) KiB per session.*/\1/')
per_stream=$(echo "$line" | sed -E 's/.*\+([0-9.]+) KiB per open stream.*/\1/')
python3 - "$per_session" "$session_kib" "$per_stream" "$stream_kib" <<'PY'
import sys
session, session_max, stream, stream_max = map(float, sys.argv[1:5])
bad = []
if session > session_max:
    bad.append(f"{session} KiB per idle session, over {session_max}")
if stream > stream_max:
    bad.append(f"{stream} KiB per open stream, over {stream_max}")
if bad:
    sys.exit("memory_check: " + "; ".join(bad))
print(f"memory_check: {session} KiB per idle session (at most {session_max}), {stream} KiB per open stream (at most {stream_max})")
PY
