//! The fallback chain against real loopback providers: credential failover,
//! provider advance (after the same-credential retries of a transient
//! failure), exhaustion, non-failover stops, and the counters.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    Canned, TestServer, anthropic_tool_response, openai_tool_response, request_with_history,
};
use genesis_llm::fallback::RetryPolicy;
use genesis_llm::{
    CredentialRef, FallbackInvoker, HttpProviderFactory, HttpTimeouts, LlmError, LlmMetrics,
    ModelCouple, Preset, ProviderKind, ScriptedProvider, metrics_text,
};

/// The default number of retries with millisecond delays, so the chain's
/// shape is the production one and the tests stay fast.
fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(4),
        ..RetryPolicy::default()
    }
}

fn invoker(server: &TestServer) -> (FallbackInvoker, Arc<LlmMetrics>) {
    let factory = HttpProviderFactory::new(HttpTimeouts {
        request: Duration::from_secs(5),
        connect: Duration::from_secs(2),
    })
    .expect("factory")
    .with_anthropic_base_url(&server.base_url)
    .with_openai_base_url(&server.base_url);
    let metrics = Arc::new(LlmMetrics::default());
    (
        FallbackInvoker::new(Arc::new(factory))
            .with_metrics(metrics.clone())
            .with_cooldowns(Arc::default())
            .with_retry_policy(fast_retries()),
        metrics,
    )
}

fn preset() -> Preset {
    Preset {
        id: "preset-agent".into(),
        name: "Agent default".into(),
        model: "claude-opus-4-8".into(),
        provider: ProviderKind::Anthropic,
        backend: "api".into(),
        credentials: vec![
            CredentialRef::new("oauth-max", "key-oauth"),
            CredentialRef::new("api-key", "key-api"),
            CredentialRef::for_provider("openai-key", "sk-openai", ProviderKind::OpenAi),
        ],
        fallback: vec![ModelCouple::new("gpt-5.1", ProviderKind::OpenAi, "api")],
        overlays: Default::default(),
    }
}

#[tokio::test]
async fn rate_limited_first_credential_fails_over_to_the_second() {
    let server = TestServer::start().await;
    server.answer(
        "key-oauth",
        Canned::raw(429, "{}").header("retry-after", "30"),
    );
    server.answer(
        "key-api",
        Canned::json(200, anthropic_tool_response("claude-opus-4-8-served")),
    );
    let (invoker, metrics) = invoker(&server);

    let out = invoker
        .invoke(&preset(), request_with_history())
        .await
        .expect("second credential answers");

    assert_eq!(out.credential_name, "api-key");
    assert_eq!(out.couple.provider, ProviderKind::Anthropic);
    assert_eq!(out.response.tool_calls[0].name, "soa_send_message");
    assert_eq!(out.attempts.len(), 2);
    assert_eq!(out.attempts[0].credential_name, "oauth-max");
    assert_eq!(out.attempts[0].outcome, "rate_limited");
    assert_eq!(out.attempts[0].served_model, None);
    assert_eq!(out.attempts[1].outcome, "ok");
    assert_eq!(out.attempts[1].requested_model, "claude-opus-4-8");
    assert_eq!(
        out.attempts[1].served_model.as_deref(),
        Some("claude-opus-4-8-served")
    );
    assert_eq!(out.attempts[1].usage.input_tokens, 120);
    // The requested model goes on the wire, whatever the caller put in the request.
    assert!(
        server
            .recorded()
            .iter()
            .all(|r| r.body["model"] == "claude-opus-4-8")
    );

    let m = metrics.snapshot();
    assert_eq!(m.advance_credential, 1);
    assert_eq!(m.advance_provider, 0);
    assert_eq!(m.fallback_advance(), 1);
    assert_eq!(m.exhausted, 0);
    assert_eq!(m.attempts(), 2);
    assert_eq!(m.input_tokens, 120);
    assert_eq!(m.output_tokens, 33);
}

