//! Retrying the way providers ask, against real loopback providers: a wait
//! hint (`Retry-After` as seconds or an HTTP date, OpenAI's
//! `x-ratelimit-reset-requests`, an overloaded 529) is waited out on the same
//! credential unless another credential of the provider is free; a transient
//! failure (5xx, refused connection) gets a bounded jittered retry on the
//! same credential before the chain moves on; no wait passes the deadline.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    Canned, TestServer, anthropic_tool_response, openai_tool_response, request_with_history,
};
use genesis_llm::fallback::RetryPolicy;
use genesis_llm::{
    CallAttempt, CredentialRef, FallbackInvoker, HttpProviderFactory, HttpTimeouts, LlmError,
    LlmMetrics, ModelCouple, Preset, ProviderKind,
};

/// Millisecond backoff with `max_retries` retries.
fn fast(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(4),
    }
}

fn factory(server: &TestServer) -> HttpProviderFactory {
    HttpProviderFactory::new(HttpTimeouts {
        request: Duration::from_secs(5),
        connect: Duration::from_secs(2),
    })
    .expect("factory")
    .with_anthropic_base_url(&server.base_url)
    .with_openai_base_url(&server.base_url)
}

fn invoker(factory: HttpProviderFactory) -> (FallbackInvoker, Arc<LlmMetrics>) {
    let metrics = Arc::new(LlmMetrics::default());
    (
        FallbackInvoker::new(Arc::new(factory))
            .with_metrics(metrics.clone())
            .with_cooldowns(Arc::default())
            .with_retry_policy(fast(2)),
        metrics,
    )
}

/// Anthropic with the given credentials, then an OpenAI couple on `sk-oa`.
fn preset(anthropic: &[(&str, &str)]) -> Preset {
    let mut credentials: Vec<CredentialRef> = anthropic
        .iter()
        .map(|(name, secret)| CredentialRef::new(*name, *secret))
        .collect();
    credentials.push(CredentialRef::for_provider(
        "openai-key",
        "sk-oa",
        ProviderKind::OpenAi,
    ));
    Preset {
        id: "preset-agent".into(),
        name: "Agent default".into(),
        model: "claude-opus-4-8".into(),
        provider: ProviderKind::Anthropic,
        backend: "api".into(),
        credentials,
        fallback: vec![ModelCouple::new("gpt-5.1", ProviderKind::OpenAi, "api")],
        overlays: Default::default(),
    }
}

/// An OpenAI-only preset on `sk-1`.
fn openai_preset() -> Preset {
    Preset {
        id: "preset-openai".into(),
        name: "OpenAI".into(),
        model: "gpt-4.1".into(),
        provider: ProviderKind::OpenAi,
        backend: "api".into(),
        credentials: vec![CredentialRef::new("key", "sk-1")],
        fallback: Vec::new(),
        overlays: Default::default(),
    }
}

fn ok() -> Canned {
    Canned::json(200, anthropic_tool_response("claude-opus-4-8"))
}

fn openai_ok() -> Canned {
    Canned::json(200, openai_tool_response("gpt-5.1"))
}

fn outcomes(attempts: &[CallAttempt]) -> Vec<&str> {
    attempts.iter().map(|a| a.outcome.as_str()).collect()
}

#[tokio::test]
async fn a_single_500_is_retried_on_the_same_credential_and_never_reaches_the_next_couple() {
    let server = TestServer::start().await;
    server.answer_first("k1", vec![Canned::raw(500, "{}")]);
    server.answer("k1", ok());
    server.answer("sk-oa", openai_ok());
    let (invoker, metrics) = invoker(factory(&server));

    let out = invoker
        .invoke(&preset(&[("only", "k1")]), request_with_history())
        .await
        .expect("the retry answers");

    assert_eq!(out.couple.provider, ProviderKind::Anthropic);
    assert_eq!(outcomes(&out.attempts), ["server_error", "ok"]);
    assert_eq!(server.requests_with("k1"), 2);
    assert_eq!(
        server.requests_with("sk-oa"),
        0,
        "the next couple is never tried"
    );
    let m = metrics.snapshot();
    assert_eq!(m.fallback_advance(), 0);
    assert_eq!(m.retries, 1);
    assert_eq!(m.retry_after_waits, 0, "a backoff is not a hinted wait");
    assert_eq!(metrics.retries("anthropic", "server_error").retries, 1);
    assert!(
        metrics.render_prometheus().contains(
            "genesis_llm_retries_total{provider=\"anthropic\",reason=\"server_error\"} 1"
        )
    );
}

