//! A byte budget held in all and per client: what request bodies being
//! received may hold at once (`ServerConfig::max_body_bytes_in_flight`;
//! the HTTP layer's `http/bodies.rs` charges it as a body arrives).
//!
//! A hold grows to what its body has received so far and gives it all
//! back when dropped; [`BodyBudget::fits`] tells, holding nothing, whether
//! a declared length fits now. One client (its identity, else its IP
//! address) may hold at most a quarter of the budget, so a client that
//! fills its share leaves the rest to others; a caller with neither is held
//! to the total only. Both bounds are at least the largest body, so that
//! one body of that size always fits alone.

use super::error::ApiError;
use super::sync::lock;
use gapless::ErrorKind;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The budget; one per server.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    total: usize,
    per_client: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    all: usize,
    by_client: HashMap<Arc<str>, usize>,
}

/// What a body could not be given.
#[derive(Debug)]
pub(crate) struct OverBudget {
    wanted: usize,
    client_holds: usize,
    all_hold: usize,
    per_client: usize,
    total: usize,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "request bodies being received hold {} of the {} bytes allowed ({} of this client's {}); \
             {} more do not fit",
            self.all_hold, self.total, self.client_holds, self.per_client, self.wanted
        )
    }
}

impl std::error::Error for OverBudget {}

impl OverBudget {
    /// The refusal: 503 `too_many_body_bytes`, `Retry-After: 1`.
    pub(crate) fn refusal(&self) -> ApiError {
        ApiError::new(ErrorKind::TooManyBodyBytes, self.to_string()).retry_after(1)
    }
}

impl From<OverBudget> for ApiError {
    fn from(e: OverBudget) -> Self {
        e.refusal()
    }
}

impl BodyBudget {
    /// A budget of `total` bytes, a quarter of it per client; both raised
    /// to `max_body` so that one body of the largest size always fits.
    pub(crate) fn new(total: usize, max_body: usize) -> Self {
        let per_client = (total / 4).max(max_body);
        BodyBudget { total: total.max(per_client), per_client, held: Mutex::new(Held::default()) }
    }

    /// Bytes held by bodies being received now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        lock(&self.held).all
    }

    /// Whether `bytes` more of `client` fit now (nothing is held): a body
    /// whose declared length does not fit is refused before it is read.
    pub(crate) fn fits(&self, client: Option<&str>, bytes: usize) -> Result<(), OverBudget> {
        let held = lock(&self.held);
        self.check(&held, client, bytes)
    }

    fn check(&self, held: &Held, client: Option<&str>, more: usize) -> Result<(), OverBudget> {
        let client_holds = client.and_then(|c| held.by_client.get(c)).copied().unwrap_or(0);
        let over_client = client.is_some() && client_holds.saturating_add(more) > self.per_client;
        if held.all.saturating_add(more) > self.total || over_client {
            return Err(OverBudget {
                wanted: more,
                client_holds,
                all_hold: held.all,
                per_client: self.per_client,
                total: self.total,
            });
        }
        Ok(())
    }

    /// A hold of nothing yet for one body of `client` (`None`: a caller
    /// the server cannot tell apart, held to the total only).
    pub(crate) fn hold(self: &Arc<Self>, client: Option<Arc<str>>) -> Hold {
        Hold { budget: Arc::clone(self), client, bytes: 0 }
    }
}

/// One body's share; given back on drop.
#[derive(Debug)]
pub(crate) struct Hold {
    budget: Arc<BodyBudget>,
    client: Option<Arc<str>>,
    bytes: usize,
}

impl Hold {
    /// Grows the share to `bytes` (a smaller `bytes` changes nothing).
    pub(crate) fn cover(&mut self, bytes: usize) -> Result<(), OverBudget> {
        let Some(more) = bytes.checked_sub(self.bytes).filter(|&m| m > 0) else { return Ok(()) };
        let b = &*self.budget;
        let mut held = lock(&b.held);
        b.check(&held, self.client.as_deref(), more)?;
        held.all += more;
        if let Some(c) = &self.client {
            *held.by_client.entry(Arc::clone(c)).or_insert(0) += more;
        }
        self.bytes = bytes;
        Ok(())
    }

