#!/usr/bin/env bash
# Runs the ring's tests under Miri: undefined behaviour, data races on
# non-atomic memory, weak-memory effects (Miri emulates store buffering),
# use-after-free and leaks.
#
#   scripts/miri.sh                 # the ring tests, as described below
#   scripts/miri.sh stress          # extra args go to the test harness (filters, --exact, ...)
#
# Installs what it needs (idempotent): a minimal nightly toolchain, the miri
# and rust-src components, and Miri's sysroot.
#
# What runs: `cargo miri test -p gapless --no-default-features --test ring
# --test stress`, the tests of the ring, which is where the crate's `unsafe`
# code lives (chunk.rs, producer.rs, reader.rs, snapshot.rs).
# * `--no-default-features`: the `tokio` facade is off; the ring has no
#   feature gates.
# * Not run by default: doctests (rustdoc builds one Miri binary per
#   example: minutes for nothing the tests miss) and the other test targets
#   (unit tests of safe-only modules like event_id and client, session
#   scenarios), which are not scaled down for Miri and would take well over
#   10 minutes. Run them with e.g. MIRI_TARGETS="--lib --tests".
# * The ring tests scale themselves down with `cfg!(miri)` (a few hundred
#   events, small rings). A warm run costs about 3.5 minutes of CPU (Miri
#   interprets on one thread); on a 2-core machine shared with other builds
#   it took 5.5 to 7.5 minutes of wall time.
#
# MIRIFLAGS (override by exporting MIRIFLAGS):
# * -Zmiri-permissive-provenance, not -Zmiri-strict-provenance. The ring's
#   own code never casts between integers and pointers, but arc-swap (1.9,
#   behind every chunk slot and the stream directory) does on its contended
#   paths: `HybridProtection::attempt` when a writer already paid the debt
#   (`ptr as usize as *const _`), `fallback` (`replacement as *mut _`) and
#   `helping.rs` (`(control & !TAG_MASK) as *mut Handover`). Miri reaches
#   them only when a load races a store inside a window of a few
#   instructions; in our runs (6 seeds, `-Zmiri-many-seeds=0..6`) it never
#   did, so strict provenance passes today, but an interleaving that does
#   reach them would stop the run with "unsupported operation" (an
#   integer-to-pointer cast), a property of arc-swap, not UB in gapless.
#   Permissive provenance models those casts (exposed provenance) and keeps
#   every other check; it also silences the int-to-ptr warning.
# * -Zmiri-symbolic-alignment-check: alignment is checked against the
#   declared type, not the address the allocator happened to return, so
#   code that only works because an allocation was over-aligned fails.
# The default Stacked Borrows aliasing model, the data-race detector, weak
# memory emulation and the leak check stay on.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

toolchain="${MIRI_TOOLCHAIN:-nightly}"

if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
    rustup toolchain install "$toolchain" --profile minimal
fi
# Both are no-ops when already installed.
rustup component add miri rust-src --toolchain "$toolchain"
cargo +"$toolchain" miri setup

export MIRIFLAGS="${MIRIFLAGS:--Zmiri-permissive-provenance -Zmiri-symbolic-alignment-check}"

start=$SECONDS
# shellcheck disable=SC2086 # MIRI_TARGETS is a list of cargo arguments
cargo +"$toolchain" miri test -p gapless --no-default-features ${MIRI_TARGETS:---test ring --test stress --test lease} \
    -- "$@"
echo "miri: passed in $((SECONDS - start)) s (MIRIFLAGS='$MIRIFLAGS')"
