#!/usr/bin/env bash
# Every library crate packages, and builds as packaged: `cargo package`
# of them all at once verifies each .crate against the others as packaged
# (not against the workspace's paths). Then what each .crate ships is
# checked: only its Cargo files, its README and its sources (`src/`: Rust,
# and the Redis store's Lua scripts, the status page's HTML), each .crate
# under 256 KiB. Prints what each ships. `.ci/run` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
crates=(gapless-wire gapless gapless-redis gapless-server gapless-rmcp gapless-cli gapless-gateway)
# --allow-dirty: CI's fresh clone is clean, but setup.sh's installs (npm,
# the venv) leave ignored files a developer's tree has too.
# The verification unpacks each .crate from a local registry into cargo's
# registry sources, under the same version every time: an earlier run's
# unpacked copy would be built instead of this one. They go first.
# And cargo takes a registry crate of a version it built before as built
# (registry crates never change): the fingerprints of ours go too, so that
# each verification builds this run's sources.
for c in "${crates[@]}"; do
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$c"-[0-9]*
done
rm -rf "${CARGO_TARGET_DIR:-target}"/debug/.fingerprint/gapless-*
cargo package --locked --allow-dirty $(printf -- '-p %s ' "${crates[@]}")
max=$((256 * 1024))
fail=0
echo
echo "package: what each .crate ships"
for c in "${crates[@]}"; do
  f="target/package/$c-$(cargo pkgid -p "$c" | sed 's/.*[#@]//').crate"
  size=$(stat -c %s "$f")
  files=$(tar -tzf "$f" | sed "s|^[^/]*/||" | sort)
  n=$(echo "$files" | wc -l)
  echo "  $c: $n files, $size bytes: $(echo "$files" | grep -v '^src/' | tr '\n' ' ')+ src/"
  stray=$(echo "$files" | grep -Ev '^(Cargo\.toml|Cargo\.toml\.orig|Cargo\.lock|\.cargo_vcs_info\.json|README\.md|src/.*\.(rs|lua|html))$' || true)
  if [ -n "$stray" ]; then
    echo "package: $c ships what it should not:" >&2
    echo "$stray" | sed 's/^/    /' >&2
    fail=1
  fi
  if [ "$size" -gt "$max" ]; then
    echo "package: $c is $size bytes, over $max" >&2
    fail=1
  fi
done
[ "$fail" = 0 ] && echo "package: every library crate packages, builds as packaged, and ships only its sources"
exit "$fail"
