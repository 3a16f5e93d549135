//! The OpenTelemetry GenAI conventions on every attempt: a `chat` span
//! (named `chat {model}` for OpenTelemetry) with the request, response,
//! usage and error attributes, and the `gen_ai.client.*` histograms.
//!
//! A subscriber of this file's own records every span's fields, so the
//! assertions read exactly what an OpenTelemetry bridge would be handed.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Canned, TestServer, request_with_history};
use genesis_llm::{
    CredentialRef, FallbackInvoker, HttpProviderFactory, HttpTimeouts, LlmMetrics, Preset,
    ProviderKind,
};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One span as the subscriber saw it: its static name and every field
/// recorded on it, as text.
#[derive(Debug, Clone)]
struct Captured {
    name: &'static str,
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Default)]
struct Spans {
    next: AtomicU64,
    spans: Mutex<BTreeMap<u64, Captured>>,
}

/// A subscriber that keeps every span and its fields.
#[derive(Clone, Default)]
struct Capture(Arc<Spans>);

impl Capture {
    /// The `chat` spans, in creation order.
    fn chat_spans(&self) -> Vec<Captured> {
        self.0
            .spans
            .lock()
            .expect("lock")
            .values()
            .filter(|s| s.name == "chat")
            .cloned()
            .collect()
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.to_string());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.to_string());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.to_string());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.to_string());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0.spans.lock().expect("lock").insert(
            id,
            Captured {
                name: attrs.metadata().name(),
                fields,
            },
        );
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some(s) = self.0.spans.lock().expect("lock").get_mut(&span.into_u64()) {
            values.record(&mut Fields(&mut s.fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn invoker(server: &TestServer) -> (FallbackInvoker, Arc<LlmMetrics>) {
    let factory = HttpProviderFactory::new(HttpTimeouts {
        request: Duration::from_secs(5),
        connect: Duration::from_secs(2),
    })
    .expect("factory")
    .with_anthropic_base_url(&server.base_url);
    let metrics = Arc::new(LlmMetrics::default());
    (
        FallbackInvoker::new(Arc::new(factory))
            .with_metrics(metrics.clone())
            .with_cooldowns(Arc::default()),
        metrics,
    )
}

fn preset(credentials: &[(&str, &str)]) -> Preset {
    Preset {
        id: "p".into(),
        name: "P".into(),
        model: "claude-opus-4-8".into(),
        provider: ProviderKind::Anthropic,
        backend: "api".into(),
        credentials: credentials
            .iter()
            .map(|(n, s)| CredentialRef::new(*n, *s))
            .collect(),
        fallback: Vec::new(),
        overlays: Default::default(),
    }
}

/// An Anthropic answer that read 7 prompt tokens from the cache and wrote 11.
fn answer_with_cache() -> serde_json::Value {
    json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-8-20260101",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "soa_send_message",
             "input": {"message": "hello"}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 120, "output_tokens": 33,
                  "cache_read_input_tokens": 7, "cache_creation_input_tokens": 11}
    })
}

