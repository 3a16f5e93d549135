//! The coordination registry against the real NATS JetStream server: each test
//! uses its own bucket (random suffix) and deletes it afterwards.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use genesis_lanes::LanesError;
use genesis_lanes::registry::{AgentRegistration, AgentRole, Registry, RegistryConfig};
use uuid::Uuid;

const NATS_URL: &str = "nats://127.0.0.1:4222";

struct Bucket {
    registry: Registry,
    js: async_nats::jetstream::Context,
    name: String,
}

impl Bucket {
    async fn new(ttl: Duration) -> anyhow::Result<Self> {
        let client = async_nats::connect(NATS_URL).await?;
        let name = format!("test_registry_{}", Uuid::new_v4().simple());
        let registry = Registry::connect(
            client.clone(),
            RegistryConfig {
                bucket: name.clone(),
                ttl,
            },
        )
        .await?;
        Ok(Self {
            registry,
            js: async_nats::jetstream::new(client),
            name,
        })
    }

    async fn drop_bucket(self) {
        let _ = self.js.delete_key_value(&self.name).await;
    }
}

fn reg(name: &str, role: AgentRole, caps: &[&str]) -> AgentRegistration {
    AgentRegistration {
        name: name.to_string(),
        role,
        capabilities: caps.iter().map(|s| s.to_string()).collect(),
        endpoint: format!("http://{name}:8080"),
        metadata: BTreeMap::from([("lang".to_string(), "rust".to_string())]),
    }
}

#[tokio::test]
async fn register_list_heartbeat_unregister_round_trip() -> anyhow::Result<()> {
    let b = Bucket::new(Duration::from_secs(300)).await?;
    let tenant = Uuid::new_v4();
    let a = b
        .registry
        .agent_register(tenant, reg("coder-a", AgentRole::Developer, &["rust"]))
        .await?;
    let c = b
        .registry
        .agent_register(tenant, reg("reviewer-c", AgentRole::Reviewer, &["review"]))
        .await?;
    assert_eq!(a.tenant_id, tenant);
    assert_eq!(a.last_heartbeat, a.registered_at);

    let listed = b.registry.list(tenant).await?;
    assert_eq!(listed, vec![a.clone(), c.clone()]);

    tokio::time::sleep(Duration::from_millis(20)).await;
    let beat = b.registry.heartbeat(tenant, a.agent_id).await?;
    assert!(beat.last_heartbeat > a.last_heartbeat);
    assert_eq!(b.registry.get(tenant, a.agent_id).await?, beat);

    b.registry.unregister(tenant, a.agent_id).await?;
    let listed = b.registry.list(tenant).await?;
    assert_eq!(listed, vec![c.clone()]);
    assert!(matches!(
        b.registry.heartbeat(tenant, a.agent_id).await,
        Err(LanesError::NotFound { kind: "agent", .. })
    ));
    assert!(matches!(
        b.registry.unregister(tenant, a.agent_id).await,
        Err(LanesError::NotFound { .. })
    ));
    b.drop_bucket().await;
    Ok(())
}

#[tokio::test]
async fn invalid_registration_writes_nothing() -> anyhow::Result<()> {
    let b = Bucket::new(Duration::from_secs(300)).await?;
    let tenant = Uuid::new_v4();
    let err = b
        .registry
        .agent_register(tenant, reg("bad", AgentRole::Generic, &["has space"]))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        LanesError::Validation {
            field: "capabilities",
            ..
        }
    ));
    assert!(b.registry.list(tenant).await?.is_empty());
    b.drop_bucket().await;
    Ok(())
}

