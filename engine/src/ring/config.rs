//! How big a ring is, and why a configuration is refused.

use std::fmt;

/// Largest seq a ring can publish.
pub(crate) const MAX_SEQ: u64 = (1 << 63) - 1;

/// Default capacity in events (`docs/SPEC.md` §5).
pub const DEFAULT_CAPACITY: usize = 4096;
/// Default payload budget in bytes (`docs/SPEC.md` §5): 16 MiB.
pub const DEFAULT_BYTE_BUDGET: usize = 16 << 20;
/// Default events per chunk.
pub const DEFAULT_CHUNK_EVENTS: usize = 64;
/// Largest accepted capacity in events.
pub const MAX_CAPACITY: usize = 1 << 26;
/// Most chunk slots a ring may need (`capacity / chunk_events`): the slot
/// table is allocated up front, one pointer per slot.
const MAX_SLOTS: usize = 1 << 20;

/// How big a ring is. Both bounds apply: publishing past either evicts the
/// oldest events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Most events retained (1 ..= [`MAX_CAPACITY`]).
    pub capacity: usize,
    /// Most payload bytes retained (at least 1). A single payload larger than
    /// this is refused by `publish`.
    pub byte_budget: usize,
    /// Events per storage chunk: a power of two, 1 ..= 65 536, and at least
    /// `capacity / 2^20` (the slot table is allocated up front). Pinning costs
    /// one reference count per chunk; up to one chunk of already-evicted
    /// events may stay in memory until the chunk is wholly evicted.
    pub chunk_events: usize,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            capacity: DEFAULT_CAPACITY,
            byte_budget: DEFAULT_BYTE_BUDGET,
            chunk_events: DEFAULT_CHUNK_EVENTS,
        }
    }
}

impl RingConfig {
    /// A configuration with the given bounds and the default chunk size
    /// (smaller when the capacity is small).
    pub fn new(capacity: usize, byte_budget: usize) -> Self {
        let small = DEFAULT_CHUNK_EVENTS.min(capacity.max(1).next_power_of_two());
        let chunk_events = small.max((capacity / MAX_SLOTS).next_power_of_two()).min(1 << 16);
        RingConfig { capacity, byte_budget, chunk_events }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.capacity == 0 || self.capacity > MAX_CAPACITY {
            return Err(ConfigError::Capacity { capacity: self.capacity, max: MAX_CAPACITY });
        }
        if self.byte_budget == 0 {
            return Err(ConfigError::ByteBudget { byte_budget: 0 });
        }
        if !self.chunk_events.is_power_of_two()
            || self.chunk_events > 1 << 16
            || self.capacity.div_ceil(self.chunk_events) > MAX_SLOTS
        {
            return Err(ConfigError::ChunkEvents { chunk_events: self.chunk_events });
        }
        Ok(())
    }
}

/// Why a ring configuration was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// Capacity 0 or above the maximum.
    Capacity {
        /// What was asked for.
        capacity: usize,
        /// The largest accepted.
        max: usize,
    },
    /// A byte budget of 0 (no event, not even an empty priming one, could be
    /// accounted for; the smallest budget is 1).
    ByteBudget {
        /// What was asked for.
        byte_budget: usize,
    },
    /// Chunk size not a power of two in 1 ..= 65 536, or so small for the
    /// capacity that the slot table would exceed 2^20 entries.
    ChunkEvents {
        /// What was asked for.
        chunk_events: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Capacity { capacity, max } => {
                write!(f, "ring capacity must be 1..={max} events, got {capacity}")
            }
            ConfigError::ByteBudget { byte_budget } => {
                write!(f, "ring byte budget must be at least 1, got {byte_budget}")
            }
            ConfigError::ChunkEvents { chunk_events } => {
                write!(
                    f,
                    "chunk size must be a power of two up to 65536 and at least capacity / 2^20, got {chunk_events}"
                )
            }
        }
    }
}

impl std::error::Error for ConfigError {}
