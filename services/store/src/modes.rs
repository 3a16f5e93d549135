//! The mode catalogue (`agent_modes`: platform rows, and the tenant's
//! overrides of them), the operator's edit of a catalogue
//! mode, and THE one chokepoint that writes `agent_instances.active_mode`:
//! [`Modes::set_active_mode`], which validates against the agent type's own
//! catalogue and appends the `agent_mode_change_events` audit row in the
//! same transaction (its statements, `set_active_mode_in`, also run inside
//! the decision transaction of [`crate::decisions`]). Nothing else in the
//! system may write `active_mode`; the agent can only propose.
//!
//! A tenant reads its catalogue through `genesis_effective_modes` (its
//! override of a mode over the platform row). [`Modes::edit`] writes only
//! the tenant's override, created by copying the platform row on the first
//! edit, and appends a `catalogue` audit row of what changed, old→new, in
//! the same transaction; it never writes a platform row, so no other
//! tenant's catalogue changes. What may change and how it is checked is
//! genesis-core's [`genesis_core::mode_edit`].

use chrono::{DateTime, Utc};
use genesis_core::mode_edit::{FieldChange, ModeEdit, ModeFields, changes_json};
use genesis_core::{AgentType, ModeChangeSource};
use serde::Deserialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::StoreError;
use crate::instances::lock_in;
use crate::rows::{check_text, decode, decode_all};
use crate::store::Store;

/// An `agent_modes` catalogue row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModeRow {
    pub agent_type: AgentType,
    pub name: String,
    pub description: String,
    pub prompt_fragment: String,
    /// `None`: use genesis-core's in-code seed toolset for this mode.
    pub toolset: Option<Vec<String>>,
    pub preset_id: Option<String>,
    pub budget_override: Option<serde_json::Value>,
    pub system_seed: bool,
    pub is_default: bool,
    /// The tenant whose override this row is; `None` for a platform row.
    #[serde(default)]
    pub tenant_id: Option<Uuid>,
}

/// A `catalogue` row of `agent_mode_change_events`: one operator edit of a
/// catalogue mode.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModeEditEvent {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub agent_type: AgentType,
    /// The edited mode.
    #[serde(rename = "to_mode")]
    pub mode: String,
    pub actor: String,
    /// `{field: {old, new}}` for each field the edit changed.
    pub changes: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// What [`Modes::edit`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeEditOutcome {
    /// The mode as the tenant now sees it.
    pub mode: ModeRow,
    /// The fields the edit changed, old→new (empty: it changed nothing).
    pub changes: Vec<FieldChange>,
    /// The audit row, when something changed.
    pub event: Option<ModeEditEvent>,
}

/// An `agent_mode_change_events` audit row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModeChange {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub from_mode: Option<String>,
    pub to_mode: String,
    pub source: ModeChangeSource,
    pub actor: String,
    pub attention_request_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
}

/// Repository handle, from [`Store::modes`].
pub struct Modes<'a> {
    store: &'a Store,
}

impl Store {
    /// Mode catalogue and the mode-write chokepoint.
    pub fn modes(&self) -> Modes<'_> {
        Modes { store: self }
    }
}

