//! The `std` backend of the shim (every build but loom's).

pub(crate) use parking_lot::{Mutex, MutexGuard};
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub(crate) use std::sync::Arc;
/// Paced publishers wait on it (`session::pace`).
#[cfg(feature = "tokio")]
pub(crate) use tokio::sync::Notify;

/// The hasher of the shim's `HashMap`: std's, randomly keyed per map.
pub(crate) type RandomState = std::collections::hash_map::RandomState;

/// Locks a mutex. `parking_lot`'s: no poisoning (every critical section in
/// this crate leaves its data consistent before anything in it can panic),
/// so neither locking nor unlocking asks whether the thread is panicking,
/// which `std`'s does on every lock of a session's writer: a fifth of
/// `Session::publish`'s instructions beyond the producer's (BENCHMARKS.md).
#[inline(always)]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock()
}

/// Locks a mutex if it is free at once (`None` if another holds it).
#[inline]
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    m.try_lock()
}

/// Unlocks, handing the mutex straight to a thread waiting for it if there
/// is one (parking_lot's fair unlock), so that a holder that takes it again
/// at once (a `Lease` at a chunk boundary) does not keep it from the others.
pub(crate) fn unlock_fair<T>(g: MutexGuard<'_, T>) {
    MutexGuard::unlock_fair(g);
}

/// `UnsafeCell` with loom's closure API, so that loom can track each access.
/// Transparent: a slice of them is laid out as a slice of `T`.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

impl<T> UnsafeCell<T> {
    pub(crate) fn new(v: T) -> Self {
        Self(std::cell::UnsafeCell::new(v))
    }

    /// Runs `f` with a shared pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a unique pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// An atomically replaceable `Option<Arc<T>>` (`arc-swap`).
pub(crate) struct AtomicArc<T> {
    inner: arc_swap::ArcSwapOption<T>,
}

impl<T> std::fmt::Debug for AtomicArc<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AtomicArc")
    }
}

impl<T> AtomicArc<T> {
    pub(crate) fn new(v: Option<Arc<T>>) -> Self {
        Self { inner: arc_swap::ArcSwapOption::new(v) }
    }

    /// Loads the current value, taking one reference.
    #[inline]
    pub(crate) fn load_full(&self) -> Option<Arc<T>> {
        self.inner.load_full()
    }

    /// Replaces the value; the old one is dropped after the swap, so readers
    /// that still hold it keep it alive.
    pub(crate) fn store(&self, v: Option<Arc<T>>) {
        self.inner.store(v)
    }
}
