//! Windows-lane holds (spec §2.3): the one Windows machine a (tenant,
//! holder) holds, shared by every control replica. Owns claiming a hold
//! (exactly one concurrent claimer wins; a lapsed claim or an expired lease
//! is taken over), filling a claim with the pool's lease, and removing or
//! restoring a hold under its revision, judged by the database's clock. Must
//! never call the pool, decide when to lease or release (the Windows lane
//! does), nor change a hold whose revision the caller did not name: the
//! revision is the fence that keeps a stale replica off a newer hold.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode};
use crate::store::Store;

/// Longest holder (a coder or task id) accepted.
pub const MAX_HOLDER_BYTES: usize = 256;
/// Longest lease id, session id or host accepted from the pool.
pub const MAX_LEASE_FIELD_BYTES: usize = 512;
/// How often a claim is retried when the row it lost to vanished before it
/// could be read (released in between); more means a pathological churn.
const CLAIM_ATTEMPTS: usize = 5;

/// The hold's state: claimed and being leased, or holding a lease.
pub const HOLD_STATES: &[&str] = &["leasing", "held"];

/// A `windows_holds` row, with whether it lapsed by the database's clock.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WindowsHoldRow {
    pub tenant_id: Uuid,
    pub holder: String,
    /// The fence: drawn from one sequence per claim, never repeated.
    pub revision: i64,
    /// `leasing` or `held`.
    pub state: String,
    /// While `leasing`: when a waiter may take the claim over.
    pub claim_expires_at: Option<DateTime<Utc>>,
    pub lease_id: Option<String>,
    pub session_id: Option<String>,
    pub host: Option<String>,
    /// When the pool expires the lease; `None` when it named no expiry.
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// A `leasing` row past its claim expiry, or a `held` row past its lease
    /// expiry: the next claim takes it over.
    #[serde(default)]
    pub lapsed: bool,
}

impl WindowsHoldRow {
    /// Whether the row holds a lease (as opposed to a claim being leased).
    pub fn is_held(&self) -> bool {
        self.state == "held"
    }
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq)]
pub enum HoldClaim {
    /// This caller claimed the hold: it leases, then
    /// [`WindowsHolds::fill`]s the claim with this revision.
    Claimed {
        /// The claim's revision.
        revision: i64,
    },
    /// Another claim or hold is live; the row as it stands.
    Existing(WindowsHoldRow),
}

/// The pool's lease, as a claim is filled with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldLease<'a> {
    pub lease_id: &'a str,
    pub session_id: &'a str,
    pub host: &'a str,
    pub expires_at: Option<DateTime<Utc>>,
}

impl HoldLease<'_> {
    fn check(&self) -> Result<(), StoreError> {
        check_text("lease_id", self.lease_id, MAX_LEASE_FIELD_BYTES)?;
        check_text("session_id", self.session_id, MAX_LEASE_FIELD_BYTES)?;
        if self.host.len() > MAX_LEASE_FIELD_BYTES {
            return Err(StoreError::invalid(
                "host",
                format!(
                    "must be at most {MAX_LEASE_FIELD_BYTES} bytes, got {}",
                    self.host.len()
                ),
            ));
        }
        for (field, v) in [
            ("lease_id", self.lease_id),
            ("session_id", self.session_id),
            ("host", self.host),
        ] {
            if v.contains('\0') {
                return Err(StoreError::invalid(
                    field,
                    "must not contain NUL characters",
                ));
            }
        }
        Ok(())
    }
}

/// Repository handle, from [`Store::windows_holds`].
pub struct WindowsHolds<'a> {
    store: &'a Store,
}

impl Store {
    /// Windows-lane holds.
    pub fn windows_holds(&self) -> WindowsHolds<'_> {
        WindowsHolds { store: self }
    }
}

fn check_holder(holder: &str) -> Result<(), StoreError> {
    check_text("holder", holder, MAX_HOLDER_BYTES)?;
    if holder.contains('\0') {
        return Err(StoreError::invalid(
            "holder",
            "must not contain NUL characters",
        ));
    }
    Ok(())
}

