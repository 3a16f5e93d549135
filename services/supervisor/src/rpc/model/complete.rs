//! CompleteTick's request as a domain value: the ids, the completion and
//! its budget axis, the plan hash, the carried call attempts (checked as
//! RecordCallAttempt checks them), the consumption and the actions as JSON.
//! What the pod reported of the turn is kept as reported: the decision kind
//! and phase are derived from it by genesis-core's mapper, never taken from
//! the pod.

use genesis_core::PlanInputHash;
use genesis_core::mapper::Completion;
use genesis_proto::convert::{invalid_argument as inv, parse_optional_uuid, parse_uuid, require};
use genesis_proto::v1 as pb;
use genesis_store::llm::NewCallAttempt;
use genesis_store::tick::LedgerAction;
use serde_json::{Value, json};
use tonic::Status;
use uuid::Uuid;

use super::SessionIds;
use super::outcome::completion;
use super::record::{ReportedStep, reported_attempt, reported_step};

/// A CompleteTick request.
#[derive(Debug, Clone, PartialEq)]
pub struct CompleteTick {
    pub ids: SessionIds,
    /// The event the session claimed.
    pub event_id: Uuid,
    /// A call snapshot named rather than carried (never with attempts).
    pub snapshot_id: Option<Uuid>,
    /// The carried attempts, checked and not yet priced, each with the
    /// journal step of the turn it ends (checked and cleared of
    /// credentials), if any.
    pub pending: Vec<(NewCallAttempt, Option<ReportedStep>)>,
    pub turn: ReportedTurn,
}

/// What the pod reported of the turn, the input of the decision mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedTurn {
    pub completion: Completion,
    pub raised_escalation: bool,
    pub side_effecting_actions: u32,
    /// The axis as the pod named it (recorded on the turn; empty: none).
    pub budget_axis: Option<String>,
    /// The blocked reason or the failure, as reported (empty: none).
    pub reason: String,
    pub plan_input_hash: Option<PlanInputHash>,
    pub actions: Vec<LedgerAction>,
    pub reasoning_summary: String,
    pub wait_condition: String,
    pub consumption: Option<ReportedConsumption>,
}

/// What the episode spent, as the pod counted it (recorded, never billed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportedConsumption {
    pub tokens: u64,
    pub tool_calls: u32,
    pub turns: u32,
    pub wall_ms: u64,
}

impl TryFrom<pb::CompleteTickRequest> for CompleteTick {
    type Error = Status;

    /// Checks field by field, in the order the pod is told about the first
    /// bad one.
    fn try_from(req: pb::CompleteTickRequest) -> Result<Self, Status> {
        let ids = SessionIds::parse(&req.session_id, &req.instance_id, &req.tenant_id)?;
        let event_id = parse_uuid("event_id", &req.event_id)?;
        let outcome = require("outcome", req.outcome.as_ref())?;
        let completion = completion(outcome)?;
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
                let attempt = reported_attempt(
                    &format!("call_attempts[{i}]."),
                    ids,
                    p.invocation_id.clone(),
                    p.attempt.as_ref(),
                    p.prompt_overlay_sha256.clone(),
                )?;
                let step = reported_step(
                    &format!("call_attempts[{i}].journal_step_json"),
                    &p.journal_step_json,
                )?;
                Ok((attempt, step))
            })
            .collect::<Result<Vec<_>, Status>>()?;
        let consumption = req.consumption.as_ref().map(consumption).transpose()?;
        let actions = req
            .actions
            .iter()
            .enumerate()
            .map(|(i, a)| action(i, a))
            .collect::<Result<Vec<_>, Status>>()?;
        let raised_escalation = outcome.raised_escalation;
        let budget_axis = outcome.budget_axis.clone();
        let reason = outcome.reason.clone();
        Ok(Self {
            ids,
            event_id,
            snapshot_id,
            pending,
            turn: ReportedTurn {
                completion,
                raised_escalation,
                side_effecting_actions,
                budget_axis,
                reason,
                plan_input_hash,
                actions,
                reasoning_summary: req.reasoning_summary,
                wait_condition: req.wait_condition,
                consumption,
            },
        })
    }
}

