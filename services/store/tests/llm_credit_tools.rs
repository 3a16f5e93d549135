//! Repositories of the LLM provenance, credit windows and tool invocations
//! against a real PostgreSQL (one fresh database per test).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use chrono::Utc;
use genesis_core::{AgentType, InstanceStatus};
use genesis_store::credit::week_start;
use genesis_store::llm::{CreditDraw, NewCallAttempt, NewPreset, PresetCouple};
use genesis_store::tool_invocations::{NewToolInvocation, find_in, insert_in, lease_held_in};
use genesis_store::{ClaimOutcome, NewInstance, Store, StoreError};
use sqlx::PgPool;
use uuid::Uuid;

async fn claimed(store: &Store) -> (Uuid, Uuid, Uuid) {
    let tenant = store
        .tenants()
        .create(&format!("t-{}", Uuid::new_v4()))
        .await
        .unwrap();
    let inst = store
        .instances()
        .create(
            tenant.id,
            NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
        )
        .await
        .unwrap();
    let session = Uuid::new_v4();
    match store
        .claim_tick(tenant.id, inst.id, session, Duration::from_secs(60), 5)
        .await
        .unwrap()
    {
        ClaimOutcome::Claimed(_) => {}
        other => panic!("expected a claim, got {other:?}"),
    }
    (tenant.id, inst.id, session)
}

