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
//!
//! Loom cannot run tokio. The one tokio type the engine waits on, `Notify`
//! (a paced publisher waiting for its readers, feature `tokio`), is tokio's
//! in normal builds and, under loom, a model of the part of it the engine
//! uses (`notified`, `enable`, `notify_waiters`) built from loom's atomics
//! and mutex the way tokio builds it (see `loom.rs`).
//!
//! Who imports it: the ring, and the session layer for its locks, its
//! flags and the pacing gates (`engine/tests/architecture.rs` checks that no
//! other layer does). Loom runs on one OS thread: a `std` mutex held across
//! a loom atomic would block the model for real, so every lock that guards
//! a ring's producer, and every atomic a model's threads race on, comes from
//! here. `Arc` in the session layer stays `std`'s (it needs `Weak`, which
//! loom lacks; who frees a session is not what the models check).

#[cfg(gapless_loom)]
#[path = "loom.rs"]
mod backend;
#[cfg(not(gapless_loom))]
#[path = "std.rs"]
mod backend;

#[cfg(feature = "tokio")]
pub(crate) use backend::Notify;
pub(crate) use backend::{
    fence, lock, try_lock, unlock_fair, Arc, AtomicArc, AtomicBool, AtomicU64, AtomicUsize, Mutex,
    MutexGuard, Ordering, UnsafeCell,
};

/// A `std` hash map whose hasher is std's random one, or under loom a fixed
/// one (see the loom backend's `RandomState`). Build it with `default()`.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, backend::RandomState>;
