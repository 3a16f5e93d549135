//! The fallback chain: drive a preset's couples in order and, within each,
//! its credentials in priority order, retrying the way providers ask before
//! moving on, recording one [`CallAttempt`] per try and counting retries,
//! waits, advances and exhaustion.
//!
//! For each credential, in order:
//! - a 429, or a 503 / Anthropic 529 that says when to come back
//!   (`Retry-After`, `retry-after-ms`, OpenAI's `x-ratelimit-reset-*`):
//!   when another credential of the same provider later in the chain is
//!   free, that one is used first; otherwise the call waits the hint — once
//!   per credential, only while the invocation's total wait stays within
//!   [`FallbackInvoker::with_max_retry_wait`] and ends before the caller's
//!   deadline — and sends to the same credential again. A 429's hint also
//!   rests the credential for later calls of this process (see
//!   [`crate::cooldown`]); a credential found resting is treated the same
//!   way, without sending.
//! - a 5xx without a hint, a timeout, a failed or reset connection: up to
//!   [`RetryPolicy::max_retries`] retries on the same credential after a
//!   full-jitter backoff, never sleeping past the deadline.
//! - then the next credential of the couple, then the next couple.
//!
//! Each failed try is an attempt row, so a wait shows as the failed attempt
//! followed by the retry; each try runs in an OpenTelemetry GenAI `chat`
//! span (see [`crate::metrics`] for the matching metrics).
//!
//! This module must never price a call or persist anything: the attempts go
//! back to the caller, who sends them to the supervisor to record and cost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use crate::anthropic::{ANTHROPIC_DEFAULT_BASE_URL, AnthropicProvider};
use crate::cooldown::{CooldownKey, Cooldowns};
use crate::error::LlmError;
use crate::http::{HttpTimeouts, build_client, normalize_base_url};
use crate::metrics::{AdvanceKind, LlmMetrics, Operation};
use crate::openai::{MaxTokensField, OPENAI_DEFAULT_BASE_URL, OpenAiProvider};
use crate::preset::{CredentialRef, ModelCouple, Preset, ProviderKind};
use crate::scripted::ScriptedProvider;
use crate::types::{ChatClient, ChatRequest, ChatResponse, StopReason, Usage};

/// The outcome code of a successful attempt.
pub const OUTCOME_OK: &str = "ok";
/// The outcome code of a couple skipped because no credential applies.
pub const OUTCOME_NO_CREDENTIAL: &str = "no_credential";
/// The credential name recorded for providers that need none.
pub const NO_CREDENTIAL_NAME: &str = "none";

/// One try against one couple with one credential, as the supervisor records
/// it against the call snapshot (served vs requested model, usage, latency).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallAttempt {
    /// The model the couple asked for.
    pub requested_model: String,
    /// The model the provider says it served; `None` when it failed.
    pub served_model: Option<String>,
    /// The couple's provider.
    pub provider: ProviderKind,
    /// The couple's backend label.
    pub backend: String,
    /// The credential's name (never its value), or `none`.
    pub credential_name: String,
    /// `ok`, `no_credential`, or the [`LlmError::code`] of the failure. A
    /// credential skipped (or waited for) while it cools down after a 429 is
    /// `rate_limited` with a zero latency and an error saying the request
    /// was not sent.
    pub outcome: String,
    /// The error's message when it failed.
    pub error: Option<String>,
    /// Provider-reported usage (zero when it failed).
    pub usage: Usage,
    /// Wall time of the attempt.
    pub latency_ms: u64,
    /// When the attempt started.
    pub started_at: DateTime<Utc>,
}

impl CallAttempt {
    /// An attempt on `couple` with `credential_name`, started now, outcome
    /// `ok` until the caller records otherwise.
    fn begin(couple: &ModelCouple, credential_name: String) -> Self {
        CallAttempt {
            requested_model: couple.model.clone(),
            served_model: None,
            provider: couple.provider,
            backend: couple.backend.clone(),
            credential_name,
            outcome: OUTCOME_OK.into(),
            error: None,
            usage: Usage::default(),
            latency_ms: 0,
            started_at: Utc::now(),
        }
    }

