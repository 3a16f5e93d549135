//! The replay RPCs' requests as domain values (genesis_core::replay):
//! ClaimReplay's ids, ReserveReplayCredit's chain and token counts,
//! RecordReplayAttempt's reported attempt (checked by the same rule as a
//! tick's) and CompleteReplay's outcome or error, checked whole before
//! anything is written.

use genesis_core::replay::ReplayOutcome;
use genesis_proto::convert::{invalid_argument as inv, parse_uuid};
use genesis_proto::v1 as pb;
use genesis_store::llm::NewCallAttempt;
use tonic::Status;
use uuid::Uuid;

use super::SessionIds;
use super::record::{reported_attempt, worst_case_ask};

/// The ids every call of a claimed replay names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayIds {
    pub tenant_id: Uuid,
    pub replay_id: Uuid,
    pub session: Uuid,
}

impl ReplayIds {
    fn parse(replay_id: &str, tenant_id: &str, session_id: &str) -> Result<Self, Status> {
        Ok(Self {
            replay_id: parse_uuid("replay_id", replay_id)?,
            tenant_id: parse_uuid("tenant_id", tenant_id)?,
            session: parse_uuid("session_id", session_id)?,
        })
    }

    /// `(tenant, replay, session)`, the order the store takes them in.
    pub fn triple(&self) -> (Uuid, Uuid, Uuid) {
        (self.tenant_id, self.replay_id, self.session)
    }
}

/// A ClaimReplay request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimReplay {
    pub tenant_id: Uuid,
    pub replay_id: Uuid,
}

impl TryFrom<pb::ClaimReplayRequest> for ClaimReplay {
    type Error = Status;

    fn try_from(req: pb::ClaimReplayRequest) -> Result<Self, Status> {
        Ok(Self {
            replay_id: parse_uuid("replay_id", &req.replay_id)?,
            tenant_id: parse_uuid("tenant_id", &req.tenant_id)?,
        })
    }
}

/// A ReserveReplayCredit request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveReplayCredit {
    pub ids: ReplayIds,
    /// The chain's models, 1 to 64 of them, each 1 to 200 bytes.
    pub models: Vec<String>,
    pub prompt_tokens: u64,
    pub max_output_tokens: u64,
}

impl TryFrom<pb::ReserveReplayCreditRequest> for ReserveReplayCredit {
    type Error = Status;

    fn try_from(req: pb::ReserveReplayCreditRequest) -> Result<Self, Status> {
        let ids = ReplayIds::parse(&req.replay_id, &req.tenant_id, &req.session_id)?;
        let (models, prompt_tokens, max_output_tokens) =
            worst_case_ask(req.models, req.prompt_tokens, req.max_output_tokens)?;
        Ok(Self {
            ids,
            models,
            prompt_tokens,
            max_output_tokens,
        })
    }
}

/// A RecordReplayAttempt request.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordReplayAttempt {
    pub ids: ReplayIds,
    /// Checked, not yet priced; its instance is the replayed turn's.
    pub attempt: NewCallAttempt,
}

impl TryFrom<pb::RecordReplayAttemptRequest> for RecordReplayAttempt {
    type Error = Status;

    fn try_from(req: pb::RecordReplayAttemptRequest) -> Result<Self, Status> {
        let ids = ReplayIds::parse(&req.replay_id, &req.tenant_id, &req.session_id)?;
        let session = SessionIds {
            session: ids.session,
            instance_id: parse_uuid("instance_id", &req.instance_id)?,
            tenant_id: ids.tenant_id,
        };
        let attempt = reported_attempt(
            "",
            session,
            req.invocation_id,
            req.attempt.as_ref(),
            String::new(),
        )?;
        Ok(Self { ids, attempt })
    }
}

/// A CompleteReplay request: the outcome, or why the replay could not run.
#[derive(Debug, Clone, PartialEq)]
pub struct CompleteReplay {
    pub ids: ReplayIds,
    pub result: Result<ReplayOutcome, String>,
}

impl TryFrom<pb::CompleteReplayRequest> for CompleteReplay {
    type Error = Status;

    fn try_from(req: pb::CompleteReplayRequest) -> Result<Self, Status> {
        let ids = ReplayIds::parse(&req.replay_id, &req.tenant_id, &req.session_id)?;
        let result = match (req.outcome_json.is_empty(), req.error.trim().is_empty()) {
            (false, true) => Ok(ReplayOutcome::parse(&req.outcome_json)
                .map_err(|e| Status::from(crate::error::SupervisorError::Core(e)))?),
            (true, false) => {
                if req.error.len() > 4_000 {
                    return Err(inv("error", "must be at most 4000 bytes"));
                }
                Err(req.error)
            }
            _ => {
                return Err(inv(
                    "outcome_json",
                    "exactly one of outcome_json and error is set",
                ));
            }
        };
        Ok(Self { ids, result })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(r: Result<impl std::fmt::Debug, Status>, field: &str) {
        let err = r.expect_err("refused");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message().starts_with(field),
            "{field}: {}",
            err.message()
        );
    }

    fn ids() -> (String, String, String) {
        (
            Uuid::new_v4().to_string(),
            Uuid::new_v4().to_string(),
            Uuid::new_v4().to_string(),
        )
    }

    #[test]
    fn a_completion_carries_exactly_one_of_an_outcome_and_an_error() {
        let (replay_id, tenant_id, session_id) = ids();
        let req = |outcome_json: &str, error: &str| pb::CompleteReplayRequest {
            replay_id: replay_id.clone(),
            tenant_id: tenant_id.clone(),
            session_id: session_id.clone(),
            outcome_json: outcome_json.into(),
            error: error.into(),
        };
        refused(CompleteReplay::try_from(req("", "")), "outcome_json");
        refused(CompleteReplay::try_from(req("{}", "boom")), "outcome_json");
        refused(
            CompleteReplay::try_from(req("{\"end\":\"Complete\"}", "")),
            "outcome_json",
        );
        refused(
            CompleteReplay::try_from(req("", &"x".repeat(4_001))),
            "error",
        );
        let failed = CompleteReplay::try_from(req("", "no couple")).unwrap();
        assert_eq!(failed.result, Err("no couple".into()));
        let outcome = serde_json::json!({
            "end": "Sneaky", "reasoning_summary": "", "wait_condition": "", "reason": "",
            "actions": [], "turns": 1, "input_tokens": 1, "output_tokens": 1, "served_models": []
        });
        refused(
            CompleteReplay::try_from(req(&outcome.to_string(), "")),
            "outcome.end",
        );
    }

    #[test]
    fn every_id_is_checked_before_anything_else() {
        let (replay_id, tenant_id, session_id) = ids();
        refused(
            ClaimReplay::try_from(pb::ClaimReplayRequest {
                replay_id: "nope".into(),
                tenant_id: tenant_id.clone(),
            }),
            "replay_id",
        );
        refused(
            RecordReplayAttempt::try_from(pb::RecordReplayAttemptRequest {
                replay_id,
                tenant_id,
                session_id,
                invocation_id: "inv".into(),
                attempt: None,
                instance_id: "x".into(),
            }),
            "instance_id",
        );
    }
}
