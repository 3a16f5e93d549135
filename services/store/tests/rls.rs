//! Tenant isolation and the append-only ledger, enforced by PostgreSQL:
//! every table with a `tenant_id` column (enumerated from pg_catalog, so a
//! new table without RLS fails here) has FORCE RLS and `tenant_isolation`,
//! and a transaction scoped to tenant A reads and writes nothing of B.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use common::*;
use genesis_core::{AgentEventKind, AttentionKind, MessageDirection, ModeChangeSource, TokenScope};
use genesis_store::{
    LedgerAction, NewAttentionRequest, Store, StoreError, TickCompletion, tokens::hash_token,
};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

/// Put one row of every store table in place for `t`.
async fn seed_tenant(store: &Store, pool: &PgPool, t: Uuid, name: &str) -> anyhow::Result<()> {
    let inst = soa(store, t).await?;
    store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::OperatorMessage,
            &json!({}),
            None,
        )
        .await?;
    let c = claim(store, t, inst.id).await?;
    store
        .journal()
        .append(
            t,
            genesis_store::journal::NewStep {
                event_id: c.event.id,
                instance_id: inst.id,
                session: c.session,
                kind: genesis_core::journal::JournalKind::LlmTurn,
                entry: &json!({"request": {}, "response": {}}),
            },
            genesis_core::journal::DEFAULT_MAX_EPISODE_BYTES,
        )
        .await?;
    let mut done = TickCompletion::new(
        c.event.id,
        derived(
            genesis_core::AgentDecisionKind::Planned,
            genesis_core::Phase::Idle,
            true,
        ),
    );
    done.actions = vec![LedgerAction {
        tool_name: "agent_query_memory".into(),
        arguments: json!({}),
        result: None,
        side_effecting: false,
        blocked: false,
    }];
    store
        .complete_tick(t, inst.id, c.session, done, &Default::default())
        .await?;
    store
        .messages()
        .append(t, inst.id, MessageDirection::OperatorToAgent, "hello")
        .await?;
    let ar = store
        .attention()
        .create(
            t,
            NewAttentionRequest {
                instance_id: Some(inst.id),
                kind: AttentionKind::Decision,
                title: "pick".into(),
                body: String::new(),
                options: json!(["a", "b"]),
                metadata: json!({"source": "soa", "soaInstanceId": inst.id}),
            },
        )
        .await?;
    store
        .modes()
        .set_active_mode(t, inst.id, "Incident", ModeChangeSource::Ui, "op", None)
        .await?;
    store
        .events()
        .enqueue_answered_escalation(t, inst.id, ar.id, &json!({"resolution": "a"}))
        .await?;
    store
        .config()
        .set(Some(t), "AgentDispatcher:TickMaxTurns", "3")
        .await?;
    // The tenant's own copy of a platform mode (and its catalogue audit row).
    store
        .modes()
        .edit(
            t,
            genesis_core::AgentType::Soa,
            "Idle",
            &genesis_core::mode_edit::ModeEdit {
                prompt_fragment: Some(format!("quiet for {name}")),
                ..Default::default()
            },
            "op",
        )
        .await?;
    let tok = store
        .tokens()
        .insert(Some(t), TokenScope::Operator, &hash_token(name), name, None)
        .await?;
    store
        .sessions()
        .open(
            t,
            tok.id,
            &hash_token(&format!("session-{name}")),
            &"c".repeat(40),
            chrono::Utc::now() + chrono::Duration::hours(1),
        )
        .await?;
    sqlx::query("INSERT INTO missions (tenant_id, steering_instance_id, kind, title, metadata) VALUES ($1, $2, 'Development', 'm', $3)")
        .bind(t)
        .bind(inst.id)
        .bind(json!({"soaInstanceId": inst.id}))
        .execute(pool)
        .await?;
    Ok(())
}