impl Modes<'_> {
    /// The catalogue of one agent type, default mode first. Empty for types
    /// without modes (the mission types).
    pub async fn catalogue(&self, agent_type: AgentType) -> Result<Vec<ModeRow>, StoreError> {
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(m) FROM agent_modes m WHERE agent_type = $1 ORDER BY is_default DESC, name",
        )
        .bind(agent_type.as_str())
        .fetch_all(self.store.tenant_pool())
        .await?;
        decode_all(rows)
    }

    /// The catalogue of one agent type as `tenant_id` sees it (its override
    /// of a mode over the platform row), default mode first.
    pub async fn catalogue_for(
        &self,
        tenant_id: Uuid,
        agent_type: AgentType,
    ) -> Result<Vec<ModeRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(m) FROM genesis_effective_modes($1, $2) m ORDER BY is_default DESC, name",
        )
        .bind(tenant_id)
        .bind(agent_type.as_str())
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// One mode as `tenant_id` sees it; `NotFound` when the type's
    /// catalogue has no such mode.
    pub async fn get(
        &self,
        tenant_id: Uuid,
        agent_type: AgentType,
        name: &str,
    ) -> Result<ModeRow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row = effective_in(tx.conn(), tenant_id, agent_type, name).await?;
        tx.commit().await?;
        row.ok_or_else(|| unknown_mode(agent_type, name))
    }

    /// Edit one mode of `agent_type`'s catalogue for `tenant_id` alone, in
    /// one tenant transaction: the effective mode is read, `edit` (already
    /// checked with [`ModeEdit::validate`]) is applied to it, and when that
    /// changes something the tenant's override is created from the
    /// platform row if it has none, locked, updated, and a `catalogue`
    /// audit row of the changes (old→new, against the locked row) is
    /// appended, naming `actor`. An edit that changes nothing writes
    /// nothing. A preset must be one of the tenant's presets, by id or name
    /// (stored as its id). Unknown mode → `NotFound`; unknown preset →
    /// `InvalidArgument` (field `preset`); nothing is written on any error.
    pub async fn edit(
        &self,
        tenant_id: Uuid,
        agent_type: AgentType,
        name: &str,
        edit: &ModeEdit,
        actor: &str,
    ) -> Result<ModeEditOutcome, StoreError> {
        check_text("actor", actor, 200)?;
        check_text("mode", name, 100)?;
        let mut edit = edit.clone();
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        if let Some(Some(preset)) = &edit.preset {
            let id: Option<String> = sqlx::query_scalar(
                "SELECT id::text FROM llm_presets WHERE id::text = $1 OR name = $1
                  ORDER BY (id::text = $1) DESC LIMIT 1",
            )
            .bind(preset)
            .fetch_optional(tx.conn())
            .await?;
            let id = id.ok_or_else(|| {
                StoreError::invalid("preset", format!("no preset {preset:?} in this tenant"))
            })?;
            edit.preset = Some(Some(id));
        }
        let current = effective_in(tx.conn(), tenant_id, agent_type, name)
            .await?
            .ok_or_else(|| unknown_mode(agent_type, name))?;
        let (_, changes) = edit.apply(&fields_of(&current)?);
        if changes.is_empty() {
            tx.commit().await?;
            return Ok(ModeEditOutcome {
                mode: current,
                changes,
                event: None,
            });
        }
        // The tenant's override, created from the platform row on the
        // first edit, then locked: concurrent edits of one mode queue here,
        // and each records its changes against the row it replaced.
        sqlx::query(
            "INSERT INTO agent_modes (tenant_id, agent_type, name, description, prompt_fragment, toolset,
                                      preset_id, budget_override, system_seed, is_default)
             SELECT $1, agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override,
                    false, is_default
               FROM agent_modes WHERE tenant_id IS NULL AND agent_type = $2 AND name = $3
             ON CONFLICT (tenant_id, agent_type, name) WHERE tenant_id IS NOT NULL DO NOTHING",
        )
        .bind(tenant_id)
        .bind(agent_type.as_str())
        .bind(name)
        .execute(tx.conn())
        .await?;
        let locked: serde_json::Value = sqlx::query_scalar(
            "SELECT to_jsonb(m) FROM agent_modes m
              WHERE tenant_id = $1 AND agent_type = $2 AND name = $3 FOR UPDATE",
        )
        .bind(tenant_id)
        .bind(agent_type.as_str())
        .bind(name)
        .fetch_one(tx.conn())
        .await?;
        let locked: ModeRow = decode(locked)?;
        let (next, changes) = edit.apply(&fields_of(&locked)?);
        if changes.is_empty() {
            tx.commit().await?;
            return Ok(ModeEditOutcome {
                mode: locked,
                changes,
                event: None,
            });
        }
        // An unedited toolset keeps its stored form (NULL: the seed's).
        let toolset = match &edit.toolset {
            Some(_) => Some(serde_json::json!(next.toolset)),
            None => locked.toolset.as_ref().map(|t| serde_json::json!(t)),
        };
        let row: serde_json::Value = sqlx::query_scalar(
            "UPDATE agent_modes SET prompt_fragment = $4, toolset = $5, preset_id = $6, budget_override = $7
              WHERE tenant_id = $1 AND agent_type = $2 AND name = $3
             RETURNING to_jsonb(agent_modes.*)",
        )
        .bind(tenant_id)
        .bind(agent_type.as_str())
        .bind(name)
        .bind(&next.prompt_fragment)
        .bind(toolset)
        .bind(next.preset.as_deref())
        .bind(next.budget_override.map(|b| b.to_json()))
        .fetch_one(tx.conn())
        .await?;
        let event: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO agent_mode_change_events (tenant_id, instance_id, from_mode, to_mode, source, actor,
                                                   agent_type, changes)
             VALUES ($1, NULL, NULL, $2, $3, $4, $5, $6)
             RETURNING to_jsonb(agent_mode_change_events.*)",
        )
        .bind(tenant_id)
        .bind(name)
        .bind(ModeChangeSource::Catalogue.as_str())
        .bind(actor)
        .bind(agent_type.as_str())
        .bind(changes_json(&changes))
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        Ok(ModeEditOutcome {
            mode: decode(row)?,
            changes,
            event: Some(decode(event)?),
        })
    }

    /// The tenant's catalogue edits of one type, oldest first.
    pub async fn edits(
        &self,
        tenant_id: Uuid,
        agent_type: AgentType,
    ) -> Result<Vec<ModeEditEvent>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(e) FROM agent_mode_change_events e
              WHERE source = 'catalogue' AND tenant_id = $1 AND agent_type = $2
              ORDER BY created_at, id",
        )
        .bind(tenant_id)
        .bind(agent_type.as_str())
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// Set an instance's active mode: the single chokepoint (UI source `ui`,
    /// approved proposal source `approval`). Refuses a mode outside the
    /// instance type's catalogue with [`StoreError::InvalidArgument`] (field
    /// `mode`) and writes nothing; otherwise updates `active_mode` and
    /// appends the audit row atomically, even when the mode is unchanged.
    pub async fn set_active_mode(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        to_mode: &str,
        source: ModeChangeSource,
        actor: &str,
        attention_request_id: Option<Uuid>,
    ) -> Result<ModeChange, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let change = set_active_mode_in(
            tx.conn(),
            tenant_id,
            instance_id,
            to_mode,
            source,
            actor,
            attention_request_id,
        )
        .await?;
        tx.commit().await?;
        Ok(change)
    }

    /// The audit trail of one instance, oldest first.
    pub async fn history(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
    ) -> Result<Vec<ModeChange>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(m) FROM agent_mode_change_events m WHERE instance_id = $1 ORDER BY created_at, id",
        )
        .bind(instance_id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }
}

