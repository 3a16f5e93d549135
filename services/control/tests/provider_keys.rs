//! The credentials a preset may name, over the real control gRPC on real
//! PostgreSQL and NATS: control reads the deployment's provider keys from a
//! key directory shaped as a mounted Kubernetes Secret (key files,
//! `<NAME>.tenants` bindings, the agent token sharing the Secret), and
//! UpsertPreset / AttachPreset refuse, with FAILED_PRECONDITION naming the
//! names the tenant may use, a platform variable, an unknown name and a key
//! bound to another tenant — writing nothing; EditMode and CreateTask
//! refuse a stored preset naming such a key the same way.

mod common;

use std::path::PathBuf;

use common::*;
use genesis_core::TokenScope;
use genesis_proto::v1;
use genesis_store::Store;
use genesis_store::llm::{NewPreset, PresetCouple};
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

/// The names the tenant of these tests may use, as the refusal lists them.
const ALLOWED: &str = "ANTHROPIC_API_KEY, OPENAI_API_KEY, SHARED, TEAM_MINE";

/// A key directory removed when dropped.
struct KeyDir(PathBuf);

impl KeyDir {
    fn new(mine: Uuid, other: Uuid) -> anyhow::Result<KeyDir> {
        let dir = std::env::temp_dir().join(format!("genesis-control-keys-{}", Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("..2026_01_01"))?;
        for (name, text) in [
            ("TEAM_MINE", "sk-mine".to_owned()),
            ("TEAM_MINE.tenants", format!("{mine}\n")),
            ("TEAM_OTHER", "sk-other".to_owned()),
            ("TEAM_OTHER.tenants", format!("{other}\n")),
            ("SHARED", "sk-shared".to_owned()),
            // The agent token shares the Secret: never a key.
            ("GENESIS_AGENT_TOKEN", "gen_pod_token".to_owned()),
        ] {
            std::fs::write(dir.join(name), text)?;
        }
        Ok(KeyDir(dir))
    }
}

impl Drop for KeyDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Control serving a [`KeyDir`] of tenant `t` (and `other`), with an
/// operator token of `t`; the directory lives as long as this does.
struct Keyed {
    store: Store,
    t: Uuid,
    other: Uuid,
    op: String,
    h: Harness,
    _keys: KeyDir,
}

async fn start_keyed(pool: &PgPool) -> anyhow::Result<Keyed> {
    let store = store(pool);
    let t = store.tenants().create("mine").await?.id;
    let other = store.tenants().create("other").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let keys = KeyDir::new(t, other)?;
    let mut config = config(pool, NATS_URL);
    config.auto_bootstrap = false;
    config.llm_key_dir = Some(keys.0.clone());
    let h = start(config).await?;
    Ok(Keyed {
        store,
        t,
        other,
        op,
        h,
        _keys: keys,
    })
}

/// A preset naming `SHARED` and, in its one fallback, `fallback`, as
/// written straight to the store.
fn preset_naming(name: &str, fallback: &str) -> NewPreset {
    NewPreset {
        name: name.into(),
        primary: PresetCouple {
            model: "gpt-4o".into(),
            provider: "openai".into(),
            backend: "api".into(),
            credentials: vec!["SHARED".into()],
        },
        fallback: vec![PresetCouple {
            model: "gpt-4o".into(),
            provider: "openai".into(),
            backend: "api".into(),
            credentials: vec![fallback.into()],
        }],
        overlays: serde_json::json!({}),
    }
}

/// A refusal whose message starts with `start` and lists the names this
/// tenant may use.
fn assert_names_allowed(what: &str, e: &tonic::Status, start: &str) {
    assert!(e.message().starts_with(start), "{what}: {}", e.message());
    assert!(
        e.message().contains(&format!(
            "the provider keys this tenant may name: {ALLOWED} ("
        )),
        "{what}: {}",
        e.message()
    );
}

fn couple(model: &str, provider: &str, creds: &[&str]) -> v1::PresetCouple {
    v1::PresetCouple {
        model: model.into(),
        provider: provider.into(),
        backend: "api".into(),
        credential_names: creds.iter().map(|s| (*s).to_owned()).collect(),
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_preset_may_name_only_the_provider_keys_bound_to_its_tenant(
    pool: PgPool,
) -> anyhow::Result<()> {
    let Keyed {
        store,
        t,
        other,
        op,
        h,
        _keys,
    } = start_keyed(&pool).await?;
    let mut llm = v1::llm_service_client::LlmServiceClient::new(h.channel().await?);
    let upsert = |name: &str, primary: v1::PresetCouple, fallback: Vec<v1::PresetCouple>| {
        req(
            v1::UpsertPresetRequest {
                tenant_id: t.to_string(),
                preset: Some(v1::Preset {
                    name: name.into(),
                    primary: Some(primary),
                    fallback_chain: fallback,
                    ..Default::default()
                }),
            },
            &op,
        )
    };
    let list = || {
        req(
            v1::ListPresetsRequest {
                tenant_id: t.to_string(),
            },
            &op,
        )
    };

    let refused = [
        (
            "agent token",
            upsert(
                "a",
                couple("gpt-4o", "openai", &["GENESIS_AGENT_TOKEN"]),
                vec![],
            ),
            "preset.primary.credential_names[0]: \"GENESIS_AGENT_TOKEN\" can never be named: \
             names under GENESIS_",
        ),
        (
            "OTLP headers",
            upsert(
                "b",
                couple("gpt-4o", "openai", &["OPENAI_API_KEY"]),
                vec![couple(
                    "claude-opus-4-8",
                    "anthropic",
                    &["ANTHROPIC_API_KEY", "OTEL_EXPORTER_OTLP_HEADERS"],
                )],
            ),
            "preset.fallback_chain[0].credential_names[1]: \"OTEL_EXPORTER_OTLP_HEADERS\" can \
             never be named: names under OTEL_",
        ),
        (
            "unknown name",
            upsert(
                "c",
                couple("gpt-4o", "openai", &["SHARED", "NOT_A_KEY"]),
                vec![],
            ),
            "preset.primary.credential_names[1]: \"NOT_A_KEY\" is not a provider key this \
             tenant may use",
        ),
        (
            "another tenant's key",
            upsert("d", couple("gpt-4o", "openai", &["TEAM_OTHER"]), vec![]),
            "preset.primary.credential_names[0]: \"TEAM_OTHER\" is not a provider key this \
             tenant may use",
        ),
    ];
    for (what, request, start) in refused {
        let e = llm.upsert_preset(request).await.expect_err(what);
        assert_eq!(
            e.code(),
            Code::FailedPrecondition,
            "{what}: {}",
            e.message()
        );
        assert_names_allowed(what, &e, start);
        assert!(!e.message().contains("TEAM_OTHER,"), "{}", e.message());
    }
    let written: Vec<String> = llm
        .list_presets(list())
        .await?
        .into_inner()
        .presets
        .into_iter()
        .map(|p| p.name)
        .filter(|n| n != "Default")
        .collect();
    assert!(written.is_empty(), "nothing was written: {written:?}");

    // A key bound to the tenant, an unbound one and a well-known name.
    let accepted = llm
        .upsert_preset(upsert(
            "mine",
            couple("gpt-4o", "openai", &["TEAM_MINE", "SHARED"]),
            vec![couple(
                "claude-opus-4-8",
                "anthropic",
                &["ANTHROPIC_API_KEY"],
            )],
        ))
        .await?
        .into_inner();
    assert_eq!(
        accepted.primary.map(|c| c.credential_names),
        Some(vec!["TEAM_MINE".to_owned(), "SHARED".to_owned()])
    );

    // A preset written before its key was rebound: attaching it is refused.
    let stale = store
        .llm()
        .create_preset(t, preset_naming("stale", "TEAM_OTHER"))
        .await?;
    let attach = |preset: &str| {
        req(
            v1::AttachPresetRequest {
                tenant_id: t.to_string(),
                site_id: "Agent:Default".into(),
                preset_id: preset.to_owned(),
            },
            &op,
        )
    };
    let e = llm
        .attach_preset(attach(&stale.id.to_string()))
        .await
        .expect_err("stale key");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message().starts_with(
            "preset.fallback_chain[0].credential_names[0]: \"TEAM_OTHER\" is not a provider key"
        ),
        "{}",
        e.message()
    );
    let bound = store
        .llm()
        .bindings_for(t, &["Agent:Default".to_owned()])
        .await?;
    assert!(
        bound.iter().all(|(_, p)| p.id != stale.id),
        "the refused attach bound nothing"
    );
    let site = llm.attach_preset(attach(&accepted.id)).await?.into_inner();
    assert_eq!(
        site.attached_preset_id.as_deref(),
        Some(accepted.id.as_str())
    );

    // The other tenant may use its own key, not this tenant's.
    let op_other = token(&store, TokenScope::Operator, Some(other)).await?;
    let theirs = |creds: &[&str]| {
        req(
            v1::UpsertPresetRequest {
                tenant_id: other.to_string(),
                preset: Some(v1::Preset {
                    name: "theirs".into(),
                    primary: Some(couple("gpt-4o", "openai", creds)),
                    ..Default::default()
                }),
            },
            &op_other,
        )
    };
    let e = llm
        .upsert_preset(theirs(&["TEAM_MINE"]))
        .await
        .expect_err("not bound to the other tenant");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message()
            .contains("may name: ANTHROPIC_API_KEY, OPENAI_API_KEY, SHARED, TEAM_OTHER ("),
        "{}",
        e.message()
    );
    llm.upsert_preset(theirs(&["TEAM_OTHER"])).await?;
    h.stop().await
}

/// A preset accepted before its key was rebound is refused wherever a
/// tenant puts it to use besides a site: given to a mode (EditMode, by name
/// or id) or to a coding task (CreateTask, which records its credential
/// names), FAILED_PRECONDITION names the field and the names the tenant may
/// use, and nothing is written; a preset naming only usable keys is
/// accepted on both.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_preset_naming_a_key_the_tenant_may_not_use_serves_no_mode_or_task(
    pool: PgPool,
) -> anyhow::Result<()> {
    let Keyed {
        store,
        t,
        other: _,
        op,
        h,
        _keys,
    } = start_keyed(&pool).await?;
    let ch = h.channel().await?;
    let mut agents = v1::agent_service_client::AgentServiceClient::new(ch.clone());
    let mut tasks = v1::coding_task_service_client::CodingTaskServiceClient::new(ch);
    // Written straight to the store, as a preset accepted before its key
    // was rebound to the other tenant.
    let stale = store
        .llm()
        .create_preset(t, preset_naming("stale", "TEAM_OTHER"))
        .await?;
    let usable = store
        .llm()
        .create_preset(t, preset_naming("usable", "TEAM_MINE"))
        .await?;
    let edit = |preset: &str| {
        req(
            v1::EditModeRequest {
                tenant_id: t.to_string(),
                agent_type: "Soa".into(),
                mode: "Strategic".into(),
                preset: Some(preset.to_owned()),
                ..Default::default()
            },
            &op,
        )
    };
    let task = |preset: &str| {
        req(
            v1::CreateTaskRequest {
                tenant_id: t.to_string(),
                title: "fix the build".into(),
                instructions: "make cargo test pass".into(),
                preset_id: Some(preset.to_owned()),
                ..Default::default()
            },
            &op,
        )
    };
    let refusal = "preset.fallback_chain[0].credential_names[0]: \"TEAM_OTHER\" is not a \
                   provider key this tenant may use";
    for (what, e) in [
        (
            "mode by name",
            agents.edit_mode(edit("stale")).await.expect_err("by name"),
        ),
        (
            "mode by id",
            agents
                .edit_mode(edit(&stale.id.to_string()))
                .await
                .expect_err("by id"),
        ),
        (
            "coding task",
            tasks
                .create_task(task(&stale.id.to_string()))
                .await
                .expect_err("task"),
        ),
    ] {
        assert_eq!(e.code(), Code::FailedPrecondition, "{what}: {e:?}");
        assert_names_allowed(what, &e, refusal);
    }
    let modes = genesis_store::inspect::count_mode_overrides(&pool).await?;
    let tasks_written = genesis_store::inspect::count_rows(&pool, "coding_tasks").await?;
    assert_eq!((modes, tasks_written), (0, 0), "nothing was written");

    let mode = agents.edit_mode(edit("usable")).await?.into_inner();
    assert_eq!(mode.changed, ["preset"]);
    let created = tasks
        .create_task(task(&usable.id.to_string()))
        .await?
        .into_inner();
    assert_eq!(
        created.couple.map(|c| c.credential_names),
        Some(vec!["SHARED".to_owned()])
    );
    h.stop().await
}

/// A key directory control cannot read stops it at start, naming the
/// directory: it never serves with a set it could not read.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_unreadable_key_directory_stops_control_at_start(pool: PgPool) -> anyhow::Result<()> {
    let mut config = config(&pool, NATS_URL);
    config.auto_bootstrap = false;
    let missing = std::env::temp_dir().join(format!("genesis-no-keys-{}", Uuid::new_v4()));
    config.llm_key_dir = Some(missing.clone());
    let h = start(config).await?;
    let ended = tokio::time::timeout(std::time::Duration::from_secs(20), h.handle).await??;
    let e = ended.expect_err("refused at start").to_string();
    assert!(
        e.contains("GENESIS_LLM_KEY_DIR") && e.contains(&missing.display().to_string()),
        "{e}"
    );
    Ok(())
}
