//! The loom backend of the shim (`--cfg gapless_loom`).

pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

/// The hasher of the shim's `HashMap`: fixed keys, so that every run of a
/// model iterates a map in the same order. Loom replays a model many times
/// and requires each run to make the same operations in the same order; a
/// loop over std's randomly keyed map that touches an atomic per entry (the
/// ring's stream directory, the pacing gates) would not.
pub(crate) type RandomState = std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// Locks a mutex (loom mutexes do not poison).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap()
}

/// Locks a mutex if it is free at once (`None` if another holds it).
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    m.try_lock().ok()
}

/// Unlocks (loom explores every order of the waiting threads anyway).
pub(crate) fn unlock_fair<T>(g: MutexGuard<'_, T>) {
    drop(g);
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

/// tokio's `Notify` as far as the engine uses it, for loom, which cannot
/// run tokio: `notified` (a future that completes at the first
/// `notify_waiters` after its creation), `Notified::enable` and
/// `notify_waiters`. Built the way tokio 1.x builds it: the count of
/// `notify_waiters` calls in an atomic (tokio's state word, SeqCst), read
/// when a `Notified` is created; a waiter list under a mutex, to which a
/// pending future adds its waker after checking the count again under the
/// lock, and which `notify_waiters` drains after raising the count under
/// the same lock. `notify_one` and its permits are not modelled: the engine
/// never calls it.
#[cfg(feature = "tokio")]
pub(crate) struct Notify {
    /// Calls of `notify_waiters` so far.
    calls: AtomicUsize,
    /// Wakers of pending `Notified`s.
    waiters: Mutex<Vec<std::task::Waker>>,
}

#[cfg(feature = "tokio")]
impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notify")
    }
}

#[cfg(feature = "tokio")]
impl Default for Notify {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "tokio")]
impl Notify {
    pub(crate) fn new() -> Self {
        Self { calls: AtomicUsize::new(0), waiters: Mutex::new(Vec::new()) }
    }

    /// A future that completes at the first `notify_waiters` after this
    /// call (tokio: "guaranteed to receive wakeups from `notify_waiters()`
    /// as soon as it has been created, even if it has not yet been polled").
    pub(crate) fn notified(&self) -> Notified<'_> {
        Notified { notify: self, calls: self.calls.load(Ordering::SeqCst) }
    }

    /// Completes every `Notified` created before this call.
    pub(crate) fn notify_waiters(&self) {
        let wakers = {
            let mut ws = lock(&self.waiters);
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::mem::take(&mut *ws)
        };
        for w in wakers {
            w.wake();
        }
    }
}

/// The future of [`Notify::notified`].
#[cfg(feature = "tokio")]
#[derive(Debug)]
pub(crate) struct Notified<'a> {
    notify: &'a Notify,
    /// `notify.calls` when this future was created.
    calls: usize,
}

#[cfg(feature = "tokio")]
impl Notified<'_> {
    /// Whether it has completed already. tokio's `enable` also queues the
    /// waiter for `notify_one`, which is not modelled; for `notify_waiters`
    /// creation is what counts.
    pub(crate) fn enable(self: std::pin::Pin<&mut Self>) -> bool {
        self.notify.calls.load(Ordering::SeqCst) != self.calls
    }
}

#[cfg(feature = "tokio")]
impl std::future::Future for Notified<'_> {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let n = self.notify;
        if n.calls.load(Ordering::SeqCst) != self.calls {
            return std::task::Poll::Ready(());
        }
        let mut ws = lock(&n.waiters);
        if n.calls.load(Ordering::SeqCst) != self.calls {
            return std::task::Poll::Ready(());
        }
        if !ws.iter().any(|w| w.will_wake(cx.waker())) {
            ws.push(cx.waker().clone());
        }
        std::task::Poll::Pending
    }
}
