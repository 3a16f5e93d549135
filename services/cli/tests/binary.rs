//! Runs the real `genesisctl` binary against a small in-test AgentService
//! (ListAgents, GetAgent, SendMessage, GetLedger, GetAgentTrace and the
//! WatchTurns stream) served by tonic on 127.0.0.1:0 with bearer-token
//! checking, and asserts
//! stdout, stderr and exit codes: tables, JSON, the watch view, usage errors
//! that never reach the server (`agent mode edit`'s among them, and the one
//! request a well-formed edit sends), UNAUTHENTICATED / PERMISSION_DENIED answers
//! and an endpoint nobody listens on. A second in-test server answers
//! CoderService's CoderLogs for `coder logs` (text for people, JSON for
//! scripts, a bad task id refused before any connection).

use std::pin::Pin;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use genesis_proto::auth::{bearer_token, generate_token};
use genesis_proto::v1::agent_service_server::{AgentService, AgentServiceServer};
use genesis_proto::v1::*;
use prost_types::Timestamp;
use tonic::{Request, Response, Status};

const TENANT: &str = "0195b5a0-0000-7000-8000-0000000000aa";
const SOA: &str = "0195b5a0-1111-7000-8000-000000000001";
const COMPLIANCE: &str = "0195b5a0-2222-7000-8000-000000000002";
/// GetAgent of this instance answers only after 10 s.
const SLOW: &str = "0195b5a0-9999-7000-8000-000000000009";
/// This instance's values, stream and errors carry terminal control
/// sequences, as a tenant may write them.
const HOSTILE: &str = "0195b5a0-6666-7000-8000-000000000006";
/// Sequences that would retitle the window and clear the screen.
const PWN: &str = "\u{1b}]0;pwned\u{07}\u{1b}[2J";

type Stored<T> = Arc<Mutex<Vec<T>>>;

#[derive(Default, Clone)]
struct Fake {
    sends: Stored<SendMessageRequest>,
    ledgers: Stored<GetLedgerRequest>,
    lists: Stored<ListAgentsRequest>,
    watches: Stored<WatchTurnsRequest>,
    mode_edits: Stored<EditModeRequest>,
    traces: Stored<GetAgentTraceRequest>,
    replays: Stored<ReplayTurnRequest>,
    replay_reads: Stored<GetTurnReplayRequest>,
}

/// The replay the fake answers with: pending when asked for, done when
/// read back.
fn turn_replay(status: &str) -> TurnReplay {
    TurnReplay {
        id: "7f000000-0000-4000-8000-000000000001".into(),
        instance_id: SOA.into(),
        turn_number: 2,
        preset_id: "7f000000-0000-4000-8000-0000000000aa".into(),
        status: status.into(),
        original: Some(LedgerTurn {
            decision_kind: "ActedWithTool".into(),
            reasoning_summary: "greeted".into(),
            ..Default::default()
        }),
        alternative: (status == "done").then(|| ReplayAlternative {
            end: "Complete".into(),
            reasoning_summary: "would greet briefly".into(),
            actions: vec![ReplayedAction {
                tool_name: "soa_send_message".into(),
                arguments_json: "{}".into(),
                result_json: "{}".into(),
                answered: "not_executed".into(),
            }],
            turns: 2,
            ..Default::default()
        }),
        cost_usd: 0.0042,
        attempts: 2,
        ..Default::default()
    }
}

fn ts(seconds: i64) -> Option<Timestamp> {
    Some(Timestamp { seconds, nanos: 0 })
}

fn instance(id: &str, agent_type: &str, status: &str, mode: &str) -> AgentInstance {
    AgentInstance {
        id: id.into(),
        tenant_id: TENANT.into(),
        agent_type: agent_type.into(),
        status: status.into(),
        active_mode: mode.into(),
        phase: "idle".into(),
        last_decision_kind: "Heartbeat".into(),
        next_tick_at: ts(1_772_400_000),
        ..Default::default()
    }
}

fn check_tenant(tenant_id: &str) -> Result<(), Status> {
    if tenant_id == TENANT {
        Ok(())
    } else {
        Err(Status::permission_denied(format!(
            "token is not valid for tenant {tenant_id}"
        )))
    }
}

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in this test server"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn turn(n: i64, decision: &str, summary: &str) -> WatchTurnsEvent {
    WatchTurnsEvent {
        event: Some(watch_turns_event::Event::Turn(TurnEvent {
            tenant_id: TENANT.into(),
            instance_id: SOA.into(),
            ledger_id: format!("0195b5a0-3333-7000-8000-00000000000{n}"),
            turn_number: n,
            event_kind: "OperatorMessage".into(),
            decision_kind: decision.into(),
            mode: "Dialogue".into(),
            phase: "acted".into(),
            reasoning_summary: summary.into(),
            served_model: "claude-opus-4-8".into(),
            tokens: 1000 + n,
            cost_usd: 0.01 * n as f64,
            created_at: ts(1_772_368_200 + n),
        })),
    }
}

