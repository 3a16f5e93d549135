//! `GetAgentTrace`: its request as a checked domain value ([`TraceQuery`])
//! and its answer assembled from the store's [`TurnTrace`] — the journal's
//! steps read as genesis-core's step shapes, the conversation they add up
//! to, and each attempt paired with the priced attempt the call snapshot
//! recorded for it. Pure: must never read the database, and never show a
//! cost it could not pair as zero (it is left unset: unknown).

use genesis_core::journal::{JournalKind, LlmTurnStep, ToolCallStep, TurnAttempt, TurnUsage};
use genesis_proto::convert::{invalid_argument, timestamp_from_chrono};
use genesis_proto::v1;
use genesis_store::journal::JournalEntry;
use genesis_store::llm::CallAttemptRow;
use genesis_store::trace::TurnTrace;
use serde_json::Value;
use tonic::Status;
use uuid::Uuid;

use crate::status::uuid;

/// A checked `GetAgentTraceRequest` (its tenant is authorized separately,
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceQuery {
    pub instance_id: Uuid,
    pub turn_number: i64,
}

impl TryFrom<&v1::GetAgentTraceRequest> for TraceQuery {
    type Error = Status;

    fn try_from(req: &v1::GetAgentTraceRequest) -> Result<Self, Status> {
        Ok(Self {
            instance_id: uuid("instance_id", &req.instance_id)?,
            turn_number: turn_number(req.turn_number)?,
        })
    }
}

/// A ledger turn's number as a request names it: 1-based.
pub fn turn_number(n: i64) -> Result<i64, Status> {
    if n < 1 {
        return Err(invalid_argument(
            "turn_number",
            format!("must be at least 1, got {n}"),
        ));
    }
    Ok(n)
}

