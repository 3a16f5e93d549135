//! The client side of `genesis.v1.AgentPod`: a lazily connected tonic channel
//! to genesis-supervisor that stamps every call with the agent-pod bearer
//! token and turns statuses into [`PodError`]s.
//!
//! This module must never hold database credentials or reach anything but the
//! supervisor; it must never log the token.

use genesis_proto::auth::BearerAuth;
use std::time::Duration;

use genesis_proto::v1 as pb;
use pb::agent_pod_client::AgentPodClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::error::PodError;

/// The generated client with the bearer interceptor.
pub type AgentPodRpc = AgentPodClient<InterceptedService<Channel, BearerAuth>>;

/// A cheap-to-clone handle on the supervisor's AgentPod service.
#[derive(Clone, Debug)]
pub struct Supervisor {
    client: AgentPodRpc,
    url: String,
}

/// The per-call deadline: a supervisor call is one short transaction.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Supervisor {
    /// A client for `url` authenticating with `token`. The connection is made
    /// on first use, so a pod can start before the supervisor is up; a bad URL
    /// or token is refused here. An `https://` URL trusts the system roots.
    pub fn connect_lazy(url: &str, token: &str) -> Result<Self, PodError> {
        Self::connect_lazy_with(url, token, &genesis_net::ClientTls::default())
    }

    /// [`Self::connect_lazy`] with what an `https://` URL trusts and the
    /// client certificate it presents (`tls` is unused over `http://`).
    /// Unreadable or mismatched files are refused here, naming the setting.
    pub fn connect_lazy_with(
        url: &str,
        token: &str,
        tls: &genesis_net::ClientTls,
    ) -> Result<Self, PodError> {
        let auth = genesis_proto::auth::BearerAuth::new(token)
            .map_err(|e| PodError::Config(format!("GENESIS_AGENT_TOKEN: {e}")))?;
        let shown = genesis_telemetry::config_file::redact_url(url);
        let mut endpoint = Endpoint::from_shared(url.to_string())
            .map_err(|e| PodError::Config(format!("GENESIS_SUPERVISOR_URL {shown:?}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT);
        if url.starts_with("https://") {
            let config = tls.tonic().map_err(|e| PodError::Config(e.to_string()))?;
            endpoint = endpoint
                .tls_config(config)
                .map_err(|e| PodError::Config(format!("GENESIS_SUPERVISOR_URL {shown:?}: {e}")))?;
        }
        let channel = endpoint.connect_lazy();
        Ok(Supervisor {
            client: AgentPodClient::with_interceptor(channel, auth),
            url: url.to_string(),
        })
    }

    /// The URL this client talks to (for readiness probes and logs).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether the supervisor accepts a TCP connection within a second
    /// (the `/readyz` probe; it proves reachability, not health).
    pub async fn reachable(&self) -> bool {
        let Ok(uri) = self.url.parse::<http::Uri>() else {
            return false;
        };
        let Some(host) = uri.host() else {
            return false;
        };
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        matches!(
            tokio::time::timeout(
                Duration::from_secs(1),
                tokio::net::TcpStream::connect((host.as_str(), port))
            )
            .await,
            Ok(Ok(_))
        )
    }

    /// `ClaimTick`.
    pub async fn claim_tick(
        &self,
        request: pb::ClaimTickRequest,
    ) -> Result<pb::ClaimTickResponse, PodError> {
        crate::fault::hit("before_claim");
        let r = self
            .client
            .clone()
            .claim_tick(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("ClaimTick", &s));
        if let Ok(pb::ClaimTickResponse {
            result: Some(pb::claim_tick_response::Result::Bundle(b)),
        }) = &r
        {
            crate::fault::hit("after_claim");
            if let Some(e) = &b.event {
                crate::fault::poison(&e.payload_json);
                if crate::fault::fails(&e.payload_json) {
                    return Err(PodError::SupervisorUnavailable {
                        rpc: "ClaimTick",
                        message: "fault injection: a tick that always fails".into(),
                    });
                }
            }
        }
        r
    }

    /// `RenewLease`.
    pub async fn renew_lease(
        &self,
        request: pb::RenewLeaseRequest,
    ) -> Result<pb::RenewLeaseResponse, PodError> {
        self.client
            .clone()
            .renew_lease(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("RenewLease", &s))
    }

    /// `InvokeTool`.
    pub async fn invoke_tool(
        &self,
        request: pb::InvokeToolRequest,
    ) -> Result<pb::InvokeToolResponse, PodError> {
        let r = self
            .client
            .clone()
            .invoke_tool(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("InvokeTool", &s));
        crate::fault::hit("after_tool");
        crate::fault::pause("after_tool").await;
        r
    }

    /// `RecordCallAttempt`.
    pub async fn record_call_attempt(
        &self,
        request: pb::RecordCallAttemptRequest,
    ) -> Result<pb::RecordCallAttemptResponse, PodError> {
        self.client
            .clone()
            .record_call_attempt(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("RecordCallAttempt", &s))
    }

    /// `ReserveCredit`.
    pub async fn reserve_credit(
        &self,
        request: pb::ReserveCreditRequest,
    ) -> Result<pb::ReserveCreditResponse, PodError> {
        self.client
            .clone()
            .reserve_credit(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("ReserveCredit", &s))
    }

    /// `CompleteTick`.
    pub async fn complete_tick(
        &self,
        request: pb::CompleteTickRequest,
    ) -> Result<pb::CompleteTickResponse, PodError> {
        crate::fault::hit("before_complete");
        let r = self
            .client
            .clone()
            .complete_tick(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("CompleteTick", &s));
        crate::fault::hit("after_complete");
        r
    }

    /// `ClaimReplay`.
    pub async fn claim_replay(
        &self,
        request: pb::ClaimReplayRequest,
    ) -> Result<pb::ClaimReplayResponse, PodError> {
        self.client
            .clone()
            .claim_replay(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("ClaimReplay", &s))
    }

    /// `ReserveReplayCredit`.
    pub async fn reserve_replay_credit(
        &self,
        request: pb::ReserveReplayCreditRequest,
    ) -> Result<pb::ReserveCreditResponse, PodError> {
        self.client
            .clone()
            .reserve_replay_credit(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("ReserveReplayCredit", &s))
    }

    /// `RecordReplayAttempt`.
    pub async fn record_replay_attempt(
        &self,
        request: pb::RecordReplayAttemptRequest,
    ) -> Result<pb::RecordReplayAttemptResponse, PodError> {
        self.client
            .clone()
            .record_replay_attempt(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("RecordReplayAttempt", &s))
    }

    /// `CompleteReplay`.
    pub async fn complete_replay(
        &self,
        request: pb::CompleteReplayRequest,
    ) -> Result<pb::CompleteReplayResponse, PodError> {
        self.client
            .clone()
            .complete_replay(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| PodError::from_status("CompleteReplay", &s))
    }
}

/// The three ids every session-carrying call repeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickIds {
    /// The lease session the claim returned.
    pub session_id: String,
    /// The agent instance.
    pub instance_id: String,
    /// Its tenant.
    pub tenant_id: String,
}
