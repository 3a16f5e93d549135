//! The Windows-lane hold table on the real PostgreSQL: of concurrent claims
//! exactly one wins and the others see its claim; a stale revision can
//! neither fill, remove nor overwrite a newer hold (the fence); a claim
//! whose claimer died and a lease past its expiry lapse and are taken over;
//! a tenant sees no other tenant's hold; bad input changes nothing.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::time::Duration;

use chrono::Utc;
use common::*;
use genesis_store::StoreError;
use genesis_store::windows_holds::{HoldClaim, HoldLease};
use sqlx::PgPool;

const TTL: Duration = Duration::from_secs(30);

fn lease<'a>(id: &'a str, session: &'a str) -> HoldLease<'a> {
    HoldLease {
        lease_id: id,
        session_id: session,
        host: "win-1",
        expires_at: Some(Utc::now() + chrono::Duration::minutes(30)),
    }
}

fn claimed(c: &HoldClaim) -> i64 {
    match c {
        HoldClaim::Claimed { revision } => *revision,
        HoldClaim::Existing(row) => panic!("expected a claim, found {row:?}"),
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn of_concurrent_claims_exactly_one_wins_and_the_others_see_its_claim(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let claims = futures::future::join_all(
        (0..8).map(|_| async { store.windows_holds().claim(t, "coder-1", TTL).await }),
    )
    .await;
    let claims: Vec<HoldClaim> = claims.into_iter().collect::<Result<_, _>>()?;
    let winners: Vec<i64> = claims
        .iter()
        .filter_map(|c| match c {
            HoldClaim::Claimed { revision } => Some(*revision),
            HoldClaim::Existing(_) => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "{claims:?}");
    for c in &claims {
        if let HoldClaim::Existing(row) = c {
            assert_eq!(row.revision, winners[0]);
            assert_eq!(row.state, "leasing");
            assert!(!row.lapsed);
            assert!(row.lease_id.is_none());
        }
    }

    // Filled, the hold is what every later claim finds.
    let held = store
        .windows_holds()
        .fill(t, "coder-1", winners[0], &lease("l-1", "s-1"))
        .await?
        .unwrap();
    assert_eq!(held.state, "held");
    assert_eq!(held.session_id.as_deref(), Some("s-1"));
    match store.windows_holds().claim(t, "coder-1", TTL).await? {
        HoldClaim::Existing(row) => assert_eq!(row, held),
        other => panic!("a held key was claimed again: {other:?}"),
    }
    // Another holder of the same tenant is its own key.
    claimed(&store.windows_holds().claim(t, "coder-2", TTL).await?);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_stale_revision_cannot_fill_remove_or_overwrite_a_newer_hold(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let holds = store.windows_holds();
    let stale = claimed(&holds.claim(t, "c", Duration::from_millis(200)).await?);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let lapsed = holds.get(t, "c").await?.unwrap();
    assert!(lapsed.lapsed, "a claim past its TTL lapses");
    // Its claimer died mid-lease: the next claim takes it over.
    let fresh = claimed(&holds.claim(t, "c", TTL).await?);
    assert!(fresh > stale);
    assert_eq!(
        holds.fill(t, "c", stale, &lease("l-old", "s-old")).await?,
        None,
        "the taken-over claimer cannot fill"
    );
    assert!(!holds.remove(t, "c", stale).await?);
    let row = holds.fill(t, "c", fresh, &lease("l-new", "s-new")).await?;
    assert_eq!(row.unwrap().session_id.as_deref(), Some("s-new"));
    // A stale replica acting on an eviction it saw late changes nothing.
    assert!(!holds.remove(t, "c", stale).await?);
    assert!(
        !holds
            .restore(t, "c", stale, &lease("l-old", "s-old"))
            .await?,
        "a restore never overwrites a live hold"
    );
    let now = holds.get(t, "c").await?.unwrap();
    assert_eq!(
        (now.revision, now.lease_id.as_deref()),
        (fresh, Some("l-new"))
    );
    // The right revision removes it, once; a restore puts it back as it was.
    assert!(holds.remove(t, "c", fresh).await?);
    assert!(!holds.remove(t, "c", fresh).await?);
    assert!(holds.get(t, "c").await?.is_none());
    assert!(
        holds
            .restore(t, "c", fresh, &lease("l-new", "s-new"))
            .await?
    );
    let back = holds.get(t, "c").await?.unwrap();
    assert_eq!(
        (
            back.revision,
            back.state.as_str(),
            back.session_id.as_deref()
        ),
        (fresh, "held", Some("s-new"))
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_expired_lease_lapses_and_the_next_claim_takes_it_over(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let holds = store.windows_holds();
    let first = claimed(&holds.claim(t, "c", TTL).await?);
    let short = HoldLease {
        expires_at: Some(Utc::now() + chrono::Duration::milliseconds(300)),
        ..lease("l-1", "s-1")
    };
    let row = holds.fill(t, "c", first, &short).await?.unwrap();
    assert!(!row.lapsed);
    // A lease the pool named no expiry for never lapses here.
    let forever = claimed(&holds.claim(t, "d", TTL).await?);
    let open = HoldLease {
        expires_at: None,
        ..lease("l-2", "s-2")
    };
    holds.fill(t, "d", forever, &open).await?.unwrap();

    tokio::time::sleep(Duration::from_millis(500)).await;
    let expired = holds.get(t, "c").await?.unwrap();
    assert!(expired.lapsed, "past its lease expiry: {expired:?}");
    assert!(!holds.get(t, "d").await?.unwrap().lapsed);
    let second = claimed(&holds.claim(t, "c", TTL).await?);
    assert_ne!(second, first);
    let now = holds.get(t, "c").await?.unwrap();
    assert_eq!((now.state.as_str(), now.lease_id), ("leasing", None));
    assert!(matches!(
        holds.claim(t, "d", TTL).await?,
        HoldClaim::Existing(_)
    ));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_sees_and_changes_no_other_tenant_s_hold(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let holds = store.windows_holds();
    let rev = claimed(&holds.claim(a, "c", TTL).await?);
    holds
        .fill(a, "c", rev, &lease("l-a", "s-a"))
        .await?
        .unwrap();
    assert!(holds.get(b, "c").await?.is_none());
    assert!(!holds.remove(b, "c", rev).await?);
    assert_eq!(holds.fill(b, "c", rev, &lease("l-b", "s-b")).await?, None);
    // B's own key of the same name is B's.
    claimed(&holds.claim(b, "c", TTL).await?);
    let still = holds.get(a, "c").await?.unwrap();
    assert_eq!(
        (still.revision, still.lease_id.as_deref()),
        (rev, Some("l-a"))
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn bad_input_is_refused_precisely_and_changes_nothing(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let holds = store.windows_holds();
    let field = |e: StoreError| match e {
        StoreError::InvalidArgument { field, .. } => field,
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    assert_eq!(field(holds.claim(t, " ", TTL).await.unwrap_err()), "holder");
    assert_eq!(
        field(holds.claim(t, &"x".repeat(257), TTL).await.unwrap_err()),
        "holder"
    );
    assert_eq!(
        field(holds.claim(t, "c", Duration::ZERO).await.unwrap_err()),
        "claim_ttl"
    );
    assert!(holds.get(t, "c").await?.is_none(), "nothing was claimed");

    let rev = claimed(&holds.claim(t, "c", TTL).await?);
    for (bad, name) in [
        (lease("", "s-1"), "lease_id"),
        (lease("l-1", ""), "session_id"),
        (lease("l-1", "s\0"), "session_id"),
        (
            HoldLease {
                host: &"h".repeat(513),
                ..lease("l-1", "s-1")
            },
            "host",
        ),
    ] {
        assert_eq!(
            field(holds.fill(t, "c", rev, &bad).await.unwrap_err()),
            name
        );
    }
    let row = holds.get(t, "c").await?.unwrap();
    assert_eq!(
        (row.revision, row.state.as_str(), row.lease_id),
        (rev, "leasing", None),
        "the claim is untouched"
    );
    Ok(())
}
