#!/usr/bin/env bash
# Runs the official MCP conformance suite (server mode) against the
# gapless-server binary on a free loopback port.
#
# HOST=rmcp-conformance runs it against the same fixtures written as an rmcp
# handler on gapless-rmcp (server/rmcp/examples/conformance/mod.rs), against
# the same baseline. Default: the demo host.
#  1. each required scenario alone: it must report 0 failed and 0 warnings
#     (the CLI exits 0 even with warnings, so its "Passed:" line is parsed);
#  2. the whole suite (--suite all: active and pending) against baseline.yml,
#     in which any failing or warning scenario must be listed with a reason.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$here"
[ -d node_modules/@modelcontextprotocol/conformance ] || npm ci --no-audit --no-fund
bin="$root/target/debug/gapless-server"
(cd "$root" && cargo build -q -p gapless-server-bin)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
host=${HOST:-demo}
case "$host" in
  demo) baseline="$here/baseline.yml" ;;
  rmcp-conformance) baseline="$here/baseline.yml" ;;
  *) echo "conformance: HOST must be demo or rmcp-conformance, not $host" >&2; exit 2 ;;
esac
echo "--- host: $host"
"$bin" --bind "127.0.0.1:$port" --sse-retry-ms 200 --host "$host" >"$here/server-$host.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
url="http://localhost:$port/mcp"
required=(server-initialize ping logging-set-level tools-list tools-call-simple-text tools-call-with-logging
  tools-call-with-progress tools-call-error tools-call-sampling tools-call-elicitation server-sse-polling
  server-sse-multiple-streams dns-rebinding-protection)
status=0
for s in "${required[@]}"; do
  out=$(timeout 120 npx conformance server --url "$url" --scenario "$s" 2>&1) || true
  line=$(echo "$out" | grep -E '^Passed: [0-9]+/[0-9]+, [0-9]+ failed, [0-9]+ warnings' | tail -1)
  if [[ "$line" =~ ^Passed:\ ([0-9]+)/([0-9]+),\ ([0-9]+)\ failed,\ ([0-9]+)\ warnings ]] \
     && [ "${BASH_REMATCH[3]}" = 0 ] && [ "${BASH_REMATCH[4]}" = 0 ] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
    echo "conformance $s: $line"
  else
    echo "conformance $s: FAILED (${line:-no result line})"; echo "$out" | tail -30; status=1
  fi
done
echo "--- whole suite (active + pending) against $(basename "$baseline")"
if ! timeout 600 npx conformance server --url "$url" --suite all --expected-failures "$baseline" >"$here/suite-$host.log" 2>&1; then
  tail -40 "$here/suite-$host.log"; status=1
else
  grep -E '^Total:|Baseline check' "$here/suite-$host.log" || true
fi
exit $status