fn message(direction: &str, body: &str) -> WatchTurnsEvent {
    WatchTurnsEvent {
        event: Some(watch_turns_event::Event::Message(MessageEvent {
            message: Some(AgentMessage {
                id: "0195b5a0-4444-7000-8000-000000000001".into(),
                tenant_id: TENANT.into(),
                instance_id: SOA.into(),
                direction: direction.into(),
                body: body.into(),
                created_at: ts(1_772_368_200),
            }),
        })),
    }
}

#[tonic::async_trait]
impl AgentService for Fake {
    async fn list_agents(
        &self,
        request: Request<ListAgentsRequest>,
    ) -> Result<Response<ListAgentsResponse>, Status> {
        let req = request.into_inner();
        check_tenant(&req.tenant_id)?;
        lock(&self.lists).push(req);
        Ok(Response::new(ListAgentsResponse {
            agents: vec![
                instance(SOA, "Soa", "active", "Strategic"),
                instance(COMPLIANCE, "Compliance", "paused", "Cadence"),
            ],
        }))
    }

    async fn get_agent(
        &self,
        request: Request<GetAgentRequest>,
    ) -> Result<Response<AgentInstance>, Status> {
        let req = request.into_inner();
        check_tenant(&req.tenant_id)?;
        match req.instance_id.as_str() {
            SLOW => {
                tokio::time::sleep(Duration::from_secs(10)).await;
                Ok(Response::new(instance(SLOW, "Soa", "active", "Strategic")))
            }
            SOA => Ok(Response::new(instance(SOA, "Soa", "active", "Strategic"))),
            HOSTILE => {
                let mut i = instance(HOSTILE, "Soa", "active", "Strategic");
                i.phase = format!("idle{PWN}\u{9b}31m\rblocked");
                Ok(Response::new(i))
            }
            other if other.ends_with("-00000000000e") => Err(Status::not_found(format!(
                "instance {PWN}named by a tenant\u{1b}[0m"
            ))),
            other => Err(Status::not_found(format!("instance {other}"))),
        }
    }

    async fn start_agent(
        &self,
        _: Request<StartAgentRequest>,
    ) -> Result<Response<AgentInstance>, Status> {
        unimplemented()
    }

    async fn stop_agent(
        &self,
        _: Request<StopAgentRequest>,
    ) -> Result<Response<AgentInstance>, Status> {
        unimplemented()
    }

    async fn reset_agent(
        &self,
        _: Request<ResetAgentRequest>,
    ) -> Result<Response<ResetAgentResponse>, Status> {
        unimplemented()
    }

    async fn start_compliance(
        &self,
        _: Request<StartComplianceRequest>,
    ) -> Result<Response<AgentInstance>, Status> {
        unimplemented()
    }

