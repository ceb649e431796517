//! Eviction: what makes room for a publish within the ring's bounds
//! (`evict_for`, inlined into `publish`), and what gives memory back to a
//! budget that spans rings (`evict_to`). Part of [`Producer`]: the unique
//! writer's own methods.

use super::*;

impl Producer {
    /// Advances `oldest` so that publishing `seq` with `len` payload bytes
    /// keeps both bounds. Returns whether the new `oldest` still has to be
    /// stored (it is stored here only when a chunk empties). Inlined into
    /// `publish`: a call frame here cost 16 instructions per publish.
    #[inline(always)]
    pub(super) fn evict_for(&mut self, seq: u64, len: usize) -> bool {
        let mut pending = false;
        // The count bound: at most one event, as `seq` is `head + 1`.
        if seq - self.oldest >= self.geo.capacity {
            pending = self.evict_one();
        }
        if self.bytes + len > self.geo.byte_budget {
            pending = self.evict_bytes(len);
        }
        debug_assert!(self.oldest <= seq, "eviction never passes the event being published");
        pending
    }

    /// Evicts `oldest` (retained: `<= head`). Returns whether the new
    /// `oldest` still has to be stored: not when the event was its chunk's
    /// last, as the chunk is cleared at once, after `oldest` is stored (a
    /// `roll` that follows may need its slot). Otherwise `oldest` can wait
    /// for the publication point and go out right before `head` (one
    /// ownership of their cache line per publish, not two).
    #[inline(always)]
    fn evict_one(&mut self) -> bool {
        if self.tail_cell == self.tail_stop {
            self.tail_seek();
        }
        // SAFETY: `tail_seek` or the previous eviction left `tail_cell` at
        // `oldest`'s cell of the tail chunk (see the field), which `held`
        // keeps (a chunk leaves it only once `oldest` is past its end); the
        // cell was written by us before any later publish and is not
        // rewritten while held.
        let l = unsafe { Chunk::read(&*self.tail_cell) }.payload.len();
        // SAFETY: at most one past the tail chunk's last cell (`tail_stop`).
        self.tail_cell = unsafe { self.tail_cell.add(1) };
        self.bytes -= l;
        self.evicted_bytes += l as u64;
        self.oldest += 1;
        if self.tail_cell == self.tail_stop {
            self.tail_emptied();
            return false;
        }
        true
    }

    /// The byte bound, out of line: evicts the oldest events until `len`
    /// more bytes fit. Returns whether `oldest` still has to be stored.
    #[cold]
    #[inline(never)]
    fn evict_bytes(&mut self, len: usize) -> bool {
        let mut pending = false;
        while self.bytes + len > self.geo.byte_budget {
            pending = self.evict_one();
        }
        pending
    }

    /// Points the tail at `oldest`'s cell (once per chunk, or after a
    /// clear left it unpositioned).
    #[cold]
    #[inline(never)]
    fn tail_seek(&mut self) {
        let o = self.oldest;
        let chunk = held(&self.held, &self.geo, o);
        // Its own length: the ring's first chunk may be short.
        let cells = chunk.cells(0, chunk.len()).as_ptr_range();
        // SAFETY: `o`'s cell index is within its chunk's cells.
        self.tail_cell = unsafe { cells.start.add(self.geo.cell_idx(o)) };
        self.tail_stop = cells.end;
    }

    /// Leaves the tail unpositioned: the next eviction finds `oldest`'s
    /// chunk again (after chunks were cleared, or the first chunk grew).
    pub(super) fn tail_reset(&mut self) {
        self.tail_cell = std::ptr::null();
        self.tail_stop = std::ptr::null();
    }

    /// The tail chunk's last event was evicted: stores `oldest` and clears
    /// the chunk.
    #[cold]
    #[inline(never)]
    fn tail_emptied(&mut self) {
        let o = self.oldest;
        let k = self.geo.chunk_no(o - 1);
        self.tail_reset();
        self.evict_chunks(k, k + 1, o);
    }

    /// The part of [`Producer::evict_for`] when chunks `k0 .. k1` emptied
    /// (once per chunk): out of line, so that the hot path keeps fewer
    /// registers.
    #[cold]
    #[inline(never)]
    fn evict_chunks(&mut self, k0: u64, k1: u64, o: u64) {
        // Once per chunk: the evicted bytes for readers (a statistic).
        self.shared.window.evicted_bytes.store(self.evicted_bytes, Ordering::Relaxed);
        // Chunks wholly below the new `oldest`: readers must see `oldest`
        // past them before their slots are cleared, so that clearing never
        // hides a seq a reader still believes retained: store it now.
        #[cfg(not(gapless_mutant = "late_evict"))]
        self.shared.window.oldest.store(o, Ordering::Release);
        self.clear_chunks(k0, k1);
        #[cfg(gapless_mutant = "late_evict")]
        self.shared.window.oldest.store(o, Ordering::Release);
    }

    /// Takes chunks `k0 .. k1`, wholly below the stored `oldest`, out of
    /// their slots and out of the producer's hands.
    fn clear_chunks(&mut self, k0: u64, k1: u64) {
        for k in k0..k1 {
            let i = self.geo.slot_of(k);
            self.shared.slots[i].store(None);
            let mut gone = self.held[i].take().expect("a retained chunk is held");
            self.chunks -= 1;
            // Unique now (no slot, no snapshot or cursor pinning it): keep
            // its memory for the next chunk. Its payloads go now, as they
            // would if it were freed.
            if let Some(c) = Arc::get_mut(&mut gone) {
                c.recycle(0);
                self.spare = Some(gone);
            } else {
                // Pinned: its memory stays counted while a reader holds it.
                // A wholly evicted chunk lies below the head's, so every
                // cell is written.
                let bytes = chunk_bytes(self.geo.chunk_events) + alloc_of(&gone, 0..self.geo.chunk_events);
                self.pinned_bytes += bytes;
                self.pinned.push((gone, bytes));
            }
        }
    }

    /// Evicts whole chunks of the oldest events, never the chunk being
    /// written, until [`Producer::footprint`] is at most `target` or only
    /// that chunk is left; returns how many events it evicted. The eviction
    /// is like any other: readers that need an evicted event are told, and
    /// a resume needing one is refused with the numbers. For a budget that
    /// spans rings (the session layer's memory budget).
    pub fn evict_to(&mut self, target: usize) -> u64 {
        self.release_unpinned();
        let head_chunk = self.geo.chunk_no(self.head.max(1));
        let old = self.oldest;
        let mut o = old;
        while o <= self.head && self.geo.chunk_no(o) < head_chunk && self.footprint_with(o) > target {
            let next = self.geo.chunk_first(self.geo.chunk_no(o) + 1);
            while o < next {
                let l = self.payload_len(o);
                self.bytes -= l;
                self.evicted_bytes += l as u64;
                o += 1;
            }
        }
        if o == old {
            return 0;
        }
        self.oldest = o;
        self.shared.window.evicted_bytes.store(self.evicted_bytes, Ordering::Relaxed);
        // As in `evict_for`: `oldest` is stored before the slots are
        // cleared, so clearing never hides a seq a reader believes retained.
        #[cfg(not(gapless_mutant = "late_evict"))]
        self.shared.window.oldest.store(o, Ordering::Release);
        self.tail_reset();
        self.clear_chunks(self.geo.chunk_no(old), self.geo.chunk_no(o));
        #[cfg(gapless_mutant = "late_evict")]
        self.shared.window.oldest.store(o, Ordering::Release);
        o - old
    }
}
