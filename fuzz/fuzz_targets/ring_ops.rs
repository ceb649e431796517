//! Arbitrary single-threaded operation sequences on one ring, checked step by
//! step against the reference ring in `gapless_fuzz::model_ring`: publishes
//! on several streams (opening and ending streams), cursors (whole-ring and
//! per-stream, with seeks), coverage, whole-ring and per-stream snapshots
//! (kept alive across later evictions to check pinning), delivery marks and
//! stream records. Any difference in seqs, payload bytes (and pointers: no
//! copies), errors and their numbers, or snapshot bounds panics.
#![no_main]

use arbitrary::Arbitrary;
use bytes::Bytes;
use gapless::ring::{
    ring, Coverage, Cursor, Event, Lagged, Missing, Next, NextBatch, Producer, PublishError, Reader, RingConfig,
    Snapshot, SnapshotError, StreamHandle, StreamInfo,
};
use gapless::{Seq, StreamId};
use gapless_fuzz::model_ring::{MPublishError, ModelRing};
use libfuzzer_sys::fuzz_target;

/// A seq chosen relative to the ring's current state.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Pos {
    /// `head - k`.
    FromHead(u8),
    /// `oldest + k - 4` (around the eviction edge).
    NearOldest(u8),
    /// An absolute seq.
    Abs(u8),
    /// 0: "processed nothing".
    Zero,
    /// `u64::MAX`.
    Max,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Publish { stream: u8, len: u8, fill: u8 },
    PublishMany { stream: u8, n: u8, len: u8 },
    OpenStream,
    EndStream { stream: u8 },
    PublishForeign { len: u8 },
    EndForeign,
    NewCursor { slot: u8, stream: Option<u8>, at: Pos },
    Next { slot: u8, times: u8 },
    Seek { slot: u8, at: Pos },
    Coverage { at: Pos },
    Snapshot { after: Pos, keep: bool },
    SnapshotStream { stream: u8, after: Pos, keep: bool },
    CheckPinned,
    DropPinned { slot: u8 },
    MarkDelivered { stream: u8, pick: u8, via_reader: bool },
    MarkOtherStream { stream: u8, pick: u8 },
    Info { stream: u8 },
    StreamOf { at: Pos },
    Close,
}

#[derive(Arbitrary, Debug)]
struct Input {
    capacity: u8,
    chunk_log: u8,
    budget: u8,
    ops: Vec<Op>,
}

const MAX_STREAMS: usize = 40;
const MAX_CURSORS: usize = 4;
const MAX_PINNED: usize = 6;

struct ModelCursor {
    cursor: Cursor,
    stream: Option<u64>,
    next: u64,
}

/// A snapshot kept alive, with the events it must yield.
struct Pinned {
    snap: Snapshot,
    filter: Option<u64>,
    seqs: Vec<u64>,
    covered_to: u64,
}

struct World {
    producer: Option<Producer>,
    reader: Reader,
    handles: Vec<StreamHandle>,
    foreign: (Producer, StreamHandle),
    model: ModelRing,
    cursors: Vec<Option<ModelCursor>>,
    pinned: Vec<Pinned>,
    payload_counter: u64,
    /// log2 of the ring's chunk size.
    chunk_log: u32,
}

impl World {
    fn pos(&self, p: Pos) -> u64 {
        let (head, oldest) = (self.model.head(), self.model.oldest());
        match p {
            Pos::FromHead(k) => head.saturating_sub(u64::from(k % 20)),
            Pos::NearOldest(k) => (oldest + u64::from(k % 12)).saturating_sub(4),
            Pos::Abs(k) => u64::from(k),
            Pos::Zero => 0,
            Pos::Max => u64::MAX,
        }
    }

    /// A stream id: `0` (never valid), an opened one, or one past the last.
    fn stream_id(&self, k: u8) -> u64 {
        u64::from(k) % (self.handles.len() as u64 + 2)
    }

    fn opened(&self, id: u64) -> bool {
        id >= 1 && id <= self.handles.len() as u64
    }

    fn payload(&mut self, len: u8, fill: u8) -> Bytes {
        self.payload_counter += 1;
        let len = usize::from(len % 65);
        let c = self.payload_counter;
        Bytes::from((0..len).map(|i| (c as u8).wrapping_mul(31) ^ fill ^ (i as u8)).collect::<Vec<u8>>())
    }

