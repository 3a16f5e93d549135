//! The default preset seeder (spec §3.7 point 2) against a real PostgreSQL:
//! once per tenant, across concurrent seeders, never over an operator's
//! binding or preset, and refusing malformed input with nothing written.

#![allow(clippy::unwrap_used)]

use genesis_core::presets::{DEFAULT_PRESET_NAME, DefaultProvider, SEEDED_SITES, code_default};
use genesis_store::llm::{DefaultSeed, NewPreset, PresetCouple};
use genesis_store::{Store, StoreError};
use sqlx::PgPool;
use uuid::Uuid;

fn couples(p: DefaultProvider) -> Vec<PresetCouple> {
    code_default(p).iter().map(Into::into).collect()
}

async fn tenant(store: &Store) -> Uuid {
    store
        .tenants()
        .create(&format!("t-{}", Uuid::new_v4()))
        .await
        .unwrap()
        .id
}

async fn counts(pool: &PgPool, tenant: Uuid) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM llm_presets WHERE tenant_id = $1),
                (SELECT count(*) FROM llm_site_bindings WHERE tenant_id = $1),
                (SELECT count(*) FROM llm_default_seeds WHERE tenant_id = $1)",
    )
    .bind(tenant)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn seeding_twice_creates_one_preset_bound_to_both_family_sites(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = tenant(&store).await;
    let first = store
        .llm()
        .seed_default_preset(
            t,
            DEFAULT_PRESET_NAME,
            &couples(DefaultProvider::Anthropic),
            SEEDED_SITES,
        )
        .await
        .unwrap();
    let DefaultSeed::Seeded { preset_id, bound } = first else {
        panic!("expected a seed, got {first:?}");
    };
    assert_eq!(bound, ["Agent:Default", "PromptRedactor:Default"]);
    let again = store
        .llm()
        .seed_default_preset(
            t,
            DEFAULT_PRESET_NAME,
            &couples(DefaultProvider::Anthropic),
            SEEDED_SITES,
        )
        .await
        .unwrap();
    assert_eq!(again, DefaultSeed::AlreadySeeded);
    assert_eq!(counts(&pool, t).await, (1, 2, 1));
    let presets = store.llm().list_presets(t).await.unwrap();
    assert_eq!(presets[0].id, preset_id);
    assert_eq!(presets[0].name, "Default");
    let models: Vec<_> = presets[0].couples().into_iter().map(|c| c.model).collect();
    // A real provider's seed never falls back to the scripted one.
    assert_eq!(models, ["claude-opus-4-8"]);
    let bindings = store
        .llm()
        .bindings_for(
            t,
            &["Agent:Default".into(), "PromptRedactor:Default".into()],
        )
        .await
        .unwrap();
    assert!(bindings.iter().all(|(_, p)| p.id == preset_id));
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_seeders_create_one_preset_and_one_binding_per_site(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = tenant(&store).await;
    let runs = (0..8).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .llm()
                .seed_default_preset(
                    t,
                    DEFAULT_PRESET_NAME,
                    &couples(DefaultProvider::Scripted),
                    SEEDED_SITES,
                )
                .await
                .unwrap()
        })
    });
    let outcomes: Vec<DefaultSeed> = futures_join(runs).await;
    let seeded = outcomes
        .iter()
        .filter(|o| matches!(o, DefaultSeed::Seeded { .. }))
        .count();
    assert_eq!(seeded, 1, "{outcomes:?}");
    assert_eq!(counts(&pool, t).await, (1, 2, 1));
}

