//! The governance rail on real PostgreSQL: every governance tool's happy
//! path on real rows and its bad-argument path (handlers run in a tenant
//! transaction exactly as InvokeTool runs them), and the rail through the
//! real AgentPod server — a constitution violation is a blocked result with
//! nothing persisted and a following legal call succeeds, a tool outside
//! the active mode is refused, the agent cannot change its own mode, and
//! the roster's soaInstanceId lookups are index-served.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use genesis_core::constitution::RuleKind;
use genesis_core::modes::{
    SELF_APPLYING_TOOLS, TOOL_SUPERSET, ToolClass, seed_catalogue, tool_class,
};
use genesis_core::{AgentType, InstanceStatus, TokenScope, resolve_mode, tool_superset_for};
use genesis_proto::auth::{bearer_value, generate_token, token_sha256};
use genesis_proto::v1 as pb;
use genesis_proto::v1::agent_pod_client::AgentPodClient;
use genesis_proto::v1::claim_tick_response::Result as Claim;
use genesis_store::constitution::NewConstitutionRule;
use genesis_store::knowledge;
use genesis_store::{NewInstance, Store, inspect};
use genesis_supervisor::tools::constitution_gate::ConstitutionGovernance;
use genesis_supervisor::tools::{ToolContext, ToolError, schema};
use genesis_supervisor::{Parts, SupervisorConfig, ToolRegistry};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tonic::Request;
use uuid::Uuid;

async fn instance(store: &Store, tenant: Uuid, t: AgentType, mode: Option<&str>) -> Uuid {
    let mut new = NewInstance::foundational(t, InstanceStatus::Active);
    new.seed_initialized = false;
    let id = store.instances().create(tenant, new).await.unwrap().id;
    if let Some(m) = mode {
        store
            .modes()
            .set_active_mode(
                tenant,
                id,
                m,
                genesis_core::ModeChangeSource::Ui,
                "test",
                None,
            )
            .await
            .unwrap();
    }
    id
}

/// Events in the queue as `conn` sees them: the tenant's inside a tool's
/// transaction, every tenant's on the test's own pool.
async fn events_seen(conn: &mut sqlx::PgConnection) -> i64 {
    inspect::count_rows(conn, "agent_event_queue")
        .await
        .unwrap()
}

/// Run one tool as InvokeTool does (schema, then handler in a tenant
/// transaction committed only on success). Every call also checks DESIGN
/// §5.4, the agent never enqueues: the tool's transaction holds no more
/// events after the handler than before it, whatever the handler answered.
/// Every registered tool goes through here in this file
/// (`every_registered_tool_is_called_here_so_none_escapes_the_no_enqueue_check`).
async fn call(
    store: &Store,
    tenant: Uuid,
    inst: Uuid,
    tool: &str,
    args: Value,
) -> Result<Value, ToolError> {
    let reg = ToolRegistry::standard();
    let t = reg.get(tool).expect("registered").clone();
    schema::validate(&t.schema(), &args)
        .map_err(|e| ToolError::new(genesis_core::ErrorCode::InvalidArguments, e.to_string()))?;
    let mut tx = store.tenant_tx(tenant).await.unwrap();
    let before = events_seen(tx.conn()).await;
    let mut ctx = ToolContext {
        conn: tx.conn(),
        tenant_id: tenant,
        instance_id: inst,
        session: Uuid::new_v4(),
    };
    let out = t.run(&mut ctx, &args).await;
    let after = events_seen(tx.conn()).await;
    assert_eq!(
        after,
        before,
        "tool {tool} enqueued {} event(s): the agent never enqueues (DESIGN §5.4)",
        after - before
    );
    let out = out?;
    tx.commit().await.unwrap();
    Ok(out)
}

fn invalid(r: Result<Value, ToolError>, needle: &str) {
    let e = r.expect_err("refused");
    assert_eq!(e.code.as_str(), "INVALID_ARGUMENTS", "{e:?}");
    assert!(
        e.message.contains(needle),
        "{needle:?} not in {:?}",
        e.message
    );
}

