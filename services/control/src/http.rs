//! The HTTP side: `/healthz` (the process is up), `/readyz` (database and
//! NATS reachable) and `/metrics` (Prometheus text). Must never expose tenant
//! data or require a token: probes and scrapers call it.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::state::AppState;

/// The router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, String) {
    let db = state.store.ping().await.is_ok();
    let nats = state.nats_ready();
    let body = format!(
        "database: {}\nnats: {}\n",
        if db { "ok" } else { "unreachable" },
        if nats { "ok" } else { "unreachable" }
    );
    if db && nats {
        (StatusCode::OK, body)
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

async fn metrics(
    State(state): State<AppState>,
) -> ([(axum::http::header::HeaderName, &'static str); 1], String) {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        state.metrics.render(),
    )
}
