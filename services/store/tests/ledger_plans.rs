//! The ledger's reads of one instance stay one range of one index under
//! row-level security. Every tenant read carries the
//! policy's `tenant_id = …` beside its `instance_id = …`; with the old key
//! on `(instance_id, turn_number)` PostgreSQL answered them with a BitmapAnd
//! over the instance's and the whole tenant's entries, a cost that grew with
//! the tenant's history on every tick. These tests read the plans the
//! service role gets, so dropping or reordering the key fails them.

mod common;

use sqlx::PgPool;
use uuid::Uuid;

/// The plan of `sql` (parameters: the instance, then the tenant) as
/// `genesis_app` in the tenant's scope, in a transaction rolled back.
async fn plan(pool: &PgPool, tenant: Uuid, instance: Uuid, sql: &str) -> anyhow::Result<String> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL ROLE genesis_app")
        .execute(&mut *tx)
        .await?;
    sqlx::query("SELECT set_config('genesis.tenant_id', $1, true)")
        .bind(tenant.to_string())
        .execute(&mut *tx)
        .await?;
    let mut q = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(format!("EXPLAIN {sql}")));
    q = q.bind(instance);
    if sql.contains("$2") {
        q = q.bind(tenant);
    }
    let lines = q.fetch_all(&mut *tx).await?;
    tx.rollback().await?;
    Ok(lines.join("\n"))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_instance_s_turns_are_read_by_one_backward_range_of_the_tenant_turn_key(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = common::store(&pool);
    let t = common::tenant(&store, "acme").await?;
    let a = common::soa(&store, t).await?.id;
    let b = common::soa(&store, t).await?.id;
    // A tenant with history: 400 turns on each of two instances.
    sqlx::query(
        "INSERT INTO agent_state_ledger (tenant_id, instance_id, turn_number, event_kind, decision_kind, phase)
         SELECT $1, i, g, 'AgentTick', 'Heartbeat', 'idle'
           FROM unnest($2::uuid[]) AS i, generate_series(1, 400) AS g",
    )
    .bind(t)
    .bind(vec![a, b])
    .execute(&pool)
    .await?;

    let reads = [
        // genesis_apply_complete's next turn number.
        "SELECT coalesce((SELECT l.turn_number FROM agent_state_ledger l
                           WHERE l.tenant_id = $2 AND l.instance_id = $1
                           ORDER BY l.turn_number DESC LIMIT 1), 0) + 1",
        // The bundle's ledger tail after a known turn (genesis_read_bundle).
        "SELECT l.turn_number FROM agent_state_ledger l
          WHERE l.instance_id = $1 AND l.turn_number > 0
          ORDER BY l.turn_number DESC LIMIT 12",
        // Ledger::tail, as the store sends it.
        "SELECT to_jsonb(l) FROM agent_state_ledger l
          WHERE instance_id = $1 ORDER BY turn_number DESC LIMIT 12",
    ];
    for analyzed in [false, true] {
        if analyzed {
            sqlx::query("ANALYZE agent_state_ledger")
                .execute(&pool)
                .await?;
        }
        for sql in reads {
            let p = plan(&pool, t, a, sql).await?;
            assert!(
                p.contains("Backward using agent_state_ledger_tenant_instance_turn_key"),
                "analyzed: {analyzed}\n{sql}\n{p}"
            );
            assert!(!p.contains("BitmapAnd"), "analyzed: {analyzed}\n{p}");
        }
    }

    // The key still refuses a second turn of the same number on an instance.
    let dup = sqlx::query(
        "INSERT INTO agent_state_ledger (tenant_id, instance_id, turn_number, event_kind, decision_kind, phase)
         VALUES ($1, $2, 400, 'AgentTick', 'Heartbeat', 'idle')",
    )
    .bind(t)
    .bind(a)
    .execute(&pool)
    .await
    .expect_err("a duplicate turn number");
    assert!(
        dup.to_string()
            .contains("agent_state_ledger_tenant_instance_turn_key"),
        "{dup}"
    );
    Ok(())
}
