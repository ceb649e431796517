//! Loom models of the gapless ring live in `tests/`; they only build with
//! `RUSTFLAGS="--cfg gapless_loom"` (see `scripts/loom.sh`). This library is
//! empty on purpose.
