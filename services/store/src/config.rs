//! `system_configs`: the DB-first configuration layer (spec §3.6). Reads
//! resolve tenant-scoped over global over none. A tenant row also holds the
//! platform's value for the tenant, which only a platform write sets:
//! [`Config::set`] is the platform's write, [`Config::set_by_tenant`]
//! a tenant operator's. Must never cache: a write takes effect on the very
//! next read (the next tick).

use std::collections::BTreeMap;

use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::check_text;
use crate::store::Store;

/// Longest config value accepted, in bytes.
pub const MAX_CONFIG_VALUE_BYTES: usize = 16 * 1024;

/// The prefix under which `genesis_effective_configs` returns the
/// platform's value of a key beside its effective value.
pub const PLATFORM_PREFIX: &str = "@platform:";

/// A tenant's configuration as every reader gets it: each key's effective
/// value (the tenant's row over the global one) and, apart, the platform's
/// value for the tenant (the platform's row for it, else the global row),
/// which bounds the platform-only keys (genesis-core `ceilings`). For the
/// global layer both are the global rows.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "BTreeMap<String, String>")]
pub struct TenantConfigs {
    /// Every key's effective value.
    pub effective: BTreeMap<String, String>,
    /// The platform's value of every key that has one.
    pub platform: BTreeMap<String, String>,
}

impl From<BTreeMap<String, String>> for TenantConfigs {
    /// Split `genesis_effective_configs`' one object at [`PLATFORM_PREFIX`].
    fn from(all: BTreeMap<String, String>) -> Self {
        let mut out = Self::default();
        for (key, value) in all {
            match key.strip_prefix(PLATFORM_PREFIX) {
                Some(k) => out.platform.insert(k.to_owned(), value),
                None => out.effective.insert(key, value),
            };
        }
        out
    }
}

/// Repository handle, from [`Store::config`].
pub struct Config<'a> {
    store: &'a Store,
}

impl Store {
    /// DB-first configuration.
    pub fn config(&self) -> Config<'_> {
        Config { store: self }
    }
}

fn check_value(key: &str, value: &str) -> Result<(), StoreError> {
    check_text("key", key, 200)?;
    if value.len() > MAX_CONFIG_VALUE_BYTES {
        return Err(StoreError::invalid(
            "value",
            format!("must be at most {MAX_CONFIG_VALUE_BYTES} bytes"),
        ));
    }
    Ok(())
}

