//! The end-to-end harness: starts the real `genesis-control`,
//! `genesis-supervisor` and `genesis-agent-pod` binaries (and, for the fault
//! and scaler tests, a private `nats-server`) as child processes against the
//! real PostgreSQL and NATS, each fleet on its own database, stream, subject
//! prefix, consumer and ports, with every child's output captured under
//! `target/e2e-logs/<test>/`.
//!
//! It must never touch anything it did not create: a fleet drops only its
//! own database and its own stream, and kills only its own children. It
//! must never fake a service: what a binary lacks, a test reports and skips.

pub mod certs;
pub mod netns;
pub mod reflection;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail, ensure};
use genesis_proto::v1 as pb;
use genesis_store::inspect::fleet as inspect;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use uuid::Uuid;

/// The server the fleets create their databases on (`DATABASE_URL`, else the
/// local trust-auth PostgreSQL).
pub fn base_database_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// The NATS the fleets use unless they bring their own (`GENESIS_E2E_NATS_URL`).
pub fn shared_nats_url() -> String {
    std::env::var("GENESIS_E2E_NATS_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "nats://127.0.0.1:4222".to_owned())
}

/// The login role the fleets' services use: not the owner of the fleet
/// database (the harness's own login, which migrates), and reaching no role
/// that bypasses row-level security, so every e2e test exercises RLS as a
/// deployment does. Roles are cluster-wide: one role serves every fleet on
/// the server, and `genesis-control migrate --service-role` gives it
/// `CONNECT` on each fleet's database.
pub const SERVICE_ROLE: &str = "genesis_e2e_service";

/// [`SERVICE_ROLE`]'s password, so the fleets also run against a server that
/// does not trust 127.0.0.1.
pub const SERVICE_ROLE_PASSWORD: &str = "genesis-e2e-service";

/// Create [`SERVICE_ROLE`] (`LOGIN`, nothing else) on the server of `admin`
/// unless it exists. Fleets start in parallel: one that loses the race to
/// create it sees `duplicate_object` or `unique_violation`, which is fine.
pub async fn ensure_service_role(admin: &PgPool) -> anyhow::Result<()> {
    inspect::fixture_login_role(admin, SERVICE_ROLE, SERVICE_ROLE_PASSWORD)
        .await
        .context("create the fleets' service login role")?;
    Ok(())
}

/// `url` logging in as `user` with `password` instead of its own login.
pub fn with_login(url: &str, user: &str, password: &str) -> anyhow::Result<String> {
    let mut u = reqwest::Url::parse(url).with_context(|| "parse the database URL")?;
    u.set_username(user)
        .and_then(|()| u.set_password(Some(password)))
        .map_err(|()| anyhow!("the database URL takes no login"))?;
    Ok(u.into())
}

/// The server address of database URL `url` (its host must be an IP
/// address; the port defaults to PostgreSQL's).
pub fn database_addr(url: &str) -> anyhow::Result<SocketAddr> {
    let u = reqwest::Url::parse(url).context("parse the database URL")?;
    let host = u
        .host_str()
        .ok_or_else(|| anyhow!("the database URL names no host"))?;
    let ip: std::net::IpAddr = host
        .trim_matches(|c| c == '[' || c == ']')
        .parse()
        .with_context(|| format!("the database host {host:?} is not an IP address"))?;
    Ok((ip, u.port().unwrap_or(5432)).into())
}

/// `url` reaching its server at `addr` instead.
pub fn with_database_addr(url: &str, addr: SocketAddr) -> anyhow::Result<String> {
    let mut u = reqwest::Url::parse(url).context("parse the database URL")?;
    u.set_ip_host(addr.ip())
        .map_err(|()| anyhow!("the database URL takes no host"))?;
    u.set_port(Some(addr.port()))
        .map_err(|()| anyhow!("the database URL takes no port"))?;
    Ok(u.into())
}

/// `url` with its database name replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (url, None),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let base = match head[scheme_end..].find('/') {
        Some(slash) => &head[..scheme_end + slash],
        None => head,
    };
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}

/// A database of one test's own, `genesis_e2e_<suffix>`, created on the
/// server of [`base_database_url`] by the harness's login, which owns it;
/// [`SERVICE_ROLE`] exists on that server before it does.
pub struct TestDatabase {
    /// A one-connection pool on the server's default database, as the
    /// harness's login.
    pub admin: PgPool,
    pub name: String,
    /// The URL of the database, as the harness's login.
    pub url: String,
}

impl TestDatabase {
    /// Create `genesis_e2e_<sfx>` (`sfx`: this test's [`suffix`]).
    pub async fn create(sfx: &str) -> anyhow::Result<Self> {
        let name = format!("genesis_e2e_{sfx}");
        let base = base_database_url();
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&base)
            .await
            .context("connect to the PostgreSQL server")?;
        ensure_service_role(&admin).await?;
        inspect::fixture_create_database(&admin, &name).await?;
        Ok(TestDatabase {
            admin,
            url: with_database(&base, &name),
            name,
        })
    }

    /// Migrate the database as its owner and let [`SERVICE_ROLE`] log in
    /// to it (`genesis-control migrate --service-role`), as a deployment's
    /// migrate step does; the URL the services then log in with.
    pub fn migrate_for_services(&self) -> anyhow::Result<String> {
        let migrated = bin_command(
            "genesis-control",
            &["migrate", "--service-role", SERVICE_ROLE],
            &[("GENESIS_DATABASE_URL", &self.url)],
        )?
        .output()?;
        ensure!(migrated.status.success(), "migrate failed: {migrated:?}");
        with_login(&self.url, SERVICE_ROLE, SERVICE_ROLE_PASSWORD)
    }

    /// Drop the database, closing whatever still connects to it.
    pub async fn drop_database(&self) -> anyhow::Result<()> {
        inspect::fixture_drop_database(&self.admin, &self.name).await?;
        Ok(())
    }
}

/// Where cargo put the workspace's binaries: `GENESIS_E2E_BIN_DIR` when set;
/// else the directory of the running executable when the service binaries sit
/// beside it (a release-built tool such as the benchmark starts release
/// services); else `<target>/debug`.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GENESIS_E2E_BIN_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
        && dir.join("genesis-control").is_file()
    {
        return dir;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("debug")
}

/// The path of one workspace binary, or why it cannot be used.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let p = bin_dir().join(name);
    if p.is_file() {
        Ok(p)
    } else {
        bail!(
            "binary {} not built (run `cargo build --workspace --bins` first)",
            p.display()
        )
    }
}

/// A command running the workspace binary `bin` with `args`, no stdin and an
/// environment of `PATH` and `env` alone, so nothing of the test's own
/// environment reaches it.
pub fn bin_command<A, K, V>(bin: &str, args: &[A], env: &[(K, V)]) -> anyhow::Result<Command>
where
    A: AsRef<std::ffi::OsStr>,
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new(binary(bin)?);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(args)
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Ok(cmd)
}

/// Whether all four binaries exist. Tests call this first and skip with a
/// message naming the missing one rather than failing obscurely. Under
/// `CI=true` a missing binary is a failure instead (a panic naming it): the
/// suite builds them first, so their absence there means a broken build
/// step, and every end-to-end test passing as "skipped" would hide it.
pub fn binaries_missing() -> Option<String> {
    match skip_or_fail(missing_binary(), std::env::var("CI").ok().as_deref()) {
        Ok(skip) => skip,
        Err(fail) => panic!("{fail}"),
    }
}

/// The first of the four service binaries that is not built, and how to
/// build it; for a caller that refuses to run without them either way.
pub fn missing_binary() -> Option<String> {
    [
        "genesis-control",
        "genesis-supervisor",
        "genesis-agent-pod",
        "genesisctl",
    ]
    .iter()
    .find_map(|b| binary(b).err().map(|e| e.to_string()))
}

/// `Ok(reason)` to skip (or `Ok(None)` to run), `Err` when CI requires
/// what is missing.
fn skip_or_fail(missing: Option<String>, ci: Option<&str>) -> Result<Option<String>, String> {
    match (missing, ci) {
        (Some(why), Some("true")) => Err(format!(
            "{why}; CI=true runs every end-to-end test, so a missing binary fails instead of skipping"
        )),
        (missing, _) => Ok(missing),
    }
}

