//! The ops digest probe (spec §3.4 step 2, IOpsDigestProbe): PostgreSQL's own
//! statistics (`pg_stat_database` deadlocks and rollbacks, as deltas since
//! the previous claim, kept in memory), the supervisor's own tool-error rate
//! since the previous claim, and firing alerts from an optional
//! Alertmanager. Bucketed by genesis-core. Must never fail a claim: every
//! probe failure reads as "unknown" and the digest says so.

use std::sync::Mutex;
use std::time::Duration;

use genesis_core::OpsDigest;
use genesis_core::plan_hash::ops_bucket;

/// Readings of the previous claim, for deltas.
#[derive(Debug, Default, Clone, Copy)]
struct Previous {
    deadlocks: Option<i64>,
    rollbacks: Option<i64>,
    tool_calls: u64,
    tool_errors: u64,
}

/// The probe; one per supervisor process.
#[derive(Debug)]
pub struct OpsProbe {
    previous: Mutex<Previous>,
    alertmanager: Option<String>,
    http: reqwest::Client,
}

/// What one claim's probe saw.
#[derive(Debug, Clone, PartialEq)]
pub struct OpsReading {
    pub digest: OpsDigest,
    /// `None`: Alertmanager not configured or unreachable.
    pub alerts_known: bool,
}

impl OpsProbe {
    /// A probe; `alertmanager_url` is the base URL (`GENESIS_ALERTMANAGER_URL`).
    pub fn new(alertmanager_url: Option<String>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(750))
            .build()
            .unwrap_or_default();
        Self {
            previous: Mutex::new(Previous::default()),
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
                tracing::warn!(error = %e, "alertmanager unreachable; alerts unknown");
                return None;
            }
        };
        match resp.json::<Vec<serde_json::Value>>().await {
            Ok(alerts) => Some(u32::try_from(alerts.len()).unwrap_or(u32::MAX)),
            Err(e) => {
                tracing::warn!(error = %e, "alertmanager body unreadable; alerts unknown");
                None
            }
        }
    }

    /// Combine this claim's raw readings with the previous claim's into a
    /// digest, and remember them for the next claim.
    pub fn observe(
        &self,
        deadlocks: Option<i64>,
        rollbacks: Option<i64>,
        tool_totals: (u64, u64),
        firing_alerts: Option<u32>,
    ) -> OpsReading {
        let Ok(mut prev) = self.previous.lock() else {
            return OpsReading {
                digest: OpsDigest::default(),
                alerts_known: firing_alerts.is_some(),
            };
        };
        let delta = |now: Option<i64>, before: Option<i64>| match (now, before) {
            (Some(n), Some(b)) if n >= b => u64::try_from(n - b).unwrap_or(0),
            _ => 0,
        };
        let (calls, errors) = tool_totals;
        let d_calls = calls.saturating_sub(prev.tool_calls);
        let d_errors = errors.saturating_sub(prev.tool_errors);
        let error_rate = if d_calls == 0 {
            0.0
        } else {
            d_errors as f64 / d_calls as f64
        };
        let digest = OpsDigest {
            deadlocks_delta: delta(deadlocks, prev.deadlocks),
            rollbacks_delta: delta(rollbacks, prev.rollbacks),
            error_rate,
            firing_alerts: firing_alerts.unwrap_or(0),
        };
        *prev = Previous {
            deadlocks: deadlocks.or(prev.deadlocks),
            rollbacks: rollbacks.or(prev.rollbacks),
            tool_calls: calls,
            tool_errors: errors,
        };
        OpsReading {
            digest,
            alerts_known: firing_alerts.is_some(),
        }
    }
}

impl OpsReading {
    /// The wire digest: a readable summary and the genesis-core bucket (only
    /// the bucket enters the plan-input hash).
    pub fn to_proto(&self) -> genesis_proto::v1::OpsDigest {
        let d = &self.digest;
        let alerts = if self.alerts_known {
            d.firing_alerts.to_string()
        } else {
            "unknown".to_owned()
        };
        genesis_proto::v1::OpsDigest {
            summary: format!(
                "database deadlocks +{}, rollbacks +{} since the previous tick; tool error rate {:.1}%; firing alerts: {alerts}",
                d.deadlocks_delta,
                d.rollbacks_delta,
                d.error_rate * 100.0
            ),
            bucket: ops_bucket(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_are_taken_against_the_previous_claim() {
        let p = OpsProbe::new(None);
        let first = p.observe(Some(10), Some(100), (0, 0), None);
        assert_eq!(first.digest.deadlocks_delta, 0);
        let second = p.observe(Some(70), Some(150), (10, 5), None);
        assert_eq!(second.digest.deadlocks_delta, 60);
        assert_eq!(second.digest.rollbacks_delta, 50);
        assert!((second.digest.error_rate - 0.5).abs() < 1e-9);
        assert!(
            second.to_proto().bucket.contains("deadlocks=incident"),
            "{}",
            second.to_proto().bucket
        );
        assert!(second.to_proto().summary.contains("firing alerts: unknown"));
    }

    #[tokio::test]
    async fn an_unreachable_alertmanager_reads_as_unknown() {
        // Port 9 on loopback: nothing listens, the connection is refused.
        let p = OpsProbe::new(Some("http://127.0.0.1:9".into()));
        assert_eq!(p.firing_alerts().await, None);
        assert_eq!(OpsProbe::new(None).firing_alerts().await, None);
    }
}
