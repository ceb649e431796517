//! Arbitrary operation sequences on one task's event stream
//! (`gapless::task::TaskEvents`, `docs/SPEC.md` §3.9), checked step by step
//! against a plain model: a deque of (seq, payload, emission time) that
//! drops its oldest while over the count or the byte bound, and serves at a
//! time only the events no older than the age bound. Where the task ring
//! differs from a session's ring (seqs from 0, the age bound, the
//! `Gone`/`Ahead` refusals with their numbers, the end), every emit,
//! `earliest` and opening must agree with the model, and a snapshot kept
//! across later emits must still hold what it held (pinned).
#![no_main]

use arbitrary::Arbitrary;
use bytes::Bytes;
use gapless::task::{EmitError, OpenError, TaskEvents, TaskEventsConfig, TaskSnapshot};
use libfuzzer_sys::fuzz_target;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A cursor chosen relative to the stream's state.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum After {
    None,
    /// `next - 1 - k` (a recent event, or before the window).
    FromNext(u8),
    /// `earliest + k - 2` (around the window's edge).
    NearEarliest(u8),
    /// An absolute seq.
    Abs(u8),
    Max,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Emit { len: u8, fill: u8 },
    EmitMany { n: u8, len: u8 },
    /// Time passes (ms).
    Wait(u8),
    Earliest,
    Open { after: After, keep: bool },
    CheckKept,
    DropKept { slot: u8 },
    End,
}

#[derive(Arbitrary, Debug)]
struct Input {
    max_events: u8,
    max_bytes: u8,
    /// The age bound in ms (0: none).
    max_age: u8,
    ops: Vec<Op>,
}

struct Model {
    max_events: usize,
    max_bytes: usize,
    max_age: Option<Duration>,
    /// (seq, payload, emitted at).
    kept: VecDeque<(u64, Bytes, Duration)>,
    next: u64,
    ended: bool,
}

impl Model {
    fn emit(&mut self, payload: Bytes, now: Duration) -> Result<u64, EmitError> {
        if self.ended {
            return Err(EmitError::Ended);
        }
        if payload.len() > self.max_bytes {
            return Err(EmitError::TooLarge { len: payload.len(), max: self.max_bytes });
        }
        let seq = self.next;
        self.next += 1;
        self.kept.push_back((seq, payload, now));
        while self.kept.len() > self.max_events
            || self.kept.iter().map(|e| e.1.len()).sum::<usize>() > self.max_bytes
        {
            self.kept.pop_front();
        }
        Ok(seq)
    }

    /// The events served at `now`: kept, and no older than the age bound.
    fn served(&self, now: Duration) -> Vec<(u64, Bytes)> {
        let fresh = |t: Duration| self.max_age.is_none_or(|a| now.saturating_sub(t) <= a);
        // The age hides a prefix: once one is fresh, every later one is.
        let from = self.kept.iter().position(|e| fresh(e.2)).unwrap_or(self.kept.len());
        self.kept.iter().skip(from).map(|e| (e.0, e.1.clone())).collect()
    }

    fn earliest(&self, now: Duration) -> u64 {
        self.served(now).first().map_or(self.next, |e| e.0)
    }

    fn open(&self, after: Option<u64>, now: Duration) -> Result<Vec<(u64, Bytes)>, OpenError> {
        let earliest = self.earliest(now);
        match after {
            Some(a) if a >= self.next => Err(OpenError::Ahead { next: self.next }),
            Some(a) if a + 1 < earliest => Err(OpenError::Gone { earliest }),
            Some(a) => Ok(self.served(now).into_iter().filter(|e| e.0 > a).collect()),
            None => Ok(self.served(now)),
        }
    }
}

fn events(s: &TaskSnapshot) -> Vec<(u64, Bytes)> {
    s.iter().map(|e| (e.seq, Bytes::copy_from_slice(e.payload))).collect()
}

const MAX_KEPT: usize = 6;

fuzz_target!(|input: Input| {
    let max_events = usize::from(input.max_events % 24) + 1;
    let max_bytes = usize::from(input.max_bytes) + 1;
    let max_age = (input.max_age > 0).then(|| Duration::from_millis(u64::from(input.max_age)));
    let config = TaskEventsConfig { max_events, max_bytes, max_age };
    let t = TaskEvents::new(config).expect("a valid configuration");
    let mut m = Model { max_events, max_bytes, max_age, kept: VecDeque::new(), next: 0, ended: false };
    let base = Instant::now();
    let mut now = Duration::ZERO;
    let mut kept: Vec<(TaskSnapshot, Vec<(u64, Bytes)>)> = vec![];
    for op in input.ops.iter().take(400) {
        match *op {
            Op::Emit { len, fill } => {
                let payload = Bytes::from(vec![fill; usize::from(len)]);
                assert_eq!(t.emit(payload.clone(), base + now), m.emit(payload, now), "{op:?}");
            }
            Op::EmitMany { n, len } => {
                for i in 0..n % 32 {
                    let payload = Bytes::from(vec![i; usize::from(len)]);
                    assert_eq!(t.emit(payload.clone(), base + now), m.emit(payload, now), "{op:?} #{i}");
                }
            }
            Op::Wait(ms) => now += Duration::from_millis(u64::from(ms)),
            Op::Earliest => assert_eq!(t.earliest(base + now), m.earliest(now)),
            Op::Open { after, keep } => {
                let earliest = m.earliest(now);
                let after = match after {
                    After::None => None,
                    After::FromNext(k) => Some(m.next.saturating_sub(1 + u64::from(k))),
                    After::NearEarliest(k) => Some((earliest + u64::from(k)).saturating_sub(2)),
                    After::Abs(k) => Some(u64::from(k)),
                    After::Max => Some(u64::MAX),
                };
                let got = t.snapshot(after, base + now);
                let want = m.open(after, now);
                assert_eq!(got.as_ref().map(events).map_err(|e| *e), want, "after {after:?} at {now:?}");
                if let (Ok(s), true) = (got, keep) {
                    if kept.len() == MAX_KEPT {
                        kept.remove(0);
                    }
                    let held = events(&s);
                    kept.push((s, held));
                }
            }
            Op::CheckKept => {
                for (s, held) in &kept {
                    assert_eq!(&events(s), held, "a kept snapshot changed");
                }
            }
            Op::DropKept { slot } => {
                if !kept.is_empty() {
                    kept.remove(usize::from(slot) % kept.len());
                }
            }
            Op::End => {
                t.end();
                m.ended = true;
                assert!(t.is_ended());
            }
        }
        assert_eq!(t.next_seq(), m.next);
    }
    for (s, held) in &kept {
        assert_eq!(&events(s), held, "a kept snapshot changed");
    }
});