/// The chokepoint's statements inside the caller's tenant transaction (also
/// the mode step of the decision transaction of [`crate::decisions`]):
/// input checks, the instance row lock, the catalogue check, the
/// `active_mode` write and the audit row. An error leaves the caller's
/// transaction to be rolled back.
pub(crate) async fn set_active_mode_in(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
    to_mode: &str,
    source: ModeChangeSource,
    actor: &str,
    attention_request_id: Option<Uuid>,
) -> Result<ModeChange, StoreError> {
    check_text("actor", actor, 200)?;
    check_text("mode", to_mode, 100)?;
    if source == ModeChangeSource::Approval && attention_request_id.is_none() {
        return Err(StoreError::invalid(
            "attention_request_id",
            "an approval-sourced mode change must name the approved attention request",
        ));
    }
    let inst = lock_in(&mut *conn, instance_id).await?;
    // Mode names are the platform rows' (a tenant's override shadows one).
    let known: Option<bool> = sqlx::query_scalar(
        "SELECT true FROM agent_modes WHERE agent_type = $1 AND name = $2 AND tenant_id IS NULL",
    )
    .bind(inst.agent_type.as_str())
    .bind(to_mode)
    .fetch_optional(&mut *conn)
    .await?;
    if known.is_none() {
        return Err(genesis_core::CoreError::UnknownMode {
            agent_type: inst.agent_type,
            mode: to_mode.to_owned(),
        }
        .into());
    }
    // The chokepoint's mark for this instance, which the `agent_instances`
    // guard trigger requires of any service-role change to active_mode;
    // cleared right after the write, so nothing later in the caller's
    // transaction rides on it. The chokepoint is not on the tick path.
    sqlx::query("SELECT set_config('genesis.mode_chokepoint', $1::text, true)")
        .bind(instance_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query("UPDATE agent_instances SET active_mode = $2, updated_at = now() WHERE id = $1")
        .bind(instance_id)
        .bind(to_mode)
        .execute(&mut *conn)
        .await?;
    sqlx::query("SELECT set_config('genesis.mode_chokepoint', '', true)")
        .execute(&mut *conn)
        .await?;
    let row: serde_json::Value = sqlx::query_scalar(
        "INSERT INTO agent_mode_change_events
             (tenant_id, instance_id, from_mode, to_mode, source, actor, attention_request_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         RETURNING to_jsonb(agent_mode_change_events.*)",
    )
    .bind(tenant_id)
    .bind(instance_id)
    .bind(inst.active_mode.as_deref())
    .bind(to_mode)
    .bind(source.as_str())
    .bind(actor)
    .bind(attention_request_id)
    .fetch_one(&mut *conn)
    .await?;
    decode(row)
}

/// An instance's type, active mode and catalogue as InvokeTool's toolset
/// check reads them ([`instance_catalogue_in`]).
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceCatalogue {
    pub agent_type: AgentType,
    /// `None` means the type's default mode.
    pub active_mode: Option<String>,
    /// The type's catalogue as the instance's tenant sees it (its override
    /// of a mode over the platform row), in no particular order.
    pub modes: Vec<ModeRow>,
}

/// The instance's type, active mode and effective catalogue
/// (`genesis_effective_modes` of its tenant) in one statement, on the
/// caller's tenant transaction (InvokeTool's, so the toolset is checked
/// against what the transaction sees). Reads only; an unknown (or other
/// tenant's) instance → `NotFound`.
pub async fn instance_catalogue_in(
    conn: &mut PgConnection,
    instance_id: Uuid,
) -> Result<InstanceCatalogue, StoreError> {
    let row: Option<(String, Option<String>, serde_json::Value)> = sqlx::query_as(
        "SELECT i.agent_type, i.active_mode,
                (SELECT coalesce(jsonb_agg(to_jsonb(m)), '[]'::jsonb)
                   FROM genesis_effective_modes(i.tenant_id, i.agent_type) m)
           FROM agent_instances i WHERE i.id = $1",
    )
    .bind(instance_id)
    .fetch_optional(conn)
    .await?;
    let (agent_type, active_mode, modes) =
        row.ok_or_else(|| StoreError::not_found("agent instance"))?;
    Ok(InstanceCatalogue {
        agent_type: stored_agent_type(&agent_type)?,
        active_mode,
        modes: decode(modes)?,
    })
}

/// An instance's type, active mode and the names of its type's
/// `agent_modes` rows ([`mode_names_in`]).
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceModeNames {
    pub agent_type: AgentType,
    /// `None` means the type's default mode.
    pub active_mode: Option<String>,
    /// The names of the `agent_modes` rows of the type the caller's tenant
    /// sees (platform rows and its own overrides: a name may repeat),
    /// sorted.
    pub names: Vec<String>,
}

/// What `soa_propose_mode_change` validates a target mode against, in one
/// statement on the caller's tenant transaction: the instance's type and
/// active mode and the names of its type's `agent_modes` rows. Reads only;
/// an unknown (or other tenant's) instance → `NotFound`.
pub async fn mode_names_in(
    conn: &mut PgConnection,
    instance_id: Uuid,
) -> Result<InstanceModeNames, StoreError> {
    let row: Option<(String, Option<String>, Vec<String>)> = sqlx::query_as(
        "SELECT i.agent_type, i.active_mode,
                coalesce((SELECT array_agg(m.name ORDER BY m.name) FROM agent_modes m
                           WHERE m.agent_type = i.agent_type), '{}')
           FROM agent_instances i WHERE i.id = $1",
    )
    .bind(instance_id)
    .fetch_optional(conn)
    .await?;
    let (agent_type, active_mode, names) =
        row.ok_or_else(|| StoreError::not_found("agent instance"))?;
    Ok(InstanceModeNames {
        agent_type: stored_agent_type(&agent_type)?,
        active_mode,
        names,
    })
}

/// A stored `agent_type`; one genesis-core does not know is a row the
/// schema should have refused, reported as a database failure.
fn stored_agent_type(stored: &str) -> Result<AgentType, StoreError> {
    stored.parse().map_err(|e: genesis_core::CoreError| {
        StoreError::Database(format!("unexpected agent_type {stored:?}: {e}"))
    })
}

/// The mode `name` of `agent_type` as `tenant_id` sees it, on the caller's
/// tenant transaction.
async fn effective_in(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    agent_type: AgentType,
    name: &str,
) -> Result<Option<ModeRow>, StoreError> {
    let row: Option<serde_json::Value> = sqlx::query_scalar(
        "SELECT to_jsonb(m) FROM genesis_effective_modes($1, $2) m WHERE m.name = $3",
    )
    .bind(tenant_id)
    .bind(agent_type.as_str())
    .bind(name)
    .fetch_optional(conn)
    .await?;
    row.map(decode).transpose()
}

/// The editable fields of a row, as a reader sees them.
fn fields_of(row: &ModeRow) -> Result<ModeFields, StoreError> {
    Ok(ModeFields::from_stored(
        row.agent_type,
        &row.name,
        &row.prompt_fragment,
        row.toolset.as_deref(),
        row.preset_id.as_deref(),
        row.budget_override.as_ref(),
    )?)
}

fn unknown_mode(agent_type: AgentType, name: &str) -> StoreError {
    StoreError::not_found(format!("mode {name:?} of {agent_type}"))
}
