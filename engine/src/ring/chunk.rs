//! Append-once chunks: the storage behind a ring.
//!
//! A chunk holds `len` consecutive seqs starting at `first`. Each cell is
//! written exactly once, by the producer, before the ring's `head` is
//! advanced past it with a Release store; it is never written again while the
//! chunk is shared, and it is dropped only by [`Chunk`]'s `Drop`, which runs
//! when the last `Arc<Chunk>` goes (the ring's slot, the producer's table and
//! every snapshot or cursor that pinned it), or by `recycle`: a chunk that
//! nobody else holds once it is wholly evicted (the producer's `Arc` is
//! unique, `Arc::get_mut`) has its cells dropped and its memory reused for a
//! later chunk. Both need `&mut`, so no reader can be looking.

use crate::sync::{AtomicUsize, Ordering, UnsafeCell};
use bytes::Bytes;
use gapless_wire::StreamId;
use std::mem::MaybeUninit;

/// What a cell stores for one event (its seq is implied by its position).
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) stream: StreamId,
    /// 1-based position of this event within its stream.
    pub(crate) index_in_stream: u64,
    /// Seq of the previous event of the same stream, 0 if none. Lets a
    /// per-stream resume prove that no event of its stream lies in an
    /// evicted range.
    pub(crate) prev_in_stream: u64,
    pub(crate) payload: Bytes,
}

/// Bit `i` set where `p[i] == want`, for 4 tags at once (SSE2, which
/// every x86_64 has).
///
/// # Safety
/// `p .. p + 4` is readable, initialised and not written meanwhile.
#[cfg(all(target_arch = "x86_64", not(gapless_loom), not(miri)))]
#[inline(always)]
unsafe fn match4(p: *const u32, want: u32) -> u32 {
    use std::arch::x86_64::{
        _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_ps, _mm_set1_epi32,
    };
    // SAFETY: SSE2 is part of x86_64; the load reads the 16 bytes the
    // caller vouches for (an unaligned load needs no alignment).
    unsafe {
        let v = _mm_loadu_si128(p.cast());
        _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, _mm_set1_epi32(want as i32)))) as u32
    }
}

/// Bit `i` set where `p[i] == want`, for 16 tags at once: four compares
/// packed to one byte per tag (signed saturation keeps 0 and -1), one
/// movemask for all sixteen.
///
/// # Safety
/// `p .. p + 16` is readable, initialised and not written meanwhile.
#[cfg(all(target_arch = "x86_64", not(gapless_loom), not(miri)))]
#[inline(always)]
unsafe fn match16(p: *const u32, want: u32) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_epi8, _mm_packs_epi16, _mm_packs_epi32, _mm_set1_epi32,
    };
    // SAFETY: SSE2 is part of x86_64; the four unaligned loads read the 64
    // bytes the caller vouches for.
    unsafe {
        let w = _mm_set1_epi32(want as i32);
        let eq = |i: usize| _mm_cmpeq_epi32(_mm_loadu_si128(p.add(i).cast()), w);
        let lo = _mm_packs_epi32(eq(0), eq(4));
        let hi = _mm_packs_epi32(eq(8), eq(12));
        _mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u32 & 0xffff
    }
}

/// A stream id's tag in [`Chunk`]'s column: its low 32 bits.
#[inline(always)]
fn tag(stream: StreamId) -> u32 {
    stream.0 as u32
}

/// One cell's storage.
pub(crate) type Cell = UnsafeCell<MaybeUninit<Slot>>;

