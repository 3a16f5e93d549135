//! Store rows → wire messages for the admin services. Total functions: every
//! row the store returns has a wire form. Must never validate input (that is
//! [`crate::status`]) nor read the database.

use genesis_core::BudgetOverride;
use genesis_core::modes::seed_catalogue;
use genesis_proto::convert::{optional_timestamp, timestamp_from_chrono};
use genesis_proto::v1;
use genesis_store::{ApiToken, AttentionRequest, LedgerTurn, MessageRow, ModeRow, Tenant};

/// The instance and ledger-turn forms are shared with the supervisor's
/// tick bundle: one conversion each, in genesis-proto.
pub use genesis_proto::rows::{instance, ledger_turn};

/// `tenants` row → `Tenant`.
pub fn tenant(t: &Tenant) -> v1::Tenant {
    v1::Tenant {
        id: t.id.to_string(),
        name: t.name.clone(),
        standing_agents_enabled: t.standing_agents_enabled,
        features: t.feature_flags.clone().into_iter().collect(),
        created_at: Some(timestamp_from_chrono(t.created_at)),
        status: t.status.as_str().to_owned(),
    }
}

/// `agent_messages` row → `AgentMessage`.
pub fn message(m: &MessageRow) -> v1::AgentMessage {
    v1::AgentMessage {
        id: m.id.to_string(),
        tenant_id: m.tenant_id.to_string(),
        instance_id: m.instance_id.to_string(),
        direction: m.direction.as_str().to_owned(),
        body: m.body.clone(),
        created_at: Some(timestamp_from_chrono(m.created_at)),
    }
}

/// `attention_requests` row → `Decision`.
pub fn decision(a: &AttentionRequest) -> v1::Decision {
    v1::Decision {
        id: a.id.to_string(),
        tenant_id: a.tenant_id.to_string(),
        kind: a.kind.as_str().to_owned(),
        status: a.status.as_str().to_owned(),
        title: a.title.clone(),
        body: a.body.clone(),
        metadata_json: a.metadata.to_string(),
        options_json: a.options.to_string(),
        instance_id: a.instance_id.map(|i| i.to_string()),
        resolution: a.resolution.clone().unwrap_or_default(),
        resolution_notes: a.resolution_notes.clone().unwrap_or_default(),
        created_at: Some(timestamp_from_chrono(a.created_at)),
        resolved_at: optional_timestamp(a.resolved_at),
        resolved_by: a.resolved_by.clone().unwrap_or_default(),
    }
}

/// Ledger turn → the live `TurnEvent`.
pub fn turn_event(t: &LedgerTurn) -> v1::TurnEvent {
    v1::TurnEvent {
        tenant_id: t.tenant_id.to_string(),
        instance_id: t.instance_id.to_string(),
        ledger_id: t.id.to_string(),
        turn_number: t.turn_number,
        event_kind: t.event_kind.as_str().to_owned(),
        decision_kind: t.decision_kind.as_str().to_owned(),
        mode: t.active_mode().to_owned(),
        phase: t.phase.as_str().to_owned(),
        reasoning_summary: t.reasoning_summary.clone().unwrap_or_default(),
        served_model: t.served_model.clone().unwrap_or_default(),
        tokens: t.input_tokens.unwrap_or(0) + t.output_tokens.unwrap_or(0),
        cost_usd: t.cost_usd.unwrap_or(0.0),
        created_at: Some(timestamp_from_chrono(t.created_at)),
    }
}

fn budget(o: &BudgetOverride) -> v1::BudgetEnvelope {
    let i64_of = |v: Option<u64>| v.and_then(|n| i64::try_from(n).ok());
    let i32_of = |v: Option<u64>| v.and_then(|n| i32::try_from(n).ok());
    v1::BudgetEnvelope {
        max_tokens: i64_of(o.max_tokens),
        max_tool_calls: i32_of(o.max_tool_calls),
        max_wall_ms: o
            .max_wall_seconds
            .and_then(|s| i64::try_from(s.saturating_mul(1000)).ok()),
        max_cost_usd: o.max_dollars,
        max_turns: i32_of(o.max_turns),
        max_output_tokens_per_turn: i64_of(o.max_output_tokens_per_turn),
    }
}

/// Catalogue row → `Mode` (a NULL toolset is the in-code seed toolset).
pub fn mode(m: &ModeRow) -> v1::Mode {
    let toolset = m.toolset.clone().unwrap_or_else(|| {
        seed_catalogue(m.agent_type)
            .into_iter()
            .find(|d| d.name == m.name)
            .map(|d| d.toolset.iter().map(|t| t.to_string()).collect())
            .unwrap_or_default()
    });
    v1::Mode {
        name: m.name.clone(),
        agent_type: m.agent_type.as_str().to_owned(),
        description: m.description.clone(),
        prompt_fragment: m.prompt_fragment.clone(),
        toolset,
        preset_id: m.preset_id.clone(),
        budget_override: m
            .budget_override
            .as_ref()
            .and_then(|v| BudgetOverride::from_json_value(v).ok())
            .map(|o| budget(&o)),
        system_seed: m.system_seed,
        is_default: m.is_default,
        tenant_override: m.tenant_id.is_some(),
    }
}

/// Token metadata → `ApiToken` (never the hash).
pub fn token(t: &ApiToken) -> v1::ApiToken {
    v1::ApiToken {
        id: t.id.to_string(),
        scope: t.scope.as_str().to_owned(),
        tenant_id: t.tenant_id.map(|x| x.to_string()),
        label: t.label.clone(),
        created_at: Some(timestamp_from_chrono(t.created_at)),
        expires_at: optional_timestamp(t.expires_at),
        revoked_at: optional_timestamp(t.revoked_at),
        pod_tenant_ids: t
            .pod_tenants
            .ids()
            .iter()
            .map(ToString::to_string)
            .collect(),
    }
}