/// A free TCP port on 127.0.0.1 for a service to bind later: checked free
/// by binding it, then released. It is drawn at random from below the
/// kernel's ephemeral range, because a port the kernel handed out for
/// `bind(0)` is also a candidate source port of every outgoing connection
/// (to PostgreSQL, to NATS) until the service binds it, and a service then
/// failed to start with "Address already in use". The test runner starts
/// each test in its own process, so a port is also reserved across
/// processes: a marker file created exclusively under the temp folder, left
/// in place for the test's life and recycled once it is an hour old.
pub fn free_port() -> anyhow::Result<u16> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    static EPHEMERAL_LOW: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    let ephemeral_low = *EPHEMERAL_LOW.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32768)
    });
    let (low, high) = (10_000u16, ephemeral_low.max(10_001));
    let markers = std::env::temp_dir().join("genesis-e2e-ports");
    std::fs::create_dir_all(&markers)?;
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..500 {
        let port = rand::random_range(low..high);
        if given.contains(&port) || !reserve_port(&markers.join(port.to_string())) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return Ok(port);
        }
    }
    bail!(
        "no free port in {low}..{high} after 500 tries (reservations in {})",
        markers.display()
    )
}

/// Reserve a port for this process by creating its marker file; a marker
/// older than an hour belongs to a run that is over and is taken over.
fn reserve_port(marker: &Path) -> bool {
    let create = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(marker)
            .is_ok()
    };
    if create() {
        return true;
    }
    let stale = std::fs::metadata(marker)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > Duration::from_secs(3600));
    stale && std::fs::remove_file(marker).is_ok() && create()
}

/// Send signal `name` (`TERM`, `STOP`, `CONT`, ...) to `pid`; a process
/// that is not there is an error.
pub fn signal(name: &str, pid: u32) -> anyhow::Result<()> {
    let sent = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()?;
    ensure!(sent.success(), "kill -{name} {pid} failed: {sent}");
    Ok(())
}

/// A short random lower-case hex suffix for names.
pub fn suffix() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// The directory a test's logs go to (created).
pub fn log_dir(test: &str) -> anyhow::Result<PathBuf> {
    let dir = bin_dir()
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("e2e-logs")
        .join(test);
    // Each run starts with empty logs; restarts within a run append.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}

fn log_file(dir: &Path, name: &str) -> anyhow::Result<(File, File)> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))?;
    let g = f.try_clone()?;
    Ok((f, g))
}

