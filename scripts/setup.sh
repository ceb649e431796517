#!/usr/bin/env bash
# Installs everything the build and the test suite need, idempotently:
# Rust components, the nightly toolchain with Miri (deep checks), cargo-fuzz,
# and the npm/pip packages of the SDK and conformance tests.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add rustfmt clippy >/dev/null
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
rustup component add miri rust-src --toolchain nightly >/dev/null
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
for d in server/bin/tests/sdk server/bin/tests/conformance; do
  if [ -f "$d/package.json" ]; then
    if [ ! -d "$d/node_modules" ] || [ "$d/package-lock.json" -nt "$d/node_modules/.package-lock.json" ]; then
      (cd "$d" && npm ci --no-audit --no-fund)
    fi
  fi
done
if [ -f server/bin/tests/sdk/requirements.txt ]; then
  if [ ! -x server/bin/tests/sdk/.venv/bin/python ]; then
    python3 -m venv server/bin/tests/sdk/.venv
  fi
  server/bin/tests/sdk/.venv/bin/pip install -q -r server/bin/tests/sdk/requirements.txt
fi
echo "setup: done"
