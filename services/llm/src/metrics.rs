//! The LLM-call counters: each is emitted twice — to OpenTelemetry through
//! the global meter (a no-op until a meter provider is installed) and to
//! process-local atomics that tests read and `/metrics` renders as
//! Prometheus text.
//!
//! This module must never label a series with a secret, a prompt or a
//! credential value; labels are provider kinds and outcome codes only.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use opentelemetry::KeyValue;

/// OpenTelemetry name: one per provider call attempt.
pub const ATTEMPTS: &str = "subagent.llm_call.attempts";
/// OpenTelemetry name: the chain moved to the next credential or couple.
pub const FALLBACK_ADVANCE: &str = "subagent.llm_call.fallback_advance";
/// OpenTelemetry name: every couple and credential failed.
pub const ALL_PROVIDERS_EXHAUSTED: &str = "subagent.llm_call.all_providers_exhausted";
/// OpenTelemetry name: an invocation found every credential rate limited and
/// waited for the soonest `Retry-After` before walking the chain again.
pub const RETRY_AFTER_WAIT: &str = "subagent.llm_call.retry_after_wait";
/// OpenTelemetry name: provider-reported tokens (label `direction`).
pub const TOKENS: &str = "subagent.llm_call.tokens";

/// Why the chain advanced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvanceKind {
    /// Next credential of the same couple.
    Credential,
    /// Next (model, provider, backend) couple.
    Provider,
}

impl AdvanceKind {
    fn as_str(self) -> &'static str {
        match self {
            AdvanceKind::Credential => "credential",
            AdvanceKind::Provider => "provider",
        }
    }
}

/// Process-local counters of LLM calls. One global instance backs
/// [`metrics_text`]; tests give an invoker its own instance to read exact
/// deltas without interference from concurrent tests.
#[derive(Debug, Default)]
pub struct LlmMetrics {
    attempts_ok: AtomicU64,
    attempts_failed: AtomicU64,
    advance_credential: AtomicU64,
    advance_provider: AtomicU64,
    exhausted: AtomicU64,
    retry_after_waits: AtomicU64,
    input_tokens: AtomicU64,
    output_tokens: AtomicU64,
    cache_read_tokens: AtomicU64,
}

/// A point-in-time copy of [`LlmMetrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Attempts that returned a response.
    pub attempts_ok: u64,
    /// Attempts that returned an error (or were skipped for lack of a credential).
    pub attempts_failed: u64,
    /// Advances to the next credential within a couple.
    pub advance_credential: u64,
    /// Advances to the next couple.
    pub advance_provider: u64,
    /// Invocations where the whole chain failed.
    pub exhausted: u64,
    /// Invocations that waited for a `Retry-After` and retried the chain.
    pub retry_after_waits: u64,
    /// Provider-reported input tokens.
    pub input_tokens: u64,
    /// Provider-reported output tokens.
    pub output_tokens: u64,
    /// Provider-reported cache-read tokens.
    pub cache_read_tokens: u64,
}

impl MetricsSnapshot {
    /// All attempts.
    pub fn attempts(&self) -> u64 {
        self.attempts_ok + self.attempts_failed
    }

    /// All advances (`subagent.llm_call.fallback_advance`).
    pub fn fallback_advance(&self) -> u64 {
        self.advance_credential + self.advance_provider
    }
}

static GLOBAL: OnceLock<Arc<LlmMetrics>> = OnceLock::new();

fn meter() -> opentelemetry::metrics::Meter {
    opentelemetry::global::meter("genesis-llm")
}

impl LlmMetrics {
    /// The process-wide instance [`metrics_text`] renders.
    pub fn global() -> Arc<LlmMetrics> {
        GLOBAL
            .get_or_init(|| Arc::new(LlmMetrics::default()))
            .clone()
    }

