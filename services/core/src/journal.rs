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
    /// The preset chain and budget the episode was claimed with, on its
    /// first turn's step when the chain is paid: a resumed episode keeps
    /// them whatever the catalogue says by then, as it keeps the system
    /// prompt and the conversation. A free chain's step has none (asking
    /// it again costs nothing, so its resumed episode takes the new
    /// claim's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<EpisodeContext>,
}

/// The most couples an episode's recorded chain may hold.
pub const MAX_CONTEXT_COUPLES: usize = 16;

/// The preset chain and budget an episode was claimed with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeContext {
    /// The site whose binding supplied the preset.
    pub resolved_site_id: String,
    /// Empty when resolution fell through to the code default.
    #[serde(default)]
    pub preset_id: String,
    #[serde(default)]
    pub preset_name: String,
    /// The couples to try, in order.
    pub couples: Vec<ContextCouple>,
    pub budget: ContextBudget,
}

/// One couple of a recorded chain (credential names only, never secrets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextCouple {
    pub model: String,
    pub provider: String,
    /// Empty means `api`.
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub credential_names: Vec<String>,
}

/// The per-tick budget envelope as recorded; `None` is an unlimited axis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextBudget {
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_output_tokens_per_turn: Option<u64>,
    #[serde(default)]
    pub max_tool_calls: Option<u64>,
    #[serde(default)]
    pub max_wall_ms: Option<u64>,
    #[serde(default)]
    pub max_dollars: Option<f64>,
    #[serde(default)]
    pub max_turns: Option<u64>,
}

impl EpisodeContext {
    /// Refuse a context no claim could have handed out: no couple or too
    /// many, an empty model or provider, a name over 200 bytes, more than
    /// 16 credential names on a couple, or a dollar ceiling that is not a
    /// finite amount of at least 0.
    pub fn check(&self) -> Result<(), CoreError> {
        let bad = |field: &str, reason: String| CoreError::InvalidArgument {
            field: format!("journal_step.request.context.{field}"),
            reason,
        };
        let name = |field: &str, v: &str, empty_ok: bool| {
            if (!empty_ok && v.trim().is_empty()) || v.len() > 200 {
                Err(bad(
                    field,
                    format!("must be {} to 200 bytes", if empty_ok { 0 } else { 1 }),
                ))
            } else {
                Ok(())
            }
        };
        name("resolved_site_id", &self.resolved_site_id, false)?;
        name("preset_id", &self.preset_id, true)?;
        name("preset_name", &self.preset_name, true)?;
        if self.couples.is_empty() || self.couples.len() > MAX_CONTEXT_COUPLES {
            return Err(bad(
                "couples",
                format!("must hold 1 to {MAX_CONTEXT_COUPLES} couples"),
            ));
        }
        for (i, c) in self.couples.iter().enumerate() {
            name(&format!("couples[{i}].model"), &c.model, false)?;
            name(&format!("couples[{i}].provider"), &c.provider, false)?;
            name(&format!("couples[{i}].backend"), &c.backend, true)?;
            if c.credential_names.len() > 16 {
                return Err(bad(
                    &format!("couples[{i}].credential_names"),
                    "must hold at most 16 names".into(),
                ));
            }
            for (j, n) in c.credential_names.iter().enumerate() {
                name(&format!("couples[{i}].credential_names[{j}]"), n, false)?;
            }
        }
        if let Some(d) = self.budget.max_dollars
            && !(d.is_finite() && d >= 0.0)
        {
            return Err(bad(
                "budget.max_dollars",
                format!("must be a finite amount of at least 0, got {d}"),
            ));
        }
        Ok(())
    }
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
        if let Some(context) = &self.request.context {
            if self.turn != 1 {
                return Err(bad(
                    "request.context",
                    "is recorded on the episode's first turn only",
                ));
            }
            context.check()?;
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
                context: None,
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

    fn context() -> EpisodeContext {
        EpisodeContext {
            resolved_site_id: "Agent:Planning".into(),
            preset_id: "p-1".into(),
            preset_name: "cheap".into(),
            couples: vec![ContextCouple {
                model: "claude-x".into(),
                provider: "anthropic".into(),
                backend: String::new(),
                credential_names: vec!["ANTHROPIC_API_KEY".into()],
            }],
            budget: ContextBudget {
                max_turns: Some(8),
                max_dollars: Some(0.5),
                ..Default::default()
            },
        }
    }

    #[test]
    fn a_recorded_context_is_checked_and_kept_to_the_first_turn() {
        let mut s = step();
        s.request.context = Some(context());
        assert!(s.check().is_ok());
        // It survives the step's JSON, and a step without one stays
        // without the key.
        let back: LlmTurnStep = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert!(
            serde_json::to_value(step()).unwrap()["request"]
                .get("context")
                .is_none()
        );
        type Breakage = Box<dyn Fn(&mut LlmTurnStep)>;
        let ctx = |f: fn(&mut EpisodeContext)| -> Breakage {
            Box::new(move |s: &mut LlmTurnStep| f(s.request.context.as_mut().unwrap()))
        };
        let cases: Vec<(&str, Breakage)> = vec![
            ("request.context", Box::new(|s| s.turn = 2)),
            (
                "context.resolved_site_id",
                ctx(|c| c.resolved_site_id.clear()),
            ),
            ("context.couples", ctx(|c| c.couples.clear())),
            (
                "context.couples",
                ctx(|c| c.couples = vec![c.couples[0].clone(); MAX_CONTEXT_COUPLES + 1]),
            ),
            (
                "context.couples[0].model",
                ctx(|c| c.couples[0].model = " ".into()),
            ),
            (
                "context.couples[0].provider",
                ctx(|c| c.couples[0].provider = "p".repeat(201)),
            ),
            (
                "context.couples[0].credential_names",
                ctx(|c| c.couples[0].credential_names = vec!["K".into(); 17]),
            ),
            (
                "context.couples[0].credential_names[0]",
                ctx(|c| c.couples[0].credential_names[0].clear()),
            ),
            (
                "context.budget.max_dollars",
                ctx(|c| c.budget.max_dollars = Some(-1.0)),
            ),
            (
                "context.budget.max_dollars",
                ctx(|c| c.budget.max_dollars = Some(f64::NAN)),
            ),
        ];
        for (field, breakage) in cases {
            let mut s = step();
            s.request.context = Some(context());
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