#[tokio::test]
async fn failing_provider_advances_to_the_next_couple() {
    let server = TestServer::start().await;
    server.answer("key-oauth", Canned::raw(401, "{}"));
    server.answer("key-api", Canned::raw(503, "{}"));
    server.answer(
        "sk-openai",
        Canned::json(200, openai_tool_response("gpt-5.1-served")),
    );
    let (invoker, metrics) = invoker(&server);

    let out = invoker
        .invoke(&preset(), request_with_history())
        .await
        .expect("openai answers");

    assert_eq!(out.couple.provider, ProviderKind::OpenAi);
    assert_eq!(out.credential_name, "openai-key");
    let outcomes: Vec<_> = out.attempts.iter().map(|a| a.outcome.as_str()).collect();
    // A 401 moves on at once; the 503 is retried twice on its credential.
    assert_eq!(
        outcomes,
        [
            "unauthorized",
            "server_error",
            "server_error",
            "server_error",
            "ok"
        ]
    );
    assert_eq!(server.requests_with("key-oauth"), 1);
    assert_eq!(server.requests_with("key-api"), 3);
    assert_eq!(out.attempts[4].requested_model, "gpt-5.1");
    assert_eq!(
        out.attempts[4].served_model.as_deref(),
        Some("gpt-5.1-served")
    );
    let m = metrics.snapshot();
    assert_eq!((m.advance_credential, m.advance_provider), (1, 1));
    assert_eq!(m.exhausted, 0);
    assert_eq!(m.retries, 2);
    assert_eq!(metrics.retries("anthropic", "server_error").retries, 2);
}

#[tokio::test]
async fn every_provider_failing_is_exhausted_without_panic() {
    let server = TestServer::start().await;
    server.answer("key-oauth", Canned::raw(429, "{}"));
    server.answer("key-api", Canned::raw(500, "{}"));
    server.answer("sk-openai", Canned::raw(502, "{}"));
    let (invoker, metrics) = invoker(&server);

    let err = invoker
        .invoke(&preset(), request_with_history())
        .await
        .expect_err("all fail");

    // The hint-less 429 moves on at once; each 5xx is tried three times.
    assert_eq!(err.error, LlmError::Exhausted { attempts: 7 });
    assert_eq!(err.attempts.len(), 7);
    assert!(err.attempts.iter().all(|a| a.outcome != "ok"));
    let m = metrics.snapshot();
    assert_eq!(m.exhausted, 1);
    assert_eq!(m.fallback_advance(), 2);
    assert_eq!(m.attempts_failed, 7);
    assert_eq!(m.attempts_ok, 0);
    assert_eq!(m.retries, 4);
}

#[tokio::test]
async fn non_failover_error_stops_the_chain() {
    let server = TestServer::start().await;
    server.answer("key-oauth", Canned::raw(200, "not json at all"));
    server.answer("key-api", Canned::json(200, anthropic_tool_response("m")));
    let (invoker, metrics) = invoker(&server);

    let err = invoker
        .invoke(&preset(), request_with_history())
        .await
        .expect_err("malformed stops");

    assert!(
        matches!(err.error, LlmError::MalformedResponse { .. }),
        "{:?}",
        err.error
    );
    assert_eq!(err.attempts.len(), 1);
    assert_eq!(err.attempts[0].outcome, "malformed_response");
    assert_eq!(
        server.recorded().len(),
        1,
        "the second credential is not tried"
    );
    let m = metrics.snapshot();
    assert_eq!((m.fallback_advance(), m.exhausted), (0, 0));
}

#[tokio::test]
async fn couple_without_credential_is_skipped_and_recorded() {
    let server = TestServer::start().await;
    server.answer("key-oauth", Canned::raw(500, "{}"));
    let mut preset = preset();
    preset.credentials.retain(|c| c.name == "oauth-max");
    let (invoker, metrics) = invoker(&server);

    let err = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect_err("exhausted");

    assert_eq!(err.error, LlmError::Exhausted { attempts: 4 });
    assert_eq!(err.attempts[3].provider, ProviderKind::OpenAi);
    assert_eq!(err.attempts[3].outcome, "no_credential");
    assert_eq!(server.recorded().len(), 3, "the 500 is retried twice");
    assert_eq!(metrics.snapshot().advance_provider, 1);
}

