//! What a 2026-07-28 client may listen for, and where changes are
//! announced (`docs/SPEC.md` §5.4).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A change a 2026-07-28 client may listen for (`subscriptions/listen`,
/// `docs/SPEC.md` §5.4): announced server-wide with
/// [`crate::McpServer::announce`] or [`crate::RequestContext::announce`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// `notifications/tools/list_changed`.
    ToolsListChanged,
    /// `notifications/prompts/list_changed`.
    PromptsListChanged,
    /// `notifications/resources/list_changed`.
    ResourcesListChanged,
    /// `notifications/resources/updated` for this URI.
    ResourceUpdated(String),
}

/// How many announced changes wait for a listen stream that reads slowly;
/// past it the stream catches up with one notification of every kind it
/// listens to (each says "refetch", so none is lost by coalescing).
pub(crate) const CHANGES_CAPACITY: usize = 256;

/// Where changes are announced: the listen streams' channel, and a count
/// of tool-list changes (what invalidates the mirrored-parameter cache).
#[derive(Clone, Debug)]
pub(crate) struct Announcer {
    tx: tokio::sync::broadcast::Sender<Change>,
    tools: Arc<AtomicU64>,
}

impl Announcer {
    pub(crate) fn new() -> Self {
        Announcer { tx: tokio::sync::broadcast::channel(CHANGES_CAPACITY).0, tools: Default::default() }
    }

    pub(crate) fn announce(&self, c: Change) {
        if c == Change::ToolsListChanged {
            self.tools.fetch_add(1, Ordering::Relaxed);
        }
        let _ = self.tx.send(c);
    }

    /// A receiver of every change announced from now on.
    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change> {
        self.tx.subscribe()
    }

    /// How many tool-list changes were announced so far.
    pub(crate) fn tool_changes(&self) -> u64 {
        self.tools.load(Ordering::Relaxed)
    }
}
