//! The outbox publisher (DESIGN §4): turns due, unpublished
//! `agent_event_queue` rows into JetStream messages on
//! `<prefix>.<tenant_id>` (`<prefix>.<pool>.<tenant_id>` for a tenant of a
//! dedicated pool, `GENESIS_POD_POOLS`) with `Nats-Msg-Id` = the event id (suffixed with its
//! publish epoch once re-armed, `EventRow::message_id`), awaits every ack
//! of a batch concurrently, then marks the acked events `published_at` in one
//! statement. Woken by `NOTIFY genesis_due` (read through control's one
//! LISTEN connection, [`crate::notices`]), by a timer set to the earliest
//! future `visible_at`, and by a safety poll; a round that published runs
//! again at once, and the notices already received when a round starts are
//! read with it (one round per burst of events, not one per notice). It
//! also creates or updates the stream and the agent pods' durable consumers
//! from configuration at start: the shared pool's, then one per dedicated
//! pool (genesis_core::pod_tenancy has the routing).
//!
//! A crash between publish and mark re-publishes; the stream's duplicate
//! window drops the copy. NATS down → it retries with backoff and loses
//! nothing (events stay unpublished). Must never mark an event whose ack did
//! not arrive, and never decide which events are due (the store does).

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use chrono::{DateTime, Utc};
use genesis_core::{Backoff, PodPools};
use genesis_store::{EventRow, Store};
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::ControlConfig;
use crate::error::ControlError;
use crate::notices::{Notice, NoticeStream};
use crate::state::AppState;

/// The channel every enqueue notifies.
pub const DUE_CHANNEL: &str = "genesis_due";
/// The stream's duplicate window.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// What the publisher needs from the configuration.
#[derive(Debug, Clone)]
pub struct PublisherSettings {
    pub nats_url: String,
    /// Credentials and TLS of the NATS connection.
    pub nats: genesis_net::NatsArgs,
    pub stream: String,
    pub subject_prefix: String,
    pub consumer: String,
    pub lease_ttl: Duration,
    pub max_attempts: u32,
    pub batch: i64,
    pub poll: Duration,
    pub ack_timeout: Duration,
    /// Consumer backlog at which publishing pauses (0: never).
    pub max_pending: u64,
    /// The dedicated pools (none: one shared pool).
    pub pools: PodPools,
}

impl PublisherSettings {
    /// The subject of `tenant`'s ticks (its pool's, or the shared one).
    pub fn subject(&self, tenant_id: Uuid) -> String {
        self.pools.subject(&self.subject_prefix, tenant_id)
    }

    /// Every durable consumer the pods bind to: the shared pool's first,
    /// then each dedicated pool's.
    pub fn consumer_names(&self) -> Vec<String> {
        std::iter::once(self.consumer.clone())
            .chain(
                self.pools
                    .pools()
                    .iter()
                    .map(|p| PodPools::pool_consumer(&self.consumer, p)),
            )
            .collect()
    }
}

impl From<&ControlConfig> for PublisherSettings {
    fn from(c: &ControlConfig) -> Self {
        PublisherSettings {
            nats_url: c.nats_url.clone(),
            nats: c.nats.clone(),
            stream: c.stream.clone(),
            subject_prefix: c.subject_prefix.clone(),
            consumer: c.consumer.clone(),
            lease_ttl: c.lease_ttl(),
            max_attempts: c.max_attempts,
            batch: c.outbox_batch,
            poll: Duration::from_millis(c.outbox_poll_ms),
            ack_timeout: Duration::from_millis(c.publish_ack_timeout_ms),
            max_pending: c.outbox_max_pending,
            pools: c.pod_pools.clone(),
        }
    }
}

/// The message body the agent pods read.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct TickMessage {
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    /// The event a tick runs on; absent on a replay's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<Uuid>,
    /// The replay a replay's message carries (genesis_core::replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_id: Option<Uuid>,
}

