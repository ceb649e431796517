#!/usr/bin/env bash
# What idle sessions cost Redis in cluster mode (BENCHMARKS.md, "idle in a
# cluster"; docs/SPEC.md §8.1): a redis-server child and one release
# gapless-server node on it; N sessions initialized and left idle, first
# without a stream, then each with its standalone GET stream open; Redis's
# INFO commandstats and its CPU (INFO cpu, user + sys) over WINDOW seconds
# each. The client is a small asyncio program holding the N connections.
#   N=10000 WINDOW=10 bash scripts/cluster_idle_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000}
WINDOW=${WINDOW:-10}
cargo build -q --release -p gapless-server-bin
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
rport=$(free_port)
redis-server --port "$rport" --save "" --appendonly no --maxmemory-policy noeviction >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
port=$(free_port)
# An idle timeout of 64 s: a connection pins its session after 4 s.
RUST_LOG=error target/release/gapless-server --bind "127.0.0.1:$port" --redis-url "redis://127.0.0.1:$rport/0" \
  --idle-timeout-secs 64 --max-connections $((N + 1000)) --max-connections-per-ip $((N + 1000)) \
  --max-sessions $((N + 1000)) --max-sessions-per-client $((N + 1000)) \
  --initialize-burst $((N + 1000)) --initialize-per-sec 1000000 >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

measure() { # label
  redis-cli -p "$rport" CONFIG RESETSTAT >/dev/null
  local cpu0; cpu0=$(redis-cli -p "$rport" INFO cpu | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}')
  sleep "$WINDOW"
  local cpu1; cpu1=$(redis-cli -p "$rport" INFO cpu | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}')
  redis-cli -p "$rport" INFO commandstats | grep '^cmdstat' | grep -v -e resetstat -e 'cmdstat_info:' |
    awk -F'[:=,]' -v n="$N" -v w="$WINDOW" -v label="$1" -v c0="$cpu0" -v c1="$cpu1" '
      { sub("cmdstat_", "", $1); calls[$1] = $3; total += $3 }
      END {
        printf "%s, %d sessions: %.1f Redis commands/s, Redis CPU %.2f %% of a core (", label, n, total / w, (c1 - c0) / w * 100
        sep = ""; for (c in calls) { printf "%s%s %.1f/s", sep, c, calls[c] / w; sep = ", " }
        print ")"
      }'
}

client=$(mktemp --suffix .py)
cat >"$client" <<'PY'
import asyncio, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
INIT = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"idle","version":"1"}}}').encode()

async def initialize(sem):
    async with sem:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                b"accept: application/json, text/event-stream\r\nconnection: close\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(INIT), INIT))
        head = (await r.readuntil(b"\r\n\r\n")).decode()
        await r.read()
        w.close()
        return next(l.split(":", 1)[1].strip() for l in head.split("\r\n") if l.lower().startswith("mcp-session-id:"))

async def standalone(sem, sid, held):
    async with sem:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\nmcp-session-id: %s\r\n\r\n" % sid.encode())
        head = await r.readuntil(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n")[0], head
        held.append((r, w))

async def main():
    sem = asyncio.Semaphore(64)
    sids = await asyncio.gather(*(initialize(sem) for _ in range(n)))
    print("initialized", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    held = []
    await asyncio.gather(*(standalone(sem, s, held) for s in sids))
    print("streams open", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

asyncio.run(main())
PY
# The client says when each phase is done, and waits for a line to go on.
coproc CLIENT { python3 "$client" "$port" "$N"; }
pids+=("$CLIENT_PID")
read -r line <&"${CLIENT[0]}" && [ "$line" = initialized ]
sleep 3
measure "idle, no stream"
echo >&"${CLIENT[1]}"
read -r line <&"${CLIENT[0]}" && [ "$line" = "streams open" ]
sleep 8 # the pins, after 4 s
measure "idle, each with its GET stream open"
echo >&"${CLIENT[1]}"
rm -f "$client"