#[tokio::test]
async fn a_failing_real_provider_never_falls_back_to_the_scripted_one() {
    let server = TestServer::start().await;
    server.answer("key-oauth", Canned::raw(529, "{}"));
    let scripted = Arc::new(ScriptedProvider::new());
    let factory = HttpProviderFactory::new(HttpTimeouts::default())
        .expect("factory")
        .with_anthropic_base_url(&server.base_url)
        .with_scripted(scripted.clone());
    let invoker = FallbackInvoker::new(Arc::new(factory)).with_metrics(Arc::default());
    let mut preset = preset();
    preset.credentials.truncate(1);
    preset.fallback = vec![ModelCouple::new("scripted-1", ProviderKind::Scripted, "")];

    // Such a chain is refused before any attempt: an outage is never
    // answered with canned text.
    let err = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect_err("a mixed chain is refused");
    assert!(
        matches!(err.error, LlmError::InvalidRequest { .. }),
        "{err:?}"
    );
    assert!(err.attempts.is_empty());
    assert_eq!(scripted.calls(), 0);
}

#[tokio::test]
async fn scripted_fail_always_exhausts_the_chain() {
    let scripted = Arc::new(ScriptedProvider::new().fail_always(true));
    let factory = HttpProviderFactory::new(HttpTimeouts::default())
        .expect("factory")
        .with_scripted(scripted.clone());
    let metrics = Arc::new(LlmMetrics::default());
    let invoker = FallbackInvoker::new(Arc::new(factory)).with_metrics(metrics.clone());

    let err = invoker
        .invoke(&Preset::scripted("offline"), request_with_history())
        .await
        .expect_err("fails");

    assert_eq!(err.error, LlmError::Exhausted { attempts: 1 });
    assert_eq!(err.attempts[0].outcome, "server_error");
    assert_eq!(scripted.calls(), 1);
    assert_eq!(metrics.snapshot().exhausted, 1);
}

#[tokio::test]
async fn invalid_preset_is_refused_with_no_attempt() {
    let server = TestServer::start().await;
    server.answer("key-oauth", Canned::json(200, anthropic_tool_response("m")));
    let (invoker, metrics) = invoker(&server);
    let mut bad = preset();
    bad.credentials.push(CredentialRef::new("api-key", "dup"));

    let err = invoker
        .invoke(&bad, request_with_history())
        .await
        .expect_err("refused");

    assert!(
        matches!(&err.error, LlmError::InvalidRequest { detail } if detail.contains("\"api-key\" appears twice")),
        "{:?}",
        err.error
    );
    assert!(err.attempts.is_empty());
    assert!(server.recorded().is_empty());
    assert_eq!(metrics.snapshot().attempts(), 0);
}

#[tokio::test]
async fn a_request_is_checked_against_the_presets_model_once_before_any_attempt() {
    let server = TestServer::start().await;
    server.answer(
        "key-oauth",
        Canned::json(200, anthropic_tool_response("claude-opus-4-8")),
    );
    let (invoker, metrics) = invoker(&server);

    // Nothing to send: refused before any attempt.
    let mut empty = request_with_history();
    empty.messages = Vec::new().into();
    let err = invoker.invoke(&preset(), empty).await.expect_err("refused");
    assert!(
        matches!(&err.error, LlmError::InvalidRequest { detail } if detail == "messages is empty"),
        "{:?}",
        err.error
    );
    assert!(err.attempts.is_empty());
    assert!(server.recorded().is_empty());
    assert_eq!(metrics.snapshot().attempts(), 0);

    // The request's own model does not matter: each couple's model is sent.
    let mut unnamed = request_with_history();
    unnamed.model = String::new();
    let answer = invoker.invoke(&preset(), unnamed).await.expect("served");
    assert_eq!(answer.attempts.len(), 1);
    assert_eq!(answer.attempts[0].requested_model, "claude-opus-4-8");
}

#[tokio::test]
async fn global_metrics_render_as_prometheus_text() {
    let invoker = FallbackInvoker::new(Arc::new(
        HttpProviderFactory::new(HttpTimeouts::default()).expect("factory"),
    ));
    let before = LlmMetrics::global().snapshot().attempts_ok;
    invoker
        .invoke(&Preset::scripted("offline"), request_with_history())
        .await
        .expect("scripted");
    assert!(LlmMetrics::global().snapshot().attempts_ok > before);

    let text = metrics_text();
    for family in [
        "# TYPE subagent_llm_call_attempts_total counter",
        "# TYPE subagent_llm_call_fallback_advance_total counter",
        "# TYPE subagent_llm_call_all_providers_exhausted_total counter",
        "# TYPE subagent_llm_call_tokens_total counter",
        "subagent_llm_call_fallback_advance_total{kind=\"credential\"}",
    ] {
        assert!(text.contains(family), "missing {family} in\n{text}");
    }
    let ok_line = text
        .lines()
        .find(|l| l.starts_with("subagent_llm_call_attempts_total{outcome=\"ok\"}"))
        .expect("ok series");
    let value: u64 = ok_line
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("value");
    assert!(value >= 1);
}

