//! Asymmetric fences for the wake-up protocol.
//!
//! A reader that goes to sleep and the producer that publishes form a
//! store-buffering (Dekker) pair: the reader writes "I wait" then reads
//! `head`; the producer writes `head` then reads "anyone waiting?". Each side
//! needs a StoreLoad fence between its write and its read, or both can miss
//! the other's write and the reader sleeps through an event. On x86 a
//! StoreLoad fence (an `mfence` or any locked RMW) is most of a publish.
//!
//! The fence is moved off the producer's path in two steps:
//!
//! * A reader becomes a *registrant* the first time it registers a waker:
//!   it increments `Shared::registrants` and then runs [`heavy`]. The
//!   producer, after its Release store of `head`, runs [`light`] and reads
//!   `registrants`; only when it is non-zero does it pay a real
//!   `fence(SeqCst)` and read the waiting flag (the symmetric protocol).
//! * [`heavy`] is Linux's `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: when
//!   it returns, every thread of the process has run a full memory barrier
//!   (or was not running, and a context switch is one). [`light`] is then a
//!   compiler fence only. Either the producer's read of `registrants` came
//!   after its barrier, and sees the increment; or it came before, and then
//!   so did its store of `head`, which the registrant's later read of `head`
//!   sees. This is the argument behind Linux's own `sys_membarrier` users and
//!   folly's `asymmetricThreadFence{Light,Heavy}`.
//!
//! So a publish with no registrant pays no fence at all, and a registrant
//! pays one system call in its lifetime (not per sleep).
//!
//! Where membarrier is unavailable (not Linux, the call refused, Miri) or not
//! modelled (loom), both functions are `fence(SeqCst)`: the symmetric
//! protocol, which loom model-checks (`loom-tests/`, `wakeup_is_never_lost`
//! and `stream_end_wakes_follower`, with the registrant gate included).
//! Whether the fast path is on is decided once per process, before the first
//! ring exists, and stored in each ring, so both sides of a ring always
//! agree.

use crate::sync::Ordering;

/// Whether the asymmetric fast path is available in this process. Runs the
/// membarrier registration once; later calls return the cached answer.
pub(crate) fn asymmetric_available() -> bool {
    #[cfg(all(target_os = "linux", not(miri), not(gapless_loom)))]
    {
        static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AVAILABLE.get_or_init(linux::register)
    }
    #[cfg(not(all(target_os = "linux", not(miri), not(gapless_loom))))]
    {
        false
    }
}

/// The producer's half: a compiler fence when `asymmetric`, else a full
/// fence.
#[inline(always)]
pub(crate) fn light(asymmetric: bool) {
    if asymmetric {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        crate::sync::fence(Ordering::SeqCst);
    }
}

/// The registrant's half: a process-wide barrier when `asymmetric`, else a
/// full fence.
#[cold]
pub(crate) fn heavy(asymmetric: bool) {
    #[cfg(all(target_os = "linux", not(miri), not(gapless_loom)))]
    if asymmetric {
        linux::barrier();
        return;
    }
    let _ = asymmetric;
    crate::sync::fence(Ordering::SeqCst);
}

#[cfg(all(target_os = "linux", not(miri), not(gapless_loom)))]
mod linux {
    // From <linux/membarrier.h>.
    const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn membarrier(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier(2) takes (cmd, flags, cpu_id) as plain
        // integers and touches no memory of ours; an unknown or refused
        // command returns -1 with errno set.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long, 0 as libc::c_long) }
    }

    /// Asks the kernel for private expedited barriers; `false` if the kernel
    /// (or a seccomp filter) does not offer them.
    pub(super) fn register() -> bool {
        let supported = membarrier(MEMBARRIER_CMD_QUERY);
        supported >= 0
            && supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0
            && supported & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED != 0
            && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    }

    pub(super) fn barrier() {
        // Registration succeeded before any ring existed, and it cannot be
        // undone, so this cannot fail; if it did, the producer's compiler
        // fence would not be enough and going on could lose a wake-up.
        if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 {
            let err = std::io::Error::last_os_error();
            panic!("membarrier(PRIVATE_EXPEDITED) failed after registration: {err}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decision is made once and both halves run with it. On a Linux
    /// kernel that offers private expedited membarrier (4.14 and later,
    /// unless a seccomp filter refuses it) the fast path is on.
    #[test]
    fn both_halves_run_with_the_process_decision() {
        let a = asymmetric_available();
        assert_eq!(a, asymmetric_available(), "decided once");
        light(a);
        heavy(a);
        light(false);
        heavy(false);
        eprintln!("asymmetric fences available: {a}");
    }
}