    fn open(&mut self) {
        if self.handles.len() >= MAX_STREAMS {
            return;
        }
        let Some(p) = self.producer.as_mut() else { return };
        let h = p.open_stream();
        let id = self.model.open();
        assert_eq!(h.id(), StreamId(id), "stream ids are dense from 1");
        self.handles.push(h);
    }

    fn publish(&mut self, stream: u8, payload: Bytes) {
        if self.producer.is_none() {
            return;
        }
        if self.handles.is_empty() {
            self.open();
        }
        let id = u64::from(stream) % self.handles.len() as u64 + 1;
        let len = payload.len();
        let refusals = self.model.refusals(id, len);
        let h = self.handles[(id - 1) as usize].clone();
        let got = self.producer.as_mut().unwrap().publish(&h, payload.clone());
        if refusals.is_empty() {
            let want = self.model.publish(id, payload);
            assert_eq!(got, Ok(Seq(want)), "publish on stream {id} of {len} bytes");
        } else {
            let err = got.expect_err("the model refuses this publish");
            let ok = refusals.iter().any(|r| match (r, err) {
                (MPublishError::Ended, PublishError::StreamEnded { stream }) => stream == StreamId(id),
                (MPublishError::TooLarge, PublishError::PayloadTooLarge { len: l, budget }) => {
                    l == len && budget == self.model.budget
                }
                _ => false,
            });
            assert!(ok, "publish refused with {err:?}, model expects one of {refusals:?}");
        }
    }

    /// Expected `try_next` of a model cursor, advancing the model cursor:
    /// `Ok(Some(seq))` an event, `Ok(None)` nothing (`Pending`, or `End` when
    /// finished), `Err((wanted, oldest))` lagged.
    fn model_next(&self, c: &mut ModelCursor) -> Result<Option<u64>, (u64, u64)> {
        let (head, oldest) = (self.model.head(), self.model.oldest());
        loop {
            if c.next > head {
                return Ok(None);
            }
            if let Some(s) = c.stream {
                if self.finished(c) && c.next > self.model.stream(s).high() {
                    return Ok(None);
                }
            }
            if c.next < oldest {
                // A stream cursor lags only if an event of its own stream is
                // among the evicted ones it still needs; it skips the others.
                if let Some(s) = c.stream {
                    if self.model.stream_seqs_in(s, c.next, oldest - 1).is_empty() {
                        c.next = oldest;
                        continue;
                    }
                }
                return Err((c.next, oldest));
            }
            let seq = c.next;
            c.next += 1;
            if let Some(s) = c.stream {
                if self.model.event(seq).stream != s {
                    continue;
                }
            }
            return Ok(Some(seq));
        }
    }

    /// Nothing more will come to this cursor: the producer is gone (for
    /// every cursor), or its stream ended.
    fn finished(&self, c: &ModelCursor) -> bool {
        self.producer.is_none() || c.stream.is_some_and(|s| self.model.stream(s).ended)
    }

    fn check_event(&self, got: &Event, seq: u64) {
        let want = self.model.event(seq);
        assert_eq!(got.seq, Seq(seq));
        assert_eq!(got.stream, StreamId(want.stream), "stream of seq {seq}");
        assert_eq!(got.index_in_stream, want.index, "index_in_stream of seq {seq}");
        assert_eq!(got.payload, want.payload, "payload of seq {seq}");
        if !want.payload.is_empty() {
            assert_eq!(got.payload.as_ptr(), want.payload.as_ptr(), "payload of seq {seq} was copied");
        }
    }

    fn step_cursor(&mut self, slot: usize) {
        let Some(mut mc) = self.cursors[slot].take() else { return };
        let finished = self.finished(&mc);
        let want = self.model_next(&mut mc);
        let got = mc.cursor.try_next();
        match (want, got) {
            (Ok(Some(seq)), Ok(Next::Event(e))) => self.check_event(&e, seq),
            (Ok(None), Ok(Next::End)) if finished => {}
            (Ok(None), Ok(Next::Pending)) if !finished => {}
            (Err((wanted, oldest)), Err(Lagged { wanted: w, oldest: o })) => {
                assert_eq!((w, o), (Seq(wanted), Seq(oldest)), "Lagged numbers");
            }
            (want, got) => panic!(
                "cursor {slot} ({:?}): model {want:?} (finished {finished}), engine {got:?}",
                mc.stream
            ),
        }
        assert_eq!(mc.cursor.position(), Seq(mc.next), "cursor position");
        self.cursors[slot] = Some(mc);
    }

