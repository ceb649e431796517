#!/usr/bin/env bash
# Shows the loom models are not vacuous: builds the engine with each
# deliberately broken ordering or protocol step (cfg gapless_mutant, see
# engine/src/ring/producer.rs and producer/evict.rs) and fails unless loom
# reports a failure for each.
#   relaxed_publish       the head store that publishes an event is Relaxed
#   late_evict            eviction clears chunk slots before advancing `oldest`
#   no_publish_fence      the producer has no StoreLoad fence between storing
#                         `head` and looking for sleepers, so a reader that
#                         registers meanwhile can sleep through the event
#   uncounted_registrant  a registering reader is not counted in
#                         `registrants`, so the producer never looks for it
#   unfenced_progress     a paced subscription stores its progress and reads
#                         `producers_waiting` with no fence between, so a
#                         paced publisher about to sleep is never woken
#                         (session/pace.rs; caught by
#                         paced_publish_vs_consume_and_detach)
#   unpinned_ticket       a migration ticket keeps only the cursor and the
#                         redeem takes the gap, which a publish may have
#                         evicted meanwhile (session/migrate.rs; caught by
#                         migration_hand_off_racing_eviction)
#   late_close_mark       close marks the session closed after it woke the
#                         paced publishers, so one of them sleeps again
#                         (session/session.rs; caught by
#                         close_racing_subscription_and_resume)
#   high_before_head      a stream snapshot reads its stream's high-water
#                         mark before the head, so an event of the stream
#                         published in between is in neither the snapshot
#                         (which looks at or below the mark) nor the live
#                         follower's range
#                         (ring/snapshot.rs; caught by
#                         stream_snapshot_then_follow_has_no_hole)
#   unslotted_grow        the ring's short first chunk grows into a whole one
#                         that is never put in its slot, so a reader past the
#                         short length finds the short chunk (ring/producer/roll.rs)
#   stale_short_chunk     a cursor keeps its cached short first chunk past its
#                         length, as if every chunk were whole (ring/cursor.rs)
#   reclaim_under_lease   a lease at its chunk's end reclaims before giving
#                         its writer lock up, so the reclaim passes over the
#                         lease's own ring (session/lease.rs; caught by
#                         lease_reclaims_its_own_ring_at_its_chunk_end)
# Arguments name the mutants to run (default: all of them). Each rebuilds the
# loom tests (its cfg differs) and runs every model: about 3-4.5 min per
# mutant on the 2-core development machine.
set -uo pipefail
cd "$(dirname "$0")/.."
export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-2}
status=0
all="relaxed_publish late_evict no_publish_fence uncounted_registrant unfenced_progress unpinned_ticket late_close_mark high_before_head unslotted_grow stale_short_chunk reclaim_under_lease"
for m in ${@:-$all}; do
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
