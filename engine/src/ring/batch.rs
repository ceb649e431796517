//! Borrowed batches: consecutive events of one chunk, handed out at once by
//! a [`Cursor`](super::Cursor) or a `Subscription`.

use super::chunk::Chunk;
use super::event::EventRef;
use gapless_wire::{Seq, StreamId};
use std::fmt;

/// Events `from ..= to` of one chunk (only those of one stream, for a stream
/// cursor), borrowed from the cursor or subscription that handed them out.
/// Reading them touches no reference count: the chunk is already pinned by
/// the cursor. Take [`EventRef::to_event`] to keep one beyond the borrow.
#[derive(Clone, Copy)]
pub struct Batch<'a> {
    chunk: &'a Chunk,
    /// First seq yielded (a seq of the filter's stream, if any).
    from: u64,
    /// Last seq of the range looked at (`>= from`).
    to: u64,
    filter: Option<StreamId>,
    /// For a stream batch out of a snapshot: the stream's seqs in the
    /// range, as offsets from the base, so that iterating reads no cell of
    /// another stream.
    own: Option<(&'a [u32], u64)>,
}

impl fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("from", &self.from)
            .field("to", &self.to)
            .field("filter", &self.filter)
            .finish()
    }
}

impl<'a> Batch<'a> {
    /// A batch of `chunk`'s seqs `from ..= to`.
    ///
    /// # Safety
    /// Every seq in the range was published (the caller observed a head
    /// `>= to` with Acquire), `chunk` holds them
    /// (`chunk.first <= from <= to < chunk.first + chunk.len()`) and stays
    /// pinned for `'a`. Reading cells relies on it. (`from` must also be
    /// yielded, i.e. match `filter`, or `last` panics.) `own`, if given, is
    /// every seq of `filter`'s stream in the range, in order, as offsets
    /// from its base (and `from` is the first of them).
    pub(crate) unsafe fn new(
        chunk: &'a Chunk,
        from: u64,
        to: u64,
        filter: Option<StreamId>,
        own: Option<(&'a [u32], u64)>,
    ) -> Self {
        debug_assert!(chunk.first <= from && from <= to && to < chunk.first + chunk.len() as u64);
        debug_assert!(own.is_none_or(
            |(o, base)| filter.is_some() && o.first().map(|&x| base + u64::from(x)) == Some(from)
        ));
        Batch { chunk, from, to, filter, own }
    }

    /// Seq of the first event.
    pub fn first(&self) -> Seq {
        Seq(self.from)
    }

    /// The last seq of the range the batch covers; for a stream batch,
    /// events of other streams up to it were skipped. The next batch starts
    /// after it.
    pub fn covered_to(&self) -> Seq {
        Seq(self.to)
    }

    /// How many events it yields (at least 1; counts them for a stream
    /// batch).
    pub fn len(&self) -> usize {
        match (self.filter, self.own) {
            (None, _) => (self.to + 1 - self.from) as usize,
            (Some(_), Some((own, _))) => own.len(),
            (Some(_), None) => self.iter().count(),
        }
    }

    /// Always `false`: a batch holds at least one event.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The events, in seq order.
    pub fn iter(&self) -> BatchIter<'a> {
        BatchIter { batch: *self, next: self.from, i: 0 }
    }

    /// The last event.
    pub fn last(&self) -> EventRef<'a> {
        if let Some((own, base)) = self.own {
            return self.get(base + u64::from(*own.last().expect("`from` is yielded")));
        }
        (self.from..=self.to)
            .rev()
            .map(|s| self.get(s))
            .find(|e| self.filter.is_none_or(|f| f == e.stream))
            .expect("`from` is yielded")
    }

    #[inline(always)]
    fn get(&self, seq: u64) -> EventRef<'a> {
        // SAFETY: `seq` is in `from ..= to`, which `new`'s caller guarantees
        // was published (head acquired) and lies in this pinned chunk.
        let slot = unsafe { self.chunk.get((seq - self.chunk.first) as usize) };
        EventRef {
            seq: Seq(seq),
            stream: slot.stream,
            index_in_stream: slot.index_in_stream,
            payload: &slot.payload,
        }
    }
}

impl<'a> IntoIterator for Batch<'a> {
    type Item = EventRef<'a>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Iterator over a [`Batch`].
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    batch: Batch<'a>,
    /// Next seq to look at (without `own`).
    next: u64,
    /// Next index into `own`.
    i: usize,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = EventRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<EventRef<'a>> {
        if let Some((own, base)) = self.batch.own {
            let o = *own.get(self.i)?;
            self.i += 1;
            return Some(self.batch.get(base + u64::from(o)));
        }
        while self.next <= self.batch.to {
            let e = self.batch.get(self.next);
            self.next += 1;
            if self.batch.filter.is_none_or(|f| f == e.stream) {
                return Some(e);
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if let Some((own, _)) = self.batch.own {
            let rest = own.len() - self.i;
            return (rest, Some(rest));
        }
        let rest = (self.batch.to + 1).saturating_sub(self.next) as usize;
        match self.batch.filter {
            None => (rest, Some(rest)),
            Some(_) => (0, Some(rest)),
        }
    }
}
