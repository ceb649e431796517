//! The one place that chooses between `std` and `loom` primitives.
//!
//! Algorithm files import atomics, `Arc`, `Mutex`, `UnsafeCell` and
//! [`AtomicArc`] only from here, so a loom build (`RUSTFLAGS="--cfg
//! gapless_loom"`) model-checks exactly the code that ships. One file per
//! backend, as tokio's `loom/{std,mocked}` does: `std.rs` for normal
//! builds, `loom.rs` under `--cfg gapless_loom`. Both offer the same items
//! with the same signatures; nothing outside this folder names a backend.
//!
//! `arc-swap` has no loom support; under loom [`AtomicArc`] is a loom
//! `Mutex<Option<Arc<T>>>`, which gives loom the same happens-before edges a
//! successful arc-swap load gives (the store is visible to every later
//! load, and loads of the pointer synchronize with the store that wrote it).

#[cfg(gapless_loom)]
#[path = "loom.rs"]
mod backend;
#[cfg(not(gapless_loom))]
#[path = "std.rs"]
mod backend;

pub(crate) use backend::{
    fence, lock, Arc, AtomicArc, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering, UnsafeCell,
};
