//! The connection to genesis-control: endpoint parsing, the eager connect
//! that turns "nothing listens there" into one clear error, and the
//! interceptor that attaches `authorization: Bearer <token>` and the per-call
//! deadline to every request.
//!
//! This module must never log, print or embed the token in an error, and
//! never retry a call: an operator's command runs once.

use std::time::Duration;

use genesis_proto::auth::{AUTHORIZATION, bearer_value};
use genesis_proto::v1;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::error::{CliError, error_chain};

/// Attaches the bearer token and, for unary calls, the deadline.
#[derive(Clone)]
pub struct Auth {
    bearer: Option<AsciiMetadataValue>,
    timeout: Option<Duration>,
}

impl Interceptor for Auth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(bearer) = &self.bearer {
            request.metadata_mut().insert(AUTHORIZATION, bearer.clone());
        }
        if let Some(timeout) = self.timeout {
            request.set_timeout(timeout);
        }
        Ok(request)
    }
}

/// The channel type every client of this crate uses.
pub type Authed = InterceptedService<Channel, Auth>;

/// An established connection plus the credential and deadline to use on it.
pub struct Connection {
    channel: Channel,
    bearer: Option<AsciiMetadataValue>,
    timeout: Duration,
}

/// Checks `--endpoint` and builds the tonic endpoint. Only `http://` is
/// accepted: this build carries no TLS stack, and silently downgrading an
/// `https://` endpoint would send the token in clear.
pub fn endpoint(url: &str, timeout: Duration) -> Result<Endpoint, CliError> {
    if !url.starts_with("http://") {
        let hint = if url.starts_with("https://") {
            "https is not supported by this build (terminate TLS in front of control or use http://)"
        } else {
            "expected http://HOST:PORT"
        };
        return Err(CliError::usage(format!("--endpoint {url:?}: {hint}")));
    }
    Endpoint::from_shared(url.to_owned())
        .map(|e| e.connect_timeout(timeout).tcp_nodelay(true))
        .map_err(|e| CliError::usage(format!("--endpoint {url:?}: {}", error_chain(&e))))
}

/// Validates the token's shape for metadata (no whitespace, not empty) before
/// anything is sent; whether it is *known* is the server's answer.
pub fn bearer(token: Option<&str>) -> Result<Option<AsciiMetadataValue>, CliError> {
    token
        .map(|t| {
            bearer_value(t).map_err(|_| {
                CliError::usage("--token: empty or holds whitespace or non-ASCII characters")
            })
        })
        .transpose()
}

impl Connection {
    /// Connects now, so an unreachable endpoint is reported as such (exit 1,
    /// `cannot reach control at <endpoint>: <cause>`) rather than as the
    /// first RPC's UNAVAILABLE.
    pub async fn open(url: &str, token: Option<&str>, timeout: Duration) -> Result<Self, CliError> {
        let bearer = bearer(token)?;
        let channel =
            endpoint(url, timeout)?
                .connect()
                .await
                .map_err(|e| CliError::Unreachable {
                    endpoint: url.to_owned(),
                    detail: error_chain(&e),
                })?;
        Ok(Connection {
            channel,
            bearer,
            timeout,
        })
    }

    fn auth(&self, deadline: bool) -> Auth {
        Auth {
            bearer: self.bearer.clone(),
            timeout: deadline.then_some(self.timeout),
        }
    }

    /// The agent service with no deadline, for the `WatchTurns` stream
    /// (which lives until the operator stops it).
    pub fn agents_streaming(&self) -> v1::agent_service_client::AgentServiceClient<Authed> {
        v1::agent_service_client::AgentServiceClient::with_interceptor(
            self.channel.clone(),
            self.auth(false),
        )
    }
}

macro_rules! clients {
    ($($method:ident => $module:ident :: $client:ident),+ $(,)?) => {
        impl Connection {
            $(
                #[doc = concat!("A `", stringify!($client), "` with the token and the `--timeout` deadline.")]
                pub fn $method(&self) -> v1::$module::$client<Authed> {
                    v1::$module::$client::with_interceptor(self.channel.clone(), self.auth(true))
                }
            )+
        }
    };
}

clients!(
    tenants => tenant_service_client::TenantServiceClient,
    agents => agent_service_client::AgentServiceClient,
    decisions => decision_service_client::DecisionServiceClient,
    llm => llm_service_client::LlmServiceClient,
    config => config_service_client::ConfigServiceClient,
    missions => mission_service_client::MissionServiceClient,
    constitution => constitution_service_client::ConstitutionServiceClient,
    knowledge => knowledge_service_client::KnowledgeServiceClient,
    registry => registry_service_client::RegistryServiceClient,
    coders => coder_service_client::CoderServiceClient,
    tasks => coding_task_service_client::CodingTaskServiceClient,
    windows => windows_lane_service_client::WindowsLaneServiceClient,
    tokens => token_service_client::TokenServiceClient,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_plain_http() {
        let d = Duration::from_secs(1);
        assert!(endpoint("http://127.0.0.1:50051", d).is_ok());
        let err = endpoint("https://control:443", d).expect_err("no TLS");
        assert!(err.to_string().contains("https is not supported"), "{err}");
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        let err = endpoint("127.0.0.1:50051", d).expect_err("no scheme");
        assert!(
            err.to_string().contains("expected http://HOST:PORT"),
            "{err}"
        );
    }

    #[test]
    fn tokens_with_whitespace_are_refused_without_echo() {
        let err = bearer(Some("gen_abc def")).expect_err("refused");
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        assert!(!err.to_string().contains("gen_abc"), "{err}");
        assert!(bearer(None).expect("no token is fine").is_none());
        assert!(bearer(Some("gen_abc")).expect("well-formed").is_some());
    }
}
