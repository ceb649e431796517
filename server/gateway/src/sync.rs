//! The one lock helper: a poisoned mutex is used as it is (what it guards
//! stays consistent: every critical section here is a map insert, remove
//! or copy).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, through a poisoning.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs its closure when dropped, unless disarmed: what must happen however
/// a future ends, dropped by its caller included (a request's cancellation
/// reaching the upstream when the transport drops the request's handler).
pub(crate) struct OnDrop(Option<Box<dyn FnOnce() + Send>>);

impl OnDrop {
    pub(crate) fn new(f: impl FnOnce() + Send + 'static) -> OnDrop {
        OnDrop(Some(Box::new(f)))
    }

    /// It will not run.
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}
