//! Bearer-token helpers shared by both gRPC servers (genesis-control and
//! genesis-supervisor) and their clients: reading `authorization: Bearer
//! <token>` from tonic metadata and writing it, with genesis-core's token
//! rules (minting, hashing for storage, constant-time comparison)
//! re-exported beside them; plus the RPC-path helpers the auth layer
//! uses to tell the AgentPod service from the admin services.
//!
//! This module never stores, logs or looks up a token: deciding whether a hash
//! is known, its scope and its tenant belongs to the store and the servers'
//! auth layers. A raw token must never end up in an error message.

use rand::RngCore as _;
use tonic::metadata::{AsciiMetadataValue, MetadataMap};

/// The metadata key carrying the credential (gRPC lower-cases header names).
pub const AUTHORIZATION: &str = "authorization";

/// The token rules (shape, stored hash, constant-time comparison) are
/// genesis-core's; re-exported here so the servers and clients that handle
/// the bearer metadata find them next to it.
pub use genesis_core::token::{
    TOKEN_BYTES, TOKEN_LEN, TOKEN_PREFIX, constant_time_eq, is_well_formed_token, token_from_bytes,
    token_matches_hash, token_sha256,
};

/// Mints a new token: [`TOKEN_BYTES`] bytes from the thread-local CSPRNG
/// (ChaCha, seeded from the OS), shown by genesis-core's
/// [`token_from_bytes`]. Here and not in genesis-core because that crate
/// never reads a random source.
pub fn generate_token() -> String {
    let mut bytes = [0_u8; TOKEN_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    token_from_bytes(bytes)
}

/// Fully qualified name of the service an agent-pod token may reach (and
/// the only one: DESIGN invariant 10).
pub const AGENT_POD_SERVICE: &str = "genesis.v1.AgentPod";

/// Why a request's credential could not be read. Every variant maps to
/// `UNAUTHENTICATED`; none carries the token itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `authorization` metadata entry.
    #[error("missing authorization metadata")]
    Missing,
    /// The entry is present more than once, so which one counts is ambiguous.
    #[error("authorization metadata given more than once")]
    Duplicated,
    /// The value is not visible ASCII.
    #[error("authorization metadata is not ASCII")]
    NotAscii,
    /// The scheme is not `Bearer`.
    #[error("authorization scheme must be Bearer")]
    NotBearer,
    /// `Bearer` with no token, or a token with inner whitespace.
    #[error("bearer token is empty or malformed")]
    Malformed,
}

impl From<AuthError> for tonic::Status {
    fn from(err: AuthError) -> Self {
        tonic::Status::unauthenticated(err.to_string())
    }
}

/// Reads the bearer token from request metadata.
///
/// The scheme is matched case-insensitively (RFC 6750 §2.1 refers to RFC 7235,
/// where schemes are case-insensitive); the token itself is returned verbatim.
/// Only the format is checked here: whether the token is known is the
/// caller's lookup.
pub fn bearer_token(metadata: &MetadataMap) -> Result<&str, AuthError> {
    let mut values = metadata.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthError::Missing)?;
    if values.next().is_some() {
        return Err(AuthError::Duplicated);
    }
    let text = value.to_str().map_err(|_| AuthError::NotAscii)?;
    let (scheme, rest) = text.split_once(' ').ok_or_else(|| {
        if text.eq_ignore_ascii_case("bearer") {
            AuthError::Malformed
        } else {
            AuthError::NotBearer
        }
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::NotBearer);
    }
    let token = rest.trim();
    if token.is_empty() || token.contains(|c: char| c.is_ascii_whitespace()) {
        return Err(AuthError::Malformed);
    }
    Ok(token)
}

/// The metadata value a client sends: `Bearer <token>`.
///
/// Fails with [`AuthError::Malformed`] when the token is empty or holds
/// anything but visible ASCII (so a client misconfiguration is caught
/// before the first call, not answered by the server).
pub fn bearer_value(token: &str) -> Result<AsciiMetadataValue, AuthError> {
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AuthError::Malformed);
    }
    format!("Bearer {token}")
        .parse()
        .map_err(|_| AuthError::Malformed)
}

/// A client interceptor adding `authorization: Bearer <token>` to every
/// request: the agent pod's to the supervisor, a coder's to control. Its
/// `Debug` never shows the token.
#[derive(Clone)]
pub struct BearerAuth(AsciiMetadataValue);

impl BearerAuth {
    /// The interceptor for `token`, checked as [`bearer_value`] checks it.
    pub fn new(token: &str) -> Result<Self, AuthError> {
        bearer_value(token).map(BearerAuth)
    }
}

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerAuth(<redacted>)")
    }
}

impl tonic::service::Interceptor for BearerAuth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert(AUTHORIZATION, self.0.clone());
        Ok(request)
    }
}

