//! The episode journal's rules (DESIGN's durable episodes): what a step of
//! an episode is ([`JournalKind`]) and what each kind holds
//! ([`LlmTurnStep`], [`ToolCallStep`]: the one shape the pod writes, the
//! supervisor checks and stores, a resumed episode replays and an operator
//! reads as a trace), how a step is cleared of credentials before it is
//! stored ([`redact_step`]), how large one episode's journal may grow and
//! how long a journal is kept ([`JournalLimits`], with their documented
//! defaults). Owns no storage and no I/O: the store appends and prunes.
//! Must never hold a credential: a step is stored as [`redact_step`] leaves
//! it.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::enums::stored_enum;
use crate::error::CoreError;

stored_enum! {
    /// One step of an episode, as `agent_episode_journal.kind` stores it.
    JournalKind {
        /// An LLM turn: the request as sent (redacted), the response as
        /// received, and its attempts.
        LlmTurn => "llm_turn",
        /// A tool call: its name, arguments, the result returned to the
        /// model, and whether it had a side effect.
        ToolCall => "tool_call",
        /// The marker written once, in place of the first step that would
        /// have passed the episode's cap; nothing is journaled after it.
        Truncated => "truncated",
    }
}

/// Default of [`JournalLimits::max_episode_bytes`]: 4 MiB, room for a long
/// episode's prompts and tool results.
pub const DEFAULT_MAX_EPISODE_BYTES: u32 = 4 * 1024 * 1024;
/// Default of [`JournalLimits::retention`]: 30 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The smallest cap accepted: one ordinary step must fit.
pub const MIN_MAX_EPISODE_BYTES: u32 = 16 * 1024;
/// The largest cap accepted (the size of an integer column's reach is far
/// beyond; this bounds what one reclaimed tick reads back).
pub const MAX_MAX_EPISODE_BYTES: u32 = 256 * 1024 * 1024;
/// The shortest retention accepted: a day, so a resumed episode (reclaimed
/// within a lease or a few) always finds its journal.
pub const MIN_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// How much of an episode is journaled and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalLimits {
    /// Bytes of one episode's steps (their JSON text); the first step past
    /// it becomes the [`JournalKind::Truncated`] marker.
    pub max_episode_bytes: u32,
    /// How long a journal is kept after it was written; the ledger turn it
    /// explains is kept forever.
    pub retention: Duration,
}

impl Default for JournalLimits {
    fn default() -> Self {
        JournalLimits {
            max_episode_bytes: DEFAULT_MAX_EPISODE_BYTES,
            retention: DEFAULT_RETENTION,
        }
    }
}

impl JournalLimits {
    /// Refuse limits that would disable the journal or keep it too briefly
    /// for a reclaimed tick to resume from it.
    pub fn check(&self) -> Result<(), CoreError> {
        if !(MIN_MAX_EPISODE_BYTES..=MAX_MAX_EPISODE_BYTES).contains(&self.max_episode_bytes) {
            return Err(CoreError::InvalidArgument {
                field: "journal max episode bytes".into(),
                reason: format!(
                    "must be {MIN_MAX_EPISODE_BYTES}..={MAX_MAX_EPISODE_BYTES}, got {}",
                    self.max_episode_bytes
                ),
            });
        }
        if self.retention < MIN_RETENTION {
            return Err(CoreError::InvalidArgument {
                field: "journal retention".into(),
                reason: format!("must be at least a day, got {} s", self.retention.as_secs()),
            });
        }
        Ok(())
    }
}

/// One LLM turn of an episode: what was asked, what came back, and every
/// attempt the fallback chain made for it. Written once the model answered
/// (or every couple failed), before the episode acts on the answer, in the
/// same transaction as the turn's call attempts: a resumed episode replays
/// a turn that has a `response` without calling the provider again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmTurnStep {
    /// 1, 2, … within the episode (the episode's `turns` count after it).
    pub turn: u32,
    /// The invocation the turn's attempts are recorded under; a resumed
    /// episode keeps it, so its tool calls keep their keys and the turn's
    /// snapshot holds the whole episode's attempts.
    pub invocation_id: String,
    pub request: TurnRequest,
    /// The answer the episode went on with; `None` when every couple failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<TurnResponse>,
    /// Why the turn has no response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every attempt, in order: the couple, its outcome, latency and usage.
    pub attempts: Vec<TurnAttempt>,
    /// The invocation's cost so far, this turn included, as the supervisor
    /// priced it; filled by the store when the step is written, never by the
    /// pod. A resumed episode starts its dollars axis from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_cost_usd: Option<f64>,
    /// The snapshot the invocation's attempts are recorded under, filled
    /// with the cost: a resumed episode's turn links it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
}

