//! End-to-end check of the generated AgentPod client and server over a real
//! HTTP/2 connection on a loopback port: the bearer token travels in metadata
//! and is read back by `auth::bearer_token`, and a tick bundle with its
//! optional budget axes, oneof result and enum survives the wire. The server
//! here only echoes; the real one lives in genesis-supervisor.

use genesis_proto::auth;
use genesis_proto::convert;
use genesis_proto::v1::agent_pod_client::AgentPodClient;
use genesis_proto::v1::agent_pod_server::{AgentPod, AgentPodServer};
use genesis_proto::v1::{
    BudgetEnvelope, ClaimTickRequest, ClaimTickResponse, CompleteTickRequest, CompleteTickResponse,
    InvokeToolRequest, InvokeToolResponse, LeaseHeld, RecordCallAttemptRequest,
    RecordCallAttemptResponse, RenewLeaseRequest, RenewLeaseResponse, TickBundle, TickCompletion,
    TickEvent, TickOutcome, claim_tick_response,
};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// Accepts exactly one token (by hash), like the real auth layer would.
struct EchoPod {
    token_sha256: String,
}

impl EchoPod {
    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let token = auth::bearer_token(request.metadata())?;
        if auth::token_matches_hash(token, &self.token_sha256) {
            Ok(())
        } else {
            Err(Status::unauthenticated("unknown token"))
        }
    }
}

#[tonic::async_trait]
impl AgentPod for EchoPod {
    async fn claim_tick(
        &self,
        request: Request<ClaimTickRequest>,
    ) -> Result<Response<ClaimTickResponse>, Status> {
        self.authorize(&request)?;
        let req = request.into_inner();
        let instance = convert::parse_uuid("instance_id", &req.instance_id)?;
        let hint = convert::parse_optional_uuid("event_id", req.event_id.as_deref())?;
        let result = match hint {
            // No hint: answer as if another session held the lease.
            None => claim_tick_response::Result::LeaseHeld(LeaseHeld {
                lease_expires_at: None,
            }),
            Some(event) => claim_tick_response::Result::Bundle(TickBundle {
                session_id: instance.to_string(),
                event: Some(TickEvent {
                    id: event.to_string(),
                    kind: "OperatorMessage".into(),
                    payload_json: r#"{"body":"hi"}"#.into(),
                    sequence_number: 7,
                    attempts: 1,
                    visible_at: Some(convert::timestamp_from_chrono(chrono::Utc::now())),
                }),
                budget: Some(BudgetEnvelope {
                    max_tokens: Some(0),
                    max_tool_calls: Some(12),
                    ..BudgetEnvelope::default()
                }),
                forced_replan_due: true,
                ..TickBundle::default()
            }),
        };
        Ok(Response::new(ClaimTickResponse {
            result: Some(result),
        }))
    }

    async fn renew_lease(
        &self,
        request: Request<RenewLeaseRequest>,
    ) -> Result<Response<RenewLeaseResponse>, Status> {
        self.authorize(&request)?;
        Err(convert::lease_lost("the echo server holds no leases"))
    }

    async fn invoke_tool(
        &self,
        request: Request<InvokeToolRequest>,
    ) -> Result<Response<InvokeToolResponse>, Status> {
        self.authorize(&request)?;
        let req = request.into_inner();
        Ok(Response::new(InvokeToolResponse {
            result_json: req.arguments_json,
            ..InvokeToolResponse::default()
        }))
    }

    async fn record_call_attempt(
        &self,
        request: Request<RecordCallAttemptRequest>,
    ) -> Result<Response<RecordCallAttemptResponse>, Status> {
        self.authorize(&request)?;
        let attempt = convert::require("attempt", request.get_ref().attempt.as_ref())?;
        let tokens = convert::non_negative("attempt.input_tokens", attempt.input_tokens)?;
        Ok(Response::new(RecordCallAttemptResponse {
            snapshot_id: request.get_ref().invocation_id.clone(),
            // The echo prices every token at one micro-dollar.
            cost_usd: tokens as f64 / 1e6,
            snapshot_cost_usd: tokens as f64 / 1e6,
        }))
    }