/// The `genesis_due` payload a new replay notifies with: the publisher's
/// next round then sends the unpublished replays too.
pub const REPLAY_NOTICE: &str = genesis_store::replays::REPLAY_NOTICE;

/// `<prefix>.<tenant_id>`: a shared-pool tenant's subject.
pub fn subject_for(prefix: &str, tenant_id: Uuid) -> String {
    format!("{prefix}.{tenant_id}")
}

/// The stream configuration (WorkQueue, file storage, `<prefix>.>`, 2 min
/// duplicate window).
pub fn stream_config(s: &PublisherSettings) -> stream::Config {
    stream::Config {
        name: s.stream.clone(),
        subjects: vec![format!("{}.>", s.subject_prefix)],
        retention: stream::RetentionPolicy::WorkQueue,
        storage: stream::StorageType::File,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    }
}

/// The shared pool's durable pull consumer, created fresh: explicit ack,
/// ack_wait = 2 × lease TTL, and no delivery cap. A message is only a
/// wake-up for its instance: every `LeaseHeld` NAK spends a delivery, so a
/// JetStream cap would silently drop wake-ups for events the database
/// still holds as due (nothing would ever claim them again). The bound on
/// retries is the event's own `attempts` counter, raised by every claim and
/// dead-lettered with an attention request past `max_attempts` (see
/// `genesis_claim_tick`).
pub fn consumer_config(s: &PublisherSettings) -> consumer::pull::Config {
    shared_consumer_config(s, None)
}

/// The shared pool's consumer, given the filter it has now (`None`: it
/// does not exist yet): `<prefix>.>` without pools, `<prefix>.*` with them
/// (see [`PodPools::shared_filter`]).
pub fn shared_consumer_config(
    s: &PublisherSettings,
    current_filter: Option<&str>,
) -> consumer::pull::Config {
    pull_config(
        s,
        s.consumer.clone(),
        s.pools.shared_filter(&s.subject_prefix, current_filter),
    )
}

/// Each dedicated pool's consumer, `<consumer>-<pool>` on
/// `<prefix>.<pool>.*`, configured as the shared one otherwise.
pub fn pool_consumer_configs(s: &PublisherSettings) -> Vec<consumer::pull::Config> {
    s.pools
        .pools()
        .iter()
        .map(|p| {
            pull_config(
                s,
                PodPools::pool_consumer(&s.consumer, p),
                PodPools::pool_filter(&s.subject_prefix, p),
            )
        })
        .collect()
}

fn pull_config(s: &PublisherSettings, name: String, filter: String) -> consumer::pull::Config {
    consumer::pull::Config {
        durable_name: Some(name),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: s.lease_ttl * 2,
        max_deliver: -1,
        filter_subject: filter,
        ..Default::default()
    }
}

/// Connect to NATS (failing fast when unreachable) and return a JetStream
/// context whose publish acks time out after `ack_timeout`.
pub async fn connect(s: &PublisherSettings) -> Result<jetstream::Context, ControlError> {
    // The URL may carry a password: the error holds it redacted.
    let client = s
        .nats
        .connect(&s.nats_url, crate::server::SERVICE_NAME, |o| {
            o.connection_timeout(Duration::from_secs(2))
        })
        .await
        .map_err(|e| ControlError::Nats(format!("connect: {e}")))?;
    let mut js = jetstream::new(client);
    js.set_timeout(s.ack_timeout);
    Ok(js)
}

/// Create or update the stream and the durable consumers, idempotently.
/// The shared consumer goes first: with pools its filter must have left
/// their subjects before their consumers can exist (the WorkQueue stream
/// refuses consumers whose filters overlap).
pub async fn ensure_stream(
    js: &jetstream::Context,
    s: &PublisherSettings,
) -> Result<(), ControlError> {
    js.create_or_update_stream(stream_config(s))
        .await
        .map_err(|e| ControlError::Nats(format!("stream {}: {e}", s.stream)))?;
    let stream = js
        .get_stream(&s.stream)
        .await
        .map_err(|e| ControlError::Nats(format!("stream {}: {e}", s.stream)))?;
    let current = stream
        .consumer_info(&s.consumer)
        .await
        .ok()
        .map(|info| info.config.filter_subject);
    upsert_consumer(&stream, shared_consumer_config(s, current.as_deref())).await?;
    for config in pool_consumer_configs(s) {
        upsert_consumer(&stream, config).await?;
    }
    Ok(())
}

