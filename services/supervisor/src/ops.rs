//! The ops digest probe (spec §3.4 step 2, IOpsDigestProbe): PostgreSQL's own
//! statistics (`pg_stat_database` deadlocks and rollbacks), the supervisor's
//! own tool-error rate, and firing alerts from an optional Alertmanager,
//! bucketed by genesis-core.
//!
//! A background sampler reads those sources every `sample_interval` and
//! keeps the samples of the last `window`; a claim only reads the digest the
//! samples already hold: deltas between the newest sample and the oldest one
//! inside the window. So a claim never waits on Alertmanager or an extra
//! statement, every claim in the same window sees the same bucket (the B1
//! hash does not flap between claims taken milliseconds apart, and an
//! incident is not diluted into per-claim slivers), and replicas sampling the
//! same database agree on its counters.
//!
//! Must never fail a claim: a source that cannot be read leaves its figure
//! unknown and the digest says so.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use genesis_core::OpsDigest;
use genesis_core::plan_hash::ops_bucket;
use genesis_store::Store;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Default spacing of samples (`GENESIS_OPS_SAMPLE_SECS`).
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(15);
/// Default span the deltas are taken over (`GENESIS_OPS_WINDOW_SECS`).
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(300);

/// One reading of every source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpsSample {
    /// When it was taken.
    pub at: Instant,
    /// Cumulative deadlocks (`None`: unreadable).
    pub deadlocks: Option<i64>,
    /// Cumulative rolled-back transactions (`None`: unreadable).
    pub rollbacks: Option<i64>,
    /// Cumulative governed tool calls of this process.
    pub tool_calls: u64,
    /// Cumulative failed tool calls of this process.
    pub tool_errors: u64,
    /// Alerts firing now (`None`: not configured or unreachable).
    pub firing_alerts: Option<u32>,
}

/// The probe; one per supervisor process.
#[derive(Debug)]
pub struct OpsProbe {
    samples: Mutex<VecDeque<OpsSample>>,
    window: Duration,
    alertmanager: Option<String>,
    http: reqwest::Client,
}

/// What the probe holds for a claim.
#[derive(Debug, Clone, PartialEq)]
pub struct OpsReading {
    pub digest: OpsDigest,
    /// `false`: Alertmanager not configured or unreachable at the last sample.
    pub alerts_known: bool,
    /// `false`: the database counters could not be read at the window's
    /// ends (or nothing has been sampled yet).
    pub database_known: bool,
}

