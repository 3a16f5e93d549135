//! AgentService's mode catalogue edits through `run` on real PostgreSQL and
//! NATS: EditMode changes a mode for the caller's tenant alone (GetMode and
//! ListModes of that tenant show it, the claim's bundle read carries it,
//! the catalogue epoch moves, a `catalogue` audit row names the token and
//! each change old→new); every refused edit (a tool outside the superset,
//! named; an unknown preset or mode; nothing to edit; a bad budget) changes
//! nothing; and another tenant's token can neither see nor change it.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use genesis_core::{AgentType, TokenScope};
use genesis_proto::v1;
use genesis_store::BundleAsk;
use serde_json::json;
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

type Client = v1::agent_service_client::AgentServiceClient<tonic::transport::Channel>;

fn edit(tenant: Uuid, agent_type: &str, mode: &str) -> v1::EditModeRequest {
    v1::EditModeRequest {
        tenant_id: tenant.to_string(),
        agent_type: agent_type.into(),
        mode: mode.into(),
        ..Default::default()
    }
}

fn get(tenant: Uuid, agent_type: &str, mode: &str) -> v1::GetModeRequest {
    v1::GetModeRequest {
        tenant_id: tenant.to_string(),
        agent_type: agent_type.into(),
        mode: mode.into(),
    }
}

async fn epoch(pool: &PgPool) -> i64 {
    genesis_store::inspect::catalogue_epoch(pool).await.unwrap()
}

/// (override rows, catalogue audit rows) across every tenant.
async fn written(pool: &PgPool) -> (i64, i64) {
    (
        genesis_store::inspect::count_mode_overrides(pool)
            .await
            .unwrap(),
        genesis_store::inspect::count_catalogue_mode_changes(pool)
            .await
            .unwrap(),
    )
}

