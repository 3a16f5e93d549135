//! `genesis.v1.TokenService`: mint (shown once), revoke and list API tokens.
//! A tenant-bound operator may mint, list and revoke operator tokens of its
//! own tenant; platform-wide, agent-pod (with or without the set of tenants
//! it serves) and other tenants' tokens need a platform-wide caller. Must
//! never return or log a token hash, and never return the raw token anywhere
//! but CreateToken's answer.

use chrono::Utc;
use genesis_core::{PodTenants, TokenScope};
use genesis_proto::convert::invalid_argument;
use genesis_proto::v1::{self, token_service_server::TokenService};
use tonic::{Request, Response, Status};

use super::{observe, record_ids};
use crate::auth::caller;
use crate::convert;
use crate::state::AppState;
use crate::status::{core_status, opt_text, opt_uuid, parse_enum, store_status, uuid};

/// Longest label accepted (the store's limit).
const MAX_LABEL_BYTES: usize = 200;

/// The service.
#[derive(Clone)]
pub struct Tokens {
    state: AppState,
}

impl Tokens {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

#[tonic::async_trait]
impl TokenService for Tokens {
    async fn create_token(
        &self,
        request: Request<v1::CreateTokenRequest>,
    ) -> Result<Response<v1::CreateTokenResponse>, Status> {
        observe(&self.state, "/genesis.v1.TokenService/CreateToken", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            // Which tenants a pod may serve is the platform's to say, and is
            // refused to anyone else before any of it is read.
            if !req.pod_tenant_ids.is_empty() {
                caller.require_platform()?;
            }
            // The tenant is authorized before anything else is read.
            let tenant = opt_uuid("tenant_id", req.tenant_id.as_deref())?;
            match tenant {
                Some(t) => caller.authorize_tenant(t)?,
                None => caller.require_platform()?,
            }
            let scope: TokenScope = parse_enum("scope", &req.scope)?;
            let pod_tenants =
                PodTenants::parse("pod_tenant_ids", &req.pod_tenant_ids).map_err(core_status)?;
            if scope != TokenScope::AgentPod && !pod_tenants.is_all() {
                return Err(invalid_argument(
                    "pod_tenant_ids",
                    "only agent-pod tokens carry a tenant set",
                ));
            }
            opt_text("label", &req.label, MAX_LABEL_BYTES)?;
            let expires_at = match req.ttl_seconds {
                None => None,
                Some(s) if s <= 0 => {
                    return Err(invalid_argument("ttl_seconds", "must be positive"));
                }
                Some(s) => Some(
                    chrono::Duration::try_seconds(s)
                        .and_then(|d| Utc::now().checked_add_signed(d))
                        .ok_or_else(|| invalid_argument("ttl_seconds", "too large"))?,
                ),
            };
            if scope == TokenScope::AgentPod && tenant.is_some() {
                return Err(invalid_argument(
                    "tenant_id",
                    "agent-pod tokens are platform-wide",
                ));
            }
            match (scope, tenant) {
                (TokenScope::Operator, Some(t)) => {
                    caller.authorize_tenant(t)?;
                    record_ids(t, None);
                }
                _ => caller.require_platform()?,
            }
            let (raw, row) = crate::tokens::mint_for_tenants(
                &self.state.store,
                scope,
                tenant,
                &pod_tenants,
                &req.label,
                expires_at,
            )
            .await
            .map_err(store_status)?;
            Ok(v1::CreateTokenResponse {
                token: raw,
                info: Some(convert::token(&row)),
            })
        })
        .await
    }

    async fn revoke_token(
        &self,
        request: Request<v1::RevokeTokenRequest>,
    ) -> Result<Response<v1::ApiToken>, Status> {
        observe(&self.state, "/genesis.v1.TokenService/RevokeToken", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let named = opt_uuid("tenant_id", req.tenant_id.as_deref())?;
            if let Some(t) = named {
                caller.authorize_tenant(t)?;
            }
            let id = uuid("token_id", &req.token_id)?;
            let tokens = self.state.store.tokens();
            let row = tokens.get(id).await.map_err(store_status)?;
            // Another tenant's token looks like no token at all.
            let visible = match caller.tenant_id {
                None => true,
                Some(own) => row.tenant_id == Some(own),
            };
            if !visible || (named.is_some() && named != row.tenant_id) {
                return Err(Status::not_found("token not found"));
            }
            tokens.revoke(id).await.map_err(store_status)?;
            let row = tokens.get(id).await.map_err(store_status)?;
            Ok(convert::token(&row))
        })
        .await
    }

    async fn list_tokens(
        &self,
        request: Request<v1::ListTokensRequest>,
    ) -> Result<Response<v1::ListTokensResponse>, Status> {
        observe(&self.state, "/genesis.v1.TokenService/ListTokens", async {
            let caller = caller(&request)?;
            let tenant = opt_uuid("tenant_id", request.get_ref().tenant_id.as_deref())?;
            match tenant {
                Some(t) => {
                    caller.authorize_tenant(t)?;
                    record_ids(t, None);
                }
                None => caller.require_platform()?,
            }
            let rows = self
                .state
                .store
                .tokens()
                .list(tenant)
                .await
                .map_err(store_status)?;
            Ok(v1::ListTokensResponse {
                tokens: rows.iter().map(convert::token).collect(),
            })
        })
        .await
    }
}