fn attempt(instance_id: Uuid, session: Uuid, cost: f64) -> NewCallAttempt {
    NewCallAttempt {
        instance_id,
        session,
        invocation_id: "inv-1".into(),
        site_id: "Agent:Planning".into(),
        requested_model: "claude-opus-4-8".into(),
        served_model: "claude-opus-4-8".into(),
        provider: "anthropic".into(),
        credential_name: "primary".into(),
        outcome: "success".into(),
        input_tokens: 1000,
        output_tokens: 200,
        cache_read_tokens: 0,
        latency_ms: 12,
        error_message: String::new(),
        cost_usd: cost,
        cache_write_tokens: 0,
        priced_as: None,
        pricing_source: None,
        prompt_overlay_sha256: None,
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn attempts_of_one_invocation_share_a_snapshot_and_draw_down_credit(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let (tenant, instance, session) = claimed(&store).await;
    let draw = CreditDraw {
        week_start: week_start(Utc::now()),
        limit_usd: 60.0,
    };
    let first = store
        .llm()
        .record_call_attempt(tenant, &attempt(instance, session, 0.5), draw)
        .await
        .unwrap();
    let second = store
        .llm()
        .record_call_attempt(tenant, &attempt(instance, session, 0.25), draw)
        .await
        .unwrap();
    assert_eq!(first.snapshot.id, second.snapshot.id);
    assert_eq!((first.ordinal, second.ordinal), (0, 1));
    assert!((second.snapshot.cost_usd - 0.75).abs() < 1e-9);
    assert_eq!(second.snapshot.input_tokens, 2000);
    assert!((second.credit.spent_usd - 0.75).abs() < 1e-9);
    assert!((second.credit.remaining_usd() - 59.25).abs() < 1e-9);
    assert_eq!(
        store
            .llm()
            .attempts(tenant, first.snapshot.id)
            .await
            .unwrap()
            .len(),
        2
    );
    let current = store
        .credit()
        .current(tenant, draw.week_start, 60.0)
        .await
        .unwrap();
    assert!((current.spent_usd - 0.75).abs() < 1e-9);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_attempt_under_a_lost_lease_writes_nothing(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let (tenant, instance, _session) = claimed(&store).await;
    let draw = CreditDraw {
        week_start: week_start(Utc::now()),
        limit_usd: 60.0,
    };
    let err = store
        .llm()
        .record_call_attempt(tenant, &attempt(instance, Uuid::new_v4(), 1.0), draw)
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::LeaseLost);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM llm_call_snapshots")
        .fetch_one(&pool)
        .await
        .unwrap();
    let c: i64 = sqlx::query_scalar("SELECT count(*) FROM credit_windows")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((n, c), (0, 0));
}

/// A lease past its expiry is lost for its own session even while no one
/// else has claimed the instance: lease_held_in says so, and an attempt
/// (the current and the previous release's function) writes nothing.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_expired_lease_is_lost_before_anyone_reclaims_it(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let (tenant, instance, session) = claimed(&store).await;
    sqlx::query(
        "UPDATE agent_instances SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(instance)
    .execute(&pool)
    .await
    .unwrap();
    let mut tx = store.tenant_tx(tenant).await.unwrap();
    assert!(!lease_held_in(tx.conn(), instance, session).await.unwrap());
    drop(tx);
    let draw = CreditDraw {
        week_start: week_start(Utc::now()),
        limit_usd: 60.0,
    };
    let err = store
        .llm()
        .record_call_attempt(tenant, &attempt(instance, session, 1.0), draw)
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::LeaseLost);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM llm_call_snapshots")
        .fetch_one(&pool)
        .await
        .unwrap();
    let c: i64 = sqlx::query_scalar("SELECT count(*) FROM credit_windows")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((n, c), (0, 0));
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_unknown_attempt_outcome_is_refused(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let (tenant, instance, session) = claimed(&store).await;
    let mut a = attempt(instance, session, 0.0);
    a.outcome = "exploded".into();
    let draw = CreditDraw {
        week_start: week_start(Utc::now()),
        limit_usd: 60.0,
    };
    let err = store
        .llm()
        .record_call_attempt(tenant, &a, draw)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidArgument { ref field, .. } if field == "attempt.outcome"),
        "{err:?}"
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn pricing_is_seeded_and_settable(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let opus = store
        .llm()
        .pricing("claude-opus-4-8")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (opus.input_usd_per_mtok, opus.output_usd_per_mtok),
        (15.0, 75.0)
    );
    assert!(store.llm().pricing("scripted-1").await.unwrap().is_some());
    assert!(
        store
            .llm()
            .pricing("no-such-model")
            .await
            .unwrap()
            .is_none()
    );
    store
        .llm()
        .set_pricing("m-x", 1.0, 2.0, 0.1, 1.25)
        .await
        .unwrap();
    let row = store.llm().pricing("m-x").await.unwrap().unwrap();
    assert_eq!(
        (
            row.input_usd_per_mtok,
            row.output_usd_per_mtok,
            row.cache_read_usd_per_mtok,
            row.cache_write_usd_per_mtok
        ),
        (1.0, 2.0, 0.1, 1.25)
    );
    for bad in [(-1.0, 0.0), (1.0, -0.5), (1.0, f64::NAN)] {
        assert!(matches!(
            store.llm().set_pricing("m-x", bad.0, 2.0, 0.0, bad.1).await,
            Err(StoreError::InvalidArgument { .. })
        ));
    }
    // The seeded rows: Claude cache writes at 1.25x input, scripted free.
    let sonnet = store
        .llm()
        .pricing("claude-sonnet-4-5")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sonnet.cache_write_usd_per_mtok, 3.75);
    let scripted = store.llm().pricing("scripted-1").await.unwrap().unwrap();
    assert_eq!(
        (
            scripted.input_usd_per_mtok,
            scripted.output_usd_per_mtok,
            scripted.cache_read_usd_per_mtok,
            scripted.cache_write_usd_per_mtok
        ),
        (0.0, 0.0, 0.0, 0.0)
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn site_bindings_are_per_tenant_and_replaceable(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let a = store.tenants().create("a").await.unwrap().id;
    let b = store.tenants().create("b").await.unwrap().id;
    let couple = |m: &str| PresetCouple {
        model: m.into(),
        provider: "anthropic".into(),
        backend: String::new(),
        credentials: vec!["key".into()],
    };
    let p1 = store
        .llm()
        .create_preset(
            a,
            NewPreset {
                name: "p1".into(),
                primary: couple("m1"),
                fallback: vec![couple("m2")],
                overlays: serde_json::json!({}),
            },
        )
        .await
        .unwrap();
    assert_eq!(p1.couples().len(), 2);
    store
        .llm()
        .bind_site(a, "Agent:Default", p1.id)
        .await
        .unwrap();
    let sites = vec!["Agent:Planning".to_owned(), "Agent:Default".to_owned()];
    let got = store.llm().bindings_for(a, &sites).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "Agent:Default");
    assert_eq!(got[0].1.id, p1.id);
    // Tenant b sees nothing of a, and cannot bind a's preset.
    assert!(
        store
            .llm()
            .bindings_for(b, &sites)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.llm().bind_site(b, "Agent:Default", p1.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(store.llm().unbind_site(a, "Agent:Default").await.unwrap());
    assert!(!store.llm().unbind_site(a, "Agent:Default").await.unwrap());
    let err = store
        .llm()
        .create_preset(
            a,
            NewPreset {
                name: "bad".into(),
                primary: couple(""),
                fallback: vec![],
                overlays: serde_json::json!({}),
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidArgument { ref field, .. } if field == "primary.model"),
        "{err:?}"
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn tool_invocations_are_unique_per_session_and_call_id(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let (tenant, instance, session) = claimed(&store).await;
    let new = NewToolInvocation {
        instance_id: instance,
        session,
        call_id: "c1".into(),
        tool_name: "soa_send_message".into(),
        arguments: serde_json::json!({"body": "hi"}),
        result: serde_json::json!({"ok": true}),
        blocked: false,
        side_effecting: true,
    };
    let mut tx = store.tenant_tx(tenant).await.unwrap();
    assert!(lease_held_in(tx.conn(), instance, session).await.unwrap());
    assert!(
        !lease_held_in(tx.conn(), instance, Uuid::new_v4())
            .await
            .unwrap()
    );
    insert_in(tx.conn(), tenant, &new).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.tenant_tx(tenant).await.unwrap();
    assert!(matches!(
        insert_in(tx.conn(), tenant, &new).await,
        Err(StoreError::Conflict { .. })
    ));
    drop(tx);
    let mut tx = store.tenant_tx(tenant).await.unwrap();
    let found = find_in(tx.conn(), session, "c1").await.unwrap().unwrap();
    assert_eq!(found.result, serde_json::json!({"ok": true}));
    drop(tx);
    assert_eq!(
        store
            .tool_invocations()
            .list(tenant, instance)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn week_start_is_the_monday_of_the_iso_week() {
    use chrono::TimeZone as _;
    let sunday = Utc.with_ymd_and_hms(2026, 3, 8, 23, 59, 0).unwrap();
    let monday = Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).unwrap();
    assert_eq!(week_start(sunday), monday);
    assert_eq!(week_start(monday), monday);
}

/// Draws racing on a week nobody has drawn from yet make one window holding
/// their sum, a later draw sets the configured limit, and a draw the
/// window's CHECK refuses changes nothing.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn racing_draws_on_a_new_week_make_one_window_holding_their_sum(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let tenant = store.tenants().create("credit-race").await.unwrap().id;
    let week = week_start(Utc::now());
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.credit().draw_down(tenant, week, 60.0, 0.25).await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let windows: Vec<(f64, f64)> = sqlx::query_as(
        "SELECT spent_usd, limit_usd FROM credit_windows WHERE tenant_id = $1 AND week_start = $2",
    )
    .bind(tenant)
    .bind(week)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(windows, vec![(4.0, 60.0)], "one window, every draw counted");

    let later = store
        .credit()
        .draw_down(tenant, week, 80.0, 0.5)
        .await
        .unwrap();
    assert_eq!((later.spent_usd, later.limit_usd), (4.5, 80.0));

    // Past the Rust check, the table's CHECK (spent_usd >= 0) still refuses.
    let refused = sqlx::query("SELECT genesis_credit_draw_down($1, $2, 80, -10)")
        .bind(tenant)
        .bind(week)
        .execute(&pool)
        .await;
    assert!(refused.is_err(), "a draw below zero is refused");
    let now = store.credit().current(tenant, week, 80.0).await.unwrap();
    assert_eq!(now.spent_usd, 4.5, "the refused draw changed nothing");
}
