//! The one lock helper: every `std` mutex of the server is taken through
//! it, and a poisoned one is used as it is (what a panicking holder left is
//! still the state; the server does not stop serving other sessions).

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
