//! Shared fixtures of the supervisor's hostile-input tests (`limits.rs`,
//! `flood.rs`): the real server through `genesis_supervisor::serve` on
//! 127.0.0.1:0 against the sqlx::test database, an agent-pod token, one
//! active SOA, `raw_unary` over genesis-proto's raw-bytes codec, a hand-written
//! protobuf encoder (so a test can build a message of an exact size or with
//! a field of the wrong wire type) and a seeded random generator. Must never
//! mock the database.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use genesis_core::{AgentType, InstanceStatus, TokenScope};
use genesis_proto::auth::{bearer_value, generate_token, token_sha256};
use genesis_proto::raw::RawCodec;
use genesis_store::{NewInstance, Store, inspect};
use genesis_supervisor::{AllowAll, Parts, SupervisorConfig, ToolRegistry};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tonic::{Request, Status};
use uuid::Uuid;

/// Every table an AgentPod call can write a row to.
pub const TABLES: &[&str] = &[
    "agent_instances",
    "agent_event_queue",
    "agent_state_ledger",
    "agent_state_ledger_actions",
    "agent_mode_change_events",
    "agent_messages",
    "attention_requests",
    "tool_invocations",
    "llm_call_snapshots",
    "llm_call_attempts",
    "credit_windows",
    "missions",
    "research_records",
    "compliance_dossiers",
    "knowledge_documents",
    "source_files",
    "system_configs",
];

pub struct Harness {
    pub store: Store,
    pub pool: PgPool,
    pub tenant: Uuid,
    pub instance: Uuid,
    pub token: String,
    pub channel: Channel,
    /// The gRPC listener (what `channel` is connected to).
    pub grpc: std::net::SocketAddr,
    /// The `/healthz` `/readyz` `/metrics` listener.
    pub http: std::net::SocketAddr,
    pub shutdown: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Serve the supervisor with the standard tools and an allow-all gate; one
/// tenant with one active (foundational, seeded) SOA and an agent-pod token.
pub async fn start(pool: PgPool) -> Harness {
    start_with(pool, |_| {}).await
}

/// As [`start`], with the test configuration changed by `configure` first.
pub async fn start_with(pool: PgPool, configure: impl FnOnce(&mut SupervisorConfig)) -> Harness {
    let store = Store::from_pool(&pool);
    let tenant = store
        .tenants()
        .create(&format!("t-{}", Uuid::new_v4()))
        .await
        .unwrap()
        .id;
    let instance = store
        .instances()
        .create(
            tenant,
            NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
        )
        .await
        .unwrap()
        .id;
    let token = generate_token();
    store
        .tokens()
        .insert(
            None,
            TokenScope::AgentPod,
            &token_sha256(&token),
            "pod",
            None,
        )
        .await
        .unwrap();
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    let http_addr = http.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let parts = Parts {
        store: store.clone(),
        registry: ToolRegistry::standard(),
        governance: Arc::new(AllowAll),
    };
    let mut config = SupervisorConfig::for_tests("postgres://unused");
    config.shutdown_grace_secs = 2;
    configure(&mut config);
    tokio::spawn(genesis_supervisor::serve(
        config,
        parts,
        grpc,
        http,
        shutdown.clone(),
    ));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc_addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
    Harness {
        store,
        pool,
        tenant,
        instance,
        token,
        channel,
        grpc: grpc_addr,
        http: http_addr,
        shutdown,
    }
}

/// `msg` with `token` as its bearer credential (none when `None`).
pub fn authed<T>(token: Option<&str>, msg: T) -> Request<T> {
    let mut r = Request::new(msg);
    if let Some(token) = token {
        r.metadata_mut()
            .insert("authorization", bearer_value(token).unwrap());
    }
    r
}

/// `(count(*) per table in TABLES, every instance's lease columns, every
/// event's claim and consumption)`: what "nothing was written" compares.
pub type Snapshot = (
    Vec<i64>,
    Vec<(Uuid, Option<Uuid>, Option<String>)>,
    Vec<String>,
);

pub async fn snapshot(pool: &PgPool) -> Snapshot {
    let mut counts = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        counts.push(inspect::count_rows(pool, table).await.unwrap());
    }
    let leases = inspect::all_instance_leases(pool).await.unwrap();
    let events = inspect::all_event_claim_lines(pool).await.unwrap();
    (counts, leases, events)
}

/// `grpc.health.v1` answers SERVING for the whole server.
pub async fn assert_serving(channel: &Channel) {
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("the server still answers health checks")
        .into_inner()
        .status;
    assert_eq!(
        status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}

/// Send `body` as the request message of `path` and return the raw response
/// message or the status.
pub async fn raw_unary(
    channel: &Channel,
    path: &str,
    body: Vec<u8>,
    token: Option<&str>,
) -> Result<Vec<u8>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("channel not ready: {e}")))?;
    let path = http::uri::PathAndQuery::try_from(path.to_owned()).unwrap();
    grpc.unary(authed(token, body), path, RawCodec)
        .await
        .map(tonic::Response::into_inner)
}

/// Protobuf wire encoding, by hand.
pub mod wire {
    pub fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    pub fn varint_len(v: u64) -> usize {
        let mut buf = Vec::new();
        varint(v, &mut buf);
        buf.len()
    }

    /// A length-delimited field (string, bytes, message).
    pub fn bytes(field: u32, data: &[u8], out: &mut Vec<u8>) {
        varint(u64::from(field) << 3 | 2, out);
        varint(data.len() as u64, out);
        out.extend_from_slice(data);
    }

    pub fn string(field: u32, s: &str, out: &mut Vec<u8>) {
        bytes(field, s.as_bytes(), out);
    }

    /// A varint field (int32/int64/bool/enum).
    pub fn uint(field: u32, v: u64, out: &mut Vec<u8>) {
        varint(u64::from(field) << 3, out);
        varint(v, out);
    }

    /// `prefix` followed by string field `field` holding `fill` repeated so
    /// the whole message is exactly `total` bytes.
    pub fn padded_to(prefix: &[u8], field: u32, fill: u8, total: usize) -> Vec<u8> {
        let tag = varint_len(u64::from(field) << 3 | 2);
        let mut n = total - prefix.len() - tag - 1;
        while prefix.len() + tag + varint_len(n as u64) + n > total {
            n -= 1;
        }
        let mut out = prefix.to_vec();
        bytes(field, &vec![fill; n], &mut out);
        assert_eq!(out.len(), total, "cannot pad to exactly {total} bytes");
        out
    }
}

/// splitmix64: a seeded generator, so a failure names inputs that replay.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Printable ASCII, 1..=max characters.
    pub fn junk(&mut self, max: usize) -> String {
        let n = 1 + self.below(max);
        (0..n)
            .map(|_| char::from(b'!' + self.below(94) as u8))
            .collect()
    }
}
