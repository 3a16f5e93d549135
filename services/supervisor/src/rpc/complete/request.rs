//! CompleteTick's request checked into domain values before anything is
//! read or written: the ids, the completion and its budget axis, the plan
//! hash, the carried call attempts (checked as RecordCallAttempt checks
//! them) and the actions as JSON. Owns the request's field-by-field
//! INVALID_ARGUMENT answers. Must never read or write: a request refused
//! here leaves the tick, its lease and its memo as they were.

use genesis_core::mapper::Completion;
use genesis_core::{BudgetAxis, PlanInputHash};
use genesis_proto::convert::{parse_optional_uuid, parse_uuid, require};
use genesis_proto::v1 as pb;
use genesis_store::llm::NewCallAttempt;
use genesis_store::tick::LedgerAction;
use serde_json::{Value, json};
use tonic::Status;
use uuid::Uuid;

use crate::rpc::record::reported_attempt;

/// A CompleteTick request, checked.
pub(super) struct CheckedCompletion<'a> {
    pub session: Uuid,
    pub instance_id: Uuid,
    pub tenant_id: Uuid,
    pub event_id: Uuid,
    /// A call snapshot named rather than carried (never with attempts).
    pub snapshot_id: Option<Uuid>,
    /// The carried attempts, checked and not yet priced.
    pub pending: Vec<NewCallAttempt>,
    pub turn: ReportedTurn<'a>,
}

/// What the pod reported of the turn, the input of the decision mapping.
pub(super) struct ReportedTurn<'a> {
    pub req: &'a pb::CompleteTickRequest,
    pub outcome: &'a pb::TickOutcome,
    pub completion: Completion,
    pub side_effecting_actions: u32,
    pub plan_input_hash: Option<PlanInputHash>,
    pub actions: Vec<LedgerAction>,
}

impl<'a> CheckedCompletion<'a> {
    /// Check `req` field by field, in the order the pod is told about the
    /// first bad one.
    pub(super) fn parse(req: &'a pb::CompleteTickRequest) -> Result<Self, Status> {
        use genesis_proto::convert::invalid_argument as inv;
        let session = parse_uuid("session_id", &req.session_id)?;
        let instance_id = parse_uuid("instance_id", &req.instance_id)?;
        let tenant_id = parse_uuid("tenant_id", &req.tenant_id)?;
        let event_id = parse_uuid("event_id", &req.event_id)?;
        let outcome = require("outcome", req.outcome.as_ref())?;
        let completion = match pb::TickCompletion::try_from(outcome.completion) {
            Ok(pb::TickCompletion::Complete) => Completion::Complete,
            Ok(pb::TickCompletion::Blocked) => Completion::Blocked,
            Ok(pb::TickCompletion::ShortCircuited) => Completion::ShortCircuited,
            Ok(pb::TickCompletion::CreditExhausted) => Completion::CreditExhausted,
            Ok(pb::TickCompletion::BudgetExhausted) => {
                let axis = outcome.budget_axis.as_deref().unwrap_or_default();
                Completion::BudgetExhausted {
                    axis: parse_axis(axis).ok_or_else(|| {
                        inv(
                            "outcome.budget_axis",
                            format!("unknown budget axis {axis:?}"),
                        )
                    })?,
                }
            }
            Ok(pb::TickCompletion::Failed) => Completion::Failed {
                reason: outcome.reason.clone(),
            },
            Ok(pb::TickCompletion::ProviderFailed) => Completion::ProviderFailed {
                reason: outcome.reason.clone(),
            },
            Ok(pb::TickCompletion::Unspecified) | Err(_) => {
                return Err(inv(
                    "outcome.completion",
                    "must be set to a known completion",
                ));
            }
        };
        let side_effecting_actions = u32::try_from(outcome.side_effecting_actions)
            .map_err(|_| inv("outcome.side_effecting_actions", "must be non-negative"))?;
        let plan_input_hash = match req.plan_input_hash.as_str() {
            "" => None,
            h => Some(
                h.to_ascii_lowercase()
                    .parse::<PlanInputHash>()
                    .map_err(|e| {
                        inv(
                            "plan_input_hash",
                            format!("must be 64 hex digits (SHA-256): {e}"),
                        )
                    })?,
            ),
        };
        let snapshot_id = parse_optional_uuid("snapshot_id", req.snapshot_id.as_deref())?;
        if snapshot_id.is_some() && !req.call_attempts.is_empty() {
            return Err(inv(
                "snapshot_id",
                "must be unset when call_attempts are sent (the turn links their snapshot)",
            ));
        }
        let pending = req
            .call_attempts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                reported_attempt(
                    &format!("call_attempts[{i}]."),
                    (instance_id, session),
                    &p.invocation_id,
                    p.attempt.as_ref(),
                    &p.prompt_overlay_sha256,
                )
            })
            .collect::<Result<Vec<_>, Status>>()?;
        if let Some(c) = &req.consumption
            && (c.tokens < 0 || c.tool_calls < 0 || c.turns < 0 || c.wall_ms < 0)
        {
            return Err(inv("consumption", "counts must be non-negative"));
        }
        let mut actions = Vec::with_capacity(req.actions.len());
        for (i, a) in req.actions.iter().enumerate() {
            let parse = |field: &str, text: &str| -> Result<Value, Status> {
                if text.trim().is_empty() {
                    return Ok(json!({}));
                }
                serde_json::from_str(text)
                    .map_err(|e| inv(&format!("actions[{i}].{field}"), format!("not JSON: {e}")))
            };
            actions.push(LedgerAction {
                tool_name: a.tool_name.clone(),
                arguments: parse("arguments_json", &a.arguments_json)?,
                result: Some(parse("result_json", &a.result_json)?),
                side_effecting: a.side_effecting,
                blocked: a.blocked,
            });
        }
        Ok(Self {
            session,
            instance_id,
            tenant_id,
            event_id,
            snapshot_id,
            pending,
            turn: ReportedTurn {
                req,
                outcome,
                completion,
                side_effecting_actions,
                plan_input_hash,
                actions,
            },
        })
    }
}

fn parse_axis(text: &str) -> Option<BudgetAxis> {
    match text {
        "tokens" | "maxTokens" => Some(BudgetAxis::Tokens),
        "tool_calls" | "maxToolCalls" => Some(BudgetAxis::ToolCalls),
        "wall_ms" | "wall_seconds" | "maxWallSeconds" => Some(BudgetAxis::WallSeconds),
        "cost_usd" | "dollars" | "maxDollars" => Some(BudgetAxis::Dollars),
        "turns" | "maxTurns" => Some(BudgetAxis::Turns),
        "output_tokens_per_turn" | "maxOutputTokensPerTurn" => {
            Some(BudgetAxis::OutputTokensPerTurn)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_axes_accept_wire_and_json_spellings() {
        assert_eq!(parse_axis("tokens"), Some(BudgetAxis::Tokens));
        assert_eq!(parse_axis("maxTurns"), Some(BudgetAxis::Turns));
        assert_eq!(parse_axis("wall_ms"), Some(BudgetAxis::WallSeconds));
        assert_eq!(parse_axis("bogus"), None);
    }
}
