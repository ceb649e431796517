#!/usr/bin/env bash
# Shows the loom models are not vacuous: builds the engine with each
# deliberately broken ordering or protocol step (cfg gapless_mutant, see
# engine/src/ring/producer.rs) and fails unless loom reports a failure for each.
#   relaxed_publish       the head store that publishes an event is Relaxed
#   late_evict            eviction clears chunk slots before advancing `oldest`
#   no_publish_fence      the producer has no StoreLoad fence between storing
#                         `head` and looking for sleepers, so a reader that
#                         registers meanwhile can sleep through the event
#   uncounted_registrant  a registering reader is not counted in
#                         `registrants`, so the producer never looks for it
set -uo pipefail
cd "$(dirname "$0")/.."
export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-2}
status=0
for m in relaxed_publish late_evict no_publish_fence uncounted_registrant; do
  log=$(mktemp)
  start=$(date +%s)
  RUSTFLAGS="--cfg gapless_loom --cfg gapless_mutant=\"$m\"" CARGO_TARGET_DIR=target/loom-mutant \
    RUST_BACKTRACE=0 cargo test -p gapless-loom-tests --release -- --test-threads=1 >"$log" 2>&1
  rc=$?
  failed=$(grep -E '^test .* FAILED$|panicked at|Causality violation|deadlock' "$log" | head -3)
  if [ $rc -ne 0 ] && [ -n "$failed" ]; then
    echo "mutant $m: caught by loom in $(( $(date +%s) - start ))s"
    echo "$failed" | sed 's/^/    /'
  elif [ $rc -ne 0 ]; then
    echo "mutant $m: build or harness error, not a loom finding:"; tail -20 "$log"; status=1
  else
    echo "mutant $m: NOT caught (the models are too weak)"; status=1
  fi
  rm -f "$log"
done
exit $status