async fn count(pool: &PgPool, table: &str) -> i64 {
    inspect::count_rows(pool, table).await.unwrap()
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn read_only_tools_answer_from_real_rows_and_refuse_bad_arguments(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = store.tenants().create("acme").await.unwrap().id;
    let soa = instance(&store, t, AgentType::Soa, None).await;
    let project = Uuid::new_v4();
    let mut tx = store.tenant_tx(t).await.unwrap();
    knowledge::ingest(
        tx.conn(),
        t,
        &knowledge::NewKnowledgeDocument {
            project_id: Some(project),
            kind: knowledge::KnowledgeKind::Intelligence,
            title: "Billing retries".into(),
            body: "Retries back off exponentially.".into(),
            source: "wiki".into(),
        },
    )
    .await
    .unwrap();
    knowledge::upsert_source_file(
        tx.conn(),
        t,
        project,
        "src/billing.rs",
        "rust",
        "// header\nfn retry_charge() {}\n",
    )
    .await
    .unwrap();
    let turn = |turn_number, decision_kind, reasoning_summary| inspect::FixtureTurn {
        turn_number,
        event_kind: "AgentTick",
        decision_kind,
        phase: genesis_core::Phase::Idle,
        reasoning_summary,
    };
    inspect::fixture_ledger_turns(
        tx.conn(),
        t,
        soa,
        &[
            turn(1, "Planned", "Investigated the billing outage"),
            turn(2, "Heartbeat", "nothing new"),
        ],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let r = call(
        &store,
        t,
        soa,
        "intelligence_knowledge_query",
        json!({"query": "retries"}),
    )
    .await
    .unwrap();
    assert_eq!(r["results"][0]["title"], "Billing retries");
    invalid(
        call(
            &store,
            t,
            soa,
            "intelligence_knowledge_query",
            json!({"query": "x", "projectId": "nope"}),
        )
        .await,
        "$.projectId",
    );
    invalid(
        call(&store, t, soa, "intelligence_knowledge_query", json!({})).await,
        "$.query: required",
    );
    let r = call(
        &store,
        t,
        soa,
        "compliance_knowledge_query",
        json!({"query": "retries"}),
    )
    .await
    .unwrap();
    assert_eq!(r["results"], json!([]), "the compliance corpus is separate");
    invalid(
        call(
            &store,
            t,
            soa,
            "compliance_knowledge_query",
            json!({"query": "x", "limit": 0}),
        )
        .await,
        "$.limit",
    );

    let r = call(
        &store,
        t,
        soa,
        "intelligence_code_search",
        json!({"query": "retry_charge"}),
    )
    .await
    .unwrap();
    assert_eq!(r["matches"][0]["path"], "src/billing.rs");
    assert_eq!(r["matches"][0]["line"], 2);
    invalid(
        call(
            &store,
            t,
            soa,
            "intelligence_code_search",
            json!({"query": "()"}),
        )
        .await,
        "letter or digit",
    );

    let r = call(
        &store,
        t,
        soa,
        "agent_query_memory",
        json!({"query": "billing"}),
    )
    .await
    .unwrap();
    assert_eq!(r["turns"].as_array().unwrap().len(), 1);
    assert_eq!(r["turns"][0]["turnNumber"], 1);
    invalid(
        call(&store, t, soa, "agent_query_memory", json!({"query": 3})).await,
        "$.query: expected string",
    );

    let r = call(
        &store,
        t,
        soa,
        "soa_query_telemetry",
        json!({"windowHours": 48}),
    )
    .await
    .unwrap();
    assert_eq!(r["turns"], 2);
    assert_eq!(r["turnsByDecisionKind"]["Planned"], 1);
    invalid(
        call(
            &store,
            t,
            soa,
            "soa_query_telemetry",
            json!({"windowHours": 0}),
        )
        .await,
        "$.windowHours",
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn artifact_tools_record_dossiers_knowledge_and_research(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = store.tenants().create("acme").await.unwrap().id;
    let c = instance(&store, t, AgentType::Compliance, Some("Research")).await;
    let rec = json!({"framework": "SOC2", "controlId": "CC6.1", "title": "Access", "body": "MFA everywhere.", "status": "gap"});
    let d = call(&store, t, c, "compliance_dossier_record", rec.clone())
        .await
        .unwrap();
    assert_eq!(d["version"], 1);
    let mut again = rec.clone();
    again["status"] = json!("compliant");
    assert_eq!(
        call(&store, t, c, "compliance_dossier_record", again)
            .await
            .unwrap()["version"],
        2
    );
    let mut bad = rec.clone();
    bad["status"] = json!("green");
    invalid(
        call(&store, t, c, "compliance_dossier_record", bad).await,
        "$.status",
    );

    let id = d["dossierId"].as_str().unwrap();
    let tr = call(
        &store,
        t,
        c,
        "compliance_dossier_translate",
        json!({"dossierId": id, "language": "de", "title": "Zugang", "body": "MFA."}),
    )
    .await
    .unwrap();
    assert_eq!(tr["sourceVersion"], 2);
    invalid(
        call(
            &store,
            t,
            c,
            "compliance_dossier_translate",
            json!({"dossierId": id, "language": "German", "title": "x", "body": "y"}),
        )
        .await,
        "language",
    );
    let missing = call(&store, t, c, "compliance_dossier_translate", json!({"dossierId": Uuid::new_v4().to_string(), "language": "de", "title": "x", "body": "y"})).await;
    assert_eq!(missing.unwrap_err().code.as_str(), "NOT_FOUND");

    let list = call(
        &store,
        t,
        c,
        "compliance_dossier_list",
        json!({"framework": "SOC2"}),
    )
    .await
    .unwrap();
    assert_eq!(list["dossiers"][0]["translations"], json!(["de"]));
    invalid(
        call(
            &store,
            t,
            c,
            "compliance_dossier_list",
            json!({"status": "green"}),
        )
        .await,
        "$.status",
    );
    let posture = call(&store, t, c, "compliance_query_posture", json!({}))
        .await
        .unwrap();
    assert_eq!(posture["frameworks"][0]["compliant"], 1);
    assert_eq!(posture["frameworks"][0]["score"], 1.0);
    invalid(
        call(
            &store,
            t,
            c,
            "compliance_query_posture",
            json!({"projectId": "x"}),
        )
        .await,
        "$.projectId",
    );

    call(
        &store,
        t,
        c,
        "compliance_knowledge_ingest",
        json!({"title": "GDPR Art. 32", "body": "Security of processing."}),
    )
    .await
    .unwrap();
    let found = call(
        &store,
        t,
        c,
        "compliance_knowledge_query",
        json!({"query": "processing"}),
    )
    .await
    .unwrap();
    assert_eq!(found["results"][0]["title"], "GDPR Art. 32");
    invalid(
        call(
            &store,
            t,
            c,
            "compliance_knowledge_ingest",
            json!({"title": "x"}),
        )
        .await,
        "$.body: required",
    );

    let r = call(
        &store,
        t,
        c,
        "orchestrator_research_create",
        json!({"title": "Cache", "findings": "Eviction changed.", "tags": ["perf"]}),
    )
    .await
    .unwrap();
    let rid = r["researchId"].as_str().unwrap();
    let got = call(
        &store,
        t,
        c,
        "orchestrator_research_get",
        json!({"id": rid}),
    )
    .await
    .unwrap();
    assert_eq!(got["record"]["findings"], "Eviction changed.");
    assert_eq!(
        call(
            &store,
            t,
            c,
            "orchestrator_research_get",
            json!({"query": "eviction"})
        )
        .await
        .unwrap()["records"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    invalid(
        call(
            &store,
            t,
            c,
            "orchestrator_research_get",
            json!({"id": rid, "query": "x"}),
        )
        .await,
        "not both",
    );
    invalid(
        call(
            &store,
            t,
            c,
            "orchestrator_research_create",
            json!({"title": "x", "findings": "y", "tags": [1]}),
        )
        .await,
        "$.tags[0]",
    );
    assert_eq!(count(&pool, "research_records").await, 1);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn control_tools_propose_without_applying(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = store.tenants().create("acme").await.unwrap().id;
    let soa = instance(&store, t, AgentType::Soa, None).await;
    let comp = instance(&store, t, AgentType::Compliance, None).await;
    let mission = instance(&store, t, AgentType::MissionResearch, None).await;

    let r = call(
        &store,
        t,
        soa,
        "soa_propose_mode_change",
        json!({"targetMode": "Incident", "reason": "errors spiking"}),
    )
    .await
    .unwrap();
    assert_eq!(r["targetMode"], "Incident");
    let inspect::AttentionFields {
        kind,
        metadata: meta,
        ..
    } = inspect::one_attention_request(&pool, None).await.unwrap();
    assert_eq!(kind, "mode_change");
    assert_eq!(
        meta,
        json!({"source": "soa", "soaInstanceId": soa.to_string(), "targetMode": "Incident", "fromMode": "Strategic"})
    );
    let active = inspect::active_mode(&pool, soa).await.unwrap();
    assert_eq!(active, None, "proposing never writes active_mode");
    assert_eq!(count(&pool, "agent_mode_change_events").await, 0);
    // Validated against the agent's own catalogue: a Compliance mode is not a SOA mode.
    invalid(
        call(
            &store,
            t,
            soa,
            "soa_propose_mode_change",
            json!({"targetMode": "Research", "reason": "x"}),
        )
        .await,
        "not a mode of Soa",
    );
    invalid(
        call(
            &store,
            t,
            soa,
            "soa_propose_mode_change",
            json!({"targetMode": "Strategic", "reason": "x"}),
        )
        .await,
        "already in mode",
    );
    assert!(
        call(
            &store,
            t,
            comp,
            "soa_propose_mode_change",
            json!({"targetMode": "Research", "reason": "chapter"})
        )
        .await
        .is_ok()
    );

    let m = call(&store, t, soa, "soa_propose_task", json!({"kind": "MissionDevelopment", "title": "Fix retries", "description": "Back off.", "target": "repo:acme/billing"})).await.unwrap();
    assert_eq!(m["status"], "proposed");
    let (steer, status, meta) = inspect::one_mission(&pool).await.unwrap();
    assert_eq!((steer, status.as_str()), (soa, "proposed"));
    assert_eq!(meta["soaInstanceId"], soa.to_string());
    invalid(
        call(
            &store,
            t,
            soa,
            "soa_propose_task",
            json!({"kind": "Soa", "title": "x", "description": "y"}),
        )
        .await,
        "$.kind",
    );
    let refused = call(
        &store,
        t,
        comp,
        "soa_propose_task",
        json!({"kind": "MissionResearch", "title": "x", "description": "y"}),
    )
    .await;
    assert_eq!(refused.unwrap_err().code.as_str(), "NOT_PERMITTED");
    assert_eq!(count(&pool, "missions").await, 1);

    let q = call(
        &store,
        t,
        mission,
        "mission_ask_user",
        json!({"question": "Which region first?", "options": ["eu", "us"]}),
    )
    .await
    .unwrap();
    assert_eq!(q["status"], "open");
    let inspect::AttentionFields {
        kind,
        options,
        metadata: meta,
        ..
    } = inspect::one_attention_request(&pool, Some("mission_question"))
        .await
        .unwrap();
    assert_eq!(kind, "mission_question");
    assert_eq!(options, json!(["eu", "us"]));
    assert_eq!(meta["missionInstanceId"], mission.to_string());
    invalid(
        call(
            &store,
            t,
            mission,
            "mission_ask_user",
            json!({"question": ""}),
        )
        .await,
        "$.question",
    );
}

#[test]
fn the_rail_holds_in_the_catalogues() {
    // No self-applying tool in the superset beyond the SOA's.
    for (name, class) in TOOL_SUPERSET {
        if *class == ToolClass::SelfApplying {
            assert!(SELF_APPLYING_TOOLS.contains(name));
        }
    }
    for t in AgentType::ALL.iter().filter(|t| **t != AgentType::Soa) {
        assert!(
            !tool_superset_for(*t)
                .iter()
                .any(|n| tool_class(n) == Some(ToolClass::SelfApplying)),
            "{t}"
        );
    }
    // No Compliance or PromptRedactor mode includes soa_propose_task.
    for t in [AgentType::Compliance, AgentType::PromptRedactor] {
        for m in seed_catalogue(t) {
            assert!(
                !m.toolset.iter().any(|x| x == "soa_propose_task"),
                "{t} {}",
                m.name
            );
        }
    }
    // A mode whose toolset leaves the superset fails to resolve.
    let mut row = seed_catalogue(AgentType::Soa).remove(0);
    row.toolset.push("config_set".into());
    assert!(resolve_mode(AgentType::Soa, Some("Strategic"), &[row]).is_err());
    // Every superset tool is served by the registry.
    let reg = ToolRegistry::standard();
    for (name, _) in TOOL_SUPERSET {
        assert!(reg.get(name).is_some(), "{name} not served");
    }
}

struct Server {
    pool: PgPool,
    tenant: Uuid,
    soa: Uuid,
    token: String,
    client: AgentPodClient<tonic::transport::Channel>,
    gate: Arc<ConstitutionGovernance>,
    shutdown: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn serve(pool: PgPool) -> Server {
    let store = Store::from_pool(&pool);
    let tenant = store.tenants().create("acme").await.unwrap().id;
    // Seeded with AgentInitialized, so the first claim returns a bundle.
    let soa = store
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
    let addr = grpc.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let gate = Arc::new(ConstitutionGovernance::new(store.clone(), Duration::ZERO));
    let parts = Parts {
        store: store.clone(),
        registry: ToolRegistry::standard(),
        governance: gate.clone(),
    };
    let mut config = SupervisorConfig::for_tests("postgres://unused");
    config.shutdown_grace_secs = 2;
    tokio::spawn(genesis_supervisor::serve(
        config,
        parts,
        grpc,
        http,
        shutdown.clone(),
    ));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
    Server {
        pool,
        tenant,
        soa,
        token,
        client: AgentPodClient::new(channel),
        gate,
        shutdown,
    }
}

impl Server {
    fn req<T>(&self, msg: T) -> Request<T> {
        let mut r = Request::new(msg);
        r.metadata_mut()
            .insert("authorization", bearer_value(&self.token).unwrap());
        r
    }

    async fn claim(&mut self) -> String {
        let req = self.req(pb::ClaimTickRequest {
            instance_id: self.soa.to_string(),
            tenant_id: self.tenant.to_string(),
            event_id: None,
        });
        match self
            .client
            .claim_tick(req)
            .await
            .unwrap()
            .into_inner()
            .result
        {
            Some(Claim::Bundle(b)) => b.session_id,
            other => panic!("expected a bundle, got {other:?}"),
        }
    }

    async fn invoke(
        &mut self,
        session: &str,
        call_id: &str,
        tool: &str,
        args: Value,
    ) -> pb::InvokeToolResponse {
        let req = self.req(pb::InvokeToolRequest {
            event_id: String::new(),
            session_id: session.to_owned(),
            instance_id: self.soa.to_string(),
            tenant_id: self.tenant.to_string(),
            call_id: call_id.to_owned(),
            tool_name: tool.to_owned(),
            arguments_json: args.to_string(),
        });
        let mut conn = self.pool.acquire().await.unwrap();
        let before = events_seen(&mut conn).await;
        let out = self.client.invoke_tool(req).await.unwrap().into_inner();
        let after = events_seen(&mut conn).await;
        assert_eq!(
            after, before,
            "InvokeTool {tool} enqueued: the agent never enqueues (DESIGN §5.4)"
        );
        out
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_violating_proposal_is_blocked_with_nothing_persisted_and_a_legal_retry_succeeds(
    pool: PgPool,
) {
    let mut s = serve(pool).await;
    let store = Store::from_pool(&s.pool);
    store
        .constitution()
        .insert(
            s.tenant,
            &NewConstitutionRule {
                name: "no-prod-deletes".into(),
                kind: RuleKind::ForbiddenTerm {
                    term: "delete production".into(),
                },
                description: "irreversible".into(),
                tools: vec![],
            },
        )
        .await
        .unwrap();
    store
        .constitution()
        .insert(
            s.tenant,
            &NewConstitutionRule {
                name: "billing-is-off-limits".into(),
                kind: RuleKind::ScopeBoundary {
                    allowed_prefixes: vec![],
                    forbidden_scopes: vec!["repo:acme/billing".into()],
                },
                description: String::new(),
                tools: vec!["soa_propose_task".into()],
            },
        )
        .await
        .unwrap();
    let session = s.claim().await;

    let bad = s.invoke(&session, "c1", "soa_propose_task", json!({"kind": "MissionOperations", "title": "Cleanup", "description": "Delete production tables"})).await;
    assert!(bad.blocked && bad.error.is_none(), "{bad:?}");
    let result: Value = serde_json::from_str(&bad.result_json).unwrap();
    assert!(
        result["blockedReason"]
            .as_str()
            .unwrap()
            .contains("no-prod-deletes")
    );
    assert_eq!(result["violations"].as_array().unwrap().len(), 1);
    let bad = s.invoke(&session, "c2", "soa_propose_task", json!({"kind": "MissionDevelopment", "title": "Refactor", "description": "Tidy.", "target": "repo:acme/billing/api"})).await;
    assert!(bad.blocked);
    let bad = s
        .invoke(
            &session,
            "c3",
            "soa_send_message",
            json!({"body": "I will delete production now"}),
        )
        .await;
    assert!(bad.blocked);
    let bad = s
        .invoke(
            &session,
            "c4",
            "soa_propose_decision",
            json!({"title": "Choose", "options": ["delete production", "wait"]}),
        )
        .await;
    assert!(bad.blocked);
    assert_eq!(count(&s.pool, "missions").await, 0);
    assert_eq!(count(&s.pool, "agent_messages").await, 0);
    assert_eq!(count(&s.pool, "attention_requests").await, 0);
    assert_eq!(s.gate.blocked_total(), 4);

    let ok = s.invoke(&session, "c5", "soa_propose_task", json!({"kind": "MissionDevelopment", "title": "Refactor", "description": "Tidy the web app.", "target": "repo:acme/web"})).await;
    assert!(!ok.blocked && ok.error.is_none(), "{ok:?}");
    assert_eq!(count(&s.pool, "missions").await, 1);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tool_outside_the_active_mode_is_refused_and_no_tool_changes_the_mode(pool: PgPool) {
    let mut s = serve(pool).await;
    let session = s.claim().await;
    // Strategic does not grant compliance_dossier_record.
    let r = s
        .invoke(
            &session,
            "c1",
            "compliance_dossier_record",
            json!({"framework": "F", "controlId": "1", "title": "t", "body": "b", "status": "gap"}),
        )
        .await;
    assert_eq!(r.error.unwrap().code, "TOOL_NOT_AUTHORIZED");
    assert_eq!(count(&s.pool, "compliance_dossiers").await, 0);
    let r = s
        .invoke(
            &session,
            "c2",
            "soa_propose_mode_change",
            json!({"targetMode": "Idle", "reason": "quiet week"}),
        )
        .await;
    assert!(r.error.is_none() && !r.blocked, "{r:?}");
    let bad = s
        .invoke(
            &session,
            "c3",
            "soa_propose_mode_change",
            json!({"targetMode": "Cadence", "reason": "x"}),
        )
        .await;
    assert_eq!(bad.error.unwrap().code, "INVALID_ARGUMENTS");
    let active = inspect::active_mode(&s.pool, s.soa).await.unwrap();
    assert_eq!(active, None);
    assert_eq!(count(&s.pool, "agent_mode_change_events").await, 0);
    assert_eq!(count(&s.pool, "attention_requests").await, 1);
}

/// A tenant's edit of a mode is the mode its ticks run:
/// the claim's bundle carries the edited fragment and toolset, and
/// InvokeTool authorises exactly the edited toolset; another tenant's SOA
/// in the same mode still runs the platform's.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenants_edited_mode_is_what_its_claim_sends_and_invoke_tool_authorises(pool: PgPool) {
    let mut s = serve(pool).await;
    let store = Store::from_pool(&s.pool);
    store
        .modes()
        .edit(
            s.tenant,
            AgentType::Soa,
            "Strategic",
            &genesis_core::mode_edit::ModeEdit {
                prompt_fragment: Some("MODE: Strategic, acme edition.".into()),
                toolset: Some(vec![
                    "agent_query_memory".into(),
                    "soa_propose_decision".into(),
                ]),
                ..Default::default()
            },
            "op",
        )
        .await
        .unwrap();
    let claim = |s: &mut Server| {
        let req = s.req(pb::ClaimTickRequest {
            instance_id: s.soa.to_string(),
            tenant_id: s.tenant.to_string(),
            event_id: None,
        });
        let mut client = s.client.clone();
        async move {
            match client.claim_tick(req).await.unwrap().into_inner().result {
                Some(Claim::Bundle(b)) => b,
                other => panic!("expected a bundle, got {other:?}"),
            }
        }
    };
    let bundle = claim(&mut s).await;
    let mode = bundle.mode.clone().unwrap();
    assert_eq!(mode.name, "Strategic");
    assert_eq!(mode.prompt_fragment, "MODE: Strategic, acme edition.");
    assert!(
        mode.system_prompt
            .ends_with("MODE: Strategic, acme edition.")
    );
    assert_eq!(mode.toolset, ["agent_query_memory", "soa_propose_decision"]);
    let r = s
        .invoke(
            &bundle.session_id,
            "c1",
            "soa_send_message",
            json!({"body": "hi"}),
        )
        .await;
    assert_eq!(r.error.unwrap().code, "TOOL_NOT_AUTHORIZED");
    let r = s
        .invoke(
            &bundle.session_id,
            "c2",
            "agent_query_memory",
            json!({"query": "x"}),
        )
        .await;
    assert!(r.error.is_none(), "{r:?}");
    assert_eq!(count(&s.pool, "agent_messages").await, 0);

    // Another tenant's SOA, same mode: the platform's toolset.
    let other = store.tenants().create("globex").await.unwrap().id;
    s.tenant = other;
    s.soa = store
        .instances()
        .create(
            other,
            NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
        )
        .await
        .unwrap()
        .id;
    let bundle = claim(&mut s).await;
    let mode = bundle.mode.clone().unwrap();
    assert_ne!(mode.prompt_fragment, "MODE: Strategic, acme edition.");
    assert!(mode.toolset.iter().any(|t| t == "soa_send_message"));
    let r = s
        .invoke(
            &bundle.session_id,
            "c1",
            "soa_send_message",
            json!({"body": "hi"}),
        )
        .await;
    assert!(r.error.is_none() && !r.blocked, "{r:?}");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_open_items_roster_is_served_by_the_soa_instance_index(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = store.tenants().create("acme").await.unwrap().id;
    let soa = instance(&store, t, AgentType::Soa, None).await;
    let linked = [
        (inspect::SoaLinked::Missions, "missions_soa_instance"),
        (
            inspect::SoaLinked::AttentionRequests,
            "attention_requests_soa_instance",
        ),
    ];
    for (table, _) in linked {
        inspect::fixture_soa_linked_rows(&pool, table, t, 5000)
            .await
            .unwrap();
    }
    for (table, index) in linked {
        let plan = inspect::explain_rows_of_soa(&pool, table, soa)
            .await
            .unwrap();
        let plan = plan.join("\n");
        let table = table.table();
        assert!(plan.contains(index), "{table}: {plan}");
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn agent_workset_complete_ends_the_foundational_phase_and_refuses_bad_arguments(
    pool: PgPool,
) {
    let store = Store::from_pool(&pool);
    let t = store.tenants().create("acme").await.unwrap().id;
    let soa = instance(&store, t, AgentType::Soa, None).await;
    let building = |pool: PgPool| async move {
        inspect::building_starting_workset(&pool, soa)
            .await
            .unwrap()
    };
    assert!(
        building(pool.clone()).await,
        "created in the foundational phase"
    );
    // Bad arguments: refused by the schema, nothing changed.
    invalid(
        call(
            &store,
            t,
            soa,
            "agent_workset_complete",
            json!({"summary": 7}),
        )
        .await,
        "summary",
    );
    invalid(
        call(
            &store,
            t,
            soa,
            "agent_workset_complete",
            json!({"summary": "done", "phase": "over"}),
        )
        .await,
        "phase",
    );
    assert!(building(pool.clone()).await, "a refused call ends nothing");
    let r = call(
        &store,
        t,
        soa,
        "agent_workset_complete",
        json!({"summary": "catalogued the open items"}),
    )
    .await
    .unwrap();
    assert_eq!(
        r,
        json!({"worksetComplete": true, "wasBuildingStartingWorkset": true})
    );
    assert!(
        !building(pool.clone()).await,
        "the foundational phase is over"
    );
    // Again: idempotent, and says it was already over.
    let again = call(&store, t, soa, "agent_workset_complete", json!({}))
        .await
        .unwrap();
    assert_eq!(again["wasBuildingStartingWorkset"], false);
    // Another tenant's instance is not found from this tenant.
    let other = store.tenants().create("globex").await.unwrap().id;
    let e = call(&store, other, soa, "agent_workset_complete", json!({}))
        .await
        .expect_err("not this tenant's instance");
    assert_eq!(e.code.as_str(), "NOT_FOUND", "{e:?}");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn soa_propose_decision_refuses_bad_arguments_and_writes_nothing(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let t = store.tenants().create("acme").await.unwrap().id;
    let soa = instance(&store, t, AgentType::Soa, None).await;
    for (args, needle) in [
        (json!({}), "title"),
        (json!({"title": ""}), "title"),
        (json!({"title": "x", "options": "yes"}), "options"),
        (json!({"title": "x", "options": [""]}), "options"),
        (
            json!({"title": "x", "options": (0..11).map(|i| i.to_string()).collect::<Vec<_>>()}),
            "options",
        ),
        (json!({"title": "x", "urgency": "high"}), "urgency"),
    ] {
        invalid(
            call(&store, t, soa, "soa_propose_decision", args).await,
            needle,
        );
    }
    assert_eq!(
        count(&pool, "attention_requests").await,
        0,
        "nothing was queued"
    );
    let ok = call(
        &store,
        t,
        soa,
        "soa_propose_decision",
        json!({"title": "Rotate keys?", "options": ["yes", "no"]}),
    )
    .await
    .unwrap();
    assert!(ok.is_object(), "{ok}");
    assert_eq!(count(&pool, "attention_requests").await, 1);
}

/// `soa_propose_task` creates its mission through the store's checked
/// create, so the store's field rules hold through the tool too: a title the
/// schema passes (500 characters) but the store refuses (over 500 bytes) is
/// an in-band INVALID_ARGUMENTS from InvokeTool, with no mission and no
/// invocation record written; the same call with a title that fits
/// succeeds.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn soa_propose_task_is_held_to_the_stores_mission_checks(pool: PgPool) {
    let mut s = serve(pool).await;
    let session = s.claim().await;
    let wide = "é".repeat(300);
    assert!(wide.chars().count() <= 500 && wide.len() > 500);
    let bad = s
        .invoke(
            &session,
            "c1",
            "soa_propose_task",
            json!({"kind": "MissionDevelopment", "title": wide, "description": "Back off."}),
        )
        .await;
    let err = bad.error.expect("an in-band error");
    assert_eq!(err.code, "INVALID_ARGUMENTS", "{err:?}");
    assert!(err.message.contains("title"), "{err:?}");
    assert!(!bad.blocked);
    assert_eq!(count(&s.pool, "missions").await, 0);
    assert_eq!(count(&s.pool, "tool_invocations").await, 0);

    let ok = s
        .invoke(
            &session,
            "c2",
            "soa_propose_task",
            json!({"kind": "MissionDevelopment", "title": "é".repeat(250), "description": "Back off."}),
        )
        .await;
    assert!(!ok.blocked && ok.error.is_none(), "{ok:?}");
    let result: Value = serde_json::from_str(&ok.result_json).unwrap();
    assert_eq!(result["status"], "proposed");
    assert_eq!(count(&s.pool, "missions").await, 1);
    assert_eq!(count(&s.pool, "tool_invocations").await, 1);
}

/// A decision raised on behalf of a mission names a mission this SOA
/// steers (what wakes the steering instance with `DecisionResolved` when
/// it is resolved); any other mission id is refused naming `missionId`,
/// with nothing queued.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn soa_propose_decision_on_behalf_of_a_mission_names_only_a_mission_it_steers(pool: PgPool) {
    use genesis_store::missions::NewMission;
    let store = Store::from_pool(&pool);
    let t = store.tenants().create("acme").await.unwrap().id;
    let soa = instance(&store, t, AgentType::Soa, None).await;
    let other_soa = instance(&store, t, AgentType::Soa, None).await;
    let mission = |steering: Uuid| NewMission {
        steering_instance_id: Some(steering),
        kind: "MissionResearch".into(),
        title: "map the failure modes".into(),
        description: "research".into(),
        metadata: json!({}),
    };
    let mine = store.missions().create(t, &mission(soa)).await.unwrap().id;
    let theirs = store
        .missions()
        .create(t, &mission(other_soa))
        .await
        .unwrap()
        .id;
    let g = store.tenants().create("globex").await.unwrap().id;
    let g_soa = instance(&store, g, AgentType::Soa, None).await;
    let foreign = store
        .missions()
        .create(g, &mission(g_soa))
        .await
        .unwrap()
        .id;
    for bad in [
        json!("not-a-uuid"),
        json!(Uuid::new_v4().to_string()),
        json!(theirs.to_string()),
        json!(foreign.to_string()),
        json!(7),
    ] {
        invalid(
            call(
                &store,
                t,
                soa,
                "soa_propose_decision",
                json!({"title": "Ship?", "missionId": bad}),
            )
            .await,
            "missionId",
        );
    }
    assert_eq!(
        count(&pool, "attention_requests").await,
        0,
        "nothing queued"
    );
    let ok = call(
        &store,
        t,
        soa,
        "soa_propose_decision",
        json!({"title": "Ship?", "missionId": mine.to_string()}),
    )
    .await
    .unwrap();
    let id: Uuid = ok["attentionRequestId"].as_str().unwrap().parse().unwrap();
    let row = store.attention().get(t, id).await.unwrap();
    assert_eq!(
        row.metadata,
        json!({"source": "soa", "soaInstanceId": soa.to_string(), "missionId": mine.to_string()})
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_action_limit_blocks_the_call_past_its_per_tick_count(pool: PgPool) {
    let mut s = serve(pool).await;
    let store = Store::from_pool(&s.pool);
    store
        .constitution()
        .insert(
            s.tenant,
            &NewConstitutionRule {
                name: "two-messages-a-tick".into(),
                kind: RuleKind::ActionLimit {
                    tool: "soa_send_message".into(),
                    max_per_tick: Some(2),
                    max_per_day: None,
                },
                description: "keep the operator's inbox calm".into(),
                tools: vec![],
            },
        )
        .await
        .unwrap();
    let session = s.claim().await;
    for call in ["c1", "c2"] {
        let ok = s
            .invoke(
                &session,
                call,
                "soa_send_message",
                json!({"body": "update"}),
            )
            .await;
        assert!(!ok.blocked && ok.error.is_none(), "{call}: {ok:?}");
    }
    let third = s
        .invoke(
            &session,
            "c3",
            "soa_send_message",
            json!({"body": "update"}),
        )
        .await;
    assert!(third.blocked && third.error.is_none(), "{third:?}");
    let result: Value = serde_json::from_str(&third.result_json).unwrap();
    assert!(
        result["blockedReason"]
            .as_str()
            .unwrap()
            .contains("two-messages-a-tick"),
        "{result}"
    );
    assert_eq!(
        count(&s.pool, "agent_messages").await,
        2,
        "the blocked call wrote nothing"
    );
    // Another governed tool is not counted against this limit.
    let other = s
        .invoke(
            &session,
            "c4",
            "soa_propose_decision",
            json!({"title": "ok?"}),
        )
        .await;
    assert!(!other.blocked, "{other:?}");
}

const SECRET: &str = "sk-ant-REDACTME0123456789abcdefXYZ";

/// A tenant whose Agent:Default preset carries `overlay`; returns the
/// tenant and the preset id.
async fn preset_with_overlay(store: &Store, overlay: &str) -> (Uuid, Uuid) {
    use genesis_store::llm::{NewPreset, PresetCouple};
    let t = store.tenants().create("acme").await.unwrap().id;
    let p = store
        .llm()
        .create_preset(
            t,
            NewPreset {
                name: "ops".into(),
                primary: PresetCouple {
                    model: "scripted-1".into(),
                    provider: "scripted".into(),
                    backend: "api".into(),
                    credentials: vec![],
                },
                fallback: vec![],
                overlays: json!({"prompt_overlay": overlay}),
            },
        )
        .await
        .unwrap()
        .id;
    store.llm().bind_site(t, "Agent:Default", p).await.unwrap();
    (t, p)
}

async fn redactor(store: &Store, tenant: Uuid, site: &str) -> Uuid {
    let new = NewInstance {
        agent_type: AgentType::PromptRedactor,
        status: InstanceStatus::Active,
        call_site_id: Some(site.into()),
        workset_deadline: None,
        seed_initialized: false,
    };
    store.instances().create(tenant, new).await.unwrap().id
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn redactor_propose_overlay_raises_one_masked_proposal_and_refuses_what_still_leaks(
    pool: PgPool,
) {
    let store = Store::from_pool(&pool);
    let overlay = format!("Use {SECRET} for the API; escalate to ops@example.com.");
    let (t, preset) = preset_with_overlay(&store, &overlay).await;
    // Bound to Agent:Planning: the overlay is the parent's (Agent:Default).
    let r = redactor(&store, t, "Agent:Planning").await;

    // Bad arguments and a proposal that still holds a secret write nothing.
    invalid(
        call(
            &store,
            t,
            r,
            "redactor_propose_overlay",
            json!({"redactedOverlay": 7}),
        )
        .await,
        "redactedOverlay",
    );
    invalid(
        call(
            &store,
            t,
            r,
            "redactor_propose_overlay",
            json!({"extra": true}),
        )
        .await,
        "extra",
    );
    let leak = call(
        &store,
        t,
        r,
        "redactor_propose_overlay",
        json!({"redactedOverlay": format!("Use {SECRET} for the API.")}),
    )
    .await
    .expect_err("a proposal that still leaks is refused");
    assert_eq!(leak.code.as_str(), "INVALID_ARGUMENTS");
    assert!(leak.message.contains("api_key×1"), "{}", leak.message);
    assert!(
        !leak.message.contains(SECRET),
        "the error echoes the secret"
    );
    // Not a redactor: refused.
    let soa = instance(&store, t, AgentType::Soa, None).await;
    let e = call(&store, t, soa, "redactor_propose_overlay", json!({}))
        .await
        .expect_err("only the Prompt Engineer proposes overlays");
    assert_eq!(e.code.as_str(), "NOT_APPLICABLE");
    assert_eq!(count(&pool, "attention_requests").await, 0);

    // The detector-masked overlay is proposed as it is.
    let ok = call(
        &store,
        t,
        r,
        "redactor_propose_overlay",
        json!({"rationale": "keys"}),
    )
    .await
    .unwrap();
    assert!(!ok.to_string().contains(SECRET), "{ok}");
    assert_eq!(ok["findings"], "api_key×1, email×1");
    let inspect::AttentionFields {
        kind,
        metadata: md,
        body,
        ..
    } = inspect::one_attention_request(&pool, None).await.unwrap();
    assert_eq!(kind, "redaction");
    assert_eq!(md["source"], "redactor");
    assert_eq!(md["soaInstanceId"], r.to_string());
    assert_eq!(md["callSiteId"], "Agent:Planning");
    assert_eq!(md["presetId"], preset.to_string());
    assert_eq!(
        md["redactedOverlay"],
        "Use [REDACTED:api_key] for the API; escalate to [REDACTED:email]."
    );
    assert_eq!(
        md["baseOverlaySha256"],
        genesis_core::prompt::overlay_sha256(&overlay).unwrap()
    );
    assert!(!md.to_string().contains(SECRET) && !body.contains(SECRET));
    assert!(!md.to_string().contains("ops@example.com"));

    // A repeat points at the open proposal instead of queueing another.
    let again = call(&store, t, r, "redactor_propose_overlay", json!({}))
        .await
        .unwrap();
    assert_eq!(again["alreadyOpen"], true, "{again}");
    assert_eq!(count(&pool, "attention_requests").await, 1);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn redactor_propose_overlay_has_nothing_to_do_without_a_dirty_overlay(pool: PgPool) {
    let store = Store::from_pool(&pool);
    let (t, _) = preset_with_overlay(&store, "Answer tersely.").await;
    let clean = redactor(&store, t, "Agent:Default").await;
    let e = call(&store, t, clean, "redactor_propose_overlay", json!({}))
        .await
        .expect_err("a clean overlay raises nothing");
    assert_eq!(e.code.as_str(), "NOTHING_TO_REDACT");
    // A site with no binding resolves to the code default: nothing to redact.
    let unbound = redactor(&store, t, "PromptRedactor:Redact").await;
    let e = call(&store, t, unbound, "redactor_propose_overlay", json!({}))
        .await
        .expect_err("no preset, no overlay");
    assert_eq!(e.code.as_str(), "NOTHING_TO_REDACT");
    assert_eq!(count(&pool, "attention_requests").await, 0);
}

/// The no-enqueue check of `call` covers a tool only if some test here calls
/// it: a tool added to the registry without a call in this file fails here.
#[test]
fn every_registered_tool_is_called_here_so_none_escapes_the_no_enqueue_check() {
    let source = include_str!("governance.rs");
    // The text right after each `call(` or `.invoke(`: its arguments.
    let calls: Vec<&str> = source
        .split("call(")
        .chain(source.split(".invoke("))
        .skip(1)
        .map(|rest| rest.get(..160).unwrap_or(rest))
        .collect();
    let registry = ToolRegistry::standard();
    let missing: Vec<&str> = registry
        .names()
        .into_iter()
        .filter(|name| {
            let quoted = format!("\"{name}\"");
            !calls.iter().any(|args| args.contains(&quoted))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "tools never called in governance.rs: {missing:?}"
    );
}