    async fn stop_compliance(
        &self,
        _: Request<StopComplianceRequest>,
    ) -> Result<Response<AgentInstance>, Status> {
        unimplemented()
    }

    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let req = request.into_inner();
        check_tenant(&req.tenant_id)?;
        if req.instance_id != SOA {
            return Err(Status::not_found(format!("instance {}", req.instance_id)));
        }
        let reply = SendMessageResponse {
            message: Some(AgentMessage {
                id: "0195b5a0-5555-7000-8000-000000000001".into(),
                tenant_id: TENANT.into(),
                instance_id: SOA.into(),
                direction: "operator_to_agent".into(),
                body: req.body.clone(),
                created_at: ts(1_772_368_200),
            }),
            event_id: "0195b5a0-6666-7000-8000-000000000001".into(),
        };
        lock(&self.sends).push(req);
        Ok(Response::new(reply))
    }

    async fn list_messages(
        &self,
        _: Request<ListMessagesRequest>,
    ) -> Result<Response<ListMessagesResponse>, Status> {
        unimplemented()
    }

    async fn set_mode(
        &self,
        _: Request<SetModeRequest>,
    ) -> Result<Response<SetModeResponse>, Status> {
        unimplemented()
    }

    async fn list_modes(
        &self,
        _: Request<ListModesRequest>,
    ) -> Result<Response<ListModesResponse>, Status> {
        unimplemented()
    }

    async fn get_mode(&self, _: Request<GetModeRequest>) -> Result<Response<Mode>, Status> {
        unimplemented()
    }

    async fn edit_mode(
        &self,
        request: Request<EditModeRequest>,
    ) -> Result<Response<EditModeResponse>, Status> {
        lock(&self.mode_edits).push(request.into_inner());
        unimplemented()
    }

    async fn replay_turn(
        &self,
        request: Request<ReplayTurnRequest>,
    ) -> Result<Response<TurnReplay>, Status> {
        let req = request.into_inner();
        check_tenant(&req.tenant_id)?;
        lock(&self.replays).push(req);
        Ok(Response::new(turn_replay("pending")))
    }

    async fn get_turn_replay(
        &self,
        request: Request<GetTurnReplayRequest>,
    ) -> Result<Response<TurnReplay>, Status> {
        let req = request.into_inner();
        check_tenant(&req.tenant_id)?;
        lock(&self.replay_reads).push(req);
        Ok(Response::new(turn_replay("done")))
    }

    async fn get_agent_trace(
        &self,
        request: Request<GetAgentTraceRequest>,
    ) -> Result<Response<AgentTrace>, Status> {
        let req = request.into_inner();
        check_tenant(&req.tenant_id)?;
        let n = req.turn_number;
        lock(&self.traces).push(req);
        let attempt = |provider: &str, outcome: &str, cost: Option<f64>| TraceAttempt {
            provider: provider.into(),
            requested_model: "claude-opus-4-8".into(),
            outcome: outcome.into(),
            latency_ms: 40,
            cost_usd: cost,
            ..Default::default()
        };
        Ok(Response::new(AgentTrace {
            turn: Some(LedgerTurn {
                turn_number: n,
                instance_id: SOA.into(),
                decision_kind: "ActedWithTool".into(),
                ..Default::default()
            }),
            completion: "completed".into(),
            steps: vec![TraceStep {
                seq: 0,
                created_at: ts(1_772_368_200),
                step: Some(trace_step::Step::LlmTurn(TraceLlmTurn {
                    turn: 1,
                    model: "claude-opus-4-8".into(),
                    messages: vec![TraceMessage {
                        role: "user".into(),
                        content: format!("hello {PWN}agent"),
                        turn: 1,
                        ..Default::default()
                    }],
                    attempts: vec![
                        attempt("anthropic", "server_error", Some(0.0)),
                        attempt("openai", "success", None),
                    ],
                    ..Default::default()
                })),
            }],
            ..Default::default()
        }))
    }

    async fn get_ledger(
        &self,
        request: Request<GetLedgerRequest>,
    ) -> Result<Response<GetLedgerResponse>, Status> {
        let req = request.into_inner();
        check_tenant(&req.tenant_id)?;
        if !(0..=500).contains(&req.limit) {
            return Err(Status::invalid_argument("limit: outside 1..=500"));
        }
        lock(&self.ledgers).push(req);
        let turn = |n: i64, decision: &str| LedgerTurn {
            id: format!("0195b5a0-7777-7000-8000-00000000000{n}"),
            instance_id: SOA.into(),
            turn_number: n,
            event_kind: "AgentTick".into(),
            decision_kind: decision.into(),
            active_mode: "Strategic".into(),
            phase: "idle".into(),
            reasoning_summary: format!("turn {n}\nsecond line"),
            served_model: "claude-opus-4-8".into(),
            cost_usd: 0.5,
            input_tokens: 1200,
            output_tokens: 300,
            created_at: ts(1_772_368_200),
            actions: vec![ActionRecord {
                tool_name: "soa_send_message".into(),
                arguments_json: r#"{"body":"hi"}"#.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        Ok(Response::new(GetLedgerResponse {
            turns: vec![turn(2, "ActedWithTool"), turn(1, "Initialized")],
        }))
    }

    type WatchTurnsStream = Pin<Box<dyn Stream<Item = Result<WatchTurnsEvent, Status>> + Send>>;

    async fn watch_turns(
        &self,
        request: Request<WatchTurnsRequest>,
    ) -> Result<Response<Self::WatchTurnsStream>, Status> {
        let req = request.into_inner();
        check_tenant(&req.tenant_id)?;
        lock(&self.watches).push(req.clone());
        let events = vec![
            message("operator_to_agent", "status?"),
            turn(1, "MessageAcknowledged", "Read the operator's question"),
            message("agent_to_operator", "All quiet."),
            turn(2, "Escalated", "Raised a decision about the budget"),
            turn(3, "Planned", "never shown with --count 2"),
        ];
        // The stream stays open after the scripted events, as a live one
        // does: the client must stop on its own condition, not on EOF.
        if req.instance_id.as_deref() == Some(HOSTILE) {
            let events = vec![
                message("agent_to_operator", &format!("hello {PWN}operator")),
                turn(1, "ActedWithTool", &format!("summary{PWN} done")),
            ];
            return Ok(Response::new(Box::pin(futures::stream::iter(
                events.into_iter().map(Ok),
            ))));
        }
        let scripted = futures::stream::iter(events.into_iter().map(Ok));
        if req.instance_id.as_deref() == Some(COMPLIANCE) {
            // This instance's stream ends after the script (a server going
            // away), so the client's "ended early" path can be seen.
            return Ok(Response::new(Box::pin(scripted)));
        }
        let stream = futures::StreamExt::chain(scripted, futures::stream::pending());
        Ok(Response::new(Box::pin(stream)))
    }

    async fn raise_redactor_signal(
        &self,
        _: Request<RaiseRedactorSignalRequest>,
    ) -> Result<Response<RaiseRedactorSignalResponse>, Status> {
        unimplemented()
    }
}

struct Server {
    endpoint: String,
    token: String,
    fake: Fake,
}