/// Splits a gRPC request path `/package.Service/Method` into
/// `("package.Service", "Method")`; `None` for anything else. The auth layer
/// keys its scope decision on the service half.
pub fn parse_rpc_path(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    if service.is_empty() || method.is_empty() || method.contains('/') {
        return None;
    }
    Some((service, method))
}

/// Whether a request path addresses the AgentPod service: the one surface an
/// agent-pod token may reach, and one an operator token may not.
pub fn is_agent_pod_path(path: &str) -> bool {
    parse_rpc_path(path).is_some_and(|(service, _)| service == AGENT_POD_SERVICE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn metadata_with(values: &[&str]) -> MetadataMap {
        let mut map = MetadataMap::new();
        for v in values {
            map.append(
                AUTHORIZATION,
                MetadataValue::try_from(*v).expect("test metadata is ASCII"),
            );
        }
        map
    }

    #[test]
    fn bearer_token_is_read_from_metadata() {
        let map = metadata_with(&["Bearer gen_abc"]);
        assert_eq!(bearer_token(&map), Ok("gen_abc"));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token(&metadata_with(&["bearer gen_x"])), Ok("gen_x"));
        assert_eq!(
            bearer_token(&metadata_with(&["BEARER  gen_x "])),
            Ok("gen_x")
        );
    }

    #[test]
    fn missing_authorization_is_refused() {
        assert_eq!(bearer_token(&MetadataMap::new()), Err(AuthError::Missing));
    }

    #[test]
    fn non_bearer_scheme_is_refused() {
        assert_eq!(
            bearer_token(&metadata_with(&["Basic dXNlcjpwYXNz"])),
            Err(AuthError::NotBearer)
        );
        assert_eq!(
            bearer_token(&metadata_with(&["gen_token_without_scheme"])),
            Err(AuthError::NotBearer)
        );
    }

    #[test]
    fn empty_or_spaced_bearer_token_is_refused() {
        assert_eq!(
            bearer_token(&metadata_with(&["Bearer"])),
            Err(AuthError::Malformed)
        );
        assert_eq!(
            bearer_token(&metadata_with(&["Bearer    "])),
            Err(AuthError::Malformed)
        );
        assert_eq!(
            bearer_token(&metadata_with(&["Bearer a b"])),
            Err(AuthError::Malformed)
        );
    }

    #[test]
    fn duplicated_authorization_is_refused() {
        let map = metadata_with(&["Bearer gen_a", "Bearer gen_b"]);
        assert_eq!(bearer_token(&map), Err(AuthError::Duplicated));
    }

    #[test]
    fn auth_errors_map_to_unauthenticated_without_the_token() {
        let status: tonic::Status = AuthError::NotBearer.into();
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
        let map = metadata_with(&["Bearer gen_secret value"]);
        let status: tonic::Status = bearer_token(&map)
            .expect_err("the metadata is malformed")
            .into();
        assert!(!status.message().contains("secret"));
    }

    #[test]
    fn bearer_value_round_trips_through_bearer_token() {
        let token = generate_token();
        let mut map = MetadataMap::new();
        map.insert(
            AUTHORIZATION,
            bearer_value(&token).expect("a minted token is sendable"),
        );
        assert_eq!(bearer_token(&map), Ok(token.as_str()));
    }

    #[test]
    fn generated_tokens_are_well_formed_and_differ() {
        let a = generate_token();
        assert!(is_well_formed_token(&a));
        assert_ne!(a, generate_token());
    }

    #[test]
    fn bearer_value_refuses_unsendable_tokens() {
        assert_eq!(bearer_value(""), Err(AuthError::Malformed));
        assert_eq!(bearer_value("a b"), Err(AuthError::Malformed));
        assert_eq!(bearer_value("gen_\u{e9}"), Err(AuthError::Malformed));
    }

    #[test]
    fn rpc_paths_split_into_service_and_method() {
        assert_eq!(
            parse_rpc_path("/genesis.v1.AgentPod/ClaimTick"),
            Some(("genesis.v1.AgentPod", "ClaimTick"))
        );
        assert_eq!(parse_rpc_path("genesis.v1.AgentPod/ClaimTick"), None);
        assert_eq!(parse_rpc_path("/genesis.v1.AgentPod/"), None);
        assert_eq!(parse_rpc_path("//ClaimTick"), None);
        assert_eq!(parse_rpc_path("/a/b/c"), None);
    }

    #[test]
    fn only_agent_pod_paths_are_agent_pod_paths() {
        assert!(is_agent_pod_path("/genesis.v1.AgentPod/CompleteTick"));
        assert!(!is_agent_pod_path("/genesis.v1.AgentService/StartAgent"));
        assert!(!is_agent_pod_path("/genesis.v1.AgentPodX/ClaimTick"));
        assert!(!is_agent_pod_path("/grpc.health.v1.Health/Check"));
    }
}
