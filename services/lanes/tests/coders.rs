//! The coder spawner against a local HTTP server that speaks the Kubernetes
//! API paths the spawner uses (POST/GET/DELETE
//! /apis/batch/v1/namespaces/{ns}/jobs, and GET
//! /api/v1/namespaces/{ns}/pods?labelSelector= and
//! /api/v1/namespaces/{ns}/pods/{pod}/log), reached through a real
//! kube::Client. The stand-in refuses what the API server's validation
//! refuses of the fields a coder Job sets, so a manifest it accepts is one
//! a cluster takes, and of the log parameters (a negative `tailLines`, a
//! `limitBytes` below 1), so a read it answers is one a cluster answers.

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
    LABEL_TENANT, LogOptions, ResolvedCouple,
};
use kube::api::LogParams;
use serde_json::{Value, json};
use uuid::Uuid;

#[derive(Default)]
struct Cluster {
    /// (namespace, name) → Job JSON.
    jobs: HashMap<(String, String), Value>,
    selectors: Vec<String>,
    deletes: Vec<Value>,
    /// (namespace, name) → (Pod JSON, the pod's log).
    pods: HashMap<(String, String), (Value, String)>,
    /// The label selectors of pod lists, in order.
    pod_selectors: Vec<String>,
    /// The query parameters of every log read, in order.
    log_reads: Vec<HashMap<String, String>>,
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
    job["metadata"]["creationTimestamp"] = json!(now());
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

/// The API server's time format (RFC 3339, whole seconds, UTC).
fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// What the Job controller does once a Job runs: a pod named
/// `<job>-<suffix>` carrying the template's labels plus `job-name`, in
/// `phase`, whose log is `log`. Returns the pod's name.
fn run_pod(c: &Shared, job: &str, suffix: &str, created: &str, phase: &str, log: &str) -> String {
    let mut c = c.lock().unwrap();
    let (ns, template_labels) = c
        .jobs
        .iter()
        .find(|((_, n), _)| n == job)
        .map(|((ns, _), j)| {
            (
                ns.clone(),
                j["spec"]["template"]["metadata"]["labels"].clone(),
            )
        })
        .unwrap();
    let mut labels = template_labels.as_object().cloned().unwrap_or_default();
    labels.insert("job-name".into(), json!(job));
    labels.insert("batch.kubernetes.io/job-name".into(), json!(job));
    let name = format!("{job}-{suffix}");
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels,
            "uid": Uuid::new_v4().to_string(), "creationTimestamp": created},
        "spec": {"containers": [{"name": "coder", "image": "ghcr.io/genesis/coder:1"}]},
        "status": {"phase": phase},
    });
    c.pods.insert((ns, name.clone()), (pod, log.to_string()));
    name
}

async fn list_pods(
    State(c): State<Shared>,
    Path(ns): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let selector = q.get("labelSelector").cloned().unwrap_or_default();
    let mut c = c.lock().unwrap();
    c.pod_selectors.push(selector.clone());
    let items: Vec<Value> = c
        .pods
        .iter()
        .filter(|((n, _), (p, _))| *n == ns && labels_match(p, &selector))
        .map(|(_, (p, _))| p.clone())
        .collect();
    Json(json!({"apiVersion": "v1", "kind": "PodList",
        "metadata": {"resourceVersion": "7"}, "items": items}))
    .into_response()
}

/// The last `n` lines of `log` as the kubelet counts them (every newline
/// ends a line; a final fragment without one is a line too).
fn tail(log: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    let body = log.strip_suffix('\n').unwrap_or(log);
    let mut start = body.len();
    for _ in 0..n {
        match body[..start].rfind('\n') {
            Some(i) => start = i,
            None => return log,
        }
    }
    &log[start + 1..]
}

/// An integer query parameter: absent, or the message of the API server's
/// parameter decoding refusal (answered 400 BadRequest).
fn int_param(q: &HashMap<String, String>, key: &str) -> Result<Option<i64>, String> {
    q.get(key)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| format!("{key}: invalid value {v:?}: not an integer"))
        })
        .transpose()
}