/// Poll `probe` every 100 ms until it yields `Some`, or fail after `timeout`
/// naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_err: Option<anyhow::Error> = None;
    loop {
        match probe().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_err = Some(e),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(match last_err {
                Some(e) => e.context(format!("timed out after {timeout:?} waiting for {what}")),
                None => anyhow!("timed out after {timeout:?} waiting for {what}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn http_ok(url: &str) -> bool {
    let client = reqwest::Client::new();
    matches!(
        client.get(url).timeout(Duration::from_secs(2)).send().await,
        Ok(r) if r.status().is_success()
    )
}

/// Attaches `authorization: Bearer <token>` to every admin call.
#[derive(Clone)]
pub struct Bearer(AsciiMetadataValue);

impl Bearer {
    /// The interceptor for `token` (refuses a token unfit for metadata).
    pub fn new(token: &str) -> anyhow::Result<Self> {
        Ok(Bearer(
            genesis_proto::auth::bearer_value(token).map_err(|e| anyhow!("{e}"))?,
        ))
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut()
            .insert(genesis_proto::auth::AUTHORIZATION, self.0.clone());
        Ok(req)
    }
}

/// A channel carrying the operator token.
pub type Authed = InterceptedService<Channel, Bearer>;

/// The admin gRPC clients of one control endpoint, with a bearer token.
#[derive(Clone)]
pub struct Admin {
    channel: Channel,
    bearer: Bearer,
}

impl Admin {
    /// Connect to `endpoint` (`http://host:port`) with `token`.
    pub async fn connect(endpoint: &str, token: &str) -> anyhow::Result<Self> {
        let channel = Channel::from_shared(endpoint.to_owned())?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(15))
            .connect()
            .await
            .with_context(|| format!("connect {endpoint}"))?;
        let bearer = Bearer::new(token)?;
        Ok(Admin { channel, bearer })
    }

    /// TenantService.
    pub fn tenants(&self) -> pb::tenant_service_client::TenantServiceClient<Authed> {
        pb::tenant_service_client::TenantServiceClient::with_interceptor(
            self.channel.clone(),
            self.bearer.clone(),
        )
    }
    /// AgentService.
    pub fn agents(&self) -> pb::agent_service_client::AgentServiceClient<Authed> {
        pb::agent_service_client::AgentServiceClient::with_interceptor(
            self.channel.clone(),
            self.bearer.clone(),
        )
    }
    /// DecisionService.
    pub fn decisions(&self) -> pb::decision_service_client::DecisionServiceClient<Authed> {
        pb::decision_service_client::DecisionServiceClient::with_interceptor(
            self.channel.clone(),
            self.bearer.clone(),
        )
    }
    /// ConfigService.
    pub fn config(&self) -> pb::config_service_client::ConfigServiceClient<Authed> {
        pb::config_service_client::ConfigServiceClient::with_interceptor(
            self.channel.clone(),
            self.bearer.clone(),
        )
    }
    /// TokenService.
    pub fn tokens(&self) -> pb::token_service_client::TokenServiceClient<Authed> {
        pb::token_service_client::TokenServiceClient::with_interceptor(
            self.channel.clone(),
            self.bearer.clone(),
        )
    }
    /// LlmService.
    pub fn llm(&self) -> pb::llm_service_client::LlmServiceClient<Authed> {
        pb::llm_service_client::LlmServiceClient::with_interceptor(
            self.channel.clone(),
            self.bearer.clone(),
        )
    }
    /// CoderService.
    pub fn coders(&self) -> pb::coder_service_client::CoderServiceClient<Authed> {
        pb::coder_service_client::CoderServiceClient::with_interceptor(
            self.channel.clone(),
            self.bearer.clone(),
        )
    }
    /// CodingTaskService.
    pub fn tasks(&self) -> pb::coding_task_service_client::CodingTaskServiceClient<Authed> {
        pb::coding_task_service_client::CodingTaskServiceClient::with_interceptor(
            self.channel.clone(),
            self.bearer.clone(),
        )
    }

    /// Create (or, with `id`, update) a preset of `tenant` with no fallback.
    pub async fn upsert_preset(
        &self,
        tenant: &str,
        id: Option<&str>,
        name: &str,
        primary: pb::PresetCouple,
        overlays: serde_json::Value,
    ) -> anyhow::Result<pb::Preset> {
        Ok(self
            .llm()
            .upsert_preset(pb::UpsertPresetRequest {
                tenant_id: tenant.to_owned(),
                preset: Some(pb::Preset {
                    id: id.unwrap_or_default().to_owned(),
                    tenant_id: tenant.to_owned(),
                    name: name.to_owned(),
                    primary: Some(primary),
                    overlays_json: overlays.to_string(),
                    ..Default::default()
                }),
            })
            .await?
            .into_inner())
    }
}

/// A private `nats-server` with JetStream, for tests that stop and start the
/// broker or read its monitoring endpoint.
pub struct NatsServer {
    /// Client port.
    pub port: u16,
    /// The address it listens on (`127.0.0.1` unless started with
    /// [`NatsServer::start_listening`]).
    listen: String,
    /// Monitoring (HTTP) port.
    pub monitor_port: u16,
    store: tempfile::TempDir,
    logs: PathBuf,
    child: Option<Child>,
}

impl NatsServer {
    /// Start one on free ports with a fresh store directory.
    pub async fn start(logs: &Path) -> anyhow::Result<Self> {
        Self::start_listening(logs, "127.0.0.1").await
    }

    /// [`NatsServer::start`] listening on `addr` (`0.0.0.0`: every
    /// address, so a child in a network namespace reaches it over the
    /// namespace's link).
    pub async fn start_listening(logs: &Path, addr: &str) -> anyhow::Result<Self> {
        let mut s = NatsServer {
            listen: addr.to_owned(),
            port: free_port()?,
            monitor_port: free_port()?,
            store: tempfile::tempdir()?,
            logs: logs.to_path_buf(),
            child: None,
        };
        s.resume().await?;
        Ok(s)
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:<monitor>`.
    pub fn monitor_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.monitor_port)
    }

    /// Kill the server (SIGKILL): NATS becomes unreachable.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same ports and store (JetStream state survives).
    pub async fn resume(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let (out, err) = log_file(&self.logs, "nats-server")?;
        let child = Command::new("nats-server")
            .args(["-a", &self.listen, "-p", &self.port.to_string()])
            .args(["-m", &self.monitor_port.to_string(), "-js", "-sd"])
            .arg(self.store.path())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .context("spawn nats-server (is it installed?)")?;
        self.child = Some(child);
        let url = format!("{}/healthz?js-enabled-only=true", self.monitor_url());
        wait_for("nats-server /healthz", Duration::from_secs(15), || {
            let url = url.clone();
            async move { Ok(http_ok(&url).await.then_some(())) }
        })
        .await
    }

    /// `GET /jsz?acc=$G&consumers=true&config=true`, parsed.
    pub async fn jsz(&self) -> anyhow::Result<serde_json::Value> {
        let url = format!(
            "{}/jsz?acc=$G&consumers=true&config=true",
            self.monitor_url()
        );
        Ok(reqwest::get(&url).await?.error_for_status()?.json().await?)
    }

    /// `num_pending` of `consumer` on `stream`, by the path KEDA reads:
    /// `account_details[].stream_detail[].consumer_detail[].num_pending`.
    pub async fn consumer_pending(
        &self,
        stream: &str,
        consumer: &str,
    ) -> anyhow::Result<Option<u64>> {
        let v = self.jsz().await?;
        Ok(consumer_pending_in(&v, stream, consumer))
    }
}

/// Find `num_pending` of `stream`/`consumer` in a `/jsz` answer.
pub fn consumer_pending_in(jsz: &serde_json::Value, stream: &str, consumer: &str) -> Option<u64> {
    let accounts = jsz.get("account_details")?.as_array()?;
    for acc in accounts {
        for s in acc.get("stream_detail")?.as_array()? {
            if s.get("name").and_then(|n| n.as_str()) != Some(stream) {
                continue;
            }
            for c in s.get("consumer_detail")?.as_array()? {
                if c.get("name").and_then(|n| n.as_str()) == Some(consumer) {
                    return c.get("num_pending").and_then(serde_json::Value::as_u64);
                }
            }
        }
    }
    None
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How to start a fleet.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Test name: the log directory under `target/e2e-logs/`.
    pub test: String,
    /// Agent pods to start.
    pub pods: usize,
    /// `GENESIS_DEFAULT_PROVIDER` of the supervisor (`scripted` offline).
    pub provider: String,
    /// `GENESIS_LEASE_TTL_SECS` of every service.
    pub lease_ttl_secs: u64,
    /// `GENESIS_MAX_ATTEMPTS`.
    pub max_attempts: u32,
    /// The NATS to use (a private server's URL), else the shared one.
    pub nats_url: Option<String>,
    /// Extra env for every child, applied last.
    pub extra_env: Vec<(String, String)>,
    /// Use the chart's default stream, subject prefix and consumer names
    /// (`GENESIS_TICKS`, `genesis.ticks`, `agent-pods`) instead of per-run
    /// ones. Only with a private `nats_url`: the shared server is shared.
    pub chart_default_names: bool,
    /// Env for one kind of child only: `(name prefix, key, value)`, the
    /// prefix `control`, `supervisor` or `agent-pod`; applied after all
    /// other env (the TLS tests give each service its own files).
    pub process_env: Vec<(String, String, String)>,
    /// Pods reach the supervisor at `https://` (its certificate given in
    /// `process_env`).
    pub supervisor_https: bool,
    /// The supervisor listens on every address, not loopback only, so a
    /// pod in a network namespace ([`netns::NetNs`]) reaches it over the
    /// namespace's link.
    pub supervisor_listen_any: bool,
    /// Control replicas (the chart's default is 2); 0 counts as 1. The
    /// first is `control`, the others `control-1`, … on their own ports;
    /// the harness talks to the first.
    pub controls: usize,
    /// Supervisor replicas (the chart's default is 2); 0 counts as 1. Pod
    /// `i` reaches supervisor `i mod supervisors` (`supervisor`,
    /// `supervisor-1`, …), as a Service spreads pods' connections.
    pub supervisors: usize,
}

impl FleetOptions {
    /// Scripted provider, `pods` pods, a 10 s lease.
    pub fn new(test: &str, pods: usize) -> Self {
        FleetOptions {
            test: test.to_owned(),
            pods,
            provider: "scripted".to_owned(),
            lease_ttl_secs: 10,
            max_attempts: 5,
            nats_url: None,
            extra_env: Vec::new(),
            chart_default_names: false,
            process_env: Vec::new(),
            supervisor_https: false,
            supervisor_listen_any: false,
            controls: 1,
            supervisors: 1,
        }
    }

    /// The `process_env` entries of the child named `name`.
    fn env_of(&self, name: &str) -> impl Iterator<Item = (String, String)> + '_ {
        let name = name.to_owned();
        self.process_env
            .iter()
            .filter(move |(prefix, _, _)| name.starts_with(prefix.as_str()))
            .map(|(_, k, v)| (k.clone(), v.clone()))
    }

    /// The scheme pods reach the supervisor with.
    fn supervisor_scheme(&self) -> &'static str {
        if self.supervisor_https {
            "https"
        } else {
            "http"
        }
    }
}

struct Proc {
    name: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    http: SocketAddr,
    child: Option<Child>,
    /// The network namespace it runs in (`ip netns exec`), if not this
    /// host's.
    netns: Option<String>,
}

/// One child of a fleet, as [`Fleet::processes`] lists it.
#[derive(Debug, Clone)]
pub struct FleetProcess {
    /// `control`, `supervisor` or `agent-pod-<i>`.
    pub name: String,
    /// Process id while the child runs.
    pub pid: Option<u32>,
    /// Its HTTP address (`/healthz`, `/readyz`, `/metrics`).
    pub http: SocketAddr,
}

/// One ledger turn as stored: the store's row, under the name the suites
/// use.
pub type Turn = genesis_store::inspect::fleet::LedgerTurn;

/// Counts over the fleet database, for the invariants after a fault: the
/// store's sweep, under the name the fault suite uses.
pub type QueueStats = genesis_store::inspect::fleet::FleetInvariants;

/// A running fleet: its database, tokens, names, ports and children.
pub struct Fleet {
    /// Options it was started with.
    pub options: FleetOptions,
    /// Database name (`genesis_e2e_<hex>`).
    pub db_name: String,
    /// URL of the fleet database as the harness's own login, its owner.
    pub db_url: String,
    /// URL of the fleet database as [`SERVICE_ROLE`], the services' login.
    pub service_db_url: String,
    /// A superuser pool on the fleet database, for assertions.
    pub db: PgPool,
    /// Platform-wide operator token.
    pub operator_token: String,
    /// Agent-pod token.
    pub pod_token: String,
    /// JetStream stream of this fleet.
    pub stream: String,
    /// Subject prefix of this fleet.
    pub subject_prefix: String,
    /// Durable consumer of this fleet.
    pub consumer: String,
    /// NATS URL the fleet uses.
    pub nats_url: String,
    /// Control's gRPC address.
    pub control_grpc: SocketAddr,
    /// Supervisor's gRPC address.
    pub supervisor_grpc: SocketAddr,
    /// Control's operator dashboard (HTTP).
    pub dashboard: SocketAddr,
    /// Log directory.
    pub logs: PathBuf,
    control: Proc,
    supervisor: Proc,
    /// The second and later replicas of control and of the supervisor.
    replicas: Vec<Proc>,
    pods: Vec<Proc>,
    dropped: bool,
    /// One NATS connection for the harness's own reads of the stream,
    /// opened on first use (tests poll `consumer_state`).
    nats: tokio::sync::OnceCell<async_nats::Client>,
}

fn spawn(logs: &Path, p: &mut Proc) -> anyhow::Result<()> {
    if p.child.is_some() {
        return Ok(());
    }
    let bin_name = if p.name.starts_with("agent-pod") {
        "genesis-agent-pod"
    } else if p.name.starts_with("control") {
        "genesis-control"
    } else if p.name.starts_with("supervisor") {
        "genesis-supervisor"
    } else {
        bail!("unknown process {}", p.name)
    };
    let (out, err) = log_file(logs, &p.name)?;
    let mut cmd = match &p.netns {
        None => bin_command(bin_name, &p.args, &p.env)?,
        Some(ns) => {
            // `ip netns exec` execs the binary in place: the child's pid
            // is the service's own, so killing it kills the service.
            let mut args: Vec<std::ffi::OsString> = vec![
                "netns".into(),
                "exec".into(),
                ns.into(),
                binary(bin_name)?.into(),
            ];
            args.extend(p.args.iter().map(Into::into));
            let mut cmd = Command::new("ip");
            cmd.env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .args(args)
                .stdin(Stdio::null());
            for (k, v) in &p.env {
                cmd.env(k, v);
            }
            cmd
        }
    };
    cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err));
    p.child = Some(cmd.spawn().with_context(|| format!("spawn {bin_name}"))?);
    Ok(())
}

