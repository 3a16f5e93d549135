//! The pod's HTTP surface: `/healthz` (the process is up), `/readyz` (NATS
//! connected and the supervisor reachable) and `/metrics` (Prometheus text).
//!
//! This module must never expose configuration, tokens or tenant data.

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::PodMetrics;
use crate::supervisor::Supervisor;

/// What the probes look at.
#[derive(Clone)]
pub struct HttpState {
    /// Set once NATS is connected.
    pub nats: Arc<OnceLock<async_nats::Client>>,
    /// The supervisor client (for reachability).
    pub supervisor: Supervisor,
    /// The counters.
    pub metrics: Arc<PodMetrics>,
}

/// The router with the three endpoints.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    let nats_ok = state
        .nats
        .get()
        .is_some_and(|c| c.connection_state() == async_nats::connection::State::Connected);
    let supervisor_ok = state.supervisor.reachable().await;
    let body = format!("nats: {}\nsupervisor: {}\n", up(nats_ok), up(supervisor_ok));
    if nats_ok && supervisor_ok {
        (StatusCode::OK, body)
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

fn up(ok: bool) -> &'static str {
    if ok { "up" } else { "down" }
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        state.metrics.render_prometheus(),
    )
}
