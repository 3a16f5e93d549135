//! `Retry-After` against real loopback providers: a 429's hint rests the
//! credential for later calls, and a credential with no free alternative of
//! its provider is waited for once (bounded by the maximum wait and the
//! caller's deadline) and sent to again.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Canned, TestServer, anthropic_tool_response, request_with_history};
use genesis_llm::fallback::RetryPolicy;
use genesis_llm::{
    Cooldowns, CredentialRef, DEFAULT_MAX_RETRY_WAIT, FallbackInvoker, HttpProviderFactory,
    HttpTimeouts, LlmError, LlmMetrics, Preset, ProviderKind,
};

fn invoker(server: &TestServer, cooldowns: Arc<Cooldowns>) -> (FallbackInvoker, Arc<LlmMetrics>) {
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
            .with_cooldowns(cooldowns),
        metrics,
    )
}

/// An Anthropic-only preset with the given (name, secret) credentials.
fn preset(credentials: &[(&str, &str)]) -> Preset {
    Preset {
        id: "preset-agent".into(),
        name: "Agent default".into(),
        model: "claude-opus-4-8".into(),
        provider: ProviderKind::Anthropic,
        backend: "api".into(),
        credentials: credentials
            .iter()
            .map(|(name, secret)| CredentialRef::new(*name, *secret))
            .collect(),
        fallback: Vec::new(),
        overlays: Default::default(),
    }
}

fn ok() -> Canned {
    Canned::json(200, anthropic_tool_response("claude-opus-4-8"))
}

fn too_many(retry_after: &str) -> Canned {
    Canned::raw(429, "{}").header("retry-after", retry_after)
}

fn outcomes(attempts: &[genesis_llm::CallAttempt]) -> Vec<&str> {
    attempts.iter().map(|a| a.outcome.as_str()).collect()
}

