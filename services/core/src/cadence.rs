//! Heartbeat cadence (spec §3.3 ComputeNextHeartbeatDelay / ComputeTickDelay):
//! how long until the next self-scheduled `AgentTick`. Must never be applied
//! to real events — operator messages and answered escalations enqueue with
//! `visible_at = now` and bypass the cadence entirely.

use std::time::Duration;

use crate::options::AgentDispatcherOptions;

/// The delay until the next heartbeat: the flat
/// `standing_agent_heartbeat_interval` when the idle heartbeat is enabled
/// (immune to telemetry jitter), otherwise [`compute_tick_delay`].
pub fn compute_next_heartbeat_delay(opts: &AgentDispatcherOptions, prior_idle: u32) -> Duration {
    if opts.standing_agent_idle_heartbeat_enabled {
        opts.standing_agent_heartbeat_interval
    } else {
        compute_tick_delay(opts, prior_idle)
    }
}

/// The next heartbeat's delay after a tick: the cadence's, or while the
/// exhausted streak runs (`exhausted_streak` > 0, this tick included) the
/// geometric back-off `TickBaseDelay · BackoffFactor^(streak-1)` when that is
/// later, so an agent whose episodes keep hitting their budget re-plans
/// less often instead of spending every heartbeat.
pub fn next_heartbeat_after(
    opts: &AgentDispatcherOptions,
    prior_idle: u32,
    exhausted_streak: u32,
) -> Duration {
    let cadence = compute_next_heartbeat_delay(opts, prior_idle);
    match exhausted_streak {
        0 => cadence,
        n => cadence.max(compute_tick_delay(opts, n - 1)),
    }
}

/// Geometric idle backoff: `tick_base_delay · backoff_factor^prior_idle`,
/// capped at `max_backoff_interval`. Saturates instead of overflowing for any
/// `prior_idle`, and treats a non-finite or sub-1 factor as no growth so a
/// hand-built options value can never produce a panic or a shrinking delay.
pub fn compute_tick_delay(opts: &AgentDispatcherOptions, prior_idle: u32) -> Duration {
    let cap = opts.max_backoff_interval;
    let base = opts.tick_base_delay;
    if base >= cap {
        return cap;
    }
    let factor = if opts.backoff_factor.is_finite() && opts.backoff_factor >= 1.0 {
        opts.backoff_factor
    } else {
        1.0
    };
    // powi takes i32; beyond ~1000 any factor > 1 is already astronomically past the cap.
    let exp = i32::try_from(prior_idle).unwrap_or(i32::MAX);
    let secs = base.as_secs_f64() * factor.powi(exp);
    if !secs.is_finite() || secs >= cap.as_secs_f64() {
        return cap;
    }
    Duration::try_from_secs_f64(secs).map_or(cap, |d| d.min(cap))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exhausted_streak_backs_the_heartbeat_off_only_past_the_cadence() {
        let mut o = AgentDispatcherOptions {
            standing_agent_idle_heartbeat_enabled: false,
            ..AgentDispatcherOptions::default()
        };
        // Geometric cadence: 30 s base, factor 2, cap 30 min.
        assert_eq!(next_heartbeat_after(&o, 0, 0), Duration::from_secs(30));
        assert_eq!(next_heartbeat_after(&o, 0, 1), Duration::from_secs(30));
        assert_eq!(next_heartbeat_after(&o, 0, 4), Duration::from_secs(240));
        assert_eq!(next_heartbeat_after(&o, 0, 40), Duration::from_secs(1800));
        // The cadence wins when it is later.
        assert_eq!(next_heartbeat_after(&o, 5, 2), Duration::from_secs(960));
        // A flat daily heartbeat is never shortened.
        o.standing_agent_idle_heartbeat_enabled = true;
        assert_eq!(next_heartbeat_after(&o, 0, 9), Duration::from_secs(86_400));
    }

    fn backoff_opts() -> AgentDispatcherOptions {
        AgentDispatcherOptions {
            standing_agent_idle_heartbeat_enabled: false,
            ..AgentDispatcherOptions::default()
        }
    }

    #[test]
    fn flat_daily_heartbeat_when_enabled_regardless_of_idle_count() {
        let o = AgentDispatcherOptions::default();
        for idle in [0, 1, 5, 1_000, u32::MAX] {
            assert_eq!(
                compute_next_heartbeat_delay(&o, idle),
                Duration::from_secs(86_400)
            );
        }
    }

    #[test]
    fn geometric_backoff_when_disabled() {
        let o = backoff_opts();
        assert_eq!(compute_next_heartbeat_delay(&o, 0), Duration::from_secs(30));
        assert_eq!(compute_next_heartbeat_delay(&o, 1), Duration::from_secs(60));
        assert_eq!(
            compute_next_heartbeat_delay(&o, 3),
            Duration::from_secs(240)
        );
        assert_eq!(
            compute_next_heartbeat_delay(&o, 5),
            Duration::from_secs(960)
        );
        // 30 · 2^6 = 1920 s > 1800 s cap.
        assert_eq!(
            compute_next_heartbeat_delay(&o, 6),
            Duration::from_secs(1800)
        );
    }

    #[test]
    fn huge_idle_counts_cap_without_overflow() {
        let o = backoff_opts();
        for idle in [64, 1_024, 100_000, u32::MAX] {
            assert_eq!(compute_tick_delay(&o, idle), Duration::from_secs(1800));
        }
    }

    #[test]
    fn degenerate_factor_never_shrinks_or_panics() {
        for f in [0.5, 0.0, -2.0, f64::NAN, f64::INFINITY] {
            let o = AgentDispatcherOptions {
                backoff_factor: f,
                ..backoff_opts()
            };
            let d = compute_tick_delay(&o, 10);
            assert!(
                d >= Duration::from_secs(30) && d <= Duration::from_secs(1800),
                "{f}: {d:?}"
            );
        }
        let o = AgentDispatcherOptions {
            tick_base_delay: Duration::from_secs(7200),
            ..backoff_opts()
        };
        assert_eq!(compute_tick_delay(&o, 0), Duration::from_secs(1800));
    }
}
