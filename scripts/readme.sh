#!/usr/bin/env bash
# Runs what README.md shows, so that the front page stays true (.ci/run
# calls it): the transcript's refused resume (a ring of 64 events, a call of
# 200, a resume from its first event: 409 gap_not_covered, oldest seq 141)
# and a covered resume beside it; the metrics line; the `hello` example
# (server/examples/hello.rs) answering a tool call; gapless-gateway in front
# of it; rmcp's counter on gapless-rmcp (`--example rmcp_counter`); and two
# cluster nodes on a redis-server of this script's own, a call on one
# resumed on the other. Debug builds, free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p gapless-server-bin -p gapless-gateway
cargo build -q -p gapless-server --example hello
cargo build -q -p gapless-rmcp --example rmcp_counter
bin=${CARGO_TARGET_DIR:-target}/debug
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "readme.sh: $*" >&2; tail -n 20 "$work"/*.log >&2 2>/dev/null || true; exit 1; }
up() { # url: waits until something answers there
  for _ in $(seq 300); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done
  fail "nothing answers at $1"
}
start() { # log name, then the command line
  local name=$1
  shift
  "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
}
H=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream')
init() { # endpoint -> the new session's id (initialize, then notifications/initialized)
  curl -si "$1" "${H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"readme","version":"1"}}}' >"$work/init"
  grep -q '^HTTP/1.1 200' "$work/init" || fail "initialize at $1: $(head -1 "$work/init")"
  local sid
  sid=$(grep -i '^mcp-session-id:' "$work/init" | tr -d '\r' | cut -d' ' -f2)
  [ -n "$sid" ] || fail "initialize at $1 gave no session id"
  curl -s -o /dev/null "$1" "${H[@]}" -H "mcp-session-id: $sid" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  echo "$sid"
}
call() { # endpoint, session id, tool, arguments -> the call's SSE stream on stdout
  curl -sN -m 20 "$1" "${H[@]}" -H "mcp-session-id: $2" \
    -d "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"$3\",\"arguments\":$4}}"
}
resume() { # endpoint, session id, cursor -> status line, headers and body
  curl -si -m 20 "$1" -H "mcp-session-id: $2" -H 'accept: text/event-stream' -H "last-event-id: $3"
}

# The transcript: a ring of 64 events, a call of 200, a resume from its first.
port=$(free_port)
start server "$bin/gapless-server" --bind "127.0.0.1:$port" --ring-events 64
up "http://127.0.0.1:$port/"
mcp="http://127.0.0.1:$port/mcp"
sid=$(init "$mcp")
call "$mcp" "$sid" emit_events '{"count": 200}' >"$work/call"
grep -q '"text":"emitted 200"' "$work/call" || fail "the call of 200 events did not answer"
ids=$(grep -c '^id:' "$work/call")
[ "$ids" = 202 ] || fail "the call's stream carried $ids ids, not 202 (a priming event, 200 events, the result)"
first=$(grep '^id:' "$work/call" | sed -n 2p | cut -d' ' -f2)
prefix=${first%-*}
resume "$mcp" "$sid" "$first" >"$work/refused"
head -1 "$work/refused" | grep -q '^HTTP/1.1 409' || fail "the resume from $first: $(head -1 "$work/refused"), not 409"
grep -q "\"error\":\"gap_not_covered\"" "$work/refused" || fail "the 409 is not gap_not_covered: $(tail -1 "$work/refused")"
grep -q "\"oldest\":\"${prefix}-141\"" "$work/refused" || fail "the 409 does not name ${prefix}-141 as the oldest: $(tail -1 "$work/refused")"
echo "transcript: $(tail -1 "$work/refused")"
# A resume the ring covers: every later event of the stream, then the result.
resume "$mcp" "$sid" "${prefix}-200" >"$work/covered"
head -1 "$work/covered" | grep -q '^HTTP/1.1 200' || fail "the covered resume: $(head -1 "$work/covered")"
got=$(grep '^id:' "$work/covered" | cut -d' ' -f2 | tr '\n' ' ')
[ "$got" = "${prefix}-201 ${prefix}-202 ${prefix}-203 ${prefix}-204 " ] || fail "the covered resume carried $got"
# Operate it: the refusal is counted.
curl -s "http://127.0.0.1:$port/metrics" | grep -qx 'gapless_resumes_total{outcome="gap_not_covered"} 1' ||
  fail "/metrics does not count the refused resume"
echo "metrics: the refused resume is counted"

# Embed it in your axum app: the hello example.
hport=$(free_port)
start hello "$bin/examples/hello" "127.0.0.1:$hport"
up "http://127.0.0.1:$hport/health"
[ "$(curl -s "http://127.0.0.1:$hport/health")" = ok ] || fail "hello's /health is not ok"
hello="http://127.0.0.1:$hport/api/mcp"
sid=$(init "$hello")
call "$hello" "$sid" hello '{}' >"$work/hello"
grep -q '"data":"hi"' "$work/hello" && grep -q '"text":"hello"' "$work/hello" || fail "hello's tool call: $(cat "$work/hello")"
echo "hello example: the tool answered on its own stream"

# Put it in front of any MCP server: the gateway in front of hello.
gport=$(free_port)
start gateway "$bin/gapless-gateway" --bind "127.0.0.1:$gport" --upstream "$hello"
up "http://127.0.0.1:$gport/"
gw="http://127.0.0.1:$gport/mcp"
sid=$(init "$gw")
call "$gw" "$sid" hello '{}' >"$work/gateway"
grep -q '"text":"hello"' "$work/gateway" || fail "the call through the gateway: $(cat "$work/gateway")"
grep -q '^id: ' "$work/gateway" || fail "the gateway's stream has no event ids"
echo "gateway: hello's tool call through it, with gapless's event ids"

# Serve an rmcp handler: rmcp's counter on gapless-rmcp.
rport=$(free_port)
start rmcp "$bin/examples/rmcp_counter" "127.0.0.1:$rport"
up "http://127.0.0.1:$rport/"
sid=$(init "http://127.0.0.1:$rport/mcp")
call "http://127.0.0.1:$rport/mcp" "$sid" increment '{}' >"$work/counter"
grep -q '^id: ' "$work/counter" && grep -q '"result"' "$work/counter" || fail "the counter's call: $(cat "$work/counter")"
echo "rmcp counter: a call answered on a gapless stream"

# Run a cluster: two nodes on one Redis; a call on one, resumed on the other.
redis=$(free_port)
start redis redis-server --bind 127.0.0.1 --port "$redis" --dir "$work" --save '' --appendonly no --maxmemory-policy noeviction
for _ in $(seq 100); do redis-cli -p "$redis" ping >/dev/null 2>&1 && break; sleep 0.05; done
a=$(free_port) b=$(free_port)
start node-a "$bin/gapless-server" --bind "127.0.0.1:$a" --redis-url "redis://127.0.0.1:$redis/0"
start node-b "$bin/gapless-server" --bind "127.0.0.1:$b" --redis-url "redis://127.0.0.1:$redis/0"
up "http://127.0.0.1:$a/"
up "http://127.0.0.1:$b/"
sid=$(init "http://127.0.0.1:$a/mcp")
call "http://127.0.0.1:$a/mcp" "$sid" emit_events '{"count": 5}' >"$work/cluster"
grep -q '"text":"emitted 5"' "$work/cluster" || fail "the call on node A: $(cat "$work/cluster")"
first=$(grep '^id:' "$work/cluster" | sed -n 2p | cut -d' ' -f2)
resume "http://127.0.0.1:$b/mcp" "$sid" "$first" >"$work/resumed"
head -1 "$work/resumed" | grep -q '^HTTP/1.1 200' || fail "the resume on node B: $(head -1 "$work/resumed")"
n=$(grep -c '"method":"notifications/message"' "$work/resumed")
[ "$n" = 4 ] && grep -q '"text":"emitted 5"' "$work/resumed" || fail "the resume on node B carried $n of the 4 later events"
echo "cluster: a call on node A resumed on node B, the 4 later events and the result"
echo "readme.sh: every run the README shows works"