/// What a turn sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRequest {
    /// The chain's first model (an attempt names the one that served).
    pub model: String,
    /// The system prompt: on the episode's first turn only (it never
    /// changes within an episode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// How the stored step names its system prompt: the store keeps each
    /// distinct prompt once per tenant and puts the text back in `system`
    /// when the journal is read. Set by the supervisor, never by the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_sha256: Option<String>,
    /// The messages added since the previous turn's answer (on the first
    /// turn, the objective): the conversation is the concatenation of every
    /// turn's messages and answers.
    pub messages: Vec<Value>,
    /// The advertised tools, by name.
    pub tools: Vec<String>,
    pub max_output_tokens: u32,
}

/// What a turn received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub tool_calls: Vec<JournalToolCall>,
    pub served_model: String,
    /// The provider's stop reason, as genesis-llm spells it.
    pub stop_reason: Value,
    pub usage: TurnUsage,
}

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// Token counts, disjoint as genesis-llm normalises them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// One attempt of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnAttempt {
    pub provider: String,
    pub credential_name: String,
    pub requested_model: String,
    #[serde(default)]
    pub served_model: String,
    /// As `llm_call_attempts.outcome` stores it.
    pub outcome: String,
    pub latency_ms: u64,
    pub usage: TurnUsage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One governed tool call that ran (or was blocked by governance), written
/// by the supervisor in the transaction of its effect: a resumed episode
/// answers the same call from it without running the tool again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallStep {
    /// The pod's key of the call (`<invocation>:<turn>:<model call id>`).
    pub call_id: String,
    pub tool_name: String,
    pub arguments: Value,
    /// The result returned to the model.
    pub result: Value,
    pub side_effecting: bool,
    pub blocked: bool,
}

/// The most bytes of JSON one step may take before it reaches the store's
/// per-episode cap: a step is one request's worth, and a request is bounded
/// by the RPC's own size limit well below this.
pub const MAX_STEP_BYTES: usize = 2 * 1024 * 1024;

impl LlmTurnStep {
    /// Refuse a step that is not one: no turn number, no invocation, no
    /// attempt, both or neither of a response and an error, or a cost the
    /// pod tried to set.
    pub fn check(&self) -> Result<(), CoreError> {
        let bad = |field: &str, reason: &str| CoreError::InvalidArgument {
            field: format!("journal_step.{field}"),
            reason: reason.into(),
        };
        if self.turn == 0 {
            return Err(bad("turn", "must be at least 1"));
        }
        if self.invocation_id.trim().is_empty() || self.invocation_id.len() > 200 {
            return Err(bad("invocation_id", "must be 1 to 200 bytes"));
        }
        if self.attempts.is_empty() {
            return Err(bad("attempts", "a turn has at least one attempt"));
        }
        if self.response.is_some() == self.error.is_some() {
            return Err(bad(
                "response",
                "a turn has exactly one of a response and an error",
            ));
        }
        if self.snapshot_cost_usd.is_some() {
            return Err(bad(
                "snapshot_cost_usd",
                "is priced by the supervisor, never sent",
            ));
        }
        if self.snapshot_id.is_some() {
            return Err(bad("snapshot_id", "is set by the store, never sent"));
        }
        if self.request.system_sha256.is_some() {
            return Err(bad(
                "request.system_sha256",
                "is set by the supervisor, never sent",
            ));
        }
        Ok(())
    }
}

