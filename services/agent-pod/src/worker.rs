//! The worker: binds to the durable JetStream pull consumer control created,
//! fetches tick messages in batches under a concurrency semaphore, and per
//! message claims the tick, runs it with lease renewal, completes it and only
//! then acks (a replay's message goes to [`crate::replay`] instead); plus graceful shutdown (stop pulling, finish in-flight ticks
//! under a deadline, else abandon them un-acked for redelivery) and the
//! library entry point [`run`].
//!
//! This module must never ack a message whose tick was claimed but not
//! completed (except when the supervisor says the lease is lost at
//! completion), never create or change the stream or consumer (control owns
//! them), and never open a database connection.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::PullConsumer};
use genesis_core::Backoff;
use genesis_llm::{FallbackInvoker, ProviderFactory};
use genesis_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use uuid::Uuid;

use crate::config::PodConfig;
use crate::error::PodError;
use crate::fairness::{TenantSlots, tenant_busy_delay};
use crate::invoker::{CredentialSource, Invoker};
use crate::metrics::PodMetrics;
use crate::model::ClaimedTick;
use crate::planning::{PodContext, run_tick};
use crate::pull::Puller;
use crate::supervisor::{Supervisor, TickIds};

/// The body of a tick message (docs/internals.md "NATS").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickMessage {
    /// The instance's tenant.
    pub tenant_id: Uuid,
    /// The instance to tick.
    pub instance_id: Uuid,
    /// The event the outbox published (a hint for the claim).
    #[serde(default)]
    pub event_id: Option<Uuid>,
    /// Set on a replay's message instead of an event: the pod runs that
    /// replay ([`crate::replay`]), not a tick of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_id: Option<Uuid>,
}

impl TickMessage {
    /// Parse a message body; anything but the documented JSON object is a
    /// typed error naming the problem.
    pub fn parse(body: &[u8]) -> Result<Self, PodError> {
        serde_json::from_slice(body).map_err(|e| PodError::InvalidMessage(e.to_string()))
    }
}

/// What to do with a JetStream message once its tick is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Done (completed, nothing due, not active, or lease lost at completion).
    Ack,
    /// Redeliver after the delay (lease held elsewhere, transient failure,
    /// lease lost mid-tick).
    Nak(Duration),
    /// Never redeliver (a malformed message, a request the supervisor refuses).
    Term,
    /// Shutdown deadline passed during the claim or mid-tick: neither
    /// complete nor ack; the message is redelivered after its ack wait.
    Abandon,
}

/// Delays and intervals of the per-message protocol.
#[derive(Debug, Clone, Copy)]
pub struct WorkerSettings {
    /// NAK delay for `LeaseHeld`.
    pub lease_held_delay: Duration,
    /// NAK delay after a transient failure or a lost lease.
    pub retry_delay: Duration,
    /// Lease renewal interval (a third of the TTL).
    pub renew_interval: Duration,
    /// NAK delay for a message whose tenant holds its share of the pod, on
    /// its first delivery (it grows with each redelivery).
    pub tenant_busy_delay: Duration,
}

impl WorkerSettings {
    /// The settings `config` asks for.
    pub fn from_config(config: &PodConfig) -> Self {
        WorkerSettings {
            lease_held_delay: Duration::from_millis(config.lease_held_nak_ms),
            retry_delay: Duration::from_millis(config.retry_nak_ms),
            renew_interval: config.renew_interval(),
            tenant_busy_delay: Duration::from_millis(config.tenant_busy_nak_ms),
        }
    }
}

async fn renew_loop(
    supervisor: Supervisor,
    ids: TickIds,
    interval: Duration,
    lost: CancellationToken,
) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    loop {
        ticker.tick().await;
        match supervisor
            .renew_lease(pb::RenewLeaseRequest {
                session_id: ids.session_id.clone(),
                instance_id: ids.instance_id.clone(),
                tenant_id: ids.tenant_id.clone(),
            })
            .await
        {
            Ok(_) => tracing::debug!("lease renewed"),
            Err(e) if e.is_lease_lost() => {
                tracing::warn!(error = %e, "lease lost on renewal; aborting the tick");
                lost.cancel();
                return;
            }
            Err(e) => tracing::warn!(error = %e, "lease renewal failed; retrying next interval"),
        }
    }
}

