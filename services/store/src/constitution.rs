//! `constitution_rules`: a tenant's constitution as stored rows, decoded into
//! genesis-core's [`ConstitutionRule`], plus the call counts the action-limit
//! rules need (from `tool_invocations`). Writes validate each rule with
//! genesis-core before the insert. Must never evaluate a rule itself (the
//! check is genesis-core's pure function) nor cache: callers own caching.

use genesis_core::constitution::{ConstitutionRule, RuleKind, validate_rule};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::decode_all;
use crate::store::Store;

/// What [`insert`] needs: a rule without its id (the database assigns it).
#[derive(Debug, Clone)]
pub struct NewConstitutionRule {
    pub name: String,
    pub kind: RuleKind,
    pub description: String,
    pub tools: Vec<String>,
}

const RULE_JSON: &str = "jsonb_build_object('id', id::text, 'name', name, 'description', description, \
     'tools', tools) || params || jsonb_build_object('kind', kind)";

/// Insert a rule for `tenant_id` after genesis-core validated it (a bad
/// pattern or an empty limit is refused here, nothing written).
pub async fn insert(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    rule: &NewConstitutionRule,
) -> Result<ConstitutionRule, StoreError> {
    let candidate = ConstitutionRule {
        id: "new".to_owned(),
        name: rule.name.clone(),
        kind: rule.kind.clone(),
        description: rule.description.clone(),
        tools: rule.tools.clone(),
    };
    validate_rule(&candidate)?;
    let mut params = serde_json::to_value(&rule.kind)?;
    if let Some(obj) = params.as_object_mut() {
        obj.remove("kind");
    }
    let row: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "INSERT INTO constitution_rules (tenant_id, name, kind, params, description, tools)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {RULE_JSON}"
    )))
    .bind(tenant_id)
    .bind(&rule.name)
    .bind(rule.kind.as_str())
    .bind(&params)
    .bind(&rule.description)
    .bind(serde_json::to_value(&rule.tools)?)
    .fetch_one(&mut *conn)
    .await?;
    Ok(serde_json::from_value(row)?)
}

/// Every enabled rule of the transaction's tenant, oldest first (the order
/// violations are reported in).
pub async fn list_enabled(conn: &mut PgConnection) -> Result<Vec<ConstitutionRule>, StoreError> {
    let rows: Vec<serde_json::Value> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {RULE_JSON} FROM constitution_rules WHERE enabled ORDER BY created_at, id"
    )))
    .fetch_all(&mut *conn)
    .await?;
    decode_all(rows)
}

/// Enable or disable a rule; `NotFound` for an unknown id (or another
/// tenant's).
pub async fn set_enabled(
    conn: &mut PgConnection,
    id: Uuid,
    enabled: bool,
) -> Result<(), StoreError> {
    let done =
        sqlx::query("UPDATE constitution_rules SET enabled = $2, updated_at = now() WHERE id = $1")
            .bind(id)
            .bind(enabled)
            .execute(&mut *conn)
            .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::not_found(format!("constitution rule {id}")));
    }
    Ok(())
}

/// Earlier unblocked calls of `tool` by `instance_id`: within `session`
/// (the tick) and since the start of the current UTC day. The action-limit
/// rules count these.
pub async fn call_counts(
    conn: &mut PgConnection,
    instance_id: Uuid,
    session: Uuid,
    tool: &str,
) -> Result<(u32, u32), StoreError> {
    let (tick, day): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE session = $2),
                count(*) FILTER (WHERE created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
         FROM tool_invocations
         WHERE instance_id = $1 AND tool_name = $3 AND NOT blocked",
    )
    .bind(instance_id)
    .bind(session)
    .bind(tool)
    .fetch_one(&mut *conn)
    .await?;
    let clamp = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
    Ok((clamp(tick), clamp(day)))
}

/// Repository handle, from [`Store::constitution`].
pub struct Constitution<'a> {
    store: &'a Store,
}

impl Store {
    /// The tenant constitution.
    pub fn constitution(&self) -> Constitution<'_> {
        Constitution { store: self }
    }
}

impl Constitution<'_> {
    /// [`insert`] in its own tenant transaction.
    pub async fn insert(
        &self,
        tenant_id: Uuid,
        rule: &NewConstitutionRule,
    ) -> Result<ConstitutionRule, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row = insert(tx.conn(), tenant_id, rule).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// [`list_enabled`] in its own tenant transaction (what the governance
    /// gate's cache loads).
    pub async fn list_enabled(&self, tenant_id: Uuid) -> Result<Vec<ConstitutionRule>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows = list_enabled(tx.conn()).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// [`set_enabled`] in its own tenant transaction.
    pub async fn set_enabled(
        &self,
        tenant_id: Uuid,
        id: Uuid,
        enabled: bool,
    ) -> Result<(), StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        set_enabled(tx.conn(), id, enabled).await?;
        tx.commit().await
    }
}