impl Config<'_> {
    /// The effective value of `key` for a tenant: its own row, else the
    /// global row, else `None`. `tenant_id` `None` reads the global layer.
    pub async fn get(
        &self,
        tenant_id: Option<Uuid>,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        check_text("key", key, 200)?;
        let sql = "SELECT value FROM system_configs WHERE key = $1 AND (tenant_id IS NULL OR tenant_id = $2)
                   ORDER BY tenant_id NULLS LAST LIMIT 1";
        match tenant_id {
            Some(t) => {
                let mut tx = self.store.tenant_tx(t).await?;
                let v: Option<String> = sqlx::query_scalar(sql)
                    .bind(key)
                    .bind(t)
                    .fetch_optional(tx.conn())
                    .await?;
                tx.commit().await?;
                Ok(v)
            }
            None => Ok(sqlx::query_scalar(sql)
                .bind(key)
                .bind(None::<Uuid>)
                .fetch_optional(self.store.system_pool())
                .await?),
        }
    }

    /// Every effective key/value for a tenant (tenant rows over global ones).
    pub async fn effective(
        &self,
        tenant_id: Option<Uuid>,
    ) -> Result<BTreeMap<String, String>, StoreError> {
        Ok(self.layers(tenant_id).await?.effective)
    }

    /// A tenant's effective values and the platform's values for it, ready
    /// for `AgentDispatcherOptions::for_tenant`; `None` reads the global layer.
    pub async fn layers(&self, tenant_id: Option<Uuid>) -> Result<TenantConfigs, StoreError> {
        let sql = "SELECT genesis_effective_configs($1)";
        let raw: serde_json::Value = match tenant_id {
            Some(t) => {
                let mut tx = self.store.tenant_tx(t).await?;
                let raw = sqlx::query_scalar(sql).bind(t).fetch_one(tx.conn()).await?;
                tx.commit().await?;
                raw
            }
            None => {
                sqlx::query_scalar(sql)
                    .bind(None::<Uuid>)
                    .fetch_one(self.store.system_pool())
                    .await?
            }
        };
        Ok(serde_json::from_value(raw)?)
    }

    /// The platform's write: `tenant_id` `None` writes the global layer
    /// (system pool), otherwise the platform's value for that tenant, which
    /// is also its value until the tenant's operator sets one within it
    /// (tenant-scoped, RLS-checked).
    pub async fn set(
        &self,
        tenant_id: Option<Uuid>,
        key: &str,
        value: &str,
    ) -> Result<(), StoreError> {
        check_value(key, value)?;
        let sql = "INSERT INTO system_configs (tenant_id, key, value, platform_value)
                   VALUES ($1, $2, $3, CASE WHEN $1::uuid IS NOT NULL THEN $3 END)
                   ON CONFLICT ((coalesce(tenant_id, '00000000-0000-0000-0000-000000000000'::uuid)), key)
                   DO UPDATE SET value = EXCLUDED.value, platform_value = EXCLUDED.platform_value,
                                 updated_at = now()";
        self.write(tenant_id, sql, key, value).await
    }

    /// A tenant operator's write of its own value; the platform's value for
    /// the tenant stays as it was. The caller has checked the value against
    /// it (genesis-core `ceilings::check_tenant_value`).
    pub async fn set_by_tenant(
        &self,
        tenant_id: Uuid,
        key: &str,
        value: &str,
    ) -> Result<(), StoreError> {
        check_value(key, value)?;
        let sql = "INSERT INTO system_configs (tenant_id, key, value) VALUES ($1, $2, $3)
                   ON CONFLICT ((coalesce(tenant_id, '00000000-0000-0000-0000-000000000000'::uuid)), key)
                   DO UPDATE SET value = EXCLUDED.value, updated_at = now()";
        self.write(Some(tenant_id), sql, key, value).await
    }

    async fn write(
        &self,
        tenant_id: Option<Uuid>,
        sql: &'static str,
        key: &str,
        value: &str,
    ) -> Result<(), StoreError> {
        match tenant_id {
            Some(t) => {
                let mut tx = self.store.tenant_tx(t).await?;
                sqlx::query(sql)
                    .bind(t)
                    .bind(key)
                    .bind(value)
                    .execute(tx.conn())
                    .await?;
                tx.commit().await?;
            }
            None => {
                sqlx::query(sql)
                    .bind(None::<Uuid>)
                    .bind(key)
                    .bind(value)
                    .execute(self.store.system_pool())
                    .await?;
            }
        }
        Ok(())
    }

    /// Remove a value from one layer; returns whether a row was removed.
    pub async fn delete(&self, tenant_id: Option<Uuid>, key: &str) -> Result<bool, StoreError> {
        check_text("key", key, 200)?;
        let sql = "DELETE FROM system_configs WHERE key = $1 AND tenant_id IS NOT DISTINCT FROM $2";
        let n = match tenant_id {
            Some(t) => {
                let mut tx = self.store.tenant_tx(t).await?;
                let n = sqlx::query(sql)
                    .bind(key)
                    .bind(t)
                    .execute(tx.conn())
                    .await?
                    .rows_affected();
                tx.commit().await?;
                n
            }
            None => sqlx::query(sql)
                .bind(key)
                .bind(None::<Uuid>)
                .execute(self.store.system_pool())
                .await?
                .rows_affected(),
        };
        Ok(n > 0)
    }
}
