//! SSE response bodies that record delivery when the HTTP layer accepts a
//! frame (`docs/SPEC.md` §2, "delivered").
//!
//! The body is a stream of byte chunks. Each poll first marks the events
//! of the chunk yielded by the previous poll as delivered: hyper polls the
//! body for the next chunk only after it took the previous one for writing.
//! A connection that dies before that never marks its last chunk, so a
//! cursor the client could not hold is never accepted as delivered.

use crate::backend::cluster::Pinned;
use crate::backend::{Feed, StoreError};
use crate::session::{Claim, Lane, SessionState};
use crate::vocab::secret::SessionTag;
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::task::AtomicWaker;
use futures_util::Stream;
use gapless::ring::{EventRef, NextBatch};
use gapless::session::ConnectionGuard;
use gapless::{Event, StreamId};
use std::convert::Infallible;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use tokio_util::sync::WaitForCancellationFutureOwned;

/// Most payload bytes batched into one chunk (one write): a chunk holds
/// events up to this many payload bytes with their framing (an id and
/// about 20 bytes each), or one event alone when that event is larger.
const BATCH_BYTES: usize = 64 << 10;

/// How a body frames its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Streamable HTTP: `id:` and `data:`; an empty payload is a priming
    /// event (SEP-1699): its id, the `retry` hint and empty data.
    Streamable,
    /// The legacy HTTP+SSE transport: `event: message`, `id:`, `data:`; an
    /// empty payload (a priming event of an earlier Streamable GET on the
    /// same stream) is not sent, since a legacy client parses every
    /// `message` as JSON-RPC.
    Legacy,
}

/// The most an SSE frame adds to its payload: `event: message` (legacy
/// framing), `id: ` and the longest id, `data: ` and the blank line. A
/// priming frame's `retry:` line may take a little more.
const FRAME_MAX: usize = 15 + 4 + gapless::wire::ENCODED_MAX + 7 + 2;

/// Writes one event as an SSE frame (the id without `fmt`: one per event).
pub(crate) fn encode(
    out: &mut BytesMut,
    ids: &mut IdPrefix,
    sess: &SessionState,
    e: EventRef<'_>,
    retry_ms: u128,
    framing: Framing,
) {
    let (id, payload) = sess.wire(e);
    if framing == Framing::Legacy {
        if payload.is_empty() {
            return;
        }
        out.put_slice(b"event: message\n");
    }
    ids.put(out, &id);
    if payload.is_empty() {
        out.put_slice(format!("\nretry: {retry_ms}\ndata:\n\n").as_bytes());
    } else {
        out.put_slice(b"\ndata: ");
        out.put_slice(payload);
        out.put_slice(b"\n\n");
    }
}

/// `id: ` and the id's tag up to its seq, for the stream a body wrote
/// last: an id without a check shares it with every id of its stream
/// (`gapless::EventId::encode_prefix`), so each event writes only its seq.
pub(crate) struct IdPrefix {
    /// Whose prefix `bytes` holds (`None`: nobody's yet).
    of: Option<(gapless::Namespace, StreamId)>,
    len: usize,
    bytes: [u8; PREFIX_MAX],
}

/// `id: ` and the longest tag with its `-` (an id without its seq).
const PREFIX_MAX: usize = 4 + gapless::wire::ENCODED_MAX - gapless::wire::SEQ_MAX_LEN;

impl IdPrefix {
    pub(crate) fn new() -> Self {
        IdPrefix { of: None, len: 0, bytes: [0; PREFIX_MAX] }
    }

    /// Writes `id: ` and `id`.
    fn put(&mut self, out: &mut BytesMut, id: &gapless::EventId) {
        if id.check.is_some() {
            // A check differs per event (cluster mode): the whole id.
            let mut buf = [0u8; gapless::wire::ENCODED_MAX];
            out.put_slice(b"id: ");
            out.put_slice(id.encode(&mut buf));
            return;
        }
        if self.of != Some((id.ns, id.stream)) {
            let mut buf = [0u8; gapless::wire::ENCODED_MAX];
            let tag = id.encode_prefix(&mut buf);
            self.bytes[..4].copy_from_slice(b"id: ");
            self.bytes[4..4 + tag.len()].copy_from_slice(tag);
            self.len = 4 + tag.len();
            self.of = Some((id.ns, id.stream));
        }
        out.put_slice(&self.bytes[..self.len]);
        out.put_slice(gapless::wire::encode_seq(id.seq, &mut [0; gapless::wire::SEQ_MAX_LEN]));
    }
}

