//! Shared fixtures of control's tests: the real service started through
//! `run` on 127.0.0.1:0 against the sqlx::test database and the real NATS,
//! with a unique stream, subject prefix and consumer per test. Must never
//! mock the database or the broker.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use genesis_control::ControlConfig;
use genesis_core::{AgentType, InstanceStatus, TokenScope};
use genesis_store::{InstanceRow, NewInstance, Store};
use sqlx::PgPool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub const NATS_URL: &str = "nats://127.0.0.1:4222";

/// The URL of the sqlx::test database behind `pool`.
pub fn db_url(pool: &PgPool) -> String {
    let o = pool.connect_options();
    format!(
        "postgres://{}@{}:{}/{}",
        o.get_username(),
        o.get_host(),
        o.get_port(),
        o.get_database().unwrap_or("postgres")
    )
}

/// A config with a unique stream, prefix and consumer.
pub fn config(pool: &PgPool, nats_url: &str) -> ControlConfig {
    let tag = Uuid::new_v4().simple().to_string();
    let mut c = ControlConfig::new(&db_url(pool), nats_url);
    c.stream = format!("T_{tag}");
    c.subject_prefix = format!("test.{tag}");
    c.consumer = format!("pods-{tag}");
    c.outbox_poll_ms = 500;
    c.publish_ack_timeout_ms = 1_000;
    c
}

pub struct Harness {
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    pub shutdown: CancellationToken,
    pub handle: JoinHandle<Result<(), genesis_control::ControlError>>,
    pub config: ControlConfig,
}

impl Harness {
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(20), self.handle).await???;
        leave_nothing_on_nats(&self.config).await;
        Ok(())
    }

    pub async fn channel(&self) -> anyhow::Result<tonic::transport::Channel> {
        Ok(
            tonic::transport::Channel::from_shared(format!("http://{}", self.grpc))?
                .connect()
                .await?,
        )
    }
}

/// Leave nothing of a test behind on the shared NATS server: its stream,
/// and its registry bucket when it made one of its own (the default bucket
/// is shared by every test that keeps it).
pub async fn leave_nothing_on_nats(config: &ControlConfig) {
    if let Ok(client) = async_nats::connect(NATS_URL).await {
        let js = async_nats::jetstream::new(client);
        let _ = js.delete_stream(&config.stream).await;
        if config.registry_bucket != genesis_lanes::registry::DEFAULT_BUCKET {
            let _ = js.delete_key_value(&config.registry_bucket).await;
        }
    }
}

pub async fn start(config: ControlConfig) -> anyhow::Result<Harness> {
    start_knowing_address(config, |_, _| {}).await
}

/// [`start`], with `edit` given control's gRPC address before it runs (a
/// setting that names control itself, as the coder control URL does).
pub async fn start_knowing_address(
    mut config: ControlConfig,
    edit: impl FnOnce(std::net::SocketAddr, &mut ControlConfig),
) -> anyhow::Result<Harness> {
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let (ga, ha) = (grpc.local_addr()?, http.local_addr()?);
    edit(ga, &mut config);
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(genesis_control::run(
        config.clone(),
        grpc,
        http,
        shutdown.clone(),
    ));
    Ok(Harness {
        grpc: ga,
        http: ha,
        shutdown,
        handle,
        config,
    })
}

pub fn store(pool: &PgPool) -> Store {
    Store::from_pool(pool)
}

pub async fn token(
    store: &Store,
    scope: TokenScope,
    tenant: Option<Uuid>,
) -> anyhow::Result<String> {
    Ok(
        genesis_control::tokens::mint(store, scope, tenant, "test", None)
            .await?
            .0,
    )
}

pub fn req<T>(msg: T, token: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        genesis_proto::auth::bearer_value(token).expect("minted tokens are sendable"),
    );
    r
}

/// An active SOA without a seeded event.
pub async fn soa(store: &Store, tenant: Uuid) -> anyhow::Result<InstanceRow> {
    let mut n = NewInstance::foundational(AgentType::Soa, InstanceStatus::Active);
    n.seed_initialized = false;
    Ok(store.instances().create(tenant, n).await?)
}

/// Poll `f` until it yields `Some`, up to `within`.
pub async fn eventually<T, F, Fut>(within: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let end = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = f().await? {
            return Ok(v);
        }
        if tokio::time::Instant::now() > end {
            anyhow::bail!("condition not met within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One event as [`queue_shape`] keeps it.
pub type QueueEntry = (
    Uuid,
    genesis_core::AgentEventKind,
    serde_json::Value,
    Option<Uuid>,
    i32,
    Option<chrono::DateTime<chrono::Utc>>,
);

/// The queue as the tests compare it: which events exist, what they say,
/// who claimed them and whether they were consumed. `published_at` is left
/// out because the running outbox sets it concurrently with any request.
pub fn queue_shape(rows: Vec<genesis_store::EventRow>) -> Vec<QueueEntry> {
    rows.into_iter()
        .map(|e| {
            (
                e.id,
                e.event_kind,
                e.payload,
                e.claimed_session,
                e.attempts,
                e.consumed_at,
            )
        })
        .collect()
}