async fn upsert_consumer(
    stream: &stream::Stream,
    config: consumer::pull::Config,
) -> Result<(), ControlError> {
    let name = config.durable_name.clone().unwrap_or_default();
    match stream.create_consumer(config.clone()).await {
        Ok(_) => Ok(()),
        Err(create_err) => stream
            .update_consumer(config)
            .await
            .map(|_| ())
            .map_err(|e| ControlError::Nats(format!("consumer {name}: {create_err}; update: {e}"))),
    }
}

/// Publish one event of a shared-pool tenant (`<prefix>.<tenant_id>`);
/// see [`publish_event_on`].
pub async fn publish_event(
    js: &jetstream::Context,
    prefix: &str,
    event: &EventRow,
) -> Result<jetstream::context::PublishAckFuture, ControlError> {
    publish_event_on(js, subject_for(prefix, event.tenant_id), event).await
}

/// Publish one event on `subject` (headers and body as the pods expect)
/// and return the pending ack.
pub async fn publish_event_on(
    js: &jetstream::Context,
    subject: String,
    event: &EventRow,
) -> Result<jetstream::context::PublishAckFuture, ControlError> {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        async_nats::header::NATS_MESSAGE_ID,
        event.message_id().as_str(),
    );
    let body = serde_json::to_vec(&TickMessage {
        tenant_id: event.tenant_id,
        instance_id: event.instance_id,
        event_id: Some(event.id),
        replay_id: None,
    })
    .map_err(|e| ControlError::Nats(format!("encode: {e}")))?;
    js.publish_with_headers(subject, headers, body.into())
        .await
        .map_err(|e| ControlError::Nats(format!("publish {}: {e}", event.id)))
}

/// One round: lock a batch of due events, publish them all, await every ack
/// concurrently, mark the acked ones in one statement. Returns how many
/// events the batch held. Any failed publish or ack is an error after the
/// acked ones are marked (the rest stay unpublished for the next round).
pub async fn publish_batch(
    store: &Store,
    js: &jetstream::Context,
    s: &PublisherSettings,
    metrics: &crate::metrics::Metrics,
) -> Result<usize, ControlError> {
    let batch = store.events().begin_outbox_batch(s.batch).await?;
    let n = batch.events.len();
    if n == 0 {
        return Ok(0);
    }
    let mut pending = Vec::with_capacity(n);
    let mut first_error: Option<ControlError> = None;
    for event in &batch.events {
        match publish_event_on(js, s.subject(event.tenant_id), event).await {
            Ok(ack) => pending.push((event.id, ack)),
            Err(e) => {
                first_error.get_or_insert(e);
                break;
            }
        }
    }
    let acks = futures::future::join_all(
        pending
            .into_iter()
            .map(|(id, ack)| async move { (id, tokio::time::timeout(s.ack_timeout, ack).await) }),
    )
    .await;
    let mut acked = Vec::with_capacity(acks.len());
    for (id, result) in acks {
        match result {
            Ok(Ok(_)) => acked.push(id),
            Ok(Err(e)) => {
                first_error.get_or_insert(ControlError::Nats(format!("ack {id}: {e}")));
            }
            Err(_) => {
                first_error.get_or_insert(ControlError::Nats(format!("ack {id}: timed out")));
            }
        }
    }
    let failed = n - acked.len();
    let marked = batch.mark_published(&acked).await?;
    metrics.add_published(marked);
    if failed > 0 {
        metrics.add_publish_errors(failed as u64);
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(n),
    }
}

