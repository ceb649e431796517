#!/usr/bin/env bash
# Publish → client-read latency over SSE (BENCHMARKS.md): release
# gapless-server nodes on free loopback ports and benches/e2e's
# `gapless-load latency` as the client (one process, one thread). Each of
# S sessions has its standalone GET open and calls the demo's `emit_events`
# with `stamp: true` (docs/SPEC.md §5.1): N events of 64 bytes, I ms
# apart, the sessions' starts spread over the first interval, so that the
# aggregate rate is S × 1000 / I events a second. The client reads each
# event's publish stamp against its own clock (the same machine's).
#
#   scripts/latency.sh cluster [S] [N] [I]   two nodes on a redis-server of this
#                                            script's own: sessions made on node A,
#                                            their GET streams read on node B
#   scripts/latency.sh local [S] [N] [I]     one node, in process (no Redis)
#
# N = 0 measures memory alone: the RSS per session and per open stream
# (before any call's connection opens), then exits.
#
# Defaults: S 50, N 1000, I 10. Prints p50, p99, p99.9 and max in µs, the
# events/s reached, and each process's CPU per event (the nodes' from
# /proc/<pid>/stat; Redis's from INFO cpu; the client's its own); the nodes'
# RSS per session and per open stream (VmRSS before and after each step);
# and the 1-minute load before the run (a figure measured above 0.5 is not a
# verdict).
#
# WARMUP_MS=W: events published in the run's first W ms are read and
# checked, not timed (the calls start spread over the first interval).
# DETACH=1: each call's connection closes once its response head is in (the
# call goes on), so that the client holds one descriptor per session and
# 10 000 sessions fit this machine's open-file limit of 20 000.
#
# SERVER=path and LOAD=path pick the binaries (default: built here). Needs
# redis-server and redis-cli (scripts/setup.sh installs them), curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: scripts/latency.sh cluster|local [S] [N] [I]}
sessions=${2:-50}
n=${3:-1000}
interval=${4:-10}
case $mode in cluster | local) ;; *) echo "unknown mode $mode (cluster or local)" >&2; exit 2 ;; esac
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; wait "${pids[$i]}" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
if [ -z "${SERVER:-}" ]; then
  cargo build -q --release -p gapless-server-bin
  SERVER=${CARGO_TARGET_DIR:-target}/release/gapless-server
fi
if [ -z "${LOAD:-}" ]; then
  cargo build -q --release --manifest-path benches/e2e/Cargo.toml --target-dir benches/e2e/target -p gapless-load
  LOAD=benches/e2e/target/release/gapless-load
fi
limits=(--max-connections $((2 * sessions + 1000)) --max-connections-per-ip $((2 * sessions + 1000))
  --max-sessions $((sessions + 1000)) --max-sessions-per-client $((sessions + 1000))
  --initialize-burst $((sessions + 1000)) --initialize-per-sec 1000000)
store=()
if [ "$mode" = cluster ]; then
  rport=$(free_port)
  redis-server --bind 127.0.0.1 --port "$rport" --dir "$work" --save '' --appendonly no \
    --maxmemory-policy noeviction >"$work/redis.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
  store=(--redis-url "redis://127.0.0.1:$rport/0")
fi
node() { # name -> port; starts a node
  local port
  port=$(free_port)
  RUST_LOG=error "$SERVER" --bind "127.0.0.1:$port" "${store[@]}" "${limits[@]}" >"$work/$1.log" 2>&1 &
  pids+=($!)
  echo "$port $!"
}
read -r port_a pid_a < <(node a)
port_b=$port_a pid_b=$pid_a
[ "$mode" = cluster ] && read -r port_b pid_b < <(node b)
for p in $port_a $port_b; do
  for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$p/" && break; sleep 0.1; done
done
rss_b0=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid_b/status")
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.6f", ($14 + $15) / hz }' "/proc/$1/stat"; }
redis_cpu() {
  if [ "$mode" = cluster ]; then
    redis-cli -p "$rport" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { t += $2 } END { printf "%.6f", t }'
  else echo 0; fi
}
load=$(cut -d' ' -f1 /proc/loadavg)
coproc LAT { "$LOAD" latency --addr "127.0.0.1:$port_a" --read-addr "127.0.0.1:$port_b" --sessions "$sessions" \
  --count "$((n > 0 ? n : 1))" --interval-ms "$interval" --payload 64 ${DETACH:+--detach} \
  --warmup-ms "${WARMUP_MS:-0}" 2>"$work/client.log"; }
