//! The one place that chooses between `std` and `loom` primitives.
//!
//! Algorithm files import atomics, `Arc`, `Mutex`, `UnsafeCell` and
//! [`AtomicArc`] only from here, so a loom build (`RUSTFLAGS="--cfg
//! gapless_loom"`) model-checks exactly the code that ships. `arc-swap` has no
//! loom support; under loom [`AtomicArc`] is a loom `Mutex<Option<Arc<T>>>`,
//! which gives loom the same happens-before edges a successful arc-swap load
//! gives (the store is visible to every later load, and loads of the pointer
//! synchronize with the store that wrote it).

#[cfg(gapless_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(gapless_loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(gapless_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(gapless_loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

/// Locks a mutex, ignoring poisoning: every critical section in this crate
/// leaves its data consistent before anything in it can panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(gapless_loom)]
    {
        m.lock().unwrap()
    }
    #[cfg(not(gapless_loom))]
    {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `UnsafeCell` with loom's closure API, so that loom can track each access.
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(
    #[cfg(gapless_loom)] loom::cell::UnsafeCell<T>,
    #[cfg(not(gapless_loom))] std::cell::UnsafeCell<T>,
);

impl<T> UnsafeCell<T> {
    pub(crate) fn new(v: T) -> Self {
        #[cfg(gapless_loom)]
        {
            Self(loom::cell::UnsafeCell::new(v))
        }
        #[cfg(not(gapless_loom))]
        {
            Self(std::cell::UnsafeCell::new(v))
        }
    }

    /// Runs `f` with a shared pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(gapless_loom)]
        {
            self.0.with(f)
        }
        #[cfg(not(gapless_loom))]
        {
            f(self.0.get())
        }
    }

    /// Runs `f` with a unique pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(gapless_loom)]
        {
            self.0.with_mut(f)
        }
        #[cfg(not(gapless_loom))]
        {
            f(self.0.get())
        }
    }
}

/// An atomically replaceable `Option<Arc<T>>`: `arc-swap` in normal builds,
/// a loom mutex under loom.
pub(crate) struct AtomicArc<T> {
    #[cfg(not(gapless_loom))]
    inner: arc_swap::ArcSwapOption<T>,
    #[cfg(gapless_loom)]
    inner: Mutex<Option<Arc<T>>>,
}

impl<T> std::fmt::Debug for AtomicArc<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AtomicArc")
    }
}

impl<T> AtomicArc<T> {
    pub(crate) fn new(v: Option<Arc<T>>) -> Self {
        #[cfg(not(gapless_loom))]
        {
            Self { inner: arc_swap::ArcSwapOption::new(v) }
        }
        #[cfg(gapless_loom)]
        {
            Self { inner: Mutex::new(v) }
        }
    }

    /// Loads the current value, taking one reference.
    #[inline]
    pub(crate) fn load_full(&self) -> Option<Arc<T>> {
        #[cfg(not(gapless_loom))]
        {
            self.inner.load_full()
        }
        #[cfg(gapless_loom)]
        {
            lock(&self.inner).clone()
        }
    }

    /// Replaces the value; the old one is dropped after the swap, so readers
    /// that still hold it keep it alive.
    pub(crate) fn store(&self, v: Option<Arc<T>>) {
        #[cfg(not(gapless_loom))]
        {
            self.inner.store(v)
        }
        #[cfg(gapless_loom)]
        {
            let old = std::mem::replace(&mut *lock(&self.inner), v);
            drop(old);
        }
    }
}