/// The trace as the wire carries it.
pub fn agent_trace(t: &TurnTrace) -> v1::AgentTrace {
    let payload = &t.turn.decision_payload;
    let text = |key: &str| {
        payload
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let costs = paired_costs(&t.journal, &t.attempts);
    let mut costs = costs.into_iter();
    let mut steps = Vec::new();
    let mut conversation = Vec::new();
    let mut system_prompt = String::new();
    let mut truncated = None;
    for entry in &t.journal {
        let step = match entry.kind {
            JournalKind::LlmTurn => match read_turn(&entry.entry) {
                Some(turn) => {
                    if system_prompt.is_empty()
                        && let Some(system) = &turn.request.system
                    {
                        system_prompt.clone_from(system);
                    }
                    let wire = llm_turn(&turn, &mut costs);
                    conversation.extend(wire.messages.iter().cloned());
                    if let Some(answer) = answer_message(&wire) {
                        conversation.push(answer);
                    }
                    v1::trace_step::Step::LlmTurn(wire)
                }
                None => unreadable(entry),
            },
            JournalKind::ToolCall => {
                match serde_json::from_value::<ToolCallStep>(entry.entry.clone()) {
                    Ok(call) => v1::trace_step::Step::ToolCall(v1::TraceToolCall {
                        call_id: call.call_id,
                        tool_name: call.tool_name,
                        arguments_json: call.arguments.to_string(),
                        result_json: call.result.to_string(),
                        side_effecting: call.side_effecting,
                        blocked: call.blocked,
                    }),
                    Err(_) => unreadable(entry),
                }
            }
            JournalKind::Truncated => {
                let int = |key: &str| entry.entry.get(key).and_then(Value::as_i64).unwrap_or(0);
                truncated = Some(v1::TraceTruncation {
                    dropped_kind: entry
                        .entry
                        .get("dropped_kind")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    dropped_bytes: int("dropped_bytes"),
                    journal_bytes: int("journal_bytes"),
                    max_bytes: int("max_bytes"),
                });
                continue;
            }
        };
        steps.push(v1::TraceStep {
            seq: entry.seq,
            created_at: Some(timestamp_from_chrono(entry.created_at)),
            step: Some(step),
        });
    }
    let consumption = payload.get("consumption").map(|c| {
        let n = |key: &str| c.get(key).and_then(Value::as_i64).unwrap_or(0);
        v1::Consumption {
            tokens: n("tokens"),
            tool_calls: i32::try_from(n("toolCalls")).unwrap_or(i32::MAX),
            turns: i32::try_from(n("turns")).unwrap_or(i32::MAX),
            wall_ms: n("wallMs"),
        }
    });
    v1::AgentTrace {
        turn: Some(crate::convert::ledger_turn(&t.turn, &t.actions)),
        completion: text("completion"),
        budget_axis: text("budgetAxis"),
        end_reason: text("endReason"),
        consumption,
        system_prompt,
        conversation,
        steps,
        truncated,
        journal_pruned: t.journal.is_empty(),
        snapshot_id: t.snapshot_id.map(|s| s.to_string()).unwrap_or_default(),
    }
}

/// A stored entry read as an LLM turn (a step its writer checked; one that
/// does not read is shown as stored, never dropped).
fn read_turn(entry: &Value) -> Option<LlmTurnStep> {
    serde_json::from_value(entry.clone()).ok()
}

fn unreadable(entry: &JournalEntry) -> v1::trace_step::Step {
    v1::trace_step::Step::UnreadableJson(entry.entry.to_string())
}

/// The cost of each journaled attempt, in journal order: the journal's
/// attempts are the snapshot's in ordinal order, so the n-th pairs with
/// ordinal n — when every pair agrees on provider, requested model and
/// outcome, and the journal holds them all (or was cut at its cap, which
/// drops only the tail). Anything else (a resumed episode whose snapshot
/// holds an attempt the journal does not, a turn that does not read) leaves
/// every cost unknown rather than billing one attempt with another's.
fn paired_costs(journal: &[JournalEntry], priced: &[CallAttemptRow]) -> Vec<Option<f64>> {
    let turns: Vec<Option<LlmTurnStep>> = journal
        .iter()
        .filter(|e| e.kind == JournalKind::LlmTurn)
        .map(|e| read_turn(&e.entry))
        .collect();
    // A turn that does not read hides its attempts: nothing after it pairs.
    let readable = turns.iter().all(Option::is_some);
    let attempts: Vec<TurnAttempt> = turns
        .into_iter()
        .flatten()
        .flat_map(|t| t.attempts)
        .collect();
    let cut = journal.iter().any(|e| e.kind == JournalKind::Truncated);
    let complete =
        readable && (attempts.len() == priced.len() || (cut && attempts.len() < priced.len()));
    let agree = attempts.iter().zip(priced).all(|(a, p)| {
        a.provider == p.provider && a.requested_model == p.requested_model && a.outcome == p.outcome
    });
    if complete && agree {
        priced
            .iter()
            .take(attempts.len())
            .map(|p| Some(p.cost_usd))
            .collect()
    } else {
        vec![None; attempts.len()]
    }
}

fn usage(u: &TurnUsage) -> v1::TraceUsage {
    v1::TraceUsage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_write_tokens: u.cache_write_tokens,
    }
}

