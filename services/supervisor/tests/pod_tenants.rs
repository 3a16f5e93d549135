//! Agent-pod tokens scoped to tenants (`api_tokens.pod_tenants`) against
//! the real server: a token scoped to tenant A naming tenant B's instance is
//! PERMISSION_DENIED, naming B, by every AgentPod RPC and writes nothing —
//! even with B's live session in hand; the same token runs A's tick from
//! claim to completion; an unscoped token runs both tenants' ticks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Harness, authed, snapshot, start};
use genesis_core::{AgentType, InstanceStatus, PodTenants, TokenScope};
use genesis_proto::auth::{generate_token, token_sha256};
use genesis_proto::v1 as pb;
use genesis_proto::v1::agent_pod_client::AgentPodClient;
use genesis_proto::v1::claim_tick_response::Result as Claim;
use genesis_store::NewInstance;
use sqlx::PgPool;
use tonic::transport::Channel;
use tonic::{Code, Status};
use uuid::Uuid;

/// Every AgentPod RPC, in the order a tick makes them.
const RPCS: [&str; 6] = [
    "ClaimTick",
    "RenewLease",
    "InvokeTool",
    "RecordCallAttempt",
    "ReserveCredit",
    "CompleteTick",
];

/// The replay RPCs: not part of a tick, refused for another tenant all the
/// same (a replay id names nothing until the tenant check passes).
const REPLAY_RPCS: [&str; 4] = [
    "ClaimReplay",
    "ReserveReplayCredit",
    "RecordReplayAttempt",
    "CompleteReplay",
];

/// One tenant's instance and the tick its claim opened.
struct Target {
    tenant: Uuid,
    instance: Uuid,
    session: String,
    event: String,
}

impl Target {
    fn new(tenant: Uuid, instance: Uuid) -> Self {
        Target {
            tenant,
            instance,
            // Until a claim, any well-formed session: only the tenant check
            // (or the lease) judges it.
            session: Uuid::new_v4().to_string(),
            event: Uuid::new_v4().to_string(),
        }
    }
}

