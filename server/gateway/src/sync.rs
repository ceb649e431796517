//! The one lock helper: a poisoned mutex is used as it is (what it guards
//! stays consistent: every critical section here is a map insert, remove
//! or copy).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, through a poisoning.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
