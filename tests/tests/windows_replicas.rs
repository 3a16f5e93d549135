//! Windows holds shared by control's replicas, on the real bins: two
//! `genesis-control` processes on one database and NATS, in front of the
//! strict pool stand-in the lane's own tests use (it counts every lease and
//! release). First-use calls racing on both replicas lease one machine; a
//! verb on one replica uses the hold taken on the other; a killed and
//! restarted replica still uses it; a release on either clears it
//! everywhere (the other then answers not_held, and the next use leases
//! anew); an eviction seen on one replica drops the hold for both; the
//! coder's task settling on one replica releases the hold taken on the
//! other; and a lease past its expiry is held by neither.

#[path = "../../services/lanes/tests/pool/mod.rs"]
mod pool;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail, ensure};
use genesis_e2e::{
    Bearer, TestDatabase, bin_command, bounded_e2e, extract_token, free_port, log_dir,
    shared_nats_url, suffix,
};
use genesis_proto::v1;
use genesis_proto::v1::coding_task_service_client::CodingTaskServiceClient;
use genesis_proto::v1::windows_lane_service_client::WindowsLaneServiceClient;
use genesis_store::inspect::{self, fleet as checks};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

type Client = WindowsLaneServiceClient<InterceptedService<Channel, Bearer>>;

/// A control process, killed (SIGKILL: no graceful hand-over) when dropped.
struct Replica {
    child: Child,
    grpc: u16,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn control(
    logs: &Path,
    name: &str,
    env: &[(&str, String)],
    args: &[&str],
) -> anyhow::Result<Command> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("{name}.log")))?;
    let mut cmd = bin_command("genesis-control", args, env)?;
    cmd.stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    Ok(cmd)
}

