//! The outbox publisher on real PostgreSQL and real JetStream: delivery with
//! the event id as Nats-Msg-Id, duplicate suppression, re-publish after a
//! lost mark, NATS unreachable at publish time, and a replay asked for
//! while no control ran carried to the pods once one starts.

mod common;

use std::time::Duration;

use async_nats::jetstream;
use common::*;
use futures::StreamExt as _;
use genesis_control::metrics::Metrics;
use genesis_control::publisher::{self, PublisherSettings, TickMessage};
use genesis_core::{AgentEventKind, TokenScope};
use genesis_proto::v1;
use serde_json::json;
use sqlx::PgPool;

async fn js(settings: &PublisherSettings) -> anyhow::Result<jetstream::Context> {
    let js = publisher::connect(settings).await?;
    publisher::ensure_stream(&js, settings).await?;
    Ok(js)
}

async fn stream_messages(js: &jetstream::Context, name: &str) -> anyhow::Result<u64> {
    Ok(js.get_stream(name).await?.info().await?.state.messages)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_operator_message_is_on_jetstream_with_the_event_id_as_msg_id(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let h = start(config(&pool, NATS_URL)).await?;
    let mut agents = v1::agent_service_client::AgentServiceClient::new(h.channel().await?);
    let sent = agents
        .send_message(req(
            v1::SendMessageRequest {
                tenant_id: t.to_string(),
                instance_id: inst.id.to_string(),
                body: "hello".into(),
            },
            &op,
        ))
        .await?
        .into_inner();
    let settings = PublisherSettings::from(&h.config);
    let js = js(&settings).await?;
    let consumer: jetstream::consumer::PullConsumer = js
        .get_stream(&settings.stream)
        .await?
        .get_consumer(&settings.consumer)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut batch = consumer
        .fetch()
        .max_messages(10)
        .expires(Duration::from_secs(10))
        .messages()
        .await?;
    let msg = tokio::time::timeout(Duration::from_secs(10), batch.next())
        .await?
        .ok_or_else(|| anyhow::anyhow!("no message"))?
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let id = msg
        .headers
        .as_ref()
        .and_then(|h| h.get("Nats-Msg-Id"))
        .map(|v| v.as_str().to_owned());
    assert_eq!(id.as_deref(), Some(sent.event_id.as_str()));
    assert_eq!(
        msg.subject.as_str(),
        format!("{}.{t}", settings.subject_prefix)
    );
    let body: TickMessage = serde_json::from_slice(&msg.payload)?;
    assert_eq!(
        body.event_id.map(|e| e.to_string()),
        Some(sent.event_id.clone())
    );
    assert_eq!(body.replay_id, None);
    assert_eq!(body.instance_id, inst.id);
    assert_eq!(body.tenant_id, t);
    msg.ack().await.map_err(|e| anyhow::anyhow!("{e}"))?;
    // The mark commits right after the ack.
    eventually(Duration::from_secs(5), || async {
        let ev = store.events().list(t, inst.id).await?;
        Ok(ev.iter().all(|e| e.published_at.is_some()).then_some(()))
    })
    .await?;
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_forced_duplicate_publish_is_dropped_by_the_stream(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let ev = store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::OperatorMessage,
            &json!({}),
            None,
        )
        .await?
        .event;
    let settings = PublisherSettings::from(&config(&pool, NATS_URL));
    let js = js(&settings).await?;
    let first = publisher::publish_event(&js, &settings.subject_prefix, &ev)
        .await?
        .await?;
    let second = publisher::publish_event(&js, &settings.subject_prefix, &ev)
        .await?
        .await?;
    assert!(!first.duplicate);
    assert!(
        second.duplicate,
        "the same Nats-Msg-Id inside the window is dropped"
    );
    assert_eq!(stream_messages(&js, &settings.stream).await?, 1);
    // The harness stop() deletes the stream too; this covers a test that
    // never started one.
    let _ = js.delete_stream(&settings.stream).await;
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_publish_whose_mark_was_lost_is_republished_and_deduplicated(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::OperatorMessage,
            &json!({"n": 1}),
            None,
        )
        .await?;
    let settings = PublisherSettings::from(&config(&pool, NATS_URL));
    let js = js(&settings).await?;
    // Publish and lose the mark (the batch's transaction rolls back).
    let batch = store.events().begin_outbox_batch(10).await?;
    assert_eq!(batch.events.len(), 1);
    publisher::publish_event(&js, &settings.subject_prefix, &batch.events[0])
        .await?
        .await?;
    drop(batch);
    assert!(
        store.events().list(t, inst.id).await?[0]
            .published_at
            .is_none()
    );
    // The publisher runs again: it re-publishes, the stream drops the copy.
    let metrics = Metrics::default();
    assert_eq!(
        publisher::publish_batch(&store, &js, &settings, &metrics).await?,
        1
    );
    assert_eq!(
        stream_messages(&js, &settings.stream).await?,
        1,
        "exactly one message consumable"
    );
    assert!(
        store.events().list(t, inst.id).await?[0]
            .published_at
            .is_some()
    );
    assert_eq!(
        publisher::publish_batch(&store, &js, &settings, &metrics).await?,
        0
    );
    // The harness stop() deletes the stream too; this covers a test that
    // never started one.
    let _ = js.delete_stream(&settings.stream).await;
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn events_stay_unpublished_while_nats_is_unreachable_and_go_out_once_it_is(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let ev = store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::OperatorMessage,
            &json!({}),
            None,
        )
        .await?
        .event;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?;
    let dead_url = format!("nats://{}", closed.local_addr()?);
    drop(closed);
    let mut cfg = config(&pool, &dead_url);
    cfg.auto_bootstrap = false;
    let down = start(cfg.clone()).await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        store.events().list(t, inst.id).await?[0]
            .published_at
            .is_none()
    );
    let ready = reqwest_get(down.http, "/readyz").await?;
    assert!(ready.starts_with("503"), "{ready}");
    down.stop().await?;

    cfg.nats_url = NATS_URL.into();
    let up = start(cfg.clone()).await?;
    eventually(Duration::from_secs(10), || async {
        Ok(store.events().list(t, inst.id).await?[0]
            .published_at
            .map(|_| ()))
    })
    .await?;
    let settings = PublisherSettings::from(&cfg);
    let js = js(&settings).await?;
    assert_eq!(stream_messages(&js, &settings.stream).await?, 1);
    let last = js
        .get_stream(&settings.stream)
        .await?
        .get_last_raw_message_by_subject(&format!("{}.{t}", settings.subject_prefix))
        .await?;
    assert_eq!(
        last.headers
            .get("Nats-Msg-Id")
            .map(|v| v.as_str().to_owned()),
        Some(ev.id.to_string())
    );
    up.stop().await?;
    // The harness stop() deletes the stream too; this covers a test that
    // never started one.
    let _ = js.delete_stream(&settings.stream).await;
    Ok(())
}

