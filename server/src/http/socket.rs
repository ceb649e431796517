//! The migrated session's WebSocket (`docs/SPEC.md` §4.3, seed 000):
//! `GET P/ws?ticket=T` replays the gap its ticket pinned, then carries the
//! whole session. A frame counts as delivered once its send (feed and
//! flush) completed, and delivery is recorded per stream.
//!
//! A socket's memory is bounded: frames and messages by the body limit,
//! what waits to be written by `max_socket_write_buffer`, and the pongs a
//! ping flood would queue by `max_socket_pings_per_sec` (over it: 1008).

use crate::app::AppState;
use crate::backend::Feed;
use crate::protocol::dispatch_2025::{handle_notification, start_request, Call, RequestStream};
use crate::session::{Claim, Lane, SessionState};
use crate::vocab::bucket::TokenBucket;
use crate::vocab::error::ApiError;
use crate::vocab::identity::Caller;
use crate::vocab::jsonrpc::{classify, Incoming};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Query, Request, State};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use gapless::session::Ticket;
use gapless::{ErrorKind, Event, Next};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Most frames sent before one flush.
const BATCH: usize = 64;

/// Close codes (`docs/SPEC.md` §5).
mod close {
    pub(super) const SESSION_ENDED: u16 = 1000;
    pub(super) const SHUTTING_DOWN: u16 = 1001;
    pub(super) const FELL_BEHIND: u16 = 4409;
    pub(super) const BAD_FRAME: u16 = 4400;
    pub(super) const POLICY: u16 = 1008;
}

/// How long the closing frame may take to go out to a peer that does not
/// read, before the socket is dropped without it.
const CLOSE_SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The client's control frames: `rate` per second, a burst of ten times
/// that.
struct ControlBudget {
    bucket: TokenBucket,
    rate: f64,
}

impl ControlBudget {
    fn new(rate: u32) -> Self {
        let rate = f64::from(rate.max(1));
        ControlBudget { bucket: TokenBucket::full(rate * 10.0, std::time::Instant::now()), rate }
    }

    /// Takes one token; `false` when the client is over its budget.
    fn take(&mut self) -> bool {
        self.bucket.take(self.rate, self.rate * 10.0, std::time::Instant::now()).is_ok()
    }
}

/// `GET P/ws?ticket=T`: refuses bad tickets before upgrading.
pub(crate) async fn socket(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
    req: Request,
) -> Response {
    let (mut parts, _body) = req.into_parts();
    let Caller(owner) = parts.extensions.get::<Caller>().cloned().expect("the guard runs first");
    let Some(ticket) = q.get("ticket").filter(|t| Ticket::parse(t).is_some()) else {
        return ApiError::new(ErrorKind::TicketInvalid, "missing or malformed ?ticket=").into_response();
    };
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &state).await {
        Ok(u) => u,
        Err(rej) => return ApiError::malformed(format!("not a WebSocket handshake: {rej}")).into_response(),
    };
    let (sess, sub) = match state.sessions.redeem(ticket, owner.as_deref()).await {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let shutdown = state.shutdown.clone();
    let (max, write_max) = (state.config.max_body_bytes, state.config.max_socket_write_buffer);
    let upgrade = upgrade
        .max_message_size(max)
        .max_frame_size(max)
        .write_buffer_size(write_max.min(128 << 10))
        .max_write_buffer_size(write_max);
    let replayed = crate::telemetry::Replayed(sub.replay_len());
    let mut r = upgrade.on_upgrade(move |ws| async move {
        // Attach: the session is migrated, its SSE streams end, a previous
        // socket is replaced.
        sess.session.set_migrated();
        sess.end_all_sse_streams();
        let attach = sess.attach(Lane::Socket, false).expect("non-exclusive attach");
        run_socket(state, sess, ws, sub, attach, shutdown).await;
    });
    r.extensions_mut().insert(replayed);
    r
}

fn close_frame(code: u16, reason: String) -> Message {
    Message::Close(Some(CloseFrame { code, reason: reason.into() }))
}

