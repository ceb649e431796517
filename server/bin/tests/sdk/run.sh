#!/usr/bin/env bash
# Resume tests of gapless-server with the official MCP SDK clients (README.md here).
#
# Installs what it needs idempotently (npm ci into node_modules/, a venv in .venv/),
# builds the gapless-server binary (debug profile, the one `cargo test` already builds), starts
# it on a free loopback port with a short SSE retry hint, runs the TypeScript and the
# Python client (each under a timeout). Then it starts a redis-server of its own and a
# cluster of three gapless-server nodes on it, and runs both clients again through a
# round-robin proxy over the three nodes, and once more through HAProxy (Debian's
# haproxy, the configuration of docs/haproxy.cfg on ports of its own), the legacy
# clients too. It stops every
# process it started and exits
# non-zero if any run failed. Every client run cuts its connections mid-stream through
# a TCP proxy of its own and checks that each notification arrived exactly once.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
cd "$here"

CLIENT_TIMEOUT="${CLIENT_TIMEOUT:-150}" # seconds per client run (each runs 2 variants)
VARIANT_TIMEOUT="${VARIANT_TIMEOUT:-45}" # seconds per variant inside a client
COUNT="${COUNT:-2000}"
# Extra arguments for every gapless-server started here, e.g.
# SERVER_ARGS="--host rmcp-counter" runs the whole suite against the rmcp handler.
read -r -a server_args <<<"${SERVER_ARGS:-}"
INTERVAL_MS="${INTERVAL_MS:-1}"

say() { echo "[sdk] $*"; }
die() { echo "[sdk] FAIL: $*" >&2; exit 1; }
hash_of() { sha256sum "$1" | cut -d' ' -f1; }

# --- tools -------------------------------------------------------------------
command -v node >/dev/null || die "node (>= 20) not found"
command -v npm >/dev/null || die "npm not found"
command -v python3 >/dev/null || die "python3 (>= 3.10) not found"
command -v cargo >/dev/null || die "cargo not found"
command -v redis-server >/dev/null || die "redis-server not found (scripts/setup.sh installs it)"
haproxy_bin="$(command -v haproxy || echo /usr/sbin/haproxy)"
[ -x "$haproxy_bin" ] || die "haproxy not found (scripts/setup.sh installs it)"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "node >= 20 needed, found $(node --version)"
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "python3 >= 3.10 needed (mcp 2.3.0), found $(python3 --version)"

# --- npm (the TypeScript SDK) ------------------------------------------------
# Same staleness rule as scripts/setup.sh (npm writes node_modules/.package-lock.json),
# plus a check that the installed SDK is the pinned one.
want_ts="$(node -p 'require("./package.json").dependencies["@modelcontextprotocol/sdk"]')"
have_ts="$(node -p 'try { require("./node_modules/@modelcontextprotocol/sdk/package.json").version } catch { "" }')"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] \
  || [ "$have_ts" != "$want_ts" ]; then
  say "npm ci"
  npm ci --no-audit --no-fund
fi
ts_sdk="$(node -p 'require("./node_modules/@modelcontextprotocol/sdk/package.json").version')"
[ "$ts_sdk" = "$want_ts" ] || die "installed @modelcontextprotocol/sdk is $ts_sdk, package.json pins $want_ts"
# The 2.x client (2026-07-28) beside it.
want_ts2="$(node -p 'require("./package.json").dependencies["@modelcontextprotocol/client"]')"
ts2_sdk="$(node -p 'try { require("./node_modules/@modelcontextprotocol/client/package.json").version } catch { "" }')"
if [ "$ts2_sdk" != "$want_ts2" ]; then
  say "npm ci (@modelcontextprotocol/client $ts2_sdk, want $want_ts2)"
  npm ci --no-audit --no-fund
  ts2_sdk="$(node -p 'require("./node_modules/@modelcontextprotocol/client/package.json").version')"
fi
[ "$ts2_sdk" = "$want_ts2" ] || die "installed @modelcontextprotocol/client is $ts2_sdk, package.json pins $want_ts2"

# --- venv (the Python SDK) ---------------------------------------------------
req_hash="$(hash_of requirements.txt)"
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys' 2>/dev/null; then
  say "python3 -m venv .venv"
  rm -rf .venv
  python3 -m venv .venv
fi
if [ ! -f .venv/.gapless-req.sha256 ] || [ "$(cat .venv/.gapless-req.sha256)" != "$req_hash" ]; then
  say "pip install -r requirements.txt"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
  echo "$req_hash" > .venv/.gapless-req.sha256