/// A chunk waiting for the store to record its delivery, with its last event.
type Held = (Bytes, Event, futures_util::future::BoxFuture<'static, Result<(), StoreError>>);

/// The body of one SSE response.
pub(crate) struct SseBody {
    sess: Arc<SessionState>,
    sub: Feed,
    /// Cluster mode: the chunk built, waiting for its delivery to be
    /// recorded in the store before it is sent.
    held: Option<Held>,
    /// Last event of the chunk handed out by the previous poll.
    undelivered: Option<Event>,
    /// Ends this connection (takeover, migration, session end, shutdown: a
    /// child of the session's token, itself a child of the server's).
    ended: Pin<Box<WaitForCancellationFutureOwned>>,
    keepalive: tokio::time::Interval,
    /// Nothing more to send after the current chunk.
    finished: bool,
    stream: StreamId,
    gen: u64,
    retry_ms: u128,
    framing: Framing,
    /// Sent before the first event (the legacy `endpoint` event).
    preface: Option<Bytes>,
    ids: IdPrefix,
    /// This stream's span (the session's tag, the stream, the framing):
    /// entered on every poll, so what the body logs carries it.
    span: tracing::Span,
    /// A chunk built at a wake-up, held until the scheduler round it waits
    /// for has ended (see `poll_next`), with its last event.
    partial: Option<(BytesMut, Event)>,
    /// That round's end.
    round: Arc<Round>,
    _guard: ConnectionGuard,
    /// In a cluster: the connection counted for the session's pin.
    _pinned: Option<Pinned>,
}

impl SseBody {
    pub(crate) fn new(
        sess: Arc<SessionState>,
        sub: Feed,
        stream: StreamId,
        attach: Claim,
        framing: Framing,
        preface: Option<Bytes>,
    ) -> Self {
        let guard = sess.hub.connect(&sess.session);
        let pinned = sess.store.connected(&sess.session);
        sess.metrics.sse_open.inc();
        let period = sess.config.keepalive;
        let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let span = tracing::info_span!(
            "stream",
            session = %SessionTag::of_id(&sess.session.id()),
            stream = stream.0,
            framing = ?framing,
        );
        span.in_scope(|| tracing::debug!("stream opened"));
        SseBody {
            retry_ms: sess.config.sse_retry.as_millis(),
            sess,
            sub,
            held: None,
            undelivered: None,
            ended: Box::pin(attach.1.cancelled_owned()),
            keepalive,
            finished: false,
            stream,
            gen: attach.0,
            framing,
            preface,
            ids: IdPrefix::new(),
            span,
            partial: None,
            round: Arc::default(),
            _guard: guard,
            _pinned: pinned,
        }
    }
}

impl Stream for SseBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let _span = this.span.clone().entered();
        // Polled again: the previous chunk was accepted for writing.
        if let Some(e) = this.undelivered.take() {
            this.sess.session.reader().mark_delivered(&e);
        }
        // A chunk whose delivery the store recorded is sent even if the
        // connection is being ended: the store counts it delivered.
        if this.held.is_none() && this.ended.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        if this.held.is_some() {
            return this.poll_held(cx);
        }
        if this.finished {
            return Poll::Ready(None);
        }
        if let Some(preface) = this.preface.take() {
            return Poll::Ready(Some(Ok(preface)));
        }
        if let Some((mut out, last)) = this.partial.take() {
            // hyper polls a body more than once per wake-up: held until
            // the round has ended, then what was published meanwhile joins.
            if !this.round.ended(cx) {
                this.partial = Some((out, last));
                return Poll::Pending;
            }
            let last = match this.fill(cx, &mut out, Some(last)) {
                Ok(last) => last,
                Err(early) => return early,
            };
            return this.send(cx, out, last);
        }
        let mut out = BytesMut::new();
        let last = match this.fill(cx, &mut out, None) {
            Ok(last) => last,
            Err(early) => return early,
        };
        // A chunk that is not full waits one scheduler round: tokio's
        // `yield_now` wakes the task once its worker has run the tasks
        // ready now (or looks for I/O), and what they publish meanwhile
        // joins the same write, without waking this task for each event.
        // A publisher that sends one event at a time (an rmcp handler
        // awaiting each notification, on many sessions at once) otherwise
        // made one socket write per event, and the writes were most of the
        // server's CPU. Only a chunk already taken from the ring waits, and
        // it is sent when the round ends: this never loops. That the wake
        // is deferred is tokio's behaviour, not its promise: were it to
        // wake at once, chunks would go out as before, one round sooner.
        if !this.finished && out.len() < BATCH_BYTES && this.round.start(cx) {
            this.partial = Some((out, last));
            return Poll::Pending;
        }
        this.send(cx, out, last)
    }
}

