//! The admin gRPC services, one module per service, all sharing
//! [`crate::AppState`] and the single error mapping of [`crate::status`].
//! [`crate::server`] registers them in one place. Each RPC validates its
//! request first (`INVALID_ARGUMENT` naming the field), then authorizes the
//! tenant, then calls the store. Must never write a row except through
//! genesis-store, and never answer for a tenant the caller is not bound to.

use std::future::Future;

use tonic::{Response, Status};
use tracing::Instrument as _;

use crate::state::AppState;

pub mod agents;
pub mod coder_calls;
pub mod coders;
pub mod coding_tasks;
pub mod config;
pub mod constitution;
pub mod decisions;
pub mod knowledge;
pub mod lanes;
pub mod llm;
pub mod missions;
pub mod registry;
pub mod tenants;
pub mod tokens;
pub mod windows;

/// Run one RPC body inside a tracing span (method, tenant, instance) and
/// count its answer by method and code.
pub async fn observe<T, F>(
    state: &AppState,
    method: &'static str,
    body: F,
) -> Result<Response<T>, Status>
where
    F: Future<Output = Result<T, Status>>,
{
    let span = tracing::info_span!(
        "rpc",
        method,
        tenant = tracing::field::Empty,
        instance = tracing::field::Empty
    );
    let result = body.instrument(span).await;
    let code = match &result {
        Ok(_) => tonic::Code::Ok,
        Err(s) => s.code(),
    };
    state.metrics.record_rpc(method, code);
    result.map(Response::new)
}

/// Record the tenant (and instance) on the current RPC span.
pub fn record_ids(tenant: uuid::Uuid, instance: Option<uuid::Uuid>) {
    let span = tracing::Span::current();
    span.record("tenant", tracing::field::display(tenant));
    if let Some(i) = instance {
        span.record("instance", tracing::field::display(i));
    }
}
