//! The coder spawner against a local HTTP server that speaks the Kubernetes
//! Job API paths the spawner uses (POST/GET/DELETE
//! /apis/batch/v1/namespaces/{ns}/jobs), reached through a real kube::Client.
//! The stand-in refuses what the API server's validation refuses of the
//! fields a coder Job sets, so a manifest it accepts is one a cluster takes.

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
    CoderContract, CoderPhase, CoderResources, CoderSpawner, CoderSpec, ENV_CODER_ID,
    ENV_CODER_TOKEN, ENV_CONTROL_URL, ENV_TASK_ID, ENV_TENANT_ID, LABEL_MANAGED_BY, LABEL_TASK,
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
    if let Err(why) = validate_job(&job) {
        return status(422, "Invalid", &why);
    }
    job["metadata"]["namespace"] = json!(ns);
    job["metadata"]["uid"] = json!(Uuid::new_v4().to_string());
    c.jobs.insert((ns, name), job.clone());
    (StatusCode::CREATED, Json(job)).into_response()
}

/// What the API server's validation refuses of the fields a coder Job
/// sets: a name that is not a DNS-1123 label, a label value over 63
/// characters or outside `[A-Za-z0-9._-]`, an env var name outside
/// `[-._a-zA-Z][-._a-zA-Z0-9]*`, and an env var with both `value` and
/// `valueFrom`.
fn validate_job(job: &Value) -> Result<(), String> {
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    let dns_label = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !dns_label {
        return Err(format!("metadata.name: Invalid value: {name:?}"));
    }
    for labels in [
        &job["metadata"]["labels"],
        &job["spec"]["template"]["metadata"]["labels"],
    ] {
        for (k, v) in labels.as_object().into_iter().flatten() {
            let v = v.as_str().unwrap_or_default();
            if v.len() > 63
                || !v
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            {
                return Err(format!("metadata.labels: Invalid value: {k}={v:?}"));
            }
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
                return Err(format!("env[].name: Invalid value: {n:?}"));
            }
            if e.get("value").is_some_and(|v| !v.is_null())
                && e.get("valueFrom").is_some_and(|v| !v.is_null())
            {
                return Err(format!(
                    "env[{n}].valueFrom: Invalid value: may not be specified when `value` is not empty"
                ));
            }
        }
    }
    Ok(())
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
        contract: None,
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
async fn the_coder_contract_reaches_the_job_environment() {
    let (cluster, client) = start().await;
    let spawner = CoderSpawner::new(client, "coders");
    let tenant = Uuid::new_v4();
    let task = Uuid::new_v4();
    let mut s = spec(task);
    s.contract = Some(CoderContract {
        control_url: "http://genesis-control.genesis.svc:50051".to_string(),
        token: "gen_secret-token".to_string(),
    });
    assert!(
        !format!("{s:?}").contains("gen_secret-token"),
        "Debug never prints the coder token"
    );
    let handle = spawner.spawn(tenant, s).await.unwrap();
    let env: BTreeMap<String, String> = {
        let c = cluster.lock().unwrap();
        let job = &c.jobs[&("coders".to_string(), handle.name.clone())];
        job["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["value"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(env[ENV_TASK_ID], task.to_string());
    assert_eq!(env[ENV_TENANT_ID], tenant.to_string());
    assert_eq!(env[ENV_CODER_ID], handle.name);
    assert_eq!(
        env[ENV_CONTROL_URL],
        "http://genesis-control.genesis.svc:50051"
    );
    assert_eq!(env[ENV_CODER_TOKEN], "gen_secret-token");

    // A contract that could not work creates nothing.
    let mut bad = spec(Uuid::new_v4());
    bad.contract = Some(CoderContract {
        control_url: "genesis-control:50051".to_string(),
        token: "t".to_string(),
    });
    assert!(matches!(
        spawner.spawn(tenant, bad).await,
        Err(LanesError::Validation {
            field: "control_url",
            ..
        })
    ));
    let mut bad = spec(Uuid::new_v4());
    bad.contract = Some(CoderContract {
        control_url: "http://c:1".to_string(),
        token: "has space".to_string(),
    });
    assert!(matches!(
        spawner.spawn(tenant, bad).await,
        Err(LanesError::Validation { field: "token", .. })
    ));
    assert_eq!(cluster.lock().unwrap().jobs.len(), 1);
}

#[tokio::test]
async fn the_stand_in_refuses_what_the_api_server_refuses() {
    let (cluster, client) = start().await;
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> = kube::Api::namespaced(client, "coders");
    let mut job = genesis_lanes::coders::build_job_manifest(
        Uuid::new_v4(),
        "Not_A_Label",
        &spec(Uuid::new_v4()),
        genesis_lanes::coders::JobPolicy::default(),
    )
    .unwrap();
    let e = jobs
        .create(&kube::api::PostParams::default(), &job)
        .await
        .unwrap_err();
    assert!(matches!(e, kube::Error::Api(s) if s.code == 422));
    job.metadata.name = Some("coder-ok".to_string());
    let env = job
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .env
        .as_mut()
        .unwrap();
    env[0].value_from = Some(Default::default());
    let e = jobs
        .create(&kube::api::PostParams::default(), &job)
        .await
        .unwrap_err();
    assert!(matches!(e, kube::Error::Api(s) if s.code == 422));
    assert!(cluster.lock().unwrap().jobs.is_empty());
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
