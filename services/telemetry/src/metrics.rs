//! One description of a service's own metrics that both exports read: the
//! Prometheus text of `/metrics` ([`crate::prometheus::Exposition::families`])
//! and, when OTLP is configured, observable OpenTelemetry instruments
//! ([`crate::export_metrics`]). A service lists its counters
//! and gauges once, as [`Family`] values read from its atomics, so the two
//! exports can never disagree on a name, a label or a value.
//!
//! Names are OpenTelemetry names (`genesis.pod.ticks_run`); the Prometheus
//! name is derived the way OpenTelemetry's Prometheus mapping does it (dots
//! become underscores, counters end in `_total`), the convention genesis-llm's
//! `subagent.llm_call.*` counters follow too.
//!
//! This module never holds a value between reads and never does I/O: a
//! family is a snapshot built by the service when asked.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Meter};
use std::sync::Arc;

use crate::prometheus::Kind;

/// A sample's labels: static names, runtime values (method, outcome, tool).
pub type Labels = Vec<(&'static str, String)>;

/// The samples of one family, typed once so the OpenTelemetry instrument
/// (integer or floating point) can be chosen before any value is read.
#[derive(Debug, Clone, PartialEq)]
pub enum Samples {
    /// Whole numbers, written as they are.
    Integer(Vec<(Labels, u64)>),
    /// Fractional values (seconds, dollars), written with `places` decimals
    /// on `/metrics`.
    Decimal {
        /// Decimal places of the Prometheus text.
        places: usize,
        /// Label sets and values.
        samples: Vec<(Labels, f64)>,
    },
}

/// One metric and its current samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// OpenTelemetry name, e.g. `genesis.supervisor.claims`.
    pub name: &'static str,
    /// One line of help (`# HELP`, the instrument's description).
    pub help: &'static str,
    /// Counter (monotonic, cumulative) or gauge.
    pub kind: Kind,
    /// The values at the time the family was built.
    pub samples: Samples,
}

impl Family {
    /// An unlabelled integer metric.
    pub fn single(name: &'static str, help: &'static str, kind: Kind, value: u64) -> Family {
        Family::labelled(name, help, kind, [(Labels::new(), value)])
    }

    /// An integer metric with one sample per label set. A family with no
    /// sample yet is still listed (and still gets its instrument).
    pub fn labelled(
        name: &'static str,
        help: &'static str,
        kind: Kind,
        samples: impl IntoIterator<Item = (Labels, u64)>,
    ) -> Family {
        Family {
            name,
            help,
            kind,
            samples: Samples::Integer(samples.into_iter().collect()),
        }
    }

    /// An unlabelled fractional metric, written with `places` decimals.
    pub fn decimal(
        name: &'static str,
        help: &'static str,
        kind: Kind,
        places: usize,
        value: f64,
    ) -> Family {
        Family {
            name,
            help,
            kind,
            samples: Samples::Decimal {
                places,
                samples: vec![(Labels::new(), value)],
            },
        }
    }

    /// The Prometheus name: dots become underscores and a counter ends in
    /// `_total` (`genesis.rpc` → `genesis_rpc_total`).
    pub fn prometheus_name(&self) -> String {
        let base = self.name.replace('.', "_");
        match self.kind {
            Kind::Counter => format!("{base}_total"),
            Kind::Gauge => base,
        }
    }
}

fn attributes(labels: &Labels) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|(k, v)| KeyValue::new(*k, v.clone()))
        .collect()
}

/// The samples of the family called `name` in a fresh read of `source`.
fn current<F>(source: &F, name: &str) -> Option<Samples>
where
    F: Fn() -> Vec<Family>,
{
    source()
        .into_iter()
        .find(|f| f.name == name)
        .map(|f| f.samples)
}

/// Register one observable instrument on `meter` per family `source` lists
/// now. Each instrument's callback reads `source` again at every collection
/// and observes its own family, so the exported value is always the one
/// `/metrics` shows. Families are read once per instrument per collection:
/// `source` must be cheap (atomics and a short lock), which is what the
/// services' metric structs are.
pub fn observe<F>(meter: &Meter, source: F)
where
    F: Fn() -> Vec<Family> + Send + Sync + 'static,
{
    let source = Arc::new(source);
    for family in source() {
        let name = family.name;
        let read = source.clone();
        // The four instrument kinds differ only in their builder; what each
        // callback observes is one of the two readers below.
        match (&family.samples, family.kind) {
            (Samples::Integer(_), Kind::Counter) => {
                meter
                    .u64_observable_counter(name)
                    .with_description(family.help)
                    .with_callback(move |o| observe_integers(read.as_ref(), name, o))
                    .build();
            }
            (Samples::Integer(_), Kind::Gauge) => {
                meter
                    .u64_observable_gauge(name)
                    .with_description(family.help)
                    .with_callback(move |o| observe_integers(read.as_ref(), name, o))
                    .build();
            }
            (Samples::Decimal { .. }, Kind::Counter) => {
                meter
                    .f64_observable_counter(name)
                    .with_description(family.help)
                    .with_callback(move |o| observe_decimals(read.as_ref(), name, o))
                    .build();
            }
            (Samples::Decimal { .. }, Kind::Gauge) => {
                meter
                    .f64_observable_gauge(name)
                    .with_description(family.help)
                    .with_callback(move |o| observe_decimals(read.as_ref(), name, o))
                    .build();
            }
        }
    }
}

/// Observe every sample of the integer family `name` in a fresh read.
fn observe_integers<F>(source: &F, name: &str, o: &dyn AsyncInstrument<u64>)
where
    F: Fn() -> Vec<Family>,
{
    if let Some(Samples::Integer(samples)) = current(source, name) {
        for (labels, v) in &samples {
            o.observe(*v, &attributes(labels));
        }
    }
}

/// Observe every sample of the decimal family `name` in a fresh read.
fn observe_decimals<F>(source: &F, name: &str, o: &dyn AsyncInstrument<f64>)
where
    F: Fn() -> Vec<Family>,
{
    if let Some(Samples::Decimal { samples, .. }) = current(source, name) {
        for (labels, v) in &samples {
            o.observe(*v, &attributes(labels));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_names_follow_the_otel_mapping() {
        let families = [
            Family::single("genesis.test.ticks", "Ticks.", Kind::Counter, 1),
            Family::labelled("genesis.rpc", "RPCs.", Kind::Counter, []),
            Family::decimal("genesis.outbox.lag_seconds", "Lag.", Kind::Gauge, 3, 1.5),
        ];
        let names: Vec<String> = families.iter().map(Family::prometheus_name).collect();
        assert_eq!(
            names,
            [
                "genesis_test_ticks_total",
                "genesis_rpc_total",
                "genesis_outbox_lag_seconds"
            ]
        );
    }
}