pub(crate) struct Chunk {
    /// Seq stored in `cells[0]`. Immutable while shared: only `recycle`
    /// changes it, through `&mut` (the producer's unique reference).
    pub(crate) first: u64,
    /// The cells. Cell `i` holds seq `first + i` once the ring's head is
    /// `>= first + i`; before that it is uninitialised and nobody reads it.
    cells: Box<[Cell]>,
    /// Each cell's stream id, truncated to 32 bits, in a dense column of
    /// its own (written with the cell, under the same rules): a stream
    /// snapshot finds its stream's events among many by comparing 4 bytes
    /// per cell, 16 to a cache line, instead of loading every cell's line.
    /// A match is a candidate, confirmed against the cell's own id.
    tags: Box<[UnsafeCell<u32>]>,
    /// How many cells (a prefix) are initialised. Written by the producer
    /// (Relaxed) only when it lets go of its writing reference (chunk full,
    /// or producer dropped); read only by `Drop`, which runs after every
    /// other reference is gone and so is ordered after that store by the
    /// `Arc` counter's release/acquire.
    init: AtomicUsize,
    /// The allocated size of the payloads of this chunk once it is sealed,
    /// or [`UNSUMMED`] until the producer's footprint first sums them
    /// (`new` and `recycle` reset it). Here rather than in a table per slot
    /// of the producer's: a ring that holds one chunk pays for one sum, not
    /// for one per slot. Atomic only because the footprint takes `&self`:
    /// every thread that sums a sealed chunk stores the same value (std's
    /// atomic under loom too: no ordering rests on it).
    pub(crate) alloc_sum: std::sync::atomic::AtomicUsize,
}

/// [`Chunk::alloc_sum`] of a chunk not summed yet.
pub(crate) const UNSUMMED: usize = usize::MAX;

// SAFETY: a chunk is shared between the producer and readers. Each cell is
// written once, by the single producer, before the Release store of the
// ring's head that publishes it; readers only read cells whose seq they
// saw published with Acquire. After that a cell is immutable until `Drop`
// or `recycle`, which have exclusive access (`&mut`). The cell contents (`Slot`: ids and `Bytes`)
// are themselves `Send + Sync`.
unsafe impl Sync for Chunk {}
// SAFETY: see `Sync`; moving the last reference to another thread moves
// `Bytes` values, which are `Send`.
unsafe impl Send for Chunk {}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").field("first", &self.first).field("len", &self.cells.len()).finish()
    }
}

impl Chunk {
    pub(crate) fn new(first: u64, len: usize) -> Self {
        let cells = (0..len).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
        let tags = (0..len).map(|_| UnsafeCell::new(0)).collect();
        Chunk {
            first,
            cells,
            tags,
            init: AtomicUsize::new(0),
            alloc_sum: std::sync::atomic::AtomicUsize::new(UNSUMMED),
        }
    }

