//! The pod's pull requests on one inbox. The pull loop asks the durable
//! consumer for as many messages as it has free slots, waits for them, and
//! asks again; this module owns the inbox those requests are answered on and
//! reads each request's answer to its end.
//!
//! A fetch of the client library subscribes to a new inbox, sends its
//! request and unsubscribes when its answer ends: a SUB and an UNSUB for
//! every request, and under load a request goes out for about every tick.
//! Here the inbox is subscribed once per pod; the requests are the same (`no_wait`, the expiry), one at a time.
//!
//! This module must never have more than one request outstanding that it
//! is still reading, never ack, NAK or otherwise settle a message (the
//! worker does), and never create or change the stream or consumer.

use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::consumer::pull::BatchConfig;
use async_nats::jetstream::{self, Context};
use async_nats::{StatusCode, Subject, Subscriber};
use futures::StreamExt;
use tokio::time::Instant;

use crate::error::PodError;

/// How much longer than a request's expiry its answer is waited for before
/// the request is given up (the server's 408 was lost, say on a reconnect).
/// The client library's fetch waits the same.
const ANSWER_GRACE: Duration = Duration::from_secs(5);

/// The pod's one pull inbox on its durable consumer.
pub struct Puller {
    consumer: PullConsumer,
    context: Context,
    inbox: Subject,
    subscriber: Subscriber,
}

impl Puller {
    /// Subscribe the pod's pull inbox on `context`'s connection.
    pub async fn new(
        context: Context,
        consumer: PullConsumer,
    ) -> Result<Self, async_nats::SubscribeError> {
        let client = context.client();
        let inbox = Subject::from(client.new_inbox());
        let subscriber = client.subscribe(inbox.clone()).await?;
        Ok(Self {
            consumer,
            context,
            inbox,
            subscriber,
        })
    }

    /// Ask for up to `max` messages (at least one), answered at once with
    /// what is pending or, when nothing is, within `expires`. Read the
    /// answer with [`Answer::next`] until it returns `None`.
    pub async fn request(&mut self, max: usize, expires: Duration) -> Result<Answer<'_>, PodError> {
        let max = max.max(1);
        let config = BatchConfig {
            batch: max,
            expires: Some(expires),
            no_wait: true,
            ..Default::default()
        };
        self.consumer
            .request_batch(config, self.inbox.clone())
            .await
            .map_err(|e| PodError::Nats(format!("pull request not sent: {e}")))?;
        Ok(Answer {
            puller: self,
            pending: max,
            deadline: Instant::now() + expires + ANSWER_GRACE,
        })
    }
}

/// The answer to one request, read in order.
pub struct Answer<'a> {
    puller: &'a mut Puller,
    /// Messages asked for and not yet read; 0 once the answer has ended.
    pending: usize,
    /// When the answer is given up if the server has not ended it.
    deadline: Instant,
}

impl Answer<'_> {
    /// The answer's next message; `None` once it has ended (all messages
    /// asked for were read, the server said there are no more or the
    /// request expired, or its deadline passed). A message an earlier,
    /// given-up request still brings in is read as one of this answer's.
    pub async fn next(&mut self) -> Option<Result<jetstream::Message, PodError>> {
        while self.pending > 0 {
            let received =
                match tokio::time::timeout_at(self.deadline, self.puller.subscriber.next()).await {
                    Err(_elapsed) => {
                        tracing::debug!("pull request unanswered past its expiry; asking again");
                        self.pending = 0;
                        return None;
                    }
                    Ok(None) => {
                        self.pending = 0;
                        return Some(Err(PodError::Nats(
                            "the pull inbox's subscription ended".into(),
                        )));
                    }
                    Ok(Some(m)) => m,
                };
            match received.status.unwrap_or(StatusCode::OK) {
                StatusCode::OK => {
                    self.pending -= 1;
                    return Some(Ok(jetstream::Message {
                        message: received,
                        context: self.puller.context.clone(),
                    }));
                }
                StatusCode::IDLE_HEARTBEAT => continue,
                StatusCode::NOT_FOUND | StatusCode::TIMEOUT => {
                    self.pending = 0;
                    return None;
                }
                status => {
                    self.pending = 0;
                    // 409 and the like: the consumer deleted, its
                    // ack-pending limit, a leadership change.
                    return Some(Err(PodError::Nats(format!(
                        "pull request ended by the server: {status} {}",
                        received.description.unwrap_or_default()
                    ))));
                }
            }
        }
        None
    }
}