#[test]
fn preset_debug_and_attempts_never_show_secrets() {
    let p = preset();
    let debug = format!("{p:?}");
    assert!(!debug.contains("key-oauth"), "{debug}");
    assert!(!debug.contains("sk-openai"), "{debug}");
    assert!(debug.contains("oauth-max"));
}

#[test]
fn preset_round_trips_through_json() {
    let p = preset();
    let json = serde_json::to_value(&p).expect("serialize");
    assert_eq!(json["provider"], "anthropic");
    assert_eq!(json["fallback"][0]["provider"], "openai");
    assert_eq!(json["credentials"][2]["provider"], "openai");
    let back: Preset = serde_json::from_value(json).expect("deserialize");
    assert_eq!(back, p);
}

#[test]
fn preset_with_unknown_provider_is_rejected() {
    let err = serde_json::from_value::<Preset>(serde_json::json!({
        "id": "p", "name": "P", "model": "m", "provider": "bedrock"
    }))
    .expect_err("unknown provider");
    assert!(err.to_string().contains("bedrock"), "{err}");
    assert!("bedrock".parse::<ProviderKind>().is_err());
    assert_eq!("openai".parse::<ProviderKind>(), Ok(ProviderKind::OpenAi));
}

#[tokio::test]
async fn fallback_couple_uses_the_credentials_it_names() {
    let server = TestServer::start().await;
    server.answer("key-oauth", Canned::raw(503, "{}"));
    server.answer("key-api", Canned::raw(503, "{}"));
    server.answer("sk-openai", Canned::raw(401, "{}"));
    server.answer(
        "sk-backup",
        Canned::json(200, openai_tool_response("gpt-5.1")),
    );
    let mut preset = preset();
    // Stored shape: names only, an empty backend meaning the default endpoint.
    preset.backend = String::new();
    preset.credentials.push(CredentialRef::for_provider(
        "openai-backup",
        "sk-backup",
        ProviderKind::OpenAi,
    ));
    preset.fallback[0].backend = String::new();
    preset.fallback[0].credentials = vec!["openai-backup".into()];
    let (invoker, _) = invoker(&server);

    let out = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect("named credential answers");

    assert_eq!(out.credential_name, "openai-backup");
    let used: Vec<_> = out
        .attempts
        .iter()
        .map(|a| a.credential_name.as_str())
        .collect();
    // The couple names its own list, so the other openai key is never tried.
    assert_eq!(
        used,
        [
            "oauth-max",
            "oauth-max",
            "oauth-max",
            "api-key",
            "api-key",
            "api-key",
            "openai-backup"
        ]
    );
    let stored: Vec<_> = out.attempts.iter().map(|a| a.stored_outcome()).collect();
    assert_eq!(stored[..6], ["server_error"; 6]);
    assert_eq!(stored[6], "success");
}

#[test]
fn fallback_couple_naming_an_unknown_credential_is_rejected() {
    let mut p = preset();
    p.fallback[0].credentials = vec!["nope".into()];
    assert_eq!(
        p.validate(),
        Err(genesis_llm::PresetError::UnknownCredential {
            couple: 0,
            name: "nope".into()
        })
    );
}

#[tokio::test]
async fn attempts_map_to_the_stored_outcome_vocabulary() {
    let server = TestServer::start().await;
    server.answer("key-oauth", Canned::raw(429, "{}"));
    server.answer("key-api", Canned::raw(200, "garbage"));
    let (invoker, _) = invoker(&server);
    let err = invoker
        .invoke(&preset(), request_with_history())
        .await
        .expect_err("malformed");
    let stored: Vec<_> = err.attempts.iter().map(|a| a.stored_outcome()).collect();
    assert_eq!(stored, ["rate_limited", "error"]);
}