async fn futures_join<T: Send + 'static>(
    handles: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles.collect::<Vec<_>>() {
        out.push(h.await.unwrap());
    }
    out
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_operator_binding_is_left_alone_and_a_detach_is_not_undone(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = tenant(&store).await;
    let mine = store
        .llm()
        .create_preset(
            t,
            NewPreset {
                name: "mine".into(),
                primary: couples(DefaultProvider::Openai)[0].clone(),
                fallback: vec![],
                overlays: serde_json::json!({}),
            },
        )
        .await
        .unwrap();
    store
        .llm()
        .bind_site(t, "Agent:Default", mine.id)
        .await
        .unwrap();
    let seeded = store
        .llm()
        .seed_default_preset(
            t,
            DEFAULT_PRESET_NAME,
            &couples(DefaultProvider::Scripted),
            SEEDED_SITES,
        )
        .await
        .unwrap();
    let DefaultSeed::Seeded { preset_id, bound } = seeded else {
        panic!("expected a seed, got {seeded:?}");
    };
    assert_eq!(bound, ["PromptRedactor:Default"]);
    let agent = store
        .llm()
        .bindings_for(t, &["Agent:Default".into()])
        .await
        .unwrap();
    assert_eq!(agent[0].1.id, mine.id, "the operator's binding stands");
    // The operator detaches the seeded binding: the next seeding pass (every
    // bootstrap scan runs one) does not put it back.
    assert!(
        store
            .llm()
            .unbind_site(t, "PromptRedactor:Default")
            .await
            .unwrap()
    );
    let again = store
        .llm()
        .seed_default_preset(
            t,
            DEFAULT_PRESET_NAME,
            &couples(DefaultProvider::Scripted),
            SEEDED_SITES,
        )
        .await
        .unwrap();
    assert_eq!(again, DefaultSeed::AlreadySeeded);
    let redactor = store
        .llm()
        .bindings_for(t, &["PromptRedactor:Default".into()])
        .await
        .unwrap();
    assert!(redactor.is_empty());
    assert!(
        store
            .llm()
            .list_presets(t)
            .await
            .unwrap()
            .iter()
            .any(|p| p.id == preset_id)
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_operators_preset_named_default_is_neither_changed_nor_bound(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = tenant(&store).await;
    let theirs = store
        .llm()
        .create_preset(
            t,
            NewPreset {
                name: "Default".into(),
                primary: couples(DefaultProvider::Openai)[0].clone(),
                fallback: vec![],
                overlays: serde_json::json!({"prompt_overlay": "theirs"}),
            },
        )
        .await
        .unwrap();
    let seeded = store
        .llm()
        .seed_default_preset(
            t,
            DEFAULT_PRESET_NAME,
            &couples(DefaultProvider::Scripted),
            SEEDED_SITES,
        )
        .await
        .unwrap();
    assert_eq!(seeded, DefaultSeed::NameTaken);
    assert_eq!(counts(&pool, t).await, (1, 0, 1));
    let after = store.llm().list_presets(t).await.unwrap();
    assert_eq!(after, vec![theirs]);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn malformed_seeds_are_refused_with_nothing_written(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = tenant(&store).await;
    let no_couples = store
        .llm()
        .seed_default_preset(t, DEFAULT_PRESET_NAME, &[], SEEDED_SITES)
        .await;
    assert!(
        matches!(&no_couples, Err(StoreError::InvalidArgument { field, .. }) if field == "couples"),
        "{no_couples:?}"
    );
    let no_sites = store
        .llm()
        .seed_default_preset(
            t,
            DEFAULT_PRESET_NAME,
            &couples(DefaultProvider::Scripted),
            &[],
        )
        .await;
    assert!(
        matches!(&no_sites, Err(StoreError::InvalidArgument { field, .. }) if field == "sites"),
        "{no_sites:?}"
    );
    let blank_model = store
        .llm()
        .seed_default_preset(
            t,
            DEFAULT_PRESET_NAME,
            &[PresetCouple {
                model: " ".into(),
                ..couples(DefaultProvider::Scripted)[0].clone()
            }],
            SEEDED_SITES,
        )
        .await;
    assert!(blank_model.is_err());
    assert_eq!(counts(&pool, t).await, (0, 0, 0));
}
