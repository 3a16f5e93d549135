//! The bins' one answer to SIGTERM and SIGINT (DESIGN §11 graceful
//! shutdown): the first signal cancels the token the service drains on
//! (stop taking work, finish or hand back, exit); a second exits at once
//! with status 130. Owns only the signals: must never do the draining
//! itself, and must be called inside the bin's Tokio runtime.

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// A token cancelled by the first SIGTERM or SIGINT; a second one ends the
/// process. The handlers are installed before this returns, so a signal
/// sent right after is never missed. A handler that cannot be installed is
/// logged and that signal is not listened for (the other still is).
pub fn cancel_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let mut listeners = Listeners::install();
    let trigger = token.clone();
    tokio::spawn(async move {
        listeners.next().await;
        tracing::info!("shutdown signal received; stopping");
        trigger.cancel();
        listeners.next().await;
        tracing::warn!("second signal; exiting at once");
        std::process::exit(130);
    });
    token
}

/// The two signal streams, each absent when its handler failed.
struct Listeners {
    term: Option<Signal>,
    int: Option<Signal>,
}

impl Listeners {
    fn install() -> Self {
        let listen = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(signal = name, error = %e, "cannot listen for the signal");
                None
            }
        };
        Self {
            term: listen(SignalKind::terminate(), "SIGTERM"),
            int: listen(SignalKind::interrupt(), "SIGINT"),
        }
    }

    /// The next SIGTERM or SIGINT (never, when neither is listened for).
    async fn next(&mut self) {
        async fn recv(s: &mut Option<Signal>) {
            match s {
                Some(s) => {
                    if s.recv().await.is_none() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = recv(&mut self.term) => {}
            _ = recv(&mut self.int) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn the_first_sigterm_cancels_the_token_and_nothing_else_does() {
        let token = cancel_on_signal();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!token.is_cancelled(), "cancelled before any signal");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::timeout(Duration::from_secs(10), token.cancelled())
            .await
            .expect("SIGTERM did not cancel the token");
    }
}
