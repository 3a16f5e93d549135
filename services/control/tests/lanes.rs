//! The lane and LLM admin services over gRPC, on real PostgreSQL and real
//! NATS (a unique registry bucket per test): LlmService bindings and
//! pricing, registry isolation and the SOA's self-registration, coders
//! without a cluster, coding-task preset resolution with DependencyCompleted
//! enqueued, and the Windows lane against an in-test pool simulator.

mod common;

use std::time::Duration;

use axum::routing::{get, post};
use common::*;
use genesis_core::TokenScope;
use genesis_proto::v1;
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

fn lane_config(pool: &PgPool) -> genesis_control::ControlConfig {
    let mut c = config(pool, NATS_URL);
    c.registry_bucket = format!("reg_{}", Uuid::new_v4().simple());
    c.auto_bootstrap = false;
    c
}

fn couple(model: &str, provider: &str, creds: &[&str]) -> v1::PresetCouple {
    v1::PresetCouple {
        model: model.into(),
        provider: provider.into(),
        backend: "api".into(),
        credential_names: creds.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn site<'a>(sites: &'a [v1::LlmSite], id: &str) -> anyhow::Result<&'a v1::LlmSite> {
    sites
        .iter()
        .find(|s| s.site_id == id)
        .ok_or_else(|| anyhow::anyhow!("site {id} missing"))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn attaching_a_preset_shows_on_list_sites_and_detaching_inherits_again(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let h = start(lane_config(&pool)).await?;
    let mut llm = v1::llm_service_client::LlmServiceClient::new(h.channel().await?);
    let mk = |name: &str| v1::UpsertPresetRequest {
        tenant_id: t.to_string(),
        preset: Some(v1::Preset {
            name: name.into(),
            primary: Some(couple(
                "claude-opus-4-8",
                "anthropic",
                &["ANTHROPIC_API_KEY"],
            )),
            ..Default::default()
        }),
    };
    let family = llm
        .upsert_preset(req(mk("family"), &op))
        .await?
        .into_inner();
    let pinned = llm
        .upsert_preset(req(mk("pinned"), &op))
        .await?
        .into_inner();
    llm.attach_preset(req(
        v1::AttachPresetRequest {
            tenant_id: t.to_string(),
            site_id: "Agent:Default".into(),
            preset_id: family.id.clone(),
        },
        &op,
    ))
    .await?;
    let sites = llm
        .list_sites(req(
            v1::ListSitesRequest {
                tenant_id: t.to_string(),
            },
            &op,
        ))
        .await?
        .into_inner()
        .sites;
    let planning = site(&sites, "Agent:Planning")?;
    assert_eq!(planning.effective_preset_id, family.id);
    assert!(planning.inherited);
    assert_eq!(planning.attached_preset_id, None);
    assert_eq!(planning.parent_site_id, "Agent:Default");

    let attached = llm
        .attach_preset(req(
            v1::AttachPresetRequest {
                tenant_id: t.to_string(),
                site_id: "Agent:Planning".into(),
                preset_id: pinned.id.clone(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(
        attached.attached_preset_id.as_deref(),
        Some(pinned.id.as_str())
    );
    assert_eq!(attached.effective_preset_id, pinned.id);
    assert!(!attached.inherited);
    let sites = llm
        .list_sites(req(
            v1::ListSitesRequest {
                tenant_id: t.to_string(),
            },
            &op,
        ))
        .await?
        .into_inner()
        .sites;
    assert_eq!(
        site(&sites, "Agent:Planning")?.effective_preset_id,
        pinned.id
    );
    assert_eq!(
        site(&sites, "Agent:Compliance")?.effective_preset_id,
        family.id
    );

    let detached = llm
        .detach_preset(req(
            v1::DetachPresetRequest {
                tenant_id: t.to_string(),
                site_id: "Agent:Planning".into(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(detached.attached_preset_id, None);
    assert_eq!(detached.effective_preset_id, family.id);
    assert!(detached.inherited);

    // Unknown site: NOT_FOUND, nothing bound.
    let e = llm
        .attach_preset(req(
            v1::AttachPresetRequest {
                tenant_id: t.to_string(),
                site_id: "Agent:Nope".into(),
                preset_id: pinned.id.clone(),
            },
            &op,
        ))
        .await
        .expect_err("unknown site");
    assert_eq!(e.code(), Code::NotFound);
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_preset_holding_a_secret_value_or_unknown_provider_is_refused_naming_the_field(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let h = start(lane_config(&pool)).await?;
    let mut llm = v1::llm_service_client::LlmServiceClient::new(h.channel().await?);
    let with = |c: v1::PresetCouple| v1::UpsertPresetRequest {
        tenant_id: t.to_string(),
        preset: Some(v1::Preset {
            name: "p".into(),
            primary: Some(c),
            ..Default::default()
        }),
    };
    let e = llm
        .upsert_preset(req(
            with(couple("m", "anthropic", &["sk-ant-api03-AbCdEf0123456789"])),
            &op,
        ))
        .await
        .expect_err("secret value");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .starts_with("preset.primary.credential_names[0]:"),
        "{}",
        e.message()
    );
    let e = llm
        .upsert_preset(req(with(couple("m", "acme", &[])), &op))
        .await
        .expect_err("unknown provider");
    assert!(
        e.message().starts_with("preset.primary.provider:"),
        "{}",
        e.message()
    );
    let listed = llm
        .list_presets(req(
            v1::ListPresetsRequest {
                tenant_id: t.to_string(),
            },
            &op,
        ))
        .await?
        .into_inner();
    // Only the default seeder's own preset may exist: the refused upserts
    // wrote nothing.
    assert!(
        listed.presets.iter().all(|p| p.name == "Default"),
        "nothing was written: {:?}",
        listed.presets
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_unpriced_model_or_a_chain_mixing_scripted_with_a_real_provider_is_refused(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let h = start(lane_config(&pool)).await?;
    let mut llm = v1::llm_service_client::LlmServiceClient::new(h.channel().await?);
    let chain = |name: &str, primary: v1::PresetCouple, fallback: Vec<v1::PresetCouple>| {
        v1::UpsertPresetRequest {
            tenant_id: t.to_string(),
            preset: Some(v1::Preset {
                name: name.into(),
                primary: Some(primary),
                fallback_chain: fallback,
                ..Default::default()
            }),
        }
    };
    let op2 = op.clone();
    let presets = move |llm: v1::llm_service_client::LlmServiceClient<_>| {
        let op = op2.clone();
        async move {
            let mut llm = llm;
            let listed = llm
                .list_presets(req(
                    v1::ListPresetsRequest {
                        tenant_id: t.to_string(),
                    },
                    &op,
                ))
                .await?
                .into_inner();
            anyhow::Ok(
                listed
                    .presets
                    .into_iter()
                    .map(|p| p.name)
                    .filter(|n| n != "Default")
                    .collect::<Vec<_>>(),
            )
        }
    };
    // A real chain that ends on the scripted provider.
    let e = llm
        .upsert_preset(req(
            chain(
                "mixed",
                couple("gpt-4o", "openai", &["OPENAI_API_KEY"]),
                vec![couple("scripted-1", "scripted", &[])],
            ),
            &op,
        ))
        .await
        .expect_err("mixed chain");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("scripted"), "{}", e.message());
    // A model the pricing table does not know, in the fallback chain.
    let e = llm
        .upsert_preset(req(
            chain(
                "unpriced",
                couple("claude-opus-4-8", "anthropic", &["ANTHROPIC_API_KEY"]),
                vec![couple("brand-new-model", "openai", &["OPENAI_API_KEY"])],
            ),
            &op,
        ))
        .await
        .expect_err("unpriced model");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message().contains("brand-new-model")
            && e.message()
                .contains("genesisctl llm pricing set brand-new-model"),
        "{}",
        e.message()
    );
    assert!(presets(llm.clone()).await?.is_empty(), "nothing written");
    // A dated name is priced by its base model's row; all-scripted is fine.
    let dated = llm
        .upsert_preset(req(
            chain(
                "dated",
                couple("gpt-4o-2024-08-06", "openai", &["OPENAI_API_KEY"]),
                vec![],
            ),
            &op,
        ))
        .await?
        .into_inner();
    llm.upsert_preset(req(
        chain("offline", couple("scripted-1", "scripted", &[]), vec![]),
        &op,
    ))
    .await?;
    // A price deleted after the preset was accepted: attaching it is refused.
    genesis_store::inspect::force_pricing_removed(&pool, "gpt-4o").await?;
    let e = llm
        .attach_preset(req(
            v1::AttachPresetRequest {
                tenant_id: t.to_string(),
                site_id: "Agent:Default".into(),
                preset_id: dated.id.clone(),
            },
            &op,
        ))
        .await
        .expect_err("its model lost its price");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("gpt-4o-2024-08-06"), "{}", e.message());
    let sites = llm
        .list_sites(req(
            v1::ListSitesRequest {
                tenant_id: t.to_string(),
            },
            &op,
        ))
        .await?
        .into_inner()
        .sites;
    assert_ne!(
        site(&sites, "Agent:Default")?.attached_preset_id.as_deref(),
        Some(dated.id.as_str()),
        "the refused attach bound nothing"
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn pricing_is_platform_only_and_non_negative(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let bound = token(&store, TokenScope::Operator, Some(t)).await?;
    let platform = token(&store, TokenScope::Operator, None).await?;
    let h = start(lane_config(&pool)).await?;
    let mut llm = v1::llm_service_client::LlmServiceClient::new(h.channel().await?);
    let set = |input: f64| v1::SetPricingRequest {
        model: "test-model-x".into(),
        input_per_mtok: input,
        output_per_mtok: 2.0,
        cache_read_per_mtok: None,
        cache_write_per_mtok: None,
    };
    let e = llm
        .set_pricing(req(set(1.0), &bound))
        .await
        .expect_err("tenant-bound");
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = llm
        .set_pricing(req(set(-1.0), &platform))
        .await
        .expect_err("negative");
    assert!(
        e.message().starts_with("input_per_mtok:"),
        "{}",
        e.message()
    );
    let p = llm
        .set_pricing(req(set(1.5), &platform))
        .await?
        .into_inner();
    assert_eq!(p.input_per_mtok, 1.5);
    let all = llm
        .list_pricing(req(v1::ListPricingRequest {}, &bound))
        .await?
        .into_inner();
    assert!(
        all.prices
            .iter()
            .any(|p| p.model == "test-model-x" && p.output_per_mtok == 2.0)
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn registry_entries_are_isolated_between_tenants(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let h = start(lane_config(&pool)).await?;
    let mut reg = v1::registry_service_client::RegistryServiceClient::new(h.channel().await?);
    let entry = reg
        .register(req(
            v1::RegisterRequest {
                tenant_id: a.to_string(),
                name: "coder-1".into(),
                role: "Developer".into(),
                capabilities: vec!["rust".into()],
                metadata_json: r#"{"endpoint":"http://coder-1:8080","team":"x"}"#.into(),
            },
            &op_a,
        ))
        .await?
        .into_inner();
    assert_eq!(entry.role, "Developer");
    let listed_a = reg
        .list(req(
            v1::RegistryListRequest {
                tenant_id: a.to_string(),
                ..Default::default()
            },
            &op_a,
        ))
        .await?
        .into_inner();
    assert_eq!(listed_a.agents.len(), 1);
    let listed_b = reg
        .list(req(
            v1::RegistryListRequest {
                tenant_id: b.to_string(),
                ..Default::default()
            },
            &op_b,
        ))
        .await?
        .into_inner();
    assert!(listed_b.agents.is_empty(), "B sees none of A's entries");
    // B's token cannot name A's tenant; B's tenant does not know A's id.
    let e = reg
        .list(req(
            v1::RegistryListRequest {
                tenant_id: a.to_string(),
                ..Default::default()
            },
            &op_b,
        ))
        .await
        .expect_err("other tenant");
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = reg
        .heartbeat(req(
            v1::HeartbeatRequest {
                tenant_id: b.to_string(),
                agent_id: entry.id.clone(),
            },
            &op_b,
        ))
        .await
        .expect_err("foreign id");
    assert_eq!(e.code(), Code::NotFound);
    let gone = reg
        .unregister(req(
            v1::UnregisterRequest {
                tenant_id: b.to_string(),
                agent_id: entry.id.clone(),
            },
            &op_b,
        ))
        .await?
        .into_inner();
    assert!(!gone.removed);
    let routed = reg
        .route(req(
            v1::RouteRequest {
                tenant_id: a.to_string(),
                capabilities: vec!["rust".into()],
                role: None,
            },
            &op_a,
        ))
        .await?
        .into_inner();
    assert_eq!(routed.agent.map(|x| x.id), Some(entry.id.clone()));
    let routed_b = reg
        .route(req(
            v1::RouteRequest {
                tenant_id: b.to_string(),
                capabilities: vec!["rust".into()],
                role: None,
            },
            &op_b,
        ))
        .await?
        .into_inner();
    assert!(routed_b.agent.is_none());
    // Bad input names the field.
    let e = reg
        .register(req(
            v1::RegisterRequest {
                tenant_id: a.to_string(),
                name: "x".into(),
                role: "Wizard".into(),
                ..Default::default()
            },
            &op_a,
        ))
        .await
        .expect_err("unknown role");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("role:"), "{}", e.message());
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_soa_shows_in_the_registry_after_bootstrap(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    store.tenants().set_standing_agents_enabled(t, true).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = lane_config(&pool);
    cfg.auto_bootstrap = true;
    let h = start(cfg).await?;
    let reg = v1::registry_service_client::RegistryServiceClient::new(h.channel().await?);
    let soa = eventually(Duration::from_secs(15), || {
        let mut reg = reg.clone();
        let op = op.clone();
        async move {
            let list = reg
                .list(req(
                    v1::RegistryListRequest {
                        tenant_id: t.to_string(),
                        role: Some("Orchestration".into()),
                        capability: None,
                    },
                    &op,
                ))
                .await?
                .into_inner();
            Ok(list.agents.into_iter().next())
        }
    })
    .await?;
    assert_eq!(soa.capabilities, vec!["orchestration".to_owned()]);
    let instance = store
        .instances()
        .list(t, Some(genesis_core::AgentType::Soa))
        .await?;
    assert_eq!(instance.len(), 1);
    let meta: serde_json::Value = serde_json::from_str(&soa.metadata_json)?;
    assert_eq!(meta["instanceId"], instance[0].id.to_string());
    assert_eq!(
        soa.id,
        instance[0].id.to_string(),
        "the entry is keyed by the SOA's own id, so replicas share it"
    );
    // A second control replica on the same bucket and database adds no
    // duplicate entry for the same SOA.
    let mut cfg2 = lane_config(&pool);
    cfg2.auto_bootstrap = true;
    cfg2.registry_bucket = h.config.registry_bucket.clone();
    cfg2.stream = h.config.stream.clone();
    cfg2.subject_prefix = h.config.subject_prefix.clone();
    cfg2.consumer = h.config.consumer.clone();
    let seen = soa.last_heartbeat_at.map(|t| (t.seconds, t.nanos));
    let h2 = start(cfg2).await?;
    // Wait until the second replica's bootstrap has registered the SOA: the
    // entry's heartbeat moves (or, were it keyed per replica, a second
    // entry appears).
    let agents = eventually(Duration::from_secs(15), || {
        let mut reg = reg.clone();
        let op = op.clone();
        async move {
            let list = reg
                .list(req(
                    v1::RegistryListRequest {
                        tenant_id: t.to_string(),
                        role: Some("Orchestration".into()),
                        capability: None,
                    },
                    &op,
                ))
                .await?
                .into_inner()
                .agents;
            let moved = list.len() > 1
                || list
                    .iter()
                    .any(|a| a.last_heartbeat_at.map(|t| (t.seconds, t.nanos)) > seen);
            Ok(moved.then_some(list))
        }
    })
    .await?;
    assert_eq!(agents.len(), 1, "{agents:?}");
    h2.stop().await?;
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn coders_without_a_cluster_answer_failed_precondition(pool: PgPool) -> anyhow::Result<()> {
    if std::env::var_os("KUBECONFIG").is_some()
        || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
    {
        return Ok(()); // a cluster may be reachable here; this test is about its absence
    }
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let h = start(lane_config(&pool)).await?;
    let mut coders = v1::coder_service_client::CoderServiceClient::new(h.channel().await?);
    let e = coders
        .spawn_coder(req(
            v1::SpawnCoderRequest {
                tenant_id: t.to_string(),
                name: "c1".into(),
                model: "m".into(),
                provider: "anthropic".into(),
                backend: "api".into(),
                ..Default::default()
            },
            &op,
        ))
        .await
        .expect_err("no cluster");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message().starts_with("no Kubernetes cluster reachable: "),
        "{}",
        e.message()
    );
    let e = coders
        .spawn_coder(req(
            v1::SpawnCoderRequest {
                tenant_id: t.to_string(),
                name: " ".into(),
                ..Default::default()
            },
            &op,
        ))
        .await
        .expect_err("empty name");
    assert!(e.message().starts_with("name:"), "{}", e.message());
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_coding_task_resolves_through_its_preset_and_completing_it_enqueues_dependency_completed(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let soa = soa(&store, t).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let h = start(lane_config(&pool)).await?;
    let ch = h.channel().await?;
    let mut llm = v1::llm_service_client::LlmServiceClient::new(ch.clone());
    let mut tasks = v1::coding_task_service_client::CodingTaskServiceClient::new(ch);
    let preset = llm
        .upsert_preset(req(
            v1::UpsertPresetRequest {
                tenant_id: t.to_string(),
                preset: Some(v1::Preset {
                    name: "coders".into(),
                    primary: Some(couple("gpt-5-codex", "openai", &["OPENAI_API_KEY"])),
                    ..Default::default()
                }),
            },
            &op,
        ))
        .await?
        .into_inner();
    let created = tasks
        .create_task(req(
            v1::CreateTaskRequest {
                tenant_id: t.to_string(),
                title: "fix the build".into(),
                instructions: "make cargo test pass".into(),
                preset_id: Some(preset.id.clone()),
                model: "ignored-model".into(),
                provider: "anthropic".into(),
                backend: "ignored".into(),
                repository: "git@example:repo".into(),
                ..Default::default()
            },
            &op,
        ))
        .await?
        .into_inner();
    let c = created
        .couple
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no couple"))?;
    assert_eq!(
        (c.model.as_str(), c.provider.as_str()),
        ("gpt-5-codex", "openai")
    );
    assert_eq!(c.credential_names, vec!["OPENAI_API_KEY".to_owned()]);
    assert_eq!(created.status, "pending");

    // Without a preset the explicit triple is required.
    let e = tasks
        .create_task(req(
            v1::CreateTaskRequest {
                tenant_id: t.to_string(),
                title: "x".into(),
                instructions: "y".into(),
                model: "m".into(),
                ..Default::default()
            },
            &op,
        ))
        .await
        .expect_err("no provider");
    assert!(e.message().starts_with("provider:"), "{}", e.message());
    let e = tasks
        .create_task(req(
            v1::CreateTaskRequest {
                tenant_id: t.to_string(),
                title: "".into(),
                ..Default::default()
            },
            &op,
        ))
        .await
        .expect_err("empty title");
    assert!(e.message().starts_with("title:"), "{}", e.message());

    let done = tasks
        .complete_task(req(
            v1::CompleteTaskRequest {
                tenant_id: t.to_string(),
                task_id: created.id.clone(),
                status: "completed".into(),
                result_summary: "green".into(),
                result_json: r#"{"commits":1}"#.into(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(done.status, "completed");
    assert!(done.completed_at.is_some());
    let events =
        genesis_store::inspect::events_of_kind(&pool, soa.id, "DependencyCompleted").await?;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].1["codingTaskId"], created.id);
    assert_eq!(events[0].1["status"], "completed");

    let again = tasks
        .complete_task(req(
            v1::CompleteTaskRequest {
                tenant_id: t.to_string(),
                task_id: created.id.clone(),
                status: "failed".into(),
                ..Default::default()
            },
            &op,
        ))
        .await
        .expect_err("settled");
    assert_eq!(again.code(), Code::FailedPrecondition);
    let e = tasks
        .complete_task(req(
            v1::CompleteTaskRequest {
                tenant_id: t.to_string(),
                task_id: created.id.clone(),
                status: "running".into(),
                ..Default::default()
            },
            &op,
        ))
        .await
        .expect_err("bad status");
    assert!(e.message().starts_with("status:"), "{}", e.message());
    let n = genesis_store::inspect::count_events_of_kind(&pool, "DependencyCompleted").await?;
    assert_eq!(n, 1, "a refused settle enqueues nothing");
    let listed = tasks
        .list_tasks(req(
            v1::ListTasksRequest {
                tenant_id: t.to_string(),
                status: Some("completed".into()),
                coder_id: None,
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(listed.tasks.len(), 1);
    let got = tasks
        .get_task(req(
            v1::GetTaskRequest {
                tenant_id: t.to_string(),
                task_id: created.id.clone(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(got.result_summary, "green");
    h.stop().await
}

/// A Windows pool answering a lease and the window list.
async fn pool_simulator() -> anyhow::Result<String> {
    let app = axum::Router::new()
        .route(
            "/leases",
            post(|| async {
                axum::Json(serde_json::json!({
                    "leaseId": "l-1", "sessionId": "s-1", "host": "win-01"
                }))
            }),
        )
        .route(
            "/sessions/{sid}/windows",
            get(|| async {
                axum::Json(serde_json::json!({"windows": [
                    {"hwnd": 42, "title": "Notepad", "pid": 7, "bounds": {"x": 0, "y": 0, "width": 640, "height": 480}}
                ]}))
            }),
        )
        .route(
            "/sessions/{sid}/windows/{hwnd}/focus",
            post(|| async {
                (
                    axum::http::StatusCode::NOT_FOUND,
                    axum::Json(serde_json::json!({"error": "WINDOW_NOT_FOUND", "message": "hwnd gone"})),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}"))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn windows_verbs_are_feature_gated_and_reach_the_pool_when_on(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = lane_config(&pool);
    cfg.windows_pool_url = Some(pool_simulator().await?);
    cfg.windows_pool_token = Some("pool-credential".into());
    let h = start(cfg).await?;
    let mut win =
        v1::windows_lane_service_client::WindowsLaneServiceClient::new(h.channel().await?);
    let session = Some(v1::WindowsSession {
        tenant_id: t.to_string(),
        coder_id: "coder-1".into(),
    });

    let off = win
        .windows(req(
            v1::WindowsRequest {
                session: session.clone(),
            },
            &op,
        ))
        .await?
        .into_inner();
    let err = off
        .error
        .ok_or_else(|| anyhow::anyhow!("expected FEATURE_DISABLED"))?;
    assert_eq!(err.code, "FEATURE_DISABLED");
    assert!(!err.retryable);
    assert!(off.windows.is_empty());

    store
        .tenants()
        .set_feature_flag(t, "windows-pool", true)
        .await?;
    let on = win
        .windows(req(
            v1::WindowsRequest {
                session: session.clone(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert!(on.error.is_none(), "{:?}", on.error);
    assert_eq!(on.windows.len(), 1);
    assert_eq!(on.windows[0].hwnd, 42);
    assert_eq!(on.windows[0].title, "Notepad");

    let focus = win
        .focus(req(
            v1::FocusRequest {
                session: session.clone(),
                hwnd: 99,
            },
            &op,
        ))
        .await?
        .into_inner();
    let err = focus
        .error
        .ok_or_else(|| anyhow::anyhow!("expected WINDOW_NOT_FOUND"))?;
    assert_eq!(err.code, "WINDOW_NOT_FOUND");
    assert_eq!(err.http_status, 404);
    assert!(err.pool_detail_json.contains("WINDOW_NOT_FOUND"));

    // The caller's own fault stays a gRPC error naming the field.
    let e = win
        .windows(req(
            v1::WindowsRequest {
                session: Some(v1::WindowsSession {
                    tenant_id: t.to_string(),
                    coder_id: String::new(),
                }),
            },
            &op,
        ))
        .await
        .expect_err("empty coder");
    assert!(
        e.message().starts_with("session.coder_id:"),
        "{}",
        e.message()
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn without_a_pool_url_windows_verbs_answer_pool_unavailable(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    store
        .tenants()
        .set_feature_flag(t, "windows-pool", true)
        .await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let h = start(lane_config(&pool)).await?;
    let mut win =
        v1::windows_lane_service_client::WindowsLaneServiceClient::new(h.channel().await?);
    let r = win
        .release(req(
            v1::ReleaseRequest {
                session: Some(v1::WindowsSession {
                    tenant_id: t.to_string(),
                    coder_id: "c".into(),
                }),
            },
            &op,
        ))
        .await?
        .into_inner();
    let err = r
        .error
        .ok_or_else(|| anyhow::anyhow!("expected POOL_UNAVAILABLE"))?;
    assert_eq!(err.code, "POOL_UNAVAILABLE");
    assert!(err.retryable);
    h.stop().await
}

/// A scan works only where something is missing (DESIGN §4 bootstrap): a
/// second scan creates nothing, and a SOA another replica created, which
/// this replica keeps no registry entry for, is registered here, not
/// created again.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_scan_registers_another_replica_s_soa_and_creates_nothing_twice(
    pool: PgPool,
) -> anyhow::Result<()> {
    use genesis_control::bootstrap::bootstrap_all;
    use genesis_core::AgentType;
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let off = store.tenants().create("off").await?.id;
    store.tenants().set_standing_agents_enabled(a, true).await?;
    let mut cfg = lane_config(&pool);
    cfg.auto_bootstrap = true;
    let one =
        genesis_control::server::state(cfg.clone(), tokio_util::sync::CancellationToken::new())
            .await?;
    let two =
        genesis_control::server::state(cfg.clone(), tokio_util::sync::CancellationToken::new())
            .await?;

    assert_eq!(bootstrap_all(&one).await?, 1);
    assert_eq!(
        bootstrap_all(&one).await?,
        0,
        "a second scan creates nothing"
    );
    let soa_a = store.instances().list(a, Some(AgentType::Soa)).await?;
    assert_eq!(soa_a.len(), 1);
    assert!(one.lanes.knows_soa(a, soa_a[0].id));
    assert!(store.instances().list(off, None).await?.is_empty());

    // A tenant enabled later, bootstrapped by replica two alone.
    let b = store.tenants().create("b").await?.id;
    store.tenants().set_standing_agents_enabled(b, true).await?;
    assert_eq!(bootstrap_all(&two).await?, 1);
    let soa_b = store.instances().list(b, Some(AgentType::Soa)).await?;
    assert_eq!(soa_b.len(), 1);
    assert!(two.lanes.knows_soa(b, soa_b[0].id));
    assert!(!one.lanes.knows_soa(b, soa_b[0].id));
    // Replica one's scan takes over keeping its entry, and adds no SOA.
    assert_eq!(bootstrap_all(&one).await?, 0);
    assert!(one.lanes.knows_soa(b, soa_b[0].id));
    assert_eq!(
        store.instances().list(b, Some(AgentType::Soa)).await?.len(),
        1
    );
    leave_nothing_on_nats(&cfg).await;
    Ok(())
}
