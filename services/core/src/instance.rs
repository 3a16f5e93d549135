//! The standing agent as the tick rules see it: an `agent_instances` row
//! (spec §3.1), the pre-tick snapshot the claim's terms and the
//! completion's idle and STUCK rules key on, and the turns of its
//! append-only ledger (`agent_state_ledger` and its actions). Owns their
//! shapes and the foundational-phase rule; genesis-store reads and writes
//! the rows, genesis-proto puts them on the wire. Must never be written
//! from here: the rows change only through the store's guarded writes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer};
use uuid::Uuid;

use crate::enums::{AgentDecisionKind, AgentEventKind, AgentType, InstanceStatus, Phase};
use crate::tick::PriorCounters;

/// An `agent_instances` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct InstanceRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub agent_type: AgentType,
    pub status: InstanceStatus,
    /// `None` means the type's default mode (the catalogue row `is_default`).
    pub active_mode: Option<String>,
    #[serde(deserialize_with = "phase_column")]
    pub phase: Phase,
    pub next_tick_at: Option<DateTime<Utc>>,
    pub consecutive_idle_ticks: i32,
    pub consecutive_blocked_turns: i32,
    /// Consecutive ticks deferred because every provider failed.
    #[serde(default)]
    pub consecutive_provider_failures: i32,
    /// Consecutive turns that ran out of budget (or failed on the pod's
    /// side) before a terminator.
    #[serde(default)]
    pub consecutive_exhausted_turns: i32,
    pub idle_ticks_since_replan: i32,
    pub plan_input_hash: Option<String>,
    pub last_decision_kind: Option<AgentDecisionKind>,
    pub is_building_starting_workset: bool,
    pub workset_deadline_utc: Option<DateTime<Utc>>,
    pub lease_session: Option<Uuid>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub call_site_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl InstanceRow {
    /// True while the foundational phase is on and its deadline not passed.
    pub fn in_foundational_phase(&self, now: DateTime<Utc>) -> bool {
        self.is_building_starting_workset && self.workset_deadline_utc.is_none_or(|d| now < d)
    }
}

impl From<&InstanceRow> for PriorCounters {
    fn from(i: &InstanceRow) -> Self {
        Self {
            plan_input_hash: i.plan_input_hash.clone(),
            consecutive_idle_ticks: i.consecutive_idle_ticks,
            idle_ticks_since_replan: i.idle_ticks_since_replan,
            consecutive_blocked_turns: i.consecutive_blocked_turns,
            consecutive_exhausted_turns: i.consecutive_exhausted_turns,
        }
    }
}

/// One turn of an instance's ledger.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LedgerTurn {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub turn_number: i64,
    pub event_id: Option<Uuid>,
    pub event_kind: AgentEventKind,
    pub event_payload: serde_json::Value,
    pub decision_kind: AgentDecisionKind,
    #[serde(deserialize_with = "phase_column")]
    pub phase: Phase,
    /// `{actions, waitCondition, reasoningSummary, activeMode}`.
    pub decision_payload: serde_json::Value,
    pub wait_condition: Option<String>,
    pub reasoning_summary: Option<String>,
    pub plan_input_hash: Option<String>,
    pub llm_call_snapshot_id: Option<Uuid>,
    pub served_model: Option<String>,
    /// The model the preset asked for, from the turn's call snapshot
    /// (`None` when the turn made no LLM call).
    #[serde(default)]
    pub requested_model: Option<String>,
    pub cost_usd: Option<f64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub created_at: DateTime<Utc>,
}

impl LedgerTurn {
    /// The mode the turn ran in (`decision_payload.activeMode`), empty when
    /// the payload does not say.
    pub fn active_mode(&self) -> &str {
        self.decision_payload
            .get("activeMode")
            .and_then(|m| m.as_str())
            .unwrap_or_default()
    }
}

/// One action row of a turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LedgerActionRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub ledger_id: Uuid,
    pub ordinal: i32,
    pub tool_name: String,
    pub arguments: serde_json::Value,
    pub result: Option<serde_json::Value>,
    pub side_effecting: bool,
    pub blocked: bool,
}

/// The stored `phase` column. The schema's domain keeps other values out;
/// one that got in anyway (a hand edit) is a decode error naming the
/// column, never a panic and never read as some other phase.
pub(crate) fn phase_column<'de, D: Deserializer<'de>>(d: D) -> Result<Phase, D::Error> {
    let text = String::deserialize(d)?;
    text.parse()
        .map_err(|e| serde::de::Error::custom(format_args!("column phase: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(phase: &str) -> serde_json::Value {
        serde_json::json!({
            "id": Uuid::nil(), "tenant_id": Uuid::nil(), "agent_type": "Soa",
            "status": "active", "active_mode": null, "phase": phase, "next_tick_at": null,
            "consecutive_idle_ticks": 2, "consecutive_blocked_turns": 1,
            "idle_ticks_since_replan": 2, "plan_input_hash": null, "last_decision_kind": null,
            "is_building_starting_workset": false, "workset_deadline_utc": null,
            "lease_session": null, "lease_expires_at": null, "call_site_id": null,
            "created_at": "2026-12-01T00:00:00Z", "updated_at": "2026-12-01T00:00:00Z"
        })
    }

    #[test]
    fn a_row_decodes_and_yields_its_prior_counters() {
        let r: InstanceRow = serde_json::from_value(row("idle:blocked")).unwrap();
        assert_eq!(r.phase, Phase::IdleBlocked);
        assert_eq!(r.consecutive_exhausted_turns, 0, "absent counters are zero");
        let prior = PriorCounters::from(&r);
        assert_eq!(
            (
                prior.consecutive_idle_ticks,
                prior.consecutive_blocked_turns
            ),
            (2, 1)
        );
    }

    #[test]
    fn an_unknown_phase_is_a_decode_error_naming_the_column() {
        let err = serde_json::from_value::<InstanceRow>(row("dreaming")).unwrap_err();
        assert!(err.to_string().contains("column phase"), "{err}");
    }
}
