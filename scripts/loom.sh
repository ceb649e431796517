#!/usr/bin/env bash
# Runs the loom models in loom-tests/ through the engine's shim: the ring's
# (tests/ring.rs) and the session layer's (tests/session.rs).
#   scripts/loom.sh          quick: LOOM_MAX_PREEMPTIONS=2 (what CI runs)
#   scripts/loom.sh deep     LOOM_MAX_PREEMPTIONS=3 (minutes, not seconds)
# Extra arguments go to the test binaries (e.g. a model name).
# Measured on the 2-core development machine, shared with other builds
# (release, models only; the build adds about a minute, two from scratch):
#   quick: ring 21 s (publish_racing_reads 17 s), session 22 s
#          (migration_hand_off_racing_eviction 15 s,
#          paced_publish_vs_consume_and_detach 6 s,
#          close_racing_subscription_and_resume 1.4 s); about 45 s in all
#   deep:  ring 164 s (publish_racing_reads 154 s), session 396 s
#          (migration_hand_off_racing_eviction 282 s,
#          paced_publish_vs_consume_and_detach 59 s,
#          close_racing_subscription_and_resume 55 s); about 9.5 min in all
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
