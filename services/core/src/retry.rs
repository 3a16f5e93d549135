//! The reconnect back-off every service uses when a broker or database
//! connection (or a resource another process creates) is not there yet:
//! 200 ms doubling to 10 s, back to 200 ms once it is. Owns the arithmetic
//! only; it never sleeps, so callers race the delay with their shutdown.

use std::time::Duration;

/// The first delay after a failed attempt.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(200);
/// The longest delay: a lost server is retried at least this often, so a
/// restarted one is found within seconds without hammering a dead address.
pub const RECONNECT_MAX: Duration = Duration::from_secs(10);

/// Delays between reconnect attempts: [`RECONNECT_FIRST`] doubling up to
/// [`RECONNECT_MAX`]; [`Reconnect::reset`] after a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    next: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Self::new()
    }
}

impl Reconnect {
    pub const fn new() -> Self {
        Self {
            next: RECONNECT_FIRST,
        }
    }

    /// The delay to wait before the next attempt; the one after is twice
    /// as long, up to [`RECONNECT_MAX`].
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (d * 2).min(RECONNECT_MAX);
        d
    }

    /// An attempt succeeded: the next failure waits [`RECONNECT_FIRST`].
    pub fn reset(&mut self) {
        self.next = RECONNECT_FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_200_ms_and_stay_at_10_s() {
        let mut r = Reconnect::new();
        let ms: Vec<u128> = (0..9).map(|_| r.next_delay().as_millis()).collect();
        assert_eq!(
            ms,
            [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000]
        );
    }

    #[test]
    fn a_reset_starts_again_from_the_first_delay() {
        let mut r = Reconnect::default();
        for _ in 0..5 {
            r.next_delay();
        }
        r.reset();
        assert_eq!(r.next_delay(), RECONNECT_FIRST);
        assert_eq!(r.next_delay(), RECONNECT_FIRST * 2);
    }
}