/// GET .../pods/{name}/log: validated as the API server's pod log REST
/// validates PodLogOptions (422 Invalid for `tailLines` < 0 or `limitBytes`
/// < 1), then the tail window, then its first `limitBytes` bytes (the
/// kubelet's order), as text/plain.
async fn pod_log(
    State(c): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut c = c.lock().unwrap();
    c.log_reads.push(q.clone());
    let (tail_lines, limit_bytes) = match (int_param(&q, "tailLines"), int_param(&q, "limitBytes"))
    {
        (Ok(t), Ok(l)) => (t, l),
        (Err(m), _) | (_, Err(m)) => return status(400, "BadRequest", &m),
    };
    if let Some(t) = tail_lines.filter(|t| *t < 0) {
        return status(
            422,
            "Invalid",
            &format!(
                "PodLogOptions \"{name}\" is invalid: tailLines: Invalid value: {t}: must be greater than or equal to 0"
            ),
        );
    }
    if let Some(l) = limit_bytes.filter(|l| *l < 1) {
        return status(
            422,
            "Invalid",
            &format!(
                "PodLogOptions \"{name}\" is invalid: limitBytes: Invalid value: {l}: must be greater than 0"
            ),
        );
    }
    let Some((pod, log)) = c.pods.get(&(ns, name.clone())) else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": format!("pods \"{name}\" not found"),
                "reason": "NotFound", "details": {"name": name, "kind": "pods"}, "code": 404})),
        )
            .into_response();
    };
    if pod["status"]["phase"] == "Pending" {
        return status(
            400,
            "BadRequest",
            &format!(
                "container \"coder\" in pod \"{name}\" is waiting to start: ContainerCreating"
            ),
        );
    }
    let window = match tail_lines {
        Some(n) => tail(log, usize::try_from(n).unwrap()),
        None => log.as_str(),
    };
    let mut body = window.as_bytes().to_vec();
    if let Some(l) = limit_bytes {
        body.truncate(usize::try_from(l).unwrap());
    }
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "text/plain")],
        body,
    )
        .into_response()
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
        .route("/api/v1/namespaces/{ns}/pods", get(list_pods))
        .route("/api/v1/namespaces/{ns}/pods/{name}/log", get(pod_log))
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
        command: Vec::new(),
        keys: None,
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

/// A log of `n` numbered lines, `line 1` to `line n`, each newline-ended.
fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn the_log_of_a_spawned_coder_s_newest_pod_comes_back_with_the_tail_applied() {
    let (cluster, client) = start().await;
    let spawner = CoderSpawner::new(client, "coders");
    let tenant = Uuid::new_v4();
    let task = Uuid::new_v4();
    let handle = spawner.spawn(tenant, spec(task)).await.unwrap();
    run_pod(
        &cluster,
        &handle.name,
        "old01",
        "2026-01-01T10:00:00Z",
        "Failed",
        "the first attempt\n",
    );
    let pod = run_pod(
        &cluster,
        &handle.name,
        "new02",
        "2026-01-01T10:05:00Z",
        "Running",
        &numbered(5),
    );

    let logs = spawner
        .logs(tenant, task, LogOptions::new(Some(3), None).unwrap())
        .await
        .unwrap();
    assert_eq!(logs.pod_name, pod, "the newest pod");
    assert_eq!(logs.job_name, handle.name);
    assert_eq!(logs.text, "line 3\nline 4\nline 5\n");
    assert!(logs.truncated, "lines 1 and 2 were left out");
    assert_eq!(
        cluster.lock().unwrap().pod_selectors.last().unwrap(),
        &format!("job-name={}", handle.name)
    );

    // Exactly the asked number of lines, and fewer: nothing left out.
    for n in [5, 500] {
        let all = spawner
            .logs(tenant, task, LogOptions::new(Some(n), None).unwrap())
            .await
            .unwrap();
        assert_eq!(all.text, numbered(5), "tail {n}");
        assert!(!all.truncated, "tail {n}: the whole log");
    }
    // The default reads the last 500 lines.
    let long = run_pod(
        &cluster,
        &handle.name,
        "new03",
        "2026-01-01T10:09:00Z",
        "Succeeded",
        &numbered(600),
    );
    let d = spawner
        .logs(tenant, task, LogOptions::default())
        .await
        .unwrap();
    assert_eq!(d.pod_name, long);
    assert_eq!(d.text, &numbered(600)[numbered(100).len()..]);
    assert!(d.truncated);
    // Every read was bounded in lines and bytes.
    for q in &cluster.lock().unwrap().log_reads {
        let t: i64 = q["tailLines"].parse().unwrap();
        let l: i64 = q["limitBytes"].parse().unwrap();
        assert!((1..=10_001).contains(&t), "{q:?}");
        assert!((1..=1024 * 1024 + 1).contains(&l), "{q:?}");
    }
}