/// Handle one tick message end to end: claim, run with lease renewal,
/// complete; the answer says how to settle the JetStream message. `abandon`
/// is cancelled when the shutdown deadline passes.
pub async fn process_message(
    ctx: &PodContext,
    settings: &WorkerSettings,
    message: &TickMessage,
    abandon: &CancellationToken,
) -> Disposition {
    // The claim races the shutdown deadline as the tick does: a supervisor
    // that does not answer must not hold the pod past it. A claim granted
    // after it was given up leaves a lease that lapses at its TTL, as an
    // abandoned tick's does.
    let claim = tokio::select! {
        c = ctx.supervisor.claim_tick(pb::ClaimTickRequest {
            instance_id: message.instance_id.to_string(),
            tenant_id: message.tenant_id.to_string(),
            event_id: message.event_id.map(|e| e.to_string()),
        }) => c,
        _ = abandon.cancelled() => {
            tracing::warn!("shutdown deadline passed during the claim; abandoning it un-acked");
            return Disposition::Abandon;
        }
    };
    let claim = match claim {
        Ok(c) => c,
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "claim failed transiently; NAK");
            ctx.metrics.failure();
            return Disposition::Nak(settings.retry_delay);
        }
        Err(e) => {
            tracing::error!(error = %e, "claim refused; terminating the message");
            ctx.metrics.failure();
            return Disposition::Term;
        }
    };
    let wire = match claim.result {
        Some(pb::claim_tick_response::Result::LeaseHeld(_)) => {
            tracing::info!("lease held by another session; NAK");
            return Disposition::Nak(settings.lease_held_delay);
        }
        Some(pb::claim_tick_response::Result::NothingDue(_)) => {
            tracing::debug!("nothing due; ack");
            return Disposition::Ack;
        }
        Some(pb::claim_tick_response::Result::NotActive(n)) => {
            tracing::info!(status = %n.status, "instance not active; ack");
            return Disposition::Ack;
        }
        Some(pb::claim_tick_response::Result::Bundle(b)) => b,
        None => {
            tracing::error!("claim answer carries no result; NAK");
            ctx.metrics.failure();
            return Disposition::Nak(settings.retry_delay);
        }
    };
    // The one conversion of the claimed bundle: past here the tick is
    // domain-typed. A malformed bundle is a protocol error like an empty
    // answer: nothing is completed, the lease lapses and the event is
    // redelivered (and dead-lettered once it has used its attempts).
    let tick = match ClaimedTick::try_from(wire) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "claim answered a malformed tick bundle; NAK");
            ctx.metrics.failure();
            return Disposition::Nak(settings.retry_delay);
        }
    };
    let ids = TickIds {
        session_id: tick.session_id.to_string(),
        instance_id: message.instance_id.to_string(),
        tenant_id: message.tenant_id.to_string(),
    };
    tracing::Span::current().record("session_id", ids.session_id.as_str());
    let lost = CancellationToken::new();
    // Renew at a third of what the granted lease has left: the supervisor's
    // TTL, not this pod's setting, decides when the lease lapses.
    let remaining = tick
        .lease_expires_at
        .and_then(|at| (at - chrono::Utc::now()).to_std().ok());
    let renewer = tokio::spawn(renew_loop(
        ctx.supervisor.clone(),
        ids.clone(),
        genesis_core::lease::renew_interval(settings.renew_interval, remaining),
        lost.clone(),
    ));
    let outcome = tokio::select! {
        r = run_tick(ctx, &ids, tick) => Some(r),
        _ = lost.cancelled() => None,
        _ = abandon.cancelled() => {
            renewer.abort();
            tracing::warn!("shutdown deadline passed mid-tick; abandoning it un-acked");
            return Disposition::Abandon;
        }
    };
    renewer.abort();
    match outcome {
        None => {
            ctx.metrics.lease_lost();
            Disposition::Nak(settings.retry_delay)
        }
        Some(Ok(result)) => {
            tracing::info!(
                completion = result.completion.as_str_name(),
                decision = %result.response.decision_kind,
                phase = %result.response.phase,
                halted = result.response.halted,
                "tick completed"
            );
            Disposition::Ack
        }
        Some(Err(e)) if e.is_lease_lost() => {
            ctx.metrics.lease_lost();
            if matches!(
                e,
                PodError::LeaseLost {
                    rpc: "CompleteTick",
                    ..
                }
            ) {
                tracing::warn!(error = %e, "lease lost at completion; nothing written, ack");
                Disposition::Ack
            } else {
                tracing::warn!(error = %e, "lease lost mid-tick; NAK for redelivery");
                Disposition::Nak(settings.retry_delay)
            }
        }
        Some(Err(e)) if e.is_transient() => {
            ctx.metrics.failure();
            tracing::warn!(error = %e, "tick interrupted by a transient failure; NAK");
            Disposition::Nak(settings.retry_delay)
        }
        Some(Err(e)) => {
            ctx.metrics.failure();
            tracing::error!(error = %e, "tick failed; NAK (the lease expires, the event stays unconsumed)");
            Disposition::Nak(settings.retry_delay)
        }
    }
}