/// Publish the replays asked for and not yet on the stream (each with
/// `Nats-Msg-Id` = `replay-<id>`, so a re-publish is dropped as a copy),
/// await their acks and mark the acked ones; returns how many were marked.
/// Any failed publish or ack is an error after the acked ones are marked.
pub async fn publish_replays(
    store: &Store,
    js: &jetstream::Context,
    s: &PublisherSettings,
) -> Result<usize, ControlError> {
    let replays = store.replays().unpublished(Duration::ZERO, s.batch).await?;
    let mut acked = Vec::with_capacity(replays.len());
    let mut first_error = None;
    for r in &replays {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(
            async_nats::header::NATS_MESSAGE_ID,
            format!("replay-{}", r.id).as_str(),
        );
        let body = serde_json::to_vec(&TickMessage {
            tenant_id: r.tenant_id,
            instance_id: r.instance_id,
            event_id: None,
            replay_id: Some(r.id),
        })
        .map_err(|e| ControlError::Nats(format!("encode: {e}")))?;
        let sent = js
            .publish_with_headers(s.subject(r.tenant_id), headers, body.into())
            .await
            .map_err(|e| ControlError::Nats(format!("publish replay {}: {e}", r.id)));
        let ack = match sent {
            Ok(ack) => tokio::time::timeout(s.ack_timeout, ack).await,
            Err(e) => {
                first_error = Some(e);
                break;
            }
        };
        match ack {
            Ok(Ok(_)) => acked.push(r.id),
            Ok(Err(e)) => {
                first_error = Some(ControlError::Nats(format!("ack replay {}: {e}", r.id)));
                break;
            }
            Err(_) => {
                first_error = Some(ControlError::Nats(format!(
                    "ack replay {}: timed out",
                    r.id
                )));
                break;
            }
        }
    }
    store.replays().mark_published(&acked).await?;
    match first_error {
        Some(e) => Err(e),
        None => Ok(acked.len()),
    }
}

/// How long until the event a `genesis_due` notice names becomes due, when
/// that is in the future; `None` when it is due now, or when the payload
/// does not say (then a round runs, as for any wake-up).
pub fn due_in(payload: &str, now: DateTime<Utc>) -> Option<Duration> {
    #[derive(serde::Deserialize)]
    struct Notice {
        visible_at: DateTime<Utc>,
    }
    let notice: Notice = serde_json::from_str(payload).ok()?;
    (notice.visible_at - now)
        .to_std()
        .ok()
        .filter(|d| !d.is_zero())
}

/// How long to sleep before the next round: until the earliest future
/// `visible_at`, capped by the safety poll; also updates the lag gauge.
async fn next_wait(state: &AppState, s: &PublisherSettings) -> Duration {
    match state.store.events().next_unpublished_visible_at().await {
        Ok(Some(at)) => {
            let now = Utc::now();
            if at <= now {
                state
                    .metrics
                    .set_outbox_lag_ms((now - at).num_milliseconds());
                // Due but not in this round (locked by another publisher, or
                // failing): retry soon, not at once.
                Duration::from_millis(200).min(s.poll)
            } else {
                state.metrics.set_outbox_lag_ms(0);
                (at - now).to_std().unwrap_or(s.poll).min(s.poll)
            }
        }
        Ok(None) => {
            state.metrics.set_outbox_lag_ms(0);
            s.poll
        }
        Err(e) => {
            tracing::warn!(error = %e, "outbox: cannot read the next visible_at");
            s.poll
        }
    }
}

/// How often a held publisher looks at the consumer's backlog again.
const HOLD_RECHECK: Duration = Duration::from_millis(500);

/// Back-pressure bookkeeping: an upper bound on the consumer's undelivered
/// backlog (the last reading plus everything published since; the pods only
/// ever lower the real figure), so the consumer is asked only when the bound
/// reaches the limit — normally never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    /// `None` until the first reading (after a (re)connect).
    bound: Option<u64>,
    max: u64,
}

