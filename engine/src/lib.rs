//! # gapless: MCP event streams that never lose an event silently
//!
//! An MCP server streams events to a client over SSE; connections break and
//! the client resumes with `Last-Event-ID`, or moves the session to a
//! WebSocket. gapless answers every resume with every event after the
//! client's cursor, in order, or with a [`Refusal`] that says what is
//! missing. One [`Hub`] holds the sessions; each [`Session`] owns a
//! lock-free ring of its recent events.
//!
//! ```
//! use bytes::Bytes;
//! use gapless::{ErrorKind, Hub, HubConfig, Missing, Refusal, ResumeRequest, RingConfig, Seq};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A hub whose sessions keep their newest 8 events.
//! let hub = Hub::new(HubConfig { ring: RingConfig::new(8, 1 << 20), ..HubConfig::default() }).unwrap();
//! let session = hub.create(None).unwrap(); // None: no caller identity to bind to
//! let sid = session.id().to_string(); // what the client sends as Mcp-Session-Id
//!
//! // One request's stream: the server publishes three events, then ends it.
//! let stream = session.open_stream().unwrap();
//! for i in 1..=3 {
//!     session.publish(&stream, Bytes::from(format!("event {i}"))).unwrap(); // seqs 1, 2, 3
//! }
//! session.end_stream(&stream).unwrap();
//!
//! // The transport writes the first event to the client and records that
//! // it was delivered; then the connection breaks.
//! let mut live = session.subscribe_stream(stream.id(), Seq(0)).unwrap();
//! let first = live.recv().await.unwrap().unwrap();
//! session.reader().mark_delivered(&first);
//! drop(live);
//!
//! // The client resumes with the event id it processed last.
//! let cursor = session.event_id(first.stream, first.seq).to_string(); // "<ns>_<stream>-1"
//! let resume = hub.resume_stream(ResumeRequest::new(&sid).cursor(&cursor)).unwrap();
//! let mut sub = resume.into_subscription(); // the pinned gap, then live
//! let mut got = vec![];
//! while let Some(event) = sub.recv().await {
//!     got.push(event.unwrap().seq);
//! }
//! assert_eq!(got, [Seq(2), Seq(3)]); // every event after the cursor, then the stream's end
//!
//! // Eight more events on another stream push 2 and 3 out of the ring:
//! // the same resume is now refused, with the numbers, never a silent gap.
//! for _ in 0..8 {
//!     session.publish(session.standalone(), Bytes::from_static(b"tick")).unwrap();
//! }
//! let refusal = hub.resume_stream(ResumeRequest::new(&sid).cursor(&cursor)).unwrap_err();
//! assert_eq!(refusal.kind(), ErrorKind::GapNotCovered);
//! assert_eq!(refusal.http_status(), 409);
//! match refusal {
//!     Refusal::GapNotCovered { oldest, missing, .. } => {
//!         assert_eq!(oldest, Seq(4));
//!         assert_eq!(missing, Missing::Exact(2)); // seqs 2 and 3
//!     }
//!     other => unreachable!("{other}"),
//! }
//! # }
//! ```
//!
//! ## What is where
//!
//! The crate has three layers, each importing only the ones below it:
//!
//! * [`ring`](mod@ring): one ring of events, its single [`Producer`] and its
//!   [`Reader`]s; the wait-free [`Coverage`] check, pinning [`Snapshot`]s,
//!   cursors and borrowed batches. The publish and read protocols, and why
//!   they are sound, are written out in that module.
//! * [`session`]: the [`Hub`] and its [`Session`]s (ids, incarnations,
//!   limits, owner binding, idle expiry), the resume decision table
//!   ([`Hub::resume_stream`], [`Hub::check_migration`]), migration tickets
//!   ([`Hub::migrate`]) and pacing state.
//! * [`subscription`] (feature `tokio`, on by default): [`Subscription`],
//!   which replays a pinned gap and follows the ring live, and the paced
//!   publish ([`Session::publish_paced`]).
//!
//! What a client needs too comes from the std-only crate `gapless-wire`,
//! re-exported here: [`Seq`], [`StreamId`], [`EventId`] and the
//! [`event_id`] codec, every [`ErrorKind`] of the contract with its HTTP
//! status and JSON name, and the sans-IO client guard [`client`].
//!
//! The behaviour is specified in `docs/SPEC.md` of the repository: the
//! resume decision table is its §4.2, the WebSocket migration its §4.3.
//!
//! ## Guarantees
//!
//! * Seqs are dense per session: 1, 2, 3, ... A cursor names a stream and
//!   a seq; a stream resume replays that stream's later events, a
//!   migration every later event of the session.
//! * Publishing never waits for a reader and takes no lock in the ring
//!   (the session's writers serialize on a per-session mutex in front of
//!   it); a stalled reader cannot block the producer or another reader.
//! * Eviction is the only way an event leaves a ring, and every read that
//!   needed an evicted event says so ([`Lagged`], [`SnapshotError`],
//!   [`Refusal::GapNotCovered`]).
//! * A [`Snapshot`] pins its events: it stays valid however far the ring
//!   moves on.
//!
//! ## Bad input and limits
//!
//! Nothing here panics on bad input; each case has a typed answer.
//!
//! | input | result |
//! |---|---|
//! | capacity 0, or above [`ring::MAX_CAPACITY`] | [`ring::ConfigError::Capacity`] |
//! | byte budget 0 (smaller than any event's accounting) | [`ring::ConfigError::ByteBudget`]; any budget of at least 1 is valid |
//! | chunk size not a power of two up to 65 536 | [`ring::ConfigError::ChunkEvents`] |
//! | a payload larger than the whole byte budget | [`ring::PublishError::PayloadTooLarge`]; the ring is unchanged |
//! | a payload exactly the budget | accepted; every other event is evicted |
//! | publishing on an ended stream / another ring's stream | [`ring::PublishError::StreamEnded`] / [`ring::PublishError::ForeignStream`] |
//! | cursor `Seq(0)` ("processed nothing") | [`Coverage::Covered`] while seq 1 is retained, else `Evicted { oldest, missing: oldest - 1 }`; `snapshot(Seq(0))` is everything |
//! | cursor past the head, e.g. `u64::MAX` | [`Coverage::Ahead`] / [`SnapshotError::Ahead`] with the head |
//! | a cursor that needs an evicted event | [`Coverage::Evicted`], [`SnapshotError::Evicted`], [`Lagged`]: always with the numbers |
//! | 2^63 - 1 events published | [`ring::PublishError::SeqExhausted`] |
//! | a resume request of any shape | exactly one row of the decision table: `Ok(Resume)` or a [`Refusal`] |
#![deny(missing_docs)]

pub mod ring;
pub mod session;
#[cfg(feature = "tokio")]
pub mod subscription;
mod sync;
pub mod task;

pub use gapless_wire as wire;
pub use gapless_wire::{client, event_id, task_stream, ErrorKind, EventId, Namespace, Seq, StreamId};

pub use ring::{
    ring, Coverage, Event, Lagged, Missing, Next, Producer, Reader, RingConfig, Snapshot, SnapshotError,
    StreamHandle,
};
pub use session::{
    Hub, HubConfig, Lease, Refusal, Resume, ResumeRequest, Session, SessionError, SessionId,
    SessionPublishError,
};
#[cfg(feature = "tokio")]
pub use subscription::Subscription;
