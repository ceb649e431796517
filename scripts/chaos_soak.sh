#!/usr/bin/env bash
# Combined chaos, many rounds (docs/SPEC.md §8.6 "Combined chaos"): each
# round a fresh Redis Cluster of 3 masters with a replica each, three
# gapless-server nodes behind HAProxy, SSE and WebSocket clients, and a
# Redis master killed together with a gapless node. A round fails if any
# client waits more than 5 s for anything, or a call's events come out of
# order, or a result follows a hole. CI runs one round
# (server/bin/tests/cluster_chaos.rs).
#   ROUNDS=20 bash scripts/chaos_soak.sh
#   GAPLESS_CHAOS_SEED=<n> replays a round's random choices (not its timing).
#   GAPLESS_TEST_NODE_LOGS=1 shows the nodes' warnings.
set -euo pipefail
cd "$(dirname "$0")/.."
GAPLESS_CHAOS_ROUNDS=${ROUNDS:-20} cargo test -q -p gapless-server-bin --test cluster_chaos -- --nocapture
