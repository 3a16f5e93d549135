//! The `DecisionResolved` orchestration signal (spec §3.1): which resolved
//! attention requests wake a steering instance, whom they wake, and what
//! the event carries. The store runs the resolving transaction and calls
//! these rules; control owns the enqueue (DESIGN §4).
//!
//! The rule. `DecisionResolved` is one of the three orchestration signals
//! about work an instance steers ("a steered mission changed status, a
//! decision resolved, a dependency unblocked"), so it is sent only for a
//! decision that concerns a mission, raised by an agent:
//!
//! - a `decision` its raiser (the SOA, `soa_propose_decision`) raised on
//!   behalf of a mission — its metadata names the mission as `missionId`;
//! - a `mission_question` a mission agent asked (`mission_ask_user`) —
//!   with the mission named by `missionId` when the asker knows it.
//!
//! The steering instance is the named mission's `steering_instance_id`;
//! a mission question that names no mission (a mission instance is not
//! bound to a `missions` row in this subsystem) goes to the tenant's SOA,
//! the steering instance of everything the tenant runs, as coding tasks'
//! `DependencyCompleted` does. A decision with no mission, any other kind
//! (a mode change, a redaction, a STUCK halt, a dead letter) and a request
//! no agent raised signal nothing: their raiser, when there is one, is
//! resumed by its own `OperatorAnsweredEscalation` (spec §2.4), and there
//! is no steered work for a second event to be about.
//!
//! Exactly once: the event is enqueued only by the call that resolved the
//! request, in the resolving transaction (see `genesis_store::decisions`).
//! Must never read the database or decide the raiser's resume.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::AttentionKind;

/// The metadata key naming the mission a request was raised on behalf of.
pub const MISSION_ID_KEY: &str = "missionId";

/// Whom a resolved request's `DecisionResolved` goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteeringTarget {
    /// The steering instance of this mission (none if the mission has no
    /// steering instance, or is not the tenant's).
    Mission(Uuid),
    /// The tenant's SOA (a mission question naming no mission).
    TenantSoa,
}

/// A resolved request that signals its steering instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecisionResolvedSignal {
    /// Where the event goes.
    pub target: SteeringTarget,
    /// The mission the request concerns, when it names one.
    pub mission_id: Option<Uuid>,
}

impl DecisionResolvedSignal {
    /// The signal a request of `kind`, raised by `instance_id`, with
    /// `metadata`, sends when it is resolved; `None` when it sends none
    /// (see the module rule). A `missionId` that is not a UUID names no
    /// mission.
    pub fn for_request(
        kind: AttentionKind,
        instance_id: Option<Uuid>,
        metadata: &Value,
    ) -> Option<Self> {
        instance_id?;
        let mission_id = metadata
            .get(MISSION_ID_KEY)
            .and_then(Value::as_str)
            .and_then(|s| Uuid::try_parse(s).ok());
        match (kind, mission_id) {
            (AttentionKind::Decision | AttentionKind::MissionQuestion, Some(m)) => Some(Self {
                target: SteeringTarget::Mission(m),
                mission_id: Some(m),
            }),
            (AttentionKind::MissionQuestion, None) => Some(Self {
                target: SteeringTarget::TenantSoa,
                mission_id: None,
            }),
            _ => None,
        }
    }

    /// The event's payload: the decision, the mission, who raised it and
    /// the operator's stored answer. `attentionRequestId` is the id the
    /// raising tool returned (and the decision id of the admin API).
    pub fn payload(
        &self,
        attention_request_id: Uuid,
        kind: AttentionKind,
        raised_by: Option<Uuid>,
        resolution: Option<&str>,
        resolution_notes: Option<&str>,
    ) -> Value {
        json!({
            "attentionRequestId": attention_request_id,
            "kind": kind.as_str(),
            "missionId": self.mission_id,
            "raisedByInstanceId": raised_by,
            "resolution": resolution,
            "resolutionNotes": resolution_notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(
        kind: AttentionKind,
        raised: bool,
        metadata: Value,
    ) -> Option<DecisionResolvedSignal> {
        DecisionResolvedSignal::for_request(kind, raised.then(Uuid::new_v4), &metadata)
    }

    #[test]
    fn a_decision_raised_on_behalf_of_a_mission_signals_that_missions_steering_instance() {
        let m = Uuid::new_v4();
        let s = signal(
            AttentionKind::Decision,
            true,
            json!({"source": "soa", "missionId": m.to_string()}),
        );
        assert_eq!(
            s,
            Some(DecisionResolvedSignal {
                target: SteeringTarget::Mission(m),
                mission_id: Some(m),
            })
        );
    }

    #[test]
    fn a_mission_question_signals_its_mission_or_else_the_tenants_soa() {
        let m = Uuid::new_v4();
        let named = signal(
            AttentionKind::MissionQuestion,
            true,
            json!({"missionId": m.to_string()}),
        )
        .unwrap();
        assert_eq!(named.target, SteeringTarget::Mission(m));
        let unnamed = signal(
            AttentionKind::MissionQuestion,
            true,
            json!({"source": "mission"}),
        )
        .unwrap();
        assert_eq!(unnamed.target, SteeringTarget::TenantSoa);
        assert_eq!(unnamed.mission_id, None);
    }

    #[test]
    fn no_mission_no_agent_or_another_kind_signals_nothing() {
        let m = json!({"missionId": Uuid::new_v4().to_string()});
        assert_eq!(
            signal(AttentionKind::Decision, true, json!({"source": "soa"})),
            None
        );
        assert_eq!(signal(AttentionKind::Decision, false, m.clone()), None);
        assert_eq!(
            signal(AttentionKind::MissionQuestion, false, json!({})),
            None
        );
        for kind in [
            AttentionKind::ModeChange,
            AttentionKind::StuckHalt,
            AttentionKind::DeadLetter,
            AttentionKind::Redaction,
        ] {
            assert_eq!(signal(kind, true, m.clone()), None, "{kind}");
        }
        // A missionId that is not a UUID names no mission.
        assert_eq!(
            signal(AttentionKind::Decision, true, json!({"missionId": "m-1"})),
            None
        );
        assert_eq!(
            signal(AttentionKind::Decision, true, json!({"missionId": 7})),
            None
        );
    }

    #[test]
    fn the_payload_carries_the_decision_the_mission_and_the_answer() {
        let (id, m, raiser) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let s = DecisionResolvedSignal {
            target: SteeringTarget::Mission(m),
            mission_id: Some(m),
        };
        assert_eq!(
            s.payload(
                id,
                AttentionKind::Decision,
                Some(raiser),
                Some("ship EU first"),
                None
            ),
            json!({
                "attentionRequestId": id,
                "kind": "decision",
                "missionId": m,
                "raisedByInstanceId": raiser,
                "resolution": "ship EU first",
                "resolutionNotes": null,
            })
        );
    }
}
