//! The coder's side of control's `CodingTaskService`: one authenticated
//! tonic channel bound to one task (tenant id + task id), the RPCs the coder
//! makes (`GetTask`, `ReportProgress`, `AttachArtifact`, `CompleteTask`,
//! `TaskPresetChain`, `ReserveCoderCredit`, `RecordCoderAttempt`), and the
//! mapping of a genesis-llm call attempt onto the wire.
//!
//! Every request carries `authorization: Bearer <coder token>`; the token is
//! checked for shape once, here, with the same helper every gRPC client uses
//! ([`genesis_proto::auth::bearer_value`]), and an `https://` URL trusts what
//! [`genesis_net::ClientTls`] says, as the other clients do.
//!
//! This module must never log, print or embed the token in an error, never
//! retry a write (a settled task answers FAILED_PRECONDITION, and that is the
//! answer), and never address a task other than the one it was bound to.

use genesis_proto::auth::BearerAuth;
use std::time::Duration;

use genesis_proto::v1 as pb;
use pb::coding_task_service_client::CodingTaskServiceClient;
use thiserror::Error;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// How long connecting to control may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The deadline of one control call: each is one short transaction.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The artifact kinds control accepts.
pub const ARTIFACT_PATCH: &str = "patch";
/// A log artifact.
pub const ARTIFACT_LOG: &str = "log";
/// A summary artifact.
pub const ARTIFACT_SUMMARY: &str = "summary";

/// A task's status when its coder finished the work.
pub const STATUS_COMPLETED: &str = "completed";
/// A task's status when its coder gave up.
pub const STATUS_FAILED: &str = "failed";

/// Every way talking to control can fail. None carries the token.
#[derive(Debug, Clone, Error)]
pub enum ControlError {
    /// The URL, the token or a TLS file is unusable; nothing was sent.
    #[error("control client configuration: {0}")]
    Config(String),
    /// Nothing answered at the URL (or the TLS handshake failed).
    #[error("cannot reach control at {endpoint}: {detail}")]
    Unreachable {
        /// The URL, passwords masked.
        endpoint: String,
        /// Why.
        detail: String,
    },
    /// Control answered a call with an error status.
    #[error("{rpc}: {code:?}: {message}")]
    Rpc {
        /// The RPC's name.
        rpc: &'static str,
        /// The status code.
        code: tonic::Code,
        /// The status message.
        message: String,
    },
}

impl ControlError {
    fn rpc(rpc: &'static str, status: &tonic::Status) -> Self {
        ControlError::Rpc {
            rpc,
            code: status.code(),
            message: status.message().to_owned(),
        }
    }

    /// The status code control answered with, when it answered.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            ControlError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the task was already settled (by an operator, or a second
    /// completion): control answers FAILED_PRECONDITION, and the coder's
    /// work on it is over.
    pub fn is_settled(&self) -> bool {
        self.code() == Some(tonic::Code::FailedPrecondition)
    }

    /// Whether control could not be reached (or did not answer in time),
    /// as opposed to answering with a refusal.
    pub fn is_unreachable(&self) -> bool {
        match self {
            ControlError::Unreachable { .. } => true,
            ControlError::Rpc { code, .. } => matches!(
                code,
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
            ),
            ControlError::Config(_) => false,
        }
    }
}

/// The generated client with the bearer interceptor.
pub type CodingTaskRpc = CodingTaskServiceClient<InterceptedService<Channel, BearerAuth>>;

/// A connection to control bound to one task.
#[derive(Clone, Debug)]
pub struct ControlClient {
    client: CodingTaskRpc,
    tenant_id: String,
    task_id: String,
}

