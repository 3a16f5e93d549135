//! Minting API tokens, shared by `TokenService.CreateToken` and the
//! `genesis-control token create` command: 32 random bytes shown once as
//! `gen_<base64url>`, of which only the SHA-256 is stored. Must never store,
//! log or return the raw token anywhere but the one return value.

use chrono::{DateTime, Utc};
use genesis_core::{PodTenants, TokenScope};
use genesis_store::{ApiToken, Store, StoreError};
use uuid::Uuid;

/// Mint and store a token admitting every tenant its scope allows; returns
/// the raw token (show it once) and its row.
pub async fn mint(
    store: &Store,
    scope: TokenScope,
    tenant_id: Option<Uuid>,
    label: &str,
    expires_at: Option<DateTime<Utc>>,
) -> Result<(String, ApiToken), StoreError> {
    mint_for_tenants(
        store,
        scope,
        tenant_id,
        &PodTenants::all(),
        label,
        expires_at,
    )
    .await
}

/// [`mint`] with the tenants an agent-pod token may serve (`pod_tenants`,
/// empty: every tenant); the store refuses a set on an operator token and
/// names an unknown tenant. Callers decide who may ask (a platform-wide
/// caller only).
pub async fn mint_for_tenants(
    store: &Store,
    scope: TokenScope,
    tenant_id: Option<Uuid>,
    pod_tenants: &PodTenants,
    label: &str,
    expires_at: Option<DateTime<Utc>>,
) -> Result<(String, ApiToken), StoreError> {
    let raw = genesis_proto::auth::generate_token();
    let row = store
        .tokens()
        .insert_for_tenants(
            tenant_id,
            scope,
            pod_tenants,
            &genesis_proto::auth::token_sha256(&raw),
            label,
            expires_at,
        )
        .await?;
    Ok((raw, row))
}

/// The expiry of a token minted now with `--ttl` `text`: refused, naming the
/// reason, when the ttl does not parse or lands past the calendar's end.
pub fn expires_after(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    let d = parse_ttl(text)?;
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| chrono::Utc::now().checked_add_signed(d))
        .ok_or_else(|| format!("ttl {text:?} is too large"))
}

/// Parse a `--ttl` such as `30d`, `12h` or `90m`.
pub fn parse_ttl(text: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("invalid ttl {text:?}: {e}"))?;
    if d.is_zero() {
        return Err("ttl must be positive".to_owned());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_accepts_days_and_refuses_zero_or_junk() {
        assert_eq!(parse_ttl("30d").expect("days").as_secs(), 30 * 86_400);
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("soon").is_err());
    }

    #[test]
    fn an_expiry_past_the_calendar_is_refused_not_a_panic() {
        let in_a_day = expires_after("1d").expect("a day");
        let delta = in_a_day - chrono::Utc::now();
        assert!((86_390..=86_400).contains(&delta.num_seconds()), "{delta}");
        let err = expires_after("300000y").expect_err("past chrono's last year");
        assert!(err.contains("too large"), "{err}");
        assert!(expires_after("0s").is_err());
    }
}
