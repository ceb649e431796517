#!/usr/bin/env bash
# Instructions per operation of the in-process publish and resume paths, under callgrind
# (BENCHMARKS.md): `(Ir(2N) - Ir(N)) / N` for each contender of
# `interleaved --instructions`. These counts repeat exactly whatever the load.
#
#   scripts/instructions.sh            # the working tree
#   scripts/instructions.sh REV...     # each commit, built in a temporary worktree
#   CONTENDERS="gapless floor" scripts/instructions.sh   # some contenders only
#
# Needs valgrind (scripts/setup.sh does not install it: benchmarks are not
# part of the test suite; `apt-get install valgrind`).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200000}
N_RESUME=${N_RESUME:-1000}
# resume_S_G: one per-stream resume of G events among S interleaved streams
# (instructions per resume, not per event).
CONTENDERS=${CONTENDERS:-"gapless session lease floor broadcast gapless_sleeping broadcast_sleeping resume_8_16 resume_8_256 resume_256_8 resume_1024_2"}
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }

ir() { # binary contender n -> total instructions
  local out
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$1" --instructions "$2" "$3" >/dev/null 2>&1
  grep -m1 '^summary:' "$out" | awk '{print $2}'
  rm -f "$out"
}

measure() { # label binary
  local out
  out=$(mktemp)
  for c in $CONTENDERS; do
    local a b n=$N
    # A resume is about a hundred times a publish: fewer of them.
    case $c in resume_*) n=$N_RESUME ;; esac
    a=$(ir "$2" "$c" "$n")
    b=$(ir "$2" "$c" $((2 * n)))
    echo "$1 $c $(((b - a) / n))" | tee -a "$out"
  done
  # The instruction ratios beside the interleaved bench's time ratios
  # (the same pairs and goals), for the contenders measured.
  awk -v label="$1" '{ n[$2] = $3 }
    END {
      if (n["gapless"] && n["floor"]) printf "%s gapless/floor %.3f (goal <= 1.3)\n", label, n["gapless"] / n["floor"]
      if (n["gapless"] && n["broadcast"]) printf "%s broadcast/gapless %.3f (goal >= 2)\n", label, n["broadcast"] / n["gapless"]
      if (n["session"] && n["broadcast"]) printf "%s broadcast/session %.3f (goal >= 1.5)\n", label, n["broadcast"] / n["session"]
      if (n["lease"] && n["broadcast"]) printf "%s broadcast/lease %.3f (goal >= 2)\n", label, n["broadcast"] / n["lease"]
      if (n["gapless_sleeping"] && n["broadcast_sleeping"]) printf "%s broadcast/gapless, 1 sleeping subscriber %.3f (goal >= 2)\n", label, n["broadcast_sleeping"] / n["gapless_sleeping"]
    }' "$out"
  rm -f "$out"
}

if [ $# -eq 0 ]; then
  cargo build -q --release -p gapless-benches --bin interleaved
  measure "$(git rev-parse --short HEAD)+worktree" "${CARGO_TARGET_DIR:-target}/release/interleaved"
  exit 0
fi
for rev in "$@"; do
  dir=$(mktemp -d)
  git worktree add -q --detach "$dir" "$rev"
  (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo build -q --release -p gapless-benches --bin interleaved)
  measure "$(git rev-parse --short "$rev")" "$dir/target/release/interleaved"
  git worktree remove --force "$dir"
done
