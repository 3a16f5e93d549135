//! The coder contract over gRPC, on real PostgreSQL and real NATS, with
//! coder Jobs created through a real kube client against an in-test
//! stand-in of the Kubernetes Job API (strict: it refuses what the API
//! server's validation refuses of a coder Job). SpawnCoder hands the Job
//! GENESIS_TASK_ID, GENESIS_CONTROL_URL and GENESIS_CODER_TOKEN; that token
//! reaches its own task's allowance and nothing else, and is refused once
//! the task settles or its coder stops, and a stopped coder's task goes
//! back to pending for a new coder. The stand-in also lists a Job's
//! pods (`job-name` selector) and serves their logs (`tailLines`,
//! `limitBytes`, refused below range with the API server's 422), for
//! CoderLogs. For the end-to-end test a kubelet stand-in runs a created
//! Job's command — the real `genesis-coder` binary — with the Job's
//! environment and its Secret volume's entries, and kills it when the Job
//! is deleted.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use common::*;
use genesis_core::TokenScope;
use genesis_proto::v1;
use serde_json::{Value, json};
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

/// The stand-in's jobs: (namespace, name) → Job JSON.
type Jobs = Arc<Mutex<HashMap<(String, String), Value>>>;

fn kube_status(code: u16, reason: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": code})),
    )
        .into_response()
}

/// What the API server refuses of the fields a coder Job sets.
fn invalid(job: &Value) -> Option<String> {
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    if name.is_empty()
        || name.len() > 63
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Some(format!("metadata.name: Invalid value: {name:?}"));
    }
    for (k, v) in job["metadata"]["labels"].as_object().into_iter().flatten() {
        let v = v.as_str().unwrap_or_default();
        if v.len() > 63
            || !v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Some(format!("metadata.labels: Invalid value: {k}={v:?}"));
        }
    }
    for c in job["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for e in c["env"].as_array().into_iter().flatten() {
            let n = e["name"].as_str().unwrap_or_default();
            let mut chars = n.chars();
            let ok = chars
                .next()
                .is_some_and(|ch| ch.is_ascii_alphabetic() || "-._".contains(ch))
                && chars.all(|ch| ch.is_ascii_alphanumeric() || "-._".contains(ch));
            if !ok {
                return Some(format!("env[].name: Invalid value: {n:?}"));
            }
            if e.get("value").is_some_and(|v| !v.is_null())
                && e.get("valueFrom").is_some_and(|v| !v.is_null())
            {
                return Some(format!("env[{n}].valueFrom: may not be set with value"));
            }
        }
    }
    None
}

async fn create(
    State(jobs): State<Jobs>,
    Path(ns): Path<String>,
    Json(mut job): Json<Value>,
) -> Response {
    if job["apiVersion"] != "batch/v1" || job["kind"] != "Job" {
        return kube_status(400, "BadRequest", "not a batch/v1 Job");
    }
    if let Some(why) = invalid(&job) {
        return kube_status(422, "Invalid", &why);
    }
    let name = job["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let Ok(mut jobs) = jobs.lock() else {
        return kube_status(500, "InternalError", "poisoned");
    };
    if jobs.contains_key(&(ns.clone(), name.clone())) {
        return kube_status(409, "AlreadyExists", "job exists");
    }
    job["metadata"]["namespace"] = json!(ns);
    job["metadata"]["uid"] = json!(Uuid::new_v4().to_string());
    jobs.insert((ns, name), job.clone());
    (StatusCode::CREATED, Json(job)).into_response()
}

async fn list(
    State(jobs): State<Jobs>,
    Path(ns): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let selector = q.get("labelSelector").cloned().unwrap_or_default();
    let Ok(jobs) = jobs.lock() else {
        return kube_status(500, "InternalError", "poisoned");
    };
    let items: Vec<Value> = jobs
        .iter()
        .filter(|((n, _), j)| {
            *n == ns
                && selector.split(',').filter(|s| !s.is_empty()).all(|pair| {
                    pair.split_once('=')
                        .is_some_and(|(k, v)| j["metadata"]["labels"][k].as_str() == Some(v))
                })
        })
        .map(|(_, j)| j.clone())
        .collect();
    Json(json!({"apiVersion": "batch/v1", "kind": "JobList",
        "metadata": {"resourceVersion": "1"}, "items": items}))
    .into_response()
}

async fn get_one(State(jobs): State<Jobs>, Path((ns, name)): Path<(String, String)>) -> Response {
    let found = jobs
        .lock()
        .ok()
        .and_then(|j| j.get(&(ns, name.clone())).cloned());
    match found {
        Some(j) => Json(j).into_response(),
        None => kube_status(404, "NotFound", &format!("jobs.batch \"{name}\" not found")),
    }
}

async fn delete_one(
    State(jobs): State<Jobs>,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    let removed = jobs
        .lock()
        .ok()
        .and_then(|mut j| j.remove(&(ns, name.clone())));
    match removed {
        Some(_) => Json(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Success", "details": {"name": name, "group": "batch", "kind": "jobs"}}))
        .into_response(),
        None => kube_status(404, "NotFound", "gone"),
    }
}

/// The stand-in's pods: (namespace, name) → (Pod JSON, its log).
type Pods = Arc<Mutex<HashMap<(String, String), (Value, String)>>>;

async fn list_pods(
    State(pods): State<Pods>,
    Path(ns): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let selector = q.get("labelSelector").cloned().unwrap_or_default();
    let Ok(pods) = pods.lock() else {
        return kube_status(500, "InternalError", "poisoned");
    };
    let items: Vec<Value> = pods
        .iter()
        .filter(|((n, _), (p, _))| {
            *n == ns
                && selector.split(',').filter(|s| !s.is_empty()).all(|pair| {
                    pair.split_once('=')
                        .is_some_and(|(k, v)| p["metadata"]["labels"][k].as_str() == Some(v))
                })
        })
        .map(|(_, (p, _))| p.clone())
        .collect();
    Json(json!({"apiVersion": "v1", "kind": "PodList",
        "metadata": {"resourceVersion": "1"}, "items": items}))
    .into_response()
}

/// GET .../pods/{name}/log: the last `tailLines` lines (every newline ends
/// one; a final fragment is one too), then their first `limitBytes` bytes,
/// as text/plain; a negative `tailLines` or a `limitBytes` below 1 is the
/// API server's 422 Invalid, an unknown pod its 404.
async fn pod_log(
    State(pods): State<Pods>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let int = |key: &str| q.get(key).map(|v| v.parse::<i64>().map_err(|_| v.clone()));
    let (tail, limit) = match (int("tailLines").transpose(), int("limitBytes").transpose()) {
        (Ok(t), Ok(l)) => (t, l),
        (Err(v), _) | (_, Err(v)) => {
            return kube_status(400, "BadRequest", &format!("not an integer: {v:?}"));
        }
    };
    if tail.is_some_and(|t| t < 0) || limit.is_some_and(|l| l < 1) {
        return kube_status(
            422,
            "Invalid",
            &format!("PodLogOptions {name:?} is invalid: tailLines {tail:?}, limitBytes {limit:?}"),
        );
    }
    let log = pods
        .lock()
        .ok()
        .and_then(|p| p.get(&(ns, name.clone())).map(|(_, log)| log.clone()));
    let Some(log) = log else {
        return kube_status(404, "NotFound", &format!("pods {name:?} not found"));
    };
    let mut lines: Vec<&str> = log.split_inclusive('\n').collect();
    if let Some(t) = tail.and_then(|t| usize::try_from(t).ok()) {
        lines = lines.split_off(lines.len().saturating_sub(t));
    }
    let mut body = lines.concat().into_bytes();
    if let Some(l) = limit.and_then(|l| usize::try_from(l).ok()) {
        body.truncate(l);
    }
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "text/plain")],
        body,
    )
        .into_response()
}

