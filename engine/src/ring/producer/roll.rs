//! Chunks coming in: a new chunk at each chunk boundary (`roll`), and the
//! ring's short first chunk replaced by a whole one when it fills (`grow`).
//! Part of [`Producer`]: the unique writer's own methods.

use super::*;

impl Producer {
    /// Starts a new chunk whose first seq is `seq` (a chunk boundary), and
    /// seals the back chunk, which is full; or, when the back chunk is the
    /// ring's short first chunk and full, replaces it by a whole one
    /// (`grow`). A ring's first chunk is short ([`first_chunk_len`]): a
    /// session that publishes a few events and idles keeps a few cells.
    #[cold]
    #[inline(never)]
    pub(super) fn roll(&mut self, seq: u64) {
        let c = self.geo.chunk_events;
        // SAFETY: a non-null `back` is the head's chunk, which `held` holds
        // (see the field).
        if !self.back.is_null() && unsafe { &*self.back }.len() < c {
            return self.grow();
        }
        let len = if seq == 1 { first_chunk_len(c) } else { c };
        self.roll_len(seq, len);
    }

    /// [`Producer::roll`] to a chunk of `len` cells (the chunk size, or
    /// shorter for the ring's first chunk).
    pub(super) fn roll_len(&mut self, seq: u64, len: usize) {
        if !self.pinned.is_empty() {
            self.release_unpinned();
        }
        let c = self.geo.chunk_events;
        if !self.back.is_null() {
            // SAFETY: the back chunk is the head's (`seq - 1` is its last
            // cell), which no eviction has evicted: `held` holds it.
            unsafe { &*self.back }.seal(c);
        }
        let fresh = || Arc::new(Chunk::new(seq, len));
        let chunk = match self.spare.take() {
            Some(mut spare) if len == c => match Arc::get_mut(&mut spare) {
                Some(m) => {
                    m.recycle(seq);
                    spare
                }
                None => fresh(),
            },
            _ => fresh(),
        };
        let k = self.geo.chunk_no(seq);
        debug_assert_eq!(self.geo.cell_idx(seq), 0);
        // The slot's previous chunk (k - nslots) is wholly evicted, and its
        // slot was cleared then: `publish` rolls before it evicts for `seq`,
        // when the retained window is at most `cap` events ending at
        // `seq - 1`, so `oldest >= seq - cap`; that chunk's last seq is
        // `seq - 1 - (nslots - 1) * C`, below it, because
        // `(nslots - 1) * C >= ceil(cap / C) * C >= cap`.
        let i = self.geo.slot_of(k);
        self.shared.slots[i].store(Some(Arc::clone(&chunk)));
        if self.held.len() <= i {
            // A ring's first chunk gets a table of one entry; the next
            // chunk, the table of every slot, once.
            let len = if i == 0 && self.held.is_empty() { 1 } else { self.geo.slots() };
            let mut table = std::mem::take(&mut self.held).into_vec();
            table.resize_with(len, || None);
            self.held = table.into_boxed_slice();
        }
        debug_assert!(self.held[i].is_none(), "the slot's previous chunk was evicted");
        self.back = Arc::as_ptr(&chunk);
        self.held[i] = Some(chunk);
        self.chunks += 1;
        self.roll_at = (seq + len as u64).min(MAX_SEQ + 1);
    }

    /// The ring's short first chunk is full: copies its cells into a whole
    /// chunk and puts that in its slot, before the seq past the short one
    /// is written, so before any head that covers it. A reader that loads
    /// chunk 0 after reading (Acquire) a head or high-water mark past the
    /// short length therefore gets the whole chunk; a reader that cached
    /// the short one sees a seq past its length and loads the slot again.
    /// The short chunk stays valid for those who still hold it (its cells
    /// are the same events, and are never written again).
    #[cold]
    fn grow(&mut self) {
        let c = self.geo.chunk_events;
        let short = self.held[0].take().expect("the first chunk is held while it is the back chunk");
        let n = short.len();
        let full = Arc::new(Chunk::new(short.first, c));
        for i in 0..n {
            // SAFETY: cells `0 .. n` of the short chunk were written by us
            // (it is full: `roll` runs at the seq past it) and are never
            // written again.
            let s = unsafe { short.get(i) };
            let copy = Slot {
                stream: s.stream,
                index_in_stream: s.index_in_stream,
                prev_in_stream: s.prev_in_stream,
                payload: s.payload.clone(),
            };
            // SAFETY: `full` is not shared yet: nobody else can look at it;
            // each of its cells is written once, in order.
            unsafe { full.write(i, copy) };
        }
        short.seal(n);
        #[cfg(not(gapless_mutant = "unslotted_grow"))]
        self.shared.slots[0].store(Some(Arc::clone(&full)));
        // Eviction may have read lengths through the short chunk.
        self.tail_reset();
        self.back = Arc::as_ptr(&full);
        self.held[0] = Some(full);
        self.roll_at = (short.first + c as u64).min(MAX_SEQ + 1);
        // A snapshot, batch or cursor that still holds the short chunk keeps
        // its cells alive, and its references to the first payloads: counted
        // in the footprint, as an evicted chunk it pins, until it lets go.
        // The payloads are then counted twice while the whole chunk holds
        // them too (at most 4, erring high): the whole chunk may be evicted
        // and recycled first, and the short one then keeps them alone.
        if Arc::strong_count(&short) > 1 {
            let bytes = chunk_bytes(n) + alloc_of(&short, 0..n);
            self.pinned_bytes += bytes;
            self.pinned.push((short, bytes));
        }
    }
}
