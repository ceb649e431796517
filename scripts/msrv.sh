#!/usr/bin/env bash
# The libraries build with the workspace's rust-version (Cargo.toml: one
# MSRV for every crate), with exactly that toolchain (scripts/setup.sh
# installs it): a type check of each library crate and its dependencies as
# locked, in target/msrv. Fails when a library, or a locked dependency of
# one, needs a newer Rust than the crates declare.
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$msrv" ] || { echo "msrv.sh: no rust-version in Cargo.toml" >&2; exit 1; }
libs=(gapless-wire gapless gapless-redis gapless-server gapless-rmcp gapless-cli gapless-gateway)
echo "msrv: building ${libs[*]} with Rust $msrv"
cargo "+$msrv" check --locked --target-dir target/msrv $(printf -- '-p %s ' "${libs[@]}")
echo "msrv: the libraries build with Rust $msrv"
