//! The bearer-token gate in front of every gRPC route (DESIGN §6, invariant
//! 10): a tower layer requiring `authorization: Bearer <token>` whose SHA-256
//! names a usable (unexpired, unrevoked) `agent-pod` token. Missing or
//! unknown → UNAUTHENTICATED; an operator token → PERMISSION_DENIED;
//! `grpc.health.v1` and reflection are open. Each request names its tenant
//! and RLS confines the data; the token may also carry the set of tenants it
//! serves (`api_tokens.pod_tenants`, empty: every tenant). The gate hands
//! the admitted set to the service as an [`AdmittedPod`] request extension,
//! and every AgentPod handler calls [`check_tenant`] before it touches
//! anything of the tenant the request names: outside the set is
//! PERMISSION_DENIED, naming the tenant. Rows are read through the
//! [`TokenCache`] (a tick's three RPCs would otherwise look the same token
//! up three times); a revocation or a changed set reaches it by NOTIFY as
//! soon as it commits.
//! The layer is the shared [`genesis_proto::gate`]; this module supplies the
//! AgentPod server's lookup, scope and tenant set.
//! Must never log or echo a token.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use genesis_core::{PodTenants, TokenScope};
use genesis_proto::auth::token_sha256;
use genesis_proto::convert::parse_uuid;
use genesis_proto::gate::{Gate, GateLayer, unknown_token};
use genesis_store::tokens::{Admission, ApiToken};
use genesis_store::{Store, TokenCache};
use tonic::Status;

/// Paths served without a token: health checks and reflection.
pub use genesis_proto::reflection::is_open_path;

/// What the gate admitted a request with: the tenants its token may act
/// for. Put in the request's extensions; read by [`check_tenant`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmittedPod {
    /// The token's set (empty: every tenant).
    pub tenants: PodTenants,
}

/// Whether the request's admitted token may act for the tenant it names
/// (`tenant_id`, as sent). A token serving every tenant passes whatever
/// the text (the handler then judges it); a scoped token needs a UUID
/// (INVALID_ARGUMENT otherwise) inside its set, else PERMISSION_DENIED
/// naming the tenant. A request the gate did not admit (no extension:
/// the service served without [`AuthLayer`]) is refused.
pub fn check_tenant<T>(request: &tonic::Request<T>, tenant_id: &str) -> Result<(), Status> {
    let Some(admitted) = request.extensions().get::<AdmittedPod>() else {
        return Err(Status::permission_denied(
            "no agent-pod token was admitted for this call",
        ));
    };
    tenant_admitted(&admitted.tenants, tenant_id)
}

/// [`check_tenant`]'s decision on the admitted set.
fn tenant_admitted(tenants: &PodTenants, tenant_id: &str) -> Result<(), Status> {
    if tenants.is_all() {
        return Ok(());
    }
    let tenant = parse_uuid("tenant_id", tenant_id)?;
    if tenants.admits(tenant) {
        Ok(())
    } else {
        tracing::warn!(%tenant, "agent-pod token refused: tenant outside its set");
        Err(Status::permission_denied(format!(
            "this agent-pod token does not serve tenant {tenant}"
        )))
    }
}

/// Decide on the row the index lookup found (if any) for `token` at `now`,
/// by the store's one gate decision ([`ApiToken::admit`]: constant-time
/// hash match, then usability, then scope). A row whose hash does not match
/// is refused exactly like no row at all.
fn admit(token: &str, found: Option<ApiToken>, now: DateTime<Utc>) -> Result<AdmittedPod, Status> {
    let Some(t) = found else {
        return Err(unknown_token());
    };
    match t.admit(token, TokenScope::AgentPod, now) {
        Admission::Admitted => Ok(AdmittedPod {
            tenants: t.pod_tenants,
        }),
        Admission::OtherScope => Err(Status::permission_denied(format!(
            "a token of scope {} cannot reach the AgentPod service",
            t.scope.as_str()
        ))),
        Admission::Unknown => Err(unknown_token()),
    }
}

/// The AgentPod server's side of the shared bearer-token gate: agent-pod
/// tokens read through the [`TokenCache`], admitted with their tenant set.
#[derive(Clone)]
pub struct PodGate {
    store: Store,
    cache: Arc<TokenCache>,
}

impl Gate for PodGate {
    type Admitted = AdmittedPod;

    async fn admit(&self, _path: &str, token: &str) -> Result<AdmittedPod, Status> {
        let found = self
            .cache
            .find_by_hash(&self.store, &token_sha256(token))
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "token lookup failed");
                Status::unavailable("token lookup unavailable")
            })?;
        admit(token, found, Utc::now())
    }
}

