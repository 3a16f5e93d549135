//! The wire forms of the rows both servers send: an instance snapshot
//! (`AgentInstance`) and a ledger turn with its actions (`LedgerTurn`).
//! One conversion each, so the admin API, the dashboard and a tick bundle
//! can never disagree on a field. Total functions over genesis-core's row
//! types; must never validate input or read the database.

use genesis_core::instance::{InstanceRow, LedgerActionRow, LedgerTurn};

use crate::convert::{optional_timestamp, timestamp_from_chrono};
use crate::v1 as pb;

/// `agent_instances` row → `AgentInstance`. A row on its type's default
/// mode (`active_mode` NULL) names that mode.
pub fn instance(i: &InstanceRow) -> pb::AgentInstance {
    pb::AgentInstance {
        id: i.id.to_string(),
        tenant_id: i.tenant_id.to_string(),
        agent_type: i.agent_type.as_str().to_owned(),
        status: i.status.as_str().to_owned(),
        active_mode: i
            .active_mode
            .clone()
            .or_else(|| genesis_core::default_mode(i.agent_type).map(str::to_owned))
            .unwrap_or_default(),
        phase: i.phase.as_str().to_owned(),
        next_tick_at: optional_timestamp(i.next_tick_at),
        consecutive_idle_ticks: i.consecutive_idle_ticks,
        consecutive_blocked_turns: i.consecutive_blocked_turns,
        idle_ticks_since_replan: i.idle_ticks_since_replan,
        plan_input_hash: i.plan_input_hash.clone().unwrap_or_default(),
        last_decision_kind: i
            .last_decision_kind
            .as_ref()
            .map(|k| k.as_str().to_owned())
            .unwrap_or_default(),
        is_building_starting_workset: i.is_building_starting_workset,
        workset_deadline_utc: optional_timestamp(i.workset_deadline_utc),
        call_site_id: i.call_site_id.clone(),
        created_at: Some(timestamp_from_chrono(i.created_at)),
        updated_at: Some(timestamp_from_chrono(i.updated_at)),
        consecutive_provider_failures: i.consecutive_provider_failures,
        consecutive_exhausted_turns: i.consecutive_exhausted_turns,
    }
}

/// Ledger turn with its action rows → `LedgerTurn`. An action without a
/// result has an empty `result_json`.
pub fn ledger_turn(t: &LedgerTurn, actions: &[LedgerActionRow]) -> pb::LedgerTurn {
    pb::LedgerTurn {
        id: t.id.to_string(),
        instance_id: t.instance_id.to_string(),
        turn_number: t.turn_number,
        event_kind: t.event_kind.as_str().to_owned(),
        event_payload_json: t.event_payload.to_string(),
        decision_kind: t.decision_kind.as_str().to_owned(),
        active_mode: t.active_mode().to_owned(),
        phase: t.phase.as_str().to_owned(),
        reasoning_summary: t.reasoning_summary.clone().unwrap_or_default(),
        wait_condition: t.wait_condition.clone().unwrap_or_default(),
        actions: actions
            .iter()
            .map(|a| pb::ActionRecord {
                tool_name: a.tool_name.clone(),
                arguments_json: a.arguments.to_string(),
                result_json: a.result.as_ref().map(|r| r.to_string()).unwrap_or_default(),
                side_effecting: a.side_effecting,
                blocked: a.blocked,
            })
            .collect(),
        plan_input_hash: t.plan_input_hash.clone().unwrap_or_default(),
        snapshot_id: t.llm_call_snapshot_id.map(|s| s.to_string()),
        served_model: t.served_model.clone().unwrap_or_default(),
        cost_usd: t.cost_usd.unwrap_or(0.0),
        input_tokens: t.input_tokens.unwrap_or(0),
        output_tokens: t.output_tokens.unwrap_or(0),
        created_at: Some(timestamp_from_chrono(t.created_at)),
        event_id: t.event_id.map(|e| e.to_string()).unwrap_or_default(),
        requested_model: t.requested_model.clone().unwrap_or_default(),
    }
}
