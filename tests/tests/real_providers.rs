//! The fleet against real provider wire formats: the real binaries, real
//! PostgreSQL and NATS, and a strict loopback stand-in of the Anthropic
//! Messages and OpenAI Chat Completions APIs (`genesis-llm-standin`), named
//! by `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` exactly as a deployment names
//! a proxy. The stand-in refuses what the real API refuses, so a tick that
//! completes here spoke the wire format.
//!
//! - The demo's story (greeting, then a reply to an operator message) with a
//!   429 carrying `Retry-After: 1` and a 500 injected: the story completes,
//!   no attempt is served by the scripted provider, no canned text is sent,
//!   and every attempt costs what the pricing formula says for the usage the
//!   stand-in reported (cached tokens billed once).
//! - An outage longer than the retry bound: the operator's message is
//!   deferred, not answered with made-up text; after `N` failures one
//!   attention request is raised; the agent stays active; once the provider
//!   answers, the message is handled exactly once.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, bounded, wait_for};
use genesis_llm_standin::{Answer, Endpoint, Reply, StandIn, WireUsage};
use genesis_store::inspect::{self, fleet as checks};
use serde_json::json;
use uuid::Uuid;

const T: Duration = Duration::from_secs(60);

/// Which provider a story runs against.
#[derive(Clone, Copy, Debug)]
enum Provider {
    Anthropic,
    OpenAi,
}

impl Provider {
    /// `GENESIS_DEFAULT_PROVIDER` of the fleet.
    fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
        }
    }

    fn endpoint(self) -> Endpoint {
        match self {
            Provider::Anthropic => Endpoint::Anthropic,
            Provider::OpenAi => Endpoint::OpenAi,
        }
    }

    /// The model the code-default chain asks for, and its price row:
    /// (input, output, cache read, cache write) dollars per million tokens.
    fn model_and_price(self) -> (&'static str, [f64; 4]) {
        match self {
            Provider::Anthropic => ("claude-opus-4-8", [15.0, 75.0, 1.5, 18.75]),
            Provider::OpenAi => ("gpt-4o", [2.5, 10.0, 1.25, 2.5]),
        }
    }

    /// The served name the stand-in reports: dated, as the real APIs do.
    fn served(self) -> &'static str {
        match self {
            Provider::Anthropic => "claude-opus-4-8-20261101",
            Provider::OpenAi => "gpt-4o-2024-08-06",
        }
    }

    /// A usage with cached tokens, as this provider states it.
    fn usage(self) -> WireUsage {
        match self {
            // 300 uncached, 512 read from cache, 100 written to it, 37 out.
            Provider::Anthropic => WireUsage::anthropic(300, 37, 100, 512),
            // 812 prompt tokens of which 512 cached, 37 out.
            Provider::OpenAi => WireUsage::openai(812, 37, 512, 0),
        }
    }

    /// What one attempt with [`Provider::usage`] costs, by the formula.
    fn expected_cost(self) -> f64 {
        let [input, output, read, write] = self.model_and_price().1;
        let m = 1_000_000.0;
        match self {
            Provider::Anthropic => {
                300.0 / m * input + 512.0 / m * read + 100.0 / m * write + 37.0 / m * output
            }
            Provider::OpenAi => 300.0 / m * input + 512.0 / m * read + 37.0 / m * output,
        }
    }

    fn env(self, base_url: &str, key: &str) -> Vec<(String, String)> {
        let (url_var, key_var) = match self {
            Provider::Anthropic => ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
            Provider::OpenAi => ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
        };
        vec![
            (url_var.to_owned(), base_url.to_owned()),
            (key_var.to_owned(), key.to_owned()),
        ]
    }
}

fn reply(provider: Provider, tool: &str, args: serde_json::Value) -> Answer {
    Answer::Reply(
        Reply::tool_call(tool, args)
            .model(provider.served())
            .usage(provider.usage()),
    )
}