/// A bare HTTP/1.1 GET returning "<status> <body>".
pub async fn reqwest_get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await?;
    let status = buf.split_whitespace().nth(1).unwrap_or("").to_owned();
    let body = buf.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Ok(format!("{status} {body}"))
}

/// A tenant with its SOA and a running control whose safety poll is far
/// longer than any test: only the visible_at timer (or a NOTIFY) publishes.
async fn timer_only_control(
    pool: &PgPool,
) -> anyhow::Result<(
    genesis_store::Store,
    uuid::Uuid,
    genesis_store::InstanceRow,
    Harness,
)> {
    let store = store(pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let mut cfg = config(pool, NATS_URL);
    cfg.auto_bootstrap = false;
    cfg.outbox_poll_ms = 600_000;
    let h = start(cfg).await?;
    Ok((store, t, inst, h))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_future_event_is_published_by_the_timer_at_its_visible_at_and_not_before(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (store, t, inst, h) = timer_only_control(&pool).await?;
    // Let the publisher start and drain (nothing is due yet).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let due = chrono::Utc::now() + chrono::Duration::milliseconds(2_500);
    let ev = store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::ExternalSignalReceived,
            &json!({"signal": "later"}),
            Some(due),
        )
        .await?
        .event;
    // Before visible_at: not published (published_at is never earlier than
    // visible_at, whatever the machine's pace).
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    if let Some(early) = published_at(&store, t, inst.id, ev.id).await? {
        assert!(
            early >= due,
            "published at {early}, before it was due at {due}"
        );
    }
    // Then published by the timer, at or after visible_at.
    let at = eventually(Duration::from_secs(10), || {
        published_at(&store, t, inst.id, ev.id)
    })
    .await?;
    assert!(at >= due, "published at {at}, due {due}");
    h.stop().await
}

/// `genesis_outbox_rounds_total` from the running control's `/metrics`.
async fn rounds(http: std::net::SocketAddr) -> anyhow::Result<u64> {
    let body = reqwest_get(http, "/metrics").await?;
    body.lines()
        .find_map(|l| l.strip_prefix("genesis_outbox_rounds_total "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no genesis_outbox_rounds_total in {body}"))
}

/// When the event `id` of `instance` was published; `None` while it is not.
async fn published_at(
    store: &genesis_store::Store,
    t: uuid::Uuid,
    instance: uuid::Uuid,
    id: uuid::Uuid,
) -> anyhow::Result<Option<chrono::DateTime<chrono::Utc>>> {
    Ok(store
        .events()
        .list(t, instance)
        .await?
        .into_iter()
        .find(|e| e.id == id)
        .and_then(|e| e.published_at))
}

/// Whether every event of `ids` is published (`Some(())`), for `eventually`.
async fn all_published(
    store: &genesis_store::Store,
    t: uuid::Uuid,
    instance: uuid::Uuid,
    ids: &[uuid::Uuid],
) -> anyhow::Result<Option<()>> {
    let events = store.events().list(t, instance).await?;
    Ok(ids
        .iter()
        .all(|id| {
            events
                .iter()
                .any(|e| e.id == *id && e.published_at.is_some())
        })
        .then_some(()))
}

/// An external signal to `instance`, due now.
async fn signal_now(
    store: &genesis_store::Store,
    t: uuid::Uuid,
    instance: uuid::Uuid,
    payload: serde_json::Value,
) -> anyhow::Result<genesis_store::EventRow> {
    Ok(store
        .events()
        .enqueue(
            t,
            instance,
            AgentEventKind::ExternalSignalReceived,
            &payload,
            None,
        )
        .await?
        .event)
}

/// `n` events due now, enqueued in ONE statement on `conn` (one commit, so
/// `n` notices at once); their ids.
async fn enqueue_in_one_statement(
    conn: impl sqlx::PgExecutor<'_>,
    t: uuid::Uuid,
    instance: uuid::Uuid,
    n: i64,
) -> anyhow::Result<Vec<uuid::Uuid>> {
    Ok(genesis_store::inspect::fixture_enqueue_signals_at_once(conn, t, instance, n).await?)
}

/// The rounds run once the publisher has settled: its first round (nothing
/// due) sets the timer on the safety poll, and nothing runs after it.
async fn settled_rounds(h: &Harness) -> anyhow::Result<u64> {
    let settled = eventually(Duration::from_secs(10), || async {
        Ok(Some(rounds(h.http).await?).filter(|n| *n >= 1))
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rounds(h.http).await?;
    assert!(before >= settled);
    Ok(before)
}

/// Every completed tick inserts its next heartbeat, due later: its notice
/// moves the publisher's timer and costs no outbox read, while an event due
/// now still gets a round at once.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn notices_of_later_events_run_no_round_and_a_due_event_still_does(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (store, t, inst, h) = timer_only_control(&pool).await?;
    let before = settled_rounds(&h).await?;
    for i in 0..20 {
        store
            .events()
            .enqueue(
                t,
                inst.id,
                AgentEventKind::ExternalSignalReceived,
                &json!({"later": i}),
                Some(chrono::Utc::now() + chrono::Duration::hours(1)),
            )
            .await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        rounds(h.http).await?,
        before,
        "twenty notices of events due in an hour ran outbox rounds"
    );
    let now = signal_now(&store, t, inst.id, json!({"now": true})).await?;
    let published = eventually(Duration::from_secs(10), || {
        published_at(&store, t, inst.id, now.id)
    })
    .await?;
    assert!(published >= now.visible_at);
    assert!(rounds(h.http).await? > before, "the due event ran a round");
    h.stop().await
}

/// One transaction that enqueues many events sends all their notices at
/// once. The round the first one starts publishes every event; the others
/// are read before it and run no round of their own (they ran one empty
/// round each before).
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn notices_of_one_commit_run_one_round_that_publishes_every_event(
    pool: PgPool,
) -> anyhow::Result<()> {
    const EVENTS: i64 = 40;
    let (store, t, inst, h) = timer_only_control(&pool).await?;
    let before = settled_rounds(&h).await?;
    // One statement, one commit, EVENTS notices.
    let ids = enqueue_in_one_statement(&pool, t, inst.id, EVENTS).await?;
    assert_eq!(ids.len() as i64, EVENTS);
    eventually(Duration::from_secs(10), || {
        all_published(&store, t, inst.id, &ids)
    })
    .await?;
    // Late notices would still be running rounds: give them the time.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ran = rounds(h.http).await? - before;
    assert!(
        (1..=3).contains(&ran),
        "{EVENTS} notices of one commit ran {ran} outbox rounds"
    );
    let settings = PublisherSettings::from(&h.config);
    assert_eq!(
        stream_messages(&js(&settings).await?, &settings.stream).await?,
        EVENTS as u64,
        "each event published once"
    );
    h.stop().await
}

/// Every LISTEN connection of the test's database: its LISTEN statement,
/// its port and the server's port.
async fn listen_connections(pool: &PgPool) -> anyhow::Result<Vec<(String, i32, i32)>> {
    Ok(genesis_store::inspect::listen_connections(pool).await?)
}

/// Control's one LISTEN connection, as (its port, the server's port), once
/// it listens on `channel`; no other connection of the database listens
/// on it.
async fn listen_connection(pool: &PgPool, channel: &str) -> anyhow::Result<(i32, i32)> {
    let listen = &format!("LISTEN \"{channel}\"");
    eventually(Duration::from_secs(10), move || async move {
        let ports: Vec<(i32, i32)> = listen_connections(pool)
            .await?
            .into_iter()
            .filter(|(q, _, _)| q.contains(listen.as_str()))
            .map(|(_, port, server)| (port, server))
            .collect();
        Ok((ports.len() == 1).then(|| ports[0]))
    })
    .await
}

/// Abort a connection's socket with `ss -K`, so no error message arrives
/// first; `false` (and a note) where this machine cannot.
fn cut((port, server_port): (i32, i32)) -> bool {
    let cut = std::process::Command::new("ss")
        .args(["-K", &format!("sport = :{port} and dport = :{server_port}")])
        .output();
    match cut {
        Ok(out) if out.status.success() => true,
        other => {
            eprintln!("skipped: `ss -K` cannot abort a socket here ({other:?})");
            false
        }
    }
}

/// PostgreSQL wakes every listening backend of a database on every NOTIFY,
/// whatever its channel, and every tick notifies twice: control follows all
/// four of its channels on one connection.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn control_follows_every_channel_on_one_listen_connection(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (_store, _t, _inst, h) = timer_only_control(&pool).await?;
    let channels = [
        "genesis_due",
        "genesis_tenants",
        "genesis_turns",
        "genesis_messages",
    ];
    let one = eventually(Duration::from_secs(10), || async {
        Ok(listen_connections(&pool)
            .await?
            .into_iter()
            .find(|(q, _, _)| {
                channels
                    .iter()
                    .all(|c| q.contains(&format!("LISTEN \"{c}\"")))
            }))
    })
    .await?;
    // Give any other listener the time to connect, then count them all.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let listening = listen_connections(&pool).await?.len();
    assert_eq!(
        listening, 1,
        "LISTEN connections of control (one is {one:?})"
    );
    h.stop().await
}

/// PostgreSQL drops the notices sent while a LISTEN connection is down. When
/// the connection breaks under the publisher (here its socket is aborted
/// with `ss -K`, so no error message arrives first), it listens again and
/// then runs a round: events committed in the gap go out at once, not at
/// the safety poll (ten minutes here).
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn events_committed_while_the_listener_is_down_are_published_without_the_poll(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (store, t, inst, h) = timer_only_control(&pool).await?;
    settled_rounds(&h).await?;
    let conn = listen_connection(&pool, "genesis_due").await?;
    // The events' transaction is open when the socket is cut and commits
    // straight after, before the publisher can listen again: their notices
    // go nowhere.
    let mut tx = pool.begin().await?;
    let ids = enqueue_in_one_statement(&mut *tx, t, inst.id, 5).await?;
    if !cut(conn) {
        tx.rollback().await?;
        return h.stop().await;
    }
    tx.commit().await?;
    eventually(Duration::from_secs(10), || {
        all_published(&store, t, inst.id, &ids)
    })
    .await?;
    // And it listens again: a later event goes out on its notice.
    let later = signal_now(&store, t, inst.id, json!({"after": true})).await?;
    eventually(Duration::from_secs(10), || {
        published_at(&store, t, inst.id, later.id)
    })
    .await?;
    h.stop().await
}

/// The same gap for the bootstrap: a tenant created with standing agents
/// while the LISTEN connection is down sends its notice nowhere. The
/// bootstrap scans every tenant when the connection listens again, so the
/// tenant gets its SOA without waiting for the rescan (an hour here).
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_created_while_the_listener_is_down_is_bootstrapped_without_the_rescan(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let mut cfg = config(&pool, NATS_URL);
    cfg.bootstrap_rescan_secs = 3600;
    cfg.standing_agents_idle_by_default = false;
    let h = start(cfg).await?;
    let conn = listen_connection(&pool, "genesis_tenants").await?;
    // The scan that follows the first LISTEN finds no tenant.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut tx = pool.begin().await?;
    let t = genesis_store::inspect::fixture_tenant_in(&mut tx, "in-the-gap", true).await?;
    if !cut(conn) {
        tx.rollback().await?;
        return h.stop().await;
    }
    tx.commit().await?;
    eventually(Duration::from_secs(10), || async {
        Ok(store
            .instances()
            .list(t, Some(genesis_core::AgentType::Soa))
            .await?
            .into_iter()
            .next())
    })
    .await?;
    h.stop().await
}

/// A replay written while no control ran (its notice reached no one) is
/// published when a control starts, on its tenant's subject with
/// `replay-<id>` as Nats-Msg-Id and a body naming the replay and no event,
/// and marked published once the stream acknowledged it.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_replay_asked_for_before_control_started_reaches_the_stream_once_it_starts(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let replay =
        genesis_store::inspect::fleet::fixture_unpublished_replay(&pool, t, inst.id).await?;
    let h = start(config(&pool, NATS_URL)).await?;
    let settings = PublisherSettings::from(&h.config);
    let js = js(&settings).await?;
    let consumer: jetstream::consumer::PullConsumer = js
        .get_stream(&settings.stream)
        .await?
        .get_consumer(&settings.consumer)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut found = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while found.is_none() && tokio::time::Instant::now() < deadline {
        let mut batch = consumer
            .fetch()
            .max_messages(20)
            .expires(Duration::from_secs(2))
            .messages()
            .await?;
        while let Some(msg) = batch.next().await {
            let msg = msg.map_err(|e| anyhow::anyhow!("{e}"))?;
            let body: TickMessage = serde_json::from_slice(&msg.payload)?;
            msg.ack().await.map_err(|e| anyhow::anyhow!("{e}"))?;
            if body.replay_id.is_some() {
                let id = msg
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("Nats-Msg-Id"))
                    .map(|v| v.as_str().to_owned());
                found = Some((body, id, msg.subject.to_string()));
            }
        }
    }
    let (body, id, subject) =
        found.ok_or_else(|| anyhow::anyhow!("the replay never reached the stream"))?;
    assert_eq!(body.replay_id, Some(replay));
    assert_eq!(body.event_id, None);
    assert_eq!((body.tenant_id, body.instance_id), (t, inst.id));
    assert_eq!(id, Some(format!("replay-{replay}")));
    assert_eq!(subject, format!("{}.{t}", settings.subject_prefix));
    eventually(Duration::from_secs(5), || async {
        Ok(store
            .replays()
            .get(t, replay)
            .await?
            .row
            .published_at
            .map(|_| ()))
    })
    .await?;
    h.stop().await
}
