//! The process's Prometheus counters and gauges (published events, publish
//! errors, outbox lag, RPCs by method and code), listed once as
//! [`Family`] values that both the text rendering for `/metrics` and, when
//! OTLP is configured, the OpenTelemetry export read. Must never block a
//! caller: every update is an atomic or a short uncontended lock, and
//! nothing here does I/O.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use genesis_telemetry::metrics::Family;
use genesis_telemetry::prometheus::{Exposition, Kind};

/// Shared by every task of the process.
#[derive(Debug, Default)]
pub struct Metrics {
    published: AtomicU64,
    publish_errors: AtomicU64,
    /// Age of the oldest due, unpublished event, in milliseconds.
    outbox_lag_ms: AtomicI64,
    bootstrapped: AtomicU64,
    /// Publisher rounds held back by the consumer backlog limit.
    held: AtomicU64,
    /// Publisher rounds run (each one reads the outbox).
    rounds: AtomicU64,
    /// Messages the consumer held (undelivered + unacknowledged) at the last reading.
    consumer_pending: AtomicU64,
    rpcs: Mutex<BTreeMap<(String, String), u64>>,
}

impl Metrics {
    /// Events whose JetStream ack arrived and whose mark committed.
    pub fn add_published(&self, n: u64) {
        self.published.fetch_add(n, Ordering::Relaxed);
    }

    /// Failed publishes or acks (each event counts once per failed attempt).
    pub fn add_publish_errors(&self, n: u64) {
        self.publish_errors.fetch_add(n, Ordering::Relaxed);
    }

    /// Set the outbox lag gauge.
    pub fn set_outbox_lag_ms(&self, ms: i64) {
        self.outbox_lag_ms.store(ms.max(0), Ordering::Relaxed);
    }

    /// One publisher round held back (the consumer backlog is at its limit).
    pub fn add_held(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
    }

    /// Messages the consumer holds, as last read by the publisher.
    pub fn set_consumer_pending(&self, n: u64) {
        self.consumer_pending.store(n, Ordering::Relaxed);
    }

    /// One publisher round run (an outbox read, whatever it found).
    pub fn add_round(&self) {
        self.rounds.fetch_add(1, Ordering::Relaxed);
    }

    /// Publisher rounds run so far.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// Publisher rounds held back so far.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// A SOA created by the bootstrap.
    pub fn add_bootstrapped(&self) {
        self.bootstrapped.fetch_add(1, Ordering::Relaxed);
    }

    /// Count one answered RPC. `method` is the request path; one that is
    /// not an RPC of `genesis.v1` counts as `unknown`
    /// ([`genesis_proto::convert::rpc_label`]), so requests to random paths
    /// (refused before routing) never add label values.
    pub fn record_rpc(&self, method: &str, code: tonic::Code) {
        let method = genesis_proto::convert::rpc_label(method);
        let key = (method.to_owned(), format!("{code:?}"));
        if let Ok(mut map) = self.rpcs.lock() {
            *map.entry(key).or_insert(0) += 1;
        }
    }

    /// Published so far (tests and `/metrics`).
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// Publish errors so far.
    pub fn publish_errors(&self) -> u64 {
        self.publish_errors.load(Ordering::Relaxed)
    }