    /// Grows the share by `more` bytes (a body's next frame).
    pub(crate) fn grow(&mut self, more: usize) -> Result<(), OverBudget> {
        self.cover(self.bytes + more)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut held = lock(&self.budget.held);
        held.all -= self.bytes;
        if let Some(c) = &self.client {
            if let Some(n) = held.by_client.get_mut(c) {
                *n -= self.bytes;
                if *n == 0 {
                    held.by_client.remove(c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(s: &str) -> Option<Arc<str>> {
        Some(Arc::from(s))
    }

    #[test]
    fn a_client_holds_at_most_a_quarter_and_all_at_most_the_total() {
        let b = Arc::new(BodyBudget::new(400, 10));
        let mut a1 = b.hold(client("a"));
        a1.cover(60).unwrap();
        let mut a2 = b.hold(client("a"));
        a2.cover(40).unwrap();
        let e = b.hold(client("a")).cover(1).unwrap_err();
        assert_eq!((e.client_holds, e.per_client, e.wanted), (100, 100, 1));
        let mut others: Vec<Hold> = ["b", "c", "d"].iter().map(|c| b.hold(client(c))).collect();
        for h in &mut others {
            h.cover(100).unwrap();
        }
        assert_eq!(b.held(), 400);
        let e = b.hold(client("e")).cover(1).unwrap_err();
        assert_eq!((e.all_hold, e.total), (400, 400));
        // Given back on drop, per client too.
        drop(a1);
        assert_eq!(b.held(), 340);
        b.hold(client("e")).cover(60).unwrap();
        a2.cover(100).unwrap();
        assert!(a2.cover(101).is_err(), "a's other hold was given back, not a2's");
        drop((a2, others));
        assert_eq!(b.held(), 0);
        assert!(lock(&b.held).by_client.is_empty());
    }

    #[test]
    fn cover_only_grows_and_a_refusal_takes_nothing() {
        let b = Arc::new(BodyBudget::new(40, 10));
        let mut h = b.hold(client("a"));
        h.cover(8).unwrap();
        h.cover(3).unwrap();
        assert_eq!(b.held(), 8);
        assert!(h.cover(11).is_err());
        assert_eq!((b.held(), h.bytes), (8, 8));
        h.cover(10).unwrap();
        assert_eq!(b.held(), 10);
        drop(h);
        // `grow` adds to what is held (a body's frames, one by one).
        let mut g = b.hold(client("b"));
        g.grow(4).unwrap();
        g.grow(5).unwrap();
        assert_eq!(b.held(), 9);
        assert!(g.grow(2).is_err(), "past b's share of 10");
        assert_eq!(b.held(), 9);
    }

    #[test]
    fn fits_holds_nothing_and_an_unknown_caller_meets_only_the_total() {
        let b = Arc::new(BodyBudget::new(400, 10));
        let mut a = b.hold(client("a"));
        a.cover(90).unwrap();
        assert!(b.fits(Some("a"), 10).is_ok());
        assert_eq!(b.fits(Some("a"), 11).unwrap_err().client_holds, 90);
        assert!(b.fits(Some("b"), 100).is_ok() && b.fits(Some("b"), 101).is_err());
        assert_eq!(b.held(), 90);
        let mut anon = b.hold(None);
        anon.cover(300).unwrap();
        assert_eq!(lock(&b.held).by_client.len(), 1, "an unknown caller is no client");
        assert_eq!(b.fits(None, 11).unwrap_err().all_hold, 390);
        drop(anon);
        assert_eq!(b.held(), 90);
    }

    #[test]
    fn the_largest_body_always_fits_alone() {
        let b = BodyBudget::new(1 << 20, 4 << 20);
        assert_eq!((b.per_client, b.total), (4 << 20, 4 << 20));
    }
}