fi
py_sdk="$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("mcp"))')"
grep -qx "mcp==$py_sdk" requirements.txt || die "installed mcp is $py_sdk, not the version pinned in requirements.txt"

# --- server ------------------------------------------------------------------
say "cargo build -p gapless-server-bin (debug)"
(cd "$root" && cargo build -q -p gapless-server-bin)
server_bin="${CARGO_TARGET_DIR:-$root/target}/debug/gapless-server"
[ -x "$server_bin" ] || die "no server binary at $server_bin"

work="$(mktemp -d)"
pids=() # every process started here (server, redis-server, nodes), killed at exit
stop() {
  local pid
  for pid in "$@"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
}
cleanup() {
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop "${pids[$i]}"; done # nodes before their redis-server
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# spawn LOG CMD ARGS... with the placeholder @PORT@ in ARGS replaced by a free port;
# waits until the process accepts on it (5 tries on fresh ports). Sets $pid and $port.
spawn() {
  local log="$1"
  shift
  local try arg args
  for try in 1 2 3 4 5; do
    port="$(free_port)"
    args=()
    for arg in "$@"; do args+=("${arg//@PORT@/$port}"); done
    "${args[@]}" >"$log" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 100); do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
      sleep 0.1
    done
    stop "$pid"
  done
  cat "$log" >&2 || true
  die "$1 did not start (log above)"
}

spawn "$work/server.log" "$server_bin" "${server_args[@]}" --bind 127.0.0.1:@PORT@ --path /mcp --sse-retry-ms 100
server_pid=$pid
url="http://127.0.0.1:$port/mcp"
say "gapless-server at $url (pid $server_pid); TS SDK $ts_sdk, Python SDK mcp $py_sdk"

# --- clients -----------------------------------------------------------------
passed=0
failed=0
run() {
  local name="$1"
  shift
  say "run: $name"
  local t0=$SECONDS
  if timeout --kill-after=5 "$CLIENT_TIMEOUT" "$@"; then
    passed=$((passed + 1))
    say "ok: $name ($((SECONDS - t0)) s)"
  else
    local rc=$?
    failed=$((failed + 1))
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      echo "[sdk] FAIL: $name timed out after $CLIENT_TIMEOUT s" >&2
    else
      echo "[sdk] FAIL: $name exited $rc" >&2
    fi
  fi
}

common=(--url "$url" --count "$COUNT" --interval-ms "$INTERVAL_MS" --target both --cuts 0.5)
run "TypeScript SDK, one cut at 1/2, request + standalone stream" \
  node ts_resume.mjs "${common[@]}" --timeout-ms "$((VARIANT_TIMEOUT * 1000))"
# Three cuts on a request stream: the resumed stream is itself cut and resumed again.
# (Not run for the standalone target or for the Python SDK: see README.md, known SDK bugs.)
run "TypeScript SDK, three cuts, request stream" \
  node ts_resume.mjs --url "$url" --count "$COUNT" --interval-ms "$INTERVAL_MS" \
  --target request --cuts 0.25,0.5,0.75 --timeout-ms "$((VARIANT_TIMEOUT * 1000))"
run "Python SDK, one cut at 1/2, request + standalone stream" \
  .venv/bin/python py_resume.py "${common[@]}" --mode legacy --timeout "$VARIANT_TIMEOUT"
run "TypeScript SDK legacy SSEClientTransport (2024-11-05): tools, a call, a cut" \
  node ts_legacy.mjs --url "$url" --timeout-ms "$((VARIANT_TIMEOUT * 1000))"
run "Python SDK legacy sse_client (2024-11-05): tools, a call, a cut" \
  .venv/bin/python py_legacy.py --url "$url" --timeout "$VARIANT_TIMEOUT"