impl OpsProbe {
    /// The span deltas are taken over.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// A probe; `alertmanager_url` is the base URL (`GENESIS_ALERTMANAGER_URL`),
    /// `window` the span deltas are taken over (`GENESIS_OPS_WINDOW_SECS`).
    pub fn new(alertmanager_url: Option<String>, window: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(750))
            .build()
            .unwrap_or_default();
        Self {
            samples: Mutex::new(VecDeque::new()),
            window,
            alertmanager: alertmanager_url.filter(|u| !u.trim().is_empty()),
            http,
        }
    }

    /// Firing alerts from `GET /api/v2/alerts?active=true`; `None` when not
    /// configured or on any failure (timeout, status, body).
    pub async fn firing_alerts(&self) -> Option<u32> {
        let base = self.alertmanager.as_deref()?;
        let url = format!(
            "{}/api/v2/alerts?active=true&silenced=false&inhibited=false",
            base.trim_end_matches('/')
        );
        let resp = match self.http.get(&url).send().await {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                tracing::warn!(status = %r.status(), "alertmanager answered an error; alerts unknown");
                return None;
            }
            Err(e) => {
                // reqwest's text names the URL, which may carry a password.
                let url = genesis_telemetry::config_file::redact_url(base);
                tracing::warn!(error = %e.without_url(), alertmanager = %url, "alertmanager unreachable; alerts unknown");
                return None;
            }
        };
        match resp.json::<Vec<serde_json::Value>>().await {
            Ok(alerts) => Some(u32::try_from(alerts.len()).unwrap_or(u32::MAX)),
            Err(e) => {
                tracing::warn!(error = %e.without_url(), "alertmanager body unreadable; alerts unknown");
                None
            }
        }
    }

    /// Read every source once (the database counters and Alertmanager
    /// concurrently) and record the sample.
    pub async fn sample(&self, store: &Store, metrics: &Metrics) {
        let (stats, alerts) = tokio::join!(store.database_stats(), self.firing_alerts());
        let stats = stats.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "pg_stat_database unreadable; database counters unknown");
            genesis_store::DatabaseStats::default()
        });
        let (tool_calls, tool_errors) = metrics.tool_totals();
        self.record(OpsSample {
            at: Instant::now(),
            deadlocks: stats.deadlocks,
            rollbacks: stats.rollbacks,
            tool_calls,
            tool_errors,
            firing_alerts: alerts,
        });
    }

    /// Keep `sample` and drop samples that no longer bound the window: the
    /// oldest kept one is the newest sample at least `window` old, so the
    /// deltas always span the whole window once it has elapsed.
    pub fn record(&self, sample: OpsSample) {
        let Ok(mut samples) = self.samples.lock() else {
            return;
        };
        samples.push_back(sample);
        while samples.len() > 2
            && samples
                .get(1)
                .is_some_and(|s| sample.at.saturating_duration_since(s.at) >= self.window)
        {
            samples.pop_front();
        }
    }

    /// The digest over the window: newest sample against the oldest kept.
    /// Before the first sample every figure is zero and unknown.
    pub fn current(&self) -> OpsReading {
        let Ok(samples) = self.samples.lock() else {
            return OpsReading::unknown();
        };
        let (Some(first), Some(last)) = (samples.front(), samples.back()) else {
            return OpsReading::unknown();
        };
        let delta = |now: Option<i64>, before: Option<i64>| match (now, before) {
            // A counter that went backwards was reset; its delta is unknown.
            (Some(n), Some(b)) if n >= b => Some(u64::try_from(n - b).unwrap_or(0)),
            _ => None,
        };
        let deadlocks = delta(last.deadlocks, first.deadlocks);
        let rollbacks = delta(last.rollbacks, first.rollbacks);
        let calls = last.tool_calls.saturating_sub(first.tool_calls);
        let errors = last.tool_errors.saturating_sub(first.tool_errors);
        let error_rate = if calls == 0 {
            0.0
        } else {
            errors as f64 / calls as f64
        };
        OpsReading {
            digest: OpsDigest {
                deadlocks_delta: deadlocks.unwrap_or(0),
                rollbacks_delta: rollbacks.unwrap_or(0),
                error_rate,
                firing_alerts: last.firing_alerts.unwrap_or(0),
            },
            alerts_known: last.firing_alerts.is_some(),
            database_known: deadlocks.is_some() && rollbacks.is_some(),
        }
    }
}

/// Sample now, then every `interval` until `shutdown`.
pub fn spawn_sampler(
    probe: Arc<OpsProbe>,
    store: Store,
    metrics: Arc<Metrics>,
    interval: Duration,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticker.tick() => probe.sample(&store, &metrics).await,
            }
        }
    })
}

impl OpsReading {
    fn unknown() -> Self {
        OpsReading {
            digest: OpsDigest::default(),
            alerts_known: false,
            database_known: false,
        }
    }