    /// Every metric with its current value, named once for both exports:
    /// `/metrics` ([`Metrics::render`]) and, when OTLP is configured, the
    /// observable instruments `genesis_telemetry` registers from this list.
    pub fn families(&self) -> Vec<Family> {
        let rpcs = self
            .rpcs
            .lock()
            .map(|map| {
                map.iter()
                    .map(|((method, code), n)| {
                        (vec![("method", method.clone()), ("code", code.clone())], *n)
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        vec![
            Family::single(
                "genesis.outbox.published",
                "Events published to JetStream and marked.",
                Kind::Counter,
                self.published(),
            ),
            Family::single(
                "genesis.outbox.publish_errors",
                "Failed publishes or acks.",
                Kind::Counter,
                self.publish_errors(),
            ),
            Family::decimal(
                "genesis.outbox.lag_seconds",
                "Age of the oldest due unpublished event.",
                Kind::Gauge,
                3,
                self.outbox_lag_ms.load(Ordering::Relaxed) as f64 / 1000.0,
            ),
            Family::single(
                "genesis.outbox.held",
                "Publisher rounds held back because the consumer backlog reached GENESIS_OUTBOX_MAX_PENDING.",
                Kind::Counter,
                self.held(),
            ),
            Family::single(
                "genesis.outbox.rounds",
                "Publisher rounds run (outbox reads): one per due wake-up or timer, none for an event inserted to be due later.",
                Kind::Counter,
                self.rounds(),
            ),
            Family::single(
                "genesis.outbox.consumer_pending",
                "Messages the agent pods' consumer holds (undelivered + unacknowledged) at the publisher's last reading.",
                Kind::Gauge,
                self.consumer_pending.load(Ordering::Relaxed),
            ),
            Family::single(
                "genesis.bootstrap.created",
                "SOA instances created by the bootstrap.",
                Kind::Counter,
                self.bootstrapped.load(Ordering::Relaxed),
            ),
            Family::labelled(
                "genesis.rpc",
                "Admin RPCs answered, by method and code.",
                Kind::Counter,
                rpcs,
            ),
        ]
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        Exposition::new().families(&self.families()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_lists_every_metric() {
        let m = Metrics::default();
        m.add_published(3);
        m.add_publish_errors(1);
        m.set_outbox_lag_ms(1500);
        m.record_rpc("/genesis.v1.TenantService/GetTenant", tonic::Code::NotFound);
        let text = m.render();
        assert!(text.contains("genesis_outbox_published_total 3"));
        assert!(text.contains("genesis_outbox_publish_errors_total 1"));
        assert!(text.contains("genesis_outbox_lag_seconds 1.500"));
        assert!(text.contains(
            "genesis_rpc_total{method=\"/genesis.v1.TenantService/GetTenant\",code=\"NotFound\"} 1"
        ));
    }

    /// Paths a caller made up all count under one `unknown` label.
    #[test]
    fn made_up_paths_share_the_unknown_label() {
        let m = Metrics::default();
        for i in 0..100 {
            m.record_rpc(&format!("/evil.Service/M{i}"), tonic::Code::Unauthenticated);
        }
        m.record_rpc(
            "/genesis.v1.TenantService/NoSuchMethod",
            tonic::Code::Unauthenticated,
        );
        m.record_rpc("/genesis.v1.TenantService/GetTenant", tonic::Code::Ok);
        let text = m.render();
        assert!(
            text.contains("genesis_rpc_total{method=\"unknown\",code=\"Unauthenticated\"} 101"),
            "{text}"
        );
        assert!(!text.contains("evil"), "{text}");
        assert!(!text.contains("NoSuchMethod"), "{text}");
        assert_eq!(text.matches("genesis_rpc_total{").count(), 2, "{text}");
    }

    /// The page `/metrics` serves, byte for byte: the families are only a
    /// second reader of it, never a change of its names or formats.
    #[test]
    fn render_keeps_the_exposition_unchanged() {
        let m = Metrics::default();
        m.add_published(2);
        m.set_outbox_lag_ms(250);
        m.add_held();
        m.add_round();
        m.set_consumer_pending(4);
        m.add_bootstrapped();
        m.record_rpc("/genesis.v1.TenantService/CreateTenant", tonic::Code::Ok);
        assert_eq!(
            m.render(),
            "# HELP genesis_outbox_published_total Events published to JetStream and marked.\n\
             # TYPE genesis_outbox_published_total counter\n\
             genesis_outbox_published_total 2\n\
             # HELP genesis_outbox_publish_errors_total Failed publishes or acks.\n\
             # TYPE genesis_outbox_publish_errors_total counter\n\
             genesis_outbox_publish_errors_total 0\n\
             # HELP genesis_outbox_lag_seconds Age of the oldest due unpublished event.\n\
             # TYPE genesis_outbox_lag_seconds gauge\n\
             genesis_outbox_lag_seconds 0.250\n\
             # HELP genesis_outbox_held_total Publisher rounds held back because the consumer backlog reached GENESIS_OUTBOX_MAX_PENDING.\n\
             # TYPE genesis_outbox_held_total counter\n\
             genesis_outbox_held_total 1\n\
             # HELP genesis_outbox_rounds_total Publisher rounds run (outbox reads): one per due wake-up or timer, none for an event inserted to be due later.\n\
             # TYPE genesis_outbox_rounds_total counter\n\
             genesis_outbox_rounds_total 1\n\
             # HELP genesis_outbox_consumer_pending Messages the agent pods' consumer holds (undelivered + unacknowledged) at the publisher's last reading.\n\
             # TYPE genesis_outbox_consumer_pending gauge\n\
             genesis_outbox_consumer_pending 4\n\
             # HELP genesis_bootstrap_created_total SOA instances created by the bootstrap.\n\
             # TYPE genesis_bootstrap_created_total counter\n\
             genesis_bootstrap_created_total 1\n\
             # HELP genesis_rpc_total Admin RPCs answered, by method and code.\n\
             # TYPE genesis_rpc_total counter\n\
             genesis_rpc_total{method=\"/genesis.v1.TenantService/CreateTenant\",code=\"Ok\"} 1\n"
        );
    }
}
