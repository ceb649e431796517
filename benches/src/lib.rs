//! Peers and helpers shared by the gapless benchmarks (see `BENCHMARKS.md`).
//!
//! Every criterion group in `benches/benches/` puts gapless next to its
//! peers doing the same work, so that the report can show ratios. The peers
//! live here, in one file each, so that the benches and the `memory` binary
//! measure the same code:
//!
//! * [`DequeStore`]: a `Mutex<VecDeque<Arc<Event>>>`, the store the MCP SDKs
//!   ship (one allocation per event, one lock per operation).
//! * [`SortScanStore`]: the TypeScript SDK's example event store: a hash map
//!   keyed by event id, sorted on every replay, then scanned.
//! * [`SpeedOfLight`]: the publish floor: the same records written into a
//!   preallocated array with one Release store each, no readers.
//! * [`harness`]: the shared payload, background threads, result paths.
//!
//! Peers of `tokio::sync::broadcast` use tokio directly.

pub mod deque_store;
pub mod harness;
pub mod sort_scan_store;
pub mod speed_of_light;

pub use deque_store::{DequeStore, Evicted};
pub use sort_scan_store::SortScanStore;
pub use speed_of_light::SpeedOfLight;