fn kill(p: &mut Proc) {
    if let Some(mut c) = p.child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

async fn wait_ready(p: &mut Proc, timeout: Duration) -> anyhow::Result<()> {
    let url = format!("http://{}/readyz", p.http);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if http_ok(&url).await {
            return Ok(());
        }
        if let Some(c) = p.child.as_mut()
            && let Some(status) = c.try_wait()?
        {
            p.child = None;
            bail!("{} exited before it was ready: {status}", p.name);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("{} not ready at {url} after {timeout:?}", p.name);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Run `genesis-control <args>` to completion with `env`, logging to
/// `<logs>/<name>.log`; returns its stdout.
fn control_command(
    logs: &Path,
    name: &str,
    env: &[(String, String)],
    args: &[&str],
) -> anyhow::Result<String> {
    let out = bin_command("genesis-control", args, env)?
        .output()
        .with_context(|| format!("run genesis-control {args:?}"))?;
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("{name}.log")))?;
    use std::io::Write as _;
    let _ = log.write_all(&out.stderr);
    if !out.status.success() {
        bail!(
            "genesis-control {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `gen_` token that `genesis-control token create` printed.
pub fn extract_token(stdout: &str) -> anyhow::Result<String> {
    stdout
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .find(|w| w.starts_with("gen_") && w.len() > 10)
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no gen_ token in `token create` output: {stdout:?}"))
}

impl Fleet {
    /// Create the database, migrate, mint tokens and start
    /// `options.controls` controls, `options.supervisors` supervisors and
    /// `options.pods` agent pods, each ready on `/readyz`.
    pub async fn start(options: FleetOptions) -> anyhow::Result<Fleet> {
        let logs = log_dir(&options.test)?;
        let sfx = suffix();
        let TestDatabase {
            admin,
            name: db_name,
            url: db_url,
        } = TestDatabase::create(&sfx).await?;
        admin.close().await;
        let service_db_url = with_login(&db_url, SERVICE_ROLE, SERVICE_ROLE_PASSWORD)?;
        let nats_url = options.nats_url.clone().unwrap_or_else(shared_nats_url);
        if options.chart_default_names && options.nats_url.is_none() {
            bail!("chart_default_names needs a private NATS server (nats_url)");
        }
        let (stream, subject_prefix, consumer) = if options.chart_default_names {
            (
                "GENESIS_TICKS".to_owned(),
                "genesis.ticks".to_owned(),
                "agent-pods".to_owned(),
            )
        } else {
            (
                format!("GENESIS_TICKS_E2E_{}", sfx.to_uppercase()),
                format!("genesis.e2e{sfx}.ticks"),
                format!("agent-pods-{sfx}"),
            )
        };
        let mut common: Vec<(String, String)> = vec![
            ("GENESIS_DATABASE_URL".into(), service_db_url.clone()),
            ("GENESIS_NATS_URL".into(), nats_url.clone()),
            ("GENESIS_STREAM".into(), stream.clone()),
            ("GENESIS_SUBJECT_PREFIX".into(), subject_prefix.clone()),
            ("GENESIS_CONSUMER".into(), consumer.clone()),
            (
                "GENESIS_LEASE_TTL_SECS".into(),
                options.lease_ttl_secs.to_string(),
            ),
            (
                "GENESIS_MAX_ATTEMPTS".into(),
                options.max_attempts.to_string(),
            ),
            ("GENESIS_LOG_FORMAT".into(), "text".into()),
            ("GENESIS_DEFAULT_PROVIDER".into(), options.provider.clone()),
            ("GENESIS_OUTBOX_POLL_MS".into(), "500".into()),
            ("GENESIS_BOOTSTRAP_RESCAN_SECS".into(), "1".into()),
            ("GENESIS_RETRY_NAK_MS".into(), "500".into()),
            ("GENESIS_LEASE_HELD_NAK_MS".into(), "500".into()),
            (
                "RUST_LOG".into(),
                std::env::var("GENESIS_E2E_RUST_LOG").unwrap_or_else(|_| "info".into()),
            ),
        ];
        common.extend(options.extra_env.iter().cloned());

        // From here on the database exists: a failure must drop it, so the
        // fleet value is built before anything else can fail.
        // Named, so a reading of pg_stat_activity (the bench's idle report)
        // tells the harness's connections from the services'.
        let connected = async {
            let options = genesis_store::connect_options(&db_url, Some("genesis-e2e"))?;
            anyhow::Ok(
                PgPoolOptions::new()
                    .max_connections(4)
                    .connect_with(options)
                    .await?,
            )
        };
        let db = match connected.await {
            Ok(db) => db,
            Err(e) => {
                drop_database(&db_name);
                return Err(e);
            }
        };
        let control_grpc: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
        let supervisor_grpc: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
        let mk = |name: &str,
                  args: Vec<String>,
                  grpc: Option<SocketAddr>,
                  extra: Vec<(String, String)>|
         -> anyhow::Result<Proc> {
            let http: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
            let mut env = common.clone();
            if name.starts_with("agent-pod") {
                // A pod holds no database credentials (DESIGN §2: an
                // agent-pod token and LLM credentials only), so one that
                // reached for PostgreSQL would fail every e2e test.
                env.retain(|(k, _)| k != "GENESIS_DATABASE_URL");
            }
            if let Some(g) = grpc {
                env.push(("GENESIS_GRPC_ADDR".into(), g.to_string()));
            }
            env.push(("GENESIS_HTTP_ADDR".into(), http.to_string()));
            env.extend(extra);
            env.extend(options.env_of(name));
            Ok(Proc {
                name: name.to_owned(),
                args,
                env,
                http,
                child: None,
                netns: None,
            })
        };
        let dashboard: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
        let control = mk(
            "control",
            vec!["serve".into()],
            Some(control_grpc),
            vec![("GENESIS_DASHBOARD_ADDR".into(), dashboard.to_string())],
        )?;
        let mut supervisor = mk("supervisor", vec![], Some(supervisor_grpc), vec![])?;
        if options.supervisor_listen_any {
            let any: SocketAddr = ([0, 0, 0, 0], supervisor_grpc.port()).into();
            supervisor
                .env
                .push(("GENESIS_GRPC_ADDR".into(), any.to_string()));
        }
        let mut replicas = Vec::new();
        for i in 1..options.controls.max(1) {
            let grpc: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
            let dashboard: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
            replicas.push(mk(
                &format!("control-{i}"),
                vec!["serve".into()],
                Some(grpc),
                vec![("GENESIS_DASHBOARD_ADDR".into(), dashboard.to_string())],
            )?);
        }
        let mut supervisor_addrs = vec![supervisor_grpc];
        for i in 1..options.supervisors.max(1) {
            let grpc: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
            let mut replica = mk(&format!("supervisor-{i}"), vec![], Some(grpc), vec![])?;
            if options.supervisor_listen_any {
                let any: SocketAddr = ([0, 0, 0, 0], grpc.port()).into();
                replica
                    .env
                    .push(("GENESIS_GRPC_ADDR".into(), any.to_string()));
            }
            replicas.push(replica);
            supervisor_addrs.push(grpc);
        }
        let mut fleet = Fleet {
            options: options.clone(),
            db_name,
            db_url: db_url.clone(),
            service_db_url,
            db,
            operator_token: String::new(),
            pod_token: String::new(),
            stream,
            subject_prefix,
            consumer,
            nats_url,
            control_grpc,
            supervisor_grpc,
            dashboard,
            logs,
            control,
            supervisor,
            replicas,
            pods: Vec::new(),
            nats: tokio::sync::OnceCell::new(),
            dropped: false,
        };
        // The owner migrates and prepares the services' login; everything
        // after it (tokens, services) logs in as that role.
        let mut as_owner = common.clone();
        as_owner.retain(|(k, _)| k != "GENESIS_DATABASE_URL");
        as_owner.push(("GENESIS_DATABASE_URL".into(), db_url));
        control_command(
            &fleet.logs,
            "migrate",
            &as_owner,
            &["migrate", "--service-role", SERVICE_ROLE],
        )?;
        fleet.operator_token = extract_token(&control_command(
            &fleet.logs,
            "token",
            &common,
            &[
                "token",
                "create",
                "--scope",
                "operator",
                "--label",
                "e2e-operator",
            ],
        )?)?;
        fleet.pod_token = extract_token(&control_command(
            &fleet.logs,
            "token",
            &common,
            &[
                "token",
                "create",
                "--scope",
                "agent-pod",
                "--label",
                "e2e-pods",
            ],
        )?)?;
        for i in 0..options.pods {
            let supervisor = supervisor_addrs[i % supervisor_addrs.len()];
            let p = mk(
                &format!("agent-pod-{i}"),
                vec![],
                None,
                vec![
                    (
                        "GENESIS_SUPERVISOR_URL".into(),
                        format!("{}://{supervisor}", options.supervisor_scheme()),
                    ),
                    ("GENESIS_AGENT_TOKEN".into(), fleet.pod_token.clone()),
                ],
            )?;
            fleet.pods.push(p);
        }
        fleet.start_control().await?;
        fleet.start_supervisor().await?;
        for i in 0..fleet.replicas.len() {
            let logs = fleet.logs.clone();
            let p = &mut fleet.replicas[i];
            spawn(&logs, p)?;
            wait_ready(p, Duration::from_secs(30)).await?;
        }
        for i in 0..fleet.pods.len() {
            fleet.start_pod(i).await?;
        }
        Ok(fleet)
    }

    /// Control's endpoint, `http://127.0.0.1:<port>`.
    pub fn control_endpoint(&self) -> String {
        format!("http://{}", self.control_grpc)
    }

    /// An admin client with the platform operator token.
    pub async fn admin(&self) -> anyhow::Result<Admin> {
        Admin::connect(&self.control_endpoint(), &self.operator_token).await
    }

    /// Start (or restart after a stop) control and wait for `/readyz`.
    pub async fn start_control(&mut self) -> anyhow::Result<()> {
        spawn(&self.logs, &mut self.control)?;
        wait_ready(&mut self.control, Duration::from_secs(30)).await
    }

    /// Start the supervisor and wait for `/readyz`.
    pub async fn start_supervisor(&mut self) -> anyhow::Result<()> {
        spawn(&self.logs, &mut self.supervisor)?;
        wait_ready(&mut self.supervisor, Duration::from_secs(30)).await
    }

    /// Start pod `i` and wait for `/readyz`.
    pub async fn start_pod(&mut self, i: usize) -> anyhow::Result<()> {
        let logs = self.logs.clone();
        let p = self.pods.get_mut(i).ok_or_else(|| anyhow!("no pod {i}"))?;
        spawn(&logs, p)?;
        wait_ready(p, Duration::from_secs(30)).await
    }

    /// Add one more agent pod to the fleet and start it; returns its index.
    pub async fn add_pod(&mut self) -> anyhow::Result<usize> {
        let i = self.pods.len();
        let http: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
        let supervisor = format!(
            "{}://{}",
            self.options.supervisor_scheme(),
            self.supervisor_grpc
        );
        let env = self.added_pod_env(http, &supervisor, None, Vec::new());
        self.pods.push(Proc {
            name: format!("agent-pod-{i}"),
            args: vec![],
            env,
            http,
            child: None,
            netns: None,
        });
        self.start_pod(i).await?;
        Ok(i)
    }

    /// Add one more agent pod running inside `ns` and start it; returns
    /// its index. It reaches the supervisor (started with
    /// [`FleetOptions::supervisor_listen_any`]) and `nats_url` (a server
    /// listening on the namespace's host address) over the namespace's link
    /// only, and serves `/readyz` on the namespace's address.
    pub async fn add_pod_in(
        &mut self,
        ns: &netns::NetNs,
        nats_url: &str,
        extra_env: Vec<(String, String)>,
    ) -> anyhow::Result<usize> {
        ensure!(
            self.options.supervisor_listen_any,
            "a pod in a namespace needs the supervisor listening on every address"
        );
        let i = self.pods.len();
        let http: SocketAddr = (ns.ns_ip, free_port()?).into();
        let supervisor = format!(
            "{}://{}:{}",
            self.options.supervisor_scheme(),
            ns.host_ip,
            self.supervisor_grpc.port()
        );
        let env = self.added_pod_env(http, &supervisor, Some(nats_url), extra_env);
        self.pods.push(Proc {
            name: format!("agent-pod-{i}"),
            args: vec![],
            env,
            http,
            child: None,
            netns: Some(ns.name.clone()),
        });
        self.start_pod(i).await?;
        Ok(i)
    }

    /// Stop control (SIGKILL) and start it again inside `ns`: its gRPC,
    /// HTTP and dashboard addresses move to the namespace's address (the
    /// harness reaches them over the link), and it reaches NATS at
    /// `nats_url` and PostgreSQL at `database_url` (through a
    /// [`netns::Relay`] on the link's host address), over the link only.
    pub async fn move_control_into(
        &mut self,
        ns: &netns::NetNs,
        nats_url: &str,
        database_url: &str,
    ) -> anyhow::Result<()> {
        kill(&mut self.control);
        let grpc: SocketAddr = (ns.ns_ip, free_port()?).into();
        let http: SocketAddr = (ns.ns_ip, free_port()?).into();
        let dashboard: SocketAddr = (ns.ns_ip, free_port()?).into();
        let control = &mut self.control;
        control.env.retain(|(k, _)| {
            !matches!(
                k.as_str(),
                "GENESIS_GRPC_ADDR"
                    | "GENESIS_HTTP_ADDR"
                    | "GENESIS_DASHBOARD_ADDR"
                    | "GENESIS_NATS_URL"
                    | "GENESIS_DATABASE_URL"
            )
        });
        control.env.extend([
            ("GENESIS_GRPC_ADDR".to_owned(), grpc.to_string()),
            ("GENESIS_HTTP_ADDR".to_owned(), http.to_string()),
            ("GENESIS_DASHBOARD_ADDR".to_owned(), dashboard.to_string()),
            ("GENESIS_NATS_URL".to_owned(), nats_url.to_owned()),
            ("GENESIS_DATABASE_URL".to_owned(), database_url.to_owned()),
        ]);
        control.http = http;
        control.netns = Some(ns.name.clone());
        self.control_grpc = grpc;
        self.dashboard = dashboard;
        self.start_control().await
    }

    /// How many messages the fleet's stream holds whose `Nats-Msg-Id`
    /// names event `id` (its id, or its id and a publish epoch): 1 while a
    /// published event waits for a pod, whatever number of times control
    /// published it (the duplicate window keeps one), and 0 once a pod
    /// acknowledged it (the stream is a work queue).
    pub async fn stream_copies(&self, id: Uuid) -> anyhow::Result<usize> {
        let mut stream = self.jetstream_stream().await?;
        let (held, first, last) = {
            let state = &stream.info().await?.state;
            (state.messages, state.first_sequence, state.last_sequence)
        };
        let id = id.to_string();
        let mut copies = 0;
        if held == 0 {
            return Ok(0);
        }
        for seq in first..=last {
            // A sequence acknowledged and removed is not found: skip it.
            let Ok(m) = stream.get_raw_message(seq).await else {
                continue;
            };
            let named = m
                .headers
                .get("Nats-Msg-Id")
                .is_some_and(|v| v.as_str().starts_with(&id));
            copies += usize::from(named);
        }
        Ok(copies)
    }

    /// The environment of a pod added after the start: control's (less its
    /// own addresses and its database), then the pod's address, supervisor,
    /// token and NATS (when not control's), the options' pod env, `extra`.
    fn added_pod_env(
        &self,
        http: SocketAddr,
        supervisor_url: &str,
        nats_url: Option<&str>,
        extra: Vec<(String, String)>,
    ) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .control
            .env
            .iter()
            .filter(|(k, _)| {
                let own = matches!(
                    k.as_str(),
                    "GENESIS_GRPC_ADDR" | "GENESIS_HTTP_ADDR" | "GENESIS_DATABASE_URL"
                );
                let replaced = nats_url.is_some() && k == "GENESIS_NATS_URL";
                !own && !replaced
            })
            .cloned()
            .collect();
        env.push(("GENESIS_HTTP_ADDR".into(), http.to_string()));
        if let Some(url) = nats_url {
            env.push(("GENESIS_NATS_URL".into(), url.to_owned()));
        }
        env.push(("GENESIS_SUPERVISOR_URL".into(), supervisor_url.to_owned()));
        env.push(("GENESIS_AGENT_TOKEN".into(), self.pod_token.clone()));
        env.extend(self.options.env_of("agent-pod"));
        env.extend(extra);
        env
    }

    /// Every child of the fleet (control, the supervisor, their further
    /// replicas, the pods): its name, its
    /// pid while running and its `/healthz` `/metrics` address, so callers
    /// can read `/proc/<pid>` and the counters of each service.
    pub fn processes(&self) -> Vec<FleetProcess> {
        let mut procs: Vec<&Proc> = vec![&self.control, &self.supervisor];
        procs.extend(self.replicas.iter());
        procs.extend(self.pods.iter());
        procs
            .into_iter()
            .map(|p| FleetProcess {
                name: p.name.clone(),
                pid: p.child.as_ref().map(Child::id),
                http: p.http,
            })
            .collect()
    }

    /// The value of one series on the `/metrics` page of the first process
    /// whose name starts with `process` (`control`, `supervisor`,
    /// `agent-pod`), e.g. `genesis_outbox_held_total` or
    /// `genesis_supervisor_claims_total{outcome="not_active"}`; 0 when the
    /// series is not (yet) exported.
    pub async fn counter(&self, process: &str, series: &str) -> anyhow::Result<f64> {
        let p = self
            .processes()
            .into_iter()
            .find(|p| p.name.starts_with(process))
            .ok_or_else(|| anyhow::anyhow!("no {process} process in this fleet"))?;
        let text = reqwest::get(format!("http://{}/metrics", p.http))
            .await?
            .error_for_status()?
            .text()
            .await?;
        Ok(text
            .lines()
            .find_map(|l| {
                l.strip_prefix(series)
                    .and_then(|rest| rest.strip_prefix(' '))
            })
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0))
    }

    /// Number of pods (running or not).
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// SIGKILL pod `i` (no graceful shutdown, mid-tick work abandoned).
    pub fn kill_pod(&mut self, i: usize) {
        if let Some(p) = self.pods.get_mut(i) {
            kill(p);
        }
    }

    /// SIGTERM one child (`control`, `supervisor` or `agent-pod-<i>`) and wait
    /// up to `within` for it to exit on its own; its exit status. A child
    /// still running then is killed and the call fails.
    pub async fn terminate(
        &mut self,
        name: &str,
        within: Duration,
    ) -> anyhow::Result<std::process::ExitStatus> {
        let p = match name {
            "control" => &mut self.control,
            "supervisor" => &mut self.supervisor,
            other => self
                .replicas
                .iter_mut()
                .chain(self.pods.iter_mut())
                .find(|p| p.name == other)
                .ok_or_else(|| anyhow!("no process {other}"))?,
        };
        let child = p
            .child
            .as_mut()
            .ok_or_else(|| anyhow!("{name} is not running"))?;
        signal("TERM", child.id())?;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = child.try_wait()? {
                p.child = None;
                return Ok(status);
            }
            if tokio::time::Instant::now() > deadline {
                kill(p);
                bail!("{name} did not exit within {within:?} of SIGTERM");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Start again every agent pod that exited on its own; how many.
    pub async fn restart_dead_pods(&mut self) -> anyhow::Result<usize> {
        let mut restarted = 0;
        for i in 0..self.pods.len() {
            let dead = match self.pods[i].child.as_mut() {
                Some(c) => c.try_wait()?.is_some(),
                None => false,
            };
            if dead {
                self.pods[i].child = None;
                self.start_pod(i).await?;
                restarted += 1;
            }
        }
        Ok(restarted)
    }

    /// SIGKILL the supervisor.
    pub fn kill_supervisor(&mut self) {
        kill(&mut self.supervisor);
    }

    /// SIGKILL control.
    pub fn kill_control(&mut self) {
        kill(&mut self.control);
    }

    /// SIGKILL the supervisor, start it again on the same ports, wait ready.
    pub async fn restart_supervisor(&mut self) -> anyhow::Result<()> {
        self.kill_supervisor();
        self.start_supervisor().await
    }

    /// SIGKILL control, start it again on the same ports, wait ready.
    pub async fn restart_control(&mut self) -> anyhow::Result<()> {
        self.kill_control();
        self.start_control().await
    }

    /// Whether every started child is still running (none crashed).
    pub fn all_alive(&mut self) -> Result<(), String> {
        let mut procs: Vec<&mut Proc> = vec![&mut self.control, &mut self.supervisor];
        procs.extend(self.replicas.iter_mut());
        procs.extend(self.pods.iter_mut());
        for p in procs {
            if let Some(c) = p.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                return Err(format!("{} exited on its own: {status}", p.name));
            }
        }
        Ok(())
    }

    /// Create a tenant with standing agents on; returns its id.
    pub async fn create_tenant(&self, name: &str) -> anyhow::Result<String> {
        self.create_tenant_with(name, true).await
    }

    /// Create a tenant with the standing-agents gate as given (`false`: no
    /// SOA is bootstrapped, so only the agents a test makes itself tick).
    pub async fn create_tenant_with(
        &self,
        name: &str,
        standing_agents: bool,
    ) -> anyhow::Result<String> {
        let t = self
            .admin()
            .await?
            .tenants()
            .create_tenant(pb::CreateTenantRequest {
                name: name.to_owned(),
                standing_agents_enabled: standing_agents,
            })
            .await?
            .into_inner();
        Ok(t.id)
    }

    /// Wait for the tenant's bootstrapped SOA and return its instance id.
    pub async fn wait_soa(&self, tenant: &str, timeout: Duration) -> anyhow::Result<String> {
        let admin = self.admin().await?;
        wait_for("the bootstrapped SOA", timeout, || {
            let mut agents = admin.agents();
            let tenant = tenant.to_owned();
            async move {
                let r = agents
                    .list_agents(pb::ListAgentsRequest {
                        tenant_id: tenant,
                        agent_type: Some("Soa".into()),
                        status: None,
                    })
                    .await?
                    .into_inner();
                Ok(r.agents.into_iter().next().map(|a| a.id))
            }
        })
        .await
    }

    /// Set a tenant-scoped `system_configs` value through ConfigService.
    pub async fn set_tenant_config(
        &self,
        tenant: &str,
        key: &str,
        value: &str,
    ) -> anyhow::Result<()> {
        self.admin()
            .await?
            .config()
            .set_config(pb::SetConfigRequest {
                tenant_id: Some(tenant.to_owned()),
                key: key.to_owned(),
                value: value.to_owned(),
                scope: "tenant".into(),
            })
            .await?;
        Ok(())
    }

    /// Send an operator message; returns the enqueued event id.
    pub async fn send(&self, tenant: &str, instance: &str, body: &str) -> anyhow::Result<Uuid> {
        let r = self
            .admin()
            .await?
            .agents()
            .send_message(pb::SendMessageRequest {
                tenant_id: tenant.to_owned(),
                instance_id: instance.to_owned(),
                body: body.to_owned(),
            })
            .await?
            .into_inner();
        Ok(r.event_id.parse()?)
    }

    /// How many of `instance`'s operator messages have their ledger turn.
    pub async fn answered_messages(&self, instance: &str) -> anyhow::Result<i64> {
        Ok(inspect::operator_message_turns(&self.db, instance.parse()?).await?)
    }

    /// Every ledger turn of `instance`, oldest first, straight from the
    /// database.
    pub async fn turns(&self, instance: &str) -> anyhow::Result<Vec<Turn>> {
        Ok(inspect::ledger_turns(&self.db, instance.parse()?).await?)
    }

    /// Wait until `instance` has a turn matching `pred` after turn `after`
    /// and return it.
    pub async fn wait_turn(
        &self,
        instance: &str,
        after: i64,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&Turn) -> bool,
    ) -> anyhow::Result<Turn> {
        let pred = &pred;
        let found = wait_for(what, timeout, || async move {
            Ok(self
                .turns(instance)
                .await?
                .into_iter()
                .find(|t| t.turn_number > after && pred(t)))
        })
        .await;
        match found {
            Ok(t) => Ok(t),
            Err(e) => {
                let seen: Vec<String> = self
                    .turns(instance)
                    .await
                    .unwrap_or_default()
                    .iter()
                    .map(|t| format!("{}:{}->{}", t.turn_number, t.event_kind, t.decision_kind))
                    .collect();
                Err(e.context(format!(
                    "ledger of {instance} so far: {seen:?} (logs in {})",
                    self.logs.display()
                )))
            }
        }
    }

    /// Wait for a turn of `kind` after turn `after`.
    pub async fn wait_decision(
        &self,
        instance: &str,
        after: i64,
        kind: &str,
        timeout: Duration,
    ) -> anyhow::Result<Turn> {
        self.wait_turn(instance, after, timeout, &format!("a {kind} turn"), |t| {
            t.decision_kind == kind
        })
        .await
    }

    /// The highest turn number of `instance` (0 before the first).
    pub async fn last_turn(&self, instance: &str) -> anyhow::Result<i64> {
        Ok(self
            .turns(instance)
            .await?
            .last()
            .map_or(0, |t| t.turn_number))
    }

    /// Snapshot count of `instance`.
    pub async fn snapshots(&self, instance: &str) -> anyhow::Result<i64> {
        let id: Uuid = instance.parse()?;
        Ok(inspect::count_call_snapshots(&self.db, id).await?)
    }

    /// Wait until nothing is due: no visible unconsumed, un-dead-lettered
    /// event and no lease held.
    pub async fn wait_quiescent(&self, timeout: Duration) -> anyhow::Result<()> {
        let waited = wait_for(
            "the queue to drain (no due event, no lease)",
            timeout,
            || async {
                let quiet = inspect::fleet_quiescent(&self.db).await?;
                Ok(quiet.then_some(()))
            },
        )
        .await;
        match waited {
            Ok(()) => Ok(()),
            // Say what is left, so a stall explains itself in the log.
            Err(e) => {
                let left = match self.unquiet().await {
                    Ok(left) => left,
                    Err(d) => format!("(what is left could not be read: {d:#})"),
                };
                let queue =
                    match tokio::time::timeout(Duration::from_secs(5), self.consumer_state()).await
                    {
                        Ok(Ok(state)) => state,
                        Ok(Err(d)) => format!("(the consumer could not be read: {d:#})"),
                        Err(_) => "(the consumer could not be read in 5 s)".to_owned(),
                    };
                Err(e.context(format!("{left}\n{queue}")))
            }
        }
    }

    /// The fleet's stream, over the harness's own NATS connection (opened
    /// on first use).
    async fn jetstream_stream(&self) -> anyhow::Result<async_nats::jetstream::stream::Stream> {
        let client = self
            .nats
            .get_or_try_init(|| async_nats::connect(&self.nats_url))
            .await?;
        let js = async_nats::jetstream::new(client.clone());
        Ok(js.get_stream(&self.stream).await?)
    }

    /// The stream's held messages and the durable consumer's counters: whether
    /// a wake-up for what is left is still queued, in a pod's hands, or gone.
    pub async fn consumer_state(&self) -> anyhow::Result<String> {
        let mut stream = self.jetstream_stream().await?;
        let held = stream.info().await?.state.messages;
        let mut consumer: async_nats::jetstream::consumer::PullConsumer = stream
            .get_consumer(&self.consumer)
            .await
            .map_err(|e| anyhow!("consumer {}: {e}", self.consumer))?;
        let c = consumer.info().await?;
        Ok(format!(
            "stream {}: {held} message(s) held; consumer {}: {} pending, {} awaiting ack, \
             {} redelivered, delivered up to stream sequence {}, acked up to {}",
            self.stream,
            self.consumer,
            c.num_pending,
            c.num_ack_pending,
            c.num_redelivered,
            c.delivered.stream_sequence,
            c.ack_floor.stream_sequence
        ))
    }

    /// The due events and live leases that keep the fleet from quiescence,
    /// at most ten of each, one per line.
    async fn unquiet(&self) -> anyhow::Result<String> {
        let inspect::QuiescenceBlockers {
            due_events: events,
            live_leases: leases,
        } = inspect::quiescence_blockers(&self.db).await?;
        Ok(events
            .into_iter()
            .chain(leases)
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// Counts for the invariants after a fault.
    pub async fn stats(&self) -> anyhow::Result<QueueStats> {
        Ok(inspect::invariant_sweep(&self.db).await?)
    }

    /// Check the fault invariants on a quiescent fleet (after
    /// [`Fleet::wait_quiescent`]): every consumed event has exactly one turn
    /// and every turn a consumed event; every dead letter exactly one
    /// attention request of its own and every such request a dead letter;
    /// every unconsumed event of an active instance is its one pending
    /// heartbeat; no lease is held past its expiry.
    ///
    /// The lease check has no grace period: quiescence means no lease is
    /// live and nothing is due, and a lease is only taken for a due event
    /// (claiming nothing clears it in the same transaction) and is cleared
    /// by the completion that consumes the event or overwritten by the
    /// claim that takes the event over. A session still set with its expiry
    /// passed is therefore one nothing will ever clean up.
    pub async fn check_invariants(&self) -> anyhow::Result<QueueStats> {
        let s = self.stats().await?;
        let mut problems = Vec::new();
        if s.turns != s.consumed {
            problems.push(format!(
                "ledger turns {} != consumed events {}",
                s.turns, s.consumed
            ));
        }
        if s.turns_of_consumed != s.turns {
            problems.push(format!(
                "{} turns point at an unconsumed event",
                s.turns - s.turns_of_consumed
            ));
        }
        if !s.unmatched_dead_letters.is_empty() {
            problems.push(format!(
                "dead-lettered events without exactly one dead_letter attention request of their own (event, requests): {:?}",
                s.unmatched_dead_letters
            ));
        }
        if !s.orphan_dead_letter_requests.is_empty() {
            problems.push(format!(
                "dead_letter attention requests naming no dead-lettered event: {:?}",
                s.orphan_dead_letter_requests
            ));
        }
        if !s.bad_heartbeats.is_empty() {
            problems.push(format!(
                "active instances without exactly one pending heartbeat: {:?}",
                s.bad_heartbeats
            ));
        }
        if !s.stray_pending.is_empty() {
            problems.push(format!(
                "unconsumed events of active instances other than their heartbeat (instance, kind): {:?}",
                s.stray_pending
            ));
        }
        if s.stale_leases > 0 {
            problems.push(format!("{} leases held past their expiry", s.stale_leases));
        }
        if problems.is_empty() {
            Ok(s)
        } else {
            bail!("invariants broken: {} ({s:?})", problems.join("; "))
        }
    }

    /// Tail of one child's log, for failure messages.
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        let text =
            std::fs::read_to_string(self.logs.join(format!("{name}.log"))).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Kill every child, drop the database and delete the stream. Also run
    /// by `Drop`; calling it twice is harmless.
    pub fn shutdown(&mut self) {
        if self.dropped {
            return;
        }
        self.dropped = true;
        for p in self.pods.iter_mut() {
            kill(p);
        }
        for p in self.replicas.iter_mut() {
            kill(p);
        }
        kill(&mut self.supervisor);
        kill(&mut self.control);
        if std::env::var_os("GENESIS_E2E_KEEP_DB").is_some() {
            eprintln!("kept database {} (GENESIS_E2E_KEEP_DB)", self.db_name);
        } else {
            drop_database(&self.db_name);
        }
        delete_stream(&self.nats_url, &self.stream);
    }
}

/// `DROP DATABASE <name> WITH (FORCE)` on a thread of its own (callable from
/// `Drop` inside or outside a runtime).
pub fn drop_database(name: &str) {
    let name = name.to_owned();
    let base = base_database_url();
    let _ = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            if let Ok(pool) = PgPoolOptions::new().max_connections(1).connect(&base).await {
                let _ = inspect::fixture_drop_database(&pool, &name).await;
                pool.close().await;
            }
        });
    })
    .join();
}

