//! The AgentPod requests as validated domain values: one `TryFrom` per
//! request message, run once at the top of its handler, so the handlers
//! work on typed ids, parsed enums and checked numbers and never read a
//! protobuf field again. Owns every field-level INVALID_ARGUMENT answer
//! (naming the field, through `genesis_proto::convert::invalid_argument`),
//! in the order the pod is told about the first bad field. Must never read
//! or write anything: a request refused here leaves the tick, its lease and
//! its memo as they were.

mod complete;
mod invoke;
mod outcome;
mod record;
mod replay;

use genesis_proto::convert::{parse_optional_uuid, parse_uuid};
use genesis_proto::v1 as pb;
use tonic::Status;
use uuid::Uuid;

pub use complete::{CompleteTick, ReportedConsumption, ReportedTurn};
pub use invoke::{InvokeTool, MAX_TOOL_ARGUMENTS_BYTES};
pub use record::{RecordCallAttempt, ReportedStep, ReserveCredit};
pub use replay::{
    ClaimReplay, CompleteReplay, RecordReplayAttempt, ReplayIds, ReserveReplayCredit,
};

/// The ids every RPC of a claimed tick names: the tenant, the instance and
/// the session holding its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionIds {
    pub session: Uuid,
    pub instance_id: Uuid,
    pub tenant_id: Uuid,
}

impl SessionIds {
    /// Parse the three ids in the order every session RPC reports them.
    fn parse(session_id: &str, instance_id: &str, tenant_id: &str) -> Result<Self, Status> {
        Ok(Self {
            session: parse_uuid("session_id", session_id)?,
            instance_id: parse_uuid("instance_id", instance_id)?,
            tenant_id: parse_uuid("tenant_id", tenant_id)?,
        })
    }

    /// `(tenant, instance, session)`, the order the store takes them in.
    pub fn triple(&self) -> (Uuid, Uuid, Uuid) {
        (self.tenant_id, self.instance_id, self.session)
    }
}

/// A ClaimTick request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimTick {
    pub instance_id: Uuid,
    pub tenant_id: Uuid,
    /// The event the pod was told about; a hint only (the claim takes the
    /// instance's next due event), checked so a malformed one is refused.
    pub event_hint: Option<Uuid>,
}

impl TryFrom<pb::ClaimTickRequest> for ClaimTick {
    type Error = Status;

    fn try_from(req: pb::ClaimTickRequest) -> Result<Self, Status> {
        Ok(Self {
            instance_id: parse_uuid("instance_id", &req.instance_id)?,
            tenant_id: parse_uuid("tenant_id", &req.tenant_id)?,
            event_hint: parse_optional_uuid("event_id", req.event_id.as_deref())?,
        })
    }
}

/// A RenewLease request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenewLease {
    pub ids: SessionIds,
}

impl TryFrom<pb::RenewLeaseRequest> for RenewLease {
    type Error = Status;

    fn try_from(req: pb::RenewLeaseRequest) -> Result<Self, Status> {
        Ok(Self {
            ids: SessionIds::parse(&req.session_id, &req.instance_id, &req.tenant_id)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_names(r: Result<impl std::fmt::Debug, Status>, field: &str) {
        let err = r.expect_err("refused");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message().starts_with(&format!("{field}: ")),
            "{field}: {}",
            err.message()
        );
    }

    #[test]
    fn claim_ids_are_parsed_and_a_bad_hint_is_named() {
        let (t, i) = (Uuid::new_v4(), Uuid::new_v4());
        let req = pb::ClaimTickRequest {
            instance_id: i.to_string(),
            tenant_id: t.to_string(),
            ..Default::default()
        };
        let claim = ClaimTick::try_from(req.clone()).unwrap();
        assert_eq!((claim.tenant_id, claim.instance_id), (t, i));
        assert_eq!(claim.event_hint, None);
        status_names(
            ClaimTick::try_from(pb::ClaimTickRequest {
                event_id: Some("nope".into()),
                ..req.clone()
            }),
            "event_id",
        );
        status_names(
            ClaimTick::try_from(pb::ClaimTickRequest {
                instance_id: String::new(),
                ..req
            }),
            "instance_id",
        );
    }

    #[test]
    fn renew_names_the_first_bad_id_in_order() {
        let good = Uuid::new_v4().to_string();
        let req = pb::RenewLeaseRequest {
            session_id: "x".into(),
            instance_id: "y".into(),
            tenant_id: good.clone(),
        };
        status_names(RenewLease::try_from(req.clone()), "session_id");
        status_names(
            RenewLease::try_from(pb::RenewLeaseRequest {
                session_id: good.clone(),
                ..req
            }),
            "instance_id",
        );
    }
}