    /// The outcome in the `llm_call_attempts.outcome` vocabulary:
    /// `success`, `rate_limited`, `unauthorized`, `server_error` (an
    /// `overloaded` provider too), `timeout`, and `error` for every other
    /// failure (the precise code stays in [`CallAttempt::outcome`] and the
    /// message in [`CallAttempt::error`]).
    pub fn stored_outcome(&self) -> &'static str {
        match self.outcome.as_str() {
            OUTCOME_OK => "success",
            "rate_limited" => "rate_limited",
            "unauthorized" => "unauthorized",
            "server_error" | "overloaded" => "server_error",
            "timeout" => "timeout",
            _ => "error",
        }
    }
}

/// A successful invocation: the response, which couple and credential
/// answered, and every attempt made on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// The provider's answer.
    pub response: ChatResponse,
    /// The couple that answered.
    pub couple: ModelCouple,
    /// The credential that answered (`none` for the scripted provider).
    pub credential_name: String,
    /// All attempts in order; the last one is the successful one.
    pub attempts: Vec<CallAttempt>,
}

/// A failed invocation: the error that ended it ([`LlmError::Exhausted`]
/// when the whole chain failed over, else the first non-failover error) and
/// every attempt made, so failures are recorded too.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct InvocationError {
    /// Why the invocation failed.
    pub error: LlmError,
    /// All attempts in order (empty when the request was refused up front).
    pub attempts: Vec<CallAttempt>,
}

/// Builds the client for one couple and credential. The HTTP factory is the
/// production one; tests and benchmarks may plug in their own.
pub trait ProviderFactory: Send + Sync {
    /// A client for `couple`, authenticated with `credential` (always `Some`
    /// for providers that need one).
    fn client(
        &self,
        couple: &ModelCouple,
        credential: Option<&CredentialRef>,
    ) -> Result<Arc<dyn ChatClient>, LlmError>;
}

/// A configured base URL, normalised, or why it was refused: reported by
/// [`HttpProviderFactory::validate`] and by every call that would use it, so
/// nothing is ever sent to a URL that failed the check.
type BaseUrl = Result<String, LlmError>;

/// Check `url` for `setting`, naming the setting in the refusal.
fn checked_base_url(setting: &str, url: &str) -> BaseUrl {
    normalize_base_url(url).map_err(|e| {
        let detail = match e {
            LlmError::InvalidRequest { detail } => detail,
            other => other.to_string(),
        };
        LlmError::invalid(format!("{setting}: {detail}"))
    })
}

/// The production factory: Anthropic and OpenAI over one pooled reqwest
/// client, base URLs configurable per provider and per backend label, and a
/// shared scripted provider.
#[derive(Debug, Clone)]
pub struct HttpProviderFactory {
    client: reqwest::Client,
    anthropic_base_url: BaseUrl,
    openai_base_url: BaseUrl,
    backend_base_urls: HashMap<String, BaseUrl>,
    openai_max_tokens_field: MaxTokensField,
    scripted: Arc<ScriptedProvider>,
}

impl HttpProviderFactory {
    /// A factory with the public base URLs and the given timeouts.
    pub fn new(timeouts: HttpTimeouts) -> Result<Self, LlmError> {
        Ok(HttpProviderFactory {
            client: build_client(timeouts)?,
            anthropic_base_url: Ok(ANTHROPIC_DEFAULT_BASE_URL.into()),
            openai_base_url: Ok(OPENAI_DEFAULT_BASE_URL.into()),
            backend_base_urls: HashMap::new(),
            openai_max_tokens_field: MaxTokensField::default(),
            scripted: Arc::new(ScriptedProvider::new()),
        })
    }

