//! `api_tokens`: SHA-256 hashes of bearer tokens with scope, tenant, the
//! tenants an agent-pod token may serve, the coding task a coder token is
//! bound to, expiry and revocation. Lookups run
//! on the system pool (the tenant is not known until the token is). Must
//! never store or log a raw token.

use chrono::{DateTime, Utc};
use genesis_core::{PodTenants, TokenScope};
use serde::{Deserialize, Deserializer};
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::decode;
use crate::store::Store;

/// An `api_tokens` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ApiToken {
    pub id: Uuid,
    /// `None`: a platform-wide operator token.
    pub tenant_id: Option<Uuid>,
    pub scope: TokenScope,
    /// The tenants an agent-pod token may act for (empty: every tenant);
    /// always empty for an operator token.
    #[serde(deserialize_with = "pod_tenants")]
    pub pod_tenants: PodTenants,
    pub token_sha256: String,
    pub label: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// The stored set, through the one constructor (the table keeps it sorted,
/// unique and bounded; a row breaking that is refused, not trusted).
fn pod_tenants<'de, D: Deserializer<'de>>(d: D) -> Result<PodTenants, D::Error> {
    let ids = Vec::<Uuid>::deserialize(d)?;
    PodTenants::new("pod_tenants", ids).map_err(serde::de::Error::custom)
}

impl ApiToken {
    /// Neither revoked nor expired at `now`.
    pub fn is_usable(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| now < e)
    }

    /// The one gate decision on a row an index lookup found for the
    /// presented `token`, for a surface open to `scope` (both gRPC edges
    /// call it). The stored hash is compared with the token's in constant
    /// time first: the lookup's equality ran inside PostgreSQL, and this
    /// keeps the comparison of secrets on the request path free of a timing
    /// signal whatever index, collation or cache served the row. A row that
    /// does not match, or is revoked or expired, is [`Admission::Unknown`],
    /// exactly like no row.
    pub fn admit(&self, token: &str, scope: TokenScope, now: DateTime<Utc>) -> Admission {
        if !genesis_core::token::token_matches_hash(token, &self.token_sha256)
            || !self.is_usable(now)
        {
            Admission::Unknown
        } else if self.scope == scope {
            Admission::Admitted
        } else {
            Admission::OtherScope
        }
    }
}

/// What [`ApiToken::admit`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The token is this usable row, of the surface's scope.
    Admitted,
    /// Not this row, or not usable: answered as an unknown token.
    Unknown,
    /// A usable token of another scope: answered as permission denied.
    OtherScope,
}

/// The stored form of a raw token: lower-case SHA-256 hex (the one
/// definition is genesis-core's token rules).
pub use genesis_core::token::token_sha256 as hash_token;

/// A stored hash is 64 lower-case hex digits.
fn check_hash(token_sha256: &str) -> Result<(), StoreError> {
    if token_sha256.len() != 64
        || !token_sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(StoreError::invalid(
            "token_sha256",
            "must be 64 lower-case hex digits",
        ));
    }
    Ok(())
}

/// Repository handle, from [`Store::tokens`].
pub struct Tokens<'a> {
    store: &'a Store,
}

impl Store {
    /// API tokens.
    pub fn tokens(&self) -> Tokens<'_> {
        Tokens { store: self }
    }
}

