//! Reliability, part 2: one tenant's failing LLM provider must not slow the
//! others. A tenant's preset points at an OpenAI-compatible server on
//! loopback that holds every request open (the worst failure: a provider
//! that hangs until the client's timeout). That tenant gets more due ticks
//! than the pod has slots; the pod lets it hold only its share
//! (`GENESIS_POD_TENANT_CONCURRENCY`, default half the pod) and hands its
//! surplus back to the stream, so another tenant's agent initialises and
//! answers every message while the hung requests are still open. Then the
//! provider fails fast (500) and the stuck tenant's ticks end blocked, not
//! crashed, and the fleet's invariants hold.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::ensure;
use genesis_core::{AgentType, InstanceStatus};
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, bounded, wait_for};
use genesis_proto::v1 as pb;
use genesis_store::{NewInstance, Store};
use tokio::sync::watch;
use uuid::Uuid;

/// The stand-in provider: counts requests in flight (and the most at once),
/// holds each until `release` turns true, then answers 500.
struct HangingProvider {
    url: String,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
    seen: Arc<AtomicUsize>,
    release: watch::Sender<bool>,
}

async fn hanging_provider() -> anyhow::Result<HangingProvider> {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_in_flight = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(AtomicUsize::new(0));
    let (release, released) = watch::channel(false);
    let (f, m, s) = (in_flight.clone(), max_in_flight.clone(), seen.clone());
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let (f, m, s, mut released) = (f.clone(), m.clone(), s.clone(), released.clone());
            async move {
                s.fetch_add(1, Ordering::SeqCst);
                let now = f.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now, Ordering::SeqCst);
                let _ = released.wait_for(|r| *r).await;
                f.fetch_sub(1, Ordering::SeqCst);
                (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    r#"{"error":{"message":"upstream down"}}"#,
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(HangingProvider {
        url,
        in_flight,
        max_in_flight,
        seen,
        release,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_whose_provider_hangs_holds_only_its_share_while_others_tick() -> anyhow::Result<()>
{
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    let provider = hanging_provider().await?;
    bounded(Duration::from_secs(180), async {
        // One pod, four slots, two per tenant (the default share).
        let mut opts = FleetOptions::new("isolation-hanging-provider", 1);
        opts.extra_env.extend([
            ("GENESIS_POD_CONCURRENCY".to_owned(), "4".to_owned()),
            ("OPENAI_BASE_URL".to_owned(), provider.url.clone()),
            ("OPENAI_API_KEY".to_owned(), "sk-isolation-test-key".to_owned()),
        ]);
        let mut fleet = Fleet::start(opts).await?;
        let admin = fleet.admin().await?;

        // The stuck tenant: past its opener, then bound to the hanging provider.
        let stuck = fleet.create_tenant("stuck").await?;
        let stuck_soa = fleet.wait_soa(&stuck, Duration::from_secs(30)).await?;
        fleet
            .wait_decision(&stuck_soa, 0, "Initialized", Duration::from_secs(30))
            .await?;
        let hangs = pb::PresetCouple {
            model: "gpt-4o".into(),
            provider: "openai".into(),
            backend: "openai".into(),
            credential_names: vec!["OPENAI_API_KEY".into()],
        };
        let preset = admin
            .upsert_preset(&stuck, None, "hangs", hangs, serde_json::json!({}))
            .await?;
        admin
            .llm()
            .attach_preset(pb::AttachPresetRequest {
                tenant_id: stuck.clone(),
                site_id: "Agent:Default".into(),
                preset_id: preset.id.clone(),
            })
            .await?;
        // Five due ticks of that tenant, more than the pod's four slots: the
        // openers of four more agents (created straight in the store; the
        // schema does not enforce one SOA per tenant) and a message to its SOA.
        let store = Store::from_pool(&fleet.db);
        let stuck_id: Uuid = stuck.parse()?;
        for _ in 0..4 {
            store
                .instances()
                .create(
                    stuck_id,
                    NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
                )
                .await?;
        }
        fleet.send(&stuck, &stuck_soa, "status?").await?;
        wait_for("the stuck tenant to fill its share", Duration::from_secs(30), || {
            let n = provider.in_flight.load(Ordering::SeqCst);
            async move { Ok((n >= 2).then_some(())) }
        })
        .await?;

        // Another tenant, created while those requests hang: its SOA
        // initialises and answers three messages.
        let other = fleet.create_tenant("healthy").await?;
        let other_soa = fleet.wait_soa(&other, Duration::from_secs(30)).await?;
        let mut turn = fleet
            .wait_decision(&other_soa, 0, "Initialized", Duration::from_secs(60))
            .await?
            .turn_number;
        for i in 0..3 {
            fleet.send(&other, &other_soa, &format!("ping {i}")).await?;
            turn = fleet
                .wait_decision(&other_soa, turn, "MessageAcknowledged", Duration::from_secs(60))
                .await?
                .turn_number;
        }
        let still_hung = provider.in_flight.load(Ordering::SeqCst);
        let most = provider.max_in_flight.load(Ordering::SeqCst);
        ensure!(
            still_hung >= 1,
            "the hanging requests ended before the other tenant finished, so the test proved nothing"
        );
        ensure!(
            most <= 2,
            "the stuck tenant held {most} of the pod's slots at once; its share is 2"
        );
        let deferrals = fleet
            .counter("agent-pod", "genesis_pod_tenant_deferrals_total")
            .await?;
        ensure!(
            deferrals > 0.0,
            "no message was handed back for the stuck tenant"
        );

        // The provider now fails fast: the stuck tenant's ticks end blocked
        // (every provider exhausted), nothing crashes, the fleet settles.
        provider.release.send_replace(true);
        let blocked = fleet
            .wait_turn(
                &stuck_soa,
                1,
                Duration::from_secs(90),
                "the stuck SOA's message turn",
                |t| t.event_kind == "OperatorMessage",
            )
            .await?;
        ensure!(
            blocked.decision_kind == "WaitingForEvent" && blocked.phase == "idle:blocked",
            "the exhausted provider chain ended the tick as {} / {}, not WaitingForEvent / idle:blocked",
            blocked.decision_kind,
            blocked.phase
        );
        fleet.wait_quiescent(Duration::from_secs(90)).await?;
        if let Err(e) = fleet.all_alive() {
            anyhow::bail!("{e}");
        }
        let s = fleet.check_invariants().await?;
        println!(
            "FAULT hanging-provider: held={most}/4 slots deferrals={deferrals} provider_requests={} events={} consumed={} dead_lettered={} ok",
            provider.seen.load(Ordering::SeqCst),
            s.events,
            s.consumed,
            s.dead_lettered
        );
        Ok(())
    })
    .await
}