    /// Override the Anthropic base URL (`ANTHROPIC_BASE_URL`: a proxy, a
    /// gateway, a loopback test server), written as the official SDKs take
    /// it (`https://api.anthropic.com`; a trailing `/v1` is tolerated). A
    /// URL that is not `http(s)://host…` is kept as the error
    /// [`HttpProviderFactory::validate`] reports, and no call uses it.
    pub fn with_anthropic_base_url(mut self, url: impl Into<String>) -> Self {
        self.anthropic_base_url = checked_base_url("ANTHROPIC_BASE_URL", &url.into());
        self
    }

    /// Override the OpenAI-compatible base URL (`OPENAI_BASE_URL`), with the
    /// SDKs' `/v1` (`https://api.openai.com/v1`) or without it; checked as
    /// [`HttpProviderFactory::with_anthropic_base_url`] checks its URL.
    pub fn with_openai_base_url(mut self, url: impl Into<String>) -> Self {
        self.openai_base_url = checked_base_url("OPENAI_BASE_URL", &url.into());
        self
    }

    /// Route couples whose backend label is `backend` to `url`, whatever
    /// their provider (with or without a trailing `/v1`); checked as
    /// [`HttpProviderFactory::with_anthropic_base_url`] checks its URL.
    pub fn with_backend_base_url(
        mut self,
        backend: impl Into<String>,
        url: impl Into<String>,
    ) -> Self {
        let backend = backend.into();
        let url = checked_base_url(&format!("base URL of backend {backend:?}"), &url.into());
        self.backend_base_urls.insert(backend, url);
        self
    }

    /// Choose the OpenAI output-cap field for models that are not OpenAI
    /// reasoning models (those always get `max_completion_tokens`).
    pub fn with_openai_max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.openai_max_tokens_field = field;
        self
    }

    /// Serve scripted couples with this provider (e.g. a custom script, or
    /// one a test counts calls on).
    pub fn with_scripted(mut self, scripted: Arc<ScriptedProvider>) -> Self {
        self.scripted = scripted;
        self
    }

    /// The first configured base URL that was refused, naming its setting;
    /// a service calls this at startup.
    pub fn validate(&self) -> Result<(), LlmError> {
        self.anthropic_base_url.as_ref().map_err(Clone::clone)?;
        self.openai_base_url.as_ref().map_err(Clone::clone)?;
        let mut backends: Vec<_> = self.backend_base_urls.iter().collect();
        backends.sort_by(|a, b| a.0.cmp(b.0));
        for (_, url) in backends {
            url.as_ref().map_err(Clone::clone)?;
        }
        Ok(())
    }
}

impl ProviderFactory for HttpProviderFactory {
    fn client(
        &self,
        couple: &ModelCouple,
        credential: Option<&CredentialRef>,
    ) -> Result<Arc<dyn ChatClient>, LlmError> {
        let base = |default: &BaseUrl| -> Result<String, LlmError> {
            if couple.backend.is_empty() {
                return default.clone();
            }
            self.backend_base_urls
                .get(&couple.backend)
                .unwrap_or(default)
                .clone()
        };
        let secret = || {
            credential.map(|c| c.secret.clone()).ok_or_else(|| {
                LlmError::invalid(format!("{} couple needs a credential", couple.provider))
            })
        };
        Ok(match couple.provider {
            ProviderKind::Anthropic => Arc::new(AnthropicProvider::with_client(
                base(&self.anthropic_base_url)?,
                secret()?,
                self.client.clone(),
            )),
            ProviderKind::OpenAi => Arc::new(
                OpenAiProvider::with_client(
                    base(&self.openai_base_url)?,
                    secret()?,
                    self.client.clone(),
                )
                .with_max_tokens_field(self.openai_max_tokens_field),
            ),
            ProviderKind::Scripted => self.scripted.clone(),
        })
    }
}