#[tokio::test]
async fn a_500_forever_is_retried_a_bounded_number_of_times_then_the_next_couple() {
    for max_retries in [0, 1, 3] {
        let server = TestServer::start().await;
        server.answer("k1", Canned::raw(500, "{}"));
        server.answer("sk-oa", openai_ok());
        let (invoker, metrics) = invoker(factory(&server));
        let invoker = invoker.with_retry_policy(fast(max_retries));

        let out = invoker
            .invoke(&preset(&[("only", "k1")]), request_with_history())
            .await
            .expect("the next couple answers");

        let tries = max_retries as usize + 1;
        assert_eq!(server.requests_with("k1"), tries, "{max_retries} retries");
        assert_eq!(server.requests_with("sk-oa"), 1);
        assert_eq!(out.couple.provider, ProviderKind::OpenAi);
        let mut expected = vec!["server_error"; tries];
        expected.push("ok");
        assert_eq!(outcomes(&out.attempts), expected);
        let m = metrics.snapshot();
        assert_eq!(m.retries, u64::from(max_retries));
        assert_eq!((m.advance_credential, m.advance_provider), (0, 1));
    }
}

#[tokio::test]
async fn the_default_policy_retries_twice_with_capped_full_jitter() {
    let policy = RetryPolicy::default();
    assert_eq!(policy.max_retries, 2);
    assert_eq!(policy.ceiling(0), Duration::from_millis(250));
    assert_eq!(policy.ceiling(1), Duration::from_millis(500));
    assert_eq!(policy.ceiling(2), Duration::from_secs(1));
    assert_eq!(policy.ceiling(10), policy.cap, "capped");
    assert_eq!(policy.ceiling(u32::MAX), policy.cap, "no overflow");
    let draws: Vec<Duration> = (0..200).map(|_| policy.delay(1)).collect();
    assert!(draws.iter().all(|d| *d <= policy.ceiling(1)), "{draws:?}");
    // Full jitter spreads the draws over the whole range.
    assert!(draws.iter().any(|d| *d < Duration::from_millis(125)));
    assert!(draws.iter().any(|d| *d > Duration::from_millis(375)));
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_the_next_couple() {
    let server = TestServer::start().await;
    server.answer("sk-oa", openai_ok());
    // A port that was just free: nothing listens there.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr")
    };
    let mut p = preset(&[("only", "k1")]);
    p.backend = "dead".into();
    let (invoker, metrics) =
        invoker(factory(&server).with_backend_base_url("dead", format!("http://{closed}")));

    let out = invoker
        .invoke(&p, request_with_history())
        .await
        .expect("the next couple answers");

    assert_eq!(
        outcomes(&out.attempts),
        ["transport", "transport", "transport", "ok"]
    );
    assert_eq!(metrics.retries("anthropic", "transport").retries, 2);
    assert_eq!(metrics.snapshot().advance_provider, 1);
}

#[tokio::test]
async fn a_transient_retry_never_sleeps_past_the_deadline() {
    let server = TestServer::start().await;
    server.answer(
        "k1",
        Canned::raw(500, "{}").delayed(Duration::from_millis(80)),
    );
    let (invoker, metrics) = invoker(factory(&server));
    let invoker = invoker.with_retry_policy(fast(5));
    let mut p = preset(&[("only", "k1")]);
    p.fallback.clear();

    let started = Instant::now();
    let err = invoker
        .invoke_until(
            &p,
            request_with_history(),
            Some(started + Duration::from_millis(50)),
        )
        .await
        .expect_err("the deadline passed during the first try");

    assert_eq!(server.requests_with("k1"), 1, "no retry past the deadline");
    assert_eq!(err.error, LlmError::Exhausted { attempts: 1 });
    assert_eq!(metrics.snapshot().retries, 0);
}

#[tokio::test]
async fn a_retry_after_above_the_bound_advances_without_waiting() {
    let server = TestServer::start().await;
    server.answer("k1", Canned::raw(429, "{}").header("retry-after", "120"));
    server.answer("sk-oa", openai_ok());
    let (invoker, metrics) = invoker(factory(&server));
    let invoker = invoker.with_max_retry_wait(Duration::from_secs(30));

    let started = Instant::now();
    let out = invoker
        .invoke(&preset(&[("only", "k1")]), request_with_history())
        .await
        .expect("the next couple answers");

    assert!(started.elapsed() < Duration::from_secs(1), "did not wait");
    assert_eq!(outcomes(&out.attempts), ["rate_limited", "ok"]);
    assert_eq!(out.couple.provider, ProviderKind::OpenAi);
    assert_eq!(server.requests_with("k1"), 1);
    let m = metrics.snapshot();
    assert_eq!((m.retries, m.retry_after_waits), (0, 0));
    assert_eq!(m.advance_provider, 1);
}

