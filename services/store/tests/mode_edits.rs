//! A tenant's edit of its mode catalogue on the real
//! PostgreSQL: the first edit copies the platform mode into the tenant's
//! override and changes only that, with a `catalogue` audit row of what
//! changed old→new and a raised catalogue epoch, so the bundle read of that
//! tenant carries the new mode and every other tenant's keeps the
//! platform's; an edit that changes nothing writes nothing; concurrent
//! edits of one mode each record against the row they replaced; a refused
//! edit (unknown mode, unknown preset) writes nothing; and neither the
//! tenant role nor another tenant can write a platform row or a tenant's
//! override behind the store's back.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use common::*;
use genesis_core::budget::BudgetOverride;
use genesis_core::mode_edit::ModeEdit;
use genesis_core::{AgentType, ModeChangeSource};
use genesis_store::llm::{NewPreset, PresetCouple};
use genesis_store::{ModeRow, Store, StoreError};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

async fn epoch(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT epoch FROM catalogue_epoch")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The modes a bundle read of `instance` (tenant `t`) carries, by name.
async fn bundle_mode(pool: &PgPool, t: Uuid, instance: Uuid, name: &str) -> Value {
    let b: Value = sqlx::query_scalar(
        "SELECT genesis_read_bundle($1, $2, 12, 'Soa', ARRAY['Agent:Planning'], now(), 0, NULL, 0)",
    )
    .bind(t)
    .bind(instance)
    .fetch_one(pool)
    .await
    .unwrap();
    let modes = b["modes"].as_array().unwrap();
    let named: Vec<&Value> = modes.iter().filter(|m| m["name"] == name).collect();
    assert_eq!(named.len(), 1, "one {name} in {modes:?}");
    named[0].clone()
}

/// Every row of `agent_modes` for one mode, as the superuser sees them.
async fn rows(pool: &PgPool, name: &str) -> Vec<(Option<Uuid>, String)> {
    sqlx::query_as(
        "SELECT tenant_id, prompt_fragment FROM agent_modes
          WHERE agent_type = 'Soa' AND name = $1 ORDER BY tenant_id NULLS FIRST",
    )
    .bind(name)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn audit_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM agent_mode_change_events WHERE source = 'catalogue'")
        .fetch_one(pool)
        .await
        .unwrap()
}

fn fragment(text: &str) -> ModeEdit {
    ModeEdit {
        prompt_fragment: Some(text.into()),
        ..ModeEdit::default()
    }
}

async fn platform(store: &Store, name: &str) -> ModeRow {
    // A tenant with no override sees the platform row.
    let t = tenant(store, &format!("reader-{}", Uuid::new_v4()))
        .await
        .unwrap();
    store.modes().get(t, AgentType::Soa, name).await.unwrap()
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_edit_changes_only_the_tenants_own_copy_and_audits_it(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let (soa_a, soa_b) = (soa(&store, a).await?, soa(&store, b).await?);
    let before = platform(&store, "Incident").await;
    assert_eq!(before.tenant_id, None);
    let epoch_before = epoch(&pool).await;

    let edit = ModeEdit {
        prompt_fragment: Some("Contain first; page the on-call.".into()),
        toolset: Some(vec![
            "soa_query_telemetry".into(),
            "soa_send_message".into(),
        ]),
        preset: None,
        budget_override: Some(Some(BudgetOverride {
            max_turns: Some(6),
            ..BudgetOverride::default()
        })),
    };
    let out = store
        .modes()
        .edit(a, AgentType::Soa, "Incident", &edit, "ops-lead (token:1)")
        .await?;
    assert_eq!(
        out.changes.iter().map(|c| c.field).collect::<Vec<_>>(),
        ["prompt_fragment", "toolset", "budget_override"]
    );
    assert_eq!(out.mode.tenant_id, Some(a));
    assert!(!out.mode.system_seed);
    assert_eq!(out.mode.prompt_fragment, "Contain first; page the on-call.");
    assert_eq!(out.mode.description, before.description);
    assert_eq!(out.mode.is_default, before.is_default);
    let event = out.event.expect("audited");
    assert_eq!(event.tenant_id, a);
    assert_eq!(event.agent_type, AgentType::Soa);
    assert_eq!(event.mode, "Incident");
    assert_eq!(event.actor, "ops-lead (token:1)");
    let seed_tools: Vec<String> = genesis_core::modes::seed_catalogue(AgentType::Soa)
        .into_iter()
        .find(|m| m.name == "Incident")
        .unwrap()
        .toolset;
    assert_eq!(
        event.changes,
        json!({
            "prompt_fragment": {"old": before.prompt_fragment, "new": "Contain first; page the on-call."},
            "toolset": {"old": seed_tools, "new": ["soa_query_telemetry", "soa_send_message"]},
            "budget_override": {"old": null, "new": {"maxTurns": 6}},
        })
    );
    assert_eq!(store.modes().edits(a, AgentType::Soa).await?, vec![event]);
    assert!(store.modes().edits(b, AgentType::Soa).await?.is_empty());
    let (source, instance): (String, Option<Uuid>) = sqlx::query_as(
        "SELECT source, instance_id FROM agent_mode_change_events WHERE source = 'catalogue'",
    )
    .fetch_one(&pool)
    .await?;
    assert_eq!(
        (source.as_str(), instance),
        (ModeChangeSource::Catalogue.as_str(), None)
    );

    // The platform row and tenant B are untouched; A reads its copy.
    assert_eq!(
        rows(&pool, "Incident").await,
        vec![
            (None, before.prompt_fragment.clone()),
            (Some(a), "Contain first; page the on-call.".into())
        ]
    );
    assert_eq!(platform(&store, "Incident").await, before);
    assert_eq!(
        store.modes().get(b, AgentType::Soa, "Incident").await?,
        before
    );
    let cat_a = store.modes().catalogue_for(a, AgentType::Soa).await?;
    assert_eq!(cat_a.len(), 6, "one row per mode: {cat_a:?}");
    assert_eq!(cat_a.iter().filter(|m| m.tenant_id == Some(a)).count(), 1);
    assert_eq!(
        store.modes().catalogue_for(b, AgentType::Soa).await?,
        store.modes().catalogue(AgentType::Soa).await?
    );

    // The epoch moved, and the claim's bundle read carries each tenant's.
    assert!(epoch(&pool).await > epoch_before);
    let m = bundle_mode(&pool, a, soa_a.id, "Incident").await;
    assert_eq!(m["prompt_fragment"], "Contain first; page the on-call.");
    assert_eq!(
        m["toolset"],
        json!(["soa_query_telemetry", "soa_send_message"])
    );
    assert_eq!(m["budget_override"], json!({"maxTurns": 6}));
    let m = bundle_mode(&pool, b, soa_b.id, "Incident").await;
    assert_eq!(m["prompt_fragment"], json!(before.prompt_fragment));
    assert_eq!(m["toolset"], Value::Null);

    // The same edit again changes nothing and writes nothing.
    let epoch_now = epoch(&pool).await;
    let again = store
        .modes()
        .edit(a, AgentType::Soa, "Incident", &edit, "ops-lead (token:1)")
        .await?;
    assert!(again.changes.is_empty() && again.event.is_none());
    assert_eq!(epoch(&pool).await, epoch_now);
    assert_eq!(audit_rows(&pool).await, 1);

    // A second edit changes the copy, and records against it.
    let second = store
        .modes()
        .edit(a, AgentType::Soa, "Incident", &fragment("Contain."), "op")
        .await?;
    assert_eq!(
        second.event.unwrap().changes,
        json!({"prompt_fragment": {"old": "Contain first; page the on-call.", "new": "Contain."}})
    );
    assert_eq!(
        second.mode.toolset,
        Some(vec![
            "soa_query_telemetry".to_owned(),
            "soa_send_message".to_owned()
        ])
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_preset_is_pinned_by_id_and_an_unknown_one_or_mode_writes_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let couple = PresetCouple {
        model: "scripted-1".into(),
        provider: "scripted".into(),
        backend: "api".into(),
        credentials: vec![],
    };
    let preset = |name: &str| NewPreset {
        name: name.into(),
        primary: couple.clone(),
        fallback: vec![],
        overlays: json!({}),
    };
    let ops = store.llm().create_preset(a, preset("ops")).await?;
    let theirs = store.llm().create_preset(b, preset("theirs")).await?;
    let epoch_before = epoch(&pool).await;

    let pin = |p: &str| ModeEdit {
        preset: Some(Some(p.into())),
        ..ModeEdit::default()
    };
    for (t, name, edit, field) in [
        (a, "Incident", pin("nope"), "preset"),
        (a, "Incident", pin(&theirs.id.to_string()), "preset"),
        (a, "Incident", pin("theirs"), "preset"),
    ] {
        let e = store
            .modes()
            .edit(t, AgentType::Soa, name, &edit, "op")
            .await
            .unwrap_err();
        assert!(
            matches!(&e, StoreError::InvalidArgument { field: f, .. } if f == field),
            "{e:?}"
        );
    }
    let e = store
        .modes()
        .edit(a, AgentType::Soa, "Panic", &fragment("x"), "op")
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound { .. }), "{e:?}");
    // The mission types' seam mode is in code, not in the catalogue table.
    let e = store
        .modes()
        .edit(
            a,
            AgentType::MissionResearch,
            "Mission",
            &fragment("x"),
            "op",
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound { .. }), "{e:?}");
    assert_eq!(epoch(&pool).await, epoch_before, "nothing was written");
    assert_eq!(audit_rows(&pool).await, 0);
    assert_eq!(rows(&pool, "Incident").await.len(), 1);

    // By name, stored as the id; then cleared.
    let out = store
        .modes()
        .edit(a, AgentType::Soa, "Incident", &pin("ops"), "op")
        .await?;
    assert_eq!(out.mode.preset_id, Some(ops.id.to_string()));
    assert_eq!(
        out.event.unwrap().changes,
        json!({"preset": {"old": null, "new": ops.id.to_string()}})
    );
    let cleared = store
        .modes()
        .edit(
            a,
            AgentType::Soa,
            "Incident",
            &ModeEdit {
                preset: Some(None),
                ..ModeEdit::default()
            },
            "op",
        )
        .await?;
    assert_eq!(cleared.mode.preset_id, None);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_edits_of_one_mode_each_record_against_the_row_they_replaced(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let edits = (0..6).map(|i| {
        let store = store.clone();
        async move {
            store
                .modes()
                .edit(
                    a,
                    AgentType::Soa,
                    "Dialogue",
                    &fragment(&format!("v{i}")),
                    "op",
                )
                .await
        }
    });
    for r in futures::future::join_all(edits).await {
        r?;
    }
    assert_eq!(rows(&pool, "Dialogue").await.len(), 2, "one override only");
    let events = store.modes().edits(a, AgentType::Soa).await?;
    assert_eq!(events.len(), 6);
    // A chain: each edit's old value is the value another edit replaced
    // (the one committed before it), from the platform's to the current
    // one, every edit exactly once. (created_at is each transaction's
    // start, so it need not follow the commit order.)
    let mut pending: Vec<&Value> = events
        .iter()
        .map(|e| &e.changes["prompt_fragment"])
        .collect();
    let mut current = json!(platform(&store, "Dialogue").await.prompt_fragment);
    while !pending.is_empty() {
        let next = pending
            .iter()
            .position(|c| c["old"] == current)
            .unwrap_or_else(|| panic!("no edit replaced {current}: {events:?}"));
        current = pending.remove(next)["new"].clone();
    }
    assert_eq!(
        json!(
            store
                .modes()
                .get(a, AgentType::Soa, "Dialogue")
                .await?
                .prompt_fragment
        ),
        current
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_tenant_role_cannot_write_a_platform_mode_or_another_tenants_copy(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    store
        .modes()
        .edit(b, AgentType::Soa, "Idle", &fragment("b's own"), "op")
        .await?;
    let before = rows(&pool, "Idle").await;
    for stmt in [
        // The platform row.
        "UPDATE agent_modes SET prompt_fragment = 'x' WHERE tenant_id IS NULL AND name = 'Idle'"
            .to_owned(),
        // Taking B's copy, or the platform row, for A.
        "UPDATE agent_modes SET tenant_id = tenant_id WHERE name = 'Idle'".to_owned(),
        "DELETE FROM agent_modes WHERE name = 'Idle'".to_owned(),
        // A copy written as B's, or as nobody's (a new platform row).
        format!(
            "INSERT INTO agent_modes (tenant_id, agent_type, name) VALUES ('{b}', 'Soa', 'Strategic')"
        ),
        "INSERT INTO agent_modes (tenant_id, agent_type, name) VALUES (NULL, 'Soa', 'Rogue')"
            .to_owned(),
    ] {
        let mut tx = store.tenant_tx(a).await?;
        let r = sqlx::query(sqlx::AssertSqlSafe(stmt.clone()))
            .execute(tx.conn())
            .await;
        tx.rollback().await?;
        match r {
            Ok(done) => assert_eq!(done.rows_affected(), 0, "{stmt}"),
            Err(e) => assert!(
                matches!(StoreError::from(e), StoreError::PermissionDenied { .. }),
                "{stmt}"
            ),
        }
    }
    // B's copy is not visible to A, and A's edit makes its own.
    let mut tx = store.tenant_tx(a).await?;
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_modes WHERE name = 'Idle'")
        .fetch_one(tx.conn())
        .await?;
    tx.rollback().await?;
    assert_eq!(seen, 1, "only the platform row");
    assert_eq!(rows(&pool, "Idle").await, before);
    Ok(())
}