async fn tenant_tables(pool: &PgPool) -> anyhow::Result<Vec<(String, bool, bool, bool)>> {
    Ok(sqlx::query_as(
        "SELECT c.relname::text, c.relrowsecurity, c.relforcerowsecurity,
                EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'tenant_isolation')
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind = 'r'
            AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
          ORDER BY 1",
    )
    .fetch_all(pool)
    .await?)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn every_tenant_table_forces_row_level_security_with_the_tenant_policy(
    pool: PgPool,
) -> anyhow::Result<()> {
    let tables = tenant_tables(&pool).await?;
    let names: Vec<&str> = tables.iter().map(|t| t.0.as_str()).collect();
    for expected in [
        "agent_instances",
        "agent_event_queue",
        "agent_state_ledger",
        "agent_state_ledger_actions",
        "agent_mode_change_events",
        "agent_messages",
        "attention_requests",
        "missions",
        "api_tokens",
        "system_configs",
        "agent_modes",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for (name, enabled, forced, policy) in &tables {
        assert!(
            *enabled && *forced && *policy,
            "{name}: rls={enabled} force={forced} policy={policy}"
        );
    }
    // What the policy says, not only that it exists: the one policy of each
    // table (plus `tenants`, keyed by `id`) that applies to every role
    // confines rows to the transaction's tenant for reads and writes. A
    // second permissive policy, or one with `USING (true)`, would fail here,
    // except the platform path's own: `genesis_system` does not bypass RLS,
    // so each table it works on grants it exactly the commands (and, for
    // the configuration, the rows) of its loops, listed here in full.
    let all: Vec<(String, String, bool, String, String, String, String)> = sqlx::query_as(
        "SELECT c.relname::text, p.polname::text, p.polpermissive,
                coalesce(pg_get_expr(p.polqual, p.polrelid), ''),
                coalesce(pg_get_expr(p.polwithcheck, p.polrelid), ''),
                p.polcmd::text,
                array_to_string(ARRAY(SELECT CASE WHEN r = 0 THEN 'public' ELSE pg_get_userbyid(r)::text END
                                        FROM unnest(p.polroles) r ORDER BY 1), ',')
           FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' ORDER BY 1, 2",
    )
    .fetch_all(&pool)
    .await?;
    let system: Vec<(&str, &str, &str, &str, &str)> = all
        .iter()
        .filter(|p| p.1 != "tenant_isolation")
        .map(|p| {
            assert!(p.2, "{}: {} is restrictive", p.0, p.1);
            assert_eq!(
                p.6, "genesis_system",
                "{}: {} is not the system's",
                p.0, p.1
            );
            (
                p.0.as_str(),
                p.1.as_str(),
                p.5.as_str(),
                p.3.as_str(),
                p.4.as_str(),
            )
        })
        .collect();
    assert_eq!(
        system,
        vec![
            // The journal's retention loop: read and prune, nothing else.
            ("agent_episode_journal", "system_prune", "d", "true", ""),
            ("agent_episode_journal", "system_read", "r", "true", ""),
            (
                "agent_event_queue",
                "system_outbox_mark",
                "w",
                "true",
                "true"
            ),
            ("agent_event_queue", "system_outbox_read", "r", "true", ""),
            ("agent_instances", "system_census", "r", "true", ""),
            // The outbox publisher's sweep of replays not yet on the
            // stream: read them and mark them published.
            ("agent_replays", "system_publish", "w", "true", "true"),
            ("agent_replays", "system_read", "r", "true", ""),
            ("api_tokens", "system_insert", "a", "", "true"),
            ("api_tokens", "system_read", "r", "true", ""),
            ("api_tokens", "system_update", "w", "true", "true"),
            ("dashboard_sessions", "system_insert", "a", "", "true"),
            ("dashboard_sessions", "system_read", "r", "true", ""),
            ("dashboard_sessions", "system_update", "w", "true", "true"),
            (
                "system_configs",
                "system_global_layer",
                "*",
                "(tenant_id IS NULL)",
                "(tenant_id IS NULL)"
            ),
            ("tenants", "system_insert", "a", "", "true"),
            ("tenants", "system_read", "r", "true", ""),
            ("tenants", "system_update", "w", "true", "true"),
        ]
    );
    let policies: Vec<(String, String, bool, String, String)> = all
        .into_iter()
        .filter(|p| p.1 == "tenant_isolation")
        .map(|p| {
            assert_eq!((p.5.as_str(), p.6.as_str()), ("*", "public"), "{}", p.0);
            (p.0, p.1, p.2, p.3, p.4)
        })
        .collect();
    let scoped = |col: &str| {
        format!(
            "({col} = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)"
        )
    };
    let mut checked: Vec<&str> = Vec::new();
    for (table, name, permissive, using, check) in &policies {
        assert_eq!(
            name, "tenant_isolation",
            "{table} has an extra policy {name}"
        );
        assert!(*permissive, "{table}: {name} is restrictive");
        let col = if table == "tenants" {
            "id"
        } else {
            "tenant_id"
        };
        let expected_using = if table == "system_configs" || table == "agent_modes" {
            // Global rows (tenant_id NULL: platform configuration, platform
            // modes) are readable by every tenant; writes are still
            // confined to the tenant's own rows.
            format!("((tenant_id IS NULL) OR {})", scoped(col))
        } else {
            scoped(col)
        };
        assert_eq!(using, &expected_using, "{table}: USING");
        assert_eq!(check, &scoped(col), "{table}: WITH CHECK");
        checked.push(table.as_str());
    }
    for (name, ..) in &tables {
        assert!(checked.contains(&name.as_str()), "{name} has no policy row");
    }
    assert!(
        checked.contains(&"tenants"),
        "tenants is row-level secured too"
    );

    // Neither service role owns a table, and neither can bypass RLS.
    let owned: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
          WHERE r.rolname IN ('genesis_app', 'genesis_system')",
    )
    .fetch_one(&pool)
    .await?;
    assert_eq!(owned, 0);
    let bypass: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_roles WHERE rolname IN ('genesis_app', 'genesis_system') AND rolbypassrls",
    )
    .fetch_one(&pool)
    .await?;
    assert_eq!(bypass, 0);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_transaction_of_tenant_a_reads_and_writes_nothing_of_tenant_b_in_any_table(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    seed_tenant(&store, &pool, a, "a").await?;
    seed_tenant(&store, &pool, b, "b").await?;
    store
        .config()
        .set(None, "AgentDispatcher:TickMaxTurns", "9")
        .await?;

    let seeded = [
        "agent_instances",
        "agent_event_queue",
        "agent_state_ledger",
        "agent_state_ledger_actions",
        "agent_mode_change_events",
        "agent_messages",
        "attention_requests",
        "missions",
        "api_tokens",
        "system_configs",
        "dashboard_sessions",
        "agent_modes",
        "agent_episode_journal",
    ];
    for (table, ..) in tenant_tables(&pool).await? {
        let total_b: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {table} WHERE tenant_id = $1"
        )))
        .bind(b)
        .fetch_one(&pool)
        .await?;
        if seeded.contains(&table.as_str()) {
            assert!(total_b > 0, "{table}: fixture must give tenant B rows");
        }
        // Read.
        let mut tx = store.tenant_tx(a).await?;
        let seen_b: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {table} WHERE tenant_id = $1"
        )))
        .bind(b)
        .fetch_one(tx.conn())
        .await?;
        let seen_own: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {table} WHERE tenant_id = $1"
        )))
        .bind(a)
        .fetch_one(tx.conn())
        .await?;
        tx.rollback().await?;
        assert_eq!(seen_b, 0, "{table}: tenant A sees B's rows");
        if seeded.contains(&table.as_str()) {
            assert!(seen_own > 0, "{table}: tenant A must see its own rows");
        }
        // Update / delete: zero rows, or refused outright (append-only tables).
        for stmt in [
            format!("UPDATE {table} SET tenant_id = tenant_id WHERE tenant_id = $1"),
            format!("DELETE FROM {table} WHERE tenant_id = $1"),
        ] {
            match in_tenant_tx(&store, a, &stmt, &[b]).await? {
                Ok(rows) => assert_eq!(rows, 0, "{table}: {stmt}"),
                Err(e) => assert!(
                    matches!(e, StoreError::PermissionDenied { .. }),
                    "{table}: {stmt}"
                ),
            }
        }
        // Insert a copy of one of A's own rows re-labelled as B's: refused.
        // Generated columns (full-text `search`) cannot be inserted into, so
        // the copy names every other column.
        let cols: Vec<String> = sqlx::query_scalar(
            "SELECT quote_ident(attname) FROM pg_attribute
              WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped
                AND attgenerated = '' ORDER BY attnum",
        )
        .bind(table.as_str())
        .fetch_all(&pool)
        .await?;
        let cols = cols.join(", ");
        let insert = format!(
            "INSERT INTO {table} ({cols}) SELECT {cols} FROM (SELECT (jsonb_populate_record(NULL::{table},
                 to_jsonb(x) || jsonb_build_object('id', gen_random_uuid(), 'tenant_id', $1::uuid))).*
               FROM {table} x WHERE tenant_id = $2 LIMIT 1) y"
        );
        match in_tenant_tx(&store, a, &insert, &[b, a]).await? {
            Ok(rows) => assert_eq!(rows, 0, "{table}: cross-tenant insert went through"),
            Err(err) => assert!(
                matches!(err, StoreError::PermissionDenied { .. }),
                "{table}: {err:?}"
            ),
        }
        let after_b: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {table} WHERE tenant_id = $1"
        )))
        .bind(b)
        .fetch_one(&pool)
        .await?;
        assert_eq!(after_b, total_b, "{table}: B's rows changed");
    }
    // Config: A reads its own layer, falls back to global; B is unaffected.
    assert_eq!(tick_max_turns(&store, Some(a)).await?.as_deref(), Some("3"));
    store
        .config()
        .delete(Some(a), "AgentDispatcher:TickMaxTurns")
        .await?;
    assert_eq!(tick_max_turns(&store, Some(a)).await?.as_deref(), Some("9"));
    assert_eq!(tick_max_turns(&store, Some(b)).await?.as_deref(), Some("3"));
    // A tenant transaction cannot write the global layer.
    let err = in_tenant_tx(
        &store,
        a,
        "INSERT INTO system_configs (tenant_id, key, value) VALUES (NULL, 'x', 'y')",
        &[],
    )
    .await?
    .unwrap_err();
    assert!(
        matches!(err, StoreError::PermissionDenied { .. }),
        "{err:?}"
    );
    // The repositories refuse B's instance when scoped to A.
    let b_inst = store.instances().list(b, None).await?[0].id;
    assert_instance_hidden(&store, a, b_inst).await;
    assert!(matches!(
        store
            .modes()
            .set_active_mode(a, b_inst, "Dialogue", ModeChangeSource::Ui, "op", None)
            .await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.claim_tick(a, b_inst, Uuid::new_v4(), TTL, 5).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_event_queue WHERE instance_id = $1",
            b_inst
        )
        .await?,
        3
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_pool_transaction_without_a_tenant_sees_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    seed_tenant(&store, &pool, a, "a").await?;
    // A random tenant id stands in for "no tenant": the policy matches nothing.
    let n = count_in_tenant_tx(
        &store,
        Uuid::new_v4(),
        "SELECT count(*) FROM agent_instances",
        &[],
    )
    .await?;
    assert_eq!(n, 0);
    let n = count_as(
        &pool,
        "genesis_app",
        "SELECT count(*) FROM agent_state_ledger",
    )
    .await?;
    assert_eq!(n, 0);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_ledger_cannot_be_updated_or_deleted_by_either_service_role(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    seed_tenant(&store, &pool, a, "a").await?;
    for table in ["agent_state_ledger", "agent_state_ledger_actions"] {
        for stmt in [
            format!("UPDATE {table} SET tenant_id = tenant_id"),
            format!("DELETE FROM {table}"),
        ] {
            let err = in_tenant_tx(&store, a, &stmt, &[]).await?.unwrap_err();
            assert!(
                matches!(err, StoreError::PermissionDenied { .. }),
                "genesis_app {stmt}: {err:?}"
            );
            let err = as_system(&pool, &stmt, None).await?.unwrap_err();
            assert!(
                matches!(err, StoreError::PermissionDenied { .. }),
                "genesis_system {stmt}: {err:?}"
            );
        }
    }
    // The reset function refuses a tenant other than the transaction's own.
    let inst = store.instances().list(a, None).await?[0].id;
    let err = in_tenant_tx(
        &store,
        Uuid::new_v4(),
        "SELECT genesis_reset_instance($1, $2)",
        &[a, inst],
    )
    .await?
    .unwrap_err();
    assert!(
        matches!(err, StoreError::PermissionDenied { .. }),
        "{err:?}"
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_state_ledger WHERE tenant_id = $1",
            a
        )
        .await?,
        1
    );
    Ok(())
}

