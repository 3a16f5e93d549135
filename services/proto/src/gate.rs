//! The bearer-token gate both gRPC servers put in front of their routes: a
//! tower layer that lets the open paths (health, reflection) through, reads
//! `authorization: Bearer <token>`, refuses a token that is not of the
//! minted shape before any lookup, and hands the rest to the server's
//! [`Gate`]: its lookup, its scope, its own checks. What the gate admits
//! travels to the service as a request extension; a refusal is answered
//! here, after the server's [`Gate::refused`] hook (metrics) saw it.
//!
//! Must never log or echo a token, and never let a request through to a
//! service without the admitted value in its extensions (open paths aside).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::auth::{bearer_token, is_well_formed_token};

/// The refusal of a token no usable row was found for: unknown, expired
/// and revoked are answered alike, so a caller learns nothing about which.
pub fn unknown_token() -> Status {
    Status::unauthenticated("unknown, expired or revoked token")
}

/// What a server supplies to the shared gate.
pub trait Gate: Clone + Send + Sync + 'static {
    /// What an admitted request carries to the service.
    type Admitted: Clone + Send + Sync + 'static;

    /// Look up a well-formed `token` presented for `path` and decide:
    /// admitted, or the precise refusal.
    fn admit(
        &self,
        path: &str,
        token: &str,
    ) -> impl Future<Output = Result<Self::Admitted, Status>> + Send;

    /// Sees every refusal before it is answered (e.g. to count it).
    fn refused(&self, _path: &str, _status: &Status) {}

    /// Paths served without a token.
    fn is_open(&self, path: &str) -> bool {
        crate::reflection::is_open_path(path)
    }
}

/// Read the bearer token in `metadata` and let `gate` decide on it. A token
/// not of the minted shape is refused without a lookup.
pub async fn authenticate<G: Gate>(
    gate: &G,
    path: &str,
    metadata: &MetadataMap,
) -> Result<G::Admitted, Status> {
    let token = bearer_token(metadata)?;
    check_well_formed(token)?;
    gate.admit(path, token).await
}

/// Refuse a token that is not of the minted shape (before any lookup).
pub fn check_well_formed(token: &str) -> Result<(), Status> {
    if is_well_formed_token(token) {
        Ok(())
    } else {
        Err(Status::unauthenticated("unknown token"))
    }
}

/// The tower layer, applied to a whole gRPC server.
#[derive(Clone)]
pub struct GateLayer<G> {
    gate: G,
}

impl<G> GateLayer<G> {
    /// A layer deciding through `gate`.
    pub fn new(gate: G) -> Self {
        Self { gate }
    }
}

impl<S, G: Clone> tower::Layer<S> for GateLayer<G> {
    type Service = GateService<S, G>;

    fn layer(&self, inner: S) -> Self::Service {
        GateService {
            inner,
            gate: self.gate.clone(),
        }
    }
}

/// The service the layer wraps around the router.
#[derive(Clone)]
pub struct GateService<S, G> {
    inner: S,
    gate: G,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, G, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for GateService<S, G>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    G: Gate,
    ReqBody: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqBody>) -> Self::Future {
        // The clone may not be ready; swap so the ready one serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let gate = self.gate.clone();
        Box::pin(async move {
            let path = req.uri().path().to_owned();
            if gate.is_open(&path) {
                return inner.call(req).await;
            }
            let metadata = MetadataMap::from_headers(req.headers().clone());
            match authenticate(&gate, &path, &metadata).await {
                Ok(admitted) => {
                    req.extensions_mut().insert(admitted);
                    inner.call(req).await
                }
                Err(status) => {
                    gate.refused(&path, &status);
                    Ok(status.into_http())
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use tower::{Layer as _, ServiceExt as _};

    use super::*;
    use crate::auth::generate_token;

    /// Admits one token; records lookups and refusals.
    #[derive(Clone)]
    struct OneToken {
        token: String,
        lookups: Arc<Mutex<Vec<String>>>,
        refusals: Arc<Mutex<Vec<(String, tonic::Code)>>>,
    }

    impl Gate for OneToken {
        type Admitted = u32;

        async fn admit(&self, path: &str, token: &str) -> Result<u32, Status> {
            self.lookups.lock().expect("lock").push(path.to_owned());
            if token == self.token {
                Ok(7)
            } else {
                Err(unknown_token())
            }
        }

        fn refused(&self, path: &str, status: &Status) {
            self.refusals
                .lock()
                .expect("lock")
                .push((path.to_owned(), status.code()));
        }
    }

    async fn call(gate: &OneToken, path: &str, auth: Option<&str>) -> (String, Option<u32>) {
        let inner = tower::service_fn(|req: http::Request<()>| async move {
            let seen = req.extensions().get::<u32>().copied();
            let mut res = http::Response::new(String::new());
            res.extensions_mut().insert(seen);
            Ok::<_, Infallible>(res)
        });
        let svc = GateLayer::new(gate.clone()).layer(inner);
        let mut req = http::Request::builder().uri(path);
        if let Some(value) = auth {
            req = req.header("authorization", value);
        }
        let res = svc
            .oneshot(req.body(()).expect("request"))
            .await
            .expect("infallible");
        let status = res
            .headers()
            .get("grpc-status")
            .map(|v| v.to_str().expect("ascii").to_owned())
            .unwrap_or_default();
        let seen = res.extensions().get::<Option<u32>>().copied().flatten();
        (status, seen)
    }

    #[tokio::test]
    async fn the_gate_admits_refuses_and_leaves_open_paths_open() {
        let token = generate_token();
        let gate = OneToken {
            token: token.clone(),
            lookups: Arc::default(),
            refusals: Arc::default(),
        };
        let rpc = "/genesis.v1.TenantService/ListTenants";

        // Open: no token, no lookup, no extension.
        let (status, seen) = call(&gate, "/grpc.health.v1.Health/Check", None).await;
        assert_eq!((status.as_str(), seen), ("", None));

        // Admitted: the gate's value travels with the request.
        let bearer = format!("Bearer {token}");
        let (status, seen) = call(&gate, rpc, Some(&bearer)).await;
        assert_eq!((status.as_str(), seen), ("", Some(7)));

        // Missing or malformed: refused before any lookup.
        assert_eq!(call(&gate, rpc, None).await.0, "16");
        assert_eq!(call(&gate, rpc, Some("Bearer nope")).await.0, "16");
        assert_eq!(gate.lookups.lock().expect("lock").len(), 1);

        // Unknown: looked up, refused.
        let other = format!("Bearer {}", generate_token());
        assert_eq!(call(&gate, rpc, Some(&other)).await.0, "16");
        assert_eq!(gate.lookups.lock().expect("lock").len(), 2);

        let refusals = gate.refusals.lock().expect("lock").clone();
        assert_eq!(refusals.len(), 3);
        assert!(
            refusals
                .iter()
                .all(|(p, c)| p == rpc && *c == tonic::Code::Unauthenticated)
        );
    }
}