#[tokio::test]
async fn a_free_credential_of_the_same_provider_is_used_instead_of_waiting() {
    let server = TestServer::start().await;
    server.answer("k1", Canned::raw(429, "{}").header("retry-after", "1"));
    server.answer("k2", ok());
    let (invoker, metrics) = invoker(factory(&server));

    let started = Instant::now();
    let out = invoker
        .invoke(
            &preset(&[("first", "k1"), ("second", "k2")]),
            request_with_history(),
        )
        .await
        .expect("the second credential answers");

    assert!(
        started.elapsed() < Duration::from_millis(900),
        "no wait: {:?}",
        started.elapsed()
    );
    assert_eq!(out.credential_name, "second");
    assert_eq!(outcomes(&out.attempts), ["rate_limited", "ok"]);
    assert_eq!(
        (server.requests_with("k1"), server.requests_with("k2")),
        (1, 1)
    );
    let m = metrics.snapshot();
    assert_eq!((m.retries, m.advance_credential), (0, 1));
}

#[tokio::test]
async fn openai_x_ratelimit_reset_requests_is_honoured() {
    let server = TestServer::start().await;
    server.answer_first(
        "sk-1",
        vec![
            Canned::raw(429, "{}")
                .header("x-ratelimit-remaining-requests", "0")
                .header("x-ratelimit-reset-requests", "1s")
                .header("x-ratelimit-reset-tokens", "6m0s"),
        ],
    );
    server.answer("sk-1", openai_ok());
    let (invoker, metrics) = invoker(factory(&server));

    let started = Instant::now();
    let out = invoker
        .invoke(&openai_preset(), request_with_history())
        .await
        .expect("the retry answers");

    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "not the tokens reset"
    );
    assert_eq!(server.requests_with("sk-1"), 2);
    assert_eq!(outcomes(&out.attempts), ["rate_limited", "ok"]);
    let hinted = metrics.retries("openai", "retry_after");
    assert_eq!(hinted.retries, 1);
    assert_eq!(hinted.waited, Duration::from_secs(1));
}

#[tokio::test]
async fn an_http_date_retry_after_is_honoured() {
    let server = TestServer::start().await;
    let at = chrono::Utc::now() + chrono::Duration::seconds(2);
    let date = at.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
    server.answer_first(
        "k1",
        vec![Canned::raw(429, "{}").header("retry-after", &date)],
    );
    server.answer("k1", ok());
    let (invoker, metrics) = invoker(factory(&server));

    let started = Instant::now();
    let out = invoker
        .invoke(&preset(&[("only", "k1")]), request_with_history())
        .await
        .expect("the retry answers");

    // The date has whole seconds: the wait is between one and two.
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    assert!(waited < Duration::from_secs(4), "{waited:?}");
    assert_eq!(server.requests_with("k1"), 2);
    assert_eq!(server.requests_with("sk-oa"), 0);
    assert_eq!(outcomes(&out.attempts), ["rate_limited", "ok"]);
    assert_eq!(metrics.snapshot().retry_after_waits, 1);
}

#[tokio::test]
async fn an_overloaded_529_with_retry_after_waits_and_retries_the_same_credential() {
    let server = TestServer::start().await;
    server.answer_first(
        "k1",
        vec![
            Canned::raw(
                529,
                r#"{"type":"error","error":{"type":"overloaded_error"}}"#,
            )
            .header("retry-after", "1"),
        ],
    );
    server.answer("k1", ok());
    server.answer("sk-oa", openai_ok());
    let (invoker, metrics) = invoker(factory(&server));

    let started = Instant::now();
    let out = invoker
        .invoke(&preset(&[("only", "k1")]), request_with_history())
        .await
        .expect("the retry answers");

    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(out.couple.provider, ProviderKind::Anthropic);
    assert_eq!(outcomes(&out.attempts), ["overloaded", "ok"]);
    assert_eq!(out.attempts[0].stored_outcome(), "server_error");
    assert_eq!(server.requests_with("sk-oa"), 0);
    assert_eq!(metrics.retries("anthropic", "retry_after").retries, 1);
    // An outage is not a rate limit: the credential is not rested.
    assert_eq!(invoker.cooldowns().cooling(Instant::now()), 0);
}

#[tokio::test]
async fn the_invocations_hinted_waits_share_one_budget() {
    let server = TestServer::start().await;
    server.answer("k1", Canned::raw(429, "{}").header("retry-after", "1"));
    server.answer("sk-oa", Canned::raw(429, "{}").header("retry-after", "1"));
    let (invoker, metrics) = invoker(factory(&server));
    let invoker = invoker.with_max_retry_wait(Duration::from_millis(1500));

    let started = Instant::now();
    let err = invoker
        .invoke(&preset(&[("only", "k1")]), request_with_history())
        .await
        .expect_err("both rate limited");

    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(1), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(2),
        "one wait only: {elapsed:?}"
    );
    assert_eq!(server.requests_with("k1"), 2, "waited for once");
    assert_eq!(server.requests_with("sk-oa"), 1, "no budget left to wait");
    assert_eq!(err.error, LlmError::Exhausted { attempts: 3 });
    let m = metrics.snapshot();
    assert_eq!(m.retry_after_waits, 1);
    assert_eq!(m.retry_wait, Duration::from_secs(1));
}