impl Backlog {
    /// Bookkeeping for `max` (0: unbounded, never asks).
    pub fn new(max: u64) -> Self {
        Backlog { bound: None, max }
    }
    /// Whether the consumer must be asked before the next batch.
    pub fn needs_reading(&self) -> bool {
        self.max > 0 && self.bound.is_none_or(|b| b >= self.max)
    }
    /// Record a reading of the consumer's undelivered count.
    pub fn read(&mut self, pending: u64) {
        self.bound = Some(pending);
    }
    /// Whether publishing must pause (a reading at or over the limit).
    pub fn held(&self) -> bool {
        self.max > 0 && self.bound.is_some_and(|b| b >= self.max)
    }
    /// Account `n` published messages.
    pub fn published(&mut self, n: u64) {
        if let Some(b) = self.bound.as_mut() {
            *b = b.saturating_add(n);
        }
    }
}

/// The messages the consumers hold: undelivered (`num_pending`, what KEDA
/// scales on) plus delivered and not yet acknowledged (`num_ack_pending`,
/// which includes messages NAKed with a delay), summed over the shared and
/// every dedicated pool's consumer. On the WorkQueue stream that is every
/// message stored, so holding at the limit bounds the stream itself;
/// counting the undelivered alone let NAK-delayed messages pile up past it.
async fn consumer_pending(
    js: &jetstream::Context,
    s: &PublisherSettings,
) -> Result<u64, ControlError> {
    let mut total: u64 = 0;
    for name in s.consumer_names() {
        // Binding the consumer is itself a CONSUMER.INFO request; its answer
        // is the reading (asking `info()` again would be a second round trip).
        let consumer: consumer::PullConsumer = js
            .get_consumer_from_stream(&name, &s.stream)
            .await
            .map_err(|e| ControlError::Nats(format!("consumer {name}: {e}")))?;
        let info = consumer.cached_info();
        total = total
            .saturating_add(info.num_pending)
            .saturating_add(u64::try_from(info.num_ack_pending).unwrap_or(0));
    }
    Ok(total)
}

