//! Back-off between retries: a first delay doubling up to a cap. Every
//! service's retry loops use it (the reconnects to NATS and PostgreSQL, the
//! outbox's publish retries, the pod's pause between empty fetches and its
//! hand-back of a busy tenant's message). Owns the arithmetic only; it never
//! sleeps, so callers race the delay with their shutdown.

use std::time::Duration;

/// The first delay after a failed reconnect.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(200);
/// The longest delay between reconnects: a lost server is retried at least
/// this often, so a restarted one is found within seconds without
/// hammering a dead address.
pub const RECONNECT_MAX: Duration = Duration::from_secs(10);

/// Delays of `first` doubling up to `max`: [`Backoff::next_delay`] walks
/// them, [`Backoff::reset`] starts again after a success, and
/// [`Backoff::nth`] answers for a count kept elsewhere (a message's
/// deliveries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    taken: u32,
}

impl Backoff {
    pub const fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            taken: 0,
        }
    }

    /// The reconnect back-off: [`RECONNECT_FIRST`] doubling to [`RECONNECT_MAX`].
    pub const fn reconnect() -> Self {
        Self::new(RECONNECT_FIRST, RECONNECT_MAX)
    }

    /// The delay after `n` earlier ones: `first · 2ⁿ`, at most `max`.
    pub fn nth(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n).unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.max)
    }

    /// The delay to wait before the next attempt; the one after is twice
    /// as long, up to `max`.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.nth(self.taken);
        self.taken = self.taken.saturating_add(1);
        d
    }

    /// An attempt succeeded: the next delay is `first` again.
    pub fn reset(&mut self) {
        self.taken = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_200_ms_and_stay_at_10_s() {
        let mut r = Backoff::reconnect();
        let ms: Vec<u128> = (0..9).map(|_| r.next_delay().as_millis()).collect();
        assert_eq!(
            ms,
            [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000]
        );
        for _ in 0..100 {
            r.next_delay();
        }
        assert_eq!(r.next_delay(), RECONNECT_MAX);
    }

    #[test]
    fn a_reset_starts_again_from_the_first_delay() {
        let mut r = Backoff::reconnect();
        for _ in 0..5 {
            r.next_delay();
        }
        r.reset();
        assert_eq!(r.next_delay(), RECONNECT_FIRST);
        assert_eq!(r.next_delay(), RECONNECT_FIRST * 2);
    }

    #[test]
    fn the_nth_delay_saturates_at_the_cap_for_any_count() {
        let b = Backoff::new(Duration::from_millis(1), Duration::from_secs(1));
        assert_eq!(b.nth(0), Duration::from_millis(1));
        assert_eq!(b.nth(9), Duration::from_millis(512));
        assert_eq!(b.nth(10), Duration::from_secs(1));
        assert_eq!(b.nth(u32::MAX), Duration::from_secs(1));
        assert_eq!(
            Backoff::new(Duration::ZERO, Duration::from_secs(1)).nth(7),
            Duration::ZERO
        );
    }
}
