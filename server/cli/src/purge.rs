//! While the process's resident memory is above the memory budget
//! (`--max-memory`), jemalloc's freed pages go back to the OS at once
//! instead of after its decay (10 s).
//!
//! The budget bounds what the rings keep; the allocator keeps what they let
//! go for a while longer, ready for reuse. Under a flood that evicts as
//! fast as clients publish, that was most of the gap between the budget
//! and the process's RSS: 320 sessions filling 16 MiB rings under a 2 GiB
//! budget peaked at 3 732 MiB with jemalloc's defaults, 2 541 MiB with no
//! decay at all (`scripts/stress.sh`, 2026-12-04). A purge every 100 ms
//! while over the budget costs nothing while under it, so the publish path
//! keeps the default decay's speed.

use std::time::Duration;

/// How often the resident memory is read.
const EVERY: Duration = Duration::from_millis(100);

/// Starts the purger for `budget` bytes (none for an unlimited budget).
pub(crate) fn start(budget: usize) {
    if budget == usize::MAX {
        return;
    }
    let spawned = std::thread::Builder::new().name("gapless-purge".into()).spawn(move || {
        let page = page_size();
        loop {
            std::thread::sleep(EVERY);
            if resident_pages().is_some_and(|p| p.saturating_mul(page) > budget as u64) {
                purge();
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no purger: freed memory goes back to the OS after jemalloc's decay only");
    }
}

/// The process's resident pages (`/proc/self/statm`, its second field).
fn resident_pages() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    statm.split_whitespace().nth(1)?.parse().ok()
}

fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// Returns every arena's unused dirty pages to the OS
/// (`arena.<MALLCTL_ARENAS_ALL>.purge`).
fn purge() {
    // SAFETY: the name is a NUL-terminated C string that lives for the
    // call; a void mallctl takes no old or new value (null pointers, zero
    // lengths), so jemalloc writes through no pointer of ours.
    let r = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if r != 0 {
        tracing::debug!(code = r, "jemalloc refused the purge");
    }
}