/// The publisher loop, until `shutdown` (checked between batches, so the
/// in-flight batch finishes).
/// `notices` are the `genesis_due` notices of control's LISTEN connection;
/// while none arrive (the connection is down, or its router has stopped)
/// the publisher runs on its timer and safety poll alone.
pub async fn run_publisher(
    state: AppState,
    s: PublisherSettings,
    mut notices: NoticeStream,
    shutdown: CancellationToken,
) {
    // Retries of a failed connect, stream setup, round or publish.
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    'connect: while !shutdown.is_cancelled() {
        let js = match connect(&s).await {
            Ok(js) => match ensure_stream(&js, &s).await {
                Ok(()) => js,
                Err(e) => {
                    tracing::warn!(error = %e, "outbox: stream setup failed; retrying");
                    state.set_nats_ready(false);
                    sleep_or_cancel(&shutdown, backoff.next_delay()).await;
                    continue;
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "outbox: NATS unreachable; retrying");
                state.set_nats_ready(false);
                sleep_or_cancel(&shutdown, backoff.next_delay()).await;
                continue;
            }
        };
        state.set_nats_ready(true);
        tracing::info!(stream = %s.stream, consumer = %s.consumer, "outbox: publishing");
        let mut backlog = Backlog::new(s.max_pending);
        // Replays are read when one was asked for (its notice), on each
        // timer round and after a (re)connect: never on the rounds events
        // alone wake, so the tick's outbox does no extra read.
        let mut replays_due = true;
        loop {
            if shutdown.is_cancelled() {
                break 'connect;
            }
            if backlog.needs_reading() {
                match consumer_pending(&js, &s).await {
                    Ok(pending) => {
                        backlog.read(pending);
                        state.metrics.set_consumer_pending(pending);
                    }
                    // Fail open: an unreadable backlog never stops delivery.
                    Err(e) => {
                        tracing::warn!(error = %e, "outbox: consumer backlog unreadable; publishing")
                    }
                }
                if backlog.held() {
                    state.metrics.add_held();
                    tracing::debug!(
                        max_pending = s.max_pending,
                        "outbox: consumer backlog at its limit; holding"
                    );
                    sleep_or_cancel(&shutdown, HOLD_RECHECK).await;
                    continue;
                }
            }
            // The notices already received name events this round reads:
            // a transaction that enqueues n events sends n notices at once,
            // and read one at a time they ran n rounds, n − 1 of them empty.
            replays_due |= notices.drain_replay_notice(REPLAY_NOTICE);
            state.metrics.add_round();
            if replays_due {
                match publish_replays(&state.store, &js, &s).await {
                    Ok(_) => replays_due = false,
                    Err(e) => {
                        tracing::warn!(error = %e, "outbox: replays not published; retrying next round")
                    }
                }
            }
            match publish_batch(&state.store, &js, &s, &state.metrics).await {
                Ok(n) => {
                    backlog.published(n as u64);
                    backoff.reset();
                    // Rounds run back to back until one finds nothing: an
                    // event committed while a round ran is picked up at
                    // once, not when its notice arrives (on a busy machine
                    // that hop waits for two processes to be scheduled).
                    if n > 0 {
                        continue;
                    }
                }
                Err(ControlError::Store(e)) => {
                    tracing::warn!(error = %e, "outbox: store failure; retrying");
                    sleep_or_cancel(&shutdown, backoff.next_delay()).await;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "outbox: publish failed; reconnecting");
                    state.set_nats_ready(false);
                    sleep_or_cancel(&shutdown, backoff.next_delay()).await;
                    continue 'connect;
                }
            }
            let mut deadline = tokio::time::Instant::now() + next_wait(&state, &s).await;
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break 'connect,
                    _ = tokio::time::sleep_until(deadline) => {
                        replays_due = true;
                        break;
                    }
                    notice = notices.recv() => match notice {
                        Notice::Payload(p) if p == REPLAY_NOTICE => {
                            replays_due = true;
                            break;
                        }
                        // An event inserted to be due later (a tick's next
                        // heartbeat, on every completion) needs no outbox
                        // read now: the timer moves up to it instead.
                        Notice::Payload(p) => match due_in(&p, Utc::now()) {
                            Some(later) => {
                                deadline = deadline.min(tokio::time::Instant::now() + later);
                            }
                            None => break,
                        },
                        // The connection listens again after a loss (the
                        // notices sent meanwhile are lost), or notices were
                        // dropped: a round reads what they named.
                        Notice::Listening => {
                            replays_due = true;
                            break;
                        }
                    },
                }
            }
        }
    }
    state.set_nats_ready(false);
}