    /// Cells in this chunk.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.cells.len()
    }

    /// Writes cell `idx`.
    ///
    /// # Safety
    /// Only the ring's producer calls this, once per cell, in index order,
    /// before publishing the cell's seq; no reader reads a cell before its
    /// seq is published.
    #[inline(always)]
    pub(crate) unsafe fn write(&self, idx: usize, slot: Slot) {
        debug_assert!(idx < self.cells.len());
        // SAFETY: as for the cell below: its tag is the producer's alone
        // until the head store that follows.
        unsafe { self.tags.get_unchecked(idx) }.with_mut(|p| unsafe { *p = tag(slot.stream) });
        // SAFETY: `idx` is in bounds (the producer computes it from the
        // chunk's length); the caller guarantees exclusive, write-once access
        // to this cell: no reader touches it before the head store that
        // follows this write.
        unsafe { self.cells.get_unchecked(idx) }.with_mut(|p| {
            // SAFETY: `p` points to the cell's storage; exclusive per the above.
            unsafe { (*p).write(slot) };
        });
    }

    /// Reads cell `idx`.
    ///
    /// # Safety
    /// Cell `idx` was written and its write happens-before this call (the
    /// caller observed, with Acquire, a ring head `>= first + idx`, or is
    /// the producer that wrote it).
    #[inline(always)]
    pub(crate) unsafe fn get(&self, idx: usize) -> &Slot {
        // Checked where a broken protocol must fail loudly (loom, Miri,
        // debug builds): a reader past a short first chunk's cells.
        #[cfg(any(gapless_loom, miri))]
        assert!(idx < self.cells.len(), "cell {idx} of a chunk of {}", self.cells.len());
        debug_assert!(idx < self.cells.len());
        // SAFETY: in bounds (caller computes `idx` below the published head,
        // inside this chunk). The cell is initialised and never written again
        // while `self` is shared (append-once; only `recycle` and `Drop`,
        // through `&mut`, drop cells), so a shared reference that lives as
        // long as `&self` is sound.
        unsafe { self.cells.get_unchecked(idx) }.with(|p| unsafe { (*p).assume_init_ref() })
    }

    /// Bit `i` is set where cell `a + i`'s tag is `stream`'s (`n <= 64`):
    /// the candidates for `stream` among those cells.
    ///
    /// # Safety
    /// As for [`Chunk::get`], for every cell of `a .. a + n`.
    #[inline(always)]
    pub(crate) unsafe fn tag_mask(&self, a: usize, n: usize, stream: StreamId) -> u64 {
        debug_assert!(n <= 64);
        let want = tag(stream);
        let tags = &self.tags[a..a + n];
        let mut mask = 0u64;
        // Past the tags the vector loop matched (none under loom and Miri).
        #[allow(unused_mut)]
        let mut i = 0;
        #[cfg(all(target_arch = "x86_64", not(gapless_loom), not(miri)))]
        if n == 64 {
            // A whole block: the same as the loop below, sixteen at a time.
            for q in 0..4 {
                // SAFETY: as below, for `16 * q .. 16 * q + 16`.
                mask |=
                    u64::from(unsafe { match16(tags.as_ptr().add(16 * q).cast::<u32>(), want) }) << (16 * q);
            }
            return mask;
        }
        #[cfg(all(target_arch = "x86_64", not(gapless_loom), not(miri)))]
        while i + 4 <= n {
            // SAFETY: `i .. i + 4` is within `tags`, the shim's
            // `UnsafeCell<u32>` is transparent over `u32`, and the tags were
            // written before this read (the caller's guarantee) and are not
            // written while `self` is shared.
            mask |= u64::from(unsafe { match4(tags.as_ptr().add(i).cast::<u32>(), want) }) << i;
            i += 4;
        }
        for (j, t) in tags.iter().enumerate().skip(i) {
            // SAFETY: as above: written before, not written meanwhile.
            mask |= u64::from(t.with(|p| unsafe { *p }) == want) << j;
        }
        mask
    }

    /// Drops the written cells and makes the chunk hold seqs from `first`,
    /// so that the producer can reuse a wholly evicted chunk's memory
    /// instead of allocating (it needs `&mut`: nobody else holds it).
    pub(crate) fn recycle(&mut self, first: u64) {
        self.drop_cells();
        self.first = first;
        self.alloc_sum.store(UNSUMMED, std::sync::atomic::Ordering::Relaxed);
    }

    fn drop_cells(&mut self) {
        let n = self.init.load(Ordering::Relaxed);
        self.init.store(0, Ordering::Relaxed);
        for cell in &self.cells[..n] {
            // SAFETY: the first `n` cells were written (see `init`), and we
            // have the only reference (`&mut`): nobody reads them any more.
            // `init` is 0 before any drop runs, so a panicking drop cannot
            // lead to a second drop of the same cell.
            cell.with_mut(|p| unsafe { (*p).assume_init_drop() });
        }
    }

    /// Cells `a .. a + n`, for walking a range without a lookup per cell.
    #[inline(always)]
    pub(crate) fn cells(&self, a: usize, n: usize) -> &[Cell] {
        &self.cells[a..a + n]
    }

    /// Reads a cell of [`Chunk::cells`].
    ///
    /// # Safety
    /// As for [`Chunk::get`], for the cell's index.
    #[inline(always)]
    pub(crate) unsafe fn read(cell: &Cell) -> &Slot {
        // SAFETY: the caller guarantees the cell was written and that write
        // happens-before this read; it is never written again while the
        // chunk (which the caller borrows) is shared (see `get`).
        cell.with(|p| unsafe { (*p).assume_init_ref() })
    }

    /// Records how many cells were written; the producer calls this when it
    /// stops writing into this chunk.
    pub(crate) fn seal(&self, written: usize) {
        debug_assert!(written <= self.cells.len());
        self.init.store(written, Ordering::Relaxed);
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        self.drop_cells();
    }
}
