//! The one lock helper: a poisoned mutex is used as it is (what a panicking
//! holder left is still the state).

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
