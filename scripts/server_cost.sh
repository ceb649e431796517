#!/usr/bin/env bash
# What one event costs gapless-server on one SSE stream (issue 16, items 3
# and 5; BENCHMARKS.md). The server runs on a free loopback port; curl
# initializes a session and calls the demo's `emit_events` (64-byte
# `payload_bytes`, a message of about 190 B), reading the whole SSE response.
#
#   scripts/server_cost.sh rss [N]           # RSS per retained event
#   scripts/server_cost.sh cpu [N]           # user and system CPU per event
#   scripts/server_cost.sh instructions [N]  # instructions per event (callgrind)
#
# rss: a ring of N events (default 65 536, at most emit_events' count bound)
#   and no byte bound; RSS before and after one call of N events, divided by
#   N, then again after 21 s (jemalloc returns freed pages over 10 s: what
#   is left then is what the retained events hold), then after more calls
#   (the ring full and evicting).
# cpu: utime and stime of the server (/proc/PID/stat, 10 ms ticks) over 10
#   calls of N events (default 100 000), three times. Load-dependent, like
#   any time: run it on a quiet machine and read `uptime` beside it.
# instructions: the server under valgrind --tool=callgrind, counters zeroed
#   after a warm-up call, over one call of N events (default 20 000); the
#   total over N. Repeats within a few per cent (threads interleave
#   differently), whatever the load. Needs valgrind.
#
# SERVER=path picks the binary (default: target/release/gapless-server, built
# here). Needs curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: scripts/server_cost.sh rss|cpu|instructions [N]}
case $mode in
  rss) n=${2:-65536} ;;
  cpu) n=${2:-100000} ;;
  instructions) n=${2:-20000} ;;
  *) echo "unknown mode $mode (rss, cpu or instructions)" >&2; exit 2 ;;
esac
if [ -z "${SERVER:-}" ]; then
  cargo build -q --release -p gapless-server-bin
  SERVER=${CARGO_TARGET_DIR:-target}/release/gapless-server
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
cg=$(mktemp -d)
args=(--bind "127.0.0.1:$port")
[ "$mode" = rss ] && args+=(--ring-events "$n" --ring-bytes 1073741824 --max-memory 2G)
if [ "$mode" = instructions ]; then
  command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
  RUST_LOG=error valgrind --tool=callgrind --callgrind-out-file="$cg/out" "$SERVER" "${args[@]}" >"$log" 2>&1 &
else
  RUST_LOG=error "$SERVER" "${args[@]}" >"$log" 2>&1 &
fi
pid=$!
# `|| true`: set -e holds in the trap too, and `wait` on the killed server
# returns 143.
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$log" "$cg"' EXIT
url=http://127.0.0.1:$port/mcp
for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
h=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream')
sid=$(curl -s -D - -o /dev/null "${h[@]}" \
  -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"server_cost","version":"1"}}}' \
  "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" { print $2 }') || true
[ -n "$sid" ] || { echo "no session id from the server; its log:" >&2; cat "$log" >&2; exit 1; }
curl -s -o /dev/null "${h[@]}" -H "mcp-session-id: $sid" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$url"
call() { # id count -> bytes of the response
  curl -s "${h[@]}" -H "mcp-session-id: $sid" \
    -d "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"emit_events\",\"arguments\":{\"count\":$2,\"payload_bytes\":64}}}" \
    "$url" | wc -c
}
rss() { awk '/VmRSS/ { print $2 }' "/proc/$pid/status"; }
per_event() { echo $(( ($2 - $1) * 1024 / n )); }

call 1 1000 >/dev/null # warm-up: the allocator's arenas, the first chunks
case $mode in
  rss)
    r0=$(rss)
    bytes=$(call 2 "$n")
    [ "$bytes" -gt "$n" ] || { echo "emit_events of $n answered $bytes bytes (over its count bound?)" >&2; exit 1; }
    r1=$(rss)
    sleep 21
    r2=$(rss)
    echo "RSS before ${r0} KiB; after $n events ${r1} KiB: $(per_event "$r0" "$r1") B per retained event; 21 s later ${r2} KiB: $(per_event "$r0" "$r2") B per retained event"
    for k in 3 4 5; do
      call $k "$n" >/dev/null
      echo "after $((k - 1)) x $n events (the ring full, evicting): $(rss) KiB"
    done
    ;;
  cpu)
    tck=$(getconf CLK_TCK)
    for run in 1 2 3; do
      read -r u0 s0 < <(awk '{ print $14, $15 }' "/proc/$pid/stat")
      for k in $(seq 10); do call $((10 * run + k)) "$n" >/dev/null; done
      read -r u1 s1 < <(awk '{ print $14, $15 }' "/proc/$pid/stat")
      python3 -c "
n = 10 * $n; u = ($u1 - $u0) / $tck; s = ($s1 - $s0) / $tck
print(f'run $run: user {u / n * 1e6:.3f} us, system {s / n * 1e6:.3f} us, total {(u + s) / n * 1e6:.3f} us per event (load $(cut -d' ' -f1 /proc/loadavg))')"
    done
    ;;
  instructions)
    callgrind_control -z "$pid" >/dev/null 2>&1
    call 2 "$n" >/dev/null
    callgrind_control -d "$pid" >/dev/null 2>&1
    sleep 1
    total=$(awk '/^(summary|totals):/ { print $2; exit }' "$cg"/out.*)
    echo "instructions per event: $((total / n)) ($total over $n events)"
    ;;
esac
