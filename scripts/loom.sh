#!/usr/bin/env bash
# Runs the loom models in loom-tests/ through the engine's shim.
#   scripts/loom.sh          quick: LOOM_MAX_PREEMPTIONS=2 (what CI runs)
#   scripts/loom.sh deep     LOOM_MAX_PREEMPTIONS=3 (minutes, not seconds)
# Extra arguments go to the test binary (e.g. a model name).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-quick}
[ $# -gt 0 ] && shift
case "$mode" in
  quick) export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-2} ;;
  deep) export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-3} ;;
  *) echo "usage: $0 [quick|deep] [test filter]" >&2; exit 2 ;;
esac
echo "loom: LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS"
RUSTFLAGS="--cfg gapless_loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom \
  cargo test -p gapless-loom-tests --release -- --test-threads=1 --nocapture "$@"