/// The attempts of the fleet: (provider, served model, outcome, cost, usage).
async fn attempts(
    fleet: &Fleet,
) -> anyhow::Result<Vec<(String, String, String, f64, serde_json::Value)>> {
    Ok(checks::all_call_attempts(&fleet.db).await?)
}

async fn story(provider: Provider) -> anyhow::Result<()> {
    let key = format!("sk-standin-{}", Uuid::new_v4().simple());
    let standin = StandIn::builder().key(key.clone()).start().await?;
    let e = provider.endpoint();
    // The opener: a 429 with Retry-After: 1, then the greeting and the end.
    standin.push(e, Answer::rate_limited(1));
    standin.push(
        e,
        reply(
            provider,
            "soa_send_message",
            json!({"body": "Hello, I am your orchestration agent."}),
        ),
    );
    standin.push(
        e,
        reply(
            provider,
            "phase_complete",
            json!({"summary": "Greeted the operator."}),
        ),
    );
    // The operator's message: a 500, then the reply and the end.
    standin.push(e, Answer::ServerError);
    standin.push(
        e,
        reply(
            provider,
            "soa_send_message",
            json!({"body": "Noted: the launch moves to\nMonday."}),
        ),
    );
    standin.push(
        e,
        reply(
            provider,
            "phase_complete",
            json!({"summary": "Acknowledged the new date."}),
        ),
    );

    let mut opts = FleetOptions::new(&format!("real-{}", provider.name()), 1);
    opts.provider = provider.name().to_owned();
    opts.extra_env
        .extend(provider.env(&standin.base_url(), &key));
    let fleet = Fleet::start(opts).await?;
    let tenant = fleet.create_tenant("story").await?;
    let soa = fleet.wait_soa(&tenant, T).await?;
    let actions = || async {
        let rows = checks::all_ledger_actions(&fleet.db)
            .await
            .unwrap_or_default();
        format!(
            "actions {rows:?}; stand-in saw {:?}",
            standin
                .requests()
                .iter()
                .map(|r| (r.status, r.response.clone()))
                .collect::<Vec<_>>()
        )
    };
    // A message to the operator is not a side effect on the tenant's work:
    // the turns classify by the event (spec: Initialized, MessageAcknowledged).
    if let Err(e) = fleet.wait_decision(&soa, 0, "Initialized", T).await {
        return Err(e.context(actions().await));
    }
    fleet
        .send(&tenant, &soa, "The launch moves to Monday.")
        .await?;
    if let Err(e) = fleet.wait_decision(&soa, 1, "MessageAcknowledged", T).await {
        return Err(e.context(actions().await));
    }

    // The two greetings/replies, and no canned text anywhere.
    let sent = checks::messages_to_operator(&fleet.db, soa.parse()?).await?;
    ensure!(
        sent == [
            "Hello, I am your orchestration agent.",
            "Noted: the launch moves to\nMonday."
        ],
        "the agent sent {sent:?}"
    );
    let all = attempts(&fleet).await?;
    ensure!(
        all.iter().all(|(p, ..)| p == provider.name()),
        "an attempt was not served by {}: {all:?}",
        provider.name()
    );
    let failed: Vec<&str> = all
        .iter()
        .filter(|(_, _, o, ..)| o != "success")
        .map(|(_, _, o, ..)| o.as_str())
        .collect();
    ensure!(
        failed.contains(&"rate_limited") && failed.contains(&"server_error"),
        "the injected faults are not recorded as attempts: {all:?}"
    );
    for (_, served, outcome, cost, usage) in all.iter().filter(|a| a.2 == "success") {
        ensure!(served == provider.served(), "served {served}");
        let expected = provider.expected_cost();
        ensure!(
            (cost - expected).abs() < 1e-12,
            "{outcome} attempt cost {cost}, the formula says {expected} (usage {usage})"
        );
    }
    let priced = checks::successful_attempt_pricing(&fleet.db).await?;
    let model = provider.model_and_price().0;
    ensure!(
        priced
            .iter()
            .all(|(m, s)| m.as_deref() == Some(model) && s.as_deref() == Some("prefix")),
        "the dated served name was not priced by its base row: {priced:?}"
    );
    // Every request the stand-in took carried the configured key (it
    // refuses any other) and was well formed (it refuses any other).
    let refused: Vec<_> = standin
        .requests()
        .into_iter()
        .filter(|r| !matches!(r.status, Some(200 | 429 | 500)))
        .map(|r| (r.status, r.error_message().map(str::to_owned)))
        .collect();
    ensure!(
        refused.is_empty(),
        "the stand-in refused requests: {refused:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_story_runs_through_the_openai_wire_format_with_a_429_and_a_500() -> anyhow::Result<()>
{
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), story(Provider::OpenAi)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_story_runs_through_the_anthropic_wire_format_with_a_429_and_a_500()
-> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), story(Provider::Anthropic)).await
}

