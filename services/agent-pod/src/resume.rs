//! An episode to resume: the journal an earlier session of the same claimed
//! event left (a pod that died or lost its lease mid-tick, a deferred tick),
//! as the claim handed it over. Owns the reading of that journal — which
//! recorded answer stands for which turn, which recorded result answers
//! which tool call, and the conversation the first session started — and
//! the conversion of a recorded answer back into the model's response.
//!
//! Must never call a provider or the supervisor, and never guess: a turn is
//! replayed only when the journal holds that very turn's answer, and a tool
//! call only when the journal holds a call with the same key; anything else
//! runs for real, as it would have.

use std::collections::{HashMap, VecDeque};

use genesis_core::journal::{
    ContextBudget, EpisodeContext, JournalKind, LlmTurnStep, ToolCallStep,
};
use genesis_llm::{ChatMessage, ChatResponse, StopReason, ToolCall, Usage};
use genesis_proto::v1 as pb;

use crate::model::BundleError;

/// The journal of the claimed event's earlier episode; empty for an event
/// claimed the first time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resume {
    /// The answered turns, in order.
    turns: VecDeque<LlmTurnStep>,
    /// The recorded tool calls, by the pod's call key.
    tools: HashMap<String, ToolCallStep>,
    /// The first turn's invocation, system prompt and opening messages:
    /// the conversation a resumed episode continues.
    first: Option<(String, Option<String>, Vec<ChatMessage>)>,
    /// The chain and budget the episode was claimed with, when its first
    /// step recorded them (a paid chain's).
    context: Option<EpisodeContext>,
    /// Whether the journal's last turn failed on every couple: the episode
    /// was deferred for a provider failure.
    last_turn_failed: bool,
    /// Whether the journal was cut at its cap.
    truncated: bool,
}

impl Resume {
    /// Read the bundle's journal. A step the pod cannot read is a malformed
    /// bundle, like any other bad field: the supervisor checked every step
    /// it stored.
    pub fn from_steps(steps: Vec<pb::JournalStep>) -> Result<Self, BundleError> {
        let mut resume = Resume::default();
        for step in steps {
            let kind = step
                .kind
                .parse::<JournalKind>()
                .map_err(|e| BundleError::new("bundle.journal.kind", e.to_string()))?;
            match kind {
                JournalKind::LlmTurn => {
                    let turn: LlmTurnStep =
                        serde_json::from_str(&step.entry_json).map_err(|e| {
                            BundleError::new("bundle.journal.entry_json", e.to_string())
                        })?;
                    if resume.first.is_none() {
                        let opening = turn
                            .request
                            .messages
                            .iter()
                            .map(|m| serde_json::from_value::<ChatMessage>(m.clone()))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| {
                                BundleError::new("bundle.journal.entry_json", e.to_string())
                            })?;
                        resume.first = Some((
                            turn.invocation_id.clone(),
                            turn.request.system.clone(),
                            opening,
                        ));
                        resume.context = turn.request.context.clone();
                    }
                    // A failed turn ends its session's episode; the resumed
                    // one asks again.
                    resume.last_turn_failed = turn.response.is_none();
                    if turn.response.is_some() {
                        resume.turns.push_back(turn);
                    }
                }
                JournalKind::ToolCall => {
                    let call: ToolCallStep =
                        serde_json::from_str(&step.entry_json).map_err(|e| {
                            BundleError::new("bundle.journal.entry_json", e.to_string())
                        })?;
                    resume.tools.insert(call.call_id.clone(), call);
                }
                JournalKind::Truncated => resume.truncated = true,
            }
        }
        Ok(resume)
    }

    /// Whether there is anything to resume.
    pub fn is_empty(&self) -> bool {
        self.first.is_none() && self.tools.is_empty()
    }

    /// The invocation the first session recorded its turns under: the
    /// resumed episode keeps it, so its tool calls keep their keys.
    pub fn invocation_id(&self) -> Option<&str> {
        self.first.as_ref().map(|(id, _, _)| id.as_str())
    }

    /// The system prompt the episode started with.
    pub fn system(&self) -> Option<&str> {
        self.first.as_ref().and_then(|(_, s, _)| s.as_deref())
    }

    /// The messages the episode opened with (its objective).
    pub fn opening(&self) -> Option<&[ChatMessage]> {
        self.first
            .as_ref()
            .map(|(_, _, m)| m.as_slice())
            .filter(|m| !m.is_empty())
    }

    /// The chain and budget the episode was claimed with, if its first
    /// step recorded them: a resumed episode runs under them, not the new
    /// claim's. Not after a deferral for a provider failure (the journal's
    /// last turn failed on every couple of that chain): the episode then
    /// takes the new claim's chain, so an operator who mends or replaces
    /// the failing preset reaches the deferred event too, instead of it
    /// retrying the broken chain for ever.
    pub fn context(&self) -> Option<&EpisodeContext> {
        self.context.as_ref().filter(|_| !self.last_turn_failed)
    }

    /// Whether the journal was cut at its cap (steps after the cut run
    /// again).
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The recorded answer of turn `turn`, if the journal holds it next.
    /// A journal that does not continue with this turn is not replayed any
    /// further.
    pub fn take_turn(&mut self, turn: u32) -> Option<LlmTurnStep> {
        if self.turns.front().is_some_and(|t| t.turn == turn) {
            self.turns.pop_front()
        } else {
            self.turns.clear();
            None
        }
    }

    /// The recorded result of the call with key `call_id`.
    pub fn tool(&self, call_id: &str) -> Option<&ToolCallStep> {
        self.tools.get(call_id)
    }

    /// The journal read for a replay: the conversation the episode opened
    /// with (its system prompt and opening messages, under `invocation_id`
    /// so the replay's calls are its own), nothing to replay from it, and
    /// apart from it the original episode's tool calls (in call order, for
    /// answering read-only calls) and the budget it was claimed with, when
    /// recorded. `None` when the journal holds no first turn to start from.
    pub fn for_replay(
        self,
        invocation_id: String,
    ) -> Option<(Resume, Vec<ToolCallStep>, Option<ContextBudget>)> {
        let (_, system, opening) = self.first?;
        let mut tools: Vec<ToolCallStep> = self.tools.into_values().collect();
        tools.sort_by(|a, b| a.call_id.cmp(&b.call_id));
        let budget = self.context.map(|c| c.budget);
        let replay = Resume {
            first: Some((invocation_id, system, opening)),
            ..Resume::default()
        };
        Some((replay, tools, budget))
    }
}