async fn settle(
    ctx: PodContext,
    settings: WorkerSettings,
    message: jetstream::Message,
    abandon: CancellationToken,
    _permit: OwnedSemaphorePermit,
    slots: Arc<TenantSlots>,
) {
    let disposition = match TickMessage::parse(&message.payload) {
        Ok(tick) => 'tick: {
            let Some(_slot) = slots.try_acquire(tick.tenant_id) else {
                // Handed back before any claim: no attempt spent, no lease.
                tracing::debug!(tenant_id = %tick.tenant_id, cap = slots.cap(), "tenant holds its share of this pod; NAK");
                ctx.metrics.tenant_deferral();
                let delivered = message.info().map_or(1, |i| i.delivered);
                break 'tick Disposition::Nak(tenant_busy_delay(
                    settings.tenant_busy_delay,
                    delivered,
                ));
            };
            if let Some(replay_id) = tick.replay_id {
                let span = tracing::info_span!(
                    "replay",
                    tenant_id = %tick.tenant_id,
                    instance_id = %tick.instance_id,
                    replay_id = %replay_id,
                );
                break 'tick crate::replay::process_replay(
                    &ctx,
                    &settings,
                    tick.tenant_id,
                    replay_id,
                )
                .instrument(span)
                .await;
            }
            let span = tracing::info_span!(
                "tick",
                tenant_id = %tick.tenant_id,
                instance_id = %tick.instance_id,
                event_id = tick.event_id.map(|e| e.to_string()).unwrap_or_default(),
                session_id = tracing::field::Empty,
            );
            process_message(&ctx, &settings, &tick, &abandon)
                .instrument(span)
                .await
        }
        Err(e) => {
            tracing::error!(error = %e, subject = %message.subject, "malformed tick message; terminating it");
            Disposition::Term
        }
    };
    let result = match disposition {
        Disposition::Ack => message.ack().await,
        Disposition::Nak(delay) => message.ack_with(AckKind::Nak(Some(delay))).await,
        Disposition::Term => message.ack_with(AckKind::Term).await,
        Disposition::Abandon => Ok(()),
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, ?disposition, "settling the message failed; it will be redelivered");
    }
}

/// The collaborators `run` builds from the configuration; tests substitute
/// the provider factory (e.g. a counting scripted provider) and credentials.
#[derive(Clone)]
pub struct PodDeps {
    /// Builds the LLM client per couple.
    pub provider_factory: Arc<dyn ProviderFactory>,
    /// Provider credentials by name.
    pub credentials: Arc<dyn CredentialSource>,
    /// The counters `/metrics` renders.
    pub metrics: Arc<PodMetrics>,
}

