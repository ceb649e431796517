#!/usr/bin/env bash
# Runs the benchmark suite (the `benches/` crate) and regenerates the results
# section of BENCHMARKS.md and the chart docs/bench.svg from what it measured.
#
#   scripts/bench.sh                 # everything (about 10 minutes on 2 cores after the build, of
#                                    # which up to a few minutes wait for the load to settle)
#   scripts/bench.sh publish         # criterion filter: only matching benchmarks
#   scripts/bench.sh --quick         # short smoke run (noisier numbers)
#   scripts/bench.sh --report-only   # regenerate BENCHMARKS.md/docs/bench.svg from the last run
#
# Results stay in target/criterion/ (criterion) and target/gapless-bench/
# (latency percentiles, memory, machine). Run it on a quiet machine: check
# `uptime` first; the load before and after is recorded in the report.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
out="$target/gapless-bench"
quick=()
report_only=0
filter=()
for a in "$@"; do
  case "$a" in
    --quick) quick=(--warm-up-time 0.3 --measurement-time 0.8 --sample-size 10) ;;
    --report-only) report_only=1 ;;
    *) filter+=("$a") ;;
  esac
done

if [ "$report_only" = 0 ]; then
  mkdir -p "$out"
  cargo build --release -p gapless-benches --benches --bins
  {
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
    echo "cores: $(nproc) ($(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -1) guest)"
    echo "memory: $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
    echo "kernel: $(uname -sr)"
    echo "rustc: $(rustc -V)"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "load_before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "command: scripts/bench.sh $*"
  } > "$out/machine.txt"
  # Sample the 1-minute load every 5 s while measuring, so the report can
  # say how quiet the machine was (our own threads count too: up to 4).
  ( while sleep 5; do cut -d' ' -f1 /proc/loadavg; done ) > "$out/load.log" &
  sampler=$!
  trap 'kill "$sampler" 2>/dev/null || true' EXIT
  cargo bench -p gapless-benches --benches -- ${quick[@]+"${quick[@]}"} ${filter[@]+"${filter[@]}"}
  if [ ${#filter[@]} -eq 0 ] || [[ "memory" == *"${filter[0]}"* ]]; then
    cargo run --release -p gapless-benches --bin memory
  fi
  if [ ${#filter[@]} -eq 0 ] || [[ "interleaved" == *"${filter[0]}"* ]]; then
    # Several processes: one process's code and heap layout moves a ratio by
    # up to 10%, so the verdict is the median of the processes' medians
    # (INTERLEAVED_PROCESSES, default 3; the report lists each).
    rm -f "$out"/interleaved-*.json
    for k in $(seq "${INTERLEAVED_PROCESSES:-3}"); do
      # The 1-minute load lags: after criterion (or the previous process) it
      # stays above the harness's 0.5 bar for a minute or two although the
      # machine is idle. Wait (at most 5 minutes; not for --quick, whose
      # figures are a smoke test) for it to fall below 0.3.
      if [ ${#quick[@]} -eq 0 ]; then
        for _ in $(seq 60); do
          awk -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN { exit !(l < 0.3) }' && break
          sleep 5
        done
        echo "interleaved process $k: 1-minute load $(cut -d' ' -f1 /proc/loadavg) at its start" >&2
      fi
      if [ ${#quick[@]} -eq 0 ]; then
        cargo run --release -p gapless-benches --bin interleaved
      else
        cargo run --release -p gapless-benches --bin interleaved -- 21
      fi
      cp "$out/interleaved.json" "$out/interleaved-$k.json"
    done
  fi
  kill "$sampler" 2>/dev/null || true
  echo "load_after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
  echo "load_during: $(sort -n "$out/load.log" | awk '{a[NR]=$1} END {if (NR) printf "median %s, max %s (1-min load, %d samples)", a[int((NR+1)/2)], a[NR], NR}')" >> "$out/machine.txt"
fi
python3 scripts/bench_report.py --target "$target"