/// Call `rpc` for `t` with `token`, with a request the handler would act
/// on; a claim's bundle updates `t`'s session and event.
async fn call(
    client: &mut AgentPodClient<Channel>,
    rpc: &str,
    token: &str,
    t: &mut Target,
) -> Result<(), Status> {
    let (tenant, instance) = (t.tenant.to_string(), t.instance.to_string());
    match rpc {
        "ClaimTick" => {
            let resp = client
                .claim_tick(authed(
                    Some(token),
                    pb::ClaimTickRequest {
                        instance_id: instance,
                        tenant_id: tenant,
                        event_id: None,
                    },
                ))
                .await?
                .into_inner();
            match resp.result {
                Some(Claim::Bundle(b)) => {
                    t.session = b.session_id;
                    t.event = b.event.expect("the claimed event").id;
                    Ok(())
                }
                other => panic!("expected a bundle, got {other:?}"),
            }
        }
        "RenewLease" => client
            .renew_lease(authed(
                Some(token),
                pb::RenewLeaseRequest {
                    session_id: t.session.clone(),
                    instance_id: instance,
                    tenant_id: tenant,
                },
            ))
            .await
            .map(drop),
        "InvokeTool" => {
            let r = client
                .invoke_tool(authed(
                    Some(token),
                    pb::InvokeToolRequest {
                        event_id: String::new(),
                        session_id: t.session.clone(),
                        instance_id: instance,
                        tenant_id: tenant,
                        call_id: "call-1".into(),
                        tool_name: "soa_send_message".into(),
                        arguments_json: r#"{"body":"hello operator"}"#.into(),
                    },
                ))
                .await?
                .into_inner();
            assert!(r.error.is_none(), "{:?}", r.error);
            Ok(())
        }
        "RecordCallAttempt" => client
            .record_call_attempt(authed(
                Some(token),
                pb::RecordCallAttemptRequest {
                    journal_step_json: String::new(),
                    event_id: String::new(),
                    session_id: t.session.clone(),
                    instance_id: instance,
                    tenant_id: tenant,
                    invocation_id: "inv-1".into(),
                    attempt: Some(pb::CallAttempt {
                        requested_model: "claude-sonnet-4-5".into(),
                        served_model: "claude-sonnet-4-5".into(),
                        provider: "anthropic".into(),
                        credential_name: "ANTHROPIC_API_KEY".into(),
                        outcome: "success".into(),
                        input_tokens: 1000,
                        output_tokens: 1000,
                        cache_read_tokens: 0,
                        cache_write_tokens: 0,
                        latency_ms: 5,
                        error_message: String::new(),
                    }),
                    prompt_overlay_sha256: String::new(),
                },
            ))
            .await
            .map(drop),
        "ReserveCredit" => client
            .reserve_credit(authed(
                Some(token),
                pb::ReserveCreditRequest {
                    session_id: t.session.clone(),
                    instance_id: instance,
                    tenant_id: tenant,
                    models: vec!["claude-sonnet-4-5".into()],
                    prompt_tokens: 1_000,
                    max_output_tokens: 1_000,
                },
            ))
            .await
            .map(drop),
        "CompleteTick" => client
            .complete_tick(authed(
                Some(token),
                pb::CompleteTickRequest {
                    session_id: t.session.clone(),
                    instance_id: instance,
                    tenant_id: tenant,
                    event_id: t.event.clone(),
                    outcome: Some(pb::TickOutcome {
                        completion: pb::TickCompletion::Complete as i32,
                        raised_escalation: false,
                        side_effecting_actions: 0,
                        reason: String::new(),
                        budget_axis: None,
                    }),
                    plan_input_hash: String::new(),
                    was_idle: false,
                    reasoning_summary: "greeted".into(),
                    wait_condition: String::new(),
                    actions: vec![],
                    snapshot_id: None,
                    consumption: None,
                    call_attempts: vec![],
                },
            ))
            .await
            .map(drop),
        "ClaimReplay" => client
            .claim_replay(authed(
                Some(token),
                pb::ClaimReplayRequest {
                    replay_id: t.event.clone(),
                    tenant_id: tenant,
                },
            ))
            .await
            .map(drop),
        "ReserveReplayCredit" => client
            .reserve_replay_credit(authed(
                Some(token),
                pb::ReserveReplayCreditRequest {
                    replay_id: t.event.clone(),
                    tenant_id: tenant,
                    session_id: t.session.clone(),
                    models: vec!["claude-sonnet-4-5".into()],
                    prompt_tokens: 1_000,
                    max_output_tokens: 1_000,
                },
            ))
            .await
            .map(drop),
        "RecordReplayAttempt" => client
            .record_replay_attempt(authed(
                Some(token),
                pb::RecordReplayAttemptRequest {
                    replay_id: t.event.clone(),
                    tenant_id: tenant,
                    session_id: t.session.clone(),
                    invocation_id: "inv-1".into(),
                    attempt: Some(pb::CallAttempt {
                        requested_model: "claude-sonnet-4-5".into(),
                        served_model: "claude-sonnet-4-5".into(),
                        provider: "anthropic".into(),
                        outcome: "success".into(),
                        input_tokens: 10,
                        output_tokens: 5,
                        ..Default::default()
                    }),
                    instance_id: instance,
                },
            ))
            .await
            .map(drop),
        "CompleteReplay" => client
            .complete_replay(authed(
                Some(token),
                pb::CompleteReplayRequest {
                    replay_id: t.event.clone(),
                    tenant_id: tenant,
                    session_id: t.session.clone(),
                    outcome_json: String::new(),
                    error: "stopped".into(),
                },
            ))
            .await
            .map(drop),
        other => panic!("AgentPod.{other} has no case here: add one"),
    }
}

/// A second tenant with an active SOA whose opener is due.
async fn second_tenant(h: &Harness) -> (Uuid, Uuid) {
    let tenant = h
        .store
        .tenants()
        .create(&format!("b-{}", Uuid::new_v4()))
        .await
        .unwrap()
        .id;
    let instance = h
        .store
        .instances()
        .create(
            tenant,
            NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
        )
        .await
        .unwrap()
        .id;
    (tenant, instance)
}

/// An agent-pod token serving exactly `tenants`.
async fn scoped_token(h: &Harness, tenants: &[Uuid]) -> String {
    let token = generate_token();
    h.store
        .tokens()
        .insert_for_tenants(
            None,
            TokenScope::AgentPod,
            &PodTenants::new("pod_tenants", tenants.iter().copied()).unwrap(),
            &token_sha256(&token),
            "dedicated pool",
            None,
        )
        .await
        .unwrap();
    token
}