    /// Read every counter.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            attempts_ok: r(&self.attempts_ok),
            attempts_failed: r(&self.attempts_failed),
            advance_credential: r(&self.advance_credential),
            advance_provider: r(&self.advance_provider),
            exhausted: r(&self.exhausted),
            retry_after_waits: r(&self.retry_after_waits),
            input_tokens: r(&self.input_tokens),
            output_tokens: r(&self.output_tokens),
            cache_read_tokens: r(&self.cache_read_tokens),
        }
    }

    /// Count one attempt and, on success, its tokens.
    pub(crate) fn record_attempt(
        &self,
        provider: &'static str,
        outcome: &str,
        usage: Option<crate::Usage>,
    ) {
        let ok = outcome == "ok";
        if ok {
            self.attempts_ok.fetch_add(1, Ordering::Relaxed);
        } else {
            self.attempts_failed.fetch_add(1, Ordering::Relaxed);
        }
        let meter = meter();
        meter.u64_counter(ATTEMPTS).build().add(
            1,
            &[
                KeyValue::new("provider", provider),
                KeyValue::new("outcome", outcome.to_string()),
            ],
        );
        if let Some(usage) = usage {
            self.input_tokens
                .fetch_add(usage.input_tokens, Ordering::Relaxed);
            self.output_tokens
                .fetch_add(usage.output_tokens, Ordering::Relaxed);
            self.cache_read_tokens
                .fetch_add(usage.cache_read_tokens, Ordering::Relaxed);
            let tokens = meter.u64_counter(TOKENS).build();
            for (direction, n) in [
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("cache_read", usage.cache_read_tokens),
            ] {
                tokens.add(
                    n,
                    &[
                        KeyValue::new("provider", provider),
                        KeyValue::new("direction", direction),
                    ],
                );
            }
        }
    }

    /// Count one move along the chain.
    pub(crate) fn record_advance(&self, kind: AdvanceKind, reason: &str) {
        match kind {
            AdvanceKind::Credential => &self.advance_credential,
            AdvanceKind::Provider => &self.advance_provider,
        }
        .fetch_add(1, Ordering::Relaxed);
        meter().u64_counter(FALLBACK_ADVANCE).build().add(
            1,
            &[
                KeyValue::new("kind", kind.as_str()),
                KeyValue::new("reason", reason.to_string()),
            ],
        );
    }

    /// Count one fully failed invocation.
    pub(crate) fn record_exhausted(&self) {
        self.exhausted.fetch_add(1, Ordering::Relaxed);
        meter()
            .u64_counter(ALL_PROVIDERS_EXHAUSTED)
            .build()
            .add(1, &[]);
    }

    /// Count one wait for a `Retry-After`.
    pub(crate) fn record_retry_after_wait(&self) {
        self.retry_after_waits.fetch_add(1, Ordering::Relaxed);
        meter().u64_counter(RETRY_AFTER_WAIT).build().add(1, &[]);
    }

    /// These counters in the Prometheus text exposition format (dots in the
    /// OpenTelemetry names become underscores, counters end in `_total`).
    pub fn render_prometheus(&self) -> String {
        let s = self.snapshot();
        let mut out = String::new();
        let mut family = |name: &str, help: &str, series: &[(&str, u64)]| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n"));
            for (labels, value) in series {
                if labels.is_empty() {
                    out.push_str(&format!("{name} {value}\n"));
                } else {
                    out.push_str(&format!("{name}{{{labels}}} {value}\n"));
                }
            }
        };
        family(
            "subagent_llm_call_attempts_total",
            "LLM provider call attempts by outcome.",
            &[
                ("outcome=\"ok\"", s.attempts_ok),
                ("outcome=\"error\"", s.attempts_failed),
            ],
        );
        family(
            "subagent_llm_call_fallback_advance_total",
            "Moves to the next credential or provider couple.",
            &[
                ("kind=\"credential\"", s.advance_credential),
                ("kind=\"provider\"", s.advance_provider),
            ],
        );
        family(
            "subagent_llm_call_all_providers_exhausted_total",
            "Invocations where every provider and credential failed.",
            &[("", s.exhausted)],
        );
        family(
            "subagent_llm_call_retry_after_wait_total",
            "Invocations that waited for a provider's Retry-After and retried the chain.",
            &[("", s.retry_after_waits)],
        );
        family(
            "subagent_llm_call_tokens_total",
            "Provider-reported tokens by direction.",
            &[
                ("direction=\"input\"", s.input_tokens),
                ("direction=\"output\"", s.output_tokens),
                ("direction=\"cache_read\"", s.cache_read_tokens),
            ],
        );
        out
    }
}

/// The process-wide LLM counters as Prometheus text, for a `/metrics`
/// endpoint.
pub fn metrics_text() -> String {
    LlmMetrics::global().render_prometheus()
}