async fn start() -> anyhow::Result<Server> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let token = generate_token();
    let expected = token.clone();
    let fake = Fake::default();
    let service = AgentServiceServer::with_interceptor(fake.clone(), move |req: Request<()>| {
        match bearer_token(req.metadata()) {
            Ok(t) if t == expected => Ok(req),
            Ok(_) => Err(Status::unauthenticated("unknown token")),
            Err(e) => Err(Status::from(e)),
        }
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    Ok(Server {
        endpoint,
        token,
        fake,
    })
}

/// Runs the binary with a clean environment (no GENESIS_* leaking in from
/// the developer's shell) in UTC, so local times are predictable.
async fn genesisctl(args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Output> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_genesisctl"));
    cmd.args(args)
        .env_remove("GENESIS_ENDPOINT")
        .env_remove("GENESIS_TOKEN")
        .env_remove("GENESIS_TENANT")
        .env("TZ", "UTC")
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Ok(tokio::time::timeout(Duration::from_secs(30), cmd.output()).await??)
}

impl Server {
    async fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        let mut all = vec![
            "--endpoint",
            self.endpoint.as_str(),
            "--token",
            self.token.as_str(),
            "--tenant",
            TENANT,
        ];
        all.extend_from_slice(args);
        genesisctl(&all, &[]).await
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_list_prints_an_aligned_table() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server.run(&["agent", "list", "--type", "Soa"]).await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("ID  "), "{text}");
    for header in [
        "TYPE",
        "STATUS",
        "MODE",
        "PHASE",
        "LAST DECISION",
        "NEXT TICK",
    ] {
        assert!(lines[0].contains(header), "{header} missing: {text}");
    }
    assert!(lines[1].starts_with(SOA), "{text}");
    assert!(lines[1].contains("  Soa  "), "{text}");
    assert!(lines[2].contains("Compliance  paused"), "{text}");
    // Columns line up: TYPE starts at the same offset on every line.
    let offset = lines[0].find("TYPE").expect("header");
    assert_eq!(lines[1].find("Soa"), Some(offset), "{text}");
    assert_eq!(lines[2].find("Compliance"), Some(offset), "{text}");
    // Instants in local time (UTC here), to the second.
    assert!(lines[1].contains("2026-03-01 21:20:00"), "{text}");
    // The filter reached the server as given.
    let lists = lock(&server.fake.lists).clone();
    assert_eq!(lists.len(), 1);
    assert_eq!(lists[0].agent_type.as_deref(), Some("Soa"));
    assert_eq!(lists[0].status, None);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_list_json_is_the_response_as_one_json_line() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server.run(&["--output", "json", "agent", "list"]).await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    let value: serde_json::Value = serde_json::from_str(&text)?;
    let agents = value["agents"].as_array().expect("agents array");
    assert_eq!(agents.len(), 2);
    assert_eq!(agents[0]["id"], SOA);
    assert_eq!(agents[0]["agent_type"], "Soa");
    assert_eq!(agents[0]["consecutive_idle_ticks"], 0);
    assert_eq!(agents[0]["next_tick_at"], "2026-03-01T21:20:00Z");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_send_delivers_the_body_and_shows_the_event() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server.run(&["agent", "send", SOA, "hello there"]).await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let sends = lock(&server.fake.sends).clone();
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].body, "hello there");
    assert_eq!(sends[0].instance_id, SOA);
    assert_eq!(sends[0].tenant_id, TENANT);
    let text = stdout(&out);
    let event_line = text
        .lines()
        .find(|l| l.starts_with("event_id "))
        .expect("event_id line");
    assert!(
        event_line.ends_with("0195b5a0-6666-7000-8000-000000000001"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("message.body ") && l.ends_with("hello there")),
        "{text}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_ledger_sends_the_limit_and_renders_turns() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server
        .run(&["agent", "ledger", SOA, "--limit", "5", "--before", "9"])
        .await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let ledgers = lock(&server.fake.ledgers).clone();
    assert_eq!(ledgers.len(), 1);
    assert_eq!(ledgers[0].limit, 5);
    assert_eq!(ledgers[0].before, Some(9));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("TURN  CREATED"), "{text}");
    assert!(
        lines[1].starts_with("2     2026-03-01 12:30:00  AgentTick  ActedWithTool"),
        "{text}"
    );
    // Multi-line summaries stay on one row.
    assert!(lines[1].ends_with("turn 2 second line"), "{text}");

    let out = server.run(&["-o", "json", "agent", "ledger", SOA]).await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out))?;
    assert_eq!(value["turns"][0]["input_tokens"], 1200);
    assert_eq!(value["turns"][0]["output_tokens"], 300);
    // JSON text fields are embedded as JSON.
    assert_eq!(
        value["turns"][0]["actions"][0]["arguments_json"]["body"],
        "hi"
    );
    // Without --limit the wire's 0 ("server default") is sent.
    assert_eq!(lock(&server.fake.ledgers)[1].limit, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_prints_turn_and_message_lines_and_stops_after_count() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server.run(&["watch", "--count", "2"]).await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "12:30:00  0195b5a0  → operator: status?",
            "12:30:01  0195b5a0  Soa  OperatorMessage  MessageAcknowledged  mode=Dialogue  \
             phase=acted  tokens=1001  $0.0100  claude-opus-4-8  Read the operator's question",
            "12:30:00  0195b5a0  ← agent: All quiet.",
            "12:30:02  0195b5a0  Soa  OperatorMessage  Escalated  mode=Dialogue  \
             phase=acted  tokens=1002  $0.0200  claude-opus-4-8  Raised a decision about the budget",
        ],
        "{text}"
    );
    assert!(
        stderr(&out).contains(&format!(
            "watching tenant {TENANT}: turns and messages from now on"
        )),
        "no subscribed line on stderr: {}",
        stderr(&out)
    );
    let watches = lock(&server.fake.watches).clone();
    assert_eq!(watches.len(), 1);
    assert_eq!(watches[0].tenant_id, TENANT);
    assert_eq!(watches[0].instance_id, None);
    Ok(())
}