/// Delete a JetStream stream, best effort, bounded to a few seconds.
pub fn delete_stream(nats_url: &str, stream: &str) {
    let url = nats_url.to_owned();
    let stream = stream.to_owned();
    let _ = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            let work = async {
                let client = async_nats::connect(&url).await.ok()?;
                let js = async_nats::jetstream::new(client);
                js.delete_stream(&stream).await.ok()
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), work).await;
        });
    })
    .join();
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Run `genesisctl` with the fleet's endpoint and token; returns (exit code,
/// stdout, stderr).
pub fn genesisctl(fleet: &Fleet, args: &[&str]) -> anyhow::Result<(i32, String, String)> {
    let out = bin_command(
        "genesisctl",
        args,
        &[
            ("GENESIS_ENDPOINT", fleet.control_endpoint()),
            ("GENESIS_TOKEN", fleet.operator_token.clone()),
        ],
    )?
    .output()?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// The JSON genesisctl prints for `args` (run with `-o json`), which must
/// succeed.
pub fn genesisctl_json(fleet: &Fleet, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let (code, out, err) = genesisctl(fleet, args)?;
    ensure!(code == 0, "genesisctl {args:?} exited {code}: {err}");
    serde_json::from_str(out.trim()).with_context(|| format!("genesisctl {args:?} printed {out:?}"))
}

/// A genesisctl command that must be refused: its exit code and its stderr,
/// which must be exactly one `error: ` line, with nothing on stdout.
pub fn genesisctl_refused(fleet: &Fleet, args: &[&str]) -> anyhow::Result<(i32, String)> {
    let (code, out, err) = genesisctl(fleet, args)?;
    ensure!(code != 0, "genesisctl {args:?} succeeded: {out}");
    ensure!(out.is_empty(), "genesisctl {args:?} printed {out:?}");
    ensure!(
        err.starts_with("error: ") && err.trim_end().lines().count() == 1,
        "genesisctl {args:?} stderr is not one error line: {err:?}"
    );
    Ok((code, err.trim_end().to_owned()))
}

/// `head` then `rest`, as one argument list.
pub fn argv<'a>(head: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    head.iter().chain(rest).copied().collect()
}

