#!/usr/bin/env bash
# Runs the multi-threaded tests under ThreadSanitizer; CI runs it. Needs
# nightly and rust-src (installed here if missing); std is rebuilt with the
# sanitizer (-Zbuild-std). In order:
#   1. the engine's stress, async facade and seed scenario tests;
#   2. gapless-server's own tests (its library's unit tests);
#   3. gapless-server-bin's `http` tests: the server over loopback with a
#      real client, on multi-threaded runtimes. Built without the binary's
#      jemalloc (its feature): these tests run the library in-process, but
#      cargo builds the binary for them, and jemalloc's C under TSan would
#      show its reuse of memory across threads as races if one ever ran it.
# `scripts/tsan.sh engine` runs only step 1. Extra arguments go to every
# `cargo test` (e.g. a test name filter). Measured here with the build warm:
# 3 min in all, of which steps 2 and 3 run 7 s; a cold build of the
# server's dependencies under TSan adds far more than the engine's (37 min
# on this 2-core machine under a load of 13: not a fair figure; measure CI).
#
# Suppressions: scripts/tsan.supp, one entry, a report inside tokio's I/O
# driver (dispatch_event on a freshly registered socket) against the
# construction of its ScheduledIo, ordered by epoll, which TSan does not
# see; the file says why and how narrowly it matches. Nothing in gapless is
# suppressed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
rustup component add rust-src --toolchain nightly >/dev/null
target=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Zsanitizer=thread ${RUSTFLAGS:-}"
export RUSTDOCFLAGS="-Zsanitizer=thread"
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}"
export CARGO_TARGET_DIR=target/tsan
scope=all
if [ "${1:-}" = engine ]; then
  scope=engine
  shift
fi
t() { cargo +nightly test -Zbuild-std --target "$target" "$@"; }
t -p gapless --test stress --test facade --test seeds "$@"
[ "$scope" = engine ] && exit 0
t -p gapless-server --lib "$@"
t -p gapless-server-bin --no-default-features --test http "$@"
