//! A coder's LLM calls against a real PostgreSQL: attempts recorded
//! against the coding task (call tag `Coder`), its cost on the task view,
//! a settled task's cost final, and coder credit holds under the same
//! ceiling as an agent's, concurrently.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use chrono::Utc;
use genesis_core::{AgentType, InstanceStatus};
use genesis_store::coding_tasks::NewCodingTask;
use genesis_store::credit::week_start;
use genesis_store::llm::{CreditDraw, NewCallAttempt};
use genesis_store::{ClaimOutcome, NewInstance, Store, StoreError};
use sqlx::PgPool;
use uuid::Uuid;

async fn tenant(store: &Store) -> Uuid {
    store
        .tenants()
        .create(&format!("t-{}", Uuid::new_v4()))
        .await
        .unwrap()
        .id
}

/// A task of `t` that coder `coder` (when given) runs.
async fn task(store: &Store, t: Uuid, coder: Option<&str>) -> Uuid {
    let row = store
        .coding_tasks()
        .create(
            t,
            NewCodingTask {
                title: "fix".into(),
                instructions: "fix the bug".into(),
                coder_id: None,
                preset_id: None,
                model: "claude-opus-4-8".into(),
                provider: "anthropic".into(),
                backend: String::new(),
                credential_names: vec![],
                repository: String::new(),
                branch: String::new(),
                steering_instance_id: None,
            },
        )
        .await
        .unwrap();
    if let Some(c) = coder {
        store
            .coding_tasks()
            .assign_coder(t, row.id, c)
            .await
            .unwrap();
    }
    row.id
}

fn attempt(invocation: &str, cost: f64) -> NewCallAttempt {
    NewCallAttempt {
        instance_id: Uuid::nil(),
        session: Uuid::nil(),
        invocation_id: invocation.into(),
        site_id: genesis_core::sites::CODER_DEFAULT.into(),
        requested_model: "claude-opus-4-8".into(),
        served_model: "claude-opus-4-8-20261101".into(),
        provider: "anthropic".into(),
        credential_name: "primary".into(),
        outcome: "success".into(),
        input_tokens: 1000,
        output_tokens: 200,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        latency_ms: 12,
        error_message: String::new(),
        cost_usd: cost,
        priced_as: Some("claude-opus-4-8".into()),
        pricing_source: Some(genesis_core::pricing::PricingSource::Prefix),
        prompt_overlay_sha256: None,
    }
}

