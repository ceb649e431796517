//! Task status notifications on a `subscriptions/listen` stream
//! (`docs/SPEC.md` §5.5): the tasks a stream watches, polled, each sent as
//! it is and at every change, to its terminal status.

use super::{now_ms, visible, wire, Tasks};
use crate::backend::task_store::{Lookup, Status};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How often a listen stream looks at the tasks it watches.
pub(crate) const LISTEN_POLL: Duration = Duration::from_millis(500);

/// The tasks a `subscriptions/listen` stream watches (`taskIds`), and what
/// it last sent of each.
pub(crate) struct Watched {
    tasks: Arc<Tasks>,
    caller: Option<String>,
    /// Task id → (status, last update, outstanding keys) last sent.
    seen: HashMap<String, Option<(Status, u64, Vec<String>)>>,
}

impl Watched {
    pub(crate) fn new(tasks: Arc<Tasks>, caller: Option<String>) -> Self {
        Watched { tasks, caller, seen: HashMap::new() }
    }

    /// Watches those of `ids` the caller may see (and that are not
    /// terminal-and-sent yet); returns them, for the acknowledgment.
    pub(crate) async fn agree(&mut self, ids: &[String]) -> Vec<String> {
        let mut agreed = vec![];
        for id in ids {
            if agreed.contains(id) {
                continue;
            }
            let found = self.tasks.store.get(id, now_ms()).await;
            if let Ok(Lookup::Found(_)) = found.map(|l| visible(l, self.caller.as_deref())) {
                self.seen.insert(id.clone(), None);
                agreed.push(id.clone());
            }
        }
        agreed
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The ids it watches now.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.seen.keys().cloned().collect()
    }

    /// The `DetailedTask` of watched task `id` if it changed since it was
    /// last sent (each is sent once as it is at first); a terminal one is
    /// sent once and no longer watched, an expired or vanished one is
    /// dropped. A store that does not answer is asked at the next poll.
    /// One at a time, so that a stream holds at most one built and what its
    /// queue holds.
    pub(crate) async fn change(&mut self, id: &str) -> Option<Map<String, Value>> {
        let l = match self.tasks.store.get(id, now_ms()).await {
            Ok(l) => visible(l, self.caller.as_deref()),
            Err(_) => return None,
        };
        let Lookup::Found(r) = l else {
            self.seen.remove(id);
            return None;
        };
        let mark = Some((r.status, r.updated_at_ms, r.input_requests.keys().cloned().collect()));
        let out = (self.seen.get(id) != Some(&mark)).then(|| wire(&r, true));
        if r.status.is_terminal() {
            self.seen.remove(id);
        } else {
            self.seen.insert(id.to_owned(), mark);
        }
        out
    }
}
