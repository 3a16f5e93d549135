//! The LLM-call counters and histograms: each is emitted twice — to
//! OpenTelemetry through the global meter (a no-op until a meter provider is
//! installed) and to process-local atomics that tests read and `/metrics`
//! renders as Prometheus text.
//!
//! Besides this crate's own counters (`subagent.llm_call.*`,
//! `genesis.llm.*`), every attempt that reaches a provider feeds the
//! OpenTelemetry GenAI client metrics: [`GEN_AI_TOKEN_USAGE`] (input = the
//! whole prompt, cache reads and writes included, and output) and
//! [`GEN_AI_OPERATION_DURATION`], with the conventions' bucket boundaries.
//!
//! This module must never label a series with a secret, a prompt or a
//! credential value; labels are provider kinds and outcome codes only.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

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
/// OpenTelemetry name: a retry of the same credential after a wait (labels
/// `provider`, `reason`: `retry_after` for a provider's hint, else the code
/// of the transient failure).
pub const RETRIES: &str = "genesis.llm.retries";
/// OpenTelemetry name: seconds waited before those retries (same labels).
pub const RETRY_WAIT: &str = "genesis.llm.retry_wait";
/// OpenTelemetry GenAI client metric: tokens per attempt, by
/// `gen_ai.token.type` (`input`: the whole prompt; `output`).
pub const GEN_AI_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
/// OpenTelemetry GenAI client metric: seconds per attempt, failures
/// included (with `error.type`).
pub const GEN_AI_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
/// The conventions' bucket boundaries of [`GEN_AI_TOKEN_USAGE`].
pub const TOKEN_USAGE_BOUNDARIES: [f64; 14] = [
    1.0,
    4.0,
    16.0,
    64.0,
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];
/// The conventions' bucket boundaries of [`GEN_AI_OPERATION_DURATION`], in
/// seconds.
pub const OPERATION_DURATION_BOUNDARIES: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// The providers the histograms keep apart, in `/metrics` order.
const PROVIDERS: [&str; 3] = ["anthropic", "openai", "scripted"];

fn provider_index(provider: &str) -> Option<usize> {
    PROVIDERS.iter().position(|p| *p == provider)
}

/// One attempt that reached (or tried to reach) a provider, as the GenAI
/// metrics see it.
#[derive(Debug, Clone)]
pub(crate) struct Operation<'a> {
    /// `anthropic`, `openai` or `scripted`.
    pub provider: &'static str,
    /// The couple's model.
    pub request_model: &'a str,
    /// The model the provider says it served, on success.
    pub response_model: Option<&'a str>,
    /// Wall time of the attempt.
    pub duration: Duration,
    /// Provider-reported usage, on success.
    pub usage: Option<crate::Usage>,
    /// The [`crate::LlmError::code`] of a failure.
    pub error_type: Option<&'static str>,
}

/// A fixed-bucket histogram (14 boundaries plus `+Inf`), the bucket counts
/// kept apart (not cumulative) until rendered.
#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; 15],
    count: AtomicU64,
    /// The sum of the observations, as `f64` bits.
    sum: AtomicU64,
}

impl Histogram {
    fn observe(&self, bounds: &[f64; 14], value: f64) {
        let index = bounds
            .iter()
            .position(|b| value <= *b)
            .unwrap_or(bounds.len());
        if let Some(bucket) = self.buckets.get(index) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        // A CAS loop: no atomic float add in std.
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// `_bucket`, `_sum` and `_count` lines under `name` with `labels`
    /// (already formatted, without braces).
    fn render(&self, out: &mut String, name: &str, labels: &str, bounds: &[f64; 14]) {
        let mut cumulative = 0u64;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = bounds
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            out.push_str(&format!(
                "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}\n"
            ));
        }
        let sum = f64::from_bits(self.sum.load(Ordering::Relaxed));
        out.push_str(&format!("{name}_sum{{{labels}}} {sum}\n"));
        out.push_str(&format!("{name}_count{{{labels}}} {}\n", self.count()));
    }
}

