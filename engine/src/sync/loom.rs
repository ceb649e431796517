//! The loom backend of the shim (`--cfg gapless_loom`).

pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

/// Locks a mutex (loom mutexes do not poison).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap()
}

/// loom's `UnsafeCell`, which tracks each access.
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(loom::cell::UnsafeCell<T>);

impl<T> UnsafeCell<T> {
    pub(crate) fn new(v: T) -> Self {
        Self(loom::cell::UnsafeCell::new(v))
    }

    /// Runs `f` with a shared pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        self.0.with(f)
    }

    /// Runs `f` with a unique pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        self.0.with_mut(f)
    }
}

/// An atomically replaceable `Option<Arc<T>>`: a loom mutex, which gives
/// loom the happens-before edges of a successful arc-swap load.
pub(crate) struct AtomicArc<T> {
    inner: Mutex<Option<Arc<T>>>,
}

impl<T> std::fmt::Debug for AtomicArc<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AtomicArc")
    }
}

impl<T> AtomicArc<T> {
    pub(crate) fn new(v: Option<Arc<T>>) -> Self {
        Self { inner: Mutex::new(v) }
    }

    /// Loads the current value, taking one reference.
    #[inline]
    pub(crate) fn load_full(&self) -> Option<Arc<T>> {
        lock(&self.inner).clone()
    }

    /// Replaces the value; the old one is dropped after the swap, so readers
    /// that still hold it keep it alive.
    pub(crate) fn store(&self, v: Option<Arc<T>>) {
        let old = std::mem::replace(&mut *lock(&self.inner), v);
        drop(old);
    }
}
