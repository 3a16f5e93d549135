//! The pod's Prometheus counters (ticks run, short-circuits, LLM calls,
//! failures), rendered with genesis-llm's own counters on `/metrics`.
//!
//! This module must never label a series with tenant data, prompts or
//! secrets: the counters are plain totals.

use std::sync::atomic::{AtomicU64, Ordering};

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

    /// Prometheus text exposition of the pod counters followed by
    /// genesis-llm's process-wide counters.
    pub fn render_prometheus(&self) -> String {
        let s = self.snapshot();
        let mut e = Exposition::new();
        for (name, help, value) in [
            (
                "genesis_pod_ticks_run_total",
                "Ticks completed by this pod.",
                s.ticks_run,
            ),
            (
                "genesis_pod_short_circuits_total",
                "Ticks short-circuited without an LLM call (B1).",
                s.short_circuits,
            ),
            (
                "genesis_pod_credit_idles_total",
                "Ticks idled by the weekly credit gate.",
                s.credit_idles,
            ),
            (
                "genesis_pod_llm_calls_total",
                "LLM invocations made by planning episodes.",
                s.llm_calls,
            ),
            (
                "genesis_pod_failures_total",
                "Ticks that failed or were retried.",
                s.failures,
            ),
            (
                "genesis_pod_lease_lost_total",
                "Ticks dropped because the lease was lost.",
                s.lease_lost,
            ),
            (
                "genesis_pod_tenant_deferrals_total",
                "Messages handed back unclaimed because their tenant held its share of this pod.",
                s.tenant_deferrals,
            ),
        ] {
            e.single(name, help, Kind::Counter, value);
        }
        e.raw(&genesis_llm::metrics_text());
        e.finish()
    }
}