impl PodDeps {
    /// Production collaborators: HTTP providers (with `ANTHROPIC_BASE_URL`,
    /// `OPENAI_BASE_URL` and the `--backend-url` routes, checked here so a
    /// bad URL stops the pod at startup), the platform's provider keys (the
    /// `GENESIS_LLM_KEY_*` variables, the key directory and the well-known
    /// variables of this process; a bad declaration stops the pod at
    /// startup), fresh counters.
    pub fn from_config(config: &PodConfig) -> Result<Self, PodError> {
        let factory = config.llm_provider_factory()?;
        let keys = genesis_llm::ProviderKeys::from_process_env(config.llm_key_dir.as_deref())
            .map_err(|e| PodError::Config(e.to_string()))?;
        for ignored in keys.ignored() {
            tracing::warn!(entry = %ignored.entry, reason = %ignored.reason, "provider keys: a key-directory entry is not a key and is never used");
        }
        tracing::info!(keys = ?keys.set().names().collect::<Vec<_>>(), "provider keys a preset may name");
        Ok(PodDeps {
            provider_factory: Arc::new(factory),
            credentials: Arc::new(keys),
            metrics: Arc::new(PodMetrics::default()),
        })
    }
}

async fn sleep_or_cancel(delay: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => false,
        _ = tokio::time::sleep(delay) => true,
    }
}

async fn connect_nats(
    url: &str,
    nats: &genesis_net::NatsArgs,
    shutdown: &CancellationToken,
) -> Result<Option<async_nats::Client>, genesis_net::NatsError> {
    let mut backoff = Backoff::reconnect();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            // The error names the URL redacted (it may carry a password).
            r = nats.connect(url, crate::SERVICE_NAME, |o| o) => match r {
                Ok(c) => return Ok(Some(c)),
                // A refusal may pass (the server restarting); a bad setting
                // or file never does.
                Err(e @ genesis_net::NatsError::Connect { .. }) => {
                    tracing::warn!(error = %e, "NATS connect failed; retrying");
                }
                Err(e) => return Err(e),
            }
        }
        if !sleep_or_cancel(backoff.next_delay(), shutdown).await {
            return Ok(None);
        }
    }
}

/// Bind to the existing durable consumer, retrying with backoff until
/// control has created the stream and consumer (or shutdown).
async fn bind_consumer(
    js: &jetstream::Context,
    config: &PodConfig,
    shutdown: &CancellationToken,
) -> Option<PullConsumer> {
    let mut backoff = Backoff::reconnect();
    loop {
        match js.get_stream(&config.stream).await {
            Ok(stream) => match stream.get_consumer(&config.consumer).await {
                Ok(consumer) => return Some(consumer),
                Err(e) => {
                    tracing::warn!(error = %e, consumer = %config.consumer, "durable consumer not there yet; retrying")
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, stream = %config.stream, "stream not there yet; retrying")
            }
        }
        if !sleep_or_cancel(backoff.next_delay(), shutdown).await {
            return None;
        }
    }
}

/// Run the pod with production collaborators until `shutdown` is cancelled.
pub async fn run(config: PodConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let deps = PodDeps::from_config(&config)?;
    run_with(config, deps, shutdown).await
}

