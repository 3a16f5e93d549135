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

/// What [`seed_episode`] wrote.
pub struct SeededEpisode {
    pub instance: InstanceRow,
    /// The ledger turn the episode explains.
    pub turn_number: i64,
    pub snapshot_id: Uuid,
}

/// The user message of the seeded episode's first turn: markup (a page
/// must escape it) and more text than a table cell shows.
pub fn episode_objective() -> String {
    format!(
        "<script>alert(1)</script> Say hello to the operator. {}END-OF-OBJECTIVE",
        "Be thorough. ".repeat(40)
    )
}

/// A completed three-turn episode of a fresh SOA of `tenant`, written
/// through the store's own API as its writers do: four priced attempts of
/// one invocation (turn 2's first attempt a `server_error`, its fallback
/// on another provider), the journal's three LLM turns and the tool call
/// between turns 1 and 2, and the ledger turn linked to the snapshot.
/// Costs: 0.01, 0 (the failure), 0.02, 0.03.
pub async fn seed_episode(store: &Store, tenant: Uuid) -> anyhow::Result<SeededEpisode> {
    use genesis_core::journal::JournalKind;
    use genesis_core::{AgentDecisionKind, AgentEventKind, Phase};
    use genesis_store::journal::NewStep;
    use genesis_store::llm::{CreditDraw, NewCallAttempt};
    use genesis_store::{ClaimOutcome, LedgerAction, TickCompletion, TickDecision};
    use serde_json::json;

    const INVOCATION: &str = "inv-episode";
    let instance = soa(store, tenant).await?;
    store
        .events()
        .enqueue(
            tenant,
            instance.id,
            AgentEventKind::OperatorMessage,
            &json!({}),
            None,
        )
        .await?;
    let session = Uuid::new_v4();
    let ClaimOutcome::Claimed(claim) = store
        .claim_tick(tenant, instance.id, session, Duration::from_secs(60), 5)
        .await?
    else {
        anyhow::bail!("the fresh SOA's event is claimable");
    };
    // (provider, model, outcome, error, cost) per attempt, per turn.
    type Attempt = (
        &'static str,
        &'static str,
        &'static str,
        Option<&'static str>,
        f64,
    );
    let ok: Attempt = ("anthropic", "claude-opus-4-8", "success", None, 0.01);
    let turns: [Vec<Attempt>; 3] = [
        vec![ok],
        vec![
            (
                "anthropic",
                "claude-opus-4-8",
                "server_error",
                Some("HTTP 529 overloaded"),
                0.0,
            ),
            ("openai", "gpt-5", "success", None, 0.02),
        ],
        vec![("anthropic", "claude-opus-4-8", "success", None, 0.03)],
    ];
    let draw = CreditDraw {
        week_start: genesis_store::credit::week_start(chrono::Utc::now()),
        limit_usd: 60.0,
    };
    let mut snapshot = None;
    for (provider, model, outcome, error, cost) in turns.iter().flatten() {
        let failed = error.is_some();
        let r = store
            .llm()
            .record_call_attempt(
                tenant,
                &NewCallAttempt {
                    instance_id: instance.id,
                    session,
                    invocation_id: INVOCATION.into(),
                    site_id: "Agent:Planning".into(),
                    requested_model: (*model).into(),
                    served_model: if failed { "" } else { model }.into(),
                    provider: (*provider).into(),
                    credential_name: format!("{provider}-key"),
                    outcome: (*outcome).into(),
                    input_tokens: if failed { 0 } else { 100 },
                    output_tokens: if failed { 0 } else { 20 },
                    cache_read_tokens: 0,
                    cache_write_tokens: 0,
                    latency_ms: 40,
                    error_message: error.unwrap_or_default().into(),
                    cost_usd: *cost,
                    priced_as: None,
                    pricing_source: None,
                    prompt_overlay_sha256: None,
                },
                draw,
            )
            .await?;
        snapshot = Some(r.snapshot.id);
    }
    let snapshot_id = snapshot.ok_or_else(|| anyhow::anyhow!("no attempt recorded"))?;
    let step = |n: usize, messages: serde_json::Value| {
        let attempts: Vec<_> = turns[n - 1]
            .iter()
            .map(|(provider, model, outcome, error, _)| {
                let failed = error.is_some();
                let mut a = json!({
                    "provider": provider, "credential_name": format!("{provider}-key"),
                    "requested_model": model, "served_model": if failed { "" } else { model },
                    "outcome": outcome, "latency_ms": 40,
                    "usage": {"input_tokens": if failed { 0 } else { 100 }, "output_tokens": if failed { 0 } else { 20 }},
                });
                if let Some(e) = error {
                    a["error"] = json!(e);
                }
                a
            })
            .collect();
        let served = turns[n - 1].last().map(|a| a.1).unwrap_or_default();
        let mut request = json!({
            "model": "claude-opus-4-8", "messages": messages,
            "tools": ["soa_send_message"], "max_output_tokens": 1024,
        });
        if n == 1 {
            request["system"] = json!("You are the SOA of this tenant.");
        }
        let (text, calls, stop) = match n {
            1 => (
                None,
                json!([{"id": "call-1", "name": "soa_send_message", "arguments": {"message": "hello <b>operator</b>"}}]),
                "tool_use",
            ),
            2 => (Some("The message is sent."), json!([]), "end_turn"),
            _ => (Some("Nothing else to do."), json!([]), "end_turn"),
        };
        let mut response = json!({
            "tool_calls": calls, "served_model": served, "stop_reason": stop,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        });
        if let Some(t) = text {
            response["text"] = json!(t);
        }
        json!({
            "turn": n, "invocation_id": INVOCATION, "request": request,
            "response": response, "attempts": attempts,
        })
    };
    let steps = [
        (
            JournalKind::LlmTurn,
            step(1, json!([{"role": "user", "content": episode_objective()}])),
        ),
        (
            JournalKind::ToolCall,
            json!({
                "call_id": format!("{INVOCATION}:1:call-1"), "tool_name": "soa_send_message",
                "arguments": {"message": "hello <b>operator</b>"}, "result": {"delivered": true},
                "side_effecting": true, "blocked": false,
            }),
        ),
        (
            JournalKind::LlmTurn,
            step(
                2,
                json!([{"role": "tool", "tool_call_id": "call-1", "content": "{\"delivered\":true}"}]),
            ),
        ),
        (
            JournalKind::LlmTurn,
            step(3, json!([{"role": "user", "content": "Anything else?"}])),
        ),
    ];
    for (kind, entry) in &steps {
        store
            .journal()
            .append(
                tenant,
                NewStep {
                    event_id: claim.event.id,
                    instance_id: instance.id,
                    session,
                    kind: *kind,
                    entry,
                },
                64 * 1024,
            )
            .await?;
    }
    let mut completion = TickCompletion::new(
        claim.event.id,
        TickDecision::Derived {
            kind: AgentDecisionKind::ActedWithTool,
            phase: Phase::Idle,
            planned: true,
        },
    );
    completion.actions = vec![LedgerAction {
        tool_name: "soa_send_message".into(),
        arguments: json!({"message": "hello <b>operator</b>"}),
        result: Some(json!({"delivered": true})),
        side_effecting: true,
        blocked: false,
    }];
    completion.reasoning_summary = Some("greeted the operator".into());
    completion.decision_payload = json!({
        "actions": [{"tool": "soa_send_message"}],
        "reasoningSummary": "greeted the operator",
        "activeMode": "default",
        "completion": "completed",
        "consumption": {"tokens": 360, "toolCalls": 1, "turns": 3, "wallMs": 1500},
    });
    completion.llm_call_snapshot_id = Some(snapshot_id);
    completion.served_model = Some("claude-opus-4-8".into());
    completion.cost_usd = Some(0.06);
    completion.input_tokens = Some(300);
    completion.output_tokens = Some(60);
    let done = store
        .complete_tick(
            tenant,
            instance.id,
            session,
            completion,
            &Default::default(),
        )
        .await?;
    Ok(SeededEpisode {
        instance,
        turn_number: done.turn_number,
        snapshot_id,
    })
}
