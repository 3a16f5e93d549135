//! An agent-pod token is tenant-less: what keeps one tenant's agent out of
//! another's data is the lease (a session belongs to one instance of one
//! tenant) and RLS inside the call's transaction. These tests go through the
//! real gRPC server with a live session of tenant A and put tenant B's ids
//! into InvokeTool's arguments and envelope: every read of B's data comes back
//! NOT_FOUND or empty, and nothing is written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{authed, snapshot, start};
use genesis_core::{AgentType, InstanceStatus};
use genesis_proto::v1 as pb;
use genesis_proto::v1::agent_pod_client::AgentPodClient;
use genesis_proto::v1::claim_tick_response::Result as Claim;
use genesis_store::NewInstance;
use serde_json::Value;
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

async fn claim(
    client: &mut AgentPodClient<tonic::transport::Channel>,
    token: &str,
    tenant: Uuid,
    instance: Uuid,
) -> String {
    let resp = client
        .claim_tick(authed(
            Some(token),
            pb::ClaimTickRequest {
                instance_id: instance.to_string(),
                tenant_id: tenant.to_string(),
                event_id: None,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    match resp.result {
        Some(Claim::Bundle(b)) => b.session_id,
        other => panic!("expected a bundle, got {other:?}"),
    }
}

fn call(
    token: &str,
    session: &str,
    tenant: Uuid,
    instance: Uuid,
    call_id: &str,
    tool: &str,
    args: Value,
) -> tonic::Request<pb::InvokeToolRequest> {
    authed(
        Some(token),
        pb::InvokeToolRequest {
            event_id: String::new(),
            session_id: session.to_owned(),
            instance_id: instance.to_string(),
            tenant_id: tenant.to_string(),
            call_id: call_id.to_owned(),
            tool_name: tool.to_owned(),
            arguments_json: args.to_string(),
        },
    )
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn another_tenants_ids_in_tool_arguments_reach_nothing_and_write_nothing(pool: PgPool) {
    let h = start(pool).await;
    let mut client = AgentPodClient::new(h.channel.clone());
    let (tenant_a, instance_a) = (h.tenant, h.instance);
    let tenant_b = h
        .store
        .tenants()
        .create(&format!("b-{}", Uuid::new_v4()))
        .await
        .unwrap()
        .id;
    let instance_b = h
        .store
        .instances()
        .create(
            tenant_b,
            NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
        )
        .await
        .unwrap()
        .id;
    let session_a = claim(&mut client, &h.token, tenant_a, instance_a).await;
    let session_b = claim(&mut client, &h.token, tenant_b, instance_b).await;

    // Tenant B's agent records research through its own session.
    let created = client
        .invoke_tool(call(
            &h.token,
            &session_b,
            tenant_b,
            instance_b,
            "b1",
            "orchestrator_research_create",
            serde_json::json!({"title": "B's secret plan", "findings": "only for B"}),
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(created.error.is_none(), "{:?}", created.error);
    let created: Value = serde_json::from_str(&created.result_json).unwrap();
    let b_record = created["researchId"].as_str().unwrap().to_owned();

    let before = snapshot(&h.pool).await;

    // A names B's record by id: RLS hides it inside A's transaction.
    let by_id = client
        .invoke_tool(call(
            &h.token,
            &session_a,
            tenant_a,
            instance_a,
            "a1",
            "orchestrator_research_get",
            serde_json::json!({"id": b_record}),
        ))
        .await
        .unwrap()
        .into_inner();
    let err = by_id.error.expect("B's record is not A's to read");
    assert_eq!(err.code, "NOT_FOUND", "{}", err.message);
    assert!(!by_id.result_json.contains("only for B"));

    // A searches for B's words: nothing of B's comes back.
    let by_query = client
        .invoke_tool(call(
            &h.token,
            &session_a,
            tenant_a,
            instance_a,
            "a2",
            "orchestrator_research_get",
            serde_json::json!({"query": "secret plan"}),
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(by_query.error.is_none(), "{:?}", by_query.error);
    let found: Value = serde_json::from_str(&by_query.result_json).unwrap();
    assert_eq!(found["records"], serde_json::json!([]), "{found}");

    // A's session cannot be used in B's name: B's instance, B's tenant, or
    // B's session under A's ids.
    let tools_before = snapshot(&h.pool).await;
    // RLS hides the other tenant's instance (NOT_FOUND); where the instance
    // is visible, the session does not hold its lease (LEASE_LOST).
    for (label, session, tenant, instance, code, prefix) in [
        (
            "B's instance",
            session_a.as_str(),
            tenant_a,
            instance_b,
            Code::NotFound,
            "agent instance not found",
        ),
        (
            "B's tenant",
            session_a.as_str(),
            tenant_b,
            instance_a,
            Code::NotFound,
            "agent instance not found",
        ),
        (
            "B's tenant and instance",
            session_a.as_str(),
            tenant_b,
            instance_b,
            Code::Aborted,
            "LEASE_LOST",
        ),
        (
            "B's session under A's ids",
            session_b.as_str(),
            tenant_a,
            instance_a,
            Code::Aborted,
            "LEASE_LOST",
        ),
    ] {
        let refused = client
            .invoke_tool(call(
                &h.token,
                session,
                tenant,
                instance,
                &format!("x-{label}"),
                "soa_send_message",
                serde_json::json!({"body": "written in someone else's name"}),
            ))
            .await;
        match refused {
            Err(status) => assert!(
                status.code() == code && status.message().starts_with(prefix),
                "{label}: {status:?}"
            ),
            Ok(resp) => {
                let resp = resp.into_inner();
                panic!("{label}: accepted: {resp:?}");
            }
        }
    }
    assert_eq!(
        snapshot(&h.pool).await,
        tools_before,
        "a refused call writes nothing"
    );

    // The reads above changed nothing of B's and created nothing for A.
    let b_rows: i64 = genesis_store::inspect::count_research_records(
        &h.pool,
        tenant_b,
        Some(Uuid::parse_str(&b_record).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(b_rows, 1);
    let a_research: i64 = genesis_store::inspect::count_research_records(&h.pool, tenant_a, None)
        .await
        .unwrap();
    assert_eq!(a_research, 0);
    let messages: i64 = genesis_store::inspect::count_rows(&h.pool, "agent_messages")
        .await
        .unwrap();
    assert_eq!(messages, 0, "no message in anyone's name");
    let (before_counts, _, _) = before;
    let research_index = common::TABLES
        .iter()
        .position(|t| *t == "research_records")
        .unwrap();
    assert_eq!(
        snapshot(&h.pool).await.0[research_index],
        before_counts[research_index]
    );
}
