//! `attention_requests`: the operator decision queue. Owns create, reads, the
//! open-items roster lookup and resolve-exactly-once ([`resolve_in`] is the
//! one resolving statement, shared with the decision transaction of
//! [`crate::decisions`]). Must never enqueue the resume event or apply a
//! mode change itself: only the decision transaction combines those.

use chrono::{DateTime, Utc};
use genesis_core::{AttentionKind, AttentionStatus};
use serde::Deserialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode, decode_all};
use crate::store::Store;

/// An `attention_requests` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AttentionRequest {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Option<Uuid>,
    pub kind: AttentionKind,
    pub status: AttentionStatus,
    pub title: String,
    pub body: String,
    pub options: serde_json::Value,
    /// SOA-origin requests carry `{"source":"soa","soaInstanceId":...}`.
    pub metadata: serde_json::Value,
    pub resolution: Option<String>,
    pub resolution_notes: Option<String>,
    pub resolved_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
}

/// What [`Attention::create`] needs.
#[derive(Debug, Clone)]
pub struct NewAttentionRequest {
    pub instance_id: Option<Uuid>,
    pub kind: AttentionKind,
    pub title: String,
    pub body: String,
    pub options: serde_json::Value,
    pub metadata: serde_json::Value,
}

/// The result of [`Attention::resolve`]: the row as it now stands and
/// whether this call was the one that resolved it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveOutcome {
    pub request: AttentionRequest,
    pub resolved_now: bool,
}

/// Repository handle, from [`Store::attention`].
pub struct Attention<'a> {
    store: &'a Store,
}

impl Store {
    /// The decision queue.
    pub fn attention(&self) -> Attention<'_> {
        Attention { store: self }
    }
}

impl Attention<'_> {
    /// Raise an attention request.
    pub async fn create(
        &self,
        tenant_id: Uuid,
        new: NewAttentionRequest,
    ) -> Result<AttentionRequest, StoreError> {
        check_text("title", &new.title, 500)?;
        if new.body.len() > 64 * 1024 {
            return Err(StoreError::invalid("body", "must be at most 65536 bytes"));
        }
        if !new.metadata.is_object() {
            return Err(StoreError::invalid("metadata", "must be a JSON object"));
        }
        if !new.options.is_array() {
            return Err(StoreError::invalid("options", "must be a JSON array"));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        if let Some(instance_id) = new.instance_id {
            crate::instances::get_in(tx.conn(), instance_id).await?;
        }
        let row = insert_in(tx.conn(), tenant_id, &new).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Read one request.
    pub async fn get(&self, tenant_id: Uuid, id: Uuid) -> Result<AttentionRequest, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(a) FROM attention_requests a WHERE id = $1")
                .bind(id)
                .fetch_optional(tx.conn())
                .await?;
        tx.commit().await?;
        decode(row.ok_or_else(|| StoreError::not_found("attention request"))?)
    }

    /// The tenant's requests, optionally of one status, oldest first.
    pub async fn list(
        &self,
        tenant_id: Uuid,
        status: Option<AttentionStatus>,
    ) -> Result<Vec<AttentionRequest>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(a) FROM attention_requests a
             WHERE $1::text IS NULL OR status = $1 ORDER BY created_at, id",
        )
        .bind(status.map(|s| s.as_str()))
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// The open escalations a SOA instance raised (the roster half served by
    /// the `metadata->>'soaInstanceId'` expression index).
    pub async fn open_for_soa_instance(
        &self,
        tenant_id: Uuid,
        soa_instance_id: Uuid,
    ) -> Result<Vec<AttentionRequest>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(a) FROM attention_requests a
             WHERE metadata->>'soaInstanceId' = $1 AND status = 'open' ORDER BY created_at, id",
        )
        .bind(soa_instance_id.to_string())
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// Resolve a request exactly once: of concurrent callers exactly one gets
    /// `resolved_now: true`; the others get the resolved row unchanged.
    pub async fn resolve(
        &self,
        tenant_id: Uuid,
        id: Uuid,
        resolution: &str,
        resolution_notes: Option<&str>,
        resolved_by: &str,
    ) -> Result<ResolveOutcome, StoreError> {
        check_resolution(resolution, resolution_notes, resolved_by)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let outcome = resolve_in(tx.conn(), id, resolution, resolution_notes, resolved_by).await?;
        tx.commit().await?;
        Ok(outcome)
    }
}

