//! An episode trace's one read: for a ledger turn of an instance, the turn
//! itself (with its actions), the journal of the episode it explains (the
//! journal is keyed by the turn's event) and the priced attempts of the
//! turn's call snapshot, all in one tenant transaction so the three agree
//! and row-level security scopes every one of them. Owns no rule of how the
//! steps pair with the attempts: the reader matches them. Must never write,
//! and never read another tenant's rows (a turn that is not the tenant's
//! instance's is `NotFound`, exactly as one that does not exist).

use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::journal::JournalEntry;
use crate::ledger::{LedgerActionRow, LedgerTurn};
use crate::llm::CallAttemptRow;
use crate::rows::{decode, decode_all};
use crate::store::Store;

/// What [`Traces::turn`] reads.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnTrace {
    /// The ledger turn (its `decision_payload` holds the completion, the
    /// budget axis, the end reason and the consumption per axis).
    pub turn: LedgerTurn,
    /// The turn's action rows, in ordinal order (the decision's mapping).
    pub actions: Vec<LedgerActionRow>,
    /// The episode's journal in `seq` order; empty when it was pruned after
    /// its retention, or never written (a turn without an LLM call).
    pub journal: Vec<JournalEntry>,
    /// The snapshot whose attempts are in `attempts`: the turn's own, else
    /// the one recorded under the invocation of the journal's LLM turns.
    pub snapshot_id: Option<Uuid>,
    /// That snapshot's attempts in ordinal order, each with its cost.
    pub attempts: Vec<CallAttemptRow>,
}

/// Repository handle, from [`Store::traces`].
pub struct Traces<'a> {
    store: &'a Store,
}

impl Store {
    /// Episode traces.
    pub fn traces(&self) -> Traces<'_> {
        Traces { store: self }
    }
}

impl Traces<'_> {
    /// The trace of turn `turn_number` of `instance_id`. `NotFound` when the
    /// instance has no such turn or is not `tenant_id`'s;
    /// `InvalidArgument` for a turn number below 1.
    pub async fn turn(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        turn_number: i64,
    ) -> Result<TurnTrace, StoreError> {
        if turn_number < 1 {
            return Err(StoreError::invalid("turn_number", "must be at least 1"));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(l) || jsonb_build_object('requested_model',
                    (SELECT s.requested_model FROM llm_call_snapshots s
                      WHERE s.id = l.llm_call_snapshot_id))
               FROM agent_state_ledger l
              WHERE l.tenant_id = $1 AND l.instance_id = $2 AND l.turn_number = $3",
        )
        .bind(tenant_id)
        .bind(instance_id)
        .bind(turn_number)
        .fetch_optional(tx.conn())
        .await?;
        let turn: LedgerTurn = decode(row.ok_or_else(|| StoreError::not_found("ledger turn"))?)?;
        let actions: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(a) FROM agent_state_ledger_actions a
              WHERE tenant_id = $1 AND ledger_id = $2 ORDER BY ordinal",
        )
        .bind(tenant_id)
        .bind(turn.id)
        .fetch_all(tx.conn())
        .await?;
        let journal: Vec<JournalEntry> = match turn.event_id {
            Some(event_id) => crate::journal::episode_in(tx.conn(), tenant_id, event_id).await?,
            None => Vec::new(),
        };
        let snapshot_id = match turn.llm_call_snapshot_id {
            Some(id) => Some(id),
            None => match invocation_of(&journal) {
                Some(invocation) => {
                    sqlx::query_scalar(
                        "SELECT id FROM llm_call_snapshots
                          WHERE tenant_id = $1 AND instance_id = $2 AND invocation_id = $3",
                    )
                    .bind(tenant_id)
                    .bind(instance_id)
                    .bind(invocation)
                    .fetch_optional(tx.conn())
                    .await?
                }
                None => None,
            },
        };
        let attempts: Vec<serde_json::Value> = match snapshot_id {
            Some(id) => {
                sqlx::query_scalar(
                    "SELECT to_jsonb(a) FROM llm_call_attempts a
                      WHERE tenant_id = $1 AND snapshot_id = $2 ORDER BY ordinal",
                )
                .bind(tenant_id)
                .bind(id)
                .fetch_all(tx.conn())
                .await?
            }
            None => Vec::new(),
        };
        tx.commit().await?;
        Ok(TurnTrace {
            turn,
            actions: decode_all(actions)?,
            journal,
            snapshot_id,
            attempts: decode_all(attempts)?,
        })
    }
}

/// The invocation the journal's first LLM turn names (every turn of one
/// episode keeps its invocation, so its attempts share one snapshot).
fn invocation_of(journal: &[JournalEntry]) -> Option<String> {
    #[derive(Deserialize)]
    struct Invocation {
        invocation_id: String,
    }
    journal
        .iter()
        .filter(|e| e.kind == genesis_core::journal::JournalKind::LlmTurn)
        .find_map(|e| serde_json::from_value::<Invocation>(e.entry.clone()).ok())
        .map(|i| i.invocation_id)
        .filter(|i| !i.is_empty())
}
