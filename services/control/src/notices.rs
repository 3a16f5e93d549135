//! Control's one LISTEN connection, shared by every loop that follows a
//! notification channel: the turn hub (`genesis_turns`, `genesis_messages`),
//! the outbox publisher (`genesis_due`) and the bootstrap
//! (`genesis_tenants`).
//!
//! PostgreSQL wakes every listening backend of a database on every NOTIFY,
//! whatever channel it names; the backend then reads the notice and drops
//! it when its connection does not listen on that channel. Every enqueue
//! and every turn notifies, so each LISTEN connection of the database costs
//! every tick's commits a backend wake-up. Control held
//! three, one per loop; it now holds this one.
//!
//! This module owns that connection: it listens on every channel, listens
//! again with backoff when the connection is lost, and hands each notice to
//! its consumer. A consumer that needs to know what it may have missed
//! (notices sent while the connection was down are lost for good) is told
//! [`Notice::Listening`] each time the connection listens, after its LISTEN
//! took effect, so a read of the table then covers the gap. Must never read
//! rows, and never wait for a consumer: a full queue drops the notice and
//! tells the consumer it missed one, which it answers by reading the table.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use genesis_core::Backoff;
use sqlx::postgres::PgListener;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio_util::sync::CancellationToken;

use crate::bootstrap::TENANTS_CHANNEL;
use crate::publisher::DUE_CHANNEL;
use crate::watch::{MESSAGES_CHANNEL, TURNS_CHANNEL, TurnHub, parse_notification};

/// How many `genesis_due` notices may wait for the publisher. One commit
/// sends one per event it enqueued; past this the publisher is told it
/// missed some and runs a round, which reads every due event anyway.
pub const DUE_QUEUE: usize = 4096;
/// How many `genesis_tenants` notices may wait for the bootstrap; past this
/// it rescans every tenant.
pub const TENANTS_QUEUE: usize = 1024;

/// What a consumer receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// One notice's payload, on the consumer's channel.
    Payload(String),
    /// The connection has just listened (at start, after a lost
    /// connection), or notices were dropped because the consumer fell
    /// behind. Either way notices may have been missed: read the table.
    Listening,
}

/// The sending half the router holds for one consumer.
struct Sink {
    tx: mpsc::Sender<Notice>,
    missed: Arc<AtomicBool>,
}

impl Sink {
    /// Queue `notice` without waiting. A full queue drops it and marks the
    /// stream as having missed one; a consumer that has ended is ignored.
    fn send(&self, notice: Notice) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(notice) {
            self.missed.store(true, Ordering::Release);
        }
    }
}

/// One consumer's notices, in the order the connection received them.
pub struct NoticeStream {
    rx: mpsc::Receiver<Notice>,
    missed: Arc<AtomicBool>,
}

fn stream(capacity: usize) -> (Sink, NoticeStream) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let missed = Arc::new(AtomicBool::new(false));
    (
        Sink {
            tx,
            missed: missed.clone(),
        },
        NoticeStream { rx, missed },
    )
}

impl NoticeStream {
    /// The next notice, waiting for it. A dropped notice reads as
    /// [`Notice::Listening`]. Once the router has stopped (shutdown) this
    /// waits forever, as a connection that never notifies again would: the
    /// consumers' own timers and shutdown token end their loops.
    pub async fn recv(&mut self) -> Notice {
        if self.missed.swap(false, Ordering::AcqRel) {
            return Notice::Listening;
        }
        match self.rx.recv().await {
            Some(notice) => notice,
            None => std::future::pending().await,
        }
    }

    /// Discard every notice already queued, without waiting, because the
    /// caller is about to read the table, which covers what they name.
    pub fn drain(&mut self) {
        self.drain_replay_notice("");
    }

    /// [`NoticeStream::drain`], saying whether any notice it discarded was
    /// `marker` (or a dropped one, which may have been): the publisher
    /// reads replays only when one was asked for.
    pub fn drain_replay_notice(&mut self, marker: &str) -> bool {
        let mut seen = self.missed.swap(false, Ordering::AcqRel);
        while let Ok(notice) = self.rx.try_recv() {
            seen |= match notice {
                Notice::Payload(p) => !marker.is_empty() && p == marker,
                Notice::Listening => true,
            };
        }
        seen
    }
}