/// Pending counts per key, for summaries.
pub type Counts = BTreeMap<String, i64>;

/// Parse a Decision's metadata JSON.
pub fn metadata(d: &pb::Decision) -> serde_json::Value {
    serde_json::from_str(&d.metadata_json).unwrap_or(serde_json::Value::Null)
}

/// Bound a whole test: fail (dropping the fleet inside `fut`, which cleans
/// up) if it runs past `limit`.
pub async fn bounded<F>(limit: Duration, fut: F) -> anyhow::Result<()>
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => bail!("test exceeded its {limit:?} bound"),
    }
}

/// Run an end-to-end test body within `limit` (see [`bounded`]), or skip
/// it, saying why, when the binaries it starts are not built (see
/// [`binaries_missing`]).
pub async fn bounded_e2e<F>(limit: Duration, fut: F) -> anyhow::Result<()>
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(limit, fut).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_name_replaces_only_the_path() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("postgres://h:1/db?sslmode=disable", "y"),
            "postgres://h:1/y?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h:1", "z"), "postgres://h:1/z");
    }

    #[test]
    fn token_is_found_in_command_output_and_absence_is_an_error() {
        assert_eq!(
            extract_token("token: gen_abcDEF123-_xyz (shown once)\n").expect("token found"),
            "gen_abcDEF123-_xyz"
        );
        assert!(extract_token("no token here").is_err());
    }

    #[test]
    fn a_missing_binary_skips_locally_and_fails_under_ci() {
        let why = || Some("binary x not built".to_owned());
        assert_eq!(skip_or_fail(why(), None), Ok(why()));
        assert_eq!(skip_or_fail(why(), Some("false")), Ok(why()));
        let err = skip_or_fail(why(), Some("true")).expect_err("CI must fail");
        assert!(
            err.starts_with("binary x not built;") && err.contains("CI=true"),
            "{err}"
        );
        assert_eq!(skip_or_fail(None, Some("true")), Ok(None));
    }

    #[test]
    fn consumer_pending_follows_the_keda_path() {
        let v = serde_json::json!({"account_details": [{"stream_detail": [
            {"name": "OTHER", "consumer_detail": [{"name": "c", "num_pending": 9}]},
            {"name": "S", "consumer_detail": [{"name": "c", "num_pending": 3}]}
        ]}]});
        assert_eq!(consumer_pending_in(&v, "S", "c"), Some(3));
        assert_eq!(consumer_pending_in(&v, "S", "missing"), None);
    }
}

