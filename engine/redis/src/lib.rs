//! The Redis Streams session store of gapless (`docs/SPEC.md` §8).
//!
//! Every node of a cluster keeps its sessions here: existence, incarnation
//! (namespace) and owner; dense seqs allocated by the store even when
//! several nodes write to one session; the retained window, trimmed by
//! events and by bytes in the same atomic step as the append; each
//! stream's first, high-water and delivered marks and ended flag;
//! tombstones of reclaimed streams; idle expiry as key TTLs. Each
//! operation is one Lua script on the session's keys, which share one hash
//! slot (`{<session id>}`), so Redis Cluster serves them too: given the URL
//! of any node of a cluster, [`RedisStore::connect`] finds the cluster
//! (`INFO cluster`) and sends each call to the master of its session's
//! slot, and [`Notifier`] hears announcements of sessions on every master.
//!
//! The store answers resumes with the engine's own decision table
//! ([`gapless::session::decide`]) over facts fetched in one script call
//! ([`RedisFacts`]), so every refusal carries the same numbers as the
//! in-process store's; the differential test (`tests/differential.rs`)
//! holds the two to that on random histories. Each event keeps a random
//! nonce, which its wire id carries as a check: a cursor whose event a
//! failover lost is refused `history_rewritten`, never answered with other
//! events.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use gapless_redis::{RedisStore, StoreConfig};
//! let store = RedisStore::connect("redis://127.0.0.1:6379/0", StoreConfig::default()).await?;
//! let session = store.create(gapless::SessionId::random(), None).await?;
//! let events = store.append(&session.id, &[(gapless::StreamId(1), bytes::Bytes::from_static(b"{}"))]).await?;
//! assert_eq!(events[0].seq, gapless::Seq(1));
//! # Ok(()) }
//! ```

mod appender;
mod client;
mod conn;
mod error;
mod facts;
mod keys;
mod model;
mod nodes;
mod notify;
mod reply;
mod scripts;
mod session;
mod sync;
mod task_events;
mod tasks;
#[cfg(feature = "testing")]
pub mod testing;

pub use appender::{
    Appender, QueueGauge, Sink, Written, MAX_BATCH_BYTES, MAX_BATCH_EVENTS, MAX_QUEUED_BYTES,
    MAX_QUEUED_EVENTS,
};
pub use client::{RedisStore, StoreConfig, StoreFigures, DEFAULT_PREFIX};
pub use conn::redacted;
pub use error::{AppendError, RedeemError, ReplayError, StoreError};
pub use facts::{RedisFacts, ReplayPlan};
pub use model::{
    Appended, Attach, OwnEvent, Position, RequestAt, StoredEvent, StoredSession, Tail, TailEntry,
};
pub use notify::{Announced, Notifier, Watch, DEAF_ENV};
pub use session::{holder_node, Hold, Probe, REPLAY_CHUNKS, STANDALONE_HOLD};
pub use task_events::{TaskEventBatch, TaskEventBounds, TaskEventsMeta, TaskEventsRead};
pub use tasks::{NewTask, TaskBounds, TaskCreated};