    /// One `try_next_batch`: the batch must be the model's next events of
    /// the cursor, from the first one up to the head or the end of that
    /// event's chunk, whichever comes first.
    fn step_cursor_batch(&mut self, slot: usize) {
        let Some(mut mc) = self.cursors[slot].take() else { return };
        let finished = self.finished(&mc);
        let want = self.model_next(&mut mc);
        let got = match mc.cursor.try_next_batch() {
            Ok(NextBatch::Events(b)) => Ok(Some((
                b.first().0,
                b.covered_to().0,
                b.iter().map(|e| e.to_event()).collect::<Vec<_>>(),
                b.len(),
                b.last().seq.0,
            ))),
            Ok(NextBatch::Pending) => Ok(None),
            Ok(NextBatch::End) => Err(None),
            Err(l) => Err(Some(l)),
        };
        match (want, got) {
            (Ok(Some(first)), Ok(Some((b_first, covered_to, events, len, last)))) => {
                let chunk_end = (((first - 1) >> self.chunk_log) + 1) << self.chunk_log;
                let end = self.model.head().min(chunk_end);
                assert_eq!(b_first, first, "batch first");
                assert_eq!(covered_to, end, "batch range end");
                let mut seqs = vec![first];
                loop {
                    let save = mc.next;
                    match self.model_next(&mut mc) {
                        Ok(Some(s)) if s <= end => seqs.push(s),
                        _ => {
                            mc.next = save;
                            break;
                        }
                    }
                }
                mc.next = end + 1;
                assert_eq!(events.iter().map(|e| e.seq.0).collect::<Vec<_>>(), seqs, "batch events");
                assert_eq!((len, last), (seqs.len(), *seqs.last().unwrap()), "batch len/last");
                for e in &events {
                    self.check_event(e, e.seq.0);
                }
                assert_eq!(mc.cursor.position(), Seq(mc.next), "cursor position after a batch");
            }
            (Ok(None), Ok(None)) if !finished => {
                assert_eq!(mc.cursor.position(), Seq(mc.next), "cursor position");
            }
            // After `End` a stream cursor's position is not meaningful (a
            // batch read may have scanned past the stream's last event).
            (Ok(None), Err(None)) if finished => {}
            (Err((wanted, oldest)), Err(Some(Lagged { wanted: w, oldest: o }))) => {
                assert_eq!((w, o), (Seq(wanted), Seq(oldest)), "Lagged numbers");
                assert_eq!(mc.cursor.position(), Seq(mc.next), "cursor position");
            }
            (want, got) => panic!(
                "cursor {slot} ({:?}) batch: model {want:?} (finished {finished}), engine {:?}",
                mc.stream,
                got.map(|o| o.map(|(f, t, ..)| (f, t)))
            ),
        }
        self.cursors[slot] = Some(mc);
    }

    fn check_snapshot(&self, snap: &Snapshot, filter: Option<u64>, seqs: &[u64], covered_to: u64) {
        let got: Vec<u64> = snap.iter().map(|e| e.seq.0).collect();
        assert_eq!(got, seqs, "snapshot events (filter {filter:?})");
        for e in snap.iter() {
            self.check_event(&e.to_event(), e.seq.0);
        }
        assert_eq!(snap.first(), seqs.first().map(|&s| Seq(s)), "snapshot first");
        assert_eq!(snap.last(), seqs.last().map(|&s| Seq(s)), "snapshot last");
        assert_eq!(snap.len(), seqs.len(), "snapshot len");
        assert_eq!(snap.is_empty(), seqs.is_empty(), "snapshot is_empty");
        assert_eq!(snap.stream(), filter.map(StreamId), "snapshot stream");
        assert_eq!(snap.covered_to(), Seq(covered_to), "snapshot covered_to");
        let (lo, hi) = snap.iter().size_hint();
        assert!(lo <= seqs.len() && hi.is_none_or(|h| h >= seqs.len()), "size_hint");
    }

    fn keep(&mut self, keep: bool, p: Pinned) {
        if keep {
            if self.pinned.len() >= MAX_PINNED {
                self.pinned.remove(0);
            }
            self.pinned.push(p);
        }
    }