/// A tenant's text cannot drive the operator's terminal: the watch lines,
/// a table and an error quoting the server carry no control sequence (the
/// text around them is kept), and JSON lines carry them escaped, the same
/// value for a parser.
#[tokio::test(flavor = "multi_thread")]
async fn tenant_text_reaches_the_terminal_without_control_sequences() -> anyhow::Result<()> {
    let server = start().await?;
    let controls = |text: &str| {
        text.chars()
            .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
            .count()
    };
    let out = server
        .run(&["watch", "--instance", HOSTILE, "--count", "2"])
        .await?;
    let text = stdout(&out);
    assert_eq!(controls(&text), 0, "{text:?}");
    assert!(text.contains("← agent: hello operator"), "{text}");
    assert!(text.contains("summary done"), "{text}");
    assert!(!text.contains("pwned"), "{text}");

    let out = server.run(&["agent", "get", HOSTILE]).await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(controls(&text), 0, "{text:?}");
    // The carriage return is folded to a space, as a line break is.
    assert!(text.contains("idle blocked"), "{text}");

    let out = server
        .run(&["agent", "get", "0195b5a0-6666-7000-8000-00000000000e"])
        .await?;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(controls(&err), 0, "{err:?}");
    assert!(err.contains("named by a tenant"), "{err}");

    let out = server
        .run(&[
            "watch",
            "--instance",
            HOSTILE,
            "--count",
            "2",
            "--output",
            "json",
        ])
        .await?;
    let text = stdout(&out);
    assert_eq!(controls(&text), 0, "{text:?}");
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap_or_default())?;
    assert_eq!(
        first["message"]["message"]["body"],
        format!("hello {PWN}operator"),
        "the JSON value is exact"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_until_decision_stops_at_the_first_matching_turn() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server
        .run(&["watch", "--instance", SOA, "--until-decision", "Escalated"])
        .await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let last = text.lines().last().expect("some output");
    assert!(last.contains("  Escalated  "), "{text}");
    assert!(!text.contains("never shown"), "{text}");
    assert_eq!(
        lock(&server.fake.watches)[0].instance_id.as_deref(),
        Some(SOA)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_json_prints_one_object_per_event() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server
        .run(&["watch", "--output", "json", "--count", "1"])
        .await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let values: Vec<serde_json::Value> = text
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(values.len(), 2, "{text}");
    assert_eq!(
        values[0]["message"]["message"]["direction"],
        "operator_to_agent"
    );
    assert_eq!(values[1]["turn"]["decision_kind"], "MessageAcknowledged");
    assert_eq!(values[1]["turn"]["tokens"], 1001);
    assert_eq!(values[1]["turn"]["created_at"], "2026-03-01T12:30:01Z");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_token_is_reported_as_unauthenticated() -> anyhow::Result<()> {
    let server = start().await?;
    let other = generate_token();
    let out = genesisctl(
        &[
            "--endpoint",
            &server.endpoint,
            "--token",
            &other,
            "--tenant",
            TENANT,
            "agent",
            "list",
        ],
        &[],
    )
    .await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "error: UNAUTHENTICATED: unknown token\n");
    assert_eq!(stdout(&out), "");
    // Without any token the server's answer is the same code.
    let out = genesisctl(
        &[
            "--endpoint",
            &server.endpoint,
            "--tenant",
            TENANT,
            "agent",
            "list",
        ],
        &[],
    )
    .await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("error: UNAUTHENTICATED: "),
        "{}",
        stderr(&out)
    );
    assert!(lock(&server.fake.lists).is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn another_tenant_is_reported_as_permission_denied() -> anyhow::Result<()> {
    let server = start().await?;
    let other = "0195b5a0-0000-7000-8000-0000000000bb";
    let out = genesisctl(
        &[
            "--endpoint",
            &server.endpoint,
            "--token",
            &server.token,
            "--tenant",
            other,
            "agent",
            "list",
        ],
        &[],
    )
    .await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!("error: PERMISSION_DENIED: token is not valid for tenant {other}\n")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_environment_supplies_endpoint_token_and_tenant() -> anyhow::Result<()> {
    let server = start().await?;
    let out = genesisctl(
        &["agent", "get", SOA, "-o", "json"],
        &[
            ("GENESIS_ENDPOINT", server.endpoint.as_str()),
            ("GENESIS_TOKEN", server.token.as_str()),
            ("GENESIS_TENANT", TENANT),
        ],
    )
    .await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out))?;
    assert_eq!(value["id"], SOA);
    assert_eq!(value["active_mode"], "Strategic");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn server_errors_keep_their_code_and_message() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server.run(&["agent", "get", COMPLIANCE]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!("error: NOT_FOUND: instance {COMPLIANCE}\n")
    );
    let out = server.run(&["agent", "reset", SOA]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: UNIMPLEMENTED: not in this test server\n"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_are_usage_errors_that_send_nothing() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server.run(&["agent", "send", "not-a-uuid", "hi"]).await?;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out), "error: ID: not a UUID: \"not-a-uuid\"\n");

    let out = server.run(&["agent", "send", SOA, "   "]).await?;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out), "error: BODY: must not be empty\n");

    let out = server
        .run(&["agent", "list", "--status", "running"])
        .await?;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error: --status: unknown instance status \"running\" (expected one of active, paused, closed)"),
        "{}",
        stderr(&out)
    );

    let out = server
        .run(&["watch", "--until-decision", "Escalate"])
        .await?;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown decision kind \"Escalate\""),
        "{}",
        stderr(&out)
    );

    let out = server
        .run(&["agent", "ledger", SOA, "--limit", "0"])
        .await?;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: "), "{}", stderr(&out));

    let out = genesisctl(&["--endpoint", &server.endpoint, "agent", "list"], &[]).await?;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: --tenant (or GENESIS_TENANT) is required for `agent list`\n"
    );

    let out = genesisctl(&["agent", "frobnicate"], &[]).await?;
    assert_eq!(out.status.code(), Some(2));

    assert!(lock(&server.fake.sends).is_empty());
    assert!(lock(&server.fake.lists).is_empty());
    assert!(lock(&server.fake.ledgers).is_empty());
    assert!(lock(&server.fake.watches).is_empty());
    Ok(())
}

