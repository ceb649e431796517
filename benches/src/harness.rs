//! What every bench shares: the payload, background threads that stop when
//! dropped, cache-line padding, where non-criterion results go, and what
//! the rest of the machine did meanwhile.

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

/// CPU time in clock ticks: of the whole machine (busy, not idle or
/// waiting for I/O), and of one process with its waited-for children
/// (`redis-benchmark` runs as one).
fn machine_busy() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> =
        stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal
    [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum()
}

fn process_busy(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command name's closing parenthesis: field 3 onwards;
    // utime, stime, cutime, cstime are fields 14 to 17.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    rest.split_whitespace().skip(11).take(4).filter_map(|x| x.parse::<u64>().ok()).sum()
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// What the rest of the machine did during a run. A bench that keeps the
/// cores busy itself (its threads, a `redis-server` it started) raises the
/// load average, which then cannot say whether anything else ran. This
/// can: the machine's busy CPU time minus this process's (with its
/// waited-for children) and that of the `others` it names, in cores over
/// the run. Linux only (`/proc`); elsewhere it reads 0.
#[derive(Debug)]
pub struct Foreign {
    start: std::time::Instant,
    machine: u64,
    own: u64,
    others: Vec<u32>,
}

impl Foreign {
    /// Starts counting; `others`: processes of the bench itself.
    pub fn start(others: &[u32]) -> Foreign {
        let others = others.to_vec();
        Foreign { start: std::time::Instant::now(), machine: machine_busy(), own: own_busy(&others), others }
    }

    /// The cores the rest of the machine used, on average, since `start`.
    pub fn cores(&self) -> f64 {
        let machine = machine_busy().saturating_sub(self.machine);
        let own = own_busy(&self.others).saturating_sub(self.own);
        machine.saturating_sub(own) as f64 / clock_ticks() / self.start.elapsed().as_secs_f64()
    }
}

fn own_busy(others: &[u32]) -> u64 {
    process_busy(std::process::id()) + others.iter().map(|&p| process_busy(p)).sum::<u64>()
}

/// The 1-minute load average, from `/proc/loadavg` (0 where there is none).
pub fn load_1m() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split(' ').next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}