/// Close 4409 before any hole is sent; plain seqs fit the 123-byte reason.
fn fell_behind(lag: gapless::Lagged) -> Message {
    let reason = format!(
        "{{\"error\":\"{}\",\"next\":{},\"oldest\":{}}}",
        ErrorKind::GapNotCovered.as_str(),
        lag.wanted.get(),
        lag.oldest.get()
    );
    close_frame(close::FELL_BEHIND, reason)
}

fn encode(sess: &SessionState, e: &Event) -> Message {
    let (id, payload) = sess.wire(e.view());
    let text = if payload.is_empty() {
        format!("{{\"id\":\"{id}\",\"message\":null}}")
    } else {
        let payload = std::str::from_utf8(payload).expect("events are JSON text");
        format!("{{\"id\":\"{id}\",\"message\":{payload}}}")
    };
    Message::Text(text.into())
}

/// What the socket's loop does next: go on, or close (with the closing
/// frame to send, `None` when the peer is gone).
enum Step {
    Go,
    Close(Option<Message>),
}

type Sink = futures_util::stream::SplitSink<WebSocket, Message>;
type Source = futures_util::stream::SplitStream<WebSocket>;

async fn run_socket(
    state: Arc<AppState>,
    sess: Arc<SessionState>,
    ws: WebSocket,
    mut sub: Feed,
    attach: Claim,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let _guard = sess.hub.connect(&sess.session);
    let _pinned = sess.store.connected(&sess.session);
    sess.metrics.sockets_open.inc();
    let (mut tx, mut rx) = ws.split();
    let (gen, ended) = attach;
    let mut control = ControlBudget::new(sess.config.max_socket_pings_per_sec);
    let closing: Option<Message> = loop {
        let step = tokio::select! {
            item = sub.recv() => match item {
                Some(Ok(first)) => send_batch(&sess, &mut tx, &mut sub, first).await,
                Some(Err(lag)) => Step::Close(Some(fell_behind(lag))),
                None => Step::Close(Some(close_frame(close::SESSION_ENDED, "session ended".into()))),
            },
            frame = rx.next() => on_frame(&state, &sess, frame, &mut control).await,
            // The connection token is a child of the server's: tell apart.
            _ = ended.cancelled() => Step::Close(Some(if shutdown.is_cancelled() {
                close_frame(close::SHUTTING_DOWN, "server shutting down".into())
            } else {
                close_frame(close::SESSION_ENDED, "replaced or session ended".into())
            })),
        };
        if let Step::Close(closing) = step {
            break closing;
        }
    };
    sess.metrics.socket_closed(match &closing {
        Some(Message::Close(Some(f))) => Some(f.code),
        _ => None,
    });
    close_socket(tx, rx, closing).await;
    sess.metrics.sockets_open.dec();
    sess.detach(Lane::Socket, gen);
}

/// Sends `first` and what is ready after it (up to [`BATCH`] frames), once
/// the store has recorded them delivered (cluster mode), then marks them
/// delivered.
async fn send_batch(sess: &SessionState, tx: &mut Sink, sub: &mut Feed, first: Event) -> Step {
    let mut batch = vec![first];
    let mut after: Option<Result<(), gapless::Lagged>> = None;
    while batch.len() < BATCH {
        match sub.try_recv() {
            Ok(Next::Event(e)) => batch.push(e),
            Ok(Next::Pending) => break,
            Ok(Next::End) => {
                after = Some(Ok(()));
                break;
            }
            Err(lag) => {
                after = Some(Err(lag));
                break;
            }
        }
    }
    // Cluster mode: the store records the batch delivered before it is
    // sent (`docs/SPEC.md` §8.3), each stream's last event of it.
    if !mark_ahead(sess, &batch).await {
        return Step::Close(Some(close_frame(
            close::SESSION_ENDED,
            "the session store is unavailable".into(),
        )));
    }
    let mut ok = true;
    for e in &batch {
        if tx.feed(encode(sess, e)).await.is_err() {
            ok = false;
            break;
        }
    }
    if !ok || tx.flush().await.is_err() {
        return Step::Close(None); // the peer is gone; nothing counts as delivered
    }
    let reader = sess.session.reader();
    for e in &batch {
        reader.mark_delivered(e);
    }
    match after {
        Some(Err(lag)) => Step::Close(Some(fell_behind(lag))),
        Some(Ok(())) => Step::Close(Some(close_frame(close::SESSION_ENDED, "session ended".into()))),
        None => Step::Go,
    }
}