/// The router: built at start, given the consumers' streams, then run.
pub struct Notices {
    hub: TurnHub,
    due: Option<Sink>,
    tenants: Option<Sink>,
}

impl Notices {
    /// A router that feeds `hub` with turns and messages.
    pub fn new(hub: TurnHub) -> Self {
        Notices {
            hub,
            due: None,
            tenants: None,
        }
    }

    /// The publisher's `genesis_due` notices (the router listens on the
    /// channel only once this is taken).
    pub fn due(&mut self) -> NoticeStream {
        let (sink, s) = stream(DUE_QUEUE);
        self.due = Some(sink);
        s
    }

    /// The bootstrap's `genesis_tenants` notices.
    pub fn tenants(&mut self) -> NoticeStream {
        let (sink, s) = stream(TENANTS_QUEUE);
        self.tenants = Some(sink);
        s
    }

    /// The channels the one connection listens on.
    pub fn channels(&self) -> Vec<&'static str> {
        let mut c = vec![TURNS_CHANNEL, MESSAGES_CHANNEL];
        if self.due.is_some() {
            c.push(DUE_CHANNEL);
        }
        if self.tenants.is_some() {
            c.push(TENANTS_CHANNEL);
        }
        c
    }

    /// The queue of the consumer that follows `channel`, when it has one
    /// (turns and messages go to the hub instead).
    fn sink(&self, channel: &str) -> Option<&Sink> {
        match channel {
            DUE_CHANNEL => self.due.as_ref(),
            TENANTS_CHANNEL => self.tenants.as_ref(),
            _ => None,
        }
    }

    /// Hand one notice to its consumer.
    fn dispatch(&self, channel: &str, payload: &str) {
        if let Some(s) = self.sink(channel) {
            s.send(Notice::Payload(payload.to_owned()));
        } else if let Some(ev) = parse_notification(channel, payload) {
            self.hub.publish(ev);
        }
    }

    /// Tell the consumers the connection listens (again).
    fn listening(&self) {
        for s in [&self.due, &self.tenants].into_iter().flatten() {
            s.send(Notice::Listening);
        }
    }

    /// The connection's loop, until `shutdown`: listen on every channel,
    /// tell the consumers, hand on notices, and on a lost connection listen
    /// again with backoff (200 ms doubling to 10 s).
    pub async fn run(self, pool: sqlx::PgPool, shutdown: CancellationToken) {
        let channels = self.channels();
        let mut backoff = Backoff::reconnect();
        while !shutdown.is_cancelled() {
            let connect = async {
                let mut l = PgListener::connect_with(&pool).await?;
                // A lost connection must end the inner loop (and be
                // answered with `Listening`), not be replaced silently.
                l.eager_reconnect(false);
                l.listen_all(channels.iter().copied()).await?;
                Ok::<_, sqlx::Error>(l)
            };
            let mut listener = tokio::select! {
                _ = shutdown.cancelled() => return,
                l = connect => match l {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!(error = %e, "notices: LISTEN failed; retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(backoff.next_delay()) => {}
                        }
                        continue;
                    }
                },
            };
            backoff.reset();
            self.listening();
            loop {
                let note = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    n = listener.try_recv() => n,
                };
                match note {
                    Ok(Some(n)) => self.dispatch(n.channel(), n.payload()),
                    Ok(None) => {
                        tracing::warn!("notices: LISTEN connection lost; listening again");
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "notices: LISTEN connection failed; listening again");
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::{HubEvent, HubKind};
    use std::time::Duration;
    use uuid::Uuid;

    #[test]
    fn the_connection_listens_only_on_the_channels_of_its_consumers() {
        let mut n = Notices::new(TurnHub::new(4));
        assert_eq!(n.channels(), vec![TURNS_CHANNEL, MESSAGES_CHANNEL]);
        let _due = n.due();
        let _tenants = n.tenants();
        assert_eq!(
            n.channels(),
            vec![
                TURNS_CHANNEL,
                MESSAGES_CHANNEL,
                DUE_CHANNEL,
                TENANTS_CHANNEL
            ]
        );
    }

    #[tokio::test]
    async fn each_notice_reaches_the_consumer_of_its_channel_only() {
        let hub = TurnHub::new(4);
        let mut turns = hub.subscribe();
        let mut n = Notices::new(hub);
        let mut due = n.due();
        let mut tenants = n.tenants();
        n.dispatch(DUE_CHANNEL, "d1");
        n.dispatch(TENANTS_CHANNEL, "t1");
        let (t, i, l) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        n.dispatch(
            TURNS_CHANNEL,
            &format!(r#"{{"tenant_id":"{t}","instance_id":"{i}","ledger_id":"{l}"}}"#),
        );
        n.dispatch("genesis_other", "x");
        assert_eq!(due.recv().await, Notice::Payload("d1".into()));
        assert_eq!(tenants.recv().await, Notice::Payload("t1".into()));
        assert_eq!(
            turns.recv().await.ok(),
            Some(HubEvent {
                tenant_id: t,
                instance_id: i,
                kind: HubKind::Turn { ledger_id: l }
            })
        );
        due.drain();
        assert!(
            tenants.rx.try_recv().is_err(),
            "no other notice for the bootstrap"
        );
    }

    #[tokio::test]
    async fn listening_is_told_to_every_consumer() {
        let mut n = Notices::new(TurnHub::new(4));
        let mut due = n.due();
        let mut tenants = n.tenants();
        n.listening();
        assert_eq!(due.recv().await, Notice::Listening);
        assert_eq!(tenants.recv().await, Notice::Listening);
    }

    #[tokio::test]
    async fn a_full_queue_drops_the_notice_and_the_consumer_is_told_it_missed_one() {
        let (sink, mut s) = stream(2);
        for p in ["a", "b", "c", "d"] {
            sink.send(Notice::Payload(p.into()));
        }
        // The missed notices come first: the consumer reads the table.
        assert_eq!(s.recv().await, Notice::Listening);
        assert_eq!(s.recv().await, Notice::Payload("a".into()));
        assert_eq!(s.recv().await, Notice::Payload("b".into()));
        // Told once.
        sink.send(Notice::Payload("e".into()));
        assert_eq!(s.recv().await, Notice::Payload("e".into()));
    }

    #[tokio::test]
    async fn drain_empties_the_queue_and_forgets_a_miss() {
        let (sink, mut s) = stream(1);
        sink.send(Notice::Payload("a".into()));
        sink.send(Notice::Payload("b".into()));
        s.drain();
        assert!(s.rx.try_recv().is_err(), "queue empty");
        assert!(
            !s.missed.load(Ordering::Acquire),
            "the miss is covered by the caller's read"
        );
    }

    #[tokio::test]
    async fn after_the_router_stops_recv_waits_and_never_answers() {
        let (sink, mut s) = stream(1);
        sink.send(Notice::Payload("a".into()));
        drop(sink);
        assert_eq!(
            s.recv().await,
            Notice::Payload("a".into()),
            "queued notices still arrive"
        );
        s.drain();
        // A stopped router once answered `None` here, and each consumer kept
        // a second arm for it; now nothing comes, whatever the wait.
        let waited = tokio::time::timeout(Duration::from_millis(200), s.recv()).await;
        assert!(
            waited.is_err(),
            "a stopped router answers nothing: {waited:?}"
        );
    }

    #[tokio::test]
    async fn a_consumer_that_ended_does_not_stop_the_others() {
        let mut n = Notices::new(TurnHub::new(4));
        drop(n.due());
        let mut tenants = n.tenants();
        n.dispatch(DUE_CHANNEL, "d");
        n.dispatch(TENANTS_CHANNEL, "t");
        assert_eq!(tenants.recv().await, Notice::Payload("t".into()));
    }
}
