//! The bearer-token gate in front of every gRPC route (DESIGN §6, invariant
//! 10): a tower layer requiring `authorization: Bearer <token>` whose SHA-256
//! names a usable (unexpired, unrevoked) `agent-pod` token. Missing or
//! unknown → UNAUTHENTICATED; an operator token → PERMISSION_DENIED;
//! `grpc.health.v1` is open. The token carries no tenant: each request names
//! its tenant and RLS confines the data. Must never log or echo a token.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use chrono::Utc;
use genesis_core::TokenScope;
use genesis_proto::auth::{bearer_token, is_well_formed_token, token_sha256};
use genesis_store::Store;
use tonic::Status;
use tonic::metadata::MetadataMap;

/// Path prefix of the open health service.
pub const HEALTH_PREFIX: &str = "/grpc.health.v1.Health/";

/// Decide whether a request may proceed.
pub async fn authorize(store: &Store, path: &str, headers: &http::HeaderMap) -> Result<(), Status> {
    if path.starts_with(HEALTH_PREFIX) {
        return Ok(());
    }
    let metadata = MetadataMap::from_headers(headers.clone());
    let token = bearer_token(&metadata)?;
    if !is_well_formed_token(token) {
        return Err(Status::unauthenticated("unknown token"));
    }
    let found = store
        .tokens()
        .find_by_hash(&token_sha256(token))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "token lookup failed");
            Status::unavailable("token lookup unavailable")
        })?;
    match found {
        Some(t) if t.is_usable(Utc::now()) => {
            if t.scope == TokenScope::AgentPod {
                Ok(())
            } else {
                Err(Status::permission_denied(format!(
                    "a token of scope {} cannot reach the AgentPod service",
                    t.scope.as_str()
                )))
            }
        }
        _ => Err(Status::unauthenticated("unknown, expired or revoked token")),
    }
}

/// The layer, applied to the whole gRPC server.
#[derive(Clone)]
pub struct AuthLayer {
    store: Store,
}

impl AuthLayer {
    /// A gate checking tokens against `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            store: self.store.clone(),
        }
    }
}

/// The gate around one service.
#[derive(Clone)]
pub struct AuthService<S> {
    inner: S,
    store: Store,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for AuthService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // The clone may not be ready; swap so the ready one serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let store = self.store.clone();
        Box::pin(async move {
            match authorize(&store, req.uri().path(), req.headers()).await {
                Ok(()) => inner.call(req).await,
                Err(status) => Ok(status.into_http()),
            }
        })
    }
}
