//! Wall-clock time as the wire and the stores count it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix time now, in milliseconds.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