fn llm_turn(t: &LlmTurnStep, costs: &mut impl Iterator<Item = Option<f64>>) -> v1::TraceLlmTurn {
    let response = t.response.as_ref();
    v1::TraceLlmTurn {
        turn: t.turn,
        invocation_id: t.invocation_id.clone(),
        model: t.request.model.clone(),
        messages: t
            .request
            .messages
            .iter()
            .map(|m| message(m, t.turn))
            .collect(),
        tools: t.request.tools.clone(),
        max_output_tokens: t.request.max_output_tokens,
        text: response.and_then(|r| r.text.clone()).unwrap_or_default(),
        tool_calls: response
            .map(|r| {
                r.tool_calls
                    .iter()
                    .map(|c| v1::TraceModelToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments_json: c.arguments.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        served_model: response.map(|r| r.served_model.clone()).unwrap_or_default(),
        stop_reason: response.map(|r| plain(&r.stop_reason)).unwrap_or_default(),
        usage: response.map(|r| usage(&r.usage)),
        error: t.error.clone().unwrap_or_default(),
        attempts: t
            .attempts
            .iter()
            .map(|a| v1::TraceAttempt {
                provider: a.provider.clone(),
                credential_name: a.credential_name.clone(),
                requested_model: a.requested_model.clone(),
                served_model: a.served_model.clone(),
                outcome: a.outcome.clone(),
                latency_ms: a.latency_ms,
                usage: Some(usage(&a.usage)),
                error: a.error.clone().unwrap_or_default(),
                cost_usd: costs.next().flatten(),
            })
            .collect(),
        snapshot_cost_usd: t.snapshot_cost_usd,
    }
}

/// The turn's answer as the assistant message the next turn followed.
fn answer_message(t: &v1::TraceLlmTurn) -> Option<v1::TraceMessage> {
    (!t.text.is_empty() || !t.tool_calls.is_empty()).then(|| v1::TraceMessage {
        role: "assistant".into(),
        content: t.text.clone(),
        tool_call_id: String::new(),
        tool_calls: t.tool_calls.clone(),
        turn: t.turn,
    })
}

/// A JSON chat message (`role`, `content`, a tool message's
/// `tool_call_id`, an assistant message's `tool_calls`) on the wire.
fn message(m: &Value, turn: u32) -> v1::TraceMessage {
    let text = |key: &str| m.get(key).map(plain).unwrap_or_default();
    let tool_calls = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|c| v1::TraceModelToolCall {
                    id: c.get("id").map(plain).unwrap_or_default(),
                    name: c.get("name").map(plain).unwrap_or_default(),
                    arguments_json: c.get("arguments").map(Value::to_string).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    v1::TraceMessage {
        role: text("role"),
        content: text("content"),
        tool_call_id: text("tool_call_id"),
        tool_calls,
        turn,
    }
}

/// Text as itself, `null` as nothing, anything else as its JSON.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn priced(ordinal: i32, provider: &str, outcome: &str, cost: f64) -> CallAttemptRow {
        CallAttemptRow {
            id: Uuid::nil(),
            tenant_id: Uuid::nil(),
            snapshot_id: Uuid::nil(),
            ordinal,
            provider: provider.into(),
            credential_name: String::new(),
            requested_model: "m".into(),
            served_model: "m".into(),
            outcome: outcome.into(),
            usage: json!({}),
            latency_ms: 1,
            cost_usd: cost,
            error_message: String::new(),
            priced_as: None,
            pricing_source: None,
        }
    }

    fn entry(seq: i32, kind: JournalKind, entry: Value) -> JournalEntry {
        JournalEntry {
            tenant_id: Uuid::nil(),
            event_id: Uuid::nil(),
            seq,
            instance_id: Uuid::nil(),
            session: Uuid::nil(),
            kind,
            entry,
            bytes: 0,
            created_at: chrono::Utc::now(),
        }
    }

    fn turn(n: u32, outcomes: &[(&str, &str)]) -> Value {
        json!({
            "turn": n, "invocation_id": "i",
            "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [], "max_output_tokens": 8},
            "response": {"text": "ok", "tool_calls": [], "served_model": "m", "stop_reason": "end_turn",
                         "usage": {"input_tokens": 1, "output_tokens": 1}},
            "attempts": outcomes.iter().map(|(p, o)| json!({
                "provider": p, "credential_name": "k", "requested_model": "m", "served_model": "m",
                "outcome": o, "latency_ms": 1, "usage": {"input_tokens": 1, "output_tokens": 1}})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn the_turn_number_and_instance_are_checked_at_the_edge() {
        let ok = v1::GetAgentTraceRequest {
            tenant_id: String::new(),
            instance_id: Uuid::nil().to_string(),
            turn_number: 1,
        };
        assert!(TraceQuery::try_from(&ok).is_ok());
        for bad in [
            v1::GetAgentTraceRequest {
                turn_number: 0,
                ..ok.clone()
            },
            v1::GetAgentTraceRequest {
                instance_id: "nope".into(),
                ..ok.clone()
            },
        ] {
            let e = TraceQuery::try_from(&bad).expect_err("refused");
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
        }
    }

    #[test]
    fn attempts_pair_with_the_snapshots_in_order_or_stay_unknown() {
        let journal = vec![
            entry(0, JournalKind::LlmTurn, turn(1, &[("a", "success")])),
            entry(
                1,
                JournalKind::LlmTurn,
                turn(2, &[("a", "server_error"), ("b", "success")]),
            ),
        ];
        let snapshot = vec![
            priced(0, "a", "success", 0.1),
            priced(1, "a", "server_error", 0.0),
            priced(2, "b", "success", 0.2),
        ];
        assert_eq!(
            paired_costs(&journal, &snapshot),
            [Some(0.1), Some(0.0), Some(0.2)]
        );
        // One attempt more in the snapshot than journaled: no pairing.
        let mut more = snapshot.clone();
        more.insert(0, priced(0, "a", "success", 9.0));
        assert_eq!(paired_costs(&journal, &more), [None, None, None]);
        // A disagreeing pair: none either.
        let mut other = snapshot.clone();
        other[2].provider = "c".into();
        assert_eq!(paired_costs(&journal, &other), [None, None, None]);
        // A turn between them that does not read: none either.
        let mut broken = journal.clone();
        broken.insert(1, entry(1, JournalKind::LlmTurn, json!({"turn": "?"})));
        assert_eq!(paired_costs(&broken, &snapshot), [None, None, None]);
        // No snapshot: unknown, never zero.
        assert_eq!(paired_costs(&journal, &[]), [None, None, None]);
        // A journal cut at its cap pairs its prefix.
        let mut cut = journal[..1].to_vec();
        cut.push(entry(
            1,
            JournalKind::Truncated,
            json!({"dropped_kind": "llm_turn"}),
        ));
        assert_eq!(paired_costs(&cut, &snapshot), [Some(0.1)]);
    }

    #[test]
    fn the_conversation_is_each_turns_messages_then_its_answer() {
        let t = TurnTrace {
            turn: serde_json::from_value(json!({
                "id": Uuid::nil(), "tenant_id": Uuid::nil(), "instance_id": Uuid::nil(),
                "turn_number": 1, "event_id": null, "event_kind": "OperatorMessage",
                "event_payload": {}, "decision_kind": "Planned", "phase": "idle",
                "decision_payload": {"completion": "completed", "consumption": {"tokens": 5, "toolCalls": 1, "turns": 2, "wallMs": 9}},
                "wait_condition": null, "reasoning_summary": null, "plan_input_hash": null,
                "llm_call_snapshot_id": null, "served_model": null, "cost_usd": null,
                "input_tokens": null, "output_tokens": null, "created_at": chrono::Utc::now(),
            }))
            .expect("a ledger row"),
            actions: vec![],
            journal: vec![
                entry(0, JournalKind::LlmTurn, turn(1, &[("a", "success")])),
                entry(1, JournalKind::ToolCall, json!({"unexpected": true})),
                entry(2, JournalKind::LlmTurn, turn(2, &[("a", "success")])),
            ],
            snapshot_id: None,
            attempts: vec![],
        };
        let w = agent_trace(&t);
        assert_eq!(w.completion, "completed");
        assert_eq!(w.consumption.map(|c| c.turns), Some(2));
        let roles: Vec<(&str, u32)> = w
            .conversation
            .iter()
            .map(|m| (m.role.as_str(), m.turn))
            .collect();
        assert_eq!(
            roles,
            [("user", 1), ("assistant", 1), ("user", 2), ("assistant", 2)]
        );
        assert_eq!(w.steps.len(), 3);
        assert!(matches!(
            w.steps[1].step,
            Some(v1::trace_step::Step::UnreadableJson(_))
        ));
        assert!(!w.journal_pruned);
    }
}