#[tokio::test]
async fn another_tenant_s_task_is_not_found_exactly_like_a_missing_one() {
    let (cluster, client) = start().await;
    let spawner = CoderSpawner::new(client, "coders");
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let their_task = Uuid::new_v4();
    let theirs = spawner.spawn(b, spec(their_task)).await.unwrap();
    run_pod(
        &cluster,
        &theirs.name,
        "x1",
        "2026-01-01T10:00:00Z",
        "Running",
        "tenant b's secrets\n",
    );
    let foreign = spawner
        .logs(a, their_task, LogOptions::default())
        .await
        .unwrap_err();
    let missing_task = Uuid::new_v4();
    let missing = spawner
        .logs(a, missing_task, LogOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        foreign,
        LanesError::NotFound {
            kind: "coder of task",
            id: their_task.to_string()
        }
    );
    assert_eq!(
        missing,
        LanesError::NotFound {
            kind: "coder of task",
            id: missing_task.to_string()
        }
    );
    {
        let c = cluster.lock().unwrap();
        assert!(
            c.pod_selectors.is_empty(),
            "no pod of theirs was even listed"
        );
        assert!(c.log_reads.is_empty(), "no log of theirs was read");
    }
    // The owner still reads it.
    let own = spawner
        .logs(b, their_task, LogOptions::default())
        .await
        .unwrap();
    assert_eq!(own.text, "tenant b's secrets\n");
}

#[tokio::test]
async fn a_job_without_a_started_pod_has_no_log_yet() {
    let (cluster, client) = start().await;
    let spawner = CoderSpawner::new(client, "coders");
    let tenant = Uuid::new_v4();
    let task = Uuid::new_v4();
    let handle = spawner.spawn(tenant, spec(task)).await.unwrap();
    match spawner.logs(tenant, task, LogOptions::default()).await {
        Err(LanesError::NotStarted(m)) => {
            assert_eq!(m, format!("the coder's Job {} has no pod yet", handle.name));
        }
        other => panic!("{other:?}"),
    }
    assert!(cluster.lock().unwrap().log_reads.is_empty());
    // A pod whose container waits to start: the API server answers 400.
    let pod = run_pod(
        &cluster,
        &handle.name,
        "p1",
        "2026-01-01T10:00:00Z",
        "Pending",
        "",
    );
    match spawner.logs(tenant, task, LogOptions::default()).await {
        Err(LanesError::NotStarted(m)) => {
            assert_eq!(m, format!("the coder's pod {pod} has not started yet"));
        }
        other => panic!("{other:?}"),
    }
    // No API server answering: the lanes' cluster-unavailable error.
    let uri: http::Uri = "http://127.0.0.1:9".parse().unwrap();
    let dead = CoderSpawner::from_config(kube::Config::new(uri), "coders").unwrap();
    assert!(matches!(
        dead.logs(tenant, task, LogOptions::default()).await,
        Err(LanesError::ClusterUnavailable(_))
    ));
}

