//! A token bucket: `rate` tokens a second, at most `burst` held. The
//! server's rate limits (per-client `initialize`, a socket's control
//! frames) are each one, with their own rate and burst.

use std::time::Instant;

/// The tokens of one bucket; its rate and burst are its owner's.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket (`burst` tokens) as of `now`.
    pub(crate) fn full(burst: f64, now: Instant) -> Self {
        TokenBucket { tokens: burst, last: now }
    }

    /// Takes one token as of `now`; when there is none, `Err` with the
    /// seconds until there is one.
    pub(crate) fn take(&mut self, rate: f64, burst: f64, now: Instant) -> Result<(), f64> {
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * rate).min(burst);
        self.last = now;
        if self.tokens < 1.0 {
            return Err((1.0 - self.tokens) / rate);
        }
        self.tokens -= 1.0;
        Ok(())
    }

    /// Whether it has refilled to `burst` by `now` (an idle client's bucket,
    /// which may be forgotten: a new one is the same).
    pub(crate) fn is_full(&self, rate: f64, burst: f64, now: Instant) -> bool {
        self.tokens + now.duration_since(self.last).as_secs_f64() * rate >= burst
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::full(3.0, t0);
        for _ in 0..3 {
            b.take(2.0, 3.0, t0).unwrap();
        }
        let wait = b.take(2.0, 3.0, t0).unwrap_err();
        assert!((wait - 0.5).abs() < 1e-9, "{wait}");
        assert!(!b.is_full(2.0, 3.0, t0));
        // Half a second later one token is back, and only one.
        let t1 = t0 + Duration::from_millis(500);
        b.take(2.0, 3.0, t1).unwrap();
        assert!(b.take(2.0, 3.0, t1).is_err());
        // Never more than the burst.
        let t2 = t1 + Duration::from_secs(60);
        assert!(b.is_full(2.0, 3.0, t2));
        for _ in 0..3 {
            b.take(2.0, 3.0, t2).unwrap();
        }
        assert!(b.take(2.0, 3.0, t2).is_err());
    }
}