/// Run the pod with the given collaborators: HTTP endpoints, NATS, the pull
/// loop; on `shutdown` stop pulling, let in-flight ticks finish within the
/// shutdown deadline, abandon the rest, and return.
pub async fn run_with(
    config: PodConfig,
    deps: PodDeps,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    config.validate()?;
    let token = config.agent_token.clone().unwrap_or_default();
    let tls = config
        .supervisor_tls()
        .map_err(|e| PodError::Config(e.to_string()))?;
    let supervisor = Supervisor::connect_lazy_with(&config.supervisor_url, &token, &tls)?;
    let invoker = Invoker::new(
        FallbackInvoker::new(deps.provider_factory.clone())
            .with_max_retry_wait(config.llm_max_retry_wait())
            .with_retry_policy(config.llm_retry_policy()),
        deps.credentials.clone(),
    );
    let ctx = PodContext {
        supervisor: supervisor.clone(),
        invoker,
        metrics: deps.metrics.clone(),
        tool_schemas: Default::default(),
    };
    let settings = WorkerSettings::from_config(&config);

    let nats_cell: Arc<OnceLock<async_nats::Client>> = Arc::new(OnceLock::new());
    let http_stop = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind(config.http_addr)
        .await
        .map_err(|e| PodError::Config(format!("GENESIS_HTTP_ADDR {}: {e}", config.http_addr)))?;
    tracing::info!(addr = %listener.local_addr()?, "http endpoints listening");
    let app = crate::http::router(crate::http::HttpState {
        nats: nats_cell.clone(),
        supervisor: supervisor.clone(),
        metrics: deps.metrics.clone(),
    });
    let http_task = {
        let stop = http_stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        })
    };

    let result = pull_loop(&config, &ctx, settings, &nats_cell, &shutdown).await;
    http_stop.cancel();
    match http_task.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "http server ended with an error"),
        Err(e) => tracing::warn!(error = %e, "http server task failed"),
    }
    result
}

/// How long a fetch waits for messages when none are pending.
const FETCH_EXPIRES: Duration = Duration::from_secs(2);

/// The longest pause between fetches that keep coming back empty at once.
/// The server answers a fetch at once, with nothing, while messages are
/// pending that other waiting fetches are owed (408 "Requests Pending"), for
/// instance while the consumer's ack-pending limit holds them back. Fetching
/// again at once every time spun a core for as long as that lasted
/// (43 s of CPU in a 60 s idle window, across four pods); pausing up to
/// 50 ms still cost four pods 0.82 s in such a window.
/// A longer pause delays no message: such an answer means another fetch is
/// waiting at the server, and what becomes deliverable goes to it first.
const EMPTY_FETCH_PAUSE_MAX: Duration = Duration::from_secs(1);

/// How long a run of fetches answered at once with nothing goes on before
/// the loop pauses between them. Under load such answers come in short
/// runs, and the next fetch soon finds messages for the pod's free slots:
/// pausing from the second answer on left slots idle and cost 10 % of the
/// ticks at two to four pods, and pausing after 50 ms of a run still 6 %.
/// A run this long means the messages are held back,
/// not on their way; it is spent once per run, not once per pause.
const EMPTY_FETCH_SPIN: Duration = Duration::from_millis(500);

/// The run of fetches answered at once with nothing, and the pause it
/// earns before the next fetch: none while the run has taken less than
/// [`EMPTY_FETCH_SPIN`], then a pause that doubles from 1 ms up to
/// [`EMPTY_FETCH_PAUSE_MAX`]. A fetch that delivered, or that waited for
/// its expiry (nothing pending), ends the run.
#[derive(Debug)]
struct EmptyFetches {
    /// Time the run's fetches have taken.
    spent: Duration,
    /// The run's pauses so far.
    pauses: Backoff,
}

impl Default for EmptyFetches {
    fn default() -> Self {
        Self {
            spent: Duration::ZERO,
            pauses: Backoff::new(Duration::from_millis(1), EMPTY_FETCH_PAUSE_MAX),
        }
    }
}

impl EmptyFetches {
    fn after(&mut self, delivered: usize, took: Duration) -> Option<Duration> {
        if delivered > 0 || took >= FETCH_EXPIRES / 2 {
            *self = Self::default();
            return None;
        }
        self.spent = self.spent.saturating_add(took);
        if self.spent < EMPTY_FETCH_SPIN {
            return None;
        }
        Some(self.pauses.next_delay())
    }
}