/// The stand-in cluster and a kubeconfig file naming it.
struct Cluster {
    jobs: Jobs,
    pods: Pods,
    /// Requests the stand-in answered, of any path.
    hits: Arc<AtomicUsize>,
    kubeconfig: std::path::PathBuf,
}

impl Cluster {
    async fn start() -> anyhow::Result<Cluster> {
        let jobs: Jobs = Arc::default();
        let pods: Pods = Arc::default();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        let app = axum::Router::new()
            .route(
                "/apis/batch/v1/namespaces/{ns}/jobs",
                get(list).post(create),
            )
            .route(
                "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
                get(get_one).delete(delete_one),
            )
            .with_state(jobs.clone())
            .merge(
                axum::Router::new()
                    .route("/api/v1/namespaces/{ns}/pods", get(list_pods))
                    .route("/api/v1/namespaces/{ns}/pods/{name}/log", get(pod_log))
                    .with_state(pods.clone()),
            )
            .layer(axum::middleware::from_fn(
                move |r: axum::extract::Request, next: axum::middleware::Next| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    next.run(r)
                },
            ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let kubeconfig =
            std::env::temp_dir().join(format!("c42-kubeconfig-{}.json", Uuid::new_v4()));
        let doc = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "stand-in", "cluster": {"server": format!("http://{addr}")}}],
            "users": [{"name": "control", "user": {}}],
            "contexts": [{"name": "coders", "context": {"cluster": "stand-in", "user": "control"}}],
            "current-context": "coders",
        });
        std::fs::write(&kubeconfig, serde_json::to_vec(&doc)?)?;
        Ok(Cluster {
            jobs,
            pods,
            hits,
            kubeconfig,
        })
    }

    /// Requests answered so far.
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// What the Job controller does once a Job runs: a running pod carrying
    /// the template's labels plus `job-name`, whose log is `log`.
    fn run_pod(&self, job: &str, log: &str) -> anyhow::Result<String> {
        let labels = {
            let jobs = self.jobs.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            let job_json = jobs
                .get(&("coders".to_owned(), job.to_owned()))
                .ok_or_else(|| anyhow::anyhow!("no job {job}"))?;
            let mut labels = job_json["spec"]["template"]["metadata"]["labels"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            labels.insert("job-name".into(), json!(job));
            labels
        };
        let name = format!("{job}-x7k2p");
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "coders", "labels": labels,
                "creationTimestamp": "2026-01-01T10:00:00Z"},
            "status": {"phase": "Running"},
        });
        self.pods
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .insert(("coders".to_owned(), name.clone()), (pod, log.to_owned()));
        Ok(name)
    }

    fn count(&self) -> usize {
        self.jobs.lock().map(|j| j.len()).unwrap_or(usize::MAX)
    }

    /// The one container's environment of a Job.
    fn env(&self, name: &str) -> anyhow::Result<BTreeMap<String, String>> {
        let jobs = self.jobs.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let job = jobs
            .get(&("coders".to_owned(), name.to_owned()))
            .ok_or_else(|| anyhow::anyhow!("no job {name}"))?;
        Ok(job["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["name"].as_str().unwrap_or_default().to_owned(),
                    e["value"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

const CONTROL_URL: &str = "http://genesis-control.test:50051";

fn coder_config(pool: &PgPool, cluster: &Cluster) -> genesis_control::ControlConfig {
    let mut c = config(pool, NATS_URL);
    c.registry_bucket = format!("reg_{}", Uuid::new_v4().simple());
    c.auto_bootstrap = false;
    c.coder_namespace = "coders".into();
    c.coder_image = "ghcr.io/genesis/coder:1".into();
    c.coder_kubeconfig = Some(cluster.kubeconfig.clone());
    c.coder_control_url = Some(CONTROL_URL.into());
    c.coder_artifact_max_bytes = 1024;
    c.coder_artifacts_per_task = 3;
    c.coder_artifact_total_bytes = 2048;
    c
}

fn new_task(tenant: Uuid, title: &str) -> v1::CreateTaskRequest {
    v1::CreateTaskRequest {
        tenant_id: tenant.to_string(),
        title: title.into(),
        instructions: "make cargo test pass".into(),
        model: "claude-opus-4-8".into(),
        provider: "anthropic".into(),
        backend: "api".into(),
        ..Default::default()
    }
}

/// An RPC by path with an empty body: what the gate and the handler answer.
async fn raw_call(channel: tonic::transport::Channel, path: &str, token: &str) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel);
    if let Err(e) = grpc.ready().await {
        return tonic::Status::unknown(e.to_string());
    }
    let request = req((), token);
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    let Ok(path) = http::uri::PathAndQuery::try_from(path.to_owned()) else {
        return tonic::Status::unknown("bad path");
    };
    match grpc.unary(request, path, codec).await {
        Ok(_) => tonic::Status::ok("answered"),
        Err(s) => s,
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_coder_token_reaches_its_own_task_s_allowance_and_nothing_else(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let soa = soa(&store, a).await?;
    let op = token(&store, TokenScope::Operator, Some(a)).await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let cluster = Cluster::start().await?;
    let h = start(coder_config(&pool, &cluster)).await?;
    let ch = h.channel().await?;
    let mut tasks = v1::coding_task_service_client::CodingTaskServiceClient::new(ch.clone());
    let mut coders = v1::coder_service_client::CoderServiceClient::new(ch.clone());
    let mut registry = v1::registry_service_client::RegistryServiceClient::new(ch.clone());
    let mut windows = v1::windows_lane_service_client::WindowsLaneServiceClient::new(ch.clone());

    let own = tasks
        .create_task(req(new_task(a, "fix the build"), &op))
        .await?
        .into_inner();
    let other = tasks
        .create_task(req(new_task(a, "another task"), &op))
        .await?
        .into_inner();
    let theirs = tasks
        .create_task(req(new_task(b, "tenant b's task"), &op_b))
        .await?
        .into_inner();

    // (e) SpawnCoder with the task id: the contract is in the Job spec.
    let spawned = coders
        .spawn_coder(req(
            v1::SpawnCoderRequest {
                tenant_id: a.to_string(),
                name: "c1".into(),
                task_id: Some(own.id.clone()),
                ..Default::default()
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(spawned.task_id.as_deref(), Some(own.id.as_str()));
    let env = cluster.env(&spawned.job_name)?;
    assert_eq!(env["GENESIS_TASK_ID"], own.id);
    assert_eq!(env["GENESIS_CONTROL_URL"], CONTROL_URL);
    assert_eq!(env["GENESIS_CODER_ID"], spawned.job_name);
    assert_eq!(env["GENESIS_CODER_MODEL"], "claude-opus-4-8");
    let coder = env["GENESIS_CODER_TOKEN"].clone();
    assert!(coder.starts_with("gen_"), "a minted token");
    let rows = store.tokens().list(Some(a)).await?;
    let minted = rows
        .iter()
        .find(|r| r.scope == TokenScope::Coder)
        .ok_or_else(|| anyhow::anyhow!("no coder token row"))?;
    let ttl = minted.expires_at.map(|e| e - minted.created_at);
    assert!(
        ttl.is_some_and(|d| (86_390..=86_400).contains(&d.num_seconds())),
        "short-lived, the default TTL: {ttl:?}"
    );
    let task = tasks
        .get_task(req(
            v1::GetTaskRequest {
                tenant_id: a.to_string(),
                task_id: own.id.clone(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(task.coder_id.as_deref(), Some(spawned.job_name.as_str()));
    assert_eq!(task.status, "running");

    // (a) Every RPC outside the allowance is refused PERMISSION_DENIED at
    // the gate; every RPC inside it passes the gate (an empty request is
    // then the handler's INVALID_ARGUMENT).
    let mut wrong = Vec::new();
    let (mut refused, mut allowed) = (0, 0);
    for (service, method) in genesis_proto::convert::all_rpcs()
        .into_iter()
        .filter(|(s, _)| genesis_control::SERVED_SERVICES.contains(&s.as_str()))
    {
        let path = genesis_proto::convert::rpc_path(&service, &method);
        let s = raw_call(ch.clone(), &path, &coder).await;
        if genesis_control::auth::coder_may_call(&path) {
            allowed += 1;
            if s.code() != Code::InvalidArgument {
                wrong.push(format!("{path} (allowed): {:?} {}", s.code(), s.message()));
            }
        } else if s.code() == Code::PermissionDenied {
            refused += 1;
        } else {
            wrong.push(format!("{path}: {:?} {}", s.code(), s.message()));
        }
    }
    assert!(
        wrong.is_empty(),
        "coder token answers:\n{}",
        wrong.join("\n")
    );
    assert!(refused >= 50, "only {refused} RPCs refused");
    assert_eq!(
        allowed,
        genesis_control::auth::CODER_RPCS.len(),
        "every listed RPC is served"
    );

    // (b) Another task of the same tenant, and another tenant: refused.
    let get = |tenant: Uuid, task: &str| v1::GetTaskRequest {
        tenant_id: tenant.to_string(),
        task_id: task.to_owned(),
    };
    for (what, r) in [
        ("other task", get(a, &other.id)),
        ("other tenant", get(b, &theirs.id)),
        ("other tenant, own task id", get(b, &own.id)),
    ] {
        let e = tasks.get_task(req(r, &coder)).await.expect_err("refused");
        assert_eq!(e.code(), Code::PermissionDenied, "{what}: {}", e.message());
    }
    let e = tasks
        .report_progress(req(
            v1::ReportProgressRequest {
                tenant_id: a.to_string(),
                task_id: other.id.clone(),
                message: "not mine".into(),
                percent: None,
            },
            &coder,
        ))
        .await
        .expect_err("other task");
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = tasks
        .attach_artifact(req(
            v1::AttachArtifactRequest {
                tenant_id: a.to_string(),
                task_id: other.id.clone(),
                kind: "log".into(),
                name: "x.log".into(),
                content: "x".into(),
            },
            &coder,
        ))
        .await
        .expect_err("other task");
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = tasks
        .complete_task(req(
            v1::CompleteTaskRequest {
                tenant_id: a.to_string(),
                task_id: other.id.clone(),
                status: "failed".into(),
                ..Default::default()
            },
            &coder,
        ))
        .await
        .expect_err("other task");
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = windows
        .windows(req(
            v1::WindowsRequest {
                session: Some(v1::WindowsSession {
                    tenant_id: a.to_string(),
                    coder_id: "coder-someone-else".into(),
                }),
            },
            &coder,
        ))
        .await
        .expect_err("another coder's session");
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = registry
        .heartbeat(req(
            v1::HeartbeatRequest {
                tenant_id: a.to_string(),
                agent_id: other.id.clone(),
            },
            &coder,
        ))
        .await
        .expect_err("another entry");
    assert_eq!(e.code(), Code::PermissionDenied);
    let untouched = tasks
        .get_task(req(get(a, &other.id), &op))
        .await?
        .into_inner();
    assert_eq!(
        (
            untouched.status.as_str(),
            untouched.progress_message.as_str()
        ),
        ("pending", "")
    );

    // (c) The allowance works.
    let read = tasks
        .get_task(req(get(a, &own.id), &coder))
        .await?
        .into_inner();
    assert_eq!(read.instructions, "make cargo test pass");
    let entry = registry
        .register(req(
            v1::RegisterRequest {
                tenant_id: a.to_string(),
                name: "c1".into(),
                role: "Developer".into(),
                capabilities: vec!["rust".into()],
                metadata_json: String::new(),
            },
            &coder,
        ))
        .await?
        .into_inner();
    assert_eq!(entry.id, own.id, "a coder's entry is its task's");
    registry
        .heartbeat(req(
            v1::HeartbeatRequest {
                tenant_id: a.to_string(),
                agent_id: own.id.clone(),
            },
            &coder,
        ))
        .await?;
    let lane = windows
        .windows(req(
            v1::WindowsRequest {
                session: Some(v1::WindowsSession {
                    tenant_id: a.to_string(),
                    coder_id: spawned.job_name.clone(),
                }),
            },
            &coder,
        ))
        .await?
        .into_inner();
    assert_eq!(
        lane.error.map(|e| e.code).as_deref(),
        Some("FEATURE_DISABLED"),
        "its own session reaches the lane"
    );
    let progressed = tasks
        .report_progress(req(
            v1::ReportProgressRequest {
                tenant_id: a.to_string(),
                task_id: own.id.clone(),
                message: "tests compile".into(),
                percent: Some(40),
            },
            &coder,
        ))
        .await?
        .into_inner();
    assert_eq!(progressed.progress_message, "tests compile");
    assert_eq!(progressed.progress_percent, Some(40));
    let e = tasks
        .report_progress(req(
            v1::ReportProgressRequest {
                tenant_id: a.to_string(),
                task_id: own.id.clone(),
                message: "too far".into(),
                percent: Some(101),
            },
            &coder,
        ))
        .await
        .expect_err("percent");
    assert!(e.message().starts_with("percent:"), "{}", e.message());
    let patch = tasks
        .attach_artifact(req(
            v1::AttachArtifactRequest {
                tenant_id: a.to_string(),
                task_id: own.id.clone(),
                kind: "patch".into(),
                name: "fix.diff".into(),
                content: "--- a/x\n+++ b/x\n".into(),
            },
            &coder,
        ))
        .await?
        .into_inner();
    assert_eq!(patch.size_bytes, 16);
    let e = tasks
        .attach_artifact(req(
            v1::AttachArtifactRequest {
                tenant_id: a.to_string(),
                task_id: own.id.clone(),
                kind: "log".into(),
                name: "build.log".into(),
                content: "x".repeat(1025),
            },
            &coder,
        ))
        .await
        .expect_err("over the cap");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("content:"), "{}", e.message());
    let e = tasks
        .attach_artifact(req(
            v1::AttachArtifactRequest {
                tenant_id: a.to_string(),
                task_id: own.id.clone(),
                kind: "binary".into(),
                name: "a.out".into(),
                content: "x".into(),
            },
            &coder,
        ))
        .await
        .expect_err("unknown kind");
    assert!(e.message().starts_with("kind:"), "{}", e.message());
    // The per-task total: the patch's 16 + 1020 + 1020 passes 2048.
    let big = |name: &str| v1::AttachArtifactRequest {
        tenant_id: a.to_string(),
        task_id: own.id.clone(),
        kind: "log".into(),
        name: name.into(),
        content: "y".repeat(1020),
    };
    tasks.attach_artifact(req(big("one.log"), &coder)).await?;
    let e = tasks
        .attach_artifact(req(big("two.log"), &coder))
        .await
        .expect_err("over the task's total");
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
    let read = tasks
        .get_task(req(get(a, &own.id), &coder))
        .await?
        .into_inner();
    let names: Vec<_> = read.artifacts.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(
        names,
        ["fix.diff", "one.log"],
        "refused artifacts wrote nothing"
    );
    assert_eq!(read.artifact_count, 2, "the count agrees with the list");

    let done = tasks
        .complete_task(req(
            v1::CompleteTaskRequest {
                tenant_id: a.to_string(),
                task_id: own.id.clone(),
                status: "completed".into(),
                result_summary: "green".into(),
                result_json: String::new(),
            },
            &coder,
        ))
        .await?
        .into_inner();
    assert_eq!(done.status, "completed");
    assert_eq!(
        done.artifact_count, 2,
        "the settled task's answer counts them too"
    );
    let events =
        genesis_store::inspect::events_of_kind(&pool, soa.id, "DependencyCompleted").await?;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].1["codingTaskId"], own.id);
    assert_eq!(cluster.count(), 0, "settling stops the coder's Job");

    // (d) Settled: the token is gone.
    for s in [
        raw_call(ch.clone(), "/genesis.v1.CodingTaskService/GetTask", &coder).await,
        tasks
            .get_task(req(get(a, &own.id), &coder))
            .await
            .expect_err("revoked"),
    ] {
        assert_eq!(s.code(), Code::Unauthenticated, "{}", s.message());
    }
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn spawn_coder_creates_its_task_and_stop_coder_revokes_the_token(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(a)).await?;
    let cluster = Cluster::start().await?;
    let h = start(coder_config(&pool, &cluster)).await?;
    let ch = h.channel().await?;
    let mut tasks = v1::coding_task_service_client::CodingTaskServiceClient::new(ch.clone());
    let mut coders = v1::coder_service_client::CoderServiceClient::new(ch.clone());
    let spawn = |task_id: Option<String>, title: Option<&str>, instructions: Option<&str>| {
        v1::SpawnCoderRequest {
            tenant_id: a.to_string(),
            name: "c2".into(),
            model: "claude-opus-4-8".into(),
            provider: "anthropic".into(),
            backend: "api".into(),
            task_id,
            title: title.map(str::to_owned),
            instructions: instructions.map(str::to_owned),
            repository: Some("git@example:repo".into()),
            ..Default::default()
        }
    };
    for (r, field) in [
        (spawn(None, None, Some("do it")), "title:"),
        (spawn(None, Some("t"), None), "instructions:"),
        (spawn(None, Some("t"), Some(" ")), "instructions:"),
    ] {
        let e = coders
            .spawn_coder(req(r, &op))
            .await
            .expect_err("missing field");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().starts_with(field), "{}", e.message());
    }
    let e = coders
        .spawn_coder(req(
            spawn(Some(Uuid::new_v4().to_string()), None, None),
            &op,
        ))
        .await
        .expect_err("unknown task");
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(cluster.count(), 0, "refusals create nothing");

    let spawned = coders
        .spawn_coder(req(
            spawn(None, Some("port the parser"), Some("do it")),
            &op,
        ))
        .await?
        .into_inner();
    let task_id = spawned
        .task_id
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no task id"))?;
    let env = cluster.env(&spawned.job_name)?;
    assert_eq!(env["GENESIS_TASK_ID"], task_id);
    let coder = env["GENESIS_CODER_TOKEN"].clone();
    let created = tasks
        .get_task(req(
            v1::GetTaskRequest {
                tenant_id: a.to_string(),
                task_id: task_id.clone(),
            },
            &coder,
        ))
        .await?
        .into_inner();
    assert_eq!(created.title, "port the parser");
    assert_eq!(created.repository, "git@example:repo");

    // One coder per task.
    let e = coders
        .spawn_coder(req(spawn(Some(task_id.clone()), None, None), &op))
        .await
        .expect_err("already has a coder");
    assert_eq!(e.code(), Code::FailedPrecondition);

    coders
        .stop_coder(req(
            v1::StopCoderRequest {
                tenant_id: a.to_string(),
                coder_id: spawned.job_name.clone(),
            },
            &op,
        ))
        .await?;
    let e = tasks
        .get_task(req(
            v1::GetTaskRequest {
                tenant_id: a.to_string(),
                task_id: task_id.clone(),
            },
            &coder,
        ))
        .await
        .expect_err("stopped");
    assert_eq!(e.code(), Code::Unauthenticated);

    // The stopped coder's task is handed back: pending, no coder, so a new
    // coder can run it.
    let back = tasks
        .get_task(req(
            v1::GetTaskRequest {
                tenant_id: a.to_string(),
                task_id: task_id.clone(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(
        (back.status.as_str(), back.coder_id.as_deref()),
        ("pending", None)
    );
    let again = coders
        .spawn_coder(req(spawn(Some(task_id.clone()), None, None), &op))
        .await?
        .into_inner();
    assert_eq!(again.task_id.as_deref(), Some(task_id.as_str()));
    assert_ne!(again.job_name, spawned.job_name, "a new coder");
    // A settled task stays settled when its coder is stopped afterwards.
    tasks
        .complete_task(req(
            v1::CompleteTaskRequest {
                tenant_id: a.to_string(),
                task_id: task_id.clone(),
                status: "failed".into(),
                ..Default::default()
            },
            &op,
        ))
        .await?;
    coders
        .stop_coder(req(
            v1::StopCoderRequest {
                tenant_id: a.to_string(),
                coder_id: again.job_name.clone(),
            },
            &op,
        ))
        .await
        .ok();
    let settled_back = tasks
        .get_task(req(
            v1::GetTaskRequest {
                tenant_id: a.to_string(),
                task_id: task_id.clone(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(settled_back.status, "failed");

    // A settled task gets no coder.
    let settled = tasks
        .create_task(req(new_task(a, "done already"), &op))
        .await?
        .into_inner();
    tasks
        .complete_task(req(
            v1::CompleteTaskRequest {
                tenant_id: a.to_string(),
                task_id: settled.id.clone(),
                status: "failed".into(),
                ..Default::default()
            },
            &op,
        ))
        .await?;
    let e = coders
        .spawn_coder(req(spawn(Some(settled.id.clone()), None, None), &op))
        .await
        .expect_err("settled");
    assert_eq!(e.code(), Code::FailedPrecondition);
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn spawn_coder_without_the_control_url_is_refused_and_coder_tokens_are_never_minted_by_hand(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(a)).await?;
    let root = token(&store, TokenScope::Operator, None).await?;
    let cluster = Cluster::start().await?;
    let mut config = coder_config(&pool, &cluster);
    config.coder_control_url = None;
    let h = start(config).await?;
    let ch = h.channel().await?;
    let mut tasks = v1::coding_task_service_client::CodingTaskServiceClient::new(ch.clone());
    let mut coders = v1::coder_service_client::CoderServiceClient::new(ch.clone());
    let task = tasks
        .create_task(req(new_task(a, "fix the build"), &op))
        .await?
        .into_inner();
    let before = store.tokens().list(Some(a)).await?.len();
    let e = coders
        .spawn_coder(req(
            v1::SpawnCoderRequest {
                tenant_id: a.to_string(),
                name: "c3".into(),
                task_id: Some(task.id.clone()),
                ..Default::default()
            },
            &op,
        ))
        .await
        .expect_err("no control URL");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message().contains("GENESIS_CODER_CONTROL_URL"),
        "{}",
        e.message()
    );
    assert_eq!(cluster.count(), 0);
    assert_eq!(store.tokens().list(Some(a)).await?.len(), before);
    let still = tasks
        .get_task(req(
            v1::GetTaskRequest {
                tenant_id: a.to_string(),
                task_id: task.id.clone(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!((still.status.as_str(), still.coder_id), ("pending", None));

    // Only SpawnCoder mints coder tokens: CreateToken refuses the scope.
    let mut tokens = v1::token_service_client::TokenServiceClient::new(ch);
    let e = tokens
        .create_token(req(
            v1::CreateTokenRequest {
                tenant_id: Some(a.to_string()),
                scope: "coder".into(),
                label: "by hand".into(),
                ..Default::default()
            },
            &root,
        ))
        .await
        .expect_err("coder scope by hand");
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn coder_logs_reads_the_tenant_s_coder_and_refuses_everyone_else(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let op = token(&store, TokenScope::Operator, Some(a)).await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let cluster = Cluster::start().await?;
    let h = start(coder_config(&pool, &cluster)).await?;
    let ch = h.channel().await?;
    let mut tasks = v1::coding_task_service_client::CodingTaskServiceClient::new(ch.clone());
    let mut coders = v1::coder_service_client::CoderServiceClient::new(ch.clone());
    let spawn = |tenant: Uuid, task: &str| v1::SpawnCoderRequest {
        tenant_id: tenant.to_string(),
        name: "logger".into(),
        task_id: Some(task.to_owned()),
        ..Default::default()
    };
    let logs = |tenant: Uuid, task: &str, tail_lines: Option<i32>| v1::CoderLogsRequest {
        tenant_id: tenant.to_string(),
        task_id: task.to_owned(),
        tail_lines,
    };

    let own = tasks
        .create_task(req(new_task(a, "fix the build"), &op))
        .await?
        .into_inner();
    let spawned = coders
        .spawn_coder(req(spawn(a, &own.id), &op))
        .await?
        .into_inner();
    let coder = cluster.env(&spawned.job_name)?["GENESIS_CODER_TOKEN"].clone();

    // The Job has no pod yet.
    let e = coders
        .coder_logs(req(logs(a, &own.id, None), &op))
        .await
        .expect_err("no pod yet");
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
    assert!(e.message().contains("has no pod yet"), "{}", e.message());

    let pod = cluster.run_pod(&spawned.job_name, "compiling\ntesting\nall green\n")?;
    let tail = coders
        .coder_logs(req(logs(a, &own.id, Some(2)), &op))
        .await?
        .into_inner();
    assert_eq!(tail.pod_name, pod);
    assert_eq!(tail.text, "testing\nall green\n");
    assert!(tail.truncated, "the first line was left out");
    let all = coders
        .coder_logs(req(logs(a, &own.id, None), &op))
        .await?
        .into_inner();
    assert_eq!(
        (all.text.as_str(), all.truncated),
        ("compiling\ntesting\nall green\n", false)
    );

    // Tenant b's coder: NOT_FOUND to a's operator, exactly as no coder is.
    let theirs = tasks
        .create_task(req(new_task(b, "tenant b's task"), &op_b))
        .await?
        .into_inner();
    let their_coder = coders
        .spawn_coder(req(spawn(b, &theirs.id), &op_b))
        .await?
        .into_inner();
    cluster.run_pod(&their_coder.job_name, "tenant b's output\n")?;
    let foreign = coders
        .coder_logs(req(logs(a, &theirs.id, None), &op))
        .await
        .expect_err("another tenant's task");
    let missing_id = Uuid::new_v4().to_string();
    let missing = coders
        .coder_logs(req(logs(a, &missing_id, None), &op))
        .await
        .expect_err("no such task");
    assert_eq!(foreign.code(), Code::NotFound, "{}", foreign.message());
    assert_eq!(missing.code(), Code::NotFound, "{}", missing.message());
    assert_eq!(
        foreign.message().replace(&theirs.id, "ID"),
        missing.message().replace(&missing_id, "ID")
    );
    // Naming tenant b with a's token is the tenant check's refusal.
    let e = coders
        .coder_logs(req(logs(b, &theirs.id, None), &op))
        .await
        .expect_err("a's token on tenant b");
    assert_eq!(e.code(), Code::PermissionDenied);
    // b's own operator reads it.
    let read = coders
        .coder_logs(req(logs(b, &theirs.id, None), &op_b))
        .await?
        .into_inner();
    assert_eq!(read.text, "tenant b's output\n");

    // Bad input is refused at the edge: the cluster hears nothing.
    let before = cluster.hits();
    for (r, field) in [
        (logs(a, "not-a-uuid", None), "task_id:"),
        (logs(a, "", None), "task_id:"),
        (logs(a, &own.id, Some(0)), "tail_lines:"),
        (logs(a, &own.id, Some(10_001)), "tail_lines:"),
    ] {
        let e = coders.coder_logs(req(r, &op)).await.expect_err("invalid");
        assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
        assert!(e.message().starts_with(field), "{}", e.message());
    }
    // A coder token, even for its own task, is refused at the gate.
    let e = coders
        .coder_logs(req(logs(a, &own.id, None), &coder))
        .await
        .expect_err("coder token");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    assert_eq!(cluster.hits(), before, "nothing reached the cluster");
    assert!(!genesis_control::auth::coder_may_call(
        "/genesis.v1.CoderService/CoderLogs"
    ));
    h.stop().await
}

/// A reported attempt of `model`, served as a dated id, with the usage.
fn coder_attempt(provider: &str, outcome: &str, input: i64, output: i64) -> v1::CallAttempt {
    v1::CallAttempt {
        requested_model: "claude-opus-4-8".into(),
        served_model: if outcome == "success" {
            "claude-opus-4-8-20261101".into()
        } else {
            String::new()
        },
        provider: provider.into(),
        credential_name: "primary".into(),
        outcome: outcome.into(),
        input_tokens: input,
        output_tokens: output,
        latency_ms: 40,
        ..Default::default()
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_coder_s_llm_calls_are_held_priced_and_billed_to_its_own_task(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let _soa = soa(&store, a).await?;
    let op = token(&store, TokenScope::Operator, Some(a)).await?;
    let cluster = Cluster::start().await?;
    let h = start(coder_config(&pool, &cluster)).await?;
    let ch = h.channel().await?;
    let mut tasks = v1::coding_task_service_client::CodingTaskServiceClient::new(ch.clone());
    let mut coders = v1::coder_service_client::CoderServiceClient::new(ch.clone());
    let own = tasks
        .create_task(req(new_task(a, "fix the build"), &op))
        .await?
        .into_inner();
    let other = tasks
        .create_task(req(new_task(a, "another task"), &op))
        .await?
        .into_inner();
    let spawned = coders
        .spawn_coder(req(
            v1::SpawnCoderRequest {
                tenant_id: a.to_string(),
                name: "c1".into(),
                task_id: Some(own.id.clone()),
                ..Default::default()
            },
            &op,
        ))
        .await?
        .into_inner();
    let coder = cluster.env(&spawned.job_name)?["GENESIS_CODER_TOKEN"].clone();
    let ids = |task: &str| (a.to_string(), task.to_owned());

    // The chain: the task's own couple at the coder's site, names only.
    let chain = tasks
        .task_preset_chain(req(
            v1::TaskPresetChainRequest {
                tenant_id: a.to_string(),
                task_id: own.id.clone(),
            },
            &coder,
        ))
        .await?
        .into_inner();
    assert_eq!(chain.resolved_site_id, "Coder:Default");
    assert_eq!(chain.couples.len(), 1);
    assert_eq!(
        (
            chain.couples[0].model.as_str(),
            chain.couples[0].provider.as_str()
        ),
        ("claude-opus-4-8", "anthropic")
    );

    // A hold within the default 60 USD window is granted; one whose worst
    // case passes it is not, and holds nothing.
    let reserve = |task: &str, prompt: i64| {
        let (tenant_id, task_id) = ids(task);
        v1::ReserveCoderCreditRequest {
            tenant_id,
            task_id,
            models: vec!["claude-opus-4-8".into()],
            prompt_tokens: prompt,
            max_output_tokens: 4096,
        }
    };
    let held = tasks
        .reserve_coder_credit(req(reserve(&own.id, 10_000), &coder))
        .await?
        .into_inner();
    assert!(held.granted, "{held:?}");
    // 10k prompt tokens at 15 USD/Mtok (the cache-write price is dearer,
    // 18.75) plus 4096 output tokens at 75 USD/Mtok.
    assert!(
        held.reserved_usd > 0.45 && held.reserved_usd < 0.6,
        "{held:?}"
    );
    assert_eq!(held.limit_usd, 60.0);
    let refused = tasks
        .reserve_coder_credit(req(reserve(&own.id, 10_000_000), &coder))
        .await?
        .into_inner();
    assert!(!refused.granted, "{refused:?}");
    assert_eq!(refused.reserved_usd, 0.0);
    let s = tasks
        .reserve_coder_credit(req(reserve(&own.id, -1), &coder))
        .await
        .expect_err("a negative count");
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    assert!(s.message().contains("prompt_tokens"), "{s:?}");

    // An attempt is priced by control from its usage: one million prompt
    // tokens and 100k output of the dated id, priced as claude-opus-4-8.
    let record = |task: &str, inv: &str, attempt: v1::CallAttempt| {
        let (tenant_id, task_id) = ids(task);
        v1::RecordCoderAttemptRequest {
            tenant_id,
            task_id,
            invocation_id: inv.into(),
            attempt: Some(attempt),
        }
    };
    let failed = tasks
        .record_coder_attempt(req(
            record(
                &own.id,
                "turn-1",
                coder_attempt("anthropic", "rate_limited", 0, 0),
            ),
            &coder,
        ))
        .await?
        .into_inner();
    assert_eq!(failed.cost_usd, 0.0);
    let paid = tasks
        .record_coder_attempt(req(
            record(
                &own.id,
                "turn-1",
                coder_attempt("anthropic", "success", 1_000_000, 100_000),
            ),
            &coder,
        ))
        .await?
        .into_inner();
    assert!((paid.cost_usd - 22.5).abs() < 1e-9, "{paid:?}");
    assert_eq!(
        paid.snapshot_id, failed.snapshot_id,
        "one snapshot per call"
    );
    assert!((paid.snapshot_cost_usd - 22.5).abs() < 1e-9, "{paid:?}");
    // The scripted provider is free whatever its usage.
    let free = tasks
        .record_coder_attempt(req(
            record(
                &own.id,
                "turn-2",
                coder_attempt("scripted", "success", 1_000_000, 1_000_000),
            ),
            &coder,
        ))
        .await?
        .into_inner();
    assert_eq!(free.cost_usd, 0.0);

    // Refusals write nothing: a bad outcome, an operator token (no one but
    // the coder writes its bill), the coder on another task.
    let s = tasks
        .record_coder_attempt(req(
            record(&own.id, "turn-3", coder_attempt("anthropic", "great", 5, 5)),
            &coder,
        ))
        .await
        .expect_err("an unknown outcome");
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    assert!(s.message().contains("outcome"), "{s:?}");
    let s = tasks
        .record_coder_attempt(req(
            record(
                &own.id,
                "turn-3",
                coder_attempt("anthropic", "success", 5, 5),
            ),
            &op,
        ))
        .await
        .expect_err("an operator token");
    assert_eq!(s.code(), Code::PermissionDenied, "{s:?}");
    let s = tasks
        .reserve_coder_credit(req(reserve(&own.id, 10), &op))
        .await
        .expect_err("an operator token");
    assert_eq!(s.code(), Code::PermissionDenied, "{s:?}");
    for s in [
        tasks
            .record_coder_attempt(req(
                record(
                    &other.id,
                    "turn-1",
                    coder_attempt("anthropic", "success", 5, 5),
                ),
                &coder,
            ))
            .await
            .expect_err("another task"),
        tasks
            .reserve_coder_credit(req(reserve(&other.id, 10), &coder))
            .await
            .expect_err("another task"),
        tasks
            .task_preset_chain(req(
                v1::TaskPresetChainRequest {
                    tenant_id: a.to_string(),
                    task_id: other.id.clone(),
                },
                &coder,
            ))
            .await
            .expect_err("another task"),
    ] {
        assert_eq!(s.code(), Code::PermissionDenied, "{s:?}");
    }

    // The task carries its bill; the other task nothing.
    let get = |task: &str| v1::GetTaskRequest {
        tenant_id: a.to_string(),
        task_id: task.to_owned(),
    };
    let seen = tasks.get_task(req(get(&own.id), &op)).await?.into_inner();
    assert!((seen.cost_usd - 22.5).abs() < 1e-9, "{}", seen.cost_usd);
    let seen = tasks.get_task(req(get(&other.id), &op)).await?.into_inner();
    assert_eq!(seen.cost_usd, 0.0);
    // The tenant's window drew the coder's spend down.
    let window = store
        .credit()
        .current(
            a,
            genesis_store::credit::week_start(chrono::Utc::now()),
            60.0,
        )
        .await?;
    assert!((window.spent_usd - 22.5).abs() < 1e-9, "{window:?}");

    // Settled, the task's coder token is gone: no more calls are billed.
    tasks
        .complete_task(req(
            v1::CompleteTaskRequest {
                tenant_id: a.to_string(),
                task_id: own.id.clone(),
                status: "completed".into(),
                ..Default::default()
            },
            &coder,
        ))
        .await?;
    let s = tasks
        .record_coder_attempt(req(
            record(
                &own.id,
                "turn-9",
                coder_attempt("anthropic", "success", 5, 5),
            ),
            &coder,
        ))
        .await
        .expect_err("a revoked token");
    assert_eq!(s.code(), Code::Unauthenticated, "{s:?}");
    h.stop().await
}

/// What the kubelet does with a coder Job, for the end-to-end test: runs
/// the container's command as a local process with the Job's environment,
/// the named entries of a secret volume written as files (the env variable
/// naming the mount path pointed at them), and kills the process when the
/// Job is deleted. Strict like the rest of the stand-in: a Job whose
/// command is not a workspace binary, whose env takes a value from
/// anywhere but a literal, or whose volume names a Secret or an entry that
/// does not exist is not run, and the refusal is recorded.
struct Kubelet {
    /// Secret name → entry → value.
    secrets: HashMap<String, HashMap<String, String>>,
    /// Each Job run: its name → the exit code (None: killed or running).
    runs: Arc<Mutex<BTreeMap<String, Option<i32>>>>,
    /// Why a Job was not run.
    refused: Arc<Mutex<Vec<String>>>,
    /// Every file of a run's stderr, for the failure message.
    logs: Arc<Mutex<BTreeMap<String, std::path::PathBuf>>>,
    scratch: std::path::PathBuf,
}

impl Kubelet {
    fn new(secrets: HashMap<String, HashMap<String, String>>) -> anyhow::Result<Kubelet> {
        let scratch = std::env::temp_dir().join(format!("c42-kubelet-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&scratch)?;
        Ok(Kubelet {
            secrets,
            runs: Arc::default(),
            refused: Arc::default(),
            logs: Arc::default(),
            scratch,
        })
    }

    /// The command, env and mounted files of `job`, or why the kubelet
    /// would not start it.
    fn prepare(&self, name: &str, job: &Value) -> Result<std::process::Command, String> {
        let pod = &job["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        let command: Vec<&str> = c["command"]
            .as_array()
            .ok_or("no command: the stand-in runs only a workspace binary")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let program = command.first().ok_or("an empty command")?;
        if program.contains('/') || !program.starts_with("genesis-") {
            return Err(format!("{program:?} is not a workspace binary"));
        }
        let path = genesis_e2e::binary(program).map_err(|e| e.to_string())?;
        let mut mounts: HashMap<String, std::path::PathBuf> = HashMap::new();
        for v in pod["volumes"].as_array().into_iter().flatten() {
            let secret = v["secret"]["secretName"]
                .as_str()
                .ok_or("a volume that is not a Secret")?;
            let entries = self
                .secrets
                .get(secret)
                .ok_or_else(|| format!("secret {secret:?} not found"))?;
            let dir = self
                .scratch
                .join(name)
                .join(v["name"].as_str().unwrap_or("vol"));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            for item in v["secret"]["items"].as_array().into_iter().flatten() {
                let key = item["key"].as_str().unwrap_or_default();
                let value = entries
                    .get(key)
                    .ok_or_else(|| format!("secret {secret:?} has no key {key:?}"))?;
                let file = dir.join(item["path"].as_str().unwrap_or(key));
                std::fs::write(&file, value).map_err(|e| e.to_string())?;
            }
            for m in c["volumeMounts"].as_array().into_iter().flatten() {
                if m["name"] == v["name"] {
                    mounts.insert(
                        m["mountPath"].as_str().unwrap_or_default().to_owned(),
                        dir.clone(),
                    );
                }
            }
        }
        let mut cmd = std::process::Command::new(path);
        cmd.args(&command[1..]).env_clear();
        cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        cmd.env("HOME", self.scratch.join(name));
        cmd.env("RUST_LOG", "info");
        for e in c["env"].as_array().into_iter().flatten() {
            let key = e["name"].as_str().unwrap_or_default();
            let value = e["value"]
                .as_str()
                .ok_or_else(|| format!("env {key}: only literal values are run"))?;
            // The mount path as seen inside the container.
            let value = mounts
                .get(value)
                .map(|d| d.display().to_string())
                .unwrap_or_else(|| value.to_owned());
            cmd.env(key, value);
        }
        Ok(cmd)
    }

    /// Watch `cluster`'s Jobs: start each new one once, kill a running one
    /// whose Job is gone.
    fn run(self, cluster: &Cluster) -> tokio::task::JoinHandle<()> {
        let jobs = cluster.jobs.clone();
        tokio::spawn(async move {
            let mut children: HashMap<String, tokio::process::Child> = HashMap::new();
            loop {
                let snapshot: Vec<(String, Value)> = jobs
                    .lock()
                    .map(|j| j.iter().map(|((_, n), v)| (n.clone(), v.clone())).collect())
                    .unwrap_or_default();
                for (name, job) in &snapshot {
                    let known = self.runs.lock().is_ok_and(|r| r.contains_key(name));
                    if known {
                        continue;
                    }
                    if let Ok(mut r) = self.runs.lock() {
                        r.insert(name.clone(), None);
                    }
                    match self.prepare(name, job) {
                        Ok(cmd) => {
                            let log = self.scratch.join(format!("{name}.stderr"));
                            let mut cmd = tokio::process::Command::from(cmd);
                            if let Ok(f) = std::fs::File::create(&log) {
                                cmd.stderr(f);
                            }
                            cmd.stdout(std::process::Stdio::null()).kill_on_drop(true);
                            match cmd.spawn() {
                                Ok(child) => {
                                    children.insert(name.clone(), child);
                                    if let Ok(mut l) = self.logs.lock() {
                                        l.insert(name.clone(), log);
                                    }
                                }
                                Err(e) => {
                                    if let Ok(mut r) = self.refused.lock() {
                                        r.push(format!("{name}: {e}"));
                                    }
                                }
                            }
                        }
                        Err(why) => {
                            if let Ok(mut r) = self.refused.lock() {
                                r.push(format!("{name}: {why}"));
                            }
                        }
                    }
                }
                let live: std::collections::HashSet<&String> =
                    snapshot.iter().map(|(n, _)| n).collect();
                let mut finished = Vec::new();
                for (name, child) in children.iter_mut() {
                    if let Ok(Some(status)) = child.try_wait() {
                        if let Ok(mut r) = self.runs.lock() {
                            r.insert(name.clone(), status.code());
                        }
                        finished.push(name.clone());
                    } else if !live.contains(name) {
                        // The Job was deleted: its pod is killed.
                        let _ = child.kill().await;
                        finished.push(name.clone());
                    }
                }
                for n in finished {
                    children.remove(&n);
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
    }
}

/// The patch the scripted model applies: README gains a line.
const SCRATCH_DIFF: &str = "diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1 +1,2 @@
 # scratch
+The build passes.
";

/// A scratch git repository with one commit, as a task names it.
fn scratch_repository() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("c42-repo-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("README.md"), "# scratch\n")?;
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "README.md"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "-m",
            "scratch",
        ],
    ] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &dir)
            .output()?;
        anyhow::ensure!(out.status.success(), "git {args:?}: {out:?}");
    }
    Ok(dir)
}

/// End to end without a cluster: SpawnCoder creates the Job, the kubelet
/// stand-in runs its command — the real `genesis-coder` — with the Job's
/// environment against this control, PostgreSQL, NATS and a strict
/// Anthropic stand-in scripted to apply a patch to a scratch repository.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_spawned_coder_runs_its_task_to_a_patch_and_is_gone(pool: PgPool) -> anyhow::Result<()> {
    if genesis_e2e::binary("genesis-coder").is_err() {
        match std::env::var("CI").as_deref() {
            Ok("true") => {
                anyhow::bail!("genesis-coder is not built (cargo build --workspace --bins)")
            }
            _ => {
                println!("skipped: genesis-coder is not built (cargo build --workspace --bins)");
                return Ok(());
            }
        }
    }
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let soa = soa(&store, a).await?;
    let op = token(&store, TokenScope::Operator, Some(a)).await?;
    // The tenant's own key, bound to it alone: the one a coder may hold.
    let keys = std::env::temp_dir().join(format!("c42-keys-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&keys)?;
    std::fs::write(keys.join("ACME_ANTHROPIC"), "sk-acme-coder")?;
    std::fs::write(keys.join("ACME_ANTHROPIC.tenants"), a.to_string())?;
    let standin = genesis_llm_standin::StandIn::builder()
        .key("sk-acme-coder")
        .anthropic(
            genesis_llm_standin::Reply::tool_call("apply_diff", json!({"diff": SCRATCH_DIFF}))
                .usage(genesis_llm_standin::WireUsage::anthropic(1200, 80, 0, 0)),
        )
        .anthropic(
            genesis_llm_standin::Reply::tool_call(
                "task_complete",
                json!({"summary": "README now says the build passes."}),
            )
            .usage(genesis_llm_standin::WireUsage::anthropic(1500, 40, 0, 0)),
        )
        .start()
        .await?;
    let repo = scratch_repository()?;
    let cluster = Cluster::start().await?;
    let kubelet = Kubelet::new(HashMap::from([(
        "genesis-llm".to_owned(),
        HashMap::from([("ACME_ANTHROPIC".to_owned(), "sk-acme-coder".to_owned())]),
    )]))?;
    let runs = kubelet.runs.clone();
    let refused = kubelet.refused.clone();
    let logs = kubelet.logs.clone();
    let scratch = kubelet.scratch.clone();
    let kubelet_task = kubelet.run(&cluster);

    let mut config = coder_config(&pool, &cluster);
    config.coder_key_secret = Some("genesis-llm".into());
    config.coder_anthropic_base_url = Some(standin.base_url());
    config.llm_key_dir = Some(keys.clone());
    // The coder reaches this control at its real address.
    let h = start_knowing_address(config, |grpc, c| {
        c.coder_control_url = Some(format!("http://{grpc}"));
    })
    .await?;
    let ch = h.channel().await?;
    let mut tasks = v1::coding_task_service_client::CodingTaskServiceClient::new(ch.clone());
    let mut coders = v1::coder_service_client::CoderServiceClient::new(ch.clone());
    let mut llm = v1::llm_service_client::LlmServiceClient::new(ch.clone());
    let preset = llm
        .upsert_preset(req(
            v1::UpsertPresetRequest {
                tenant_id: a.to_string(),
                preset: Some(v1::Preset {
                    name: "coder".into(),
                    primary: Some(v1::PresetCouple {
                        model: "claude-opus-4-8".into(),
                        provider: "anthropic".into(),
                        backend: "api".into(),
                        credential_names: vec!["ACME_ANTHROPIC".into()],
                    }),
                    ..Default::default()
                }),
            },
            &op,
        ))
        .await?
        .into_inner();
    let task = tasks
        .create_task(req(
            v1::CreateTaskRequest {
                tenant_id: a.to_string(),
                title: "say the build passes".into(),
                instructions: "Add a line to README.md saying the build passes.".into(),
                preset_id: Some(preset.id.clone()),
                repository: repo.display().to_string(),
                ..Default::default()
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(task.status, "pending");
    let spawned = coders
        .spawn_coder(req(
            v1::SpawnCoderRequest {
                tenant_id: a.to_string(),
                name: "c1".into(),
                task_id: Some(task.id.clone()),
                ..Default::default()
            },
            &op,
        ))
        .await?
        .into_inner();
    let coder_token = cluster.env(&spawned.job_name)?["GENESIS_CODER_TOKEN"].clone();
    let get = v1::GetTaskRequest {
        tenant_id: a.to_string(),
        task_id: task.id.clone(),
    };
    let mut seen_running = false;
    let done = tokio::time::timeout(std::time::Duration::from_secs(90), async {
        loop {
            let t = tasks.get_task(req(get.clone(), &op)).await?.into_inner();
            seen_running |= t.status == "running";
            if t.status == "completed" || t.status == "failed" {
                return anyhow::Ok(t);
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    let stderr = logs
        .lock()
        .ok()
        .and_then(|l| l.get(&spawned.job_name).cloned())
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let refusals = refused.lock().map(|r| r.clone()).unwrap_or_default();
    let done = match done {
        Ok(t) => t?,
        Err(_) => anyhow::bail!(
            "the coder did not settle its task; refused {refusals:?}; its log:\n{stderr}"
        ),
    };
    assert!(refusals.is_empty(), "{refusals:?}");
    assert_eq!(done.status, "completed", "{done:?}\n{stderr}");
    assert!(seen_running, "queued → running → completed");
    assert_eq!(done.result_summary, "README now says the build passes.");
    // The patch is an artifact, and it is the change the model made.
    let listed = tasks
        .get_task(req(get.clone(), &op))
        .await?
        .into_inner()
        .artifacts;
    let id_of = |kind: &str| {
        listed
            .iter()
            .find(|a| a.kind == kind)
            .map(|a| a.id.clone())
            .ok_or_else(|| anyhow::anyhow!("no {kind} artifact: {listed:?}"))
    };
    let read = |artifact_id: String| v1::GetArtifactRequest {
        tenant_id: a.to_string(),
        task_id: task.id.clone(),
        artifact_id,
    };
    let patch = tasks
        .get_artifact(req(read(id_of("patch")?), &op))
        .await?
        .into_inner();
    assert!(
        patch.content.contains("+The build passes."),
        "{}",
        patch.content
    );
    assert_eq!(
        patch.artifact.map(|a| a.size_bytes),
        Some(patch.content.len() as i64)
    );
    let summary = tasks
        .get_artifact(req(read(id_of("summary")?), &op))
        .await?
        .into_inner();
    assert!(
        summary.content.contains("README now says"),
        "{}",
        summary.content
    );
    // The operator's view through genesisctl: the task's cost in the list,
    // its chain, and the patch saved byte for byte for `git apply`.
    // Awaited, never blocking: control answers on this test's one thread.
    let ctl = async |args: &[&str]| -> anyhow::Result<std::process::Output> {
        let cmd = genesis_e2e::bin_command(
            "genesisctl",
            args,
            &[
                ("GENESIS_ENDPOINT", format!("http://{}", h.grpc)),
                ("GENESIS_TOKEN", op.clone()),
                ("GENESIS_TENANT", a.to_string()),
            ],
        )?;
        Ok(tokio::process::Command::from(cmd).output().await?)
    };
    let out = ctl(&["task", "list"]).await?;
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        listing.lines().next().is_some_and(|h| h.contains("COST")),
        "{listing}"
    );
    assert!(
        listing.contains(" 0.049"),
        "the task's cost is listed: {listing}"
    );
    let out = ctl(&["-o", "json", "task", "chain", &task.id]).await?;
    assert!(out.status.success(), "{out:?}");
    let chain: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        chain["couples"][0]["credential_names"],
        json!(["ACME_ANTHROPIC"])
    );
    let saved = scratch.join("changes.patch");
    let out = ctl(&[
        "task",
        "artifact",
        &task.id,
        &id_of("patch")?,
        "--save",
        &saved.display().to_string(),
    ])
    .await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&saved)?, patch.content);
    let out = ctl(&["task", "artifact", &task.id, "not-a-uuid"]).await?;
    assert_eq!(out.status.code(), Some(2), "a usage error: {out:?}");
    // Another task's id with this artifact: the same NOT_FOUND as none.
    let s = tasks
        .get_artifact(req(
            v1::GetArtifactRequest {
                task_id: Uuid::new_v4().to_string(),
                ..read(id_of("patch")?)
            },
            &op,
        ))
        .await
        .expect_err("another task");
    assert_eq!(s.code(), Code::NotFound, "{s:?}");
    // Two model turns, each paid once, billed to the task at the
    // claude-opus-4-8 price: (1200 + 1500) × 15 + (80 + 40) × 75 per Mtok.
    assert_eq!(standin.request_count(), 2);
    assert!(
        (done.cost_usd - 0.0495).abs() < 1e-9,
        "the task's bill: {}",
        done.cost_usd
    );
    // The steering SOA hears once; the Job is gone; the token is refused.
    let events =
        genesis_store::inspect::events_of_kind(&pool, soa.id, "DependencyCompleted").await?;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].1["codingTaskId"], task.id);
    assert_eq!(cluster.count(), 0, "settling stopped the coder's Job");
    let s = tasks
        .get_task(req(get.clone(), &coder_token))
        .await
        .expect_err("a settled task's coder token");
    assert_eq!(s.code(), Code::Unauthenticated, "{s:?}");
    // The coder process is gone too (it exited, or the Job's deletion
    // killed it).
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let running = runs
                .lock()
                .map(|r| r.get(&spawned.job_name).is_some_and(Option::is_none))
                .unwrap_or(false);
            if !running {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .ok();
    kubelet_task.abort();
    let _ = std::fs::remove_dir_all(&repo);
    let _ = std::fs::remove_dir_all(&keys);
    let _ = std::fs::remove_dir_all(&scratch);
    h.stop().await
}
