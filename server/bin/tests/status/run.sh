#!/usr/bin/env bash
# The status page in a real headless browser (docs/SPEC.md §9.3): starts the
# bundled gapless-server (debug build) on a free loopback port with a ring of
# 8 events, and runs status_check.mjs, which causes a gap_not_covered
# refusal and a refusal whose reason carries markup over HTTP, then opens
# /status in Debian's chromium (through playwright-core) and checks what the
# page shows. The screenshot lands in target/status-test/status.png.
# Installs what it needs idempotently (chromium: scripts/setup.sh; npm ci here).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
cd "$here"
say() { echo "[status] $*"; }
die() { echo "[status] FAIL: $*" >&2; exit 1; }

chromium="$(command -v chromium || true)"
[ -n "$chromium" ] || die "chromium not found (scripts/setup.sh installs it)"
want="$(node -p 'require("./package.json").dependencies["playwright-core"]')"
have="$(node -p 'try { require("./node_modules/playwright-core/package.json").version } catch { "" }')"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] || [ "$have" != "$want" ]; then
  say "npm ci"
  npm ci --no-audit --no-fund
fi

say "cargo build -p gapless-server-bin (debug)"
(cd "$root" && cargo build -q -p gapless-server-bin)
server_bin="${CARGO_TARGET_DIR:-$root/target}/debug/gapless-server"
out="${CARGO_TARGET_DIR:-$root/target}/status-test"
mkdir -p "$out"
rm -f "$out/status.png"

pid=
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; }
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
for try in 1 2 3 4 5; do
  port="$(free_port)"
  RUST_LOG=warn "$server_bin" --bind "127.0.0.1:$port" --ring-events 8 >"$out/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break 2; fi
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  pid=
done
[ -n "$pid" ] || { cat "$out/server.log" >&2; die "gapless-server did not start"; }
say "gapless-server at http://127.0.0.1:$port (chromium: $("$chromium" --version 2>/dev/null || echo unknown))"
timeout --kill-after=5 120 node status_check.mjs "http://127.0.0.1:$port" "$chromium" "$out/status.png"
[ -s "$out/status.png" ] || die "no screenshot"
say "passed; screenshot $out/status.png"
