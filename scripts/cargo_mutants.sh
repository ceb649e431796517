#!/usr/bin/env bash
# Mutation testing of the rules with cargo-mutants: every mutant of the code
# that decides (the resume decision table, the coverage verdicts, tickets,
# the event-id codec, the client guard, the server's refusal mapping) must
# make a test fail, or be listed as equivalent, with the reason, in
# scripts/mutants_equivalent.txt.
#
#   scripts/cargo_mutants.sh quick   only the mutants in lines changed since
#                                    the merge-base with origin/main (main
#                                    without a remote; on main itself, the
#                                    last commit); what CI runs
#   scripts/cargo_mutants.sh deep    every mutant of those files (tens of
#                                    minutes on 2 cores); also fails on an
#                                    entry of the equivalents list that no
#                                    longer survives
#
# MUTANTS_BASE=<rev> sets quick's base; MUTANTS_JOBS (default 1) the builds
# in parallel; MUTANTS_GROUPS (default "wire engine server") which groups run. The whole set does not fit in CI's time on a 2-core machine
# (about 400 mutants at 3 to 20 s each), hence quick.
#
# Each group mutates some files of one package and runs only the tests that
# judge those rules, never the whole workspace per mutant:
#   gapless-wire    its unit tests (the codec's and the guard's)
#   gapless         its unit tests and tests/{decision_table,seeds,ring}.rs
#   gapless-server  its unit tests (the mapping's status, error and fields)
# The server is mutated only in its refusal mapping: ApiError's
# constructors and conversions (vocab/error.rs), its response form
# (http/error.rs), and the session lookup that refuses a migrated session
# (Sessions::live); the rest is transport, tested over loopback by
# server/bin/tests.
#
# Exit status: 0 when every mutant is caught, unviable or listed as
# equivalent; 1 otherwise (a surviving mutant, a timeout, a failed baseline).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:-quick}
case "$mode" in
  quick | deep) ;;
  *) echo "usage: $0 [quick|deep]" >&2; exit 2 ;;
esac

version=27.1.0
if [ "$(cargo mutants --version 2>/dev/null)" != "cargo-mutants $version" ]; then
  cargo install --locked cargo-mutants --version "$version" || exit 1
fi

equivalent=$root/scripts/mutants_equivalent.txt
out=$root/target/mutants-out
# The copies cargo-mutants builds in share third-party dependencies through
# one target directory (ours are rebuilt per copy: their path differs).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}/mutants
rm -rf "$out"
mkdir -p "$out"

# name;package;files (space-separated);regex on mutant names (or empty);test args
groups=(
  "wire;gapless-wire;engine/wire/src/event_id.rs engine/wire/src/client.rs engine/wire/src/client/continuity.rs engine/wire/src/client/resume.rs;;"
  "engine;gapless;engine/src/session/table.rs engine/src/session/resume.rs engine/src/ring/gap.rs engine/src/session/ticket.rs engine/src/session/migrate.rs;;--lib --test decision_table --test seeds --test ring"
  "server;gapless-server;server/src/vocab/error.rs server/src/http/error.rs server/src/session/table.rs;^server/src/(vocab|http)/error\\.rs:.*ApiError|^server/src/session/table\\.rs:.*::live( |$);--lib"
)