/// The input limits of a resolve, checked before any statement runs.
pub(crate) fn check_resolution(
    resolution: &str,
    resolution_notes: Option<&str>,
    resolved_by: &str,
) -> Result<(), StoreError> {
    check_text("resolution", resolution, 200)?;
    check_text("resolved_by", resolved_by, 200)?;
    if resolution_notes.is_some_and(|n| n.len() > 64 * 1024) {
        return Err(StoreError::invalid(
            "resolution_notes",
            "must be at most 65536 bytes",
        ));
    }
    Ok(())
}

/// Resolve inside the caller's tenant transaction (inputs already passed
/// [`check_resolution`]). The conditional UPDATE is the arbiter: a
/// concurrent resolver blocks on the row until this transaction ends, then
/// sees it resolved and gets `resolved_now: false`.
pub(crate) async fn resolve_in(
    conn: &mut PgConnection,
    id: Uuid,
    resolution: &str,
    resolution_notes: Option<&str>,
    resolved_by: &str,
) -> Result<ResolveOutcome, StoreError> {
    let row: Option<serde_json::Value> = sqlx::query_scalar(
        "UPDATE attention_requests
            SET status = 'resolved', resolution = $2, resolution_notes = $3, resolved_by = $4,
                resolved_at = now()
          WHERE id = $1 AND status = 'open'
         RETURNING to_jsonb(attention_requests.*)",
    )
    .bind(id)
    .bind(resolution)
    .bind(resolution_notes)
    .bind(resolved_by)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = row {
        return Ok(ResolveOutcome {
            request: decode(row)?,
            resolved_now: true,
        });
    }
    let row: Option<serde_json::Value> =
        sqlx::query_scalar("SELECT to_jsonb(a) FROM attention_requests a WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(ResolveOutcome {
        request: decode(row.ok_or_else(|| StoreError::not_found("attention request"))?)?,
        resolved_now: false,
    })
}

/// Insert an open request on the caller's tenant transaction (a governed
/// tool's handler, [`Attention::create`]); the caller has checked its
/// fields.
pub async fn insert_in(
    conn: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    new: &NewAttentionRequest,
) -> Result<AttentionRequest, StoreError> {
    let row: serde_json::Value = sqlx::query_scalar(
        "INSERT INTO attention_requests (tenant_id, instance_id, kind, title, body, options, metadata)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING to_jsonb(attention_requests.*)",
    )
    .bind(tenant_id)
    .bind(new.instance_id)
    .bind(new.kind.as_str())
    .bind(&new.title)
    .bind(&new.body)
    .bind(&new.options)
    .bind(&new.metadata)
    .fetch_one(conn)
    .await?;
    decode(row)
}

/// The open `redaction` request `instance_id` raised for the overlay of
/// preset `preset_id` whose SHA-256 was `base_overlay_sha256` (metadata
/// `presetId` and `baseOverlaySha256`), the oldest if several, on the
/// caller's tenant transaction: `redactor_propose_overlay` points a repeat
/// at it instead of queueing a duplicate. Reads only.
pub async fn open_redaction_in(
    conn: &mut PgConnection,
    instance_id: Uuid,
    preset_id: &str,
    base_overlay_sha256: &str,
) -> Result<Option<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM attention_requests
          WHERE kind = $1 AND status = 'open' AND instance_id = $2
            AND metadata->>'presetId' = $3 AND metadata->>'baseOverlaySha256' = $4
          ORDER BY created_at LIMIT 1",
    )
    .bind(AttentionKind::Redaction.as_str())
    .bind(instance_id)
    .bind(preset_id)
    .bind(base_overlay_sha256)
    .fetch_optional(conn)
    .await?)
}