/// `agent trace`: the instance and turn reach the server; the sections
/// carry the attempts (an unmatched cost as `unknown`) and no terminal
/// control sequence; JSON is the trace exact; a bad turn or id is a usage
/// error that sends nothing.
#[tokio::test(flavor = "multi_thread")]
async fn agent_trace_sends_the_turn_and_renders_its_steps() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server.run(&["agent", "trace", SOA, "3"]).await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let sent = lock(&server.fake.traces).clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].instance_id.as_str(), sent[0].turn_number),
        (SOA, 3)
    );
    let text = stdout(&out);
    assert!(text.starts_with(&format!("Turn 3 of {SOA}\n")), "{text}");
    assert!(text.contains("[0] LLM turn 1"), "{text}");
    assert!(text.contains("server_error"), "{text}");
    assert!(text.contains("unknown"), "an unmatched cost: {text}");
    assert!(
        !text.contains("pwned") && !text.contains('\u{1b}'),
        "{text:?}"
    );

    let out = server
        .run(&["-o", "json", "agent", "trace", SOA, "3"])
        .await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out))?;
    assert_eq!(
        value["steps"][0]["llm_turn"]["messages"][0]["content"],
        format!("hello {PWN}agent")
    );
    assert_eq!(value["completion"], "completed");

    for args in [
        ["agent", "trace", SOA, "0"],
        ["agent", "trace", SOA, "one"],
        ["agent", "trace", "not-a-uuid", "1"],
    ] {
        let out = server.run(&args).await?;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    assert_eq!(
        lock(&server.fake.traces).len(),
        2,
        "usage errors send nothing"
    );
    Ok(())
}

/// `agent replay`: the turn and preset reach the server, the command
/// follows the pending replay until it is done and shows it beside the
/// original; `--no-wait` returns the pending one; a bad preset id is a
/// usage error that sends nothing.
#[tokio::test(flavor = "multi_thread")]
async fn agent_replay_asks_follows_and_renders_the_alternative() -> anyhow::Result<()> {
    let server = start().await?;
    let preset = "7f000000-0000-4000-8000-0000000000aa";
    let out = server
        .run(&["agent", "replay", SOA, "2", "--preset", preset])
        .await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let sent = lock(&server.fake.replays).clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (
            sent[0].instance_id.as_str(),
            sent[0].turn_number,
            sent[0].preset_id.as_str()
        ),
        (SOA, 2, preset)
    );
    assert_eq!(
        lock(&server.fake.replay_reads).len(),
        1,
        "followed until done"
    );
    let text = stdout(&out);
    assert!(text.contains(": done"), "{text}");
    assert!(
        text.contains("not_executed") && text.contains("Complete"),
        "{text}"
    );
    assert!(text.contains("$0.0042 in 2 attempt(s)"), "{text}");

    let out = server
        .run(&["agent", "replay", SOA, "2", "--preset", preset, "--no-wait"])
        .await?;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(stdout(&out).contains(": pending"), "{}", stdout(&out));
    assert_eq!(
        lock(&server.fake.replay_reads).len(),
        1,
        "--no-wait reads nothing"
    );

    for args in [
        ["agent", "replay", SOA, "2", "--preset", "cheap"],
        ["agent", "replay", SOA, "0", "--preset", preset],
    ] {
        let out = server.run(&args).await?;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    assert_eq!(
        lock(&server.fake.replays).len(),
        2,
        "usage errors send nothing"
    );
    Ok(())
}