/// The default of [`FallbackInvoker::with_max_retry_wait`]: long enough to
/// ride out a provider's per-minute window, short against a tick's lease.
pub const DEFAULT_MAX_RETRY_WAIT: Duration = Duration::from_secs(30);
/// The default of [`RetryPolicy::max_retries`].
pub const DEFAULT_MAX_RETRIES: u32 = 2;
/// The default of [`RetryPolicy::base`].
pub const DEFAULT_RETRY_BASE: Duration = Duration::from_millis(250);
/// The default of [`RetryPolicy::cap`].
pub const DEFAULT_RETRY_CAP: Duration = Duration::from_secs(8);
/// The `reason` of a retry after waiting for a provider's hint (the other
/// reasons are the [`LlmError::code`] of the transient failure).
pub const RETRY_REASON_HINT: &str = "retry_after";

/// How a transient failure — a 5xx without a wait hint, a timeout, a failed
/// or reset connection — is retried on the same credential before the chain
/// moves on: up to `max_retries` times, the n-th (from 0) after a delay
/// drawn uniformly between zero and `base · 2ⁿ` capped at `cap` ("full
/// jitter", so pods that failed together do not come back together). The
/// scripted provider is never retried this way: its failures are
/// deliberate, a retry could only fail the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries of one credential per invocation; 0 moves on at once.
    pub max_retries: u32,
    /// The ceiling of the first delay; each later one doubles it.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: DEFAULT_MAX_RETRIES,
            base: DEFAULT_RETRY_BASE,
            cap: DEFAULT_RETRY_CAP,
        }
    }
}

impl RetryPolicy {
    /// No retries: a transient failure moves the chain on at once.
    pub const NONE: RetryPolicy = RetryPolicy {
        max_retries: 0,
        base: DEFAULT_RETRY_BASE,
        cap: DEFAULT_RETRY_CAP,
    };

    /// The ceiling of the delay before retry `n` (from 0): `base · 2ⁿ`, at
    /// most `cap`.
    pub fn ceiling(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The delay before retry `n`: uniform in `0..=ceiling(n)`.
    pub fn delay(&self, n: u32) -> Duration {
        self.ceiling(n).mul_f64(unit_random())
    }
}

/// A uniform draw from `[0, 1)`: 53 random bits of a version-4 UUID (the
/// crate's source of OS randomness), the variant bits left out.
fn unit_random() -> f64 {
    let (_, low) = uuid::Uuid::new_v4().as_u64_pair();
    // The top two bits of the low half are the fixed RFC 4122 variant.
    let bits = (low & ((1u64 << 62) - 1)) >> 9;
    bits as f64 / (1u64 << 53) as f64
}

/// Drives a preset's chain for one chat call.
#[derive(Clone)]
pub struct FallbackInvoker {
    factory: Arc<dyn ProviderFactory>,
    metrics: Arc<LlmMetrics>,
    cooldowns: Arc<Cooldowns>,
    max_retry_wait: Duration,
    retry: RetryPolicy,
}

impl std::fmt::Debug for FallbackInvoker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackInvoker")
            .field("max_retry_wait", &self.max_retry_wait)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// One (couple, credential) the chain may try, in order.
struct Candidate<'a> {
    couple: &'a ModelCouple,
    /// `None` with `usable` for providers that need no credential.
    credential: Option<&'a CredentialRef>,
    /// False for a couple that has no credential at all: it is recorded as
    /// `no_credential` and never called.
    usable: bool,
    /// The credential's cool-down key.
    key: CooldownKey,
}

/// What one candidate came to.
enum Step {
    /// It answered.
    Answered(Box<(ChatResponse, ModelCouple, String)>),
    /// A non-failover error: the invocation ends with it.
    Stopped(LlmError),
    /// The chain moves on; the code of what moved it.
    Advance(&'static str),
}

/// One invocation's state while it walks the chain.
struct Run<'r> {
    request: &'r ChatRequest,
    deadline: Option<Instant>,
    attempts: Vec<CallAttempt>,
    /// The time spent waiting on providers' hints so far.
    waited: Duration,
}

