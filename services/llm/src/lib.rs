//! genesis-llm: every LLM call the agents make goes through this crate — the
//! [`ChatClient`] trait, the Anthropic and OpenAI-compatible HTTP providers,
//! the offline [`ScriptedProvider`], presets and the [`FallbackInvoker`] that
//! walks a preset's chain of (model, provider, backend) couples and
//! credentials, recording one [`CallAttempt`] per try, and the platform's
//! provider keys a preset may name ([`keys`]).
//!
//! Used by the agent pod (planning loop) and by anything else that needs a
//! model. This crate must never compute cost, parse response text for state,
//! or touch the database: it returns provider-reported usage and the attempt
//! list, and the supervisor prices and records them.

pub mod anthropic;
pub mod cooldown;
pub mod error;
pub mod fallback;
pub mod http;
pub mod keys;
pub mod metrics;
pub mod openai;
pub mod preset;
pub mod resolve;
pub mod scripted;
pub mod secret;
pub mod types;

pub use anthropic::{AnthropicProvider, parse_anthropic_response};
pub use cooldown::Cooldowns;
pub use error::LlmError;
pub use fallback::{
    CallAttempt, DEFAULT_MAX_RETRY_WAIT, FallbackInvoker, HttpProviderFactory, Invocation,
    InvocationError, ProviderFactory,
};
pub use http::{HttpTimeouts, parse_retry_after};
pub use keys::{KeysError, LoadedKeySet, ProviderKeys, load_key_set};
pub use metrics::{LlmMetrics, MetricsSnapshot, metrics_text};
pub use openai::{MaxTokensField, OpenAiProvider, parse_openai_response};
pub use preset::{
    CredentialRef, DEFAULT_AGENT_MODEL, ModelCouple, Overlays, Preset, PresetError, ProviderKind,
};
pub use resolve::{
    ChainCouple, CredentialSource, ResolvedChain, prompt_token_bound, resolve_preset,
};
pub use scripted::{
    SCRIPTED_MODEL, Script, ScriptError, ScriptRule, ScriptedProvider, ScriptedToolCall,
};
pub use secret::Secret;
pub use types::{
    ChatClient, ChatMessage, ChatRequest, ChatResponse, StopReason, ToolCall, ToolSpec, Usage,
};