/// The layer, applied to the whole gRPC server.
pub type AuthLayer = GateLayer<PodGate>;

/// A gate checking tokens against `store` through `cache` (whose
/// [`TokenCache::listen`] the caller runs; until it does, every token is
/// looked up).
pub fn layer(store: Store, cache: Arc<TokenCache>) -> AuthLayer {
    GateLayer::new(PodGate { store, cache })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(token: &str, scope: TokenScope) -> ApiToken {
        ApiToken {
            id: uuid::Uuid::new_v4(),
            tenant_id: None,
            scope,
            pod_tenants: genesis_core::PodTenants::all(),
            token_sha256: token_sha256(token),
            label: "pods".into(),
            expires_at: None,
            revoked_at: None,
            created_at: Utc::now(),
        }
    }

    #[test]
    fn a_row_is_admitted_only_when_its_stored_hash_matches_the_presented_token() {
        let token = genesis_proto::auth::generate_token();
        let now = Utc::now();
        assert!(admit(&token, Some(row(&token, TokenScope::AgentPod)), now).is_ok());

        // The row of another token (a stored hash that is not this one's).
        let other = row(&genesis_proto::auth::generate_token(), TokenScope::AgentPod);
        let refused = admit(&token, Some(other), now).expect_err("mismatching hash");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        assert_eq!(refused.message(), "unknown, expired or revoked token");

        // One hex digit off is enough.
        let mut tampered = row(&token, TokenScope::AgentPod);
        let last = if tampered.token_sha256.ends_with('0') {
            "1"
        } else {
            "0"
        };
        tampered.token_sha256.pop();
        tampered.token_sha256.push_str(last);
        assert_eq!(
            admit(&token, Some(tampered), now)
                .expect_err("one digit off")
                .code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            admit(&token, None, now).expect_err("no row").code(),
            tonic::Code::Unauthenticated
        );
    }

    #[test]
    fn the_admitted_set_travels_with_the_request_and_bounds_its_tenant() {
        let token = genesis_proto::auth::generate_token();
        let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let mut scoped = row(&token, TokenScope::AgentPod);
        scoped.pod_tenants = PodTenants::new("pod_tenants", [a]).unwrap();
        let admitted = admit(&token, Some(scoped), Utc::now()).expect("admitted");
        assert_eq!(admitted.tenants.ids(), &[a]);

        let mut request = tonic::Request::new(());
        let refused = check_tenant(&request, &a.to_string()).expect_err("no extension");
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        request.extensions_mut().insert(admitted);
        assert!(check_tenant(&request, &a.to_string()).is_ok());
        let other = check_tenant(&request, &b.to_string()).expect_err("outside the set");
        assert_eq!(other.code(), tonic::Code::PermissionDenied);
        assert_eq!(
            other.message(),
            format!("this agent-pod token does not serve tenant {b}")
        );
        let junk = check_tenant(&request, "acme").expect_err("not a UUID");
        assert_eq!(junk.code(), tonic::Code::InvalidArgument);
        assert!(
            junk.message().starts_with("tenant_id"),
            "{}",
            junk.message()
        );

        // An unscoped token passes any text: the handler judges it.
        let mut shared = tonic::Request::new(());
        shared.extensions_mut().insert(AdmittedPod {
            tenants: PodTenants::all(),
        });
        assert!(check_tenant(&shared, &b.to_string()).is_ok());
        assert!(check_tenant(&shared, "").is_ok());
    }

    #[test]
    fn matching_rows_of_the_wrong_scope_or_past_their_life_are_refused() {
        let token = genesis_proto::auth::generate_token();
        let now = Utc::now();
        assert_eq!(
            admit(&token, Some(row(&token, TokenScope::Operator)), now)
                .expect_err("operator scope")
                .code(),
            tonic::Code::PermissionDenied
        );
        let mut expired = row(&token, TokenScope::AgentPod);
        expired.expires_at = Some(now - chrono::Duration::seconds(1));
        assert_eq!(
            admit(&token, Some(expired), now)
                .expect_err("expired")
                .code(),
            tonic::Code::Unauthenticated
        );
        let mut revoked = row(&token, TokenScope::AgentPod);
        revoked.revoked_at = Some(now);
        assert_eq!(
            admit(&token, Some(revoked), now)
                .expect_err("revoked")
                .code(),
            tonic::Code::Unauthenticated
        );
    }
}
