//! The coder spawner against a local HTTP server that speaks the Kubernetes
//! Job API paths the spawner uses (POST/GET/DELETE
//! /apis/batch/v1/namespaces/{ns}/jobs), reached through a real kube::Client.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use genesis_lanes::LanesError;
use genesis_lanes::coders::{
    CoderPhase, CoderResources, CoderSpawner, CoderSpec, LABEL_MANAGED_BY, LABEL_TASK,
    LABEL_TENANT, ResolvedCouple,
};
use serde_json::{Value, json};
use uuid::Uuid;

#[derive(Default)]
struct Cluster {
    /// (namespace, name) → Job JSON.
    jobs: HashMap<(String, String), Value>,
    selectors: Vec<String>,
    deletes: Vec<Value>,
}

type Shared = Arc<Mutex<Cluster>>;

fn status(code: u16, reason: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(code).unwrap(),
        Json(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}),
        ),
    )
        .into_response()
}

fn labels_match(job: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|pair| {
        let (k, v) = pair.split_once('=').unwrap();
        job["metadata"]["labels"][k].as_str() == Some(v)
    })
}

async fn create(
    State(c): State<Shared>,
    Path(ns): Path<String>,
    Json(mut job): Json<Value>,
) -> Response {
    let name = job["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut c = c.lock().unwrap();
    if c.jobs.contains_key(&(ns.clone(), name.clone())) {
        return status(409, "AlreadyExists", "job exists");
    }
    if job["apiVersion"] != "batch/v1" || job["kind"] != "Job" {
        return status(400, "BadRequest", "not a batch/v1 Job");
    }
    job["metadata"]["namespace"] = json!(ns);
    job["metadata"]["uid"] = json!(Uuid::new_v4().to_string());
    c.jobs.insert((ns, name), job.clone());
    (StatusCode::CREATED, Json(job)).into_response()
}

async fn list(
    State(c): State<Shared>,
    Path(ns): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let selector = q.get("labelSelector").cloned().unwrap_or_default();
    let mut c = c.lock().unwrap();
    c.selectors.push(selector.clone());
    let items: Vec<Value> = c
        .jobs
        .iter()
        .filter(|((n, _), j)| *n == ns && labels_match(j, &selector))
        .map(|(_, j)| j.clone())
        .collect();
    Json(json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {"resourceVersion": "1"}, "items": items}))
        .into_response()
}

async fn get_one(State(c): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    match c.lock().unwrap().jobs.get(&(ns, name.clone())) {
        Some(j) => Json(j.clone()).into_response(),
        None => status(404, "NotFound", &format!("jobs.batch \"{name}\" not found")),
    }
}

async fn delete_one(
    State(c): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let mut c = c.lock().unwrap();
    let params: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    c.deletes.push(params);
    match c.jobs.remove(&(ns, name.clone())) {
        Some(_) => Json(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": "batch", "kind": "jobs"}}),
        )
        .into_response(),
        None => status(404, "NotFound", "gone"),
    }
}

async fn start() -> (Shared, kube::Client) {
    let shared: Shared = Arc::default();
    let app = Router::new()
        .route(
            "/apis/batch/v1/namespaces/{ns}/jobs",
            get(list).post(create),
        )
        .route(
            "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
            get(get_one).delete(delete_one),
        )
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let uri: http::Uri = format!("http://{addr}").parse().unwrap();
    genesis_lanes::install_crypto_provider();
    let client = kube::Client::try_from(kube::Config::new(uri)).unwrap();
    (shared, client)
}

fn spec(task: Uuid) -> CoderSpec {
    CoderSpec {
        image: "ghcr.io/genesis/coder:1".to_string(),
        resources: CoderResources::default(),
        couple: ResolvedCouple {
            model: "claude-opus-4-8".to_string(),
            provider: "anthropic".to_string(),
            backend: "api".to_string(),
        },
        env: BTreeMap::new(),
        task_id: task,
    }
}