# MCP 2026-07-28: the clients' default/auto modes settle on it (no session), and an
# elicitation completes by input-required result. Only on the demo host, whose tools
# these clients call (gapless-rmcp's 2026 path is tested with rmcp's own client in
# server/bin/tests/modern_rmcp.rs).
if [ ${#server_args[@]} -eq 0 ]; then
  run "Python SDK mode='auto' (2026-07-28): tools, calls, notifications, an elicitation round trip" \
    .venv/bin/python py_modern.py "$url"
  run "TypeScript SDK 2.x client, versionNegotiation 'auto' (2026-07-28): tools, calls, progress, an elicitation round trip" \
    node ts_modern.mjs "$url"
  say "after the 2026 clients: $(curl -s "${url%/mcp}/metrics" | grep -E '^gapless_(stateless_requests|sessions_created)_total' | tr '\n' ' ')"
fi

# Task event streams (tasks/stream, the draft SEP-2694): the Rust example follow_task
# follows a task_events task through the client guard gapless::task_stream, drops its
# own connection every 37 events and resumes with the guard's `after`; here it runs
# through cut_proxy.py, which also resets every live connection every 0.25 s once the
# task is followed. It exits 0 only if it processed every seq once, in order, and got
# the empty result. Only on the demo host (its task_events tool).
if [[ " ${server_args[*]} " != *" --host"* ]]; then
  say "cargo build -p gapless-server-bin --example follow_task (debug)"
  (cd "$root" && cargo build -q -p gapless-server-bin --example follow_task)
  follow_task="${CARGO_TARGET_DIR:-$root/target}/debug/examples/follow_task"
  run "Rust example follow_task (tasks/stream, the client guard): 600 events, own drops every 37, proxy resets every 0.25 s" \
    python3 - "$url" 0.25 "$follow_task" --count 600 --interval-ms 3 --cut-every 37 <<'PY'
import asyncio
import sys
from urllib.parse import urlsplit

from cut_proxy import CutProxy


async def main() -> int:
    url, period, command = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    up = urlsplit(url)
    proxy = CutProxy([(up.hostname or "127.0.0.1", up.port or 80)])
    await proxy.start()
    via = f"http://127.0.0.1:{proxy.port}{up.path}"
    client = await asyncio.create_subprocess_exec(command[0], via, *command[1:])
    resets = 0
    while client.returncode is None:
        try:
            await asyncio.wait_for(client.wait(), period)
        except asyncio.TimeoutError:
            # Only once the task is followed (a cut tools/call would leave no task id).
            if any(r.rpc == "tasks/stream" for c in proxy.connections for r in c.requests):
                resets += proxy.cut_all() > 0
    await proxy.close()
    print(f"[sdk] cut proxy: {resets} resets, {proxy.accepted} connections")
    if client.returncode == 0 and resets == 0:
        print("[sdk] FAIL: the proxy never reset a stream", file=sys.stderr)
        return 1
    return client.returncode if client.returncode >= 0 else 1


sys.exit(asyncio.run(main()))
PY
fi

if ! kill -0 "$server_pid" 2>/dev/null; then
  failed=$((failed + 1))
  echo "[sdk] FAIL: gapless-server died during the run" >&2
fi
if [ "$failed" -ne 0 ]; then
  echo "[sdk] server log (last 40 lines):" >&2
  tail -n 40 "$work/server.log" >&2 || true
fi
stop "$server_pid"

# --- cluster: three nodes on one redis-server, a round-robin proxy ------------
# A redis-server of this script's own (never one that happens to run), nothing on disk.
mkdir -p "$work/redis"
spawn "$work/redis.log" redis-server --bind 127.0.0.1 --port @PORT@ --dir "$work/redis" \
  --save '' --appendonly no --maxmemory-policy noeviction
redis_url="redis://127.0.0.1:$port/0"
node_pids=()
node_urls=()
for i in 0 1 2; do
  spawn "$work/node$i.log" "$server_bin" "${server_args[@]}" --bind 127.0.0.1:@PORT@ --path /mcp --sse-retry-ms 100 \
    --redis-url "$redis_url"
  node_pids+=("$pid")
  node_urls+=("http://127.0.0.1:$port/mcp")
done
say "cluster: redis-server at $redis_url, nodes at ${node_urls[*]}"

failed_before=$failed
cluster=(--url "${node_urls[0]}" --also-url "${node_urls[1]}" --also-url "${node_urls[2]}"
  --count "$COUNT" --interval-ms "$INTERVAL_MS" --target both --cuts 0.5)
run "TypeScript SDK, cluster of 3 behind a round-robin proxy, one cut at 1/2, request + standalone stream" \
  node ts_resume.mjs "${cluster[@]}" --timeout-ms "$((VARIANT_TIMEOUT * 1000))"
run "Python SDK, cluster of 3 behind a round-robin proxy, one cut at 1/2, request + standalone stream" \
  .venv/bin/python py_resume.py "${cluster[@]}" --mode legacy --timeout "$VARIANT_TIMEOUT"

# The same nodes behind HAProxy: docs/haproxy.cfg with this run's ports, and a
# stats socket to see that every node took connections.
node_addrs=()
for u in "${node_urls[@]}"; do node_addrs+=("${u#http://}"); done
node_addrs=("${node_addrs[@]%/mcp}")
haproxy_config() { # FRONT_PORT -> the configuration on stdout
  awk -v front="127.0.0.1:$1" -v nodes="${node_addrs[*]}" -v stats="$work/haproxy.sock" '
    /^ *server node/ { if (!done) { n = split(nodes, a, " "); for (i = 1; i <= n; i++) printf "    server node%d %s\n", i, a[i]; done = 1 } next }
    /^ *bind 127\.0\.0\.1:8080/ { print "    bind " front; next }
    { print }
    /^global$/ { print "    stats socket " stats " mode 600 level user" }
  ' "$root/docs/haproxy.cfg"
}
spawn "$work/haproxy.log" bash -c "$(declare -f haproxy_config); $(declare -p node_addrs work root); \
  haproxy_config \$1 > '$work/haproxy.cfg' && exec '$haproxy_bin' -db -f '$work/haproxy.cfg'" _ @PORT@
haproxy_pid=$pid
lb_url="http://127.0.0.1:$port/mcp"
haproxy_stat() { # the backend servers' rows of `show stat`: name,stot,status
  python3 - "$work/haproxy.sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
lines = s.makefile().read().splitlines()
head = lines[0].lstrip("# ").split(",")
col = {name: i for i, name in enumerate(head)}
for line in lines[1:]:
    f = line.split(",")
    if len(f) > col["stot"] and f[col["pxname"]] == "nodes" and f[col["svname"]].startswith("node"):
        print(f[col["svname"]], f[col["stot"]], f[col["status"]])
PY
}
for _ in $(seq 1 100); do
  [ "$(haproxy_stat | grep -c ' UP$')" -eq 3 ] && break
  sleep 0.1
done
say "HAProxy at $lb_url over ${node_addrs[*]}"
lb=(--url "$lb_url" --count "$COUNT" --interval-ms "$INTERVAL_MS" --target both --cuts 0.5)
run "TypeScript SDK, cluster of 3 behind HAProxy, one cut at 1/2, request + standalone stream" \
  node ts_resume.mjs "${lb[@]}" --timeout-ms "$((VARIANT_TIMEOUT * 1000))"
run "Python SDK, cluster of 3 behind HAProxy, one cut at 1/2, request + standalone stream" \
  .venv/bin/python py_resume.py "${lb[@]}" --mode legacy --timeout "$VARIANT_TIMEOUT"
# The legacy transport through it: the GET's event stream on one node, each POST on
# the next (docs/SPEC.md §8).
run "TypeScript SDK legacy SSEClientTransport, cluster of 3 behind HAProxy: tools, a call, a cut" \
  node ts_legacy.mjs --url "$lb_url" --timeout-ms "$((VARIANT_TIMEOUT * 1000))"
run "Python SDK legacy sse_client, cluster of 3 behind HAProxy: tools, a call, a cut" \
  .venv/bin/python py_legacy.py --url "$lb_url" --timeout "$VARIANT_TIMEOUT"
# A task's event stream on the cluster (docs/SPEC.md §8.11): the task runs on one
# node, each of the example's streams (a drop every 37 events) lands on the next.
if [ -n "${follow_task:-}" ]; then
  run "Rust example follow_task, cluster of 3 behind HAProxy: 300 events, a new connection every 37" \
    "$follow_task" "$lb_url" --count 300 --interval-ms 3 --cut-every 37
fi
say "HAProxy's connections per node (name, total, status): $(haproxy_stat | tr '\n' ';')"
if haproxy_stat | awk '$2 == 0 { bad = 1 } END { exit !(bad || NR != 3) }'; then
  failed=$((failed + 1))
  echo "[sdk] FAIL: HAProxy did not send connections to every node" >&2
fi
if ! kill -0 "$haproxy_pid" 2>/dev/null; then
  failed=$((failed + 1))
  echo "[sdk] FAIL: haproxy died during the run" >&2
fi

for i in 0 1 2; do
  if ! kill -0 "${node_pids[$i]}" 2>/dev/null; then
    failed=$((failed + 1))
    echo "[sdk] FAIL: cluster node $i (${node_urls[$i]}) died during the run" >&2
  fi
done
if [ "$failed" -ne "$failed_before" ]; then
  for i in 0 1 2; do
    echo "[sdk] cluster node $i (${node_urls[$i]}) log (last 40 lines):" >&2
    tail -n 40 "$work/node$i.log" >&2 || true
  done
fi
echo "sdk: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
