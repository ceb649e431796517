#!/usr/bin/env bash
# The official MCP SDK clients (TypeScript 1.32.2, Python mcp 2.3.0; the scripts of
# server/bin/tests/sdk/) against gapless-gateway in front of the official SDKs' own
# servers (tests/upstreams/: TypeScript with its InMemoryEventStore, and Python), and
# bridging the TypeScript one over stdio (--upstream-cmd).
# Each client cuts its connections to the gateway mid-stream through its own TCP
# proxy and checks that every notification arrived exactly once, in order, on the
# request stream and on the standalone stream. Installs nothing itself: run
# scripts/setup.sh first (.ci/run does). Stops everything it started; exits non-zero
# if any run failed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
sdk="$root/server/bin/tests/sdk"
COUNT="${COUNT:-1000}"
TIMEOUT="${TIMEOUT:-120}"

say() { echo "[gateway-sdk] $*"; }
die() { echo "[gateway-sdk] FAIL: $*" >&2; exit 1; }

[ -d "$here/upstreams/node_modules/@modelcontextprotocol/sdk" ] || die "run scripts/setup.sh (tests/upstreams packages)"
[ -d "$sdk/node_modules/@modelcontextprotocol/sdk" ] || die "run scripts/setup.sh (the SDK clients)"
[ -x "$sdk/.venv/bin/python" ] || die "run scripts/setup.sh (the Python SDK's venv)"

say "cargo build -p gapless-gateway (debug)"
(cd "$root" && cargo build -q -p gapless-gateway)
gateway_bin="${CARGO_TARGET_DIR:-$root/target}/debug/gapless-gateway"

work="$(mktemp -d)"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# upstream NAME CMD...: starts an upstream that prints "listening <port>"; sets $up_url.
upstream() {
  local name="$1" log="$work/$1.log"
  shift
  "$@" >"$log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 1 100); do
    if grep -q '^listening ' "$log"; then
      up_url="http://127.0.0.1:$(grep -m1 '^listening ' "$log" | cut -d' ' -f2)/mcp"
      return 0
    fi
    sleep 0.1
  done
  cat "$log" >&2
  die "$name did not start"
}

# gateway UPSTREAM_URL: starts the gateway on a free port; sets $gw_url.
gateway() {
  local port log="$work/gateway.log"
  port="$(free_port)"
  "$gateway_bin" --upstream "$1" --bind "127.0.0.1:$port" --sse-retry-ms 100 >"$log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then gw_url="http://127.0.0.1:$port/mcp"; return 0; fi
    sleep 0.1
  done
  cat "$log" >&2
  die "the gateway did not start"
}

failed=0
run() {
  local name="$1"
  shift
  say "run: $name"
  if (cd "$sdk" && timeout --kill-after=5 "$TIMEOUT" "$@"); then
    say "ok: $name"
  else
    failed=$((failed + 1))
    echo "[gateway-sdk] FAIL: $name (exit $?)" >&2
  fi
}

clients() {
  local label="$1"
  run "$label: TypeScript SDK client, one cut at 1/2, request + standalone" \
    node ts_resume.mjs --url "$gw_url" --count "$COUNT" --interval-ms 2 --target both --cuts 0.5 --timeout-ms 45000
  run "$label: TypeScript SDK client, three cuts, request stream" \
    node ts_resume.mjs --url "$gw_url" --count "$COUNT" --interval-ms 2 --target request --cuts 0.25,0.5,0.75 --timeout-ms 45000
  run "$label: Python SDK client, one cut at 1/2, request + standalone" \
    .venv/bin/python py_resume.py --url "$gw_url" --count "$COUNT" --interval-ms 2 --target both --cuts 0.5 --mode legacy --timeout 45
  run "$label: TypeScript SDK legacy SSEClientTransport (2024-11-05): tools, a call, a cut" \
    node ts_legacy.mjs --url "$gw_url" --timeout-ms 45000
  run "$label: Python SDK legacy sse_client (2024-11-05): tools, a call, a cut" \
    .venv/bin/python py_legacy.py --url "$gw_url" --timeout 45
}

upstream ts node "$here/upstreams/ts_upstream.mjs" --port 0 --event-store
say "TypeScript SDK server at $up_url"
gateway "$up_url"
say "gapless-gateway at $gw_url"
clients "TS server"
kill "${pids[1]}" "${pids[0]}" 2>/dev/null || true
pids=()

upstream py "$sdk/.venv/bin/python" "$here/upstreams/py_upstream.py" --port 0
say "Python SDK server at $up_url"
gateway "$up_url"
say "gapless-gateway at $gw_url"
clients "Python server"

kill "${pids[1]}" "${pids[0]}" 2>/dev/null || true
pids=()

# A stdio server, a child per session. Its notifications are the one
# request's in flight (docs/SPEC.md §10.4), so the request stream is tested.
port="$(free_port)"
"$gateway_bin" --upstream-cmd "node $here/upstreams/ts_upstream.mjs --stdio" --bind "127.0.0.1:$port" \
  --sse-retry-ms 100 >"$work/gateway.log" 2>&1 &
pids+=("$!")
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
gw_url="http://127.0.0.1:$port/mcp"
say "gapless-gateway at $gw_url, bridging the TypeScript SDK server over stdio"
run "stdio server: TypeScript SDK client, three cuts, request stream" \
  node ts_resume.mjs --url "$gw_url" --count "$COUNT" --interval-ms 2 --target request --cuts 0.25,0.5,0.75 --timeout-ms 45000
run "stdio server: Python SDK client, one cut at 1/2, request stream" \
  .venv/bin/python py_resume.py --url "$gw_url" --count "$COUNT" --interval-ms 2 --target request --cuts 0.5 --mode legacy --timeout 45

[ "$failed" -eq 0 ] || { tail -n 30 "$work/gateway.log" >&2 || true; die "$failed run(s) failed"; }
say "all runs passed"