#[tokio::test]
async fn entries_expire_after_the_ttl_without_heartbeat() -> anyhow::Result<()> {
    let b = Bucket::new(Duration::from_secs(2)).await?;
    let tenant = Uuid::new_v4();
    let stale = b
        .registry
        .agent_register(tenant, reg("stale", AgentRole::Monitor, &["watch"]))
        .await?;
    let kept = b
        .registry
        .agent_register(tenant, reg("kept", AgentRole::Monitor, &["watch"]))
        .await?;
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(900)).await;
        b.registry.heartbeat(tenant, kept.agent_id).await?;
    }
    let listed = b.registry.list(tenant).await?;
    assert_eq!(
        listed.iter().map(|e| e.agent_id).collect::<Vec<_>>(),
        vec![kept.agent_id]
    );
    assert!(matches!(
        b.registry.heartbeat(tenant, stale.agent_id).await,
        Err(LanesError::NotFound { .. })
    ));
    assert!(matches!(
        b.registry.get(tenant, stale.agent_id).await,
        Err(LanesError::NotFound { .. })
    ));
    b.drop_bucket().await;
    Ok(())
}

#[tokio::test]
async fn a_tenant_never_sees_or_touches_another_tenants_entry() -> anyhow::Result<()> {
    let b = Bucket::new(Duration::from_secs(300)).await?;
    let (t1, t2) = (Uuid::new_v4(), Uuid::new_v4());
    let mine = b
        .registry
        .agent_register(t1, reg("mine", AgentRole::Developer, &["rust"]))
        .await?;
    let theirs = b
        .registry
        .agent_register(t2, reg("theirs", AgentRole::Developer, &["rust"]))
        .await?;

    assert_eq!(b.registry.list(t1).await?, vec![mine.clone()]);
    assert_eq!(b.registry.list(t2).await?, vec![theirs.clone()]);
    assert!(matches!(
        b.registry.get(t1, theirs.agent_id).await,
        Err(LanesError::NotFound { .. })
    ));
    assert!(matches!(
        b.registry.heartbeat(t1, theirs.agent_id).await,
        Err(LanesError::NotFound { .. })
    ));
    assert!(matches!(
        b.registry.unregister(t1, theirs.agent_id).await,
        Err(LanesError::NotFound { .. })
    ));
    // Untouched by the foreign attempts.
    assert_eq!(b.registry.get(t2, theirs.agent_id).await?, theirs);
    let routed = b.registry.route(t1, "rust").await?.map(|e| e.agent_id);
    assert_eq!(routed, Some(mine.agent_id));
    b.drop_bucket().await;
    Ok(())
}

#[tokio::test]
async fn routing_picks_a_live_capable_agent_round_robin() -> anyhow::Result<()> {
    let b = Bucket::new(Duration::from_secs(300)).await?;
    let tenant = Uuid::new_v4();
    let x = b
        .registry
        .agent_register(tenant, reg("x", AgentRole::Developer, &["rust", "go"]))
        .await?;
    let y = b
        .registry
        .agent_register(tenant, reg("y", AgentRole::Developer, &["rust"]))
        .await?;
    b.registry
        .agent_register(tenant, reg("z", AgentRole::Reviewer, &["review"]))
        .await?;

    let first = b.registry.route(tenant, "rust").await?.map(|e| e.agent_id);
    let second = b.registry.route(tenant, "rust").await?.map(|e| e.agent_id);
    let mut picked = vec![first, second];
    picked.sort();
    let mut expected = vec![Some(x.agent_id), Some(y.agent_id)];
    expected.sort();
    assert_eq!(picked, expected, "both capable agents get a turn");
    assert_eq!(
        b.registry.route(tenant, "go").await?.map(|e| e.agent_id),
        Some(x.agent_id)
    );
    assert_eq!(b.registry.route(tenant, "python").await?, None);
    assert!(matches!(
        b.registry.route(tenant, "bad cap").await,
        Err(LanesError::Validation { .. })
    ));
    b.drop_bucket().await;
    Ok(())
}

