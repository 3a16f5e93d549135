//! `dashboard_sessions`: the operator web UI's sign-in sessions. An operator
//! token is exchanged once for a random session secret; only its SHA-256 is
//! stored, beside the session's tenant and its CSRF token. Lookups run on the
//! system pool (the tenant is not known until the session is) and join the
//! token the session came from, so a revoked or expired token ends its
//! sessions at once. Must never store or log a raw session secret or token.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::decode;
use crate::store::Store;

/// A usable session with what the dashboard needs of its token.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DashboardSession {
    pub id: Uuid,
    /// The one tenant this session shows.
    pub tenant_id: Uuid,
    pub token_id: Uuid,
    /// The token's label (the actor of audited writes).
    pub label: String,
    /// `None`: the token is platform-wide (it chose `tenant_id` at sign-in).
    pub token_tenant_id: Option<Uuid>,
    pub csrf_token: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Repository handle, from [`Store::sessions`].
pub struct Sessions<'a> {
    store: &'a Store,
}

impl Store {
    /// Dashboard sign-in sessions.
    pub fn sessions(&self) -> Sessions<'_> {
        Sessions { store: self }
    }
}

fn check_hash(field: &str, v: &str) -> Result<(), StoreError> {
    if v.len() == 64
        && v.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(StoreError::invalid(
            field,
            "must be 64 lower-case hex digits",
        ))
    }
}

const SELECT_USABLE: &str = "SELECT jsonb_build_object(
        'id', s.id, 'tenant_id', s.tenant_id, 'token_id', s.token_id,
        'label', t.label, 'token_tenant_id', t.tenant_id, 'csrf_token', s.csrf_token,
        'created_at', s.created_at, 'expires_at', s.expires_at)
      FROM dashboard_sessions s JOIN api_tokens t ON t.id = s.token_id
     WHERE s.session_sha256 = $1
       AND s.revoked_at IS NULL AND s.expires_at > now()
       AND t.scope = 'operator' AND t.revoked_at IS NULL
       AND (t.expires_at IS NULL OR t.expires_at > now())
       AND (t.tenant_id IS NULL OR t.tenant_id = s.tenant_id)";

impl Sessions<'_> {
    /// Open a session for `token_id` on `tenant_id` until `expires_at`
    /// (clamped to the token's own expiry). The token must be a usable
    /// operator token bound to that tenant or platform-wide; anything else is
    /// [`StoreError::NotFound`] and nothing is written.
    pub async fn open(
        &self,
        tenant_id: Uuid,
        token_id: Uuid,
        session_sha256: &str,
        csrf_token: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<DashboardSession, StoreError> {
        check_hash("session_sha256", session_sha256)?;
        if !(32..=128).contains(&csrf_token.len()) {
            return Err(StoreError::invalid("csrf_token", "must be 32 to 128 bytes"));
        }
        if expires_at <= Utc::now() {
            return Err(StoreError::invalid("expires_at", "must be in the future"));
        }
        let id: Option<Uuid> = sqlx::query_scalar(
            "INSERT INTO dashboard_sessions (tenant_id, token_id, session_sha256, csrf_token, expires_at)
             SELECT $1, t.id, $3, $4, LEAST($5, coalesce(t.expires_at, $5))
               FROM api_tokens t JOIN tenants n ON n.id = $1
              WHERE t.id = $2 AND t.scope = 'operator' AND t.revoked_at IS NULL
                AND (t.expires_at IS NULL OR t.expires_at > now())
                AND (t.tenant_id IS NULL OR t.tenant_id = $1)
             RETURNING id",
        )
        .bind(tenant_id)
        .bind(token_id)
        .bind(session_sha256)
        .bind(csrf_token)
        .bind(expires_at)
        .fetch_optional(self.store.system_pool())
        .await?;
        if id.is_none() {
            return Err(StoreError::not_found("operator token or tenant"));
        }
        self.authenticate(session_sha256).await
    }

    /// The usable session of this hash: unknown, expired, signed-out
    /// sessions and sessions whose token is no longer usable are all
    /// [`StoreError::NotFound`].
    pub async fn authenticate(&self, session_sha256: &str) -> Result<DashboardSession, StoreError> {
        check_hash("session_sha256", session_sha256)?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(SELECT_USABLE)
            .bind(session_sha256)
            .fetch_optional(self.store.system_pool())
            .await?;
        decode(row.ok_or_else(|| StoreError::not_found("session"))?)
    }

    /// Sign out: returns whether this call ended a live session.
    pub async fn revoke(&self, session_sha256: &str) -> Result<bool, StoreError> {
        check_hash("session_sha256", session_sha256)?;
        let n = sqlx::query(
            "UPDATE dashboard_sessions SET revoked_at = now()
              WHERE session_sha256 = $1 AND revoked_at IS NULL",
        )
        .bind(session_sha256)
        .execute(self.store.system_pool())
        .await?
        .rows_affected();
        Ok(n > 0)
    }
}
