//! The connection to genesis-control: endpoint parsing, the eager connect
//! that turns "nothing listens there" into one clear error, and the
//! interceptor that attaches `authorization: Bearer <token>` and the per-call
//! deadline to every request.
//!
//! This module must never log, print or embed the token in an error, and
//! never retry a call: an operator's command runs once.

use std::path::Path;
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

/// Checks `--endpoint` and builds the tonic endpoint: `http://`, or
/// `https://` trusting the system roots plus `ca_file` (`--ca-file`). A CA
/// file with an `http://` endpoint is refused rather than ignored, so an
/// operator who meant TLS never sends the token in clear.
pub fn endpoint(
    url: &str,
    timeout: Duration,
    ca_file: Option<&Path>,
) -> Result<Endpoint, CliError> {
    let tls = url.starts_with("https://");
    if !tls && !url.starts_with("http://") {
        return Err(CliError::usage(format!(
            "--endpoint {url:?}: expected http://HOST:PORT or https://HOST:PORT"
        )));
    }
    if !tls && ca_file.is_some() {
        return Err(CliError::usage(format!(
            "--ca-file applies to an https:// --endpoint; {url:?} is plaintext"
        )));
    }
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map(|e| e.connect_timeout(timeout).tcp_nodelay(true))
        .map_err(|e| CliError::usage(format!("--endpoint {url:?}: {}", error_chain(&e))))?;
    if !tls {
        return Ok(endpoint);
    }
    let config = genesis_net::ClientTls {
        ca: ca_file.map(|p| genesis_net::SettingPath::new("--ca-file", p)),
        identity: None,
    }
    .tonic()
    .map_err(CliError::usage)?;
    endpoint
        .tls_config(config)
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
    /// A TLS failure (an untrusted certificate, a plaintext server) is
    /// reported as such.
    pub async fn open(
        url: &str,
        token: Option<&str>,
        timeout: Duration,
        ca_file: Option<&Path>,
    ) -> Result<Self, CliError> {
        let bearer = bearer(token)?;
        let channel = endpoint(url, timeout, ca_file)?
            .connect()
            .await
            .map_err(|e| {
                if genesis_net::is_tls_failure(&e) {
                    CliError::Tls {
                        endpoint: url.to_owned(),
                        detail: error_chain(&e),
                    }
                } else {
                    CliError::Unreachable {
                        endpoint: url.to_owned(),
                        detail: error_chain(&e),
                    }
                }
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
    fn endpoints_are_http_or_https_and_a_ca_file_needs_https() {
        let d = Duration::from_secs(1);
        assert!(endpoint("http://127.0.0.1:50051", d, None).is_ok());
        assert!(endpoint("https://control:443", d, None).is_ok());
        let err = endpoint("127.0.0.1:50051", d, None).expect_err("no scheme");
        assert!(
            err.to_string()
                .contains("expected http://HOST:PORT or https://HOST:PORT"),
            "{err}"
        );
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        let ca = Path::new("/nonexistent/ca.pem");
        let err = endpoint("http://127.0.0.1:50051", d, Some(ca)).expect_err("CA over http");
        assert!(
            err.to_string()
                .contains("--ca-file applies to an https:// --endpoint"),
            "{err}"
        );
        let err = endpoint("https://control:443", d, Some(ca)).expect_err("unreadable CA");
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        assert!(
            err.to_string()
                .starts_with("--ca-file /nonexistent/ca.pem: cannot read it:"),
            "{err}"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let not_pem = dir.path().join("ca.pem");
        std::fs::write(&not_pem, "hello").expect("write");
        let err = endpoint("https://control:443", d, Some(&not_pem)).expect_err("not PEM");
        assert!(
            err.to_string()
                .ends_with("ca.pem: holds no PEM CERTIFICATE block"),
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
