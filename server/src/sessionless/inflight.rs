//! The bound on MCP 2026-07-28 requests in flight (`listen` streams
//! included): in all, and per client.

use crate::vocab::jsonrpc::{code, RpcError};
use crate::vocab::sync::lock;
use std::collections::HashMap;
use std::sync::Arc;

/// The bound on 2026-07-28 requests in flight: in all, and per client.
#[derive(Debug)]
pub(crate) struct Inflight {
    total: Arc<tokio::sync::Semaphore>,
    per_client: std::sync::Mutex<HashMap<String, usize>>,
    max: usize,
    max_per_client: usize,
}

/// One admitted request's place; given back when dropped (when the request
/// and its response stream have ended).
#[derive(Debug)]
pub(crate) struct Permit {
    _total: tokio::sync::OwnedSemaphorePermit,
    client: Option<(Arc<Inflight>, String)>,
}

impl Permit {
    /// The client it was admitted for (identity, else peer address).
    pub(crate) fn client_key(&self) -> Option<String> {
        self.client.as_ref().map(|(_, k)| k.clone())
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some((inflight, key)) = &self.client {
            let mut per = lock(&inflight.per_client);
            if let Some(n) = per.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    per.remove(key);
                }
            }
        }
    }
}

impl Inflight {
    pub(crate) fn new(max: usize, max_per_client: usize) -> Arc<Self> {
        Arc::new(Inflight {
            total: Arc::new(tokio::sync::Semaphore::new(max)),
            per_client: Default::default(),
            max,
            max_per_client,
        })
    }

    /// A place for a request of `client`, or the error that refuses it.
    pub(crate) fn admit(self: &Arc<Self>, client: Option<String>) -> Result<Permit, RpcError> {
        let full = || {
            RpcError::new(
                code::TOO_MANY_IN_FLIGHT,
                format!(
                    "too many MCP 2026-07-28 requests in flight (at most {} in all, {} per client); retry when one has finished",
                    self.max, self.max_per_client
                ),
            )
        };
        let total = Arc::clone(&self.total).try_acquire_owned().map_err(|_| full())?;
        let client = match client {
            None => None,
            Some(key) => {
                let mut per = lock(&self.per_client);
                let n = per.entry(key.clone()).or_insert(0);
                if *n >= self.max_per_client {
                    return Err(full());
                }
                *n += 1;
                Some((Arc::clone(self), key))
            }
        };
        Ok(Permit { _total: total, client })
    }
}
