//! `genesis_claim_and_read` against the real PostgreSQL: it claims exactly as
//! `genesis_claim_tick` does and adds the bundle read only when it claimed an
//! instance of the asked type; the read it adds is the one
//! `genesis_read_bundle` makes, and racing claimers still see exactly one
//! winner, the only one with a bundle.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use common::*;
use genesis_core::{AgentEventKind, AgentType, InstanceStatus};
use genesis_store::{BundleAsk, ClaimOutcome, NewInstance, Store};
use serde_json::json;
use uuid::Uuid;

fn ask(agent_type: AgentType, sites: &[String]) -> BundleAsk<'_> {
    BundleAsk {
        tail: 12,
        agent_type,
        sites,
        week_start: chrono::DateTime::UNIX_EPOCH,
        known: None,
        catalogue_epoch: 0,
    }
}

async fn message(store: &Store, t: Uuid, instance: Uuid) -> anyhow::Result<()> {
    store
        .events()
        .enqueue(
            t,
            instance,
            AgentEventKind::OperatorMessage,
            &json!({"text": "hi"}),
            None,
        )
        .await?;
    Ok(())
}

/// A claim of `instance` asking for its bundle with `a`.
async fn joined(
    store: &Store,
    t: Uuid,
    instance: Uuid,
    a: &BundleAsk<'_>,
) -> anyhow::Result<(ClaimOutcome, Option<serde_json::Value>)> {
    Ok(store
        .claim_tick_reading(t, instance, Uuid::new_v4(), TTL, 5, Some(a))
        .await?)
}

/// One tenant's SOA with one operator message due.
async fn soa_with_a_message(
    pool: &sqlx::PgPool,
) -> anyhow::Result<(Store, Uuid, genesis_store::InstanceRow)> {
    let store = store(pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id).await?;
    Ok((store, t, inst))
}

fn sites() -> Vec<String> {
    vec!["Agent:Planning".to_owned(), "Agent:Default".to_owned()]
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_joined_read_is_the_separate_read_of_the_claimed_instance(
    pool: sqlx::PgPool,
) -> anyhow::Result<()> {
    let (store, t, inst) = soa_with_a_message(&pool).await?;
    let sites = sites();
    let a = ask(AgentType::Soa, &sites);
    let (claim, bundle) = joined(&store, t, inst.id, &a).await?;
    let ClaimOutcome::Claimed(c) = claim else {
        panic!("expected a claim, got {claim:?}");
    };
    assert_eq!(c.event.event_kind, AgentEventKind::OperatorMessage);
    assert_eq!(c.instance.lease_session, Some(c.session));
    let joined = bundle.expect("a bundle with the claim");
    let (separate, _) = store.read_tick_bundle(t, inst.id, &a).await?;
    assert_eq!(joined, separate);
    for key in ["configs", "modes", "bindings", "ledger", "catalogue_epoch"] {
        assert!(joined.get(key).is_some(), "{key} in {joined}");
    }
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_claim_of_another_type_or_no_claim_carries_no_bundle(
    pool: sqlx::PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let sites = sites();

    // Nothing due: the heartbeat is seeded and the lease released, as a
    // plain claim does, and no bundle is read.
    let (claim, bundle) = joined(&store, t, inst.id, &ask(AgentType::Soa, &sites)).await?;
    assert!(
        matches!(claim, ClaimOutcome::NothingDue { .. }),
        "{claim:?}"
    );
    assert_eq!(bundle, None);

    // The type asked is not the instance's: claimed, no bundle.
    message(&store, t, inst.id).await?;
    let wrong = ask(AgentType::MissionResearch, &sites);
    let (claim, bundle) = joined(&store, t, inst.id, &wrong).await?;
    assert!(matches!(claim, ClaimOutcome::Claimed(_)), "{claim:?}");
    assert_eq!(bundle, None);

    // The lease is held now: no bundle for a second claimer.
    let (claim, bundle) = joined(&store, t, inst.id, &ask(AgentType::Soa, &sites)).await?;
    assert_eq!(claim, ClaimOutcome::LeaseHeld);
    assert_eq!(bundle, None);
    Ok(())
}

/// A Compliance instance's read also discovers the corpus in its own
/// transaction, so it is never joined to the claim.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_compliance_read_is_never_joined(pool: sqlx::PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = store
        .instances()
        .create(
            t,
            NewInstance::foundational(AgentType::Compliance, InstanceStatus::Active),
        )
        .await?;
    message(&store, t, inst.id).await?;
    let sites = sites();
    let a = ask(AgentType::Compliance, &sites);
    assert!(!a.joins_claim());
    let (claim, bundle) = joined(&store, t, inst.id, &a).await?;
    assert!(matches!(claim, ClaimOutcome::Claimed(_)), "{claim:?}");
    assert_eq!(bundle, None);
    Ok(())
}

/// Sixteen joined claimers race for one due event: exactly one holds the
/// lease, and only it has a bundle.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn racing_joined_claimers_have_one_winner_with_one_bundle(
    pool: sqlx::PgPool,
) -> anyhow::Result<()> {
    let (store, t, inst) = soa_with_a_message(&pool).await?;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let sites = sites();
            joined(&store, t, inst.id, &ask(AgentType::Soa, &sites)).await
        }));
    }
    let (mut claimed, mut held, mut bundles) = (0, 0, 0);
    for task in tasks {
        let (claim, bundle) = task.await??;
        match claim {
            ClaimOutcome::Claimed(_) => claimed += 1,
            ClaimOutcome::LeaseHeld => held += 1,
            other => panic!("unexpected {other:?}"),
        }
        bundles += usize::from(bundle.is_some());
    }
    assert_eq!((claimed, held, bundles), (1, 15, 1));
    let attempts: i32 =
        sqlx::query_scalar("SELECT attempts FROM agent_event_queue WHERE instance_id = $1")
            .bind(inst.id)
            .fetch_one(&pool)
            .await?;
    assert_eq!(attempts, 1, "one claim stamped the event");
    Ok(())
}

/// The service roles may run the joined claim; nobody else may.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn only_the_service_roles_run_the_joined_claim(pool: sqlx::PgPool) -> anyhow::Result<()> {
    let granted: Vec<(String, bool)> = sqlx::query_as(
        "SELECT r, has_function_privilege(r,
             'genesis_claim_and_read(uuid, uuid, uuid, interval, integer, bigint, text, text[], timestamptz, bigint, uuid, bigint)',
             'EXECUTE')
           FROM unnest(ARRAY['genesis_app', 'genesis_system']) r",
    )
    .fetch_all(&pool)
    .await?;
    assert!(granted.iter().all(|(_, ok)| *ok), "{granted:?}");
    let public: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_proc p, aclexplode(p.proacl) a
          WHERE p.proname = 'genesis_claim_and_read' AND a.grantee = 0)",
    )
    .fetch_one(&pool)
    .await?;
    assert!(!public, "not executable by PUBLIC");
    Ok(())
}
