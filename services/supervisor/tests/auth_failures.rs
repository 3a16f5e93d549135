//! The failed-authentication limit per peer address in front of the
//! AgentPod server's auth layer (`GENESIS_AUTH_FAILURES_PER_MINUTE`): a peer
//! that spent its failures is refused UNAUTHENTICATED with a retry hint
//! before its token is looked up, even a valid one, while health checks
//! still pass; switched off, failures are never held against a peer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{assert_serving, authed, start_with};
use genesis_proto::auth::generate_token;
use genesis_proto::v1 as pb;
use genesis_proto::v1::agent_pod_client::AgentPodClient;
use sqlx::PgPool;
use tonic::Code;

fn claim_request(h: &common::Harness, token: &str) -> tonic::Request<pb::ClaimTickRequest> {
    authed(
        Some(token),
        pb::ClaimTickRequest {
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
            event_id: None,
        },
    )
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_peer_out_of_failures_is_refused_before_any_token_lookup(pool: PgPool) {
    let h = start_with(pool, |c| c.auth_failures_per_minute = 3).await;
    let mut client = AgentPodClient::new(h.channel.clone());
    for _ in 0..3 {
        let err = client
            .claim_tick(claim_request(&h, &generate_token()))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated);
        assert_eq!(err.message(), "unknown, expired or revoked token");
    }
    // Out: even the valid token is refused, without a lookup, with a hint.
    let err = client
        .claim_tick(claim_request(&h, &h.token))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    assert!(
        err.message()
            .starts_with("too many failed authentications from this address"),
        "{}",
        err.message()
    );
    let wait: u64 = err
        .metadata()
        .get("retry-after-ms")
        .expect("a retry hint")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20_000).contains(&wait), "{wait}");
    // Probes are not held back.
    assert_serving(&h.channel).await;
    // Nothing was claimed by the refused valid token.
    let leased: i64 = genesis_store::inspect::count_leased_instances(&h.pool)
        .await
        .unwrap();
    assert_eq!(leased, 0);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn switched_off_failures_are_never_held_against_a_peer(pool: PgPool) {
    let h = start_with(pool, |c| c.auth_failures_per_minute = 0).await;
    let mut client = AgentPodClient::new(h.channel.clone());
    for _ in 0..30 {
        let err = client
            .claim_tick(claim_request(&h, &generate_token()))
            .await
            .unwrap_err();
        assert_eq!(err.message(), "unknown, expired or revoked token");
    }
    client
        .claim_tick(claim_request(&h, &h.token))
        .await
        .unwrap();
}
