//! When a pod renews the lease of a long tick: a third of what the lease it
//! was actually granted has left, never later than its own configured
//! interval. The supervisor's TTL wins over the pod's setting, so a pod
//! configured with a longer TTL than the supervisor still renews in time.
//! Pure: the caller supplies how long the lease has left.

use std::time::Duration;

/// The shortest renewal interval (a lease about to lapse is renewed this
/// often rather than in a busy loop).
pub const MIN_RENEW_INTERVAL: Duration = Duration::from_millis(100);

/// The renewal interval for a lease with `remaining` left (`None`: unknown),
/// given the pod's `configured` interval.
pub fn renew_interval(configured: Duration, remaining: Option<Duration>) -> Duration {
    let granted = remaining.map_or(configured, |r| r / 3);
    granted.min(configured).max(MIN_RENEW_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shorter_granted_lease_is_renewed_at_a_third_of_what_it_has_left() {
        // The pod thinks 60 s (renew every 20 s); the supervisor granted 9 s.
        assert_eq!(
            renew_interval(Duration::from_secs(20), Some(Duration::from_secs(9))),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn a_longer_granted_lease_keeps_the_configured_interval() {
        assert_eq!(
            renew_interval(Duration::from_secs(20), Some(Duration::from_secs(300))),
            Duration::from_secs(20)
        );
        assert_eq!(
            renew_interval(Duration::from_secs(20), None),
            Duration::from_secs(20)
        );
    }

    #[test]
    fn an_expiring_lease_is_renewed_no_faster_than_the_floor() {
        assert_eq!(
            renew_interval(Duration::from_secs(20), Some(Duration::ZERO)),
            MIN_RENEW_INTERVAL
        );
        assert_eq!(renew_interval(Duration::ZERO, None), MIN_RENEW_INTERVAL);
    }
}