impl ControlClient {
    /// Connect to control at `url` now (so "nothing listens there" is one
    /// clear [`ControlError::Unreachable`], not the first call's status),
    /// authenticating as `token`, for `tenant_id`'s task `task_id`. An
    /// `https://` URL trusts what `tls` says.
    pub async fn connect(
        url: &str,
        token: &str,
        tls: &genesis_net::ClientTls,
        tenant_id: &str,
        task_id: &str,
    ) -> Result<Self, ControlError> {
        let auth = genesis_proto::auth::BearerAuth::new(token)
            .map_err(|e| ControlError::Config(format!("the coder token is unusable: {e}")))?;
        let shown = genesis_telemetry::config_file::redact_url(url);
        let tls_url = url.starts_with("https://");
        if !tls_url && !url.starts_with("http://") {
            return Err(ControlError::Config(format!(
                "control URL {shown:?}: expected http://HOST:PORT or https://HOST:PORT"
            )));
        }
        let mut endpoint = Endpoint::from_shared(url.to_owned())
            .map_err(|e| ControlError::Config(format!("control URL {shown:?}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .tcp_nodelay(true);
        if tls_url {
            let config = tls
                .tonic()
                .map_err(|e| ControlError::Config(e.to_string()))?;
            endpoint = endpoint
                .tls_config(config)
                .map_err(|e| ControlError::Config(format!("control URL {shown:?}: {e}")))?;
        }
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| ControlError::Unreachable {
                endpoint: shown.clone(),
                detail: error_chain(&e),
            })?;
        Ok(ControlClient {
            client: CodingTaskServiceClient::with_interceptor(channel, auth),
            tenant_id: tenant_id.to_owned(),
            task_id: task_id.to_owned(),
        })
    }

    /// The tenant the client is bound to.
    pub fn tenant_id(&self) -> &str {
        &self.tenant_id
    }

    /// The task the client is bound to.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// `GetTask`.
    pub async fn get_task(&self) -> Result<pb::CodingTask, ControlError> {
        self.client
            .clone()
            .get_task(pb::GetTaskRequest {
                tenant_id: self.tenant_id.clone(),
                task_id: self.task_id.clone(),
            })
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ControlError::rpc("GetTask", &s))
    }

    /// `ReportProgress` with `message` and `percent` (0..=100).
    pub async fn report_progress(
        &self,
        message: &str,
        percent: Option<i32>,
    ) -> Result<(), ControlError> {
        self.client
            .clone()
            .report_progress(pb::ReportProgressRequest {
                tenant_id: self.tenant_id.clone(),
                task_id: self.task_id.clone(),
                message: message.to_owned(),
                percent,
            })
            .await
            .map(|_| ())
            .map_err(|s| ControlError::rpc("ReportProgress", &s))
    }

    /// `AttachArtifact` of `kind` ([`ARTIFACT_PATCH`], [`ARTIFACT_LOG`],
    /// [`ARTIFACT_SUMMARY`]).
    pub async fn attach_artifact(
        &self,
        kind: &str,
        name: &str,
        content: String,
    ) -> Result<pb::CodingTaskArtifact, ControlError> {
        self.client
            .clone()
            .attach_artifact(pb::AttachArtifactRequest {
                tenant_id: self.tenant_id.clone(),
                task_id: self.task_id.clone(),
                kind: kind.to_owned(),
                name: name.to_owned(),
                content,
            })
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ControlError::rpc("AttachArtifact", &s))
    }

    /// `CompleteTask` with `status` ([`STATUS_COMPLETED`] or
    /// [`STATUS_FAILED`]).
    pub async fn complete_task(
        &self,
        status: &str,
        result_summary: &str,
        result_json: String,
    ) -> Result<pb::CodingTask, ControlError> {
        self.client
            .clone()
            .complete_task(pb::CompleteTaskRequest {
                tenant_id: self.tenant_id.clone(),
                task_id: self.task_id.clone(),
                status: status.to_owned(),
                result_summary: result_summary.to_owned(),
                result_json,
            })
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ControlError::rpc("CompleteTask", &s))
    }

    /// `TaskPresetChain`: the model chain of the task (names only).
    pub async fn task_preset_chain(&self) -> Result<pb::ResolvedPresetChain, ControlError> {
        self.client
            .clone()
            .task_preset_chain(pb::TaskPresetChainRequest {
                tenant_id: self.tenant_id.clone(),
                task_id: self.task_id.clone(),
            })
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ControlError::rpc("TaskPresetChain", &s))
    }

    /// `ReserveCoderCredit`: hold the worst case of the next turn.
    pub async fn reserve_credit(
        &self,
        models: Vec<String>,
        prompt_tokens: u64,
        max_output_tokens: u32,
    ) -> Result<pb::ReserveCreditResponse, ControlError> {
        self.client
            .clone()
            .reserve_coder_credit(pb::ReserveCoderCreditRequest {
                tenant_id: self.tenant_id.clone(),
                task_id: self.task_id.clone(),
                models,
                prompt_tokens: to_i64(prompt_tokens),
                max_output_tokens: i64::from(max_output_tokens),
            })
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ControlError::rpc("ReserveCoderCredit", &s))
    }

    /// `RecordCoderAttempt`: one attempt of the call `invocation_id`.
    pub async fn record_attempt(
        &self,
        invocation_id: &str,
        attempt: &genesis_llm::CallAttempt,
    ) -> Result<pb::RecordCallAttemptResponse, ControlError> {
        self.client
            .clone()
            .record_coder_attempt(pb::RecordCoderAttemptRequest {
                tenant_id: self.tenant_id.clone(),
                task_id: self.task_id.clone(),
                invocation_id: invocation_id.to_owned(),
                attempt: Some(call_attempt_to_pb(attempt)),
            })
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ControlError::rpc("RecordCoderAttempt", &s))
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A genesis-llm attempt as control records it: the usage's four disjoint
/// token counts, the outcome in the stored vocabulary
/// ([`genesis_llm::CallAttempt::stored_outcome`]), the latency and the
/// error text. No cost: the server prices the counts.
pub fn call_attempt_to_pb(attempt: &genesis_llm::CallAttempt) -> pb::CallAttempt {
    pb::CallAttempt {
        requested_model: attempt.requested_model.clone(),
        served_model: attempt.served_model.clone().unwrap_or_default(),
        provider: attempt.provider.as_str().to_string(),
        credential_name: attempt.credential_name.clone(),
        outcome: attempt.stored_outcome().to_string(),
        input_tokens: to_i64(attempt.usage.input_tokens),
        output_tokens: to_i64(attempt.usage.output_tokens),
        cache_read_tokens: to_i64(attempt.usage.cache_read_tokens),
        cache_write_tokens: to_i64(attempt.usage.cache_write_tokens),
        latency_ms: to_i64(attempt.latency_ms),
        error_message: attempt.error.clone().unwrap_or_default(),
    }
}

