//! Kubernetes tests (scale from zero, drain, scale to zero after cooldown, a
//! pod killed mid-run loses nothing, helm upgrade runs the migration hook, a
//! spawned coder Job runs its coding task to success),
//! run by scripts/kind-e2e.sh against a kind cluster. Without a reachable
//! cluster each prints exactly `skipped: no Kubernetes cluster reachable` and
//! passes as skipped.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{Admin, wait_for};
use genesis_proto::v1 as pb;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams};

/// A client whose API answered, or `None` (having printed the skip line).
async fn cluster() -> Option<kube::Client> {
    let configured = std::env::var_os("KUBECONFIG").is_some()
        || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        || std::env::var_os("HOME")
            .is_some_and(|h| std::path::Path::new(&h).join(".kube/config").is_file());
    let client = if configured {
        tokio::time::timeout(Duration::from_secs(10), async {
            let c = kube::Client::try_default().await.ok()?;
            c.apiserver_version().await.ok()?;
            Some(c)
        })
        .await
        .unwrap_or_default()
    } else {
        None
    };
    if client.is_none() {
        println!("skipped: no Kubernetes cluster reachable");
    }
    client
}

fn ns() -> String {
    std::env::var("GENESIS_KIND_NAMESPACE").unwrap_or_else(|_| "genesis".into())
}

fn release() -> String {
    std::env::var("GENESIS_KIND_RELEASE").unwrap_or_else(|_| "genesis".into())
}

async fn admin() -> anyhow::Result<Admin> {
    let endpoint =
        std::env::var("GENESIS_ENDPOINT").context("GENESIS_ENDPOINT (control's NodePort)")?;
    let token = std::env::var("GENESIS_TOKEN").context("GENESIS_TOKEN (operator token)")?;
    Admin::connect(&endpoint, &token).await
}

async fn agent_pods(client: &kube::Client) -> anyhow::Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns());
    let lp = ListParams::default().labels(&format!(
        "app.kubernetes.io/instance={},app.kubernetes.io/component=agent-pod",
        release()
    ));
    Ok(pods
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

async fn replicas(client: &kube::Client) -> anyhow::Result<i32> {
    let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns());
    let d = deps.get(&format!("{}-agent-pod", release())).await?;
    // Read through JSON so the test does not depend on which fields the
    // selected k8s-openapi version makes optional.
    let v = serde_json::to_value(&d)?;
    Ok(i32::try_from(v["spec"]["replicas"].as_i64().unwrap_or(0))?)
}

/// A tenant with standing agents on and its SOA; returns (tenant, soa).
async fn tenant(admin: &Admin, name: &str) -> anyhow::Result<(String, String)> {
    let t = admin
        .tenants()
        .create_tenant(pb::CreateTenantRequest {
            name: format!("{name}-{}", genesis_e2e::suffix()),
            standing_agents_enabled: true,
        })
        .await?
        .into_inner();
    let soa = wait_for("the SOA", Duration::from_secs(60), || {
        let mut agents = admin.agents();
        let tid = t.id.clone();
        async move {
            let r = agents
                .list_agents(pb::ListAgentsRequest {
                    tenant_id: tid,
                    agent_type: Some("Soa".into()),
                    status: None,
                })
                .await?;
            Ok(r.into_inner().agents.into_iter().next().map(|a| a.id))
        }
    })
    .await?;
    Ok((t.id, soa))
}