#[tokio::test]
async fn the_only_credential_rate_limited_waits_for_retry_after_then_succeeds() {
    let server = TestServer::start().await;
    server.answer_first("k1", vec![too_many("1")]);
    server.answer("k1", ok());
    let (invoker, metrics) = invoker(&server, Arc::default());

    let started = Instant::now();
    let out = invoker
        .invoke(&preset(&[("only", "k1")]), request_with_history())
        .await
        .expect("the retry answers");

    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(server.requests_with("k1"), 2);
    assert_eq!(outcomes(&out.attempts), ["rate_limited", "ok"]);
    assert_eq!(out.credential_name, "only");
    assert!(
        server.recorded().iter().all(|r| r.credential() == "k1"),
        "the same credential both times"
    );
    let m = metrics.snapshot();
    assert_eq!(m.retry_after_waits, 1);
    assert_eq!(m.exhausted, 0);
    assert_eq!(
        m.fallback_advance(),
        0,
        "a retry after waiting is no advance"
    );
    let hinted = metrics.retries("anthropic", "retry_after");
    assert_eq!(hinted.retries, 1);
    assert_eq!(hinted.waited, Duration::from_secs(1));
    let text = metrics.render_prometheus();
    for line in [
        "genesis_llm_retries_total{provider=\"anthropic\",reason=\"retry_after\"} 1",
        "genesis_llm_retry_wait_seconds_total{provider=\"anthropic\",reason=\"retry_after\"} 1.000",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn a_cooled_down_credential_is_skipped_by_the_next_call() {
    let server = TestServer::start().await;
    server.answer("key-oauth", too_many("30"));
    server.answer("key-api", ok());
    let cooldowns = Arc::new(Cooldowns::default());
    let (invoker, metrics) = invoker(&server, cooldowns.clone());
    let preset = preset(&[("oauth-max", "key-oauth"), ("api-key", "key-api")]);

    let first = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect("second credential answers");
    assert_eq!(outcomes(&first.attempts), ["rate_limited", "ok"]);
    assert_eq!(cooldowns.cooling(Instant::now()), 1);

    let started = Instant::now();
    let second = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect("second credential answers again");

    assert!(started.elapsed() < Duration::from_secs(5), "no wait");
    assert_eq!(server.requests_with("key-oauth"), 1, "skipped, not sent");
    assert_eq!(server.requests_with("key-api"), 2);
    assert_eq!(second.credential_name, "api-key");
    assert_eq!(outcomes(&second.attempts), ["rate_limited", "ok"]);
    assert_eq!(second.attempts[0].credential_name, "oauth-max");
    assert_eq!(second.attempts[0].stored_outcome(), "rate_limited");
    assert!(
        second.attempts[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("not sent") && e.contains("cooling down")),
        "{:?}",
        second.attempts[0].error
    );
    let m = metrics.snapshot();
    assert_eq!(m.advance_credential, 2);
    assert_eq!((m.retry_after_waits, m.exhausted), (0, 0));

    // The table is what is shared: another invoker on it skips the key too,
    // one with a table of its own tries it.
    let (sharing, _) = self::invoker(&server, cooldowns);
    sharing
        .invoke(&preset, request_with_history())
        .await
        .expect("answers");
    assert_eq!(server.requests_with("key-oauth"), 1);
    let (fresh, _) = self::invoker(&server, Arc::default());
    fresh
        .invoke(&preset, request_with_history())
        .await
        .expect("answers");
    assert_eq!(server.requests_with("key-oauth"), 2);
}

#[tokio::test]
async fn retry_after_beyond_the_maximum_is_exhausted_without_waiting() {
    let server = TestServer::start().await;
    let beyond = DEFAULT_MAX_RETRY_WAIT.as_secs() + 90;
    server.answer("k1", too_many(&beyond.to_string()));
    let (invoker, metrics) = invoker(&server, Arc::default());
    let preset = preset(&[("only", "k1")]);

    let started = Instant::now();
    let err = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect_err("exhausted");

    assert!(started.elapsed() < Duration::from_secs(5), "did not wait");
    assert_eq!(err.error, LlmError::Exhausted { attempts: 1 });
    assert_eq!(outcomes(&err.attempts), ["rate_limited"]);
    assert_eq!(server.requests_with("k1"), 1);
    let m = metrics.snapshot();
    assert_eq!((m.exhausted, m.retry_after_waits), (1, 0));

    // The hint still rests the credential: the next call sends nothing.
    let err = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect_err("still exhausted");
    assert_eq!(err.error, LlmError::Exhausted { attempts: 1 });
    assert_eq!(server.requests_with("k1"), 1);
    assert_eq!(metrics.snapshot().exhausted, 2);
}

#[tokio::test]
async fn a_malformed_retry_after_is_treated_as_absent() {
    let server = TestServer::start().await;
    server.answer("k1", too_many("soon, maybe"));
    let (invoker, metrics) = invoker(&server, Arc::default());
    let preset = preset(&[("only", "k1")]);

    let started = Instant::now();
    let err = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect_err("exhausted");
    assert!(started.elapsed() < Duration::from_secs(5), "did not wait");
    assert_eq!(err.error, LlmError::Exhausted { attempts: 1 });
    assert!(
        err.attempts[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("retry after None")),
        "{:?}",
        err.attempts[0].error
    );
    assert_eq!(invoker.cooldowns().cooling(Instant::now()), 0);

    // No cool-down either: the next call sends again.
    invoker
        .invoke(&preset, request_with_history())
        .await
        .expect_err("exhausted again");
    assert_eq!(server.requests_with("k1"), 2);
    let m = metrics.snapshot();
    assert_eq!((m.exhausted, m.retry_after_waits), (2, 0));
}

#[tokio::test]
async fn the_wait_never_passes_the_callers_deadline() {
    let server = TestServer::start().await;
    server.answer_first("k1", vec![too_many("2")]);
    server.answer("k1", ok());
    let (invoker, metrics) = invoker(&server, Arc::default());

    let started = Instant::now();
    let err = invoker
        .invoke_until(
            &preset(&[("only", "k1")]),
            request_with_history(),
            Some(started + Duration::from_millis(800)),
        )
        .await
        .expect_err("the budget ends first");

    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(err.error, LlmError::Exhausted { attempts: 1 });
    assert_eq!(server.requests_with("k1"), 1);
    assert_eq!(metrics.snapshot().retry_after_waits, 0);
}

#[tokio::test]
async fn a_zero_maximum_never_waits() {
    let server = TestServer::start().await;
    server.answer_first("k1", vec![too_many("1")]);
    server.answer("k1", ok());
    let cooldowns = Arc::new(Cooldowns::default());
    let (impatient, metrics) = invoker(&server, cooldowns.clone());
    let impatient = impatient.with_max_retry_wait(Duration::ZERO);
    let preset = preset(&[("only", "k1")]);

    let err = impatient
        .invoke(&preset, request_with_history())
        .await
        .expect_err("no wait allowed");
    assert_eq!(err.error, LlmError::Exhausted { attempts: 1 });
    assert_eq!(metrics.snapshot().retry_after_waits, 0);

    // A patient call on the same table finds the credential cooling down,
    // sends nothing, waits out the rest of the hint and then succeeds.
    let (patient, metrics) = invoker(&server, cooldowns);
    let out = patient
        .invoke(&preset, request_with_history())
        .await
        .expect("answers after the wait");
    assert_eq!(outcomes(&out.attempts), ["rate_limited", "ok"]);
    assert!(
        out.attempts[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("not sent")),
        "{:?}",
        out.attempts[0].error
    );
    assert_eq!(server.requests_with("k1"), 2);
    assert_eq!(metrics.snapshot().retry_after_waits, 1);
}

/// The rate-limited credential had a free alternative, so it was not waited
/// for; once that alternative has failed too the chain does not come back.
#[tokio::test]
async fn a_credential_passed_over_for_a_free_one_is_not_revisited() {
    let server = TestServer::start().await;
    server.answer_first("key-oauth", vec![too_many("1")]);
    server.answer("key-oauth", ok());
    server.answer("key-api", Canned::raw(503, "{}"));
    let (invoker, metrics) = invoker(&server, Arc::default());
    let invoker = invoker.with_retry_policy(RetryPolicy {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(4),
        ..RetryPolicy::default()
    });

    let started = Instant::now();
    let err = invoker
        .invoke(
            &preset(&[("oauth-max", "key-oauth"), ("api-key", "key-api")]),
            request_with_history(),
        )
        .await
        .expect_err("a 5xx is not waited out");

    assert!(started.elapsed() < Duration::from_millis(900));
    assert_eq!(
        outcomes(&err.attempts),
        [
            "rate_limited",
            "server_error",
            "server_error",
            "server_error"
        ]
    );
    assert_eq!(err.error, LlmError::Exhausted { attempts: 4 });
    assert_eq!(server.requests_with("key-oauth"), 1);
    let m = metrics.snapshot();
    assert_eq!((m.exhausted, m.retry_after_waits), (1, 0));
    assert_eq!(m.advance_credential, 1);
    assert_eq!(metrics.retries("anthropic", "server_error").retries, 2);
}

/// One hinted wait per credential: a provider still refusing after the
/// time it asked for moves the chain on.
#[tokio::test]
async fn a_credential_is_waited_for_once_only() {
    let server = TestServer::start().await;
    server.answer("k1", too_many("1"));
    let (invoker, metrics) = invoker(&server, Arc::default());

    let started = Instant::now();
    let err = invoker
        .invoke(&preset(&[("only", "k1")]), request_with_history())
        .await
        .expect_err("still rate limited after the retry");

    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(started.elapsed() < Duration::from_secs(5), "one wait only");
    assert_eq!(server.requests_with("k1"), 2);
    assert_eq!(err.error, LlmError::Exhausted { attempts: 2 });
    assert_eq!(outcomes(&err.attempts), ["rate_limited", "rate_limited"]);
    let m = metrics.snapshot();
    assert_eq!((m.exhausted, m.retry_after_waits), (1, 1));
    assert_eq!(m.fallback_advance(), 0);
}
