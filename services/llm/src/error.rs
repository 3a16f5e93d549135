//! The error vocabulary of every LLM call: one typed enum that tells the
//! fallback chain whether to try the next credential or provider.
//!
//! This module must never carry a secret (an API key, a bearer token) inside
//! an error message: errors end up in logs, spans and attempt records.

use std::time::Duration;

/// Why an LLM call failed.
///
/// Every variant holds plain data (no foreign error types) so an error can be
/// cloned into an attempt record and compared in tests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The provider answered 429; `retry_after` is its wait hint when it sent
    /// one.
    #[error("rate limited by the provider (retry after {retry_after:?})")]
    RateLimited {
        /// How long the provider asked us to wait, parsed from
        /// `retry-after-ms`, `Retry-After` (seconds or HTTP date) or OpenAI's
        /// `x-ratelimit-reset-requests` / `x-ratelimit-reset-tokens`.
        retry_after: Option<Duration>,
    },
    /// The provider refused the credential (401 or 403).
    #[error("the provider refused the credential (HTTP {status})")]
    Unauthorized {
        /// 401 or 403.
        status: u16,
    },
    /// The provider failed on its side (5xx, including Anthropic's 529)
    /// without saying when to come back.
    #[error("provider server error (HTTP {status})")]
    Server {
        /// The 5xx status the provider answered with.
        status: u16,
    },
    /// The provider is overloaded or unavailable (Anthropic's 529, a 503)
    /// and said, in `Retry-After`, when to come back.
    #[error("provider overloaded (HTTP {status}; retry after {retry_after:?})")]
    Overloaded {
        /// 503 or 529.
        status: u16,
        /// How long the provider asked us to wait.
        retry_after: Duration,
    },
    /// No complete answer arrived within the configured timeout.
    #[error("the provider did not answer within the timeout")]
    Timeout,
    /// The connection failed before an HTTP answer (DNS, TCP, TLS, reset).
    #[error("transport failure: {detail}")]
    Transport {
        /// What the HTTP client reported.
        detail: String,
    },
    /// The provider answered 2xx but the body is not the wire format we
    /// speak (bad JSON, missing fields, tool arguments that are not JSON).
    #[error("malformed provider response: {detail}")]
    MalformedResponse {
        /// Which part of the body was wrong.
        detail: String,
    },
    /// The request itself is wrong (refused locally before sending, or a 4xx
    /// other than 401/403/429 from the provider). Retrying elsewhere will not
    /// help.
    #[error("invalid request: {detail}")]
    InvalidRequest {
        /// What was wrong with it.
        detail: String,
    },
    /// Every couple and every credential of the fallback chain failed.
    #[error("all providers exhausted after {attempts} attempt(s)")]
    Exhausted {
        /// How many attempts were made in total.
        attempts: usize,
    },
}

impl LlmError {
    /// True when the fallback chain should move on to the next credential or
    /// provider (after the retries [`crate::fallback::RetryPolicy`] allows): 429,
    /// 401/403, 5xx, timeout and transport failures. A
    /// malformed response or an invalid request is not retried elsewhere —
    /// it would fail the same way, or it points at a bug to surface.
    pub fn is_failover(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Unauthorized { .. }
                | LlmError::Server { .. }
                | LlmError::Overloaded { .. }
                | LlmError::Timeout
                | LlmError::Transport { .. }
        )
    }

    /// The wait the provider asked for before the same request may be sent
    /// again: a 429's hint, or an overloaded provider's `Retry-After`.
    pub fn retry_hint(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after } => *retry_after,
            LlmError::Overloaded { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// True for the failures that are usually gone a moment later and get
    /// a jittered retry on the same credential: a 5xx without a wait hint,
    /// a timeout, a connection that failed or was reset.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LlmError::Server { .. } | LlmError::Timeout | LlmError::Transport { .. }
        )
    }

    /// A stable short code for attempt records, metrics labels and the wire.
    pub fn code(&self) -> &'static str {
        match self {
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::Unauthorized { .. } => "unauthorized",
            LlmError::Server { .. } => "server_error",
            LlmError::Overloaded { .. } => "overloaded",
            LlmError::Timeout => "timeout",
            LlmError::Transport { .. } => "transport",
            LlmError::MalformedResponse { .. } => "malformed_response",
            LlmError::InvalidRequest { .. } => "invalid_request",
            LlmError::Exhausted { .. } => "exhausted",
        }
    }

    /// Shorthand for building a [`LlmError::MalformedResponse`].
    pub(crate) fn malformed(detail: impl Into<String>) -> Self {
        LlmError::MalformedResponse {
            detail: detail.into(),
        }
    }

    /// Shorthand for building a [`LlmError::InvalidRequest`].
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        LlmError::InvalidRequest {
            detail: detail.into(),
        }
    }
}
