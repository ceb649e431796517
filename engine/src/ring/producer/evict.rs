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
        let cap = self.geo.capacity;
        let budget = self.geo.byte_budget;
        let old = self.oldest;
        let mut o = old;
        if seq - o >= cap {
            let l = self.evict_len(o);
            self.bytes -= l;
            self.evicted_bytes += l as u64;
            o += 1;
        }
        while self.bytes + len > budget {
            let l = self.evict_len(o);
            self.bytes -= l;
            self.evicted_bytes += l as u64;
            o += 1;
        }
        if o == old {
            return false;
        }
        debug_assert!(o <= seq, "eviction never passes the event being published");
        self.oldest = o;
        // `old ..= o` within the tail chunk (the one `o - 1` was read
        // from): no chunk emptied, nothing is freed or cleared, so `oldest`
        // can wait for the publication point and go out right before `head`
        // (one ownership of their cache line per publish, not two).
        if old >= self.tail_first && o < self.tail_end {
            return true;
        }
        self.evict_past(old, o)
    }

    /// Payload length of `o` (retained, `<= head`), the next event to
    /// evict: read from the tail chunk while `o` lies in it.
    #[inline(always)]
    fn evict_len(&mut self, o: u64) -> usize {
        if o >= self.tail_end {
            return self.tail_seek(o);
        }
        let off = o - self.tail_first;
        // SAFETY: `o` lies in the tail chunk and is not evicted yet, so
        // `held` holds that chunk (see the field); its cell was written by
        // us before any later publish and is not rewritten while held.
        unsafe { (*self.tail).get(off as usize) }.payload.len()
    }

    /// [`Producer::evict_len`] when `o` lies past the tail chunk (once per
    /// chunk): finds `o`'s chunk, makes it the tail.
    #[cold]
    #[inline(never)]
    fn tail_seek(&mut self, o: u64) -> usize {
        let chunk = held(&self.held, &self.geo, o);
        self.tail = chunk;
        let k = self.geo.chunk_no(o);
        (self.tail_first, self.tail_end) = (self.geo.chunk_first(k), self.geo.chunk_first(k + 1));
        self.payload_len(o)
    }

    /// The rest of [`Producer::evict_for`] when `old ..= o` did not lie in
    /// the tail chunk: clears the chunks that emptied, if any. Returns
    /// whether `oldest` still has to be stored.
    #[cold]
    #[inline(never)]
    fn evict_past(&mut self, old: u64, o: u64) -> bool {
        let (k0, k1) = (self.geo.chunk_no(old), self.geo.chunk_no(o));
        if k0 == k1 {
            return true;
        }
        self.evict_chunks(k0, k1, o);
        false
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
        self.clear_chunks(self.geo.chunk_no(old), self.geo.chunk_no(o));
        #[cfg(gapless_mutant = "late_evict")]
        self.shared.window.oldest.store(o, Ordering::Release);
        o - old
    }
}