async fn started(pool: &PgPool) -> anyhow::Result<(Harness, Client)> {
    let mut cfg = config(pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let c = Client::new(h.channel().await?);
    Ok((h, c))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_operator_edits_a_mode_for_its_tenant_and_the_next_claim_reads_it(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let soa_a = soa(&store, a).await?;
    let (tok_a, _) =
        genesis_control::tokens::mint(&store, TokenScope::Operator, Some(a), "ops-lead", None)
            .await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let (h, mut c) = started(&pool).await?;
    let platform = c
        .get_mode(req(get(a, "Soa", "Incident"), &tok_a))
        .await?
        .into_inner();
    assert!(!platform.tenant_override && platform.system_seed);
    let epoch_before = epoch(&pool).await;

    let mut e = edit(a, "Soa", "Incident");
    e.prompt_fragment = Some("Contain first; page the on-call.".into());
    e.toolset = Some(v1::ModeToolset {
        tools: vec!["soa_query_telemetry".into(), "soa_send_message".into()],
    });
    e.budget_override = Some(v1::BudgetEnvelope {
        max_turns: Some(6),
        max_wall_ms: Some(120_000),
        ..Default::default()
    });
    let out = c.edit_mode(req(e.clone(), &tok_a)).await?.into_inner();
    assert_eq!(
        out.changed,
        ["prompt_fragment", "toolset", "budget_override"]
    );
    let mode = out.mode.unwrap();
    assert!(mode.tenant_override && !mode.system_seed);
    assert_eq!(mode.prompt_fragment, "Contain first; page the on-call.");
    assert_eq!(mode.toolset, ["soa_query_telemetry", "soa_send_message"]);
    let budget = mode.budget_override.unwrap();
    assert_eq!(
        (budget.max_turns, budget.max_wall_ms),
        (Some(6), Some(120_000))
    );
    assert_eq!(mode.description, platform.description);

    // Who, when, what: the audit row of the edit.
    let edits = store.modes().edits(a, AgentType::Soa).await?;
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0].id.to_string(), out.mode_change_event_id);
    assert!(
        edits[0].actor.starts_with("ops-lead (token:"),
        "{}",
        edits[0].actor
    );
    assert!((chrono::Utc::now() - edits[0].created_at).num_seconds() < 60);
    assert_eq!(
        edits[0].changes["prompt_fragment"],
        json!({"old": platform.prompt_fragment, "new": "Contain first; page the on-call."})
    );
    assert_eq!(
        edits[0].changes["toolset"],
        json!({"old": platform.toolset, "new": ["soa_query_telemetry", "soa_send_message"]})
    );
    assert_eq!(
        edits[0].changes["budget_override"],
        json!({"old": null, "new": {"maxTurns": 6, "maxWallSeconds": 120}})
    );

    // The tenant reads its edit; the other tenant the platform's.
    let got = c
        .get_mode(req(get(a, "Soa", "Incident"), &tok_a))
        .await?
        .into_inner();
    assert_eq!(got, mode);
    let listed = c
        .list_modes(req(
            v1::ListModesRequest {
                tenant_id: a.to_string(),
                agent_type: "Soa".into(),
            },
            &tok_a,
        ))
        .await?
        .into_inner()
        .modes;
    assert_eq!(listed.len(), 6);
    assert_eq!(
        listed
            .iter()
            .filter(|m| m.tenant_override)
            .collect::<Vec<_>>(),
        vec![&mode]
    );
    let theirs = c
        .get_mode(req(get(b, "Soa", "Incident"), &op_b))
        .await?
        .into_inner();
    assert_eq!(theirs, platform);

    // Supervisors see it: the epoch moved and the claim's read carries it.
    assert!(epoch(&pool).await > epoch_before);
    let sites = vec!["Agent:Planning".to_owned(), "Agent:Default".to_owned()];
    let (bundle, _) = store
        .read_tick_bundle(
            a,
            soa_a.id,
            &BundleAsk {
                tail: 12,
                agent_type: AgentType::Soa,
                sites: &sites,
                week_start: chrono::DateTime::UNIX_EPOCH,
                known: None,
                catalogue_epoch: epoch_before,
            },
        )
        .await?;
    let incident = bundle["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "Incident")
        .unwrap()
        .clone();
    assert_eq!(
        incident["prompt_fragment"],
        "Contain first; page the on-call."
    );
    assert_eq!(
        incident["toolset"],
        json!(["soa_query_telemetry", "soa_send_message"])
    );

    // The same edit again: nothing changed, nothing written.
    let again = c.edit_mode(req(e, &tok_a)).await?.into_inner();
    assert!(again.changed.is_empty() && again.mode_change_event_id.is_empty());
    assert_eq!(store.modes().edits(a, AgentType::Soa).await?.len(), 1);

    // Clearing the budget override records it.
    let mut clear = edit(a, "Soa", "Incident");
    clear.clear_budget_override = true;
    let cleared = c.edit_mode(req(clear, &tok_a)).await?.into_inner();
    assert_eq!(cleared.changed, ["budget_override"]);
    assert_eq!(cleared.mode.unwrap().budget_override, None);
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_refused_edit_names_its_field_and_changes_nothing(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(a)).await?;
    let (h, mut c) = started(&pool).await?;
    let before = c
        .get_mode(req(get(a, "Compliance", "Cadence"), &op))
        .await?
        .into_inner();

    // A tool outside the type's superset: refused, naming the tool.
    let mut e = edit(a, "Compliance", "Cadence");
    e.prompt_fragment = Some("self-apply freely".into());
    e.toolset = Some(v1::ModeToolset {
        tools: vec!["compliance_query_posture".into(), "soa_propose_task".into()],
    });
    let err = c.edit_mode(req(e, &op)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().starts_with("toolset:") && err.message().contains("soa_propose_task"),
        "{}",
        err.message()
    );

    let tools = |tools: &[&str]| {
        let mut e = edit(a, "Soa", "Strategic");
        e.toolset = Some(v1::ModeToolset {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        });
        e
    };
    let mut unknown_preset = edit(a, "Soa", "Strategic");
    unknown_preset.preset = Some("no-such-preset".into());
    let mut bad_budget = edit(a, "Soa", "Strategic");
    bad_budget.budget_override = Some(v1::BudgetEnvelope {
        max_tool_calls: Some(-3),
        ..Default::default()
    });
    let mut both = edit(a, "Soa", "Strategic");
    both.budget_override = Some(v1::BudgetEnvelope {
        max_turns: Some(3),
        ..Default::default()
    });
    both.clear_budget_override = true;
    let mut fragment = edit(a, "Soa", "Strategic");
    fragment.prompt_fragment = Some("x".repeat(16 * 1024 + 1));
    let mut other_type = edit(a, "Robot", "Strategic");
    other_type.prompt_fragment = Some("x".into());
    for (request, code, needle) in [
        (tools(&["config_set"]), Code::InvalidArgument, "config_set"),
        (
            tools(&["phase_complete"]),
            Code::InvalidArgument,
            "phase_complete",
        ),
        (
            tools(&["soa_send_message", "soa_send_message"]),
            Code::InvalidArgument,
            "twice",
        ),
        (edit(a, "Soa", "Strategic"), Code::InvalidArgument, "edit:"),
        (unknown_preset, Code::InvalidArgument, "preset:"),
        (
            bad_budget,
            Code::InvalidArgument,
            "budget_override.max_tool_calls",
        ),
        (both, Code::InvalidArgument, "clear_budget_override"),
        (fragment, Code::InvalidArgument, "prompt_fragment"),
        (other_type, Code::InvalidArgument, "agent_type"),
        (
            {
                let mut e = edit(a, "Soa", "Panic");
                e.prompt_fragment = Some("x".into());
                e
            },
            Code::NotFound,
            "Panic",
        ),
    ] {
        let err = c.edit_mode(req(request, &op)).await.unwrap_err();
        assert_eq!(err.code(), code, "{needle}: {err:?}");
        assert!(
            err.message().contains(needle),
            "{needle}: {}",
            err.message()
        );
    }
    // Nothing of any refused edit was written. (The catalogue epoch is not
    // compared here: the running control may write other catalogue tables
    // meanwhile; the store's tests check an edit's epoch exactly.)
    assert_eq!(written(&pool).await, (0, 0));
    let after = c
        .get_mode(req(get(a, "Compliance", "Cadence"), &op))
        .await?
        .into_inner();
    assert_eq!(after, before);
    let e = c
        .get_mode(req(get(a, "Soa", "Panic"), &op))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    h.stop().await
}

/// A tenant-bound token's budget override is held to the platform's
/// per-tick maxima for its tenant, as the TickMax* keys are: an axis above
/// one is PERMISSION_DENIED naming the axis and the ceiling, and nothing is
/// written; at the maximum it is accepted; a platform token sets it higher,
/// and the platform's own value for the tenant lifts the tenant's bound. A
/// mode whose catalogue seed is wider (Compliance Research) is bounded by
/// its seed.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_token_cannot_budget_a_mode_past_the_platforms_maxima(
    pool: PgPool,
) -> anyhow::Result<()> {
    use genesis_core::options::keys::{TICK_MAX_DOLLARS, TICK_MAX_TURNS};
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(a)).await?;
    let root = token(&store, TokenScope::Operator, None).await?;
    let (h, mut c) = started(&pool).await?;
    let budget = |b: v1::BudgetEnvelope| {
        let mut e = edit(a, "Soa", "Strategic");
        e.budget_override = Some(b);
        e
    };
    let turns = |n: i32| {
        budget(v1::BudgetEnvelope {
            max_turns: Some(n),
            ..Default::default()
        })
    };
    let before = c
        .get_mode(req(get(a, "Soa", "Strategic"), &op))
        .await?
        .into_inner();
    for (request, needle) in [
        (
            turns(13),
            "budget_override: maxTurns 13 is above AgentDispatcher:TickMaxTurns, the \
             platform's per-tick maximum for this tenant (12)",
        ),
        (
            budget(v1::BudgetEnvelope {
                max_turns: Some(2),
                max_cost_usd: Some(2.0),
                ..Default::default()
            }),
            "maxDollars 2 is above AgentDispatcher:TickMaxDollars",
        ),
        (
            budget(v1::BudgetEnvelope {
                max_wall_ms: Some(301_000),
                ..Default::default()
            }),
            "maxWallSeconds 301 is above AgentDispatcher:TickMaxWallSeconds",
        ),
    ] {
        let err = c.edit_mode(req(request, &op)).await.unwrap_err();
        assert_eq!(err.code(), Code::PermissionDenied, "{needle}: {err:?}");
        assert!(
            err.message().contains(needle),
            "{needle}: {}",
            err.message()
        );
        assert!(
            err.message()
                .contains("only a platform token may set it higher"),
            "{}",
            err.message()
        );
    }
    assert_eq!(written(&pool).await, (0, 0), "nothing written");
    assert_eq!(
        c.get_mode(req(get(a, "Soa", "Strategic"), &op))
            .await?
            .into_inner(),
        before
    );

    // At the platform's maximum: the tenant's to set.
    let out = c.edit_mode(req(turns(12), &op)).await?.into_inner();
    assert_eq!(
        out.mode.unwrap().budget_override.unwrap().max_turns,
        Some(12)
    );
    // A platform token sets it past the maximum.
    let out = c.edit_mode(req(turns(40), &root)).await?.into_inner();
    assert_eq!(
        out.mode.unwrap().budget_override.unwrap().max_turns,
        Some(40)
    );
    // The platform's own value for the tenant is the tenant's bound.
    store.config().set(Some(a), TICK_MAX_TURNS, "50").await?;
    store
        .config()
        .set(None, TICK_MAX_DOLLARS, "unlimited")
        .await?;
    let out = c
        .edit_mode(req(
            budget(v1::BudgetEnvelope {
                max_turns: Some(50),
                max_cost_usd: Some(9.5),
                ..Default::default()
            }),
            &op,
        ))
        .await?
        .into_inner();
    let b = out.mode.unwrap().budget_override.unwrap();
    assert_eq!((b.max_turns, b.max_cost_usd), (Some(50), Some(9.5)));
    let err = c.edit_mode(req(turns(51), &op)).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains("(50)"), "{}", err.message());

    // Compliance Research's seeded budget is wider than the per-tick
    // values (24 turns against 12): a tenant keeps it, and may not go past it.
    let research = |n: i32| {
        let mut e = edit(a, "Compliance", "Research");
        e.budget_override = Some(v1::BudgetEnvelope {
            max_turns: Some(n),
            ..Default::default()
        });
        e
    };
    store.config().set(Some(a), TICK_MAX_TURNS, "12").await?;
    let out = c.edit_mode(req(research(24), &op)).await?.into_inner();
    assert_eq!(
        out.mode.unwrap().budget_override.unwrap().max_turns,
        Some(24)
    );
    let err = c.edit_mode(req(research(25), &op)).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(
        err.message().contains("maxTurns 25 is above") && err.message().contains("(24)"),
        "{}",
        err.message()
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn another_tenants_token_can_neither_see_nor_change_a_tenants_mode(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let (h, mut c) = started(&pool).await?;
    let mut mine = edit(a, "Soa", "Dialogue");
    mine.prompt_fragment = Some("a's own dialogue".into());
    c.edit_mode(req(mine, &op_a)).await?;
    let written_before = written(&pool).await;

    // B's token aimed at A: refused before anything is read or written.
    let mut theirs = edit(a, "Soa", "Dialogue");
    theirs.prompt_fragment = Some("b was here".into());
    let e = c.edit_mode(req(theirs, &op_b)).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = c
        .get_mode(req(get(a, "Soa", "Dialogue"), &op_b))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = c
        .list_modes(req(
            v1::ListModesRequest {
                tenant_id: a.to_string(),
                agent_type: "Soa".into(),
            },
            &op_b,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert_eq!(written(&pool).await, written_before);

    // B's own view is the platform's, and B's own edit leaves A's alone.
    let b_view = c
        .get_mode(req(get(b, "Soa", "Dialogue"), &op_b))
        .await?
        .into_inner();
    assert!(!b_view.tenant_override);
    assert_ne!(b_view.prompt_fragment, "a's own dialogue");
    let mut own = edit(b, "Soa", "Dialogue");
    own.prompt_fragment = Some("b's own dialogue".into());
    c.edit_mode(req(own, &op_b)).await?;
    let a_view = c
        .get_mode(req(get(a, "Soa", "Dialogue"), &op_a))
        .await?
        .into_inner();
    assert_eq!(a_view.prompt_fragment, "a's own dialogue");
    assert_eq!(store.modes().edits(a, AgentType::Soa).await?.len(), 1);
    assert_eq!(store.modes().edits(b, AgentType::Soa).await?.len(), 1);
    h.stop().await
}