    async fn reserve_credit(
        &self,
        request: Request<genesis_proto::v1::ReserveCreditRequest>,
    ) -> Result<Response<genesis_proto::v1::ReserveCreditResponse>, Status> {
        self.authorize(&request)?;
        Ok(Response::new(genesis_proto::v1::ReserveCreditResponse {
            granted: true,
            ..Default::default()
        }))
    }

    async fn complete_tick(
        &self,
        request: Request<CompleteTickRequest>,
    ) -> Result<Response<CompleteTickResponse>, Status> {
        self.authorize(&request)?;
        let outcome = convert::require("outcome", request.get_ref().outcome.as_ref())?;
        let completion = convert::tick_completion("outcome.completion", outcome.completion)?;
        Ok(Response::new(CompleteTickResponse {
            decision_kind: completion.as_str_name().into(),
            phase: "idle".into(),
            ..CompleteTickResponse::default()
        }))
    }

    // The wire tests exercise the tick RPCs; the replay RPCs are answered as
    // a server that does not serve them.
    async fn claim_replay(
        &self,
        _: Request<genesis_proto::v1::ClaimReplayRequest>,
    ) -> Result<Response<genesis_proto::v1::ClaimReplayResponse>, Status> {
        Err(Status::unimplemented("not served here"))
    }

    async fn reserve_replay_credit(
        &self,
        _: Request<genesis_proto::v1::ReserveReplayCreditRequest>,
    ) -> Result<Response<genesis_proto::v1::ReserveCreditResponse>, Status> {
        Err(Status::unimplemented("not served here"))
    }

    async fn record_replay_attempt(
        &self,
        _: Request<genesis_proto::v1::RecordReplayAttemptRequest>,
    ) -> Result<Response<genesis_proto::v1::RecordReplayAttemptResponse>, Status> {
        Err(Status::unimplemented("not served here"))
    }

    async fn complete_replay(
        &self,
        _: Request<genesis_proto::v1::CompleteReplayRequest>,
    ) -> Result<Response<genesis_proto::v1::CompleteReplayResponse>, Status> {
        Err(Status::unimplemented("not served here"))
    }
}

/// The client side's bearer interceptor.
type Bearer = Box<dyn FnMut(Request<()>) -> Result<Request<()>, Status> + Send>;

type Client = AgentPodClient<
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Bearer>,
>;

/// Starts the echo server on a loopback port chosen by the OS and returns a
/// client that sends `token` (or nothing) as its bearer credential.
async fn start(token_sha256: String, token: Option<String>) -> anyhow::Result<Client> {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse()?)?;
    let addr = incoming.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(AgentPodServer::new(EchoPod { token_sha256 }))
            .serve_with_incoming(incoming),
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let header = token.map(|t| auth::bearer_value(&t)).transpose()?;
    let interceptor: Bearer = Box::new(move |mut req: Request<()>| {
        if let Some(h) = &header {
            req.metadata_mut().insert(auth::AUTHORIZATION, h.clone());
        }
        Ok(req)
    });
    Ok(AgentPodClient::with_interceptor(channel, interceptor))
}

fn claim(event_id: Option<String>) -> ClaimTickRequest {
    ClaimTickRequest {
        instance_id: uuid::Uuid::new_v4().to_string(),
        tenant_id: uuid::Uuid::new_v4().to_string(),
        event_id,
    }
}