diff_args=()
if [ "$mode" = quick ]; then
  base=${MUTANTS_BASE:-}
  if [ -z "$base" ]; then
    upstream=origin/main
    git rev-parse -q --verify "$upstream" >/dev/null || upstream=main
    base=$(git merge-base HEAD "$upstream" 2>/dev/null) || base=
    if [ -z "$base" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then
      base=$(git rev-parse -q --verify HEAD~1) || base=
    fi
  fi
  if [ -n "$base" ]; then
    echo "mutants quick: lines changed since $(git rev-parse --short "$base") (working tree included)"
  else
    # A shallow clone of one commit: nothing to diff against. Test a fixed
    # slice of every group instead (one shard in 40) rather than nothing.
    echo "mutants quick: no base to diff against (a shallow clone?); testing shard 0/40 of every group"
    shard=(--shard 0/40)
  fi
fi

start=$(date +%s)
status=0
ran_files=
: >"$out/survivors.txt"
for g in "${groups[@]}"; do
  IFS=';' read -r name package files re test_args <<<"$g"
  case " ${MUTANTS_GROUPS:-wire engine server} " in *" $name "*) ;; *) continue ;; esac
  args=(-j "${MUTANTS_JOBS:-1}" --no-shuffle -p "$package" -o "$out/$name" --colors never)
  for f in $files; do args+=(-f "$f"); done
  [ -n "$re" ] && args+=(-F "$re")
  if [ "$mode" = quick ] && [ -z "$base" ]; then
    args+=("${shard[@]}")
  elif [ "$mode" = quick ]; then
    # shellcheck disable=SC2086
    git diff "$base" -- $files >"$out/$name.diff"
    if [ ! -s "$out/$name.diff" ]; then
      echo "== $name: no change in $files"
      continue
    fi
    args+=(--in-diff "$out/$name.diff")
  fi
  ran_files="$ran_files $files"
  echo "== $name: cargo mutants on $files ($package; cargo test ${test_args:-(all of the package)})"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  cargo mutants "${args[@]}" -- $test_args >"$out/$name.log" 2>&1
  rc=$?
  grep -E '^(MISSED|TIMEOUT|[0-9]+ mutants tested)|^Found|No mutants' "$out/$name.log" | sed 's/^/   /'
  echo "   ($(( $(date +%s) - t0 ))s)"
  # 0 all caught, 2 some missed, 3 some timed out; anything else is not a result.
  case $rc in
    0 | 2 | 3) ;;
    *) echo "   cargo mutants failed (exit $rc); see $out/$name.log"; tail -20 "$out/$name.log"; status=1; continue ;;
  esac
  mo=$out/$name/mutants.out
  for kind in missed timeout; do
    [ -f "$mo/$kind.txt" ] || continue
    while IFS= read -r m; do
      # Names without line and column: they move with every edit above them.
      key=$(sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /' <<<"$m")
      if [ "$kind" = missed ] && grep -vE '^\s*(#|$)' "$equivalent" | sed 's/ ## .*//' | grep -qxF "$key"; then
        echo "$key" >>"$out/equivalent_seen.txt"
      else
        echo "$kind: $m" >>"$out/survivors.txt"
      fi
    done <"$mo/$kind.txt"
  done
done

if [ -s "$out/survivors.txt" ]; then
  echo
  echo "mutants: these survived and are not listed in scripts/mutants_equivalent.txt:"
  sed 's/^/  /' "$out/survivors.txt"
  echo "Kill each with a test of the behaviour docs/SPEC.md asks for, or list it as"
  echo "equivalent with the invariant that makes it so. Diffs: $out/*/mutants.out/diff/"
  status=1
fi
if [ "$mode" = deep ]; then
  # Every listed equivalent must still be generated and survive: an entry
  # that a test now kills, or that the code no longer has, is stale.
  # (Only entries of the files this run mutated.)
  touch "$out/equivalent_seen.txt"
  stale=$(grep -vE '^\s*(#|$)' "$equivalent" | sed 's/ ## .*//' | grep -vxF -f "$out/equivalent_seen.txt" |
    while IFS= read -r e; do
      case " $ran_files " in *" ${e%%: *} "*) echo "$e" ;; esac
    done)
  if [ -n "$stale" ]; then
    echo
    echo "mutants: stale entries in scripts/mutants_equivalent.txt (no longer a surviving mutant):"
    sed 's/^/  /' <<<"$stale"
    status=1
  fi
fi
# Our crates' artifacts of the copies (their paths differ every run): only
# the dependencies are worth keeping.
cargo clean -q -p gapless-wire -p gapless -p gapless-redis -p gapless-server >/dev/null 2>&1 || true
echo
[ $status -eq 0 ] && echo "mutants $mode: no surviving mutant outside the equivalents list ($(( $(date +%s) - start ))s)"
exit $status
