#!/usr/bin/env bash
# The cluster soak (docs/SPEC.md §8): the long forms of what `.ci/run` runs
# briefly. Each part starts its own redis-server and gapless-server
# processes on free loopback ports.
#
#   scripts/soak.sh              # ROUNDS=10 rounds of the cluster scenarios,
#                                # 3000 differential histories, the SDK runs
#                                # with 20 000 events
#   ROUNDS=50 scripts/soak.sh    # longer
#
# Stops at the first failure and says which part and round failed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-10}
HISTORIES=${HISTORIES:-3000}
SDK_COUNT=${SDK_COUNT:-20000}
start=$(date +%s)
say() { echo "[soak $(( $(date +%s) - start ))s] $*"; }

bash scripts/setup.sh
cargo build -q --workspace --tests

for r in $(seq 1 "$ROUNDS"); do
  say "round $r/$ROUNDS: cluster scenarios (kill -9, failover, Redis down, migration, two writers)"
  cargo test -q -p gapless-server-bin --test cluster --test decision_table \
    || { say "FAIL: cluster scenarios, round $r"; exit 1; }
  say "round $r/$ROUNDS: store and batched appends"
  cargo test -q -p gapless-redis --test store --test appender \
    || { say "FAIL: store tests, round $r"; exit 1; }
done

say "differential: $HISTORIES random histories on both stores"
GAPLESS_DIFF_HISTORIES=$HISTORIES cargo test -q --release -p gapless-redis --test differential \
  || { say "FAIL: differential"; exit 1; }

say "SDK clients, $SDK_COUNT events per run, one server and a 3-node cluster"
COUNT=$SDK_COUNT CLIENT_TIMEOUT=600 VARIANT_TIMEOUT=280 bash server/bin/tests/sdk/run.sh \
  || { say "FAIL: SDK runs"; exit 1; }

say "all green"