#[tokio::test]
async fn spawn_list_and_stop_a_coder_job() {
    let (cluster, client) = start().await;
    let spawner = CoderSpawner::new(client, "coders");
    let tenant = Uuid::new_v4();
    let task = Uuid::new_v4();
    let handle = spawner.spawn(tenant, spec(task)).await.unwrap();
    assert_eq!(handle.namespace, "coders");
    assert_eq!(handle.task_id, Some(task));
    assert_eq!(handle.phase, CoderPhase::Pending);
    {
        let c = cluster.lock().unwrap();
        let job = &c.jobs[&("coders".to_string(), handle.name.clone())];
        assert_eq!(job["metadata"]["labels"][LABEL_MANAGED_BY], "genesis");
        assert_eq!(job["metadata"]["labels"][LABEL_TENANT], tenant.to_string());
        assert_eq!(job["metadata"]["labels"][LABEL_TASK], task.to_string());
        assert_eq!(
            job["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"],
            true
        );
    }

    let listed = spawner.list(tenant).await.unwrap();
    assert_eq!(listed, vec![handle.clone()]);
    assert_eq!(
        cluster.lock().unwrap().selectors.last().unwrap(),
        &format!("app.kubernetes.io/managed-by=genesis,genesis.dev/tenant={tenant}")
    );

    spawner.stop(tenant, &handle.name).await.unwrap();
    assert!(cluster.lock().unwrap().jobs.is_empty());
    assert_eq!(
        cluster.lock().unwrap().deletes.last().unwrap()["propagationPolicy"],
        "Background"
    );
    assert!(spawner.list(tenant).await.unwrap().is_empty());
    assert!(matches!(
        spawner.stop(tenant, &handle.name).await,
        Err(LanesError::NotFound { kind: "coder", .. })
    ));
}

#[tokio::test]
async fn a_tenant_cannot_list_or_stop_another_tenants_coder() {
    let (cluster, client) = start().await;
    let spawner = CoderSpawner::new(client, "coders");
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let theirs = spawner.spawn(b, spec(Uuid::new_v4())).await.unwrap();
    assert!(spawner.list(a).await.unwrap().is_empty());
    assert!(matches!(
        spawner.stop(a, &theirs.name).await,
        Err(LanesError::NotFound { .. })
    ));
    assert_eq!(
        cluster.lock().unwrap().jobs.len(),
        1,
        "foreign job untouched"
    );
    assert!(cluster.lock().unwrap().deletes.is_empty());
}

#[tokio::test]
async fn invalid_spec_creates_nothing_and_api_errors_are_typed() {
    let (cluster, client) = start().await;
    let spawner = CoderSpawner::new(client, "coders");
    let mut bad = spec(Uuid::new_v4());
    bad.resources.memory_limit = "a lot".to_string();
    assert!(matches!(
        spawner.spawn(Uuid::new_v4(), bad).await,
        Err(LanesError::Validation { .. })
    ));
    assert!(cluster.lock().unwrap().jobs.is_empty());
    assert!(matches!(
        spawner.stop(Uuid::new_v4(), "Not_A_Name").await,
        Err(LanesError::Validation { field: "name", .. })
    ));
    // No API server answering: the failure is typed, not a panic.
    let uri: http::Uri = "http://127.0.0.1:9".parse().unwrap();
    let dead = CoderSpawner::from_config(kube::Config::new(uri), "coders").unwrap();
    assert!(matches!(
        dead.list(Uuid::new_v4()).await,
        Err(LanesError::ClusterUnavailable(_))
    ));
}

/// Runs only as the child of `from_env_without_configuration_is_cluster_unavailable`,
/// in a process whose environment has no kubeconfig and no in-cluster variables.
#[tokio::test]
async fn from_env_child_probe() {
    if std::env::var("GENESIS_LANES_FROM_ENV_CHILD").is_err() {
        return;
    }
    match CoderSpawner::from_env("coders").await {
        Err(LanesError::ClusterUnavailable(msg)) => println!("CLUSTER_UNAVAILABLE_OK {msg}"),
        other => println!("UNEXPECTED {other:?}"),
    }
}

#[test]
fn from_env_without_configuration_is_cluster_unavailable() {
    let dir = std::env::temp_dir().join(format!("genesis-lanes-{}", Uuid::new_v4()));
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "from_env_child_probe",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("GENESIS_LANES_FROM_ENV_CHILD", "1")
        .env("KUBECONFIG", dir.join("missing-kubeconfig"))
        .env("HOME", &dir)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("CLUSTER_UNAVAILABLE_OK"), "{stdout}");
}