/// The end of the scheduler round a chunk waits for: the waker handed to
/// tokio's `yield_now`, which marks the round ended and wakes the body's
/// task.
#[derive(Default)]
struct Round {
    ended: AtomicBool,
    task: AtomicWaker,
}

impl Round {
    /// Starts a round for the task of `cx`: true if it has to be waited
    /// for (false outside a tokio worker, where `yield_now` wakes at once).
    fn start(self: &Arc<Self>, cx: &Context<'_>) -> bool {
        self.ended.store(false, Ordering::Relaxed);
        let waker = Waker::from(Arc::clone(self));
        let round = std::pin::pin!(tokio::task::yield_now());
        // The task is registered after: a round that ended at once (its
        // wake came inside this poll) does not wake it for nothing.
        round.poll(&mut Context::from_waker(&waker)).is_pending() && !self.ended(cx)
    }

    /// Whether the round has ended; if not, `cx`'s task is woken when it does.
    fn ended(&self, cx: &Context<'_>) -> bool {
        if self.ended.load(Ordering::Acquire) {
            return true;
        }
        self.task.register(cx.waker());
        self.ended.load(Ordering::Acquire)
    }
}

impl Wake for Round {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ended.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// What a poll of the body yields.
type Polled = Poll<Option<Result<Bytes, Infallible>>>;

impl SseBody {
    /// Hands `out` (ending with `last`) to hyper, or in cluster mode first
    /// has its delivery recorded in the store.
    fn send(&mut self, cx: &mut Context<'_>, out: BytesMut, last: Event) -> Polled {
        let chunk = out.freeze();
        if let Some(mark) = self.sess.store.mark_write(&self.sess.session, &[&last]) {
            self.held = Some((chunk, last, mark));
            // Poll the mark now: it registers the waker.
            return self.poll_held(cx);
        }
        self.undelivered = Some(last);
        Poll::Ready(Some(Ok(chunk)))
    }

