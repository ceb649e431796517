//! The TypeScript SDK's example event store (`InMemoryEventStore`): events
//! in a hash map keyed by event id `<stream>_<time>_<random>`; a replay
//! sorts every stored entry by id, scans to the cursor's id, then sends the
//! later entries of the cursor's stream.
//!
//! Like the original it never evicts (the benches fill it with exactly the
//! ring's capacity). Ids use a zero-padded seq where the original has
//! `Date.now()`, so that string order is publish order (the original
//! reorders events published within the same millisecond).

use bytes::Bytes;
use gapless::StreamId;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A hash map of events, sorted on every replay.
#[derive(Debug, Default)]
pub struct SortScanStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    events: HashMap<String, (StreamId, Bytes)>,
    next: u64,
    rng: u64,
}

impl SortScanStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores an event and returns its id.
    pub fn store(&self, stream: StreamId, payload: Bytes) -> String {
        let mut g = self.lock();
        g.next += 1;
        // The random suffix (an LCG: only its length and spread matter).
        g.rng = g.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let id = format!("{}_{:013}_{:08x}", stream.0, g.next, (g.rng >> 32) as u32);
        g.events.insert(id.clone(), (stream, payload));
        id
    }

    /// Sends every event of the cursor's stream stored after `last_event_id`
    /// to `send`; returns the stream, or `None` for an unknown id.
    pub fn replay_after(&self, last_event_id: &str, mut send: impl FnMut(&str, &Bytes)) -> Option<StreamId> {
        let g = self.lock();
        let (stream, _) = *g.events.get(last_event_id)?;
        let mut entries: Vec<(&String, &(StreamId, Bytes))> = g.events.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let mut found = false;
        for (id, (s, payload)) in entries {
            if !found {
                found = id.as_str() == last_event_id;
                continue;
            }
            if *s == stream {
                send(id, payload);
            }
        }
        Some(stream)
    }
}