/// An error and its sources, `: `-joined: tonic's transport errors say
/// "transport error" and keep the cause in the chain.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use genesis_llm::{ProviderKind, Usage};

    #[test]
    fn an_attempt_maps_its_four_token_counts_outcome_and_error() {
        let attempt = genesis_llm::CallAttempt {
            requested_model: "claude-opus-4-8".into(),
            served_model: Some("claude-opus-4-8-20260101".into()),
            provider: ProviderKind::Anthropic,
            backend: "api".into(),
            credential_name: "ANTHROPIC_API_KEY".into(),
            outcome: "overloaded".into(),
            error: Some("529 overloaded".into()),
            usage: Usage {
                input_tokens: 1,
                output_tokens: 2,
                cache_read_tokens: 3,
                cache_write_tokens: 4,
            },
            latency_ms: 5,
            started_at: chrono::Utc::now(),
        };
        let pb = call_attempt_to_pb(&attempt);
        assert_eq!(pb.requested_model, "claude-opus-4-8");
        assert_eq!(pb.served_model, "claude-opus-4-8-20260101");
        assert_eq!(pb.provider, "anthropic");
        assert_eq!(pb.credential_name, "ANTHROPIC_API_KEY");
        // The stored vocabulary, not the precise code.
        assert_eq!(pb.outcome, "server_error");
        assert_eq!(
            (
                pb.input_tokens,
                pb.output_tokens,
                pb.cache_read_tokens,
                pb.cache_write_tokens
            ),
            (1, 2, 3, 4)
        );
        assert_eq!(pb.latency_ms, 5);
        assert_eq!(pb.error_message, "529 overloaded");
        let ok = genesis_llm::CallAttempt {
            outcome: "ok".into(),
            error: None,
            served_model: None,
            usage: Usage {
                input_tokens: u64::MAX,
                ..Usage::default()
            },
            ..attempt
        };
        let pb = call_attempt_to_pb(&ok);
        assert_eq!(pb.outcome, "success");
        assert_eq!(pb.served_model, "");
        assert_eq!(pb.error_message, "");
        assert_eq!(pb.input_tokens, i64::MAX, "saturates, never wraps");
    }

    #[test]
    fn errors_tell_a_settled_task_and_an_unreachable_control_apart() {
        let settled = ControlError::Rpc {
            rpc: "CompleteTask",
            code: tonic::Code::FailedPrecondition,
            message: "already settled".into(),
        };
        assert!(settled.is_settled());
        assert!(!settled.is_unreachable());
        let down = ControlError::Unreachable {
            endpoint: "http://control:50051".into(),
            detail: "connection refused".into(),
        };
        assert!(down.is_unreachable());
        assert!(!down.is_settled());
        let unavailable = ControlError::Rpc {
            rpc: "GetTask",
            code: tonic::Code::Unavailable,
            message: String::new(),
        };
        assert!(unavailable.is_unreachable());
    }

    #[tokio::test]
    async fn a_token_that_cannot_be_sent_is_refused_before_connecting() {
        let tls = genesis_net::ClientTls::default();
        let err = ControlClient::connect("http://127.0.0.1:1", "has space", &tls, "t", "k")
            .await
            .expect_err("refused");
        assert!(matches!(err, ControlError::Config(_)), "{err:?}");
        assert!(!err.to_string().contains("has space"), "{err}");
        let err = ControlClient::connect("ftp://control", "tok", &tls, "t", "k")
            .await
            .expect_err("refused");
        assert!(err.to_string().contains("expected http://"), "{err}");
    }
}