    /// The held chunk, once the store recorded its delivery (cluster mode).
    fn poll_held(&mut self, cx: &mut Context<'_>) -> Polled {
        let Some((_, _, mark)) = &mut self.held else { return Poll::Ready(None) };
        match mark.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(_)) => {
                let (chunk, last, _) = self.held.take().expect("held");
                self.undelivered = Some(last);
                Poll::Ready(Some(Ok(chunk)))
            }
            // The store cannot record the delivery: send nothing it would
            // not know of; the client's resume is answered by the store
            // (503 while it is down).
            Poll::Ready(Err(e)) => {
                tracing::warn!(session = %SessionTag::of_id(&self.sess.session.id()), error = %e, "delivery not recorded; ending the stream");
                Poll::Ready(None)
            }
        }
    }

    /// Writes the next chunk into `out`: the store's backlog (a cluster
    /// resume's replay) first, one by one, then the ring's ready batches,
    /// up to [`BATCH_BYTES`]; its last event. `Err`: what the poll yields
    /// instead (nothing to send yet, a keep-alive, or the end). `last`: the
    /// last event of a chunk held back in `out`; then only what is ready
    /// joins, and the result is never `Err`.
    #[inline]
    fn fill(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut BytesMut,
        mut last: Option<Event>,
    ) -> Result<Event, Polled> {
        while out.len() < BATCH_BYTES {
            let Some(e) = self.sub.pop_backlog() else { break };
            encode(out, &mut self.ids, &self.sess, e.view(), self.retry_ms, self.framing);
            last = Some(e);
        }
        // Then the ring: batches borrowed from its chunks, encoded without a
        // reference count per event, each cut where the write's payload
        // bytes run out.
        while out.len() < BATCH_BYTES {
            let Some(sub) = self.sub.live_mut() else {
                if last.is_none() {
                    return Err(Poll::Ready(None));
                }
                self.finished = true;
                break;
            };
            let max = BATCH_BYTES - out.len();
            let step = match last {
                // Nothing yet: wait for the first batch (registers the waker).
                None => sub.poll_recv_batch_max(cx, max),
                // Only what is ready joins this write.
                Some(_) => match sub.try_recv_batch_max(max) {
                    Ok(NextBatch::Events(b)) => Poll::Ready(Some(Ok(b))),
                    Ok(NextBatch::Pending) => Poll::Pending,
                    Ok(NextBatch::End) => Poll::Ready(None),
                    Err(lag) => Poll::Ready(Some(Err(lag))),
                },
            };
            match step {
                Poll::Ready(Some(Ok(batch))) => {
                    // Room for the whole batch at once (its payloads and
                    // each frame's fixed part), rather than growing by
                    // doubling from a guess as frames are written. A batch
                    // joining a write that already holds frames (a batch
                    // ends at a chunk's end) is likely one of several: the
                    // write grows once, to room for up to the rest of
                    // `BATCH_BYTES`, instead of copying what it holds at
                    // every batch; at most four times the batch, so that a
                    // small batch does not reserve the whole write.
                    let need: usize = batch.iter().map(|e| e.payload.len() + FRAME_MAX).sum();
                    let room =
                        if out.is_empty() { need } else { need.max((BATCH_BYTES - out.len()).min(4 * need)) };
                    out.reserve(room);
                    for e in batch.iter() {
                        encode(out, &mut self.ids, &self.sess, e, self.retry_ms, self.framing);
                    }
                    last = Some(batch.last().to_event());
                }
                // Fell behind eviction: end the stream; the client's resume
                // gets the explicit 409 with the numbers.
                Poll::Ready(Some(Err(lag))) if last.is_none() => {
                    tracing::info!(session = %SessionTag::of_id(&self.sess.session.id()), ?lag, "SSE reader fell behind eviction");
                    return Err(Poll::Ready(None));
                }
                Poll::Ready(None) if last.is_none() => return Err(Poll::Ready(None)),
                // The end (or a lag) after events: send them, then stop.
                Poll::Ready(_) => {
                    self.finished = true;
                    break;
                }
                Poll::Pending if last.is_none() => {
                    return Err(match self.keepalive.poll_tick(cx) {
                        Poll::Ready(_) => Poll::Ready(Some(Ok(Bytes::from_static(b": keep-alive\n\n")))),
                        Poll::Pending => Poll::Pending,
                    });
                }
                Poll::Pending => break,
            }
        }
        Ok(last.expect("a chunk holds an event"))
    }
}

impl SseBody {
    /// The `text/event-stream` response carrying this body.
    pub(crate) fn into_response(self) -> axum::response::Response {
        use axum::http::{header, HeaderValue};
        let mut r = axum::response::Response::new(axum::body::Body::from_stream(self));
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r
    }
}

impl Drop for SseBody {
    fn drop(&mut self) {
        self.span.in_scope(|| tracing::debug!(finished = self.finished, "stream closed"));
        self.sess.metrics.sse_open.dec();
        self.sess.detach(Lane::Stream(self.stream), self.gen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapless::{EventId, Namespace, Seq};

    /// The kept prefix never leaks into another stream's or namespace's id,
    /// and an id with a check is written whole.
    #[test]
    fn id_prefix_writes_every_id_as_display_does() {
        let id = |ns, stream, seq| EventId::new(Namespace(ns), StreamId(stream), Seq(seq));
        let ids = [
            id(0xab, 3, 42),
            id(0xab, 3, 43),
            id(0xab, 4, 44),
            id(0xab, 3, 45),
            id(0xcd, 3, 46),
            id(0xab, 3, 47).with_check(0x5be0),
            id(0xcd, 3, u64::MAX),
            id(0xcd, 30, 1),
            id(u64::MAX, u64::MAX, 10),
        ];
        let mut prefix = IdPrefix::new();
        for e in ids {
            let mut out = BytesMut::new();
            prefix.put(&mut out, &e);
            assert_eq!(std::str::from_utf8(&out).unwrap(), format!("id: {e}"));
        }
    }
}