fn consumption(c: &pb::Consumption) -> Result<ReportedConsumption, Status> {
    let refused = || inv("consumption", "counts must be non-negative");
    Ok(ReportedConsumption {
        tokens: u64::try_from(c.tokens).map_err(|_| refused())?,
        tool_calls: u32::try_from(c.tool_calls).map_err(|_| refused())?,
        turns: u32::try_from(c.turns).map_err(|_| refused())?,
        wall_ms: u64::try_from(c.wall_ms).map_err(|_| refused())?,
    })
}

/// Action `i` with its arguments and result as JSON (blank: `{}`).
fn action(i: usize, a: &pb::ActionRecord) -> Result<LedgerAction, Status> {
    let parse = |field: &str, text: &str| -> Result<Value, Status> {
        if text.trim().is_empty() {
            return Ok(json!({}));
        }
        serde_json::from_str(text)
            .map_err(|e| inv(&format!("actions[{i}].{field}"), format!("not JSON: {e}")))
    };
    Ok(LedgerAction {
        tool_name: a.tool_name.clone(),
        arguments: parse("arguments_json", &a.arguments_json)?,
        result: Some(parse("result_json", &a.result_json)?),
        side_effecting: a.side_effecting,
        blocked: a.blocked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> pb::CompleteTickRequest {
        pb::CompleteTickRequest {
            session_id: Uuid::new_v4().to_string(),
            instance_id: Uuid::new_v4().to_string(),
            tenant_id: Uuid::new_v4().to_string(),
            event_id: Uuid::new_v4().to_string(),
            outcome: Some(pb::TickOutcome {
                completion: pb::TickCompletion::Complete as i32,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn refused(req: pb::CompleteTickRequest) -> String {
        CompleteTick::try_from(req)
            .expect_err("refused")
            .message()
            .to_owned()
    }

    #[test]
    fn a_clean_completion_is_parsed_into_domain_values() {
        let mut req = request();
        req.plan_input_hash = "AB".repeat(32);
        req.consumption = Some(pb::Consumption {
            tokens: 10,
            tool_calls: 1,
            turns: 2,
            wall_ms: 30,
        });
        let done = CompleteTick::try_from(req).unwrap();
        assert_eq!(done.turn.completion, Completion::Complete);
        assert_eq!(
            done.turn
                .plan_input_hash
                .as_ref()
                .map(PlanInputHash::as_str),
            Some("ab".repeat(32).as_str())
        );
        assert_eq!(done.turn.consumption.map(|c| c.turns), Some(2));
    }

    #[test]
    fn each_bad_field_is_named() {
        let mut r = request();
        r.outcome = None;
        assert!(refused(r).starts_with("outcome: "));
        let mut r = request();
        r.outcome = Some(pb::TickOutcome {
            completion: pb::TickCompletion::BudgetExhausted as i32,
            budget_axis: Some("naps".into()),
            ..Default::default()
        });
        assert!(refused(r).starts_with("outcome.budget_axis: "));
        let mut r = request();
        r.outcome = Some(pb::TickOutcome::default());
        assert!(refused(r).starts_with("outcome.completion: "));
        let mut r = request();
        r.plan_input_hash = "xyz".into();
        assert!(refused(r).starts_with("plan_input_hash: "));
        let mut r = request();
        r.consumption = Some(pb::Consumption {
            turns: -1,
            ..Default::default()
        });
        assert!(refused(r).starts_with("consumption: "));
        let mut r = request();
        r.actions = vec![pb::ActionRecord {
            arguments_json: "{".into(),
            ..Default::default()
        }];
        assert!(refused(r).starts_with("actions[0].arguments_json: "));
    }
}