/// One row for `t` in each tenant table [`seed_tenant`] leaves empty,
/// written as the superuser: the unfiltered-read test needs rows of both
/// tenants everywhere, or a leak on an empty table would go unseen.
async fn seed_the_other_tables(store: &Store, pool: &PgPool, t: Uuid) -> anyhow::Result<()> {
    let inst = store.instances().list(t, None).await?[0].id;
    let mut tx = pool.begin().await?;
    for stmt in [
        "WITH c AS (INSERT INTO coding_tasks (tenant_id, title, instructions, model, provider)
                    VALUES ($1, 'task', 'do it', 'm', 'p') RETURNING id)
         INSERT INTO coding_task_artifacts (tenant_id, task_id, kind, name, content, size_bytes)
         SELECT $1, id, 'log', 'build.log', 'ok', 2 FROM c",
        "INSERT INTO constitution_rules (tenant_id, name, kind, params)
         VALUES ($1, 'rule', 'ForbiddenTerm', '{}')",
        "INSERT INTO credit_windows (tenant_id, week_start, limit_usd) VALUES ($1, now(), 10)",
        "INSERT INTO agent_prompt_texts (tenant_id, sha256, text)
         VALUES ($1, encode(sha256(convert_to($1::text, 'UTF8')), 'hex'), 'system')",
        "INSERT INTO knowledge_documents (tenant_id, kind, title, body)
         VALUES ($1, 'intelligence', 'doc', 'body')",
        "INSERT INTO llm_default_seeds (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING",
        "INSERT INTO source_files (tenant_id, project_id, path, content)
         VALUES ($1, gen_random_uuid(), 'src/lib.rs', 'fn main() {}')",
        "WITH d AS (INSERT INTO compliance_dossiers (tenant_id, framework, control_id, title, body, status)
                    VALUES ($1, 'soc2', 'CC1.1', 'dossier', 'body', 'gap') RETURNING id)
         INSERT INTO compliance_dossier_translations (tenant_id, dossier_id, language, title, body, source_version)
         SELECT $1, id, 'fr', 'dossier', 'corps', 1 FROM d",
        "WITH p AS (INSERT INTO llm_presets (tenant_id, name, model, provider)
                    VALUES ($1, 'rls-probe', 'm', 'p') RETURNING id)
         INSERT INTO llm_site_bindings (tenant_id, site_id, preset_id)
         SELECT $1, 'Agent:RlsProbe', id FROM p",
        "INSERT INTO windows_holds (tenant_id, holder, revision, state, lease_id, session_id, host)
         VALUES ($1, 'coder-1', nextval('windows_hold_revisions'), 'held', 'l-1', 's-1', 'win-1')",
    ] {
        sqlx::query(stmt).bind(t).execute(&mut *tx).await?;
    }
    for stmt in [
        "INSERT INTO research_records (tenant_id, instance_id, title, findings)
         VALUES ($1, $2, 'question', 'findings')",
        "INSERT INTO tool_invocations (tenant_id, instance_id, session, call_id, tool_name, arguments, result)
         VALUES ($1, $2, gen_random_uuid(), 'call-1', 'agent_query_memory', '{}', '{}')",
        "INSERT INTO credit_reservations (tenant_id, session, instance_id, week_start, amount_usd)
         VALUES ($1, gen_random_uuid(), $2, now(), 0.5)",
        "WITH s AS (INSERT INTO llm_call_snapshots (tenant_id, instance_id, invocation_id, site_id, call_tag, requested_model)
                    VALUES ($1, $2, 'rls-probe', 'Agent:Default', 'AgentPlanning', 'm') RETURNING id)
         INSERT INTO llm_call_attempts (tenant_id, snapshot_id, ordinal, provider, requested_model, outcome)
         SELECT $1, id, 0, 'p', 'm', 'success' FROM s",
        "INSERT INTO agent_replays (tenant_id, instance_id, turn_number, event_id, preset_id)
         VALUES ($1, $2, 1, gen_random_uuid(), gen_random_uuid())",
    ] {
        sqlx::query(stmt).bind(t).bind(inst).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A query written with no tenant filter at all — `SELECT count(*) FROM t`,
/// the shape a forgotten `WHERE tenant_id = …` takes — returns only the
/// transaction's tenant's rows, on every tenant table and on `tenants`.
/// Both tenants are seeded, so a missing or permissive policy shows as a
/// count that includes B's rows.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_unfiltered_count_in_a_tenant_transaction_counts_only_that_tenants_rows(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    for (t, name) in [(a, "a"), (b, "b")] {
        seed_tenant(&store, &pool, t, name).await?;
        seed_the_other_tables(&store, &pool, t).await?;
    }
    store
        .config()
        .set(None, "AgentDispatcher:TickMaxTurns", "9")
        .await?;

    let tables = tenant_tables(&pool).await?;
    assert!(
        tables.len() >= 11,
        "only {} tenant tables found: {tables:?}",
        tables.len()
    );
    for (table, ..) in &tables {
        // What the superuser (no RLS) counts: A's own rows and B's.
        let (own, of_b, global): (i64, i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FILTER (WHERE tenant_id = $1),
                    count(*) FILTER (WHERE tenant_id = $2),
                    count(*) FILTER (WHERE tenant_id IS NULL)
               FROM {table}"
        )))
        .bind(a)
        .bind(b)
        .fetch_one(&pool)
        .await?;
        assert!(own > 0, "{table}: the fixture must give tenant A rows");
        assert!(of_b > 0, "{table}: the fixture must give tenant B rows");
        // Global configuration and the platform modes (tenant_id NULL)
        // are readable by every tenant by design; every other table has no
        // tenant-less rows to show.
        let layered = table == "system_configs" || table == "agent_modes";
        let expected = if layered {
            assert!(global > 0, "{table}: the fixture must hold a global row");
            own + global
        } else {
            own
        };
        let mut tx = store.tenant_tx(a).await?;
        let seen: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
                .fetch_one(tx.conn())
                .await?;
        // Equal counts could hide a swap (B's rows instead of A's): the
        // owners of what the unfiltered read returns are checked too.
        let owners: Vec<Option<Uuid>> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT DISTINCT tenant_id FROM {table}"
        )))
        .fetch_all(tx.conn())
        .await?;
        tx.rollback().await?;
        assert_eq!(
            seen, expected,
            "{table}: an unfiltered count in A's transaction saw {seen} rows; A has {own} (B {of_b}, global {global})"
        );
        assert!(
            owners
                .iter()
                .all(|o| *o == Some(a) || (layered && o.is_none())),
            "{table}: an unfiltered read in A's transaction returned rows of {owners:?}"
        );
    }
    let mut tx = store.tenant_tx(a).await?;
    let tenants: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM tenants")
        .fetch_all(tx.conn())
        .await?;
    tx.rollback().await?;
    assert_eq!(tenants, vec![a], "an unfiltered read of tenants");
    Ok(())
}