fn draw(limit_usd: f64) -> CreditDraw {
    CreditDraw {
        week_start: week_start(Utc::now()),
        limit_usd,
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_coders_attempts_are_recorded_against_its_task_and_priced_on_it(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = tenant(&store).await;
    let id = task(&store, t, Some("coder-1")).await;
    let other = task(&store, t, Some("coder-2")).await;
    let llm = store.llm();
    let first = llm
        .record_coder_attempt(t, id, &attempt("turn-1", 0.5), draw(60.0))
        .await
        .unwrap();
    let second = llm
        .record_coder_attempt(t, id, &attempt("turn-1", 0.25), draw(60.0))
        .await
        .unwrap();
    let third = llm
        .record_coder_attempt(t, id, &attempt("turn-2", 1.0), draw(60.0))
        .await
        .unwrap();
    // One snapshot per invocation, named by the task and not by an agent.
    assert_eq!(first.snapshot.id, second.snapshot.id);
    assert_ne!(first.snapshot.id, third.snapshot.id);
    assert_eq!((first.ordinal, second.ordinal, third.ordinal), (0, 1, 0));
    assert_eq!(first.snapshot.coding_task_id, Some(id));
    assert_eq!(first.snapshot.instance_id, None);
    assert_eq!(first.snapshot.call_tag, "Coder");
    assert_eq!(first.snapshot.site_id, "Coder:Default");
    assert!((second.snapshot.cost_usd - 0.75).abs() < 1e-9);
    // The tenant's window draws the coder's spend down like an agent's.
    assert!((third.credit.spent_usd - 1.75).abs() < 1e-9, "{third:?}");
    let attempts = llm.attempts(t, first.snapshot.id).await.unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].priced_as.as_deref(), Some("claude-opus-4-8"));
    // The task view carries what its coder's calls cost; another task's
    // view carries nothing of it.
    let view = store.coding_tasks().get(t, id).await.unwrap();
    assert!((view.cost_usd - 1.75).abs() < 1e-9, "{}", view.cost_usd);
    let view = store.coding_tasks().get(t, other).await.unwrap();
    assert_eq!(view.cost_usd, 0.0);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_settled_or_foreign_task_records_nothing(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = tenant(&store).await;
    let u = tenant(&store).await;
    let id = task(&store, t, Some("coder-1")).await;
    store
        .coding_tasks()
        .complete(t, id, "completed", "done", &serde_json::json!({}))
        .await
        .unwrap();
    let err = store
        .llm()
        .record_coder_attempt(t, id, &attempt("late", 0.5), draw(60.0))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::FailedPrecondition { .. }),
        "{err:?}"
    );
    // Another tenant naming the task finds nothing.
    let err = store
        .llm()
        .record_coder_attempt(u, id, &attempt("theirs", 0.5), draw(60.0))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    // A malformed attempt is refused before anything is sent.
    let mut bad = attempt("bad", 0.5);
    bad.outcome = "great".into();
    let open = task(&store, t, Some("coder-3")).await;
    let err = store
        .llm()
        .record_coder_attempt(t, open, &bad, draw(60.0))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument { .. }), "{err:?}");
    for (who, task_id) in [(t, id), (t, open)] {
        assert_eq!(
            store
                .coding_tasks()
                .get(who, task_id)
                .await
                .unwrap()
                .cost_usd,
            0.0
        );
    }
    let w = store
        .credit()
        .current(t, week_start(Utc::now()), 60.0)
        .await
        .unwrap();
    assert_eq!(w.spent_usd, 0.0, "nothing was drawn down");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_coder_hold_needs_a_running_coder_and_lapses_when_the_task_settles(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = tenant(&store).await;
    let ws = week_start(Utc::now());
    let waiting = task(&store, t, None).await;
    let err = store
        .credit()
        .reserve_coder((t, waiting), ws, 10.0, 1.0)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::FailedPrecondition { reason } if reason.contains("no coder")),
        "{err:?}"
    );
    let err = store
        .credit()
        .reserve_coder((t, Uuid::new_v4()), ws, 10.0, 1.0)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");

    let a = task(&store, t, Some("coder-a")).await;
    let b = task(&store, t, Some("coder-b")).await;
    let held = store
        .credit()
        .reserve_coder((t, a), ws, 10.0, 6.0)
        .await
        .unwrap();
    assert!(held.granted);
    // b's worst case would pass the ceiling beside a's hold.
    let refused = store
        .credit()
        .reserve_coder((t, b), ws, 10.0, 6.0)
        .await
        .unwrap();
    assert!(!refused.granted);
    assert!((refused.held_usd - 6.0).abs() < 1e-9, "{refused:?}");
    // a's next turn replaces its own hold rather than adding to it.
    assert!(
        store
            .credit()
            .reserve_coder((t, a), ws, 10.0, 6.0)
            .await
            .unwrap()
            .granted
    );
    // a settles: its hold lapses and b may hold the room.
    store
        .coding_tasks()
        .complete(t, a, "failed", "gave up", &serde_json::json!({}))
        .await
        .unwrap();
    let err = store
        .credit()
        .reserve_coder((t, a), ws, 10.0, 1.0)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::FailedPrecondition { reason } if reason.contains("settled")),
        "{err:?}"
    );
    let granted = store
        .credit()
        .reserve_coder((t, b), ws, 10.0, 6.0)
        .await
        .unwrap();
    assert!(granted.granted, "{granted:?}");
    assert_eq!(granted.held_usd, 0.0);
}

/// Agents' and coders' holds share the one ceiling: many turns racing for
/// the last dollars, half of them coders', never hold more than the limit
/// together.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn agent_and_coder_holds_racing_never_pass_the_ceiling(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = tenant(&store).await;
    let ws = week_start(Utc::now());
    let mut agents = Vec::new();
    for _ in 0..6 {
        let inst = store
            .instances()
            .create(
                t,
                NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
            )
            .await
            .unwrap();
        let session = Uuid::new_v4();
        match store
            .claim_tick(t, inst.id, session, Duration::from_secs(60), 5)
            .await
            .unwrap()
        {
            ClaimOutcome::Claimed(_) => {}
            other => panic!("expected a claim, got {other:?}"),
        }
        agents.push((inst.id, session));
    }
    let mut coders = Vec::new();
    for i in 0..6 {
        coders.push(task(&store, t, Some(&format!("coder-{i}"))).await);
    }
    // Ten dollars of room, twelve turns of three: at most three fit.
    let mut joins = Vec::new();
    for (inst, session) in agents {
        let s = store.clone();
        joins.push(tokio::spawn(async move {
            s.credit()
                .reserve((t, inst, session), ws, 10.0, 3.0)
                .await
                .unwrap()
                .granted
        }));
    }
    for id in coders {
        let s = store.clone();
        joins.push(tokio::spawn(async move {
            s.credit()
                .reserve_coder((t, id), ws, 10.0, 3.0)
                .await
                .unwrap()
                .granted
        }));
    }
    let mut granted = 0;
    for j in joins {
        if j.await.unwrap() {
            granted += 1;
        }
    }
    assert_eq!(granted, 3, "exactly the three turns that fit were granted");
}
