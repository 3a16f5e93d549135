//! The HTTP side of the supervisor: `/healthz` (the process is up),
//! `/readyz` (the database answers) and `/metrics` (Prometheus text). Must
//! never expose tenant data or configuration secrets.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use genesis_store::Store;

use crate::metrics::Metrics;

#[derive(Clone)]
struct AppState {
    store: Store,
    metrics: Arc<Metrics>,
}

/// The router.
pub fn router(store: Store, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AppState { store, metrics })
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    match s.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(e) => {
            tracing::warn!(error = %e, "not ready: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
        }
    }
}

async fn metrics_text(State(s): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
}
