//! The fallback chain: drive a preset's couples in order and, within each,
//! its credentials in priority order — credential failover on a failover
//! error first, then provider advance — recording one [`CallAttempt`] per
//! try and counting advances and exhaustion.
//!
//! This module must never price a call or persist anything: the attempts go
//! back to the caller, who sends them to the supervisor to record and cost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::anthropic::{ANTHROPIC_DEFAULT_BASE_URL, AnthropicProvider};
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
    /// `ok`, `no_credential`, or the [`LlmError::code`] of the failure.
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

/// Drives a preset's chain for one chat call.
#[derive(Clone)]
pub struct FallbackInvoker {
    factory: Arc<dyn ProviderFactory>,
    metrics: Arc<LlmMetrics>,
}

impl std::fmt::Debug for FallbackInvoker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackInvoker").finish_non_exhaustive()
    }
}

impl FallbackInvoker {
    /// An invoker counting into the process-wide [`LlmMetrics::global`].
    pub fn new(factory: Arc<dyn ProviderFactory>) -> Self {
        FallbackInvoker {
            factory,
            metrics: LlmMetrics::global(),
        }
    }

    /// Count into `metrics` instead of the global instance.
    pub fn with_metrics(mut self, metrics: Arc<LlmMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The counters this invoker writes.
    pub fn metrics(&self) -> &Arc<LlmMetrics> {
        &self.metrics
    }

    /// Run `request` through `preset`'s chain. The request's `model` is
    /// replaced by each couple's model. A bad preset or request is refused
    /// with [`LlmError::InvalidRequest`] before any attempt; a non-failover
    /// error stops the chain at once; when every attempt fails over the
    /// result is [`LlmError::Exhausted`].
    pub async fn invoke(
        &self,
        preset: &Preset,
        request: ChatRequest,
    ) -> Result<Invocation, InvocationError> {
        let refuse = |error: LlmError| InvocationError {
            error,
            attempts: Vec::new(),
        };
        preset
            .validate()
            .map_err(|e| refuse(LlmError::invalid(format!("preset {}: {e}", preset.id))))?;
        ChatRequest {
            model: preset.model.clone(),
            ..request.clone()
        }
        .validate()
        .map_err(refuse)?;

        let chain = preset.chain();
        let mut attempts: Vec<CallAttempt> = Vec::new();
        for (couple_index, couple) in chain.iter().enumerate() {
            let credentials: Vec<Option<&CredentialRef>> = if couple.provider.needs_credential() {
                preset
                    .credentials_for(couple)
                    .into_iter()
                    .map(Some)
                    .collect()
            } else {
                vec![None]
            };
            if credentials.is_empty() {
                attempts.push(CallAttempt {
                    requested_model: couple.model.clone(),
                    served_model: None,
                    provider: couple.provider,
                    backend: couple.backend.clone(),
                    credential_name: NO_CREDENTIAL_NAME.into(),
                    outcome: OUTCOME_NO_CREDENTIAL.into(),
                    error: Some(format!("no credential for provider {}", couple.provider)),
                    usage: Usage::default(),
                    latency_ms: 0,
                    started_at: Utc::now(),
                });
                self.metrics
                    .record_attempt(couple.provider.as_str(), OUTCOME_NO_CREDENTIAL, None);
            }
            for (cred_index, credential) in credentials.iter().enumerate() {
                let credential_name = credential
                    .map(|c| c.name.clone())
                    .unwrap_or_else(|| NO_CREDENTIAL_NAME.to_string());
                let started_at = Utc::now();
                let clock = Instant::now();
                let result = match self.factory.client(couple, *credential) {
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
                let latency_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
                let mut attempt = CallAttempt {
                    requested_model: couple.model.clone(),
                    served_model: None,
                    provider: couple.provider,
                    backend: couple.backend.clone(),
                    credential_name: credential_name.clone(),
                    outcome: OUTCOME_OK.into(),
                    error: None,
                    usage: Usage::default(),
                    latency_ms,
                    started_at,
                };
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
                            latency_ms,
                            "llm call succeeded"
                        );
                        attempts.push(attempt);
                        return Ok(Invocation {
                            response,
                            couple: couple.clone(),
                            credential_name,
                            attempts,
                        });
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
                            return Err(InvocationError { error, attempts });
                        }
                        let last_credential = cred_index + 1 == credentials.len();
                        let last_couple = couple_index + 1 == chain.len();
                        if !last_credential {
                            self.metrics
                                .record_advance(AdvanceKind::Credential, error.code());
                        } else if !last_couple {
                            self.metrics
                                .record_advance(AdvanceKind::Provider, error.code());
                        }
                        tracing::warn!(
                            provider = couple.provider.as_str(),
                            model = %couple.model,
                            credential = %credential_name,
                            error = %error,
                            "llm call failed; advancing the fallback chain"
                        );
                    }
                }
            }
            if credentials.is_empty() && couple_index + 1 < chain.len() {
                self.metrics
                    .record_advance(AdvanceKind::Provider, OUTCOME_NO_CREDENTIAL);
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
}