async fn pull_loop(
    config: &PodConfig,
    ctx: &PodContext,
    settings: WorkerSettings,
    nats_cell: &Arc<OnceLock<async_nats::Client>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let Some(client) = connect_nats(&config.nats_url, &config.nats, shutdown).await? else {
        return Ok(());
    };
    let _ = nats_cell.set(client.clone());
    let js = jetstream::new(client);
    let Some(consumer) = bind_consumer(&js, config, shutdown).await else {
        return Ok(());
    };
    let mut puller = tokio::select! {
        _ = shutdown.cancelled() => return Ok(()),
        p = Puller::new(js.clone(), consumer) => {
            p.map_err(|e| anyhow::anyhow!("subscribing the pull inbox: {e}"))?
        }
    };
    tracing::info!(stream = %config.stream, consumer = %config.consumer, concurrency = config.concurrency, "bound to the durable consumer; pulling");

    let semaphore = Arc::new(Semaphore::new(config.concurrency));
    let slots = TenantSlots::new(config.tenant_cap());
    let tracker = TaskTracker::new();
    let abandon = CancellationToken::new();
    let mut empty_fetches = EmptyFetches::default();
    'pull: loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = semaphore.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let mut permits = vec![first];
        while let Ok(p) = semaphore.clone().try_acquire_owned() {
            permits.push(p);
        }
        let asked = std::time::Instant::now();
        let mut delivered = 0usize;
        let batch = tokio::select! {
            _ = shutdown.cancelled() => break,
            b = puller.request(permits.len(), FETCH_EXPIRES) => b,
        };
        let mut batch = match batch {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "fetch failed; retrying");
                if !sleep_or_cancel(Duration::from_secs(1), shutdown).await {
                    break;
                }
                continue;
            }
        };
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => break 'pull,
                n = batch.next() => n,
            };
            match next {
                None => break,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "batch ended with an error");
                    break;
                }
                Some(Ok(message)) => {
                    delivered += 1;
                    let Some(permit) = permits.pop() else {
                        // More messages than asked for: leave it un-acked
                        // for redelivery rather than exceed the concurrency.
                        tracing::warn!("batch returned more messages than requested");
                        continue;
                    };
                    tracker.spawn(settle(
                        ctx.clone(),
                        settings,
                        message,
                        abandon.clone(),
                        permit,
                        slots.clone(),
                    ));
                }
            }
        }
        if let Some(pause) = empty_fetches.after(delivered, asked.elapsed()) {
            permits.clear();
            if !sleep_or_cancel(pause, shutdown).await {
                break;
            }
        }
    }
    tracing::info!(
        in_flight = tracker.len(),
        "stopped pulling; finishing in-flight ticks"
    );
    tracker.close();
    let deadline = Duration::from_secs(config.shutdown_deadline_secs);
    if tokio::time::timeout(deadline, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            in_flight = tracker.len(),
            "shutdown deadline passed; abandoning in-flight ticks"
        );
        abandon.cancel();
        tracker.wait().await;
    }
    tracing::info!("worker stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_empty_answers_pauses_only_after_it_has_spun_for_a_while() {
        let at_once = Duration::from_millis(1);
        let spin = EMPTY_FETCH_SPIN.as_millis() as usize;
        let mut e = EmptyFetches::default();
        // Fetched again at once until the run has taken EMPTY_FETCH_SPIN.
        for n in 1..spin {
            assert_eq!(e.after(0, at_once), None, "answer {n}");
        }
        // Then pauses doubling from 1 ms to a second, and staying there.
        let pauses: Vec<u64> = (0..12)
            .map(|_| e.after(0, at_once).map_or(0, |d| d.as_millis() as u64))
            .collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000]);
        for _ in 0..100 {
            e.after(0, at_once);
        }
        assert_eq!(e.after(0, at_once), Some(EMPTY_FETCH_PAUSE_MAX));

        // A delivery ends the run: the spin allowance starts again.
        assert_eq!(e.after(3, at_once), None);
        assert_eq!(e.after(0, EMPTY_FETCH_SPIN / 2), None);
        assert_eq!(
            e.after(0, EMPTY_FETCH_SPIN / 2),
            Some(Duration::from_millis(1))
        );
        assert_eq!(e.after(0, at_once), Some(Duration::from_millis(2)));
        // So does a fetch that waited for its expiry: nothing was pending.
        assert_eq!(e.after(0, FETCH_EXPIRES), None);
        assert_eq!(e.after(0, at_once), None);
    }
}