async fn sleep_or_cancel(shutdown: &CancellationToken, d: Duration) {
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::sleep(d) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_of_a_later_event_moves_the_timer_and_anything_else_runs_a_round() {
        let now: DateTime<Utc> = "2026-12-03T12:00:00Z".parse().expect("a timestamp");
        // PostgreSQL's json_build_object rendering of a timestamptz.
        let later = r#"{"tenant_id":"t","instance_id":"i","event_id":"e","visible_at":"2026-12-03T12:00:30.25+00:00"}"#;
        assert_eq!(due_in(later, now), Some(Duration::from_millis(30_250)));
        let due = r#"{"visible_at":"2026-12-03T12:00:00+00:00"}"#;
        assert_eq!(due_in(due, now), None, "due now: a round");
        let past = r#"{"visible_at":"2026-12-03T11:59:59.5+00:00"}"#;
        assert_eq!(due_in(past, now), None, "overdue: a round");
        for unreadable in ["", "{}", "not json", r#"{"visible_at":"yesterday"}"#] {
            assert_eq!(due_in(unreadable, now), None, "{unreadable:?}: a round");
        }
    }

    fn settings() -> PublisherSettings {
        PublisherSettings::from(&ControlConfig::new("postgres://h/db", "nats://h:4222"))
    }

    #[test]
    fn the_backlog_is_read_only_when_its_bound_reaches_the_limit() {
        let mut b = Backlog::new(100);
        // Unknown after a (re)connect: read before publishing.
        assert!(b.needs_reading() && !b.held());
        b.read(40);
        assert!(!b.needs_reading() && !b.held());
        b.published(59);
        assert!(!b.needs_reading(), "bound 99 < 100");
        b.published(1);
        assert!(b.needs_reading(), "bound 100: ask the consumer");
        b.read(100);
        assert!(b.held(), "at the limit: hold");
        b.read(10);
        assert!(!b.held() && !b.needs_reading());
        // 0 is unbounded: never asks, never holds.
        let mut off = Backlog::new(0);
        off.published(u64::MAX);
        assert!(!off.needs_reading() && !off.held());
    }

    #[test]
    fn the_backlog_limit_comes_from_the_configuration() {
        assert_eq!(settings().max_pending, 100_000);
    }

    #[test]
    fn stream_and_consumer_follow_the_configuration() {
        let s = settings();
        let st = stream_config(&s);
        assert_eq!(st.subjects, vec!["genesis.ticks.>".to_owned()]);
        assert_eq!(st.retention, stream::RetentionPolicy::WorkQueue);
        assert_eq!(st.storage, stream::StorageType::File);
        assert_eq!(st.duplicate_window, Duration::from_secs(120));
        let c = consumer_config(&s);
        assert_eq!(c.durable_name.as_deref(), Some("agent-pods"));
        assert_eq!(c.ack_wait, Duration::from_secs(120));
        assert_eq!(c.max_deliver, -1);
        assert_eq!(c.ack_policy, consumer::AckPolicy::Explicit);
    }

    #[test]
    fn dedicated_pools_get_their_own_consumers_and_the_shared_one_leaves_their_subjects() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        let mut s = settings();
        // No pool: the shared consumer keeps the filter it always had.
        assert_eq!(consumer_config(&s).filter_subject, "genesis.ticks.>");
        assert!(pool_consumer_configs(&s).is_empty());
        assert_eq!(s.consumer_names(), ["agent-pods"]);
        assert_eq!(s.subject(a), format!("genesis.ticks.{a}"));

        s.pools = PodPools::parse(&format!("eu={a}")).expect("pools");
        assert_eq!(s.subject(a), format!("genesis.ticks.eu.{a}"));
        assert_eq!(s.subject(b), format!("genesis.ticks.{b}"));
        for current in [None, Some("genesis.ticks.>")] {
            let shared = shared_consumer_config(&s, current);
            assert_eq!(shared.durable_name.as_deref(), Some("agent-pods"));
            assert_eq!(shared.filter_subject, "genesis.ticks.*", "{current:?}");
        }
        let pools = pool_consumer_configs(&s);
        assert_eq!(pools.len(), 1);
        let eu = &pools[0];
        assert_eq!(eu.durable_name.as_deref(), Some("agent-pods-eu"));
        assert_eq!(eu.filter_subject, "genesis.ticks.eu.*");
        // Configured as the shared one otherwise.
        let shared = consumer_config(&s);
        assert_eq!(
            (eu.ack_policy, eu.ack_wait, eu.max_deliver),
            (shared.ack_policy, shared.ack_wait, shared.max_deliver)
        );
        assert_eq!(s.consumer_names(), ["agent-pods", "agent-pods-eu"]);
    }

    #[test]
    fn subjects_carry_the_tenant() {
        let t = Uuid::new_v4();
        assert_eq!(
            subject_for("genesis.ticks", t),
            format!("genesis.ticks.{t}")
        );
    }
}