    fn snapshot(&mut self, after: u64, keep: bool) {
        let (head, oldest) = (self.model.head(), self.model.oldest());
        let got = self.reader.snapshot(Seq(after));
        if after > head {
            assert_eq!(got.unwrap_err(), SnapshotError::Ahead { head: Seq(head) }, "snapshot({after})");
        } else if after + 1 < oldest {
            assert_eq!(
                got.unwrap_err(),
                SnapshotError::Evicted {
                    wanted: Seq(after + 1),
                    oldest: Seq(oldest),
                    missing: Missing::Exact(oldest - 1 - after)
                },
                "snapshot({after})"
            );
        } else {
            let snap = got.unwrap_or_else(|e| panic!("snapshot({after}) refused: {e:?}"));
            let seqs: Vec<u64> = (after + 1..=head).collect();
            self.check_snapshot(&snap, None, &seqs, head);
            self.keep(keep, Pinned { snap, filter: None, seqs, covered_to: head });
        }
    }

    fn snapshot_stream(&mut self, id: u64, after: u64, keep: bool) {
        let (head, oldest) = (self.model.head(), self.model.oldest());
        let got = self.reader.snapshot_stream(StreamId(id), Seq(after));
        if !self.opened(id) || self.model.stream(id).reclaimed {
            assert_eq!(got.unwrap_err(), SnapshotError::UnknownStream { stream: StreamId(id) });
            return;
        }
        if after > head {
            assert_eq!(
                got.unwrap_err(),
                SnapshotError::Ahead { head: Seq(head) },
                "snapshot_stream({id}, {after})"
            );
            return;
        }
        let st = self.model.stream(id);
        // Events of the stream after the cursor that were evicted.
        let lost = self.model.stream_seqs_in(id, after + 1, oldest - 1).len() as u64;
        if lost == 0 {
            let snap = got.unwrap_or_else(|e| panic!("snapshot_stream({id}, {after}) refused: {e:?}"));
            let seqs = self.model.stream_seqs_in(id, after + 1, head);
            self.check_snapshot(&snap, Some(id), &seqs, head);
            self.keep(keep, Pinned { snap, filter: Some(id), seqs, covered_to: head });
            return;
        }
        match got {
            Err(SnapshotError::Evicted { wanted, oldest: o, missing }) => {
                assert_eq!(
                    (wanted, o),
                    (Seq(after + 1), Seq(oldest)),
                    "snapshot_stream({id}, {after}) numbers"
                );
                // Exact at the delivered mark, otherwise a lower bound >= 1
                // (SnapshotError::Evicted docs).
                if after == st.delivered {
                    assert_eq!(
                        missing,
                        Missing::Exact(lost),
                        "snapshot_stream({id}, {after}) missing at the delivered mark"
                    );
                } else {
                    assert!(
                        matches!(missing, Missing::AtLeast(m) if (1..=lost).contains(&m)),
                        "snapshot_stream({id}, {after}) missing {missing} is not a lower bound of {lost} \
                         (delivered mark {})",
                        st.delivered
                    );
                }
            }
            other => {
                panic!("snapshot_stream({id}, {after}): {lost} of its events were evicted, got {other:?}")
            }
        }
    }

    fn model_info(&self, id: u64) -> StreamInfo {
        let st = self.model.stream(id);
        StreamInfo {
            id: StreamId(id),
            first: Seq(st.first()),
            high: Seq(st.high()),
            published: st.seqs.len() as u64,
            delivered: Seq(st.delivered),
            ended: st.ended,
        }
    }

    /// Compares the reader's stream directory with the model; learns which
    /// records the engine reclaimed (and checks that it was allowed to).
    fn sync_records(&mut self) {
        let listed = self.reader.streams();
        let oldest = self.model.oldest();
        let mut it = listed.iter().peekable();
        for id in 1..=self.handles.len() as u64 {
            let present = it.peek().is_some_and(|i| i.id == StreamId(id));
            let st = self.model.stream(id);
            if present {
                let info = it.next().unwrap();
                assert!(!st.reclaimed, "stream {id}'s record came back after being reclaimed");
                assert_eq!(*info, self.model_info(id), "streams() entry of {id}");
                assert_eq!(self.reader.stream(StreamId(id)), Some(*info));
            } else {
                assert!(
                    st.reclaimable(oldest),
                    "stream {id} reclaimed while not ended or still retained: {st:?}"
                );
                // Fewer than 256 streams: records of streams not fully
                // delivered are kept (producer.rs open_stream).
                assert!(
                    st.reclaimed || st.delivered >= st.high(),
                    "stream {id} reclaimed undelivered: {st:?}"
                );
                assert_eq!(self.reader.stream(StreamId(id)), None);
                self.model.stream_mut(id).reclaimed = true;
            }
            // The handle always sees its record.
            let h = &self.handles[(id - 1) as usize];
            assert_eq!(h.info(), self.model_info(id), "handle info of {id}");
            assert_eq!(
                h.published(),
                self.model.stream(id).seqs.len() as u64,
                "handle published count of {id}"
            );
        }
        assert!(it.next().is_none(), "streams() lists a stream never opened");
        assert_eq!(self.reader.stream(StreamId(0)), None);
        assert_eq!(self.reader.stream(StreamId(self.handles.len() as u64 + 1)), None);
    }

