//! Platform values in tenant rows on the real PostgreSQL: a tenant row holds
//! the tenant's value and the platform's value for the tenant apart. The
//! platform's write sets both, a tenant operator's write its own only, and
//! every reader (`genesis_effective_configs`) returns the effective values with
//! the platform's beside them; a stored key that imitates the platform's prefix
//! is read as neither, and a global row can hold no platform value.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::*;
use sqlx::PgPool;

const CREDIT: &str = "AgentDispatcher:WeeklyCreditUsd";
const TURNS: &str = "AgentDispatcher:TickMaxTurns";

fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_platforms_value_for_a_tenant_outlives_the_tenants_own(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let (a, b) = (tenant(&store, "a").await?, tenant(&store, "b").await?);
    let config = store.config();
    config.set(None, CREDIT, "60").await?;
    config.set(None, TURNS, "12").await?;
    config.set_by_tenant(a, TURNS, "4").await?;
    config.set(Some(a), CREDIT, "500").await?;
    config.set_by_tenant(a, CREDIT, "300").await?;

    let layers = config.layers(Some(a)).await?;
    assert_eq!(layers.effective, map(&[(CREDIT, "300"), (TURNS, "4")]));
    assert_eq!(layers.platform, map(&[(CREDIT, "500"), (TURNS, "12")]));
    assert_eq!(config.get(Some(a), CREDIT).await?.as_deref(), Some("300"));
    assert_eq!(config.effective(Some(a)).await?, layers.effective);
    // Another tenant and the global layer see none of it.
    let other = config.layers(Some(b)).await?;
    assert_eq!(other.effective, map(&[(CREDIT, "60"), (TURNS, "12")]));
    assert_eq!(other.platform, other.effective);
    let global = config.layers(None).await?;
    assert_eq!(
        (global.effective.clone(), global.platform),
        (other.effective.clone(), other.effective)
    );

    // The platform's write at tenant scope clears the tenant's own choice.
    config.set(Some(a), CREDIT, "80").await?;
    let layers = config.layers(Some(a)).await?;
    assert_eq!(
        (
            layers.effective[CREDIT].as_str(),
            layers.platform[CREDIT].as_str()
        ),
        ("80", "80")
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_row_imitating_the_platform_prefix_is_read_as_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    // As a tenant could have written it before unknown keys were refused.
    let forged = format!("{}{CREDIT}", genesis_store::config::PLATFORM_PREFIX);
    store.config().set_by_tenant(a, &forged, "1000000").await?;
    let layers = store.config().layers(Some(a)).await?;
    assert!(layers.effective.is_empty(), "{:?}", layers.effective);
    assert!(layers.platform.is_empty(), "{:?}", layers.platform);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_global_row_holds_no_platform_value(pool: PgPool) -> anyhow::Result<()> {
    let err = sqlx::query(
        "INSERT INTO system_configs (tenant_id, key, value, platform_value) VALUES (NULL, $1, '1', '2')",
    )
    .bind(CREDIT)
    .execute(&pool)
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("system_configs_platform_value_tenant_only"),
        "{err}"
    );
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM system_configs")
        .fetch_one(&pool)
        .await?;
    assert_eq!(n, 0);
    Ok(())
}
