//! Per-key token buckets: the rule behind the per-tenant rate limits of the
//! admin API and of operator enqueues. Pure: the caller passes the clock, so
//! the same bucket answers the same way in a test and in a service. Must
//! never sleep, read a clock or hold a lock; the service owns the map and its
//! synchronisation.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A rate: `per_second` tokens refill continuously up to `burst`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl Rate {
    /// A rate that refuses nothing a caller could send (`per_second` 0 means
    /// unlimited, so an operator can switch a limit off).
    pub fn is_unlimited(&self) -> bool {
        self.per_second <= 0.0
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Buckets by key (a tenant, or a platform token). Idle buckets are dropped
/// by [`Buckets::sweep`] so the map stays bounded by the active keys.
#[derive(Debug)]
pub struct Buckets<K> {
    rate: Rate,
    buckets: HashMap<K, Bucket>,
}

impl<K: Eq + Hash + Clone> Buckets<K> {
    pub fn new(rate: Rate) -> Self {
        Buckets {
            rate,
            buckets: HashMap::new(),
        }
    }

    /// Take one token for `key` at `now`: `Ok(())`, or `Err(wait)` with how
    /// long until one is available (the retry hint).
    pub fn take(&mut self, key: &K, now: Instant) -> Result<(), Duration> {
        if self.rate.is_unlimited() {
            return Ok(());
        }
        let rate = self.rate;
        let b = self.buckets.entry(key.clone()).or_insert(Bucket {
            tokens: rate.burst.max(1.0),
            at: now,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate.per_second).min(rate.burst.max(1.0));
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            let missing = 1.0 - b.tokens;
            Err(Duration::from_secs_f64(
                (missing / rate.per_second).min(3600.0),
            ))
        }
    }

    /// Drop buckets that have refilled completely by `now` (they answer the
    /// same as a fresh one).
    pub fn sweep(&mut self, now: Instant) {
        let rate = self.rate;
        self.buckets.retain(|_, b| {
            let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
            b.tokens + elapsed * rate.per_second < rate.burst.max(1.0)
        });
    }

    /// Keys currently tracked.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_served_then_refused_with_the_wait_until_the_next_token() {
        let mut b = Buckets::new(Rate {
            per_second: 2.0,
            burst: 3.0,
        });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(b.take(&"a", t0).is_ok());
        }
        let wait = b.take(&"a", t0).expect_err("the burst is spent");
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-9, "{wait:?}");
        // Half a second later exactly one more token is there.
        let t1 = t0 + Duration::from_millis(500);
        assert!(b.take(&"a", t1).is_ok());
        assert!(b.take(&"a", t1).is_err());
    }

    #[test]
    fn keys_are_independent() {
        let mut b = Buckets::new(Rate {
            per_second: 1.0,
            burst: 1.0,
        });
        let t0 = Instant::now();
        assert!(b.take(&"a", t0).is_ok());
        assert!(b.take(&"a", t0).is_err());
        assert!(b.take(&"b", t0).is_ok(), "tenant b is not slowed by a");
    }

    #[test]
    fn refill_never_exceeds_the_burst() {
        let mut b = Buckets::new(Rate {
            per_second: 100.0,
            burst: 2.0,
        });
        let t0 = Instant::now();
        assert!(b.take(&1, t0).is_ok());
        let later = t0 + Duration::from_secs(60);
        assert!(b.take(&1, later).is_ok());
        assert!(b.take(&1, later).is_ok());
        assert!(b.take(&1, later).is_err());
    }

    #[test]
    fn zero_per_second_is_unlimited_and_tracks_nothing() {
        let mut b = Buckets::new(Rate {
            per_second: 0.0,
            burst: 0.0,
        });
        let t0 = Instant::now();
        for _ in 0..10_000 {
            assert!(b.take(&"a", t0).is_ok());
        }
        assert!(b.is_empty());
    }

    #[test]
    fn sweep_drops_only_full_buckets() {
        let mut b = Buckets::new(Rate {
            per_second: 1.0,
            burst: 2.0,
        });
        let start = Instant::now();
        let t0 = start + Duration::from_secs(10);
        b.take(&"busy", t0).ok();
        b.take(&"busy", t0).ok();
        b.take(&"idle", start).ok();
        b.sweep(t0);
        assert_eq!(b.len(), 1, "idle refilled; busy is empty");
        b.sweep(t0 + Duration::from_secs(5));
        assert!(b.is_empty());
    }
}