rss_of() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
rss0=$(rss_of "$pid_a")
read -r line <&"${LAT[0]}" || true
[ "$line" = sessions ] || { echo "the client did not start; its log and node A's:" >&2; cat "$work/client.log" "$work/a.log" >&2; exit 1; }
rss1=$(rss_of "$pid_a")
echo streams >&"${LAT[1]}"
read -r line <&"${LAT[0]}" || true
[ "$line" = open ] || { echo "the client's streams did not open; its log and the nodes':" >&2; cat "$work/client.log" "$work"/*.log >&2; exit 1; }
# Streams open, the calls' connections not yet: the RSS per stream is the
# stream's alone.
rss2=$(rss_of "$pid_a")
rss_b0=${rss_b0:-0}
rss2b=$(rss_of "$pid_b")
if [ "$n" = 0 ]; then
  python3 -c 'import sys; s, r0, r1, r2, rb0, rb2 = map(int, sys.argv[1:7]); mode, load = sys.argv[7:9]; per_stream = (rb2 - rb0 if mode == "cluster" else r2 - r1) / s; print(f"{mode}: {s} sessions, load before {load}"); print(f"RSS: {r0} KiB idle, +{(r1 - r0) / s:.2f} KiB per session, +{per_stream:.2f} KiB per open stream")' \
    "$sessions" "$rss0" "$rss1" "$rss2" "$rss_b0" "$rss2b" "$mode" "$load"
  exit 0
fi
echo calls >&"${LAT[1]}"
read -r line <&"${LAT[0]}" || true
[ "$line" = ready ] || { echo "the client's call connections did not open; its log and the nodes':" >&2; cat "$work/client.log" "$work"/*.log >&2; exit 1; }
[ "$mode" = cluster ] && redis-cli -p "$rport" config resetstat >/dev/null
a0=$(cpu_of "$pid_a") b0=$(cpu_of "$pid_b") r0=$(redis_cpu)
echo go >&"${LAT[1]}"
read -r line <&"${LAT[0]}" || true
a1=$(cpu_of "$pid_a") b1=$(cpu_of "$pid_b") r1=$(redis_cpu)
read -r word wall client events p50 p99 p999 max <<<"$line"
[ "$word" = done ] || { echo "the client failed; its log and the nodes':" >&2; cat "$work/client.log" >&2; tail -n 20 "$work"/*.log >&2; exit 1; }
stats=''
if [ "$mode" = cluster ]; then
  stats=$(redis-cli -p "$rport" info commandstats | tr -d '\r' |
    awk -F'[:,=]' -v e="$events" '/^cmdstat_/ { sub("cmdstat_", "", $1); printf "%s %.2f\n", $1, $3 / e }' |
    sort -k2 -rn | head -8 | tr '\n' ',' | sed 's/,$//; s/,/, /g')
fi
python3 - "$mode" "$sessions" "$n" "$interval" "$wall" "$client" "$events" "$p50" "$p99" "$p999" "$max" \
  "$a0" "$a1" "$b0" "$b1" "$r0" "$r1" "$load" "$stats" "$rss0" "$rss1" "$rss2" "$rss_b0" "$rss2b" "${WARMUP_MS:-0}" <<'EOF'
import sys
mode, s, n, i = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
wall, client, events = float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
p50, p99, p999, mx = map(int, sys.argv[8:12])
a0, a1, b0, b1, r0, r1 = map(float, sys.argv[12:18])
load = sys.argv[18]
where = "sessions on node A, GET streams on node B, one Redis" if mode == "cluster" else "one node, in process"
print(f"{mode}: {s} stream(s) x {n} events {i} ms apart ({s * 1000 / i:,.0f} events/s asked; {where}); load before {load}")
warm = int(sys.argv[25])
timed = f"; the first {warm} ms not timed" if warm else ""
print(f"publish -> client read, us: p50 {p50}, p99 {p99}, p99.9 {p999}, max {mx} ({events} events{timed})")
print(f"events/s reached: {events / wall:,.0f} over {wall:.2f} s")
rss0, rss1, rss2, rb0, rb2 = map(int, sys.argv[20:25])
per = lambda c: c / events * 1e6
if mode == "cluster":
    print(f"RSS: node A {rss0} KiB idle, +{(rss1 - rss0) / s:.2f} KiB per session; node B +{(rb2 - rb0) / s:.2f} KiB per open stream (its sessions' state included)")
else:
    print(f"RSS: {rss0} KiB idle, +{(rss1 - rss0) / s:.2f} KiB per session, +{(rss2 - rss1) / s:.2f} KiB per open stream")
if mode == "cluster":
    print(f"CPU per event, us: node A {per(a1 - a0):.2f}, node B {per(b1 - b0):.2f}, Redis {per(r1 - r0):.2f}, client {per(client):.2f}")
    print(f"Redis commands per event (commonest): {sys.argv[19]}")
else:
    print(f"CPU per event, us: node {per(a1 - a0):.2f}, client {per(client):.2f}")
EOF