impl Tokens<'_> {
    /// Store a token hash admitting every tenant its scope allows; see
    /// [`Tokens::insert_for_tenants`].
    pub async fn insert(
        &self,
        tenant_id: Option<Uuid>,
        scope: TokenScope,
        token_sha256: &str,
        label: &str,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<ApiToken, StoreError> {
        self.insert_for_tenants(
            tenant_id,
            scope,
            &PodTenants::all(),
            token_sha256,
            label,
            expires_at,
        )
        .await
    }

    /// Store a token hash; an agent-pod token may name the tenants it serves
    /// (`pod_tenants`, empty: all). A malformed hash, a tenant-bound
    /// agent-pod token and an operator token with a tenant set are refused;
    /// a duplicate is [`StoreError::Conflict`]; an unknown tenant (its own
    /// or one of the set, which is named) is [`StoreError::NotFound`].
    pub async fn insert_for_tenants(
        &self,
        tenant_id: Option<Uuid>,
        scope: TokenScope,
        pod_tenants: &PodTenants,
        token_sha256: &str,
        label: &str,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<ApiToken, StoreError> {
        check_hash(token_sha256)?;
        if label.len() > 200 {
            return Err(StoreError::invalid("label", "must be at most 200 bytes"));
        }
        if scope == TokenScope::AgentPod && tenant_id.is_some() {
            return Err(StoreError::invalid(
                "tenant_id",
                "agent-pod tokens are platform-wide",
            ));
        }
        if scope != TokenScope::AgentPod && !pod_tenants.is_all() {
            return Err(StoreError::invalid(
                "pod_tenants",
                "only agent-pod tokens carry a tenant set",
            ));
        }
        if scope == TokenScope::Coder {
            return Err(StoreError::invalid(
                "scope",
                "coder tokens are minted by SpawnCoder for one coding task",
            ));
        }
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO api_tokens (tenant_id, scope, pod_tenants, token_sha256, label, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING to_jsonb(api_tokens.*)",
        )
        .bind(tenant_id)
        .bind(scope.as_str())
        .bind(pod_tenants.ids())
        .bind(token_sha256)
        .bind(label)
        .bind(expires_at)
        .fetch_one(self.store.system_pool())
        .await?;
        decode(row)
    }

    /// Find a token by hash, whatever its state; callers check
    /// [`ApiToken::is_usable`] and scope/tenant.
    pub async fn find_by_hash(&self, token_sha256: &str) -> Result<Option<ApiToken>, StoreError> {
        let row: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(t) FROM api_tokens t WHERE token_sha256 = $1")
                .bind(token_sha256)
                .fetch_optional(self.store.system_pool())
                .await?;
        row.map(decode).transpose()
    }

    /// The usable token of this hash: unknown, revoked and expired tokens
    /// are all [`StoreError::NotFound`] (the edge answers `UNAUTHENTICATED`).
    pub async fn authenticate(&self, token_sha256: &str) -> Result<ApiToken, StoreError> {
        match self.find_by_hash(token_sha256).await? {
            Some(t) if t.is_usable(Utc::now()) => Ok(t),
            _ => Err(StoreError::not_found("token")),
        }
    }

    /// Store the hash of a coder token: scope `coder`, bound to one coding
    /// task of one tenant, expiring at `expires_at`. A task of another
    /// tenant (or unknown) is [`StoreError::NotFound`]; nothing is written.
    pub async fn insert_coder(
        &self,
        tenant_id: Uuid,
        coding_task_id: Uuid,
        token_sha256: &str,
        label: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<ApiToken, StoreError> {
        check_hash(token_sha256)?;
        if label.len() > 200 {
            return Err(StoreError::invalid("label", "must be at most 200 bytes"));
        }
        // The task is read under its tenant's row-level security, so a task
        // id of another tenant binds nothing.
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let known: Option<Uuid> = sqlx::query_scalar("SELECT id FROM coding_tasks WHERE id = $1")
            .bind(coding_task_id)
            .fetch_optional(tx.conn())
            .await?;
        tx.commit().await?;
        if known.is_none() {
            return Err(StoreError::not_found("coding task"));
        }
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO api_tokens (tenant_id, scope, token_sha256, label, expires_at, coding_task_id)
             VALUES ($1, 'coder', $2, $3, $4, $5) RETURNING to_jsonb(api_tokens.*)",
        )
        .bind(tenant_id)
        .bind(token_sha256)
        .bind(label)
        .bind(expires_at)
        .bind(coding_task_id)
        .fetch_one(self.store.system_pool())
        .await?;
        decode(row)
    }

    /// The usable token of this hash with the coding task a coder token is
    /// bound to (`None` for every other scope), from one lookup; unknown,
    /// revoked and expired tokens are [`StoreError::NotFound`].
    pub async fn authenticate_bound(
        &self,
        token_sha256: &str,
    ) -> Result<(ApiToken, Option<Uuid>), StoreError> {
        let row: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(t) FROM api_tokens t WHERE token_sha256 = $1")
                .bind(token_sha256)
                .fetch_optional(self.store.system_pool())
                .await?;
        let Some(row) = row else {
            return Err(StoreError::not_found("token"));
        };
        let task: Option<Uuid> = match row.get("coding_task_id") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(decode(v.clone())?),
        };
        let token: ApiToken = decode(row)?;
        if !token.is_usable(Utc::now()) {
            return Err(StoreError::not_found("token"));
        }
        Ok((token, task))
    }

    /// Revoke every live token bound to a coding task of the tenant (the
    /// task settled or its coder was stopped); returns how many this call
    /// revoked.
    pub async fn revoke_for_task(
        &self,
        tenant_id: Uuid,
        coding_task_id: Uuid,
    ) -> Result<u64, StoreError> {
        let n = sqlx::query(
            "UPDATE api_tokens SET revoked_at = now()
              WHERE tenant_id = $1 AND coding_task_id = $2 AND revoked_at IS NULL",
        )
        .bind(tenant_id)
        .bind(coding_task_id)
        .execute(self.store.system_pool())
        .await?
        .rows_affected();
        Ok(n)
    }

    /// Revoke a token; returns whether this call revoked it.
    pub async fn revoke(&self, id: Uuid) -> Result<bool, StoreError> {
        let n = sqlx::query(
            "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
        )
        .bind(id)
        .execute(self.store.system_pool())
        .await?
        .rows_affected();
        Ok(n > 0)
    }

    /// Token metadata by id (system pool), whatever its state.
    pub async fn get(&self, id: Uuid) -> Result<ApiToken, StoreError> {
        let row: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(t) FROM api_tokens t WHERE id = $1")
                .bind(id)
                .fetch_optional(self.store.system_pool())
                .await?;
        decode(row.ok_or_else(|| StoreError::not_found("token"))?)
    }

    /// The tokens of one tenant (`Some`) or the platform-wide ones (`None`),
    /// oldest first.
    pub async fn list(&self, tenant_id: Option<Uuid>) -> Result<Vec<ApiToken>, StoreError> {
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(t) FROM api_tokens t WHERE tenant_id IS NOT DISTINCT FROM $1
             ORDER BY created_at, id",
        )
        .bind(tenant_id)
        .fetch_all(self.store.system_pool())
        .await?;
        rows.into_iter().map(decode).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(token: &str, scope: TokenScope) -> ApiToken {
        ApiToken {
            id: Uuid::new_v4(),
            tenant_id: None,
            scope,
            pod_tenants: PodTenants::all(),
            token_sha256: hash_token(token),
            label: "t".into(),
            expires_at: None,
            revoked_at: None,
            created_at: Utc::now(),
        }
    }

    #[test]
    fn admit_matches_the_hash_then_usability_then_scope() {
        let now = Utc::now();
        let token = genesis_core::token::token_from_bytes([1; genesis_core::token::TOKEN_BYTES]);
        let pod = row(&token, TokenScope::AgentPod);
        assert_eq!(
            pod.admit(&token, TokenScope::AgentPod, now),
            Admission::Admitted
        );
        assert_eq!(
            pod.admit(&token, TokenScope::Operator, now),
            Admission::OtherScope
        );
        // A row whose hash is another token's is no row at all, whatever
        // its scope: the lookup that found it is not trusted.
        let other = genesis_core::token::token_from_bytes([2; genesis_core::token::TOKEN_BYTES]);
        assert_eq!(
            pod.admit(&other, TokenScope::AgentPod, now),
            Admission::Unknown
        );
        assert_eq!(
            pod.admit(&other, TokenScope::Operator, now),
            Admission::Unknown
        );
        // Upper-case stored hex still matches (hex compares case-insensitively).
        let mut upper = pod.clone();
        upper.token_sha256 = upper.token_sha256.to_ascii_uppercase();
        assert_eq!(
            upper.admit(&token, TokenScope::AgentPod, now),
            Admission::Admitted
        );
        let mut expired = pod.clone();
        expired.expires_at = Some(now - chrono::Duration::seconds(1));
        assert_eq!(
            expired.admit(&token, TokenScope::AgentPod, now),
            Admission::Unknown
        );
        let mut revoked = pod.clone();
        revoked.revoked_at = Some(now);
        assert_eq!(
            revoked.admit(&token, TokenScope::Operator, now),
            Admission::Unknown
        );
    }
}