#[tokio::test]
async fn a_successful_attempt_carries_the_genai_attributes() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = TestServer::start().await;
    server.answer("k1", Canned::json(200, answer_with_cache()));
    let (invoker, metrics) = invoker(&server);

    invoker
        .invoke(&preset(&[("only", "k1")]), request_with_history())
        .await
        .expect("answers");

    let spans = capture.chat_spans();
    assert_eq!(spans.len(), 1, "{spans:?}");
    let span = &spans[0];
    for (field, value) in [
        ("otel.name", "chat claude-opus-4-8"),
        ("otel.kind", "client"),
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "anthropic"),
        ("gen_ai.request.model", "claude-opus-4-8"),
        ("gen_ai.request.max_tokens", "1024"),
        ("gen_ai.response.model", "claude-opus-4-8-20260101"),
        ("gen_ai.response.finish_reasons", "tool_use"),
        // The whole prompt: 120 uncached + 7 read + 11 written.
        ("gen_ai.usage.input_tokens", "138"),
        ("gen_ai.usage.output_tokens", "33"),
        ("gen_ai.usage.cache_read.input_tokens", "7"),
        ("gen_ai.usage.cache_creation.input_tokens", "11"),
        ("genesis.llm.credential", "only"),
    ] {
        assert_eq!(span.field(field), Some(value), "{field} in {span:?}");
    }
    let temperature: f64 = span
        .field("gen_ai.request.temperature")
        .and_then(|t| t.parse().ok())
        .expect("temperature");
    assert!((temperature - 0.2).abs() < 1e-6, "{temperature}");
    assert_eq!(span.field("error.type"), None);
    assert_eq!(span.field("otel.status_code"), None);
    assert!(
        !span.fields.values().any(|v| v.contains("k1")),
        "no secret in a span: {span:?}"
    );

    assert_eq!(metrics.token_usage("anthropic", "input"), (1, 138.0));
    assert_eq!(metrics.token_usage("anthropic", "output"), (1, 33.0));
    assert_eq!(metrics.snapshot().operations, 1);
    let text = metrics.render_prometheus();
    for line in [
        "# TYPE gen_ai_client_token_usage histogram",
        "gen_ai_client_token_usage_bucket{gen_ai_provider_name=\"anthropic\",gen_ai_token_type=\"input\",le=\"64\"} 0",
        "gen_ai_client_token_usage_bucket{gen_ai_provider_name=\"anthropic\",gen_ai_token_type=\"input\",le=\"256\"} 1",
        "gen_ai_client_token_usage_sum{gen_ai_provider_name=\"anthropic\",gen_ai_token_type=\"input\"} 138",
        "gen_ai_client_token_usage_count{gen_ai_provider_name=\"anthropic\",gen_ai_token_type=\"output\"} 1",
        "# TYPE gen_ai_client_operation_duration_seconds histogram",
        "gen_ai_client_operation_duration_seconds_bucket{gen_ai_provider_name=\"anthropic\",le=\"+Inf\"} 1",
        "gen_ai_client_operation_duration_seconds_count{gen_ai_provider_name=\"anthropic\"} 1",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn each_attempt_has_its_span_and_a_failure_carries_error_type() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = TestServer::start().await;
    server.answer("k1", Canned::raw(401, "{}"));
    server.answer("k2", Canned::json(200, answer_with_cache()));
    let (invoker, metrics) = invoker(&server);

    invoker
        .invoke(
            &preset(&[("first", "k1"), ("second", "k2")]),
            request_with_history(),
        )
        .await
        .expect("the second credential answers");

    let spans = capture.chat_spans();
    assert_eq!(spans.len(), 2, "one span per attempt: {spans:?}");
    let failed = &spans[0];
    assert_eq!(failed.field("error.type"), Some("unauthorized"));
    assert_eq!(failed.field("otel.status_code"), Some("ERROR"));
    assert_eq!(failed.field("gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(failed.field("genesis.llm.credential"), Some("first"));
    assert_eq!(failed.field("gen_ai.response.model"), None);
    assert_eq!(failed.field("gen_ai.usage.input_tokens"), None);
    let answered = &spans[1];
    assert_eq!(answered.field("error.type"), None);
    assert_eq!(answered.field("genesis.llm.credential"), Some("second"));
    assert_eq!(answered.field("gen_ai.usage.input_tokens"), Some("138"));
    assert_eq!(metrics.snapshot().operations, 2, "failures are timed too");
    assert_eq!(
        metrics.token_usage("anthropic", "input").0,
        1,
        "tokens only for the answer"
    );
}

#[tokio::test]
async fn the_scripted_provider_is_named_too() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let invoker = FallbackInvoker::new(Arc::new(
        HttpProviderFactory::new(HttpTimeouts::default()).expect("factory"),
    ))
    .with_metrics(Arc::new(LlmMetrics::default()))
    .with_cooldowns(Arc::default());

    invoker
        .invoke(&Preset::scripted("offline"), request_with_history())
        .await
        .expect("scripted answers");

    let spans = capture.chat_spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].field("gen_ai.provider.name"), Some("scripted"));
    assert_eq!(
        spans[0].field("otel.name"),
        Some(format!("chat {}", genesis_llm::SCRIPTED_MODEL).as_str())
    );
    assert!(spans[0].field("gen_ai.usage.input_tokens").is_some());
}