/// Every link of the chain fails for longer than the retry bound: the
/// message is deferred with a growing delay instead of being answered with
/// made-up text, one attention request is raised at the threshold, the
/// agent stays active, and the message is handled once the provider
/// answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_defers_the_message_until_the_provider_answers() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(180), async {
        let provider = Provider::OpenAi;
        let key = format!("sk-standin-{}", Uuid::new_v4().simple());
        let standin = StandIn::builder().key(key.clone()).start().await?;
        let mut opts = FleetOptions::new("real-outage", 1);
        opts.provider = provider.name().to_owned();
        opts.extra_env
            .extend(provider.env(&standin.base_url(), &key));
        let fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("outage").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        // The opener with the stand-in's default answer (phase_complete).
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;
        for (k, v) in [
            ("AgentDispatcher:ProviderFailureBaseDelay", "1s"),
            ("AgentDispatcher:ProviderFailureMaxDelay", "2s"),
            ("AgentDispatcher:ProviderFailureAttentionAfter", "2"),
        ] {
            fleet.set_tenant_config(&tenant, k, v).await?;
        }
        // The outage: more failures than any one call retries.
        for _ in 0..12 {
            standin.push_openai(Answer::ServerError);
        }
        fleet.send(&tenant, &soa, "Are you there?").await?;
        let soa_id: Uuid = soa.parse()?;
        let failures = || async {
            let n = inspect::instance_counters(&fleet.db, soa_id)
                .await?
                .consecutive_provider_failures;
            anyhow::Ok(n)
        };
        wait_for("two deferrals in a row", T, || async {
            Ok((failures().await? >= 2).then_some(()))
        })
        .await?;
        let counters = inspect::instance_counters(&fleet.db, soa_id).await?;
        let (status, blocked) = (counters.status, counters.consecutive_blocked_turns);
        let requests =
            checks::count_instance_attention_requests(&fleet.db, soa_id, "provider_failure")
                .await?;
        ensure!(
            status == "active" && blocked == 0 && requests == 1,
            "status {status}, blocked {blocked}, provider_failure requests {requests}"
        );
        ensure!(
            fleet.answered_messages(&soa).await? == 0,
            "the message was answered during the outage"
        );
        // The provider answers again once the faults are spent: the message
        // is handled exactly once and the streak ends.
        let handled = fleet
            .wait_decision(&soa, 1, "MessageAcknowledged", Duration::from_secs(90))
            .await?;
        ensure!(
            handled.served_model.as_deref() == Some("gpt-4o"),
            "served by {:?}",
            handled.served_model
        );
        ensure!(
            standin.pending(Endpoint::OpenAi) == 0,
            "faults left unspent"
        );
        ensure!(fleet.answered_messages(&soa).await? == 1, "answered twice");
        ensure!(failures().await? == 0, "the streak did not end");
        let canned = checks::messages_to_operator(&fleet.db, soa_id).await?.len();
        ensure!(
            canned == 0,
            "the agent sent {canned} messages it never decided on"
        );
        let scripted = checks::count_attempts_of_provider(&fleet.db, "scripted")
            .await
            .context("attempts")?;
        ensure!(
            scripted == 0,
            "{scripted} attempts went to the scripted provider"
        );
        Ok(())
    })
    .await
}
