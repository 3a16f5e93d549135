//! Tenant administration (platform-wide, on the system pool): create, read,
//! list, the standing-agents switch and feature flags. Must never be reached
//! with a tenant-bound operator's authority without the caller checking it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use genesis_core::TenantStatus;
use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode, decode_all};
use crate::store::Store;

/// The feature flags a tenant can toggle (spec "Feature flags").
pub const FEATURE_FLAGS: &[&str] = &["prompt-redactor", "windows-pool"];

/// A `tenants` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Tenant {
    pub id: Uuid,
    pub name: String,
    /// The tenant level of the standing-agents gate (default off).
    pub standing_agents_enabled: bool,
    pub feature_flags: BTreeMap<String, bool>,
    pub status: TenantStatus,
    pub created_at: DateTime<Utc>,
}

impl Tenant {
    /// The tenant level of the standing-agents gate: switched on, and the
    /// tenant active. The deploy level is the caller's.
    pub fn standing_agents_on(&self) -> bool {
        self.standing_agents_enabled && self.status == TenantStatus::Active
    }

    /// Whether a feature flag is on; unknown or absent flags are off.
    pub fn feature_enabled(&self, flag: &str) -> bool {
        self.feature_flags.get(flag).copied().unwrap_or(false)
    }
}

/// The statement of [`Tenants::census`] (public so the benchmark can show
/// its plan). `'Soa'` is `AgentType::Soa`'s stored name, the predicate of
/// the partial index `agent_instances_soa`, which the
/// subquery reads.
pub const CENSUS_SQL: &str = "SELECT t.id, t.status, t.standing_agents_enabled,
        (SELECT i.id FROM agent_instances i
          WHERE i.tenant_id = t.id AND i.agent_type = 'Soa'
          ORDER BY i.created_at, i.id LIMIT 1)
   FROM tenants t ORDER BY t.created_at, t.id";

/// One tenant as the bootstrap re-scan sees it ([`Tenants::census`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantCensus {
    pub id: Uuid,
    /// `tenants.status`.
    pub status: TenantStatus,
    /// The tenant level of the standing-agents gate.
    pub standing_agents_enabled: bool,
    /// The tenant's oldest SOA, of any status; `None` when it has none.
    pub soa_id: Option<Uuid>,
}

/// Repository handle, from [`Store::tenants`].
pub struct Tenants<'a> {
    store: &'a Store,
}

impl Store {
    /// Tenant administration.
    pub fn tenants(&self) -> Tenants<'_> {
        Tenants { store: self }
    }
}

impl Tenants<'_> {
    /// Create a tenant; a duplicate name is [`StoreError::Conflict`].
    pub async fn create(&self, name: &str) -> Result<Tenant, StoreError> {
        check_text("name", name, 200)?;
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO tenants (name) VALUES ($1) RETURNING to_jsonb(tenants.*)",
        )
        .bind(name.trim())
        .fetch_one(self.store.system_pool())
        .await?;
        decode(row)
    }

    /// Read one tenant.
    pub async fn get(&self, id: Uuid) -> Result<Tenant, StoreError> {
        let row: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(t) FROM tenants t WHERE id = $1")
                .bind(id)
                .fetch_optional(self.store.system_pool())
                .await?;
        decode(row.ok_or_else(|| StoreError::not_found("tenant"))?)
    }

    /// Every tenant with its oldest SOA (any status), oldest tenant first,
    /// in one statement. The bootstrap re-scan reads this instead of a tenant
    /// read, a lock and an instance list per tenant, so a re-scan that finds
    /// nothing missing costs one query however many tenants there are.
    pub async fn census(&self) -> Result<Vec<TenantCensus>, StoreError> {
        let rows: Vec<(Uuid, String, bool, Option<Uuid>)> = sqlx::query_as(CENSUS_SQL)
            .fetch_all(self.store.system_pool())
            .await?;
        rows.into_iter()
            .map(|(id, status, standing_agents_enabled, soa_id)| {
                Ok(TenantCensus {
                    id,
                    status: status.parse()?,
                    standing_agents_enabled,
                    soa_id,
                })
            })
            .collect()
    }

    /// Every tenant, oldest first.
    pub async fn list(&self) -> Result<Vec<Tenant>, StoreError> {
        let rows: Vec<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(t) FROM tenants t ORDER BY created_at, id")
                .fetch_all(self.store.system_pool())
                .await?;
        decode_all(rows)
    }

    /// Flip the tenant level of the standing-agents gate.
    pub async fn set_standing_agents_enabled(
        &self,
        id: Uuid,
        enabled: bool,
    ) -> Result<Tenant, StoreError> {
        let row: Option<serde_json::Value> = sqlx::query_scalar(
            "UPDATE tenants SET standing_agents_enabled = $2 WHERE id = $1 RETURNING to_jsonb(tenants.*)",
        )
        .bind(id)
        .bind(enabled)
        .fetch_optional(self.store.system_pool())
        .await?;
        decode(row.ok_or_else(|| StoreError::not_found("tenant"))?)
    }

    /// Set one feature flag; a flag outside [`FEATURE_FLAGS`] is refused.
    pub async fn set_feature_flag(
        &self,
        id: Uuid,
        flag: &str,
        enabled: bool,
    ) -> Result<Tenant, StoreError> {
        if !FEATURE_FLAGS.contains(&flag) {
            return Err(StoreError::invalid(
                "flag",
                format!(
                    "unknown feature flag {flag:?}; known: {}",
                    FEATURE_FLAGS.join(", ")
                ),
            ));
        }
        let row: Option<serde_json::Value> = sqlx::query_scalar(
            "UPDATE tenants SET feature_flags = feature_flags || jsonb_build_object($2::text, $3::boolean)
             WHERE id = $1 RETURNING to_jsonb(tenants.*)",
        )
        .bind(id)
        .bind(flag)
        .bind(enabled)
        .fetch_optional(self.store.system_pool())
        .await?;
        decode(row.ok_or_else(|| StoreError::not_found("tenant"))?)
    }
}