    /// The wire digest: a readable summary and the genesis-core bucket (only
    /// the bucket enters the plan-input hash).
    pub fn to_proto(&self, window: Duration) -> genesis_proto::v1::OpsDigest {
        let d = &self.digest;
        let alerts = if self.alerts_known {
            d.firing_alerts.to_string()
        } else {
            "unknown".to_owned()
        };
        let database = if self.database_known {
            format!(
                "database deadlocks +{}, rollbacks +{}",
                d.deadlocks_delta, d.rollbacks_delta
            )
        } else {
            "database counters unknown".to_owned()
        };
        genesis_proto::v1::OpsDigest {
            summary: format!(
                "{database} over the last {}s; tool error rate {:.1}%; firing alerts: {alerts}",
                window.as_secs(),
                d.error_rate * 100.0
            ),
            bucket: ops_bucket(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, secs: u64) -> Instant {
        base + Duration::from_secs(secs)
    }

    fn sample(at: Instant, deadlocks: i64, rollbacks: i64, calls: u64, errors: u64) -> OpsSample {
        OpsSample {
            at,
            deadlocks: Some(deadlocks),
            rollbacks: Some(rollbacks),
            tool_calls: calls,
            tool_errors: errors,
            firing_alerts: None,
        }
    }

    #[test]
    fn deltas_span_the_window_not_the_previous_claim() {
        let p = OpsProbe::new(None, Duration::from_secs(60));
        let t0 = Instant::now();
        assert_eq!(p.current(), OpsReading::unknown());
        p.record(sample(t0, 10, 100, 0, 0));
        let one = p.current();
        assert_eq!(one.digest.deadlocks_delta, 0);
        assert!(one.database_known);
        p.record(sample(at(t0, 15), 40, 120, 6, 3));
        p.record(sample(at(t0, 30), 70, 150, 10, 5));
        // Two claims in a row read the same digest: nothing is consumed.
        let a = p.current();
        let b = p.current();
        assert_eq!(a, b);
        assert_eq!(a.digest.deadlocks_delta, 60);
        assert_eq!(a.digest.rollbacks_delta, 50);
        assert!((a.digest.error_rate - 0.5).abs() < 1e-9);
        let wire = a.to_proto(p.window());
        assert!(
            wire.bucket.contains("deadlocks=incident"),
            "{}",
            wire.bucket
        );
        assert!(
            wire.summary.contains("over the last 60s"),
            "{}",
            wire.summary
        );
        assert!(
            wire.summary.contains("firing alerts: unknown"),
            "{}",
            wire.summary
        );
    }

    #[test]
    fn samples_older_than_the_window_stop_counting() {
        let p = OpsProbe::new(None, Duration::from_secs(60));
        let t0 = Instant::now();
        p.record(sample(t0, 0, 0, 0, 0));
        p.record(sample(at(t0, 10), 100, 0, 0, 0)); // the incident
        p.record(sample(at(t0, 80), 100, 0, 0, 0));
        // t0 is evicted: the oldest kept is t0+10 (the newest ≥ 60 s old).
        assert_eq!(p.current().digest.deadlocks_delta, 0);
        p.record(sample(at(t0, 200), 103, 0, 0, 0));
        let r = p.current();
        assert_eq!(r.digest.deadlocks_delta, 3);
        assert!(r.to_proto(p.window()).bucket.contains("deadlocks=ok"));
        assert_eq!(p.samples.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_reset_or_unreadable_counter_reads_as_unknown_not_as_zero_incidents() {
        let p = OpsProbe::new(None, Duration::from_secs(60));
        let t0 = Instant::now();
        p.record(sample(t0, 500, 500, 0, 0));
        p.record(sample(at(t0, 15), 2, 3, 0, 0)); // stats reset
        let r = p.current();
        assert!(!r.database_known);
        assert!(
            r.to_proto(p.window())
                .summary
                .contains("database counters unknown")
        );
        let q = OpsProbe::new(None, Duration::from_secs(60));
        q.record(OpsSample {
            deadlocks: None,
            ..sample(t0, 0, 0, 0, 0)
        });
        assert!(!q.current().database_known);
    }

    #[tokio::test]
    async fn an_unreachable_alertmanager_reads_as_unknown() {
        // Port 9 on loopback: nothing listens, the connection is refused.
        let p = OpsProbe::new(Some("http://127.0.0.1:9".into()), DEFAULT_WINDOW);
        assert_eq!(p.firing_alerts().await, None);
        assert_eq!(
            OpsProbe::new(None, DEFAULT_WINDOW).firing_alerts().await,
            None
        );
    }
}
