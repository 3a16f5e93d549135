//! The fallback chain: drive a preset's couples in order and, within each,
//! its credentials in priority order — credential failover on a failover
//! error first, then provider advance — recording one [`CallAttempt`] per
//! try and counting advances and exhaustion. A 429's `Retry-After` rests
//! the credential for later calls (see [`crate::cooldown`]) and, when the
//! whole chain is rate limited, the call waits a bounded time and walks it
//! once more.
//!
//! This module must never price a call or persist anything: the attempts go
//! back to the caller, who sends them to the supervisor to record and cost.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::anthropic::{ANTHROPIC_DEFAULT_BASE_URL, AnthropicProvider};
use crate::cooldown::{CooldownKey, Cooldowns};
use crate::error::LlmError;
use crate::http::{HttpTimeouts, build_client};
use crate::metrics::{AdvanceKind, LlmMetrics};
use crate::openai::{MaxTokensField, OPENAI_DEFAULT_BASE_URL, OpenAiProvider};
use crate::preset::{CredentialRef, ModelCouple, Preset, ProviderKind};
use crate::scripted::ScriptedProvider;
use crate::types::{ChatClient, ChatRequest, ChatResponse, Usage};

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
    /// credential skipped while it cools down after a 429 is `rate_limited`
    /// with a zero latency and an error saying the request was not sent.
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
    /// `success`, `rate_limited`, `unauthorized`, `server_error`, `timeout`,
    /// and `error` for every other failure (the precise code stays in
    /// [`CallAttempt::outcome`] and the message in [`CallAttempt::error`]).
    pub fn stored_outcome(&self) -> &'static str {
        match self.outcome.as_str() {
            OUTCOME_OK => "success",
            "rate_limited" => "rate_limited",
            "unauthorized" => "unauthorized",
            "server_error" => "server_error",
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

/// The production factory: Anthropic and OpenAI over one pooled reqwest
/// client, base URLs configurable per provider and per backend label, and a
/// shared scripted provider.
#[derive(Debug, Clone)]
pub struct HttpProviderFactory {
    client: reqwest::Client,
    anthropic_base_url: String,
    openai_base_url: String,
    backend_base_urls: HashMap<String, String>,
    openai_max_tokens_field: MaxTokensField,
    scripted: Arc<ScriptedProvider>,
}

impl HttpProviderFactory {
    /// A factory with the public base URLs and the given timeouts.
    pub fn new(timeouts: HttpTimeouts) -> Result<Self, LlmError> {
        Ok(HttpProviderFactory {
            client: build_client(timeouts)?,
            anthropic_base_url: ANTHROPIC_DEFAULT_BASE_URL.into(),
            openai_base_url: OPENAI_DEFAULT_BASE_URL.into(),
            backend_base_urls: HashMap::new(),
            openai_max_tokens_field: MaxTokensField::default(),
            scripted: Arc::new(ScriptedProvider::new()),
        })
    }

    /// Override the Anthropic base URL (a proxy, a loopback test server).
    pub fn with_anthropic_base_url(mut self, url: impl Into<String>) -> Self {
        self.anthropic_base_url = url.into();
        self
    }

    /// Override the OpenAI-compatible base URL (`OPENAI_BASE_URL`).
    pub fn with_openai_base_url(mut self, url: impl Into<String>) -> Self {
        self.openai_base_url = url.into();
        self
    }

    /// Route couples whose backend label is `backend` to `url`, whatever
    /// their provider.
    pub fn with_backend_base_url(
        mut self,
        backend: impl Into<String>,
        url: impl Into<String>,
    ) -> Self {
        self.backend_base_urls.insert(backend.into(), url.into());
        self
    }

    /// Choose the OpenAI output-cap field.
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
}

impl ProviderFactory for HttpProviderFactory {
    fn client(
        &self,
        couple: &ModelCouple,
        credential: Option<&CredentialRef>,
    ) -> Result<Arc<dyn ChatClient>, LlmError> {
        let base = |default: &str| {
            if couple.backend.is_empty() {
                return default.to_string();
            }
            self.backend_base_urls
                .get(&couple.backend)
                .cloned()
                .unwrap_or_else(|| default.to_string())
        };
        let secret = || {
            credential.map(|c| c.secret.clone()).ok_or_else(|| {
                LlmError::invalid(format!("{} couple needs a credential", couple.provider))
            })
        };
        Ok(match couple.provider {
            ProviderKind::Anthropic => Arc::new(AnthropicProvider::with_client(
                base(&self.anthropic_base_url),
                secret()?,
                self.client.clone(),
            )),
            ProviderKind::OpenAi => Arc::new(
                OpenAiProvider::with_client(
                    base(&self.openai_base_url),
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

/// Drives a preset's chain for one chat call.
#[derive(Clone)]
pub struct FallbackInvoker {
    factory: Arc<dyn ProviderFactory>,
    metrics: Arc<LlmMetrics>,
    cooldowns: Arc<Cooldowns>,
    max_retry_wait: Duration,
}

impl std::fmt::Debug for FallbackInvoker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackInvoker")
            .field("max_retry_wait", &self.max_retry_wait)
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
}

/// How one walk over the chain ended.
enum Pass {
    /// A candidate answered.
    Answered(Box<(ChatResponse, ModelCouple, String)>),
    /// A non-failover error: the invocation ends with it.
    Stopped(LlmError),
    /// Every candidate failed over. `rate_limited_only` is true when each
    /// usable candidate was rate limited or cooling down (and there was at
    /// least one); `soonest` is the earliest instant one of them may be used
    /// again, when some `Retry-After` told us.
    Exhausted {
        rate_limited_only: bool,
        soonest: Option<Instant>,
    },
}

impl FallbackInvoker {
    /// An invoker counting into the process-wide [`LlmMetrics::global`] and
    /// sharing the process-wide [`Cooldowns::global`], waiting at most
    /// [`DEFAULT_MAX_RETRY_WAIT`] for a `Retry-After`.
    pub fn new(factory: Arc<dyn ProviderFactory>) -> Self {
        FallbackInvoker {
            factory,
            metrics: LlmMetrics::global(),
            cooldowns: Cooldowns::global(),
            max_retry_wait: DEFAULT_MAX_RETRY_WAIT,
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

    /// The longest an invocation waits for a `Retry-After` when every
    /// candidate is rate limited (`Duration::ZERO`: never wait). A longer
    /// hint ends the invocation as exhausted at once.
    pub fn with_max_retry_wait(mut self, max: Duration) -> Self {
        self.max_retry_wait = max;
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

    /// [`FallbackInvoker::invoke_until`] with no deadline.
    pub async fn invoke(
        &self,
        preset: &Preset,
        request: ChatRequest,
    ) -> Result<Invocation, InvocationError> {
        self.invoke_until(preset, request, None).await
    }

    /// Run `request` through `preset`'s chain. The request's `model` is
    /// replaced by each couple's model. A bad preset or request is refused
    /// with [`LlmError::InvalidRequest`] before any attempt; a non-failover
    /// error stops the chain at once.
    ///
    /// A credential that got a 429 with a `Retry-After` is skipped (recorded
    /// as a `rate_limited` attempt that sent nothing) by every call of this
    /// process until that instant passes. When every usable candidate is
    /// rate limited or cooling down, the call waits for the soonest of those
    /// instants and walks the chain once more — but only if that wait is
    /// within the maximum ([`FallbackInvoker::with_max_retry_wait`]) and ends
    /// before `deadline` (the caller's remaining time budget, when it has
    /// one). Otherwise, and when the chain fails over again, the result is
    /// [`LlmError::Exhausted`].
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
                });
                continue;
            }
            let credentials = preset.credentials_for(couple);
            if credentials.is_empty() {
                candidates.push(Candidate {
                    couple,
                    credential: None,
                    usable: false,
                });
            }
            candidates.extend(credentials.into_iter().map(|c| Candidate {
                couple,
                credential: Some(c),
                usable: true,
            }));
        }

        let mut attempts: Vec<CallAttempt> = Vec::new();
        let mut waited = false;
        loop {
            match self.pass(&candidates, &request, &mut attempts).await {
                Pass::Answered(answer) => {
                    let (response, couple, credential_name) = *answer;
                    return Ok(Invocation {
                        response,
                        couple,
                        credential_name,
                        attempts,
                    });
                }
                Pass::Stopped(error) => return Err(InvocationError { error, attempts }),
                Pass::Exhausted {
                    rate_limited_only,
                    soonest,
                } => {
                    let wait = if rate_limited_only && !waited {
                        soonest.and_then(|at| self.retry_wait(at, deadline))
                    } else {
                        None
                    };
                    let Some(wait) = wait else { break };
                    waited = true;
                    self.metrics.record_retry_after_wait();
                    tracing::info!(
                        preset = %preset.id,
                        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                        "every llm credential is rate limited; waiting for the provider's Retry-After"
                    );
                    tokio::time::sleep(wait).await;
                }
            }
        }
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

    /// How long to wait for `at`, or `None` when that is beyond the maximum
    /// wait or would not end before `deadline`.
    fn retry_wait(&self, at: Instant, deadline: Option<Instant>) -> Option<Duration> {
        let now = Instant::now();
        let wait = at.saturating_duration_since(now);
        if wait > self.max_retry_wait {
            return None;
        }
        if deadline.is_some_and(|d| now + wait >= d) {
            return None;
        }
        Some(wait)
    }

    /// Walk `candidates` once, appending one attempt per candidate tried or
    /// skipped.
    async fn pass(
        &self,
        candidates: &[Candidate<'_>],
        request: &ChatRequest,
        attempts: &mut Vec<CallAttempt>,
    ) -> Pass {
        let mut rate_limited_only = true;
        let mut any_usable = false;
        let mut soonest: Option<Instant> = None;
        let mut note_soonest = |until: Instant| {
            soonest = Some(soonest.map_or(until, |s: Instant| s.min(until)));
        };
        for (index, candidate) in candidates.iter().enumerate() {
            let couple = candidate.couple;
            let credential_name = candidate
                .credential
                .map(|c| c.name.clone())
                .unwrap_or_else(|| NO_CREDENTIAL_NAME.to_string());
            let key = CooldownKey::new(couple, candidate.credential);
            let now = Instant::now();
            // What moved the chain on from this candidate (the advance reason).
            let reason: &'static str = if !candidate.usable {
                self.record_no_credential(couple, attempts)
            } else if let Some(until) = self.cooldowns.cooling_until(&key, now) {
                any_usable = true;
                note_soonest(until);
                self.record_cooling(couple, &credential_name, until, now, attempts)
            } else {
                any_usable = true;
                match self
                    .call(candidate, credential_name, request, attempts)
                    .await
                {
                    ControlFlow::Break(answered_or_stopped) => return answered_or_stopped,
                    ControlFlow::Continue(error) => {
                        match &error {
                            LlmError::RateLimited {
                                retry_after: Some(after),
                            } => {
                                note_soonest(self.cooldowns.cool_down(key, *after, Instant::now()))
                            }
                            // No hint: nothing to cool down for or wait on.
                            LlmError::RateLimited { retry_after: None } => {}
                            _ => rate_limited_only = false,
                        }
                        error.code()
                    }
                }
            };
            if let Some(next) = candidates.get(index + 1) {
                let kind = if std::ptr::eq(next.couple, couple) {
                    AdvanceKind::Credential
                } else {
                    AdvanceKind::Provider
                };
                self.metrics.record_advance(kind, reason);
            }
        }
        Pass::Exhausted {
            rate_limited_only: rate_limited_only && any_usable,
            soonest,
        }
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

    /// Record a credential skipped while it cools down after a 429.
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
            "llm credential cooling down; skipped"
        );
        attempts.push(attempt);
        code
    }

    /// Call one usable candidate and record the attempt. `Continue` carries
    /// a failover error (the chain moves on); `Break` ends the pass:
    /// answered, or stopped by a non-failover error.
    async fn call(
        &self,
        candidate: &Candidate<'_>,
        credential_name: String,
        request: &ChatRequest,
        attempts: &mut Vec<CallAttempt>,
    ) -> ControlFlow<Pass, LlmError> {
        let couple = candidate.couple;
        let mut attempt = CallAttempt::begin(couple, credential_name.clone());
        let clock = Instant::now();
        let result = match self.factory.client(couple, candidate.credential) {
            Ok(client) => {
                client
                    .chat(ChatRequest {
                        model: couple.model.clone(),
                        ..request.clone()
                    })
                    .await
            }
            Err(e) => Err(e),
        };
        attempt.latency_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        match result {
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
                attempts.push(attempt);
                ControlFlow::Break(Pass::Answered(Box::new((
                    response,
                    couple.clone(),
                    credential_name,
                ))))
            }
            Err(error) => {
                attempt.outcome = error.code().into();
                attempt.error = Some(error.to_string());
                self.metrics
                    .record_attempt(couple.provider.as_str(), error.code(), None);
                attempts.push(attempt);
                if !error.is_failover() {
                    tracing::warn!(
                        provider = couple.provider.as_str(),
                        model = %couple.model,
                        credential = %credential_name,
                        error = %error,
                        "llm call failed without failover"
                    );
                    return ControlFlow::Break(Pass::Stopped(error));
                }
                tracing::warn!(
                    provider = couple.provider.as_str(),
                    model = %couple.model,
                    credential = %credential_name,
                    error = %error,
                    "llm call failed; advancing the fallback chain"
                );
                ControlFlow::Continue(error)
            }
        }
    }
}