/// The row of (tenant `$1`, holder `$2`) with its `lapsed` flag.
const SELECT_ROW: &str = "SELECT to_jsonb(h) || jsonb_build_object('lapsed',
            CASE WHEN h.state = 'leasing' THEN h.claim_expires_at <= now()
                 ELSE coalesce(h.lease_expires_at <= now(), false) END)
       FROM windows_holds h WHERE h.tenant_id = $1 AND h.holder = $2";

impl WindowsHolds<'_> {
    /// The row of (tenant, holder) as it stands, lapsed or not; `None` when
    /// there is none. A bad holder → `InvalidArgument`.
    pub async fn get(
        &self,
        tenant_id: Uuid,
        holder: &str,
    ) -> Result<Option<WindowsHoldRow>, StoreError> {
        check_holder(holder)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row = select(&mut tx, tenant_id, holder).await?;
        tx.commit().await?;
        row.map(decode).transpose()
    }

    /// Claim (tenant, holder) for leasing: inserts a `leasing` row with a
    /// new revision, or takes over a lapsed one. Of concurrent claimers on
    /// any replica exactly one gets [`HoldClaim::Claimed`]; the others get
    /// the live row ([`HoldClaim::Existing`]). The claim lapses after
    /// `claim_ttl`, so a claimer that died mid-lease holds nobody up for
    /// longer. A bad holder or a zero TTL → `InvalidArgument`.
    pub async fn claim(
        &self,
        tenant_id: Uuid,
        holder: &str,
        claim_ttl: Duration,
    ) -> Result<HoldClaim, StoreError> {
        check_holder(holder)?;
        if claim_ttl.is_zero() || claim_ttl > Duration::from_secs(24 * 3600) {
            return Err(StoreError::invalid(
                "claim_ttl",
                "must be more than zero and at most a day",
            ));
        }
        for _ in 0..CLAIM_ATTEMPTS {
            let mut tx = self.store.tenant_tx(tenant_id).await?;
            // The conflicting row is locked by the upsert whether or not its
            // WHERE lets it be taken over, so the read after it sees the
            // winner's committed row.
            let claimed: Option<i64> = sqlx::query_scalar(
                "INSERT INTO windows_holds (tenant_id, holder, revision, state, claim_expires_at)
                 VALUES ($1, $2, nextval('windows_hold_revisions'), 'leasing',
                         now() + make_interval(secs => $3))
                 ON CONFLICT (tenant_id, holder) DO UPDATE
                    SET revision = EXCLUDED.revision, state = 'leasing',
                        claim_expires_at = EXCLUDED.claim_expires_at, lease_id = NULL,
                        session_id = NULL, host = NULL, lease_expires_at = NULL,
                        updated_at = now()
                  WHERE (windows_holds.state = 'leasing' AND windows_holds.claim_expires_at <= now())
                     OR (windows_holds.state = 'held' AND windows_holds.lease_expires_at <= now())
                 RETURNING revision",
            )
            .bind(tenant_id)
            .bind(holder)
            .bind(claim_ttl.as_secs_f64())
            .fetch_optional(tx.conn())
            .await?;
            if let Some(revision) = claimed {
                tx.commit().await?;
                return Ok(HoldClaim::Claimed { revision });
            }
            let existing = select(&mut tx, tenant_id, holder).await?;
            tx.commit().await?;
            if let Some(row) = existing {
                return Ok(HoldClaim::Existing(decode(row)?));
            }
            // Removed between the two statements: claim again.
        }
        Err(StoreError::Conflict {
            what: "windows hold (claimed and removed repeatedly)".to_owned(),
        })
    }

    /// Fill the claim `revision` with the pool's lease. `None` when the
    /// claim is no longer this revision's (taken over, removed): the caller
    /// leased a machine nobody holds and must hand it back. Bad lease fields
    /// → `InvalidArgument` and nothing changes.
    pub async fn fill(
        &self,
        tenant_id: Uuid,
        holder: &str,
        revision: i64,
        lease: &HoldLease<'_>,
    ) -> Result<Option<WindowsHoldRow>, StoreError> {
        let row: Option<serde_json::Value> = self
            .write_lease(
                "UPDATE windows_holds h
                    SET state = 'held', claim_expires_at = NULL, lease_id = $4, session_id = $5,
                        host = $6, lease_expires_at = $7, updated_at = now()
                  WHERE tenant_id = $1 AND holder = $2 AND revision = $3 AND state = 'leasing'
                  RETURNING to_jsonb(h) || jsonb_build_object('lapsed',
                            coalesce(h.lease_expires_at <= now(), false))",
                tenant_id,
                holder,
                revision,
                lease,
            )
            .await?;
        row.map(decode).transpose()
    }

    /// Remove the hold or claim of `revision`. `false` when the row is gone
    /// or carries another revision (a newer hold is never touched).
    pub async fn remove(
        &self,
        tenant_id: Uuid,
        holder: &str,
        revision: i64,
    ) -> Result<bool, StoreError> {
        check_holder(holder)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let gone: Option<i64> = sqlx::query_scalar(
            "DELETE FROM windows_holds WHERE tenant_id = $1 AND holder = $2 AND revision = $3
             RETURNING revision",
        )
        .bind(tenant_id)
        .bind(holder)
        .bind(revision)
        .fetch_optional(tx.conn())
        .await?;
        tx.commit().await?;
        Ok(gone.is_some())
    }

    /// Put back, under its own `revision`, a hold that [`Self::remove`]
    /// took out before a release the pool then failed, so a retry can
    /// release it. `false` when (tenant, holder) holds something else by
    /// now (left as it is). Bad fields → `InvalidArgument`, nothing written.
    pub async fn restore(
        &self,
        tenant_id: Uuid,
        holder: &str,
        revision: i64,
        lease: &HoldLease<'_>,
    ) -> Result<bool, StoreError> {
        let put: Option<i64> = self
            .write_lease(
                "INSERT INTO windows_holds (tenant_id, holder, revision, state, lease_id, session_id,
                                            host, lease_expires_at)
                 VALUES ($1, $2, $3, 'held', $4, $5, $6, $7)
                 ON CONFLICT (tenant_id, holder) DO NOTHING
                 RETURNING revision",
                tenant_id,
                holder,
                revision,
                lease,
            )
            .await?;
        Ok(put.is_some())
    }

    /// Write `lease` to the row of (tenant, holder) with `sql` (`$1`–`$3`:
    /// tenant, holder, revision; `$4`–`$7`: the lease's id, session, host
    /// and expiry) in a tenant transaction of its own, committed; the one
    /// value its `RETURNING` gave, if any. A bad holder or bad lease fields
    /// → `InvalidArgument` and nothing runs.
    async fn write_lease<T>(
        &self,
        sql: &'static str,
        tenant_id: Uuid,
        holder: &str,
        revision: i64,
        lease: &HoldLease<'_>,
    ) -> Result<Option<T>, StoreError>
    where
        T: Send + Unpin,
        (T,): Send + Unpin + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
    {
        check_holder(holder)?;
        lease.check()?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let value = sqlx::query_scalar(sql)
            .bind(tenant_id)
            .bind(holder)
            .bind(revision)
            .bind(lease.lease_id)
            .bind(lease.session_id)
            .bind(lease.host)
            .bind(lease.expires_at)
            .fetch_optional(tx.conn())
            .await?;
        tx.commit().await?;
        Ok(value)
    }
}

async fn select(
    tx: &mut crate::store::TenantTx,
    tenant_id: Uuid,
    holder: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    Ok(sqlx::query_scalar(SELECT_ROW)
        .bind(tenant_id)
        .bind(holder)
        .fetch_optional(tx.conn())
        .await?)
}
