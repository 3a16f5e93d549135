//! The pod's counters (ticks run, short-circuits, LLM calls, failures),
//! listed once as [`Family`] values: rendered with genesis-llm's own
//! counters on `/metrics` and, when OTLP is configured, exported through the
//! OpenTelemetry meter from the same list.
//!
//! This module must never label a series with tenant data, prompts or
//! secrets: the counters are plain totals.

use std::sync::atomic::{AtomicU64, Ordering};

use genesis_telemetry::metrics::Family;
use genesis_telemetry::prometheus::{Exposition, Kind};

/// Process-local totals; one instance is shared by the worker and the HTTP
/// endpoint, tests give each pod its own.
#[derive(Debug, Default)]
pub struct PodMetrics {
    ticks_run: AtomicU64,
    short_circuits: AtomicU64,
    credit_idles: AtomicU64,
    llm_calls: AtomicU64,
    failures: AtomicU64,
    lease_lost: AtomicU64,
    tenant_deferrals: AtomicU64,
}

/// A point-in-time copy of [`PodMetrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodMetricsSnapshot {
    /// Ticks completed (any completion).
    pub ticks_run: u64,
    /// Ticks short-circuited by the B1 hash check.
    pub short_circuits: u64,
    /// Ticks idled by the credit gate.
    pub credit_idles: u64,
    /// LLM invocations made by episodes.
    pub llm_calls: u64,
    /// Ticks that failed (pod-side error, transient supervisor failure).
    pub failures: u64,
    /// Ticks dropped because the lease was lost.
    pub lease_lost: u64,
    /// Messages handed back unclaimed because their tenant held its share.
    pub tenant_deferrals: u64,
}

impl PodMetrics {
    /// One tick completed.
    pub fn tick_run(&self) {
        self.ticks_run.fetch_add(1, Ordering::Relaxed);
    }
    /// One B1 short-circuit.
    pub fn short_circuit(&self) {
        self.short_circuits.fetch_add(1, Ordering::Relaxed);
    }
    /// One credit-gate idle.
    pub fn credit_idle(&self) {
        self.credit_idles.fetch_add(1, Ordering::Relaxed);
    }
    /// `n` LLM invocations.
    pub fn llm_calls(&self, n: u64) {
        self.llm_calls.fetch_add(n, Ordering::Relaxed);
    }
    /// One failed tick.
    pub fn failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }
    /// One tick dropped on a lost lease.
    pub fn lease_lost(&self) {
        self.lease_lost.fetch_add(1, Ordering::Relaxed);
    }
    /// One message handed back because its tenant held its share of slots.
    pub fn tenant_deferral(&self) {
        self.tenant_deferrals.fetch_add(1, Ordering::Relaxed);
    }

    /// The current totals.
    pub fn snapshot(&self) -> PodMetricsSnapshot {
        PodMetricsSnapshot {
            ticks_run: self.ticks_run.load(Ordering::Relaxed),
            short_circuits: self.short_circuits.load(Ordering::Relaxed),
            credit_idles: self.credit_idles.load(Ordering::Relaxed),
            llm_calls: self.llm_calls.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            lease_lost: self.lease_lost.load(Ordering::Relaxed),
            tenant_deferrals: self.tenant_deferrals.load(Ordering::Relaxed),
        }
    }

    /// Every pod counter with its current value, named once for both
    /// exports: `/metrics` ([`PodMetrics::render_prometheus`]) and, when OTLP
    /// is configured, the observable instruments `genesis_telemetry`
    /// registers from this list. genesis-llm's counters are not here: they
    /// record to OpenTelemetry themselves.
    pub fn families(&self) -> Vec<Family> {
        let s = self.snapshot();
        [
            (
                "genesis.pod.ticks_run",
                "Ticks completed by this pod.",
                s.ticks_run,
            ),
            (
                "genesis.pod.short_circuits",
                "Ticks short-circuited without an LLM call (B1).",
                s.short_circuits,
            ),
            (
                "genesis.pod.credit_idles",
                "Ticks idled by the weekly credit gate.",
                s.credit_idles,
            ),
            (
                "genesis.pod.llm_calls",
                "LLM invocations made by planning episodes.",
                s.llm_calls,
            ),
            (
                "genesis.pod.failures",
                "Ticks that failed or were retried.",
                s.failures,
            ),
            (
                "genesis.pod.lease_lost",
                "Ticks dropped because the lease was lost.",
                s.lease_lost,
            ),
            (
                "genesis.pod.tenant_deferrals",
                "Messages handed back unclaimed because their tenant held its share of this pod.",
                s.tenant_deferrals,
            ),
        ]
        .into_iter()
        .map(|(name, help, value)| Family::single(name, help, Kind::Counter, value))
        .collect()
    }

    /// Prometheus text exposition of the pod counters followed by
    /// genesis-llm's process-wide counters.
    pub fn render_prometheus(&self) -> String {
        Exposition::new()
            .families(&self.families())
            .raw(&genesis_llm::metrics_text())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pod's part of `/metrics`, byte for byte: the families are only a
    /// second reader of it, never a change of its names or formats.
    #[test]
    fn render_keeps_the_pod_counters_unchanged() {
        let m = PodMetrics::default();
        m.tick_run();
        m.tick_run();
        m.short_circuit();
        m.llm_calls(3);
        let text = m.render_prometheus();
        let expected = "# HELP genesis_pod_ticks_run_total Ticks completed by this pod.\n\
             # TYPE genesis_pod_ticks_run_total counter\n\
             genesis_pod_ticks_run_total 2\n\
             # HELP genesis_pod_short_circuits_total Ticks short-circuited without an LLM call (B1).\n\
             # TYPE genesis_pod_short_circuits_total counter\n\
             genesis_pod_short_circuits_total 1\n\
             # HELP genesis_pod_credit_idles_total Ticks idled by the weekly credit gate.\n\
             # TYPE genesis_pod_credit_idles_total counter\n\
             genesis_pod_credit_idles_total 0\n\
             # HELP genesis_pod_llm_calls_total LLM invocations made by planning episodes.\n\
             # TYPE genesis_pod_llm_calls_total counter\n\
             genesis_pod_llm_calls_total 3\n\
             # HELP genesis_pod_failures_total Ticks that failed or were retried.\n\
             # TYPE genesis_pod_failures_total counter\n\
             genesis_pod_failures_total 0\n\
             # HELP genesis_pod_lease_lost_total Ticks dropped because the lease was lost.\n\
             # TYPE genesis_pod_lease_lost_total counter\n\
             genesis_pod_lease_lost_total 0\n\
             # HELP genesis_pod_tenant_deferrals_total Messages handed back unclaimed because their tenant held its share of this pod.\n\
             # TYPE genesis_pod_tenant_deferrals_total counter\n\
             genesis_pod_tenant_deferrals_total 0\n";
        assert!(text.starts_with(expected), "{text}");
        assert!(
            text[expected.len()..].starts_with("# HELP subagent_llm_call_attempts_total"),
            "genesis-llm's counters follow: {text}"
        );
    }
}