/// Retries of one (provider, reason): how many, and the time waited.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RetryCount {
    /// Retries made.
    pub retries: u64,
    /// Time waited before them.
    pub waited: Duration,
}

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
    cache_write_tokens: AtomicU64,
    /// (provider, reason) → retries and time waited.
    retries: Mutex<BTreeMap<(&'static str, &'static str), RetryCount>>,
    /// [`GEN_AI_TOKEN_USAGE`] by provider, then input / output.
    token_usage: [[Histogram; 2]; 3],
    /// [`GEN_AI_OPERATION_DURATION`] by provider.
    operation_duration: [Histogram; 3],
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
    /// Waits for a provider's hint (`Retry-After` and the like) before
    /// retrying the same credential.
    pub retry_after_waits: u64,
    /// Provider-reported input tokens billed at the plain input price.
    pub input_tokens: u64,
    /// Provider-reported output tokens.
    pub output_tokens: u64,
    /// Provider-reported cache-read tokens.
    pub cache_read_tokens: u64,
    /// Provider-reported cache-write tokens.
    pub cache_write_tokens: u64,
    /// Retries of a credential, for any reason.
    pub retries: u64,
    /// Time waited before those retries.
    pub retry_wait: Duration,
    /// Attempts observed by [`GEN_AI_OPERATION_DURATION`].
    pub operations: u64,
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
        // One lock, released before the snapshot is built.
        let (retries, retry_wait) = {
            let table = self.retry_table();
            (
                table.values().map(|c| c.retries).sum(),
                table.values().map(|c| c.waited).sum(),
            )
        };
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
            cache_write_tokens: r(&self.cache_write_tokens),
            retries,
            retry_wait,
            operations: self.operation_duration.iter().map(Histogram::count).sum(),
        }
    }

    fn retry_table(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<(&'static str, &'static str), RetryCount>> {
        // Plain counters: a panic elsewhere cannot leave them half-written.
        self.retries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Retries of `provider`'s credentials for `reason` (`retry_after`, or a
    /// transient failure's code such as `server_error`).
    pub fn retries(&self, provider: &str, reason: &str) -> RetryCount {
        self.retry_table()
            .iter()
            .find(|((p, r), _)| *p == provider && *r == reason)
            .map(|(_, c)| *c)
            .unwrap_or_default()
    }

    /// How many observations [`GEN_AI_TOKEN_USAGE`] holds for `provider` and
    /// `token_type` (`input` or `output`), and their sum.
    pub fn token_usage(&self, provider: &str, token_type: &str) -> (u64, f64) {
        let column = match token_type {
            "input" => 0,
            "output" => 1,
            _ => return (0, 0.0),
        };
        provider_index(provider)
            .and_then(|p| self.token_usage.get(p))
            .and_then(|pair| pair.get(column))
            .map_or((0, 0.0), |h| {
                (h.count(), f64::from_bits(h.sum.load(Ordering::Relaxed)))
            })
    }

    /// Count one retry of the same credential after waiting `wait`.
    pub(crate) fn record_retry(
        &self,
        provider: &'static str,
        reason: &'static str,
        wait: Duration,
    ) {
        {
            let mut table = self.retry_table();
            let entry = table.entry((provider, reason)).or_default();
            entry.retries += 1;
            entry.waited = entry.waited.saturating_add(wait);
        }
        if reason == crate::fallback::RETRY_REASON_HINT {
            self.retry_after_waits.fetch_add(1, Ordering::Relaxed);
            meter().u64_counter(RETRY_AFTER_WAIT).build().add(1, &[]);
        }
        let labels = [
            KeyValue::new("provider", provider),
            KeyValue::new("reason", reason),
        ];
        let meter = meter();
        meter.u64_counter(RETRIES).build().add(1, &labels);
        meter
            .f64_counter(RETRY_WAIT)
            .with_unit("s")
            .build()
            .add(wait.as_secs_f64(), &labels);
    }

    /// Observe one attempt in the GenAI client metrics.
    pub(crate) fn record_operation(&self, op: &Operation<'_>) {
        let seconds = op.duration.as_secs_f64();
        let index = provider_index(op.provider);
        if let Some(h) = index.and_then(|p| self.operation_duration.get(p)) {
            h.observe(&OPERATION_DURATION_BOUNDARIES, seconds);
        }
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", op.provider),
            KeyValue::new("gen_ai.request.model", op.request_model.to_string()),
        ];
        if let Some(model) = op.response_model {
            attributes.push(KeyValue::new("gen_ai.response.model", model.to_string()));
        }
        if let Some(error) = op.error_type {
            attributes.push(KeyValue::new("error.type", error));
        }
        let meter = meter();
        meter
            .f64_histogram(GEN_AI_OPERATION_DURATION)
            .with_unit("s")
            .with_description("GenAI operation duration.")
            .with_boundaries(OPERATION_DURATION_BOUNDARIES.to_vec())
            .build()
            .record(seconds, &attributes);
        let Some(usage) = op.usage else { return };
        let tokens = meter
            .u64_histogram(GEN_AI_TOKEN_USAGE)
            .with_unit("{token}")
            .with_description("Number of input and output tokens used.")
            .with_boundaries(TOKEN_USAGE_BOUNDARIES.to_vec())
            .build();
        for (column, (token_type, n)) in [
            ("input", usage.prompt_tokens()),
            ("output", usage.output_tokens),
        ]
        .into_iter()
        .enumerate()
        {
            if let Some(h) = index
                .and_then(|p| self.token_usage.get(p))
                .and_then(|pair| pair.get(column))
            {
                h.observe(&TOKEN_USAGE_BOUNDARIES, n as f64);
            }
            let mut with_type = attributes.clone();
            with_type.push(KeyValue::new("gen_ai.token.type", token_type));
            tokens.record(n, &with_type);
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
            self.cache_write_tokens
                .fetch_add(usage.cache_write_tokens, Ordering::Relaxed);
            let tokens = meter.u64_counter(TOKENS).build();
            for (direction, n) in [
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("cache_read", usage.cache_read_tokens),
                ("cache_write", usage.cache_write_tokens),
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
            "Waits for a provider's Retry-After (or rate-limit reset) before retrying the same credential.",
            &[("", s.retry_after_waits)],
        );
        family(
            "subagent_llm_call_tokens_total",
            "Provider-reported tokens by direction (input: billed at the plain input price).",
            &[
                ("direction=\"input\"", s.input_tokens),
                ("direction=\"output\"", s.output_tokens),
                ("direction=\"cache_read\"", s.cache_read_tokens),
                ("direction=\"cache_write\"", s.cache_write_tokens),
            ],
        );
        let retries: Vec<((&str, &str), RetryCount)> =
            self.retry_table().iter().map(|(k, v)| (*k, *v)).collect();
        out.push_str(
            "# HELP genesis_llm_retries_total Retries of the same credential after a wait, by provider and reason.\n\
             # TYPE genesis_llm_retries_total counter\n",
        );
        for ((provider, reason), c) in &retries {
            out.push_str(&format!(
                "genesis_llm_retries_total{{provider=\"{provider}\",reason=\"{reason}\"}} {}\n",
                c.retries
            ));
        }
        out.push_str(
            "# HELP genesis_llm_retry_wait_seconds_total Seconds waited before retrying the same credential, by provider and reason.\n\
             # TYPE genesis_llm_retry_wait_seconds_total counter\n",
        );
        for ((provider, reason), c) in &retries {
            out.push_str(&format!(
                "genesis_llm_retry_wait_seconds_total{{provider=\"{provider}\",reason=\"{reason}\"}} {:.3}\n",
                c.waited.as_secs_f64()
            ));
        }
        out.push_str(
            "# HELP gen_ai_client_token_usage Tokens per LLM call attempt (input: the whole prompt, cached parts included).\n\
             # TYPE gen_ai_client_token_usage histogram\n",
        );
        for (provider, pair) in PROVIDERS.iter().zip(&self.token_usage) {
            for (token_type, h) in ["input", "output"].iter().zip(pair) {
                if h.count() > 0 {
                    h.render(
                        &mut out,
                        "gen_ai_client_token_usage",
                        &format!(
                            "gen_ai_provider_name=\"{provider}\",gen_ai_token_type=\"{token_type}\""
                        ),
                        &TOKEN_USAGE_BOUNDARIES,
                    );
                }
            }
        }
        out.push_str(
            "# HELP gen_ai_client_operation_duration_seconds Seconds per LLM call attempt, failures included.\n\
             # TYPE gen_ai_client_operation_duration_seconds histogram\n",
        );
        for (provider, h) in PROVIDERS.iter().zip(&self.operation_duration) {
            if h.count() > 0 {
                h.render(
                    &mut out,
                    "gen_ai_client_operation_duration_seconds",
                    &format!("gen_ai_provider_name=\"{provider}\""),
                    &OPERATION_DURATION_BOUNDARIES,
                );
            }
        }
        out
    }
}

/// The process-wide LLM counters as Prometheus text, for a `/metrics`
/// endpoint.
pub fn metrics_text() -> String {
    LlmMetrics::global().render_prometheus()
}
