#!/usr/bin/env bash
# Redis Cluster master failovers with every gapless node alive, many rounds
# (docs/SPEC.md §8.6; BENCHMARKS.md): each round a fresh Redis Cluster of 3
# masters with a replica each, two gapless-server nodes, a task of 2 000
# events on one read on the other, and the master holding the task node's
# lease (even rounds) or the task's keys (odd rounds) killed mid-task. A
# round fails if the live node's task is ever `failed` or its stream is not
# whole. CI runs one round (server/bin/tests/cluster_failover.rs).
#   ROUNDS=50 bash scripts/failover_soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
GAPLESS_FAILOVER_ROUNDS=${ROUNDS:-50} cargo test -q -p gapless-server-bin --test cluster_failover -- --nocapture
