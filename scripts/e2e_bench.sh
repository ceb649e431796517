#!/usr/bin/env bash
# End-to-end load test over 127.0.0.1 by benches/e2e/load (binary
# gapless-load) of three servers: gapless-server (its demo application),
# gapless-server --host rmcp-counter (an rmcp handler on gapless-rmcp) and
# the same rmcp handler on rmcp 3.11's stock Streamable HTTP service
# (benches/e2e/rmcp-peer). Builds them in release, runs the tool (which starts
# and stops the servers itself on free loopback ports) and prints the
# markdown table of BENCHMARKS.md "End to end (gapless-server, gapless-rmcp
# and rmcp)".
#
# benches/e2e is a separate cargo workspace (excluded from the main one) so
# neither the main build nor CI ever builds the load tool and the peer.
#
# Usage: scripts/e2e_bench.sh [--write] [gapless-load options...]
#   --write   also replace the table between the e2e markers in BENCHMARKS.md
#   options   passed to gapless-load, e.g. --count 50000 --sessions 100 --runs 3
#             (gapless-load --help lists them)
# The tool stops by itself (--deadline-secs, default 900); this script adds
# an outer `timeout` as well.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
write=0
if [[ "${1:-}" == "--write" ]]; then
    write=1
    shift
fi
e2e="$root/benches/e2e"
echo "== building gapless-server (release)" >&2
cargo build --release --quiet -p gapless-server-bin --manifest-path "$root/Cargo.toml" --target-dir "$root/target"
echo "== building rmcp-peer and gapless-load (release, separate workspace)" >&2
cargo build --release --quiet --manifest-path "$e2e/Cargo.toml" --target-dir "$e2e/target"
out="$e2e/target/e2e-report.md"
logs="$e2e/target/e2e-logs"
mkdir -p "$logs"
echo "== running gapless-load (server logs in $logs)" >&2
status=0
timeout 1500 "$e2e/target/release/gapless-load" \
    --gapless-bin "$root/target/release/gapless-server" \
    --rmcp-bin "$e2e/target/release/rmcp-peer" \
    --log-dir "$logs" --markdown "$out" "$@" || status=$?
if [[ $write == 1 && -s "$out" ]]; then
    md="$root/BENCHMARKS.md"
    if grep -q '<!-- e2e-table:begin -->' "$md" 2>/dev/null; then
        tmp=$(mktemp)
        awk -v f="$out" '
            /<!-- e2e-table:begin -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next }
            /<!-- e2e-table:end -->/ { skip = 0 }
            !skip { print }' "$md" > "$tmp" && cat "$tmp" > "$md" && rm -f "$tmp"
        echo "== table written into $md" >&2
    else
        echo "== no e2e markers in $md; table left in $out" >&2
    fi
fi
exit $status
