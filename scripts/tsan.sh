#!/usr/bin/env bash
# Runs the engine's multi-threaded tests (stress, async facade) under
# ThreadSanitizer. Needs nightly and rust-src (installed here if missing);
# std is rebuilt with the sanitizer (-Zbuild-std), so the first run takes a
# few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
rustup component add rust-src --toolchain nightly >/dev/null
target=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Zsanitizer=thread ${RUSTFLAGS:-}"
export RUSTDOCFLAGS="-Zsanitizer=thread"
export TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}"
export CARGO_TARGET_DIR=target/tsan
cargo +nightly test -Zbuild-std --target "$target" -p gapless --test stress --test facade --test seeds "$@"
