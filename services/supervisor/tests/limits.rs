//! The AgentPod server's whole-request size limit
//! (`genesis_supervisor::MAX_REQUEST_BYTES`): a request one byte over it is
//! refused from its frame header with tonic's status and writes nothing; a
//! request exactly at it is decoded and judged by the service; and the
//! largest completion the store accepts fits under it, so the transport
//! never refuses a legitimate tick.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Harness, assert_serving, authed, raw_unary, snapshot, start, wire};
use genesis_proto::v1 as pb;
use genesis_proto::v1::agent_pod_client::AgentPodClient;
use genesis_proto::v1::claim_tick_response::Result as Claim;
use genesis_supervisor::MAX_REQUEST_BYTES;
use sqlx::PgPool;
use tonic::Code;

const INVOKE_TOOL: &str = "/genesis.v1.AgentPod/InvokeTool";

async fn claim(h: &Harness) -> pb::TickBundle {
    let resp = AgentPodClient::new(h.channel.clone())
        .claim_tick(authed(
            Some(&h.token),
            pb::ClaimTickRequest {
                instance_id: h.instance.to_string(),
                tenant_id: h.tenant.to_string(),
                event_id: None,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    match resp.result {
        Some(Claim::Bundle(b)) => b,
        other => panic!("expected a bundle, got {other:?}"),
    }
}

/// An InvokeToolRequest of the live session whose `arguments_json` pads the
/// encoded message to exactly `total` bytes: were it decoded, every check
/// before the arguments would pass.
fn invoke_of_size(h: &Harness, session: &str, total: usize) -> Vec<u8> {
    let mut prefix = Vec::new();
    wire::string(1, session, &mut prefix);
    wire::string(2, &h.instance.to_string(), &mut prefix);
    wire::string(3, &h.tenant.to_string(), &mut prefix);
    wire::string(4, "call-1", &mut prefix);
    wire::string(5, "soa_send_message", &mut prefix);
    wire::padded_to(&prefix, 6, b' ', total)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_request_one_byte_over_the_limit_is_refused_before_decoding_and_writes_nothing(
    pool: PgPool,
) {
    let h = start(pool).await;
    let b = claim(&h).await;
    let body = invoke_of_size(&h, &b.session_id, MAX_REQUEST_BYTES + 1);
    assert_eq!(body.len(), MAX_REQUEST_BYTES + 1);
    let before = snapshot(&h.pool).await;
    let err = raw_unary(&h.channel, INVOKE_TOOL, body, Some(&h.token))
        .await
        .expect_err("an oversized request is refused");
    // tonic 0.14 answers an over-limit frame with OUT_OF_RANGE (not the
    // RESOURCE_EXHAUSTED of the gRPC status-code table) and names the limit.
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    assert!(
        err.message().contains("decoded message length too large")
            && err
                .message()
                .contains(&format!("the limit is: {MAX_REQUEST_BYTES} bytes")),
        "{}",
        err.message()
    );
    assert_eq!(snapshot(&h.pool).await, before, "nothing was written");
    // The server and the connection survive: health answers, and a normal
    // request of the same session on the same channel is served.
    assert_serving(&h.channel).await;
    AgentPodClient::new(h.channel.clone())
        .renew_lease(authed(
            Some(&h.token),
            pb::RenewLeaseRequest {
                session_id: b.session_id,
                instance_id: h.instance.to_string(),
                tenant_id: h.tenant.to_string(),
            },
        ))
        .await
        .expect("a normal request after the refusal is served");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_request_exactly_at_the_limit_is_decoded_and_judged_by_the_service(pool: PgPool) {
    let h = start(pool).await;
    let b = claim(&h).await;
    let body = invoke_of_size(&h, &b.session_id, MAX_REQUEST_BYTES);
    let before = snapshot(&h.pool).await;
    let err = raw_unary(&h.channel, INVOKE_TOOL, body, Some(&h.token))
        .await
        .expect_err("arguments this large are refused by the service");
    // The service's own refusal, naming the field: the message was decoded.
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert_eq!(
        err.message(),
        format!(
            "arguments_json: must be at most {} bytes",
            genesis_supervisor::service::MAX_TOOL_ARGUMENTS_BYTES
        )
    );
    assert_eq!(snapshot(&h.pool).await, before, "nothing was written");
}

fn completion(
    h: &Harness,
    b: &pb::TickBundle,
    actions: Vec<pb::ActionRecord>,
) -> pb::CompleteTickRequest {
    pb::CompleteTickRequest {
        session_id: b.session_id.clone(),
        instance_id: h.instance.to_string(),
        tenant_id: h.tenant.to_string(),
        event_id: b.event.as_ref().unwrap().id.clone(),
        outcome: Some(pb::TickOutcome {
            completion: pb::TickCompletion::Complete as i32,
            raised_escalation: false,
            side_effecting_actions: 0,
            reason: String::new(),
            budget_axis: None,
        }),
        plan_input_hash: String::new(),
        was_idle: false,
        reasoning_summary: "sent long messages".into(),
        wait_condition: String::new(),
        actions,
        snapshot_id: None,
        consumption: None,
        call_attempts: vec![],
    }
}

/// `n` actions whose arguments hold `bytes` bytes of text in all.
fn actions(n: usize, bytes: usize) -> Vec<pb::ActionRecord> {
    (0..n)
        .map(|_| pb::ActionRecord {
            tool_name: "soa_send_message".into(),
            arguments_json: format!("{{\"message\":\"{}\"}}", "m".repeat(bytes / n)),
            result_json: "{}".into(),
            side_effecting: false,
            blocked: false,
        })
        .collect()
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_largest_completion_the_store_accepts_is_within_the_limit(pool: PgPool) {
    let h = start(pool).await;
    let b = claim(&h).await;
    let ceiling = genesis_store::tick::MAX_COMPLETION_BYTES;
    let mut client = AgentPodClient::new(h.channel.clone());
    // Just over the store's ceiling (and well under the transport's): the
    // store refuses it precisely, nothing is written.
    let before = snapshot(&h.pool).await;
    let err = client
        .complete_tick(authed(
            Some(&h.token),
            completion(&h, &b, actions(8, ceiling + 1024)),
        ))
        .await
        .expect_err("a completion over the store's ceiling is refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains(&ceiling.to_string()),
        "{}",
        err.message()
    );
    assert_eq!(snapshot(&h.pool).await, before, "nothing was written");
    // Under it (the store counts the actions twice: as ledger actions and
    // inside the decision payload): decoded, accepted and recorded.
    let done = client
        .complete_tick(authed(
            Some(&h.token),
            completion(&h, &b, actions(8, ceiling / 2 - 32 * 1024)),
        ))
        .await
        .expect("a completion under the store's ceiling is accepted")
        .into_inner();
    assert_eq!(done.decision_kind, "Initialized");
    let recorded: i64 = genesis_store::inspect::count_rows(&h.pool, "agent_state_ledger")
        .await
        .unwrap();
    assert_eq!(recorded, 1);
}