    fn check_globals(&self) {
        let (head, oldest) = (self.model.head(), self.model.oldest());
        assert_eq!(self.reader.head(), Seq(head), "head");
        assert_eq!(self.reader.oldest(), Seq(oldest), "oldest");
        assert_eq!(self.reader.streams_opened(), self.handles.len() as u64, "streams_opened");
        assert_eq!(self.reader.is_closed(), self.producer.is_none(), "is_closed");
        if let Some(p) = &self.producer {
            assert_eq!(p.head(), Seq(head));
            assert_eq!(p.oldest(), Seq(oldest));
            assert_eq!(p.retained_bytes(), self.model.bytes, "retained bytes");
        }
        assert!(self.model.window.len() <= self.model.capacity && self.model.bytes <= self.model.budget);
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Publish { stream, len, fill } => {
                let p = self.payload(len, fill);
                self.publish(stream, p);
            }
            Op::PublishMany { stream, n, len } => {
                for i in 0..(n % 24) {
                    let p = self.payload(len.wrapping_add(i.wrapping_mul(7)), i);
                    self.publish(stream, p);
                }
            }
            Op::OpenStream => self.open(),
            Op::EndStream { stream } => {
                let id = self.stream_id(stream);
                if !self.opened(id) {
                    return;
                }
                if let Some(p) = self.producer.as_mut() {
                    p.end_stream(&self.handles[(id - 1) as usize]);
                    self.model.stream_mut(id).ended = true;
                }
            }
            Op::PublishForeign { len } => {
                let payload = self.payload(len, 0);
                let fh = self.foreign.1.clone();
                if let Some(p) = self.producer.as_mut() {
                    assert_eq!(p.publish(&fh, payload), Err(PublishError::ForeignStream { stream: fh.id() }));
                }
            }
            Op::EndForeign => {
                // Ending another ring's stream through this producer is a no-op.
                let fh = self.foreign.1.clone();
                if let Some(p) = self.producer.as_mut() {
                    p.end_stream(&fh);
                }
                assert!(!fh.info().ended, "a foreign producer ended another ring's stream");
                assert_eq!(self.foreign.0.head(), Seq(0));
            }
            Op::NewCursor { slot, stream, at } => {
                let slot = usize::from(slot) % MAX_CURSORS;
                let next = self.pos(at);
                match stream {
                    None => {
                        let cursor = self.reader.cursor(Seq(next));
                        self.cursors[slot] = Some(ModelCursor { cursor, stream: None, next: next.max(1) });
                    }
                    Some(k) => {
                        let id = self.stream_id(k);
                        let got = self.reader.stream_cursor(StreamId(id), Seq(next));
                        let has_record = self.opened(id) && !self.model.stream(id).reclaimed;
                        assert_eq!(got.is_some(), has_record, "stream_cursor({id}) with record {has_record}");
                        if let Some(cursor) = got {
                            assert_eq!(cursor.stream(), Some(StreamId(id)));
                            self.cursors[slot] =
                                Some(ModelCursor { cursor, stream: Some(id), next: next.max(1) });
                        }
                    }
                }
            }
            Op::Next { slot, times } => {
                // The high bit picks batch reads (`try_next_batch`).
                for _ in 0..=(times % 8) {
                    if times & 0x80 != 0 {
                        self.step_cursor_batch(usize::from(slot) % MAX_CURSORS);
                    } else {
                        self.step_cursor(usize::from(slot) % MAX_CURSORS);
                    }
                }
            }
            Op::Seek { slot, at } => {
                let next = self.pos(at);
                if let Some(c) = self.cursors[usize::from(slot) % MAX_CURSORS].as_mut() {
                    c.cursor.seek(Seq(next));
                    c.next = next.max(1);
                    assert_eq!(c.cursor.position(), Seq(c.next));
                }
            }
            Op::Coverage { at } => {
                let at = self.pos(at);
                let (head, oldest) = (self.model.head(), self.model.oldest());
                let want = if at > head {
                    Coverage::Ahead { head: Seq(head) }
                } else if at + 1 >= oldest {
                    Coverage::Covered
                } else {
                    Coverage::Evicted { oldest: Seq(oldest), missing: oldest - 1 - at }
                };
                assert_eq!(self.reader.coverage(Seq(at)), want, "coverage({at})");
            }
            Op::Snapshot { after, keep } => {
                let after = self.pos(after);
                self.snapshot(after, keep);
            }
            Op::SnapshotStream { stream, after, keep } => {
                let (id, after) = (self.stream_id(stream), self.pos(after));
                self.snapshot_stream(id, after, keep);
            }
            Op::CheckPinned => {
                for p in &self.pinned {
                    self.check_snapshot(&p.snap, p.filter, &p.seqs, p.covered_to);
                    let clone = p.snap.clone();
                    self.check_snapshot(&clone, p.filter, &p.seqs, p.covered_to);
                }
            }
            Op::DropPinned { slot } => {
                if !self.pinned.is_empty() {
                    let i = usize::from(slot) % self.pinned.len();
                    self.pinned.remove(i);
                }
            }
            Op::MarkDelivered { stream, pick, via_reader } => {
                let id = self.stream_id(stream);
                if !self.opened(id) || self.model.stream(id).seqs.is_empty() {
                    return;
                }
                let seqs = &self.model.stream(id).seqs;
                let seq = seqs[usize::from(pick) % seqs.len()];
                let e = self.model.event(seq);
                let ev = Event {
                    seq: Seq(seq),
                    stream: StreamId(id),
                    index_in_stream: e.index,
                    payload: Bytes::new(),
                };
                let reclaimed = self.model.stream(id).reclaimed;
                if via_reader {
                    assert_eq!(self.reader.mark_delivered(&ev), !reclaimed, "Reader::mark_delivered");
                } else {
                    assert!(
                        self.handles[(id - 1) as usize].mark_delivered(&ev),
                        "StreamHandle::mark_delivered"
                    );
                }
                if !via_reader || !reclaimed {
                    self.model.deliver(seq);
                }
            }
            Op::MarkOtherStream { stream, pick } => {
                // A handle ignores events of other streams.
                if self.handles.len() < 2 || self.model.head() == 0 {
                    return;
                }
                let seq = u64::from(pick) % self.model.head() + 1;
                let e = self.model.event(seq).clone();
                let mut id = u64::from(stream) % self.handles.len() as u64 + 1;
                if id == e.stream {
                    id = id % self.handles.len() as u64 + 1;
                }
                let ev = Event {
                    seq: Seq(seq),
                    stream: StreamId(e.stream),
                    index_in_stream: e.index,
                    payload: e.payload,
                };
                assert!(
                    !self.handles[(id - 1) as usize].mark_delivered(&ev),
                    "marked another stream's event"
                );
            }
            Op::Info { stream } => {
                let id = self.stream_id(stream);
                let got = self.reader.stream(StreamId(id));
                if self.opened(id) && !self.model.stream(id).reclaimed {
                    assert_eq!(got, Some(self.model_info(id)));
                } else {
                    assert_eq!(got, None);
                }
            }
            Op::StreamOf { at } => {
                let at = self.pos(at);
                let want = self.model.retained(at).then(|| StreamId(self.model.event(at).stream));
                assert_eq!(self.reader.stream_of(Seq(at)), want, "stream_of({at})");
            }
            Op::Close => {
                self.producer = None;
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let capacity = usize::from(input.capacity % 16) + 1;
    let chunk_events = 1usize << (input.chunk_log % 4);
    let byte_budget = usize::from(input.budget) + 1;
    let config = RingConfig { capacity, byte_budget, chunk_events };
    let (producer, reader) = ring(config).expect("a valid configuration");
    let (mut fp, _) = ring(RingConfig::new(2, 16)).unwrap();
    let fh = fp.open_stream();
    let mut w = World {
        producer: Some(producer),
        reader,
        handles: Vec::new(),
        foreign: (fp, fh),
        model: ModelRing::new(capacity, byte_budget),
        cursors: (0..MAX_CURSORS).map(|_| None).collect(),
        pinned: Vec::new(),
        payload_counter: 0,
        chunk_log: u32::from(input.chunk_log % 4),
    };
    for op in input.ops {
        w.apply(op);
        w.sync_records();
        w.check_globals();
    }
    // Everything pinned is still intact, however far the ring moved on.
    w.apply(Op::CheckPinned);
});
