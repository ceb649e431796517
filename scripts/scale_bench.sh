#!/usr/bin/env bash
# Many streams on one node (issue 45; BENCHMARKS.md): `scripts/latency.sh
# local` at 1, 100, 1 000 and 10 000 sessions, each with its standalone GET
# stream open and emitting stamped events at a steady rate, one in-process
# release node and benches/e2e's `gapless-load latency` (one thread). For
# each size it prints the node's RSS per session and per open stream, the
# node's and the client's CPU per delivered event (apart: they share the
# machine), and publish → client-read latency p50, p99, p99.9 and max.
#
#   scripts/scale_bench.sh                  the four sizes, RATE events/s in all
#   SIZES="1000 10000" RATE=10000 SECS=5 scripts/scale_bench.sh
#
# Each call's connection closes once its response head is in (DETACH=1,
# the default here; DETACH= keeps it open): the client then holds one
# descriptor per session, its stream's, and 10 000 sessions fit this
# machine's open-file limit (`ulimit -Hn`: 20 000). Events published in the
# first WARMUP_MS (default 5 000), while the calls start and connect, are
# checked but not timed.
#
# RATE (default 10 000) is the aggregate rate: each of S streams emits an
# event every S × 1000 / RATE ms (at least 1 ms, so 1 stream runs at 1 000
# events/s at most), for SECS seconds (default 10: 5 timed). The 1-minute load is
# printed before each size (the script waits for QUIET first): a figure
# measured above 0.5 is not a verdict.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${SIZES:-1 100 1000 10000}
export DETACH=${DETACH-1}
export WARMUP_MS=${WARMUP_MS-5000}
rate=${RATE:-10000}
secs=${SECS:-10}
if [ -z "${SERVER:-}" ]; then
  cargo build -q --release -p gapless-server-bin
  export SERVER=${CARGO_TARGET_DIR:-target}/release/gapless-server
fi
if [ -z "${LOAD:-}" ]; then
  cargo build -q --release --manifest-path benches/e2e/Cargo.toml --target-dir benches/e2e/target -p gapless-load
  export LOAD=benches/e2e/target/release/gapless-load
fi
# Before each size, wait (up to 5 minutes) for the 1-minute load to fall to
# QUIET (default 0.45), so that each row may be a verdict.
quiet=${QUIET:-0.45}
for s in $sizes; do
  for _ in $(seq 60); do
    python3 -c "import sys; sys.exit(0 if float(open('/proc/loadavg').read().split()[0]) <= $quiet else 1)" && break
    sleep 5
  done
  interval=$(( s * 1000 / rate ))
  [ "$interval" -ge 1 ] || interval=1
  count=$(( secs * 1000 / interval ))
  [ "$count" -ge 1 ] || count=1
  scripts/latency.sh local "$s" "$count" "$interval"
  echo
done