#[tokio::test]
async fn routing_never_picks_an_expired_agent() -> anyhow::Result<()> {
    let b = Bucket::new(Duration::from_secs(2)).await?;
    let tenant = Uuid::new_v4();
    let expired = b
        .registry
        .agent_register(tenant, reg("old", AgentRole::Developer, &["rust"]))
        .await?;
    // A routing write refreshes the bucket age but not the heartbeat: the
    // entry must still expire 2 s after registration.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        b.registry.route(tenant, "rust").await?.map(|e| e.agent_id),
        Some(expired.agent_id)
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(b.registry.route(tenant, "rust").await?, None);

    let fresh = b
        .registry
        .agent_register(tenant, reg("new", AgentRole::Developer, &["rust"]))
        .await?;
    assert_eq!(
        b.registry.route(tenant, "rust").await?.map(|e| e.agent_id),
        Some(fresh.agent_id)
    );
    b.drop_bucket().await;
    Ok(())
}

#[tokio::test]
async fn the_directory_survives_a_reconnect() -> anyhow::Result<()> {
    let b = Bucket::new(Duration::from_secs(300)).await?;
    let tenant = Uuid::new_v4();
    let a = b
        .registry
        .agent_register(tenant, reg("persist", AgentRole::Coordinator, &["plan"]))
        .await?;
    let other = Registry::connect(
        async_nats::connect(NATS_URL).await?,
        RegistryConfig {
            bucket: b.name.clone(),
            ttl: Duration::from_secs(300),
        },
    )
    .await?;
    assert_eq!(other.list(tenant).await?, vec![a]);
    b.drop_bucket().await;
    Ok(())
}

#[tokio::test]
async fn replicas_registering_one_fixed_id_share_one_entry() -> anyhow::Result<()> {
    let b = Bucket::new(Duration::from_secs(300)).await?;
    // A second handle on the same bucket: another control replica.
    let other = Registry::connect(
        async_nats::connect(NATS_URL).await?,
        RegistryConfig {
            bucket: b.name.clone(),
            ttl: Duration::from_secs(300),
        },
    )
    .await?;
    let tenant = Uuid::new_v4();
    let soa = Uuid::new_v4();
    let first = b
        .registry
        .register_fixed(
            tenant,
            soa,
            reg("soa", AgentRole::Orchestration, &["orchestration"]),
        )
        .await?;
    assert_eq!(first.agent_id, soa);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = other
        .register_fixed(
            tenant,
            soa,
            reg("soa", AgentRole::Orchestration, &["orchestration"]),
        )
        .await?;
    assert_eq!(again.agent_id, soa);
    assert_eq!(
        again.registered_at, first.registered_at,
        "a refresh, not a new entry"
    );
    assert!(again.last_heartbeat > first.last_heartbeat);
    let listed = b.registry.list(tenant).await?;
    assert_eq!(listed.len(), 1, "{listed:?}");
    // A bad registration writes nothing, even under a fixed id.
    let bad = b
        .registry
        .register_fixed(tenant, Uuid::new_v4(), reg("", AgentRole::Generic, &[]))
        .await;
    assert!(matches!(bad, Err(LanesError::Validation { .. })), "{bad:?}");
    assert_eq!(b.registry.list(tenant).await?.len(), 1);
    b.drop_bucket().await;
    Ok(())
}

#[tokio::test]
async fn an_expired_fixed_id_entry_is_written_anew() -> anyhow::Result<()> {
    let b = Bucket::new(Duration::from_millis(300)).await?;
    let tenant = Uuid::new_v4();
    let soa = Uuid::new_v4();
    let first = b
        .registry
        .register_fixed(tenant, soa, reg("soa", AgentRole::Orchestration, &[]))
        .await?;
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(b.registry.list(tenant).await?.is_empty(), "expired");
    let second = b
        .registry
        .register_fixed(tenant, soa, reg("soa", AgentRole::Orchestration, &[]))
        .await?;
    assert!(second.registered_at > first.registered_at, "written anew");
    assert_eq!(b.registry.list(tenant).await?.len(), 1);
    b.drop_bucket().await;
    Ok(())
}