#[tokio::test]
async fn tick_bundle_survives_the_wire_with_the_bearer_token() -> anyhow::Result<()> {
    let token = auth::generate_token();
    let mut client = start(auth::token_sha256(&token), Some(token)).await?;
    let event = uuid::Uuid::new_v4().to_string();
    let response = client
        .claim_tick(claim(Some(event.clone())))
        .await?
        .into_inner();
    let Some(claim_tick_response::Result::Bundle(bundle)) = response.result else {
        anyhow::bail!("expected a bundle, got {:?}", response.result);
    };
    let got = bundle.event.expect("the bundle carries its event");
    assert_eq!(got.id, event);
    assert_eq!(got.kind, "OperatorMessage");
    assert_eq!(got.sequence_number, 7);
    assert!(bundle.forced_replan_due);
    let budget = bundle.budget.expect("the bundle carries a budget");
    // A present zero cap and an absent (unlimited) axis stay distinct.
    assert_eq!(budget.max_tokens, Some(0));
    assert_eq!(budget.max_tool_calls, Some(12));
    assert_eq!(budget.max_wall_ms, None);

    let held = client.claim_tick(claim(None)).await?.into_inner();
    assert!(matches!(
        held.result,
        Some(claim_tick_response::Result::LeaseHeld(_))
    ));
    Ok(())
}

#[tokio::test]
async fn missing_or_unknown_token_is_unauthenticated() -> anyhow::Result<()> {
    let sha = auth::token_sha256(&auth::generate_token());
    let mut anonymous = start(sha.clone(), None).await?;
    let err = anonymous
        .claim_tick(claim(None))
        .await
        .expect_err("no token is refused");
    assert_eq!(err.code(), tonic::Code::Unauthenticated);

    let mut stranger = start(sha, Some(auth::generate_token())).await?;
    let err = stranger
        .claim_tick(claim(None))
        .await
        .expect_err("a foreign token is refused");
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    Ok(())
}

#[tokio::test]
async fn edge_errors_reach_the_client_with_their_codes() -> anyhow::Result<()> {
    let token = auth::generate_token();
    let mut client = start(auth::token_sha256(&token), Some(token)).await?;

    let mut bad = claim(None);
    bad.instance_id = "nope".into();
    let err = client.claim_tick(bad).await.expect_err("bad id is refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().starts_with("instance_id:"),
        "{}",
        err.message()
    );

    let err = client
        .renew_lease(RenewLeaseRequest::default())
        .await
        .expect_err("lease lost");
    assert!(convert::is_lease_lost(&err), "{err:?}");

    let err = client
        .complete_tick(CompleteTickRequest {
            outcome: Some(TickOutcome::default()),
            ..CompleteTickRequest::default()
        })
        .await
        .expect_err("unspecified completion is refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(err.message(), "outcome.completion: required");

    let done = client
        .complete_tick(CompleteTickRequest {
            outcome: Some(TickOutcome {
                completion: TickCompletion::ShortCircuited as i32,
                ..TickOutcome::default()
            }),
            ..CompleteTickRequest::default()
        })
        .await?
        .into_inner();
    assert_eq!(done.decision_kind, "TICK_COMPLETION_SHORT_CIRCUITED");

    let echoed = client
        .invoke_tool(InvokeToolRequest {
            arguments_json: r#"{"q":"x"}"#.into(),
            ..InvokeToolRequest::default()
        })
        .await?
        .into_inner();
    assert_eq!(echoed.result_json, r#"{"q":"x"}"#);
    assert!(echoed.error.is_none());

    let attempt = |input_tokens| RecordCallAttemptRequest {
        invocation_id: "inv-1".into(),
        attempt: Some(genesis_proto::v1::CallAttempt {
            input_tokens,
            ..Default::default()
        }),
        ..RecordCallAttemptRequest::default()
    };
    let err = client
        .record_call_attempt(attempt(-5))
        .await
        .expect_err("negative tokens are refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().starts_with("attempt.input_tokens:"),
        "{}",
        err.message()
    );
    let recorded = client
        .record_call_attempt(attempt(2_000_000))
        .await?
        .into_inner();
    assert_eq!(recorded.snapshot_id, "inv-1");
    assert!((recorded.cost_usd - 2.0).abs() < 1e-9);
    Ok(())
}
