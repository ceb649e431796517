#!/usr/bin/env bash
# Runs the libFuzzer targets in fuzz/ (cargo-fuzz, nightly). Each target
# checks the engine (http_router: the server's router, in process) against
# a slow reference model in fuzz/src/.
#
#   scripts/fuzz.sh              same as `smoke`
#   scripts/fuzz.sh smoke        build, replay fuzz/regressions/*, then every
#                                target for SMOKE_SECONDS (default 20) each
#   scripts/fuzz.sh long SECS    every target for SECS seconds; prints the
#                                executions libFuzzer reports
#   scripts/fuzz.sh replay       only replay fuzz/regressions/*
#   scripts/fuzz.sh long SECS ring_ops   (a trailing list picks targets)
#
# Installs what it needs (idempotent): a minimal nightly toolchain and
# cargo-fuzz (built with the stable toolchain).
#
# Corpora: the seeds in fuzz/corpus/<target>/ are committed and only read;
# what libFuzzer finds goes to fuzz/work/<target>/ (git-ignored), which is
# kept between runs. Crashes land in fuzz/artifacts/<target>/; a crash that
# is a real engine bug is copied to fuzz/regressions/<target>/<bug-id>-N
# (named after an entry of `known_src_bugs` below while it is open).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

toolchain="${FUZZ_TOOLCHAIN:-nightly}"
targets_all=(ring_ops resume_decisions wire_parsing http_router task_events)

# Engine bugs that are reported but not fixed yet (see fuzz/src/lib.rs
# `tolerated`). Fuzzing runs step around exactly these so that they explore
# past them; regressions named after them are replayed strictly and their
# failure is reported as "still open". Delete a line once its bug is fixed
# (the replay then says so).
known_src_bugs=(
    # (none open; fixed and kept as regressions: evict-empty-assert,
    # stream-missing-overcount, migration-reclaimed-undelivered,
    # late-delivery-after-reclaim, initialize-one-event-ring)
)

install() {
    if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
        rustup toolchain install "$toolchain" --profile minimal
    fi
    if ! cargo "+$toolchain" fuzz --version >/dev/null 2>&1; then
        cargo +stable install cargo-fuzz --locked
    fi
}

build() {
    echo "fuzz: building ${targets[*]}"
    mkdir -p fuzz/target
    for t in "${targets[@]}"; do
        if ! cargo "+$toolchain" fuzz build "$t" >fuzz/target/build.log 2>&1; then
            grep -E -A12 '^error' fuzz/target/build.log >&2 || tail -30 fuzz/target/build.log >&2
            echo "fuzz: build of $t failed" >&2
            exit 1
        fi
    done
}

bin() {
    echo "fuzz/target/$(rustc "+$toolchain" -vV | sed -n 's/^host: //p')/release/$1"
}

is_known() {
    local id=$1 k
    for k in "${known_src_bugs[@]}"; do
        [ "$k" = "$id" ] && return 0
    done
    return 1
}

# Replays fuzz/regressions/<target>/* strictly (no bug tolerated).
replay() {
    local failed=0 t f id
    for t in "${targets[@]}"; do
        [ -d "fuzz/regressions/$t" ] || continue
        for f in "fuzz/regressions/$t"/*; do
            [ -f "$f" ] || continue
            id=$(basename "$f" | sed -E 's/-[0-9]+$//')
            if env -u GAPLESS_FUZZ_TOLERATE "$(bin "$t")" -artifact_prefix=fuzz/target/replay- "$f" \
                >"fuzz/target/replay.log" 2>&1; then
                if is_known "$id"; then
                    echo "fuzz: replay $f passes: bug $id looks fixed; delete it from known_src_bugs"
                else
                    echo "fuzz: replay $f ok"
                fi
            else
                if is_known "$id"; then
                    echo "fuzz: replay $f fails: known open bug $id ($(grep -m1 -A1 panicked fuzz/target/replay.log | tail -1))"
                else
                    echo "fuzz: replay $f FAILS:" >&2
                    grep -m1 -A3 panicked fuzz/target/replay.log >&2 || tail -20 fuzz/target/replay.log >&2
                    failed=1
                fi
            fi
        done
    done
    return $failed
}

# run TARGET SECONDS: fuzzes, prints the execution count; non-zero on a crash.
run() {
    local t=$1 secs=$2 log="fuzz/target/fuzz-$1.log" rc=0
    mkdir -p "fuzz/work/$t" "fuzz/corpus/$t"
    echo "fuzz: $t for ${secs}s"
    GAPLESS_FUZZ_TOLERATE=$(IFS=,; echo "${known_src_bugs[*]}") \
        cargo "+$toolchain" fuzz run "$t" "fuzz/work/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -timeout=30 -print_final_stats=1 >"$log" 2>&1 || rc=$?
    local execs
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    [ -n "$execs" ] || execs=$(sed -nE 's/^Done ([0-9]+) runs.*/\1/p' "$log" | tail -1)
    if [ $rc -ne 0 ]; then
        echo "fuzz: $t CRASHED after ${execs:-?} executions (log: $log)" >&2
        grep -m1 -A4 panicked "$log" >&2 || grep -m1 -A8 "ERROR: " "$log" >&2 || tail -20 "$log" >&2
        grep -E '^(Reproduce|	cargo fuzz run)' "$log" >&2 || true
        return 1
    fi
    echo "fuzz: $t ok: ${execs:-?} executions in ${secs}s, corpus $(ls "fuzz/work/$t" | wc -l) inputs"
}

mode=${1:-smoke}
[ $# -gt 0 ] && shift
secs=${SMOKE_SECONDS:-20}
if [ "$mode" = long ]; then
    secs=${1:?usage: $0 long SECONDS [targets...]}
    shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${targets_all[@]}")

install
build
status=0
case "$mode" in
    replay) replay || status=1 ;;
    smoke)
        replay || status=1
        for t in "${targets[@]}"; do run "$t" "$secs" || status=1; done
        ;;
    long)
        for t in "${targets[@]}"; do run "$t" "$secs" || status=1; done
        ;;
    *) echo "usage: $0 [smoke|long SECONDS|replay] [targets...]" >&2; exit 2 ;;
esac
exit $status