#[tokio::test]
async fn a_byte_ceiling_cut_is_reported_and_keeps_the_start_of_the_tail() {
    let (cluster, client) = start().await;
    let spawner = CoderSpawner::new(client, "coders");
    let tenant = Uuid::new_v4();
    let task = Uuid::new_v4();
    let handle = spawner.spawn(tenant, spec(task)).await.unwrap();
    run_pod(
        &cluster,
        &handle.name,
        "p1",
        "2026-01-01T10:00:00Z",
        "Running",
        "aaaa\nbbbb\ncccc\n",
    );
    // The last 2 lines are "bbbb\ncccc\n"; 6 bytes of them.
    let cut = spawner
        .logs(tenant, task, LogOptions::new(Some(2), Some(6)).unwrap())
        .await
        .unwrap();
    assert_eq!(cut.text, "bbbb\nc");
    assert!(cut.truncated);
    // The wanted lines fit the ceiling exactly, but an older line exists.
    let older = spawner
        .logs(tenant, task, LogOptions::new(Some(2), Some(10)).unwrap())
        .await
        .unwrap();
    assert_eq!(
        (older.text.as_str(), older.truncated),
        ("bbbb\ncccc\n", true)
    );
    // The whole log exactly at the ceiling: nothing was left out.
    let exact = spawner
        .logs(tenant, task, LogOptions::new(Some(3), Some(15)).unwrap())
        .await
        .unwrap();
    assert_eq!(
        (exact.text.as_str(), exact.truncated),
        ("aaaa\nbbbb\ncccc\n", false)
    );
    // A ceiling through a character never leaves half of it.
    run_pod(
        &cluster,
        &handle.name,
        "p2",
        "2026-01-01T10:01:00Z",
        "Running",
        "d\u{e9}j\u{e0} vu\n",
    );
    let split = spawner
        .logs(tenant, task, LogOptions::new(Some(1), Some(2)).unwrap())
        .await
        .unwrap();
    assert_eq!((split.text.as_str(), split.truncated), ("d", true));
}

#[tokio::test]
async fn the_stand_in_refuses_log_parameters_as_the_api_server_does() {
    let (cluster, client) = start().await;
    let spawner = CoderSpawner::new(client.clone(), "coders");
    let handle = spawner
        .spawn(Uuid::new_v4(), spec(Uuid::new_v4()))
        .await
        .unwrap();
    let pod = run_pod(
        &cluster,
        &handle.name,
        "p1",
        "2026-01-01T10:00:00Z",
        "Running",
        &numbered(3),
    );
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "coders");
    let params = |tail: Option<i64>, limit: Option<i64>| LogParams {
        tail_lines: tail,
        limit_bytes: limit,
        ..LogParams::default()
    };
    for (p, field) in [
        (params(Some(-1), None), "tailLines"),
        (params(None, Some(0)), "limitBytes"),
        (params(None, Some(-3)), "limitBytes"),
    ] {
        match pods.logs(&pod, &p).await.unwrap_err() {
            kube::Error::Api(s) => {
                assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
                assert!(s.message.contains(field), "{}", s.message);
            }
            other => panic!("{other:?}"),
        }
    }
    // Zero lines is a valid (empty) read, as on a real cluster.
    assert_eq!(pods.logs(&pod, &params(Some(0), None)).await.unwrap(), "");
    assert_eq!(
        pods.logs(&pod, &params(Some(2), Some(9))).await.unwrap(),
        "line 2\nli"
    );
    match pods
        .logs("no-such-pod", &params(None, None))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
            assert_eq!(s.message, "pods \"no-such-pod\" not found");
        }
        other => panic!("{other:?}"),
    }
    let list = pods
        .list(&kube::api::ListParams::default().labels(&format!("job-name={}", handle.name)))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some(pod.as_str()));
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