impl FallbackInvoker {
    /// An invoker counting into the process-wide [`LlmMetrics::global`] and
    /// sharing the process-wide [`Cooldowns::global`], waiting at most
    /// [`DEFAULT_MAX_RETRY_WAIT`] on hints and retrying transient failures
    /// per [`RetryPolicy::default`].
    pub fn new(factory: Arc<dyn ProviderFactory>) -> Self {
        FallbackInvoker {
            factory,
            metrics: LlmMetrics::global(),
            cooldowns: Cooldowns::global(),
            max_retry_wait: DEFAULT_MAX_RETRY_WAIT,
            retry: RetryPolicy::default(),
        }
    }

    /// Count into `metrics` instead of the global instance.
    pub fn with_metrics(mut self, metrics: Arc<LlmMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Keep credential cool-downs in `cooldowns` instead of the global table.
    pub fn with_cooldowns(mut self, cooldowns: Arc<Cooldowns>) -> Self {
        self.cooldowns = cooldowns;
        self
    }

    /// The most one invocation spends, in total, waiting on providers' wait
    /// hints (`Retry-After`, `retry-after-ms`, `x-ratelimit-reset-*`) before
    /// retrying the same credential (`Duration::ZERO`: never wait). A hint
    /// that does not fit moves the chain on at once.
    pub fn with_max_retry_wait(mut self, max: Duration) -> Self {
        self.max_retry_wait = max;
        self
    }

    /// Retry transient failures per `policy`.
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The counters this invoker writes.
    pub fn metrics(&self) -> &Arc<LlmMetrics> {
        &self.metrics
    }

    /// The cool-down table this invoker reads and writes.
    pub fn cooldowns(&self) -> &Arc<Cooldowns> {
        &self.cooldowns
    }

    /// The retry policy of transient failures.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// [`FallbackInvoker::invoke_until`] with no deadline.
    pub async fn invoke(
        &self,
        preset: &Preset,
        request: ChatRequest,
    ) -> Result<Invocation, InvocationError> {
        self.invoke_until(preset, request, None).await
    }

    /// Run `request` through `preset`'s chain (module docs). The request's
    /// `model` is replaced by each couple's model. A bad preset or request
    /// is refused with [`LlmError::InvalidRequest`] before any attempt; a
    /// non-failover error stops the chain at once; when every candidate has
    /// failed over the result is [`LlmError::Exhausted`]. No wait, hinted or
    /// backoff, ends at or after `deadline` (the caller's remaining time
    /// budget, when it has one): a retry that would is not made.
    pub async fn invoke_until(
        &self,
        preset: &Preset,
        request: ChatRequest,
        deadline: Option<Instant>,
    ) -> Result<Invocation, InvocationError> {
        let refuse = |error: LlmError| InvocationError {
            error,
            attempts: Vec::new(),
        };
        preset
            .validate()
            .map_err(|e| refuse(LlmError::invalid(format!("preset {}: {e}", preset.id))))?;
        request.validate_for(&preset.model).map_err(refuse)?;

        let chain = preset.chain();
        let mut candidates: Vec<Candidate<'_>> = Vec::new();
        for couple in &chain {
            if !couple.provider.needs_credential() {
                candidates.push(Candidate {
                    couple,
                    credential: None,
                    usable: true,
                    key: CooldownKey::new(couple, None),
                });
                continue;
            }
            let credentials = preset.credentials_for(couple);
            if credentials.is_empty() {
                candidates.push(Candidate {
                    couple,
                    credential: None,
                    usable: false,
                    key: CooldownKey::new(couple, None),
                });
            }
            candidates.extend(credentials.into_iter().map(|c| Candidate {
                couple,
                credential: Some(c),
                usable: true,
                key: CooldownKey::new(couple, Some(c)),
            }));
        }

        let mut run = Run {
            request: &request,
            deadline,
            attempts: Vec::new(),
            waited: Duration::ZERO,
        };
        for (index, candidate) in candidates.iter().enumerate() {
            let reason = match self.try_candidate(&candidates, index, &mut run).await {
                Step::Answered(answer) => {
                    let (response, couple, credential_name) = *answer;
                    return Ok(Invocation {
                        response,
                        couple,
                        credential_name,
                        attempts: run.attempts,
                    });
                }
                Step::Stopped(error) => {
                    return Err(InvocationError {
                        error,
                        attempts: run.attempts,
                    });
                }
                Step::Advance(reason) => reason,
            };
            if let Some(next) = candidates.get(index + 1) {
                let kind = if std::ptr::eq(next.couple, candidate.couple) {
                    AdvanceKind::Credential
                } else {
                    AdvanceKind::Provider
                };
                self.metrics.record_advance(kind, reason);
            }
        }
        let attempts = run.attempts;
        self.metrics.record_exhausted();
        tracing::error!(
            preset = %preset.id,
            attempts = attempts.len(),
            "all llm providers exhausted"
        );
        Err(InvocationError {
            error: LlmError::Exhausted {
                attempts: attempts.len(),
            },
            attempts,
        })
    }

    /// Try candidate `index` until it answers, stops the invocation, or
    /// moves the chain on — retrying it as the module docs describe.
    async fn try_candidate(
        &self,
        candidates: &[Candidate<'_>],
        index: usize,
        run: &mut Run<'_>,
    ) -> Step {
        let Some(candidate) = candidates.get(index) else {
            return Step::Advance(OUTCOME_NO_CREDENTIAL);
        };
        let couple = candidate.couple;
        if !candidate.usable {
            return Step::Advance(self.record_no_credential(couple, &mut run.attempts));
        }
        let credential_name = candidate
            .credential
            .map(|c| c.name.clone())
            .unwrap_or_else(|| NO_CREDENTIAL_NAME.to_string());
        let provider = couple.provider.as_str();
        // One hinted wait per credential: a provider still refusing after
        // the time it asked for is not having a blip.
        let mut hint_waited = false;
        let mut retries = 0u32;
        loop {
            let now = Instant::now();
            if let Some(until) = self.cooldowns.cooling_until(&candidate.key, now) {
                let code =
                    self.record_cooling(couple, &credential_name, until, now, &mut run.attempts);
                let left = until.saturating_duration_since(now);
                if !hint_waited
                    && !self.free_alternative(candidates, index)
                    && let Some(wait) = self.hint_wait(left, run)
                {
                    hint_waited = true;
                    self.wait_for_hint(provider, &credential_name, wait, run)
                        .await;
                    continue;
                }
                return Step::Advance(code);
            }

            let error = match self.call(candidate, &credential_name, run).await {
                Ok(response) => {
                    return Step::Answered(Box::new((response, couple.clone(), credential_name)));
                }
                Err(error) if !error.is_failover() => {
                    tracing::warn!(
                        provider,
                        model = %couple.model,
                        credential = %credential_name,
                        error = %error,
                        "llm call failed without failover"
                    );
                    return Step::Stopped(error);
                }
                Err(error) => error,
            };

            if let Some(hint) = error.retry_hint() {
                if matches!(error, LlmError::RateLimited { .. }) {
                    self.cooldowns
                        .cool_down(candidate.key.clone(), hint, Instant::now());
                }
                if !hint_waited
                    && !self.free_alternative(candidates, index)
                    && let Some(wait) = self.hint_wait(hint, run)
                {
                    hint_waited = true;
                    self.wait_for_hint(provider, &credential_name, wait, run)
                        .await;
                    continue;
                }
            } else if error.is_transient()
                && couple.provider.is_remote()
                && retries < self.retry.max_retries
            {
                let delay = self.retry.delay(retries);
                if run
                    .deadline
                    .is_none_or(|deadline| Instant::now() + delay < deadline)
                {
                    retries += 1;
                    self.metrics.record_retry(provider, error.code(), delay);
                    tracing::info!(
                        provider,
                        model = %couple.model,
                        credential = %credential_name,
                        error = %error,
                        retry = retries,
                        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        "llm call failed; retrying the same credential"
                    );
                    tokio::time::sleep(delay).await;
                    continue;
                }
            }
            tracing::warn!(
                provider,
                model = %couple.model,
                credential = %credential_name,
                error = %error,
                "llm call failed; advancing the fallback chain"
            );
            return Step::Advance(error.code());
        }
    }

    /// Whether a later candidate of the same provider, with another
    /// credential, is usable and not cooling down: the chain uses it rather
    /// than wait on candidate `index`.
    fn free_alternative(&self, candidates: &[Candidate<'_>], index: usize) -> bool {
        let Some(me) = candidates.get(index) else {
            return false;
        };
        let now = Instant::now();
        candidates.iter().skip(index + 1).any(|c| {
            c.usable
                && c.couple.provider == me.couple.provider
                && c.key != me.key
                && self.cooldowns.cooling_until(&c.key, now).is_none()
        })
    }

    /// How long to wait for a provider's `hint`, or `None` when it would
    /// take the invocation's hinted waiting past the maximum, or end at or
    /// after the deadline.
    fn hint_wait(&self, hint: Duration, run: &Run<'_>) -> Option<Duration> {
        if run.waited.saturating_add(hint) > self.max_retry_wait {
            return None;
        }
        if run
            .deadline
            .is_some_and(|deadline| Instant::now() + hint >= deadline)
        {
            return None;
        }
        Some(hint)
    }

    /// Wait `wait` as a provider asked, counting it.
    async fn wait_for_hint(
        &self,
        provider: &'static str,
        credential_name: &str,
        wait: Duration,
        run: &mut Run<'_>,
    ) {
        run.waited = run.waited.saturating_add(wait);
        self.metrics.record_retry(provider, RETRY_REASON_HINT, wait);
        tracing::info!(
            provider,
            credential = %credential_name,
            wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            "llm provider asked to wait; retrying the same credential after its hint"
        );
        tokio::time::sleep(wait).await;
    }

    /// Record a couple that has no credential at all (never called).
    fn record_no_credential(
        &self,
        couple: &ModelCouple,
        attempts: &mut Vec<CallAttempt>,
    ) -> &'static str {
        let mut attempt = CallAttempt::begin(couple, NO_CREDENTIAL_NAME.to_string());
        attempt.outcome = OUTCOME_NO_CREDENTIAL.into();
        attempt.error = Some(format!("no credential for provider {}", couple.provider));
        self.metrics
            .record_attempt(couple.provider.as_str(), OUTCOME_NO_CREDENTIAL, None);
        attempts.push(attempt);
        OUTCOME_NO_CREDENTIAL
    }

    /// Record a credential found cooling down after a 429 (nothing sent).
    fn record_cooling(
        &self,
        couple: &ModelCouple,
        credential_name: &str,
        until: Instant,
        now: Instant,
        attempts: &mut Vec<CallAttempt>,
    ) -> &'static str {
        let left = until.saturating_duration_since(now);
        let code = LlmError::RateLimited {
            retry_after: Some(left),
        }
        .code();
        let mut attempt = CallAttempt::begin(couple, credential_name.to_owned());
        attempt.outcome = code.into();
        attempt.error = Some(format!(
            "not sent: the credential is cooling down for {:.1}s after a 429 with Retry-After",
            left.as_secs_f64()
        ));
        self.metrics
            .record_attempt(couple.provider.as_str(), code, None);
        tracing::debug!(
            provider = couple.provider.as_str(),
            credential = %credential_name,
            "llm credential cooling down; not sent"
        );
        attempts.push(attempt);
        code
    }

    /// Send the request to one candidate inside its GenAI `chat` span,
    /// record the attempt and its metrics, and hand back the result.
    async fn call(
        &self,
        candidate: &Candidate<'_>,
        credential_name: &str,
        run: &mut Run<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let couple = candidate.couple;
        let request = run.request;
        let mut attempt = CallAttempt::begin(couple, credential_name.to_owned());
        let span = chat_span(couple, request, credential_name);
        let clock = Instant::now();
        let result = async {
            let client = self.factory.client(couple, candidate.credential)?;
            client
                .chat(ChatRequest {
                    model: couple.model.clone(),
                    ..request.clone()
                })
                .await
        }
        .instrument(span.clone())
        .await;
        let elapsed = clock.elapsed();
        attempt.latency_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        record_outcome(&span, &result);
        self.metrics.record_operation(&Operation {
            provider: couple.provider.as_str(),
            request_model: &couple.model,
            response_model: result.as_ref().ok().map(|r| r.served_model.as_str()),
            duration: elapsed,
            usage: result.as_ref().ok().map(|r| r.usage),
            error_type: result.as_ref().err().map(LlmError::code),
        });
        match &result {
            Ok(response) => {
                attempt.served_model = Some(response.served_model.clone());
                attempt.usage = response.usage;
                self.metrics.record_attempt(
                    couple.provider.as_str(),
                    OUTCOME_OK,
                    Some(response.usage),
                );
                tracing::debug!(
                    provider = couple.provider.as_str(),
                    requested_model = %couple.model,
                    served_model = %response.served_model,
                    credential = %credential_name,
                    latency_ms = attempt.latency_ms,
                    "llm call succeeded"
                );
            }
            Err(error) => {
                attempt.outcome = error.code().into();
                attempt.error = Some(error.to_string());
                self.metrics
                    .record_attempt(couple.provider.as_str(), error.code(), None);
            }
        }
        run.attempts.push(attempt);
        result
    }
}

/// The OpenTelemetry GenAI client span of one attempt: named `chat {model}`
/// through `otel.name` (a `tracing` span's own name is static, `chat`), with
/// the request attributes set now and the response ones left empty for
/// [`record_outcome`].
fn chat_span(couple: &ModelCouple, request: &ChatRequest, credential_name: &str) -> tracing::Span {
    let name = format!("chat {}", couple.model);
    let span = tracing::info_span!(
        "chat",
        otel.name = name.as_str(),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = couple.provider.as_str(),
        gen_ai.request.model = couple.model.as_str(),
        gen_ai.request.max_tokens = u64::from(request.max_output_tokens),
        gen_ai.request.temperature = tracing::field::Empty,
        gen_ai.response.model = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
        gen_ai.usage.cache_creation.input_tokens = tracing::field::Empty,
        error.type = tracing::field::Empty,
        genesis.llm.backend = couple.backend.as_str(),
        genesis.llm.credential = credential_name,
    );
    if let Some(t) = request.temperature {
        span.record("gen_ai.request.temperature", f64::from(t));
    }
    span
}

/// The finish reason as the span reports it: the neutral [`StopReason`] in
/// its snake_case spelling (`end_turn`, `tool_use`, `max_tokens`, …), a
/// provider-specific one verbatim.
fn finish_reason(reason: &StopReason) -> String {
    match reason {
        StopReason::Other(other) => other.clone(),
        known => serde_json::to_value(known)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    }
}

/// Fill a [`chat_span`] with what the attempt came to. Input tokens are the
/// whole prompt ([`Usage::prompt_tokens`]), cache reads and writes included,
/// as the conventions ask; the cache counts are also given apart.
fn record_outcome(span: &tracing::Span, result: &Result<ChatResponse, LlmError>) {
    match result {
        Ok(response) => {
            let usage = response.usage;
            span.record("gen_ai.response.model", response.served_model.as_str());
            span.record(
                "gen_ai.response.finish_reasons",
                finish_reason(&response.stop_reason).as_str(),
            );
            span.record("gen_ai.usage.input_tokens", usage.prompt_tokens());
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            span.record(
                "gen_ai.usage.cache_read.input_tokens",
                usage.cache_read_tokens,
            );
            span.record(
                "gen_ai.usage.cache_creation.input_tokens",
                usage.cache_write_tokens,
            );
        }
        Err(error) => {
            span.record("error.type", error.code());
            span.record("otel.status_code", "ERROR");
        }
    }
}