async fn ledger_has(admin: &Admin, tenant: &str, soa: &str, kind: &str) -> anyhow::Result<bool> {
    let r = admin
        .agents()
        .get_ledger(pb::GetLedgerRequest {
            tenant_id: tenant.into(),
            instance_id: soa.into(),
            limit: 100,
            before: None,
        })
        .await?;
    Ok(r.into_inner().turns.iter().any(|t| t.decision_kind == kind))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_pods_scale_from_zero_on_enqueue_and_back_to_zero_after_cooldown()
-> anyhow::Result<()> {
    let Some(client) = cluster().await else {
        return Ok(());
    };
    let admin = admin().await?;
    wait_for(
        "agent pods at zero before the test",
        Duration::from_secs(600),
        || async { Ok((agent_pods(&client).await?.is_empty()).then_some(())) },
    )
    .await?;
    let (t, soa) = tenant(&admin, "kind-scale").await?;
    wait_for(
        "KEDA to scale agent pods from zero",
        Duration::from_secs(180),
        || async { Ok((replicas(&client).await? > 0).then_some(())) },
    )
    .await?;
    wait_for(
        "the opener to be planned (the queue drains)",
        Duration::from_secs(180),
        || async {
            Ok(ledger_has(&admin, &t, &soa, "Initialized")
                .await?
                .then_some(()))
        },
    )
    .await?;
    wait_for(
        "scale back to zero after the cooldown",
        Duration::from_secs(600),
        || async { Ok((replicas(&client).await? == 0).then_some(())) },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_an_agent_pod_mid_run_loses_nothing() -> anyhow::Result<()> {
    let Some(client) = cluster().await else {
        return Ok(());
    };
    let admin = admin().await?;
    let (t, soa) = tenant(&admin, "kind-kill").await?;
    for i in 0..5 {
        admin
            .agents()
            .send_message(pb::SendMessageRequest {
                tenant_id: t.clone(),
                instance_id: soa.clone(),
                body: format!("message {i}"),
            })
            .await?;
    }
    let pod = wait_for("a running agent pod", Duration::from_secs(180), || async {
        Ok(agent_pods(&client).await?.into_iter().next())
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns());
    let name = pod.metadata.name.clone().context("pod name")?;
    pods.delete(
        &name,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await?;
    wait_for(
        "every message acknowledged",
        Duration::from_secs(300),
        || async {
            let r = admin
                .agents()
                .get_ledger(pb::GetLedgerRequest {
                    tenant_id: t.clone(),
                    instance_id: soa.clone(),
                    limit: 100,
                    before: None,
                })
                .await?
                .into_inner();
            let acked = r
                .turns
                .iter()
                .filter(|x| x.event_kind == "OperatorMessage")
                .count();
            ensure!(
                acked <= 5,
                "{acked} turns for 5 messages: an event was completed twice"
            );
            Ok((acked == 5).then_some(()))
        },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_ran_the_migration_hook() -> anyhow::Result<()> {
    let Some(client) = cluster().await else {
        return Ok(());
    };
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns());
    let lp = ListParams::default().labels(&format!(
        "app.kubernetes.io/instance={},app.kubernetes.io/component=migrations",
        release()
    ));
    let list = jobs.list(&lp).await?.items;
    ensure!(
        list.iter().any(|j| serde_json::to_value(j)
            .ok()
            .and_then(|v| v["status"]["succeeded"].as_i64())
            .unwrap_or(0)
            >= 1),
        "no succeeded migrations hook Job for release {} in {}",
        release(),
        ns()
    );
    // After scripts/kind-e2e.sh's `helm upgrade`, the hook Job is the one
    // the upgrade created (before-hook-creation replaced the install's).
    if let Ok(rev) = std::env::var("GENESIS_KIND_UPGRADED_REVISION") {
        let ran_for: Vec<String> = list
            .iter()
            .filter_map(|j| {
                j.metadata
                    .annotations
                    .as_ref()?
                    .get("genesis.dev/release-revision")
                    .cloned()
            })
            .collect();
        ensure!(
            ran_for.contains(&rev),
            "the pre-upgrade hook did not run for revision {rev} (jobs ran for {ran_for:?})"
        );
    }
    Ok(())
}

/// A coding task run by a real coder Job: SpawnCoder creates the Job from
/// the coder image scripts/kind-e2e.sh built (`--target coder`: git and
/// genesis-coder), its pod reaches control's Service with its task-bound
/// token, the offline scripted chain completes the task (it writes no
/// code: the patch path is proven without a cluster by control's coder
/// end-to-end test), and settling the task deletes the Job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_coder_job_runs_its_task_to_success() -> anyhow::Result<()> {
    let Some(client) = cluster().await else {
        return Ok(());
    };
    let admin = admin().await?;
    let (tenant, _soa) = tenant(&admin, "kind-coder").await?;
    let task = admin
        .tasks()
        .create_task(pb::CreateTaskRequest {
            tenant_id: tenant.clone(),
            title: "an offline coder run".into(),
            instructions: "Write nothing; finish.".into(),
            model: "scripted-1".into(),
            provider: "scripted".into(),
            backend: "scripted".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let coder = admin
        .coders()
        .spawn_coder(pb::SpawnCoderRequest {
            tenant_id: tenant.clone(),
            name: "kind-coder".into(),
            task_id: Some(task.id.clone()),
            ..Default::default()
        })
        .await?
        .into_inner();
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns());
    ensure!(
        jobs.get_opt(&coder.job_name).await?.is_some(),
        "SpawnCoder made no Job {}",
        coder.job_name
    );
    let done = wait_for(
        "the coder to settle its task",
        Duration::from_secs(300),
        || {
            let mut tasks = admin.tasks();
            let req = pb::GetTaskRequest {
                tenant_id: tenant.clone(),
                task_id: task.id.clone(),
            };
            async move {
                let t = tasks.get_task(req).await?.into_inner();
                Ok((t.status == "completed" || t.status == "failed").then_some(t))
            }
        },
    )
    .await?;
    ensure!(
        done.status == "completed",
        "the coder's task ended {}: {}",
        done.status,
        done.result_summary
    );
    ensure!(
        done.artifacts.iter().any(|a| a.kind == "summary"),
        "no summary artifact: {:?}",
        done.artifacts
    );
    wait_for(
        "the coder Job to be deleted",
        Duration::from_secs(60),
        || {
            let jobs = jobs.clone();
            let name = coder.job_name.clone();
            async move { Ok(jobs.get_opt(&name).await?.is_none().then_some(())) }
        },
    )
    .await?;
    Ok(())
}