/// Behaviours a test found broken, collected so one run reports every one
/// of them (a later step still runs when an earlier one failed) and the test
/// still fails at the end.
#[derive(Debug, Default)]
pub struct Findings(Vec<String>);

impl Findings {
    /// Record `what` as broken unless `ok`; returns `ok`.
    pub fn check(&mut self, ok: bool, what: impl Into<String>) -> bool {
        if !ok {
            let what = what.into();
            eprintln!("FAILED CHECK: {what}");
            self.0.push(what);
        }
        ok
    }

    /// Fail with every recorded finding, or succeed when there is none.
    pub fn finish(self) -> anyhow::Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            bail!(
                "{} behaviour(s) broken:\n  - {}",
                self.0.len(),
                self.0.join("\n  - ")
            )
        }
    }
}

#[cfg(test)]
mod port_tests {
    use super::*;

    #[test]
    fn a_port_marker_is_held_until_it_is_an_hour_old() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let marker = dir.path().join("12345");
        assert!(reserve_port(&marker), "a fresh marker is reserved");
        assert!(
            !reserve_port(&marker),
            "a held marker is refused to the next process"
        );
        let old = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
        File::options()
            .write(true)
            .open(&marker)?
            .set_modified(old)?;
        assert!(
            reserve_port(&marker),
            "a marker of a finished run is taken over"
        );
        assert!(!reserve_port(&marker), "and then held again");
        Ok(())
    }
}