/// A recorded answer as the model's response, exactly as the episode first
/// read it.
pub fn recorded_response(step: &LlmTurnStep) -> Option<ChatResponse> {
    let r = step.response.as_ref()?;
    Some(ChatResponse {
        text: r.text.clone(),
        tool_calls: r
            .tool_calls
            .iter()
            .map(|c| ToolCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect(),
        usage: Usage {
            input_tokens: r.usage.input_tokens,
            output_tokens: r.usage.output_tokens,
            cache_read_tokens: r.usage.cache_read_tokens,
            cache_write_tokens: r.usage.cache_write_tokens,
        },
        served_model: r.served_model.clone(),
        stop_reason: serde_json::from_value(r.stop_reason.clone())
            .unwrap_or_else(|_| StopReason::Other(r.stop_reason.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use genesis_core::journal::{
        JournalToolCall, TurnAttempt, TurnRequest, TurnResponse, TurnUsage,
    };
    use serde_json::json;

    fn turn(n: u32, answered: bool) -> LlmTurnStep {
        LlmTurnStep {
            turn: n,
            invocation_id: "inv-1".into(),
            request: TurnRequest {
                model: "m".into(),
                system: (n == 1).then(|| "sys".into()),
                system_sha256: None,
                messages: vec![json!({"role": "user", "content": format!("msg {n}")})],
                tools: vec!["soa_send_message".into()],
                max_output_tokens: 10,
                context: None,
            },
            response: answered.then(|| TurnResponse {
                text: Some(format!("answer {n}")),
                tool_calls: vec![JournalToolCall {
                    id: format!("c{n}"),
                    name: "soa_send_message".into(),
                    arguments: json!({"message": "hi"}),
                }],
                served_model: "m-1".into(),
                stop_reason: json!("tool_use"),
                usage: TurnUsage {
                    input_tokens: 7,
                    output_tokens: 3,
                    cache_read_tokens: 1,
                    cache_write_tokens: 0,
                },
            }),
            error: (!answered).then(|| "down".into()),
            attempts: vec![TurnAttempt {
                provider: "anthropic".into(),
                credential_name: "K".into(),
                requested_model: "m".into(),
                served_model: String::new(),
                outcome: "success".into(),
                latency_ms: 1,
                usage: TurnUsage::default(),
                error: None,
            }],
            snapshot_cost_usd: Some(0.5),
            snapshot_id: None,
        }
    }

    fn step(seq: i32, kind: &str, entry: &impl serde::Serialize) -> pb::JournalStep {
        pb::JournalStep {
            seq,
            kind: kind.into(),
            entry_json: serde_json::to_string(entry).unwrap(),
        }
    }

    #[test]
    fn recorded_turns_replay_in_order_and_a_failed_one_is_asked_again() {
        let tool = ToolCallStep {
            call_id: "inv-1:1:c1".into(),
            tool_name: "soa_send_message".into(),
            arguments: json!({"message": "hi"}),
            result: json!({"sent": true}),
            side_effecting: true,
            blocked: false,
        };
        let mut r = Resume::from_steps(vec![
            step(0, "llm_turn", &turn(1, true)),
            step(1, "tool_call", &tool),
            step(2, "llm_turn", &turn(2, false)),
        ])
        .unwrap();
        assert!(!r.is_empty());
        assert_eq!(r.invocation_id(), Some("inv-1"));
        assert_eq!(r.system(), Some("sys"));
        assert_eq!(r.opening().unwrap(), [ChatMessage::user("msg 1")]);
        assert_eq!(r.tool("inv-1:1:c1"), Some(&tool));
        assert_eq!(r.tool("inv-1:2:c1"), None);
        let first = r.take_turn(1).expect("turn 1 is recorded");
        let response = recorded_response(&first).unwrap();
        assert_eq!(response.text.as_deref(), Some("answer 1"));
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.usage.cache_read_tokens, 1);
        assert_eq!(response.tool_calls[0].id, "c1");
        // Turn 2 failed: it is asked again.
        assert_eq!(r.take_turn(2), None);
    }

    #[test]
    fn a_journal_that_skips_a_turn_is_not_replayed_past_the_gap() {
        let mut r = Resume::from_steps(vec![
            step(0, "llm_turn", &turn(1, true)),
            step(1, "llm_turn", &turn(3, true)),
        ])
        .unwrap();
        assert!(r.take_turn(1).is_some());
        assert_eq!(r.take_turn(2), None);
        assert_eq!(r.take_turn(3), None, "nothing is replayed after a gap");
    }

    #[test]
    fn an_empty_journal_resumes_nothing_and_a_bad_step_is_a_bad_bundle() {
        let r = Resume::from_steps(Vec::new()).unwrap();
        assert!(r.is_empty());
        assert_eq!(r.invocation_id(), None);
        let marker =
            Resume::from_steps(vec![step(0, "truncated", &json!({"max_bytes": 1}))]).unwrap();
        assert!(marker.truncated());
        for (kind, entry) in [
            ("thought", "{}".to_string()),
            ("llm_turn", "{\"turn\": 1}".to_string()),
            ("tool_call", "[]".to_string()),
        ] {
            let err = Resume::from_steps(vec![pb::JournalStep {
                seq: 0,
                kind: kind.into(),
                entry_json: entry,
            }])
            .expect_err(kind);
            assert!(err.field.starts_with("bundle.journal."), "{err:?}");
        }
    }

    #[test]
    fn the_recorded_context_is_kept_unless_the_last_turn_failed() {
        use genesis_core::journal::{ContextBudget, ContextCouple, EpisodeContext};
        let context = EpisodeContext {
            resolved_site_id: "Agent:Planning".into(),
            preset_id: String::new(),
            preset_name: String::new(),
            couples: vec![ContextCouple {
                model: "m".into(),
                provider: "anthropic".into(),
                backend: String::new(),
                credential_names: vec![],
            }],
            budget: ContextBudget::default(),
        };
        let mut first = turn(1, true);
        first.request.context = Some(context.clone());
        let step = |t: &LlmTurnStep| pb::JournalStep {
            seq: i32::try_from(t.turn).unwrap() - 1,
            kind: "llm_turn".into(),
            entry_json: serde_json::to_string(t).unwrap(),
        };
        // A crash after an answered turn: kept.
        let r = Resume::from_steps(vec![step(&first)]).unwrap();
        assert_eq!(r.context(), Some(&context));
        // A deferral after the chain failed: the new claim's chain.
        let r = Resume::from_steps(vec![step(&first), step(&turn(2, false))]).unwrap();
        assert_eq!(r.context(), None);
        let mut failed_first = turn(1, false);
        failed_first.request.context = Some(context);
        let r = Resume::from_steps(vec![step(&failed_first)]).unwrap();
        assert_eq!(r.context(), None);
    }
}