/// Run one whole tick (every RPC in order) for `t`, each answered.
async fn run_tick(client: &mut AgentPodClient<Channel>, token: &str, t: &mut Target) {
    for rpc in RPCS {
        if let Err(e) = call(client, rpc, token, t).await {
            panic!("{rpc} for tenant {}: {e:?}", t.tenant);
        }
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn every_rpc_outside_the_tokens_tenants_is_refused_naming_the_tenant_and_writes_nothing(
    pool: PgPool,
) {
    let h = start(pool).await;
    let served: Vec<String> = genesis_proto::convert::all_rpcs()
        .into_iter()
        .filter(|(s, _)| s == genesis_proto::auth::AGENT_POD_SERVICE)
        .map(|(_, m)| m)
        .collect();
    let covered: Vec<&str> = RPCS.iter().chain(&REPLAY_RPCS).copied().collect();
    assert_eq!(served, covered, "every AgentPod RPC is covered here");
    let mut client = AgentPodClient::new(h.channel.clone());
    let (b, b_instance) = second_tenant(&h).await;
    let only_a = scoped_token(&h, &[h.tenant]).await;
    let mut target = Target::new(b, b_instance);

    let expect_refused = |rpc: &str, r: Result<(), Status>| {
        let e = r.expect_err(rpc);
        assert_eq!(e.code(), Code::PermissionDenied, "{rpc}: {e:?}");
        assert_eq!(
            e.message(),
            format!("this agent-pod token does not serve tenant {b}"),
            "{rpc}"
        );
    };

    // Before any claim: B's opener is due, and a claim would take it.
    let before = snapshot(&h.pool).await;
    for rpc in RPCS.iter().chain(&REPLAY_RPCS) {
        expect_refused(rpc, call(&mut client, rpc, &only_a, &mut target).await);
    }
    assert_eq!(snapshot(&h.pool).await, before, "nothing was written");

    // With B's live session and event in hand (claimed by the shared
    // pool's token), A's token still reaches nothing of B's.
    call(&mut client, "ClaimTick", &h.token, &mut target)
        .await
        .unwrap();
    let claimed = snapshot(&h.pool).await;
    for rpc in RPCS.iter().chain(&REPLAY_RPCS) {
        expect_refused(rpc, call(&mut client, rpc, &only_a, &mut target).await);
    }
    assert_eq!(snapshot(&h.pool).await, claimed, "nothing was written");

    // A malformed tenant is refused as such, before any set is consulted.
    let junk = client
        .renew_lease(authed(
            Some(&only_a),
            pb::RenewLeaseRequest {
                session_id: target.session.clone(),
                instance_id: b_instance.to_string(),
                tenant_id: "acme".into(),
            },
        ))
        .await
        .expect_err("not a UUID");
    assert_eq!(junk.code(), Code::InvalidArgument);
    assert!(junk.message().starts_with("tenant_id"), "{junk:?}");
    assert_eq!(snapshot(&h.pool).await, claimed);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_scoped_token_runs_its_tenants_ticks_and_an_unscoped_one_runs_everyones(pool: PgPool) {
    let h = start(pool).await;
    let mut client = AgentPodClient::new(h.channel.clone());
    let (b, b_instance) = second_tenant(&h).await;

    // Scoped to A (and to a tenant with nothing running): A's whole tick.
    let (c, _) = second_tenant(&h).await;
    let a_and_c = scoped_token(&h, &[h.tenant, c]).await;
    let mut a = Target::new(h.tenant, h.instance);
    run_tick(&mut client, &a_and_c, &mut a).await;
    let turns: i64 = genesis_store::inspect::count_rows(&h.pool, "agent_state_ledger")
        .await
        .unwrap();
    assert_eq!(turns, 1, "A's tick completed");

    // The shared pool's token (no set) serves both tenants.
    let mut b_target = Target::new(b, b_instance);
    run_tick(&mut client, &h.token, &mut b_target).await;
    h.store
        .messages()
        .send_operator_message(h.tenant, h.instance, "again")
        .await
        .unwrap();
    let mut a_again = Target::new(h.tenant, h.instance);
    run_tick(&mut client, &h.token, &mut a_again).await;
    let per_tenant: Vec<(Uuid, i64)> = genesis_store::inspect::ledger_turns_per_tenant(&h.pool)
        .await
        .unwrap();
    let mut want = vec![(h.tenant, 2), (b, 1)];
    want.sort();
    assert_eq!(per_tenant, want);
}
