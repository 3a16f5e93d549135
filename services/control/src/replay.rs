//! `ReplayTurn` and `GetTurnReplay` (genesis_core::replay): the request as
//! a checked domain value ([`ReplayQuery`]), the one path that asks for a
//! replay (gRPC and the dashboard's button both take it: the store writes
//! the row and wakes the outbox publisher, which carries it to the pods),
//! and a replay as the wire shows it, beside the original turn. Must never
//! publish on its own (the publisher's outbox does, so a replay asked for
//! just before a crash still reaches a pod) and never show a replay of
//! another tenant (the store's read is tenant-scoped).

use genesis_core::replay::ReplayOutcome;
use genesis_proto::convert::{optional_timestamp, timestamp_from_chrono};
use genesis_proto::v1;
use genesis_store::Store;
use genesis_store::replays::ReplayView;
use tonic::Status;
use uuid::Uuid;

use crate::convert;
use crate::services::llm::require_preset_keys;
use crate::state::AppState;
use crate::status::{store_status, uuid};

/// A checked `ReplayTurnRequest` (its tenant is authorized separately,
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayQuery {
    pub instance_id: Uuid,
    pub turn_number: i64,
    pub preset_id: Uuid,
}

impl TryFrom<&v1::ReplayTurnRequest> for ReplayQuery {
    type Error = Status;

    fn try_from(req: &v1::ReplayTurnRequest) -> Result<Self, Status> {
        Ok(Self {
            instance_id: uuid("instance_id", &req.instance_id)?,
            turn_number: crate::trace::turn_number(req.turn_number)?,
            preset_id: uuid("preset_id", &req.preset_id)?,
        })
    }
}

/// Ask for a replay and answer it as pending, beside its original turn.
/// The preset must name only keys the tenant may use now, as for every
/// path that puts a preset to use (FAILED_PRECONDITION naming the key).
pub async fn ask(
    state: &AppState,
    tenant_id: Uuid,
    q: ReplayQuery,
) -> Result<v1::TurnReplay, Status> {
    let store = &state.store;
    let presets = store
        .llm()
        .list_presets(tenant_id)
        .await
        .map_err(store_status)?;
    if let Some(p) = presets.iter().find(|p| p.id == q.preset_id) {
        require_preset_keys(&state.llm_keys, tenant_id, p)?;
    }
    let row = store
        .replays()
        .create(tenant_id, q.instance_id, q.turn_number, q.preset_id)
        .await
        .map_err(store_status)?;
    read(store, tenant_id, row.id).await
}

/// One replay of the tenant's, beside its original turn.
pub async fn read(
    store: &Store,
    tenant_id: Uuid,
    replay_id: Uuid,
) -> Result<v1::TurnReplay, Status> {
    let view = store
        .replays()
        .get(tenant_id, replay_id)
        .await
        .map_err(store_status)?;
    let original = store
        .traces()
        .turn(tenant_id, view.row.instance_id, view.row.turn_number)
        .await
        .map_err(store_status)?;
    Ok(turn_replay(
        &view,
        Some(convert::ledger_turn(&original.turn, &original.actions)),
    ))
}

/// A replay as the wire carries it.
pub fn turn_replay(view: &ReplayView, original: Option<v1::LedgerTurn>) -> v1::TurnReplay {
    let r = &view.row;
    let alternative = r
        .outcome
        .as_ref()
        .and_then(|o| serde_json::from_value::<ReplayOutcome>(o.clone()).ok())
        .map(|o| v1::ReplayAlternative {
            end: o.end,
            reasoning_summary: o.reasoning_summary,
            wait_condition: o.wait_condition,
            reason: o.reason,
            actions: o
                .actions
                .into_iter()
                .map(|a| v1::ReplayedAction {
                    tool_name: a.tool_name,
                    arguments_json: a.arguments.to_string(),
                    result_json: a.result.to_string(),
                    answered: a.answered.as_str().to_owned(),
                })
                .collect(),
            turns: o.turns,
            input_tokens: o.input_tokens,
            output_tokens: o.output_tokens,
            served_models: o.served_models,
        });
    v1::TurnReplay {
        id: r.id.to_string(),
        instance_id: r.instance_id.to_string(),
        turn_number: r.turn_number,
        preset_id: r.preset_id.to_string(),
        status: r.status.as_str().to_owned(),
        error: r.error.clone(),
        created_at: Some(timestamp_from_chrono(r.created_at)),
        finished_at: optional_timestamp(r.finished_at),
        original,
        alternative,
        cost_usd: view.cost_usd,
        attempts: view.attempts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_checked_field_by_field() {
        let ok = v1::ReplayTurnRequest {
            tenant_id: String::new(),
            instance_id: Uuid::new_v4().to_string(),
            turn_number: 3,
            preset_id: Uuid::new_v4().to_string(),
        };
        let q = ReplayQuery::try_from(&ok).expect("a well-formed request");
        assert_eq!(q.turn_number, 3);
        let field = |req: v1::ReplayTurnRequest| {
            let e = ReplayQuery::try_from(&req).expect_err("refused");
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
            e.message().split(':').next().unwrap_or_default().to_owned()
        };
        assert_eq!(
            field(v1::ReplayTurnRequest {
                turn_number: 0,
                ..ok.clone()
            }),
            "turn_number"
        );
        assert_eq!(
            field(v1::ReplayTurnRequest {
                preset_id: "cheap".into(),
                ..ok.clone()
            }),
            "preset_id"
        );
        assert_eq!(
            field(v1::ReplayTurnRequest {
                instance_id: String::new(),
                ..ok
            }),
            "instance_id"
        );
    }
}
