//! Per-client fairness: no one client can fill the session table.
//!
//! A client is its identity when the request has one (see `identity.rs`),
//! else its peer IP address (`ConnectInfo<SocketAddr>` in the request
//! extensions, which `McpServer::serve` and axum's
//! `into_make_service_with_connect_info` put there). A request with
//! neither cannot be attributed, and these limits do not apply to it.
//!
//! * `initialize` is rate limited per client by a token bucket
//!   (`ServerConfig::initialize_per_sec`, burst `initialize_burst`): over it,
//!   429 `rate_limited` with `Retry-After`.
//! * A client holds at most `ServerConfig::max_sessions_per_client` live
//!   sessions: one more is 429 `client_session_limit`.
//!
//! Both are checked by the request guard on a POST without a session id
//! (an `initialize`, or an error anyway) before its body is read or
//! parsed, so a refused one costs a map lookup.

use crate::vocab::bucket::TokenBucket;
use crate::vocab::error::ApiError;
use crate::vocab::sync::lock;
use gapless::ErrorKind;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Bucket maps larger than this are pruned of full (idle) buckets.
const PRUNE_AT: usize = 4096;

/// The fairness state of one server.
#[derive(Debug)]
pub(crate) struct Fairness {
    rate: f64,
    burst: f64,
    max_sessions: usize,
    buckets: Mutex<HashMap<String, TokenBucket>>,
    sessions: Mutex<HashMap<String, usize>>,
}

/// One live session counted against its client until dropped.
#[derive(Debug)]
pub(crate) struct ClientSlot {
    fairness: Arc<Fairness>,
    client: String,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut sessions = lock(&self.fairness.sessions);
        if let Some(n) = sessions.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                sessions.remove(&self.client);
            }
        }
    }
}

impl Fairness {
    pub(crate) fn new(rate: f64, burst: u32, max_sessions: usize) -> Self {
        Fairness {
            rate: rate.max(f64::MIN_POSITIVE),
            burst: f64::from(burst.max(1)),
            max_sessions,
            buckets: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Admits one `initialize` of `client`: a token of its bucket, and one
    /// of its session slots, which the session holds for its lifetime.
    pub(crate) fn admit(self: &Arc<Self>, client: &str) -> Result<ClientSlot, ApiError> {
        {
            let now = Instant::now();
            let mut buckets = lock(&self.buckets);
            let (rate, burst) = (self.rate, self.burst);
            if buckets.len() >= PRUNE_AT {
                buckets.retain(|_, b| !b.is_full(rate, burst, now));
            }
            let b = buckets.entry(client.to_owned()).or_insert_with(|| TokenBucket::full(burst, now));
            if let Err(secs) = b.take(rate, burst, now) {
                let wait = secs.ceil().max(1.0) as u64;
                return Err(ApiError::new(
                    ErrorKind::RateLimited,
                    format!("too many initialize requests from this client; retry in {wait} s"),
                )
                .with("retry_after", json!(wait))
                .retry_after(wait));
            }
        }
        let mut sessions = lock(&self.sessions);
        let n = sessions.entry(client.to_owned()).or_insert(0);
        if *n >= self.max_sessions {
            let max = self.max_sessions;
            return Err(ApiError::new(
                ErrorKind::ClientSessionLimit,
                format!("this client holds its maximum of {max} live sessions; delete one (DELETE) or let one expire"),
            )
            .with("max", json!(max)));
        }
        *n += 1;
        Ok(ClientSlot { fairness: Arc::clone(self), client: client.to_owned() })
    }
}