/// A frame the client sent (`None`: the peer is gone).
async fn on_frame(
    state: &AppState,
    sess: &Arc<SessionState>,
    frame: Option<Result<Message, axum::Error>>,
    control: &mut ControlBudget,
) -> Step {
    match frame {
        Some(Ok(Message::Text(t))) => match handle_frame(state, sess, t.as_bytes()).await {
            Ok(()) => Step::Go,
            Err(reason) => Step::Close(Some(close_frame(close::BAD_FRAME, reason))),
        },
        Some(Ok(Message::Binary(_))) => {
            Step::Close(Some(close_frame(close::BAD_FRAME, "binary frames are not accepted".into())))
        }
        Some(Ok(Message::Ping(_) | Message::Pong(_))) => {
            // Each ping queues a pong for a peer that may never read it:
            // bounded by rate (and the write buffer).
            match control.take() {
                true => Step::Go,
                false => Step::Close(Some(close_frame(close::POLICY, "too many pings".into()))),
            }
        }
        Some(Ok(Message::Close(_))) | None => Step::Close(None),
        Some(Err(e)) => {
            let reason: String = format!("bad frame: {e}").chars().take(100).collect();
            Step::Close(Some(close_frame(close::BAD_FRAME, reason)))
        }
    }
}

/// Sends the closing frame, if any, and closes; a peer that does not read
/// must not hold the task (or a shutdown) longer than
/// [`CLOSE_SEND_TIMEOUT`].
async fn close_socket(mut tx: Sink, mut rx: Source, closing: Option<Message>) {
    let _ = tokio::time::timeout(CLOSE_SEND_TIMEOUT, async {
        if let Some(frame) = closing {
            let _ = tx.send(frame).await;
        }
        let _ = tx.close().await;
        // Read what the peer still sends until it closes too: a socket
        // dropped with unread bytes is reset, and a reset can destroy the
        // close frame before the peer reads it.
        while let Some(Ok(m)) = rx.next().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// Records a batch delivered in the store first (cluster mode), each
/// stream's last event of it; `false` when the store could not.
async fn mark_ahead(sess: &SessionState, batch: &[Event]) -> bool {
    let mut last: Vec<&Event> = Vec::new();
    for e in batch.iter().rev() {
        if !last.iter().any(|l| l.stream == e.stream) {
            last.push(e);
        }
    }
    match sess.store.mark_write(&sess.session, &last) {
        Some(mark) => mark.await.is_ok(),
        None => true,
    }
}

/// A client → server frame: `{"message": <JSON-RPC>}` or `{"ack": "<id>"}`.
async fn handle_frame(state: &AppState, sess: &Arc<SessionState>, text: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(text).map_err(|_| "frame is not JSON".to_owned())?;
    let Value::Object(mut m) = v else { return Err("frame must be a JSON object".into()) };
    if m.len() != 1 {
        return Err("frame must have exactly one of \"message\" or \"ack\"".into());
    }
    if let Some(ack) = m.remove("ack") {
        return match ack.as_str().map(gapless::EventId::parse) {
            Some(Ok(id)) if id.ns == sess.session.namespace() => Ok(()),
            _ => Err("\"ack\" must be an event id of this session".into()),
        };
    }
    let msg = m.remove("message").ok_or("frame must have \"message\" or \"ack\"")?;
    match classify(msg)
        .map_err(|e| format!("invalid JSON-RPC: {}", e.message).chars().take(100).collect::<String>())?
    {
        Incoming::Request { id, method, params } => {
            let stream = sess.open_stream().await.map_err(|e| e.to_string())?;
            let call = Call { id, method, params, headers: None };
            start_request(&state.protocol, sess, RequestStream::Own(&stream), call, None).await;
        }
        Incoming::Notification { method, params } => {
            handle_notification(&state.protocol, sess, &method, &params)
        }
        Incoming::Response { id, outcome } => {
            sess.deliver_response(&id, outcome);
        }
    }
    Ok(())
}