/// `agent mode edit`: a malformed edit is a usage error that sends
/// nothing; a well-formed one reaches the server as one EditModeRequest
/// carrying exactly the fields given (the budget as an envelope, the wall
/// clock in milliseconds), and the server's answer is the command's.
#[tokio::test(flavor = "multi_thread")]
async fn agent_mode_edit_sends_only_the_fields_given_and_refuses_bad_ones_locally()
-> anyhow::Result<()> {
    let server = start().await?;
    for (args, needle) in [
        (&["Soa", "Incident"][..], "nothing to change"),
        (&["Robot", "Incident", "--fragment", "x"][..], "AGENT_TYPE"),
        (&["Soa", "No Mode", "--fragment", "x"][..], "MODE"),
        (
            &["Soa", "Incident", "--budget", "{\"maxTokens\": 0}"][..],
            "--budget",
        ),
        (
            &["Soa", "Incident", "--budget", "{\"maxTokenz\": 5}"][..],
            "maxTokenz",
        ),
        (&["Soa", "Incident", "--budget", "{}"][..], "--clear-budget"),
        (&["Soa", "Incident", "--budget", "not json"][..], "--budget"),
        (&["Soa", "Incident", "--preset", " "][..], "--preset"),
    ] {
        let mut all = vec!["agent", "mode", "edit"];
        all.extend_from_slice(args);
        let out = server.run(&all).await?;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("error: ") && stderr(&out).contains(needle),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // Options that exclude each other are refused by the parser.
    for args in [
        &["--preset", "ops", "--clear-preset"][..],
        &["--budget", "{\"maxTurns\": 2}", "--clear-budget"][..],
        &["--fragment", "a", "--fragment-file", "/nonexistent"][..],
    ] {
        let mut all = vec!["agent", "mode", "edit", "Soa", "Incident"];
        all.extend_from_slice(args);
        let out = server.run(&all).await?;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    assert!(
        lock(&server.fake.mode_edits).is_empty(),
        "a usage error reached the server"
    );

    let out = server
        .run(&[
            "agent",
            "mode",
            "edit",
            "Soa",
            "Incident",
            "--tools",
            "soa_send_message, soa_query_telemetry",
            "--budget",
            "{\"maxWallSeconds\": 90, \"maxDollars\": 1.5}",
            "--clear-preset",
        ])
        .await?;
    // The test server answers UNIMPLEMENTED, which the command reports.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("UNIMPLEMENTED"), "{}", stderr(&out));
    let sent = lock(&server.fake.mode_edits).clone();
    assert_eq!(
        sent,
        vec![EditModeRequest {
            tenant_id: TENANT.into(),
            agent_type: "Soa".into(),
            mode: "Incident".into(),
            prompt_fragment: None,
            toolset: Some(ModeToolset {
                tools: vec!["soa_send_message".into(), "soa_query_telemetry".into()],
            }),
            preset: Some(String::new()),
            budget_override: Some(BudgetEnvelope {
                max_wall_ms: Some(90_000),
                max_cost_usd: Some(1.5),
                ..Default::default()
            }),
            clear_budget_override: false,
        }]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_endpoint_is_named_in_one_line() -> anyhow::Result<()> {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    drop(listener);
    let out = genesisctl(
        &[
            "--endpoint",
            &endpoint,
            "--tenant",
            TENANT,
            "--timeout",
            "2s",
            "agent",
            "list",
        ],
        &[],
    )
    .await?;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("error: cannot reach control at {endpoint}: ")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.to_lowercase().contains("refused"), "{err}");
    // A usage error is still reported as such, before any connection.
    let out = genesisctl(
        &[
            "--endpoint",
            &endpoint,
            "--tenant",
            TENANT,
            "agent",
            "get",
            "x",
        ],
        &[],
    )
    .await?;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out), "error: ID: not a UUID: \"x\"\n");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn help_goes_to_stdout_with_success() -> anyhow::Result<()> {
    let out = genesisctl(&["agent", "--help"], &[]).await?;
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    for verb in [
        "list",
        "send",
        "ledger",
        "raise-redactor-signal",
        "start-compliance",
    ] {
        assert!(text.contains(verb), "{verb}: {text}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_that_ends_before_count_is_an_error() -> anyhow::Result<()> {
    let server = start().await?;
    let out = server
        .run(&["watch", "--instance", COMPLIANCE, "--count", "10"])
        .await?;
    assert_eq!(out.status.code(), Some(1));
    // The subscribed line, then the error.
    assert_eq!(
        stderr(&out),
        format!(
            "watching tenant {TENANT}: turns and messages from now on\n\
             error: watch stream ended after 3 of 10 turns\n"
        )
    );
    // What did arrive was printed.
    assert_eq!(stdout(&out).lines().count(), 5, "{}", stdout(&out));

    let out = server
        .run(&[
            "watch",
            "--instance",
            COMPLIANCE,
            "--until-decision",
            "WaitingForEvent",
        ])
        .await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "watching tenant {TENANT}: turns and messages from now on\n\
             error: watch stream ended after 3 turns without a WaitingForEvent turn\n"
        )
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_slower_than_the_timeout_is_cut_off() -> anyhow::Result<()> {
    let server = start().await?;
    let started = std::time::Instant::now();
    let out = server
        .run(&["--timeout", "300ms", "agent", "get", SLOW])
        .await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let err = stderr(&out);
    assert!(
        err.starts_with("error: DEADLINE_EXCEEDED: ") || err.starts_with("error: CANCELLED: "),
        "{err}"
    );
    Ok(())
}

/// The one task the coder stand-in has a coder for.
const CODER_TASK: &str = "0195b5a0-7777-7000-8000-000000000007";

/// A CoderService answering CoderLogs only, recording what it was asked.
#[derive(Default, Clone)]
struct FakeCoders {
    asked: Stored<CoderLogsRequest>,
}

#[tonic::async_trait]
impl genesis_proto::v1::coder_service_server::CoderService for FakeCoders {
    async fn spawn_coder(&self, _: Request<SpawnCoderRequest>) -> Result<Response<Coder>, Status> {
        unimplemented()
    }

    async fn list_coders(
        &self,
        _: Request<ListCodersRequest>,
    ) -> Result<Response<ListCodersResponse>, Status> {
        unimplemented()
    }

    async fn stop_coder(&self, _: Request<StopCoderRequest>) -> Result<Response<Coder>, Status> {
        unimplemented()
    }

    async fn coder_logs(
        &self,
        request: Request<CoderLogsRequest>,
    ) -> Result<Response<CoderLogsResponse>, Status> {
        let r = request.into_inner();
        lock(&self.asked).push(r.clone());
        check_tenant(&r.tenant_id)?;
        if r.task_id != CODER_TASK {
            return Err(Status::not_found(format!(
                "coder of task {} not found",
                r.task_id
            )));
        }
        Ok(Response::new(CoderLogsResponse {
            pod_name: "coder-01957777-ab12cd34-x7k2p".into(),
            text: "compiling\n  warning: unused\nall green".into(),
            truncated: true,
        }))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn coder_logs_prints_the_text_as_is_or_the_response_as_json() -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let fake = FakeCoders::default();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                genesis_proto::v1::coder_service_server::CoderServiceServer::new(fake.clone()),
            )
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let token = generate_token();
    let run = |args: &[&str]| {
        let mut all = vec![
            "--endpoint",
            endpoint.as_str(),
            "--token",
            token.as_str(),
            "--tenant",
            TENANT,
        ];
        all.extend_from_slice(args);
        let all: Vec<String> = all.into_iter().map(str::to_owned).collect();
        async move {
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            genesisctl(&all, &[]).await
        }
    };

    // For people: the text alone, indentation kept, a final newline added.
    let out = run(&["coder", "logs", CODER_TASK, "--tail", "3"]).await?;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "compiling\n  warning: unused\nall green\n");
    assert_eq!(stderr(&out), "");
    {
        let asked = lock(&fake.asked);
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].task_id, CODER_TASK);
        assert_eq!(asked[0].tail_lines, Some(3));
    }

    // For scripts: the whole response, one JSON line.
    let out = run(&["coder", "logs", CODER_TASK, "--output", "json"]).await?;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim_end())?;
    assert_eq!(v["pod_name"], "coder-01957777-ab12cd34-x7k2p");
    assert_eq!(v["text"], "compiling\n  warning: unused\nall green");
    assert_eq!(v["truncated"], true);
    assert_eq!(lock(&fake.asked).last().map(|r| r.tail_lines), Some(None));

    // The server's NOT_FOUND keeps its code and message.
    let other = "0195b5a0-8888-7000-8000-000000000008";
    let out = run(&["coder", "logs", other]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");

    // A bad task id or tail is a usage error that sends nothing.
    let sent = lock(&fake.asked).len();
    let out = run(&["coder", "logs", "coder-01957777"]).await?;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: TASK: not a UUID: \"coder-01957777\"\n"
    );
    let out = run(&["coder", "logs", CODER_TASK, "--tail", "0"]).await?;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(lock(&fake.asked).len(), sent, "nothing was sent");
    // Before any connection: an endpoint nobody listens on is never tried.
    let out = genesisctl(
        &[
            "--endpoint",
            "http://127.0.0.1:9",
            "--tenant",
            TENANT,
            "coder",
            "logs",
            "not-a-task",
        ],
        &[],
    )
    .await?;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out), "error: TASK: not a UUID: \"not-a-task\"\n");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn coder_ids_are_job_names_not_uuids() -> anyhow::Result<()> {
    // A coder's id is its Job's name: it passes the local checks and the
    // call goes out (here to an endpoint nobody listens on, so it fails
    // to connect, exit 1, rather than as a usage error, exit 2).
    let unreachable = |tail: &[&'static str]| {
        let mut args = vec!["--endpoint", "http://127.0.0.1:9", "--tenant", TENANT];
        args.extend_from_slice(tail);
        args
    };
    for args in [
        unreachable(&["coder", "stop", "coder-01957777-abcd1234"]),
        unreachable(&["task", "list", "--coder", "coder-01957777-abcd1234"]),
        unreachable(&["windows", "release", "--coder", "coder-01957777-abcd1234"]),
    ] {
        let out = genesisctl(&args, &[]).await?;
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("not a UUID"), "{}", stderr(&out));
    }
    // An empty id is still refused before any call.
    let out = genesisctl(&unreachable(&["coder", "stop", ""]), &[]).await?;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("ID"), "{}", stderr(&out));
    Ok(())
}
