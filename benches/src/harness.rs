//! What every bench shares: the payload, background threads that stop when
//! dropped, cache-line padding, and where non-criterion results go.

use bytes::Bytes;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Payload size of every published event.
pub const PAYLOAD_LEN: usize = 64;

/// The one payload every contender publishes clones of (a reference-count
/// bump per clone, never a copy). Already promoted to a shared buffer, so
/// the first clone in a timed loop costs the same as the others.
pub fn payload() -> Bytes {
    let b = Bytes::from(vec![0xA5u8; PAYLOAD_LEN]);
    drop(b.clone());
    b
}

/// Aligns (and pads) `T` to 128 bytes, so that two values never share a
/// cache line (or the adjacent-line prefetch pair).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Pins the calling thread to `cpu` (Linux; a no-op elsewhere or if the
/// call is refused), so that the measuring thread and the writer never
/// share a core and the measurement always includes the cross-core traffic.
pub fn pin_to(cpu: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: `set` is a plain bit set on our stack, initialised by
    // CPU_ZERO; sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

/// A coverage answer folded into one word, so that the coverage benches
/// hand one register to `black_box` as they do for the baseline's load
/// (criterion's `black_box` of the 24-byte enum itself costs more than the
/// check).
#[inline(always)]
pub fn digest(c: gapless::Coverage) -> u64 {
    match c {
        gapless::Coverage::Covered => 0,
        gapless::Coverage::Evicted { oldest, missing } => oldest.0 ^ missing,
        gapless::Coverage::Ahead { head } => !head.0,
    }
}

/// Threads that run until this value is dropped: `Drop` raises the stop
/// flag and joins them.
#[derive(Debug)]
pub struct Background {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Background {
    /// No threads yet.
    pub fn new() -> Self {
        Background { stop: Arc::new(AtomicBool::new(false)), threads: Vec::new() }
    }

    /// Spawns a thread running `f(stop)`; `f` must return soon after `stop`
    /// is raised.
    pub fn spawn(&mut self, f: impl FnOnce(&AtomicBool) + Send + 'static) {
        let stop = Arc::clone(&self.stop);
        self.threads.push(std::thread::spawn(move || f(&stop)));
    }

    /// Whether the threads were asked to stop.
    pub fn stopping(stop: &AtomicBool) -> bool {
        stop.load(Ordering::Relaxed)
    }
}

impl Default for Background {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            t.join().expect("background bench thread panicked");
        }
    }
}

/// Where benches write results criterion does not keep (latency
/// percentiles, memory): `<target dir>/gapless-bench/`, the target dir being
/// `$CARGO_TARGET_DIR` or the workspace's `target/`.
pub fn results_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("target"));
    let dir = target.join("gapless-bench");
    std::fs::create_dir_all(&dir).expect("create the results directory");
    dir
}

/// The `q`-quantile (0..=1) of sorted `v`, nearest rank.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    assert!(!sorted.is_empty());
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
