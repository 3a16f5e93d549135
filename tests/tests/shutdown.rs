//! Graceful shutdown of the real binaries: SIGTERM makes an agent pod, the
//! supervisor and control each stop taking work and exit 0 within their
//! drain deadline; a pod stopped right after an operator message leaves the
//! message to be completed (by itself before exiting, or by the pod that
//! replaces it), once.

use std::time::Duration;

use anyhow::ensure;
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, bounded, wait_for};
use genesis_store::inspect::fleet as checks;

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_every_service_cleanly_and_loses_no_work() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), async {
        let mut opts = FleetOptions::new("shutdown-sigterm", 1);
        opts.lease_ttl_secs = 3;
        let mut fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("acme").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;

        // A message, then SIGTERM to the only pod while it may be ticking.
        fleet.send(&tenant, &soa, "are you still there?").await?;
        let status = fleet.terminate("agent-pod-0", Duration::from_secs(20)).await?;
        ensure!(status.success(), "agent pod exited with {status} on SIGTERM");
        fleet.start_pod(0).await?;
        fleet.wait_decision(&soa, 1, "MessageAcknowledged", T).await?;
        fleet.wait_quiescent(T).await?;
        // The stall report's view of the queue: every wake-up settled.
        let queue = wait_for("the consumer to settle", T, || async {
            let q = fleet.consumer_state().await?;
            Ok((q.contains("0 message(s) held") && q.contains(": 0 pending, 0 awaiting ack"))
                .then_some(q))
        })
        .await?;
        ensure!(queue.contains(&fleet.consumer), "{queue}");
        let s = fleet.check_invariants().await?;
        ensure!(s.dead_lettered == 0, "{} dead-lettered", s.dead_lettered);
        let acks = checks::count_turns_with_decision(&fleet.db, "MessageAcknowledged").await?;
        ensure!(acks == 1, "{acks} turns for the one message");

        for name in ["agent-pod-0", "supervisor", "control"] {
            let status = fleet.terminate(name, Duration::from_secs(20)).await?;
            ensure!(status.success(), "{name} exited with {status} on SIGTERM");
        }
        println!("shutdown: pod, supervisor and control exited 0 on SIGTERM; the message was acknowledged once");
        Ok(())
    })
    .await
}