async fn start_replica(
    logs: &Path,
    name: &str,
    common: &[(&str, String)],
) -> anyhow::Result<Replica> {
    let (grpc, http) = (free_port()?, free_port()?);
    let mut env = common.to_vec();
    env.extend([
        ("GENESIS_GRPC_ADDR", format!("127.0.0.1:{grpc}")),
        ("GENESIS_HTTP_ADDR", format!("127.0.0.1:{http}")),
    ]);
    let child = control(logs, name, &env, &["serve"])?
        .spawn()
        .context("spawn genesis-control")?;
    let mut replica = Replica { child, grpc };
    let url = format!("http://127.0.0.1:{http}/readyz");
    let http_client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = replica.child.try_wait()? {
            bail!("{name} exited before it was ready: {status} (see its log)");
        }
        let ready = http_client
            .get(&url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{name} not ready at {url} after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(replica)
}

async fn channel(replica: &Replica) -> anyhow::Result<Channel> {
    Ok(
        Channel::from_shared(format!("http://127.0.0.1:{}", replica.grpc))?
            .connect()
            .await?,
    )
}

async fn client(replica: &Replica, token: &str) -> anyhow::Result<Client> {
    Ok(WindowsLaneServiceClient::with_interceptor(
        channel(replica).await?,
        Bearer::new(token)?,
    ))
}

fn session(tenant: &str, coder: &str) -> Option<v1::WindowsSession> {
    Some(v1::WindowsSession {
        tenant_id: tenant.to_owned(),
        coder_id: coder.to_owned(),
    })
}

/// The windows a replica sees for `coder` (first use leases); an in-band
/// lane error is the test failing.
async fn windows(c: &mut Client, tenant: &str, coder: &str) -> anyhow::Result<Vec<i64>> {
    let r = c
        .windows(v1::WindowsRequest {
            session: session(tenant, coder),
        })
        .await?
        .into_inner();
    if let Some(e) = r.error {
        return Err(anyhow!("windows answered {}: {}", e.code, e.message));
    }
    Ok(r.windows.iter().map(|w| w.hwnd).collect())
}

async fn release(c: &mut Client, tenant: &str, coder: &str) -> anyhow::Result<(bool, String)> {
    let r = c
        .release(v1::ReleaseRequest {
            session: session(tenant, coder),
        })
        .await?
        .into_inner();
    if let Some(e) = r.error {
        return Err(anyhow!("release answered {}: {}", e.code, e.message));
    }
    Ok((r.released, r.outcome))
}

fn leases(pool: &pool::Shared) -> (usize, usize, usize) {
    let p = pool.lock().unwrap_or_else(|e| e.into_inner());
    (p.lease_requests, p.release_requests, p.leases.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_replicas_share_one_windows_hold_per_coder() -> anyhow::Result<()> {
    bounded_e2e(Duration::from_secs(240), async {
        let logs = log_dir("windows-replicas")?;
        let sfx = suffix();
        let database = TestDatabase::create(&sfx).await?;
        let db_url = database.url.clone();
        let registry_bucket = format!("reg_windows_{sfx}");
        let stream = format!("WINDOWS_REPLICAS_{}", sfx.to_uppercase());
        let checked = async {
            let (pool, pool_url) = pool::start().await;
            // Both first uses are in flight at the pool at once if either leases.
            pool.lock().unwrap_or_else(|e| e.into_inner()).lease_delay = Duration::from_millis(400);
            let common: Vec<(&str, String)> = vec![
                ("GENESIS_DATABASE_URL", db_url.clone()),
                ("GENESIS_NATS_URL", shared_nats_url()),
                ("GENESIS_STREAM", stream.clone()),
                ("GENESIS_SUBJECT_PREFIX", format!("e2e.windows.{sfx}")),
                ("GENESIS_CONSUMER", format!("pods-{sfx}")),
                ("GENESIS_REGISTRY_BUCKET", registry_bucket.clone()),
                ("GENESIS_AUTO_BOOTSTRAP", "false".to_owned()),
                ("GENESIS_DASHBOARD_ADDR", "off".to_owned()),
                ("GENESIS_LOG_FORMAT", "text".to_owned()),
                ("GENESIS_DEFAULT_PROVIDER", "scripted".to_owned()),
                ("GENESIS_WINDOWS_POOL_URL", pool_url.clone()),
                ("GENESIS_WINDOWS_POOL_TOKEN", pool::GOOD.to_owned()),
                ("RUST_LOG", "info".to_owned()),
            ];
            // The replicas log in as a role that owns nothing and may only
            // become the store's two roles, as a deployment's services do.
            let mut served = common.clone();
            served.retain(|(k, _)| *k != "GENESIS_DATABASE_URL");
            served.push(("GENESIS_DATABASE_URL", database.migrate_for_services()?));
            let minted = bin_command(
                "genesis-control",
                &[
                    "token",
                    "create",
                    "--scope",
                    "operator",
                    "--label",
                    "e2e-windows",
                ],
                &[("GENESIS_DATABASE_URL", &db_url)],
            )?
            .output()?;
            ensure!(minted.status.success(), "token create failed: {minted:?}");
            let token = extract_token(&String::from_utf8_lossy(&minted.stdout))?;
            let store =
                genesis_store::Store::connect(&db_url, genesis_store::StoreOptions::default())
                    .await?;
            let tenant = store.tenants().create("windows").await?.id;
            store
                .tenants()
                .set_feature_flag(tenant, "windows-pool", true)
                .await?;
            let t = tenant.to_string();

            let replica_a = start_replica(&logs, "control-a", &served).await?;
            let replica_b = start_replica(&logs, "control-b", &served).await?;
            let mut a = client(&replica_a, &token).await?;
            let mut b = client(&replica_b, &token).await?;

            // First uses racing on both replicas lease one machine.
            let (ra, rb) = tokio::join!(
                windows(&mut a, &t, "coder-1"),
                windows(&mut b, &t, "coder-1")
            );
            ra?;
            rb?;
            assert_eq!(leases(&pool), (1, 0, 1), "one lease for the race");

            // A verb on B uses the hold taken on A: the window A launched is B's.
            let launched = a
                .launch(v1::LaunchRequest {
                    session: session(&t, "coder-2"),
                    program: "notepad.exe".into(),
                    ..Default::default()
                })
                .await?
                .into_inner();
            ensure!(launched.error.is_none(), "launch: {:?}", launched.error);
            let hwnd = launched
                .hwnd
                .ok_or_else(|| anyhow!("the launch showed no window"))?;
            assert_eq!(windows(&mut b, &t, "coder-2").await?, vec![hwnd]);
            assert_eq!(leases(&pool), (2, 0, 2));

            // A replica killed and started again still uses the hold.
            drop(replica_a);
            let replica_a = start_replica(&logs, "control-a", &served).await?;
            let mut a = client(&replica_a, &token).await?;
            assert_eq!(windows(&mut a, &t, "coder-2").await?, vec![hwnd]);
            assert_eq!(windows(&mut a, &t, "coder-1").await?, Vec::<i64>::new());
            assert_eq!(leases(&pool), (2, 0, 2), "no lease after the restart");

            // A release on B clears it everywhere: A holds nothing, and
            // A's next use leases a fresh machine.
            assert_eq!(
                release(&mut b, &t, "coder-2").await?,
                (true, "released".to_owned())
            );
            assert_eq!(
                release(&mut a, &t, "coder-2").await?,
                (false, "not_held".to_owned())
            );
            assert_eq!(leases(&pool), (2, 1, 1));
            assert_eq!(windows(&mut a, &t, "coder-2").await?, Vec::<i64>::new());
            assert_eq!(leases(&pool), (3, 1, 2), "leased anew after the release");
            // And a release on A clears it for B.
            assert_eq!(
                release(&mut a, &t, "coder-2").await?,
                (true, "released".to_owned())
            );
            assert_eq!(
                release(&mut b, &t, "coder-2").await?,
                (false, "not_held".to_owned())
            );

            // The pool evicts coder-1's session: the replica that sees it
            // drops the hold for both, and the other's next use leases anew.
            {
                // Evicted with its lease: the pool forgets both.
                let mut p = pool.lock().unwrap_or_else(|e| e.into_inner());
                p.sessions.clear();
                p.leases.clear();
            }
            let evicted = b
                .windows(v1::WindowsRequest {
                    session: session(&t, "coder-1"),
                })
                .await?
                .into_inner()
                .error
                .ok_or_else(|| anyhow!("expected NOT_FOUND"))?;
            assert_eq!(evicted.code, "NOT_FOUND");
            assert!(evicted.session_evicted);
            let rows = checks::count_windows_holds_of(&admin_on(&db_url).await?, tenant, "coder-1")
                .await?;
            assert_eq!(rows, 0, "the evicted hold is gone from the table");
            let before = leases(&pool).0;
            windows(&mut a, &t, "coder-1").await?;
            assert_eq!(leases(&pool).0, before + 1);
            assert_eq!(
                release(&mut b, &t, "coder-1").await?,
                (true, "released".to_owned())
            );
            assert_eq!(leases(&pool).2, 0, "no machine left leased");

            // The task settling on B releases the hold its coder took on A.
            let task = store
                .coding_tasks()
                .create(
                    tenant,
                    genesis_store::coding_tasks::NewCodingTask {
                        title: "build".into(),
                        instructions: "build the installer".into(),
                        coder_id: Some("coder-3".into()),
                        model: "m".into(),
                        provider: "scripted".into(),
                        ..Default::default()
                    },
                )
                .await?;
            windows(&mut a, &t, "coder-3").await?;
            let released_before = leases(&pool).1;
            let mut tasks = CodingTaskServiceClient::with_interceptor(
                channel(&replica_b).await?,
                Bearer::new(&token)?,
            );
            tasks
                .complete_task(v1::CompleteTaskRequest {
                    tenant_id: t.clone(),
                    task_id: task.id.to_string(),
                    status: "completed".into(),
                    ..Default::default()
                })
                .await?;
            assert_eq!(leases(&pool).1, released_before + 1, "settled: released");
            assert_eq!(leases(&pool).2, 0);
            assert_eq!(
                release(&mut a, &t, "coder-3").await?,
                (false, "not_held".to_owned())
            );

            // A lease past its expiry is held nowhere: B leases afresh for
            // the coder whose lease A took, and never uses the dead session.
            pool.lock().unwrap_or_else(|e| e.into_inner()).lease_ttl = Some(Duration::from_secs(1));
            windows(&mut a, &t, "coder-4").await?;
            tokio::time::sleep(Duration::from_millis(1_300)).await;
            let leased_before = leases(&pool).0;
            windows(&mut b, &t, "coder-4").await?;
            assert_eq!(leases(&pool).0, leased_before + 1, "leased anew");
            tokio::time::sleep(Duration::from_millis(1_300)).await;
            assert_eq!(
                release(&mut a, &t, "coder-4").await?,
                (false, "expired".to_owned())
            );
            let rows = inspect::count_rows(&admin_on(&db_url).await?, "windows_holds").await?;
            assert_eq!(rows, 0, "no hold left in the table");

            drop((replica_a, replica_b));
            store.close().await;
            anyhow::Ok(())
        };
        let outcome = checked.await;
        if let Ok(client) = async_nats::connect(shared_nats_url()).await {
            let js = async_nats::jetstream::new(client);
            let _ = js.delete_stream(&stream).await;
            let _ = js.delete_key_value(&registry_bucket).await;
        }
        database.drop_database().await?;
        outcome
    })
    .await
}

/// A superuser pool on the test's database, for assertions on the table.
async fn admin_on(db_url: &str) -> anyhow::Result<sqlx::PgPool> {
    Ok(sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(db_url)
        .await?)
}