/// Mask every credential in every string of a step (keys and values),
/// returning how many were masked. Run on a step before it is stored.
pub fn redact_step(step: &mut Value) -> usize {
    fn text(s: &mut String) -> usize {
        let r = crate::redact::redact_credentials(s);
        let n = r.findings.iter().map(|f| f.count).sum();
        if n > 0 {
            *s = r.text;
        }
        n
    }
    match step {
        Value::String(s) => text(s),
        Value::Array(items) => items.iter_mut().map(redact_step).sum(),
        Value::Object(map) => {
            let mut n = 0;
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let mut clean = key.clone();
                let masked = text(&mut clean);
                if let Some(mut value) = map.remove(&key) {
                    n += masked + redact_step(&mut value);
                    map.insert(clean, value);
                }
            }
            n
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_stored_as_the_schema_lists_them() {
        assert_eq!(JournalKind::TEXTS, ["llm_turn", "tool_call", "truncated"]);
        assert_eq!(
            "tool_call".parse::<JournalKind>().ok(),
            Some(JournalKind::ToolCall)
        );
        assert!("ToolCall".parse::<JournalKind>().is_err());
    }

    #[test]
    fn limits_refuse_a_cap_or_retention_that_would_defeat_resuming() {
        assert!(JournalLimits::default().check().is_ok());
        for bad in [
            JournalLimits {
                max_episode_bytes: 0,
                ..Default::default()
            },
            JournalLimits {
                max_episode_bytes: MAX_MAX_EPISODE_BYTES + 1,
                ..Default::default()
            },
            JournalLimits {
                retention: Duration::from_secs(3600),
                ..Default::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }

    fn step() -> LlmTurnStep {
        LlmTurnStep {
            turn: 1,
            invocation_id: "inv-1".into(),
            request: TurnRequest {
                model: "claude-x".into(),
                system: Some("be brief".into()),
                system_sha256: None,
                messages: vec![serde_json::json!({"role": "user", "content": "hi"})],
                tools: vec!["soa_send_message".into()],
                max_output_tokens: 64,
            },
            response: Some(TurnResponse {
                text: None,
                tool_calls: vec![JournalToolCall {
                    id: "c1".into(),
                    name: "soa_send_message".into(),
                    arguments: serde_json::json!({"message": "hello"}),
                }],
                served_model: "claude-x-1".into(),
                stop_reason: serde_json::json!("tool_use"),
                usage: TurnUsage {
                    input_tokens: 10,
                    output_tokens: 2,
                    ..Default::default()
                },
            }),
            error: None,
            attempts: vec![TurnAttempt {
                provider: "anthropic".into(),
                credential_name: "ANTHROPIC_API_KEY".into(),
                requested_model: "claude-x".into(),
                served_model: "claude-x-1".into(),
                outcome: "success".into(),
                latency_ms: 5,
                usage: TurnUsage::default(),
                error: None,
            }],
            snapshot_cost_usd: None,
            snapshot_id: None,
        }
    }

    #[test]
    fn a_turn_step_is_refused_unless_it_is_one_answered_or_failed_turn() {
        assert!(step().check().is_ok());
        let mut failed = step();
        failed.response = None;
        failed.error = Some("all couples failed".into());
        assert!(failed.check().is_ok());
        type Breakage = Box<dyn Fn(&mut LlmTurnStep)>;
        let cases: Vec<(&str, Breakage)> = vec![
            ("turn", Box::new(|s| s.turn = 0)),
            ("invocation_id", Box::new(|s| s.invocation_id = " ".into())),
            ("attempts", Box::new(|s| s.attempts.clear())),
            ("response", Box::new(|s| s.error = Some("both".into()))),
            ("response", Box::new(|s| s.response = None)),
            (
                "snapshot_cost_usd",
                Box::new(|s| s.snapshot_cost_usd = Some(0.0)),
            ),
        ];
        for (field, breakage) in cases {
            let mut s = step();
            breakage(&mut s);
            let err = s.check().expect_err(field).to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn redaction_masks_credentials_anywhere_in_a_step_and_keeps_other_text() {
        let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz";
        let mut v = serde_json::json!({
            "request": {"messages": [{"role": "user", "content": format!("use {key} please, mail ops@example.com")}]},
            "arguments": {key: "Bearer abcdefghijklmnop0123456789"},
            "n": 3,
        });
        assert_eq!(redact_step(&mut v), 3);
        let text = v.to_string();
        assert!(!text.contains(key), "{text}");
        assert!(!text.contains("abcdefghijklmnop0123456789"), "{text}");
        assert!(text.contains("[REDACTED:api_key]"), "{text}");
        assert!(text.contains("[REDACTED:bearer_token]"), "{text}");
        // Personal data is not a credential: a resumed episode reads it.
        assert!(text.contains("ops@example.com"), "{text}");
        assert_eq!(v["n"], 3);
        // A clean step is left as it was.
        let mut clean = serde_json::to_value(step()).unwrap();
        let before = clean.clone();
        assert_eq!(redact_step(&mut clean), 0);
        assert_eq!(clean, before);
    }

    #[test]
    fn a_turn_step_round_trips_through_its_stored_json() {
        let s = step();
        let v = serde_json::to_value(&s).unwrap();
        assert!(v.get("snapshot_cost_usd").is_none());
        assert!(v.get("error").is_none());
        assert_eq!(serde_json::from_value::<LlmTurnStep>(v).unwrap(), s);
    }
}
