//! The credentials a preset may name, at call time: ticks run through the
//! pod's planning loop against a fake AgentPod supervisor and a strict
//! loopback provider stand-in that accepts every secret the pod could send
//! and records which one each request carried. A preset naming a platform
//! variable (the agent-pod token, the OTLP headers, the database URL) or a
//! key bound to another tenant must never get that value sent: no request
//! reaches the stand-in with it, whether or not another couple is usable.
//!
//! The platform variables are really in the pod's process environment: the
//! test re-runs its own binary with them set, and the child reads its keys
//! as production does (`ProviderKeys::from_process_env`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use genesis_agent_pod::{CredentialSource, Invoker, PodContext, run_tick};
use genesis_llm::{FallbackInvoker, HttpProviderFactory, HttpTimeouts, ProviderKeys};
use genesis_llm_standin::StandIn;
use genesis_proto::v1 as pb;
use pb::TickCompletion;
use uuid::Uuid;

/// Set in the child run: the test that reads the process environment.
const CHILD: &str = "GENESIS_TEST_PROVIDER_KEYS_CHILD";
/// The tick's tenant, chosen by the parent so it can bind keys to it.
const TICK_TENANT: &str = "GENESIS_TEST_PROVIDER_KEYS_TENANT";
/// The platform variables the parent puts in the child's environment, each
/// named by a preset couple, with the value the stand-in would recognise.
const PLATFORM_VARS: &[&str] = &[
    "GENESIS_AGENT_TOKEN",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "DATABASE_URL",
    "NATS_URL",
];

fn platform_value(var: &str) -> String {
    format!("value-of-{var}")
}

const OTHER_TENANTS_KEY: &str = "sk-other-tenants-key";
const MY_KEY: &str = "sk-this-tenants-key";

fn couple(provider: &str, model: &str, names: &[&str]) -> pb::PresetCouple {
    pb::PresetCouple {
        model: model.into(),
        provider: provider.into(),
        backend: "api".into(),
        credential_names: names.iter().map(|n| (*n).to_owned()).collect(),
    }
}

/// A context whose real HTTP providers all go to `standin`, with the
/// credentials of `keys`.
fn context_on(
    fake: &FakeSupervisor,
    standin: &StandIn,
    keys: Arc<dyn CredentialSource>,
) -> PodContext {
    let factory = HttpProviderFactory::new(HttpTimeouts::default())
        .unwrap()
        .with_openai_base_url(standin.base_url())
        .with_anthropic_base_url(standin.base_url());
    let mut ctx = context(fake, Arc::new(genesis_llm::ScriptedProvider::new()));
    ctx.invoker = Invoker::new(FallbackInvoker::new(Arc::new(factory)), keys);
    ctx
}

/// A stand-in accepting every platform value (indexes 0..), then the other
/// tenant's key, then this tenant's: a request carrying any of them is
/// recorded with the index of the one it carried.
async fn standin() -> StandIn {
    let mut builder = StandIn::builder();
    for var in PLATFORM_VARS {
        builder = builder.key(platform_value(var));
    }
    builder
        .key(OTHER_TENANTS_KEY)
        .key(MY_KEY)
        .start()
        .await
        .unwrap()
}

fn my_key_index() -> usize {
    PLATFORM_VARS.len() + 1
}

/// A tick of `tenant` whose chain is `couples`.
fn tick(tenant: Uuid, couples: Vec<pb::PresetCouple>) -> pb::TickBundle {
    let mut b = bundle("OperatorMessage", r#"{"message":"hello"}"#);
    b.instance.as_mut().unwrap().tenant_id = tenant.to_string();
    b.preset_chain.as_mut().unwrap().couples = couples;
    b
}

/// Run `b` and return its completion and the reason it recorded.
async fn run(
    ctx: &PodContext,
    fake: &FakeSupervisor,
    b: pb::TickBundle,
) -> (TickCompletion, String) {
    let result = run_tick(ctx, &ids(&b), b).await.unwrap();
    let reason = fake
        .state
        .completes()
        .last()
        .and_then(|c| c.outcome.clone())
        .map(|o| o.reason)
        .unwrap_or_default();
    (result.completion, reason)
}

/// The two ticks every source of keys must pass: a chain of nothing but
/// names the tenant may not use sends no request at all (the tick is
/// deferred as a provider failure), and a chain that ends on the tenant's
/// own key sends every request with that key and no other.
async fn forbidden_and_foreign_keys_are_never_sent(keys: Arc<dyn CredentialSource>, tenant: Uuid) {
    let fake = start_fake().await;
    let standin = standin().await;
    let ctx = context_on(&fake, &standin, keys);
    let mut refused: Vec<pb::PresetCouple> = PLATFORM_VARS
        .iter()
        .map(|v| couple("openai", "gpt-4o", &[v]))
        .collect();
    refused.push(couple("anthropic", "claude-opus-4-8", &["OTHER_TEAM"]));
    refused.push(couple(
        "openai",
        "gpt-4o",
        &["GENESIS_AGENT_TOKEN", "OTHER_TEAM"],
    ));

    let (completion, reason) = run(&ctx, &fake, tick(tenant, refused.clone())).await;
    assert_eq!(completion, TickCompletion::ProviderFailed, "{reason}");
    assert!(reason.contains("no usable couple"), "{reason}");
    assert_eq!(
        standin.request_count(),
        0,
        "a request reached the provider: {:?}",
        standin.requests()
    );

    let mut chain = refused;
    chain.push(couple("openai", "gpt-4o", &["OTHER_TEAM", "MINE"]));
    let (completion, reason) = run(&ctx, &fake, tick(tenant, chain)).await;
    assert_eq!(completion, TickCompletion::Complete, "{reason}");
    let requests = standin.requests();
    assert!(!requests.is_empty(), "the usable couple was called");
    for r in &requests {
        assert_eq!(
            r.key_index,
            Some(my_key_index()),
            "a request carried another secret: {r:?}"
        );
    }
    let attempts: Vec<String> = fake
        .state
        .completes()
        .last()
        .unwrap()
        .call_attempts
        .iter()
        .filter_map(|p| p.attempt.as_ref().map(|a| a.credential_name.clone()))
        .chain(
            fake.state
                .attempts()
                .into_iter()
                .filter_map(|a| a.attempt.map(|a| a.credential_name)),
        )
        .collect();
    assert!(!attempts.is_empty());
    assert!(attempts.iter().all(|n| n == "MINE"), "{attempts:?}");
}

/// The parent: re-run this binary's child test with the platform variables
/// and the keys in its environment.
#[test]
fn platform_variables_in_the_pods_environment_are_never_sent() {
    let tenant = Uuid::new_v4();
    let other = Uuid::new_v4();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "child_reads_the_process_environment",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env(TICK_TENANT, tenant.to_string())
        .env("GENESIS_LLM_KEY_OTHER_TEAM", OTHER_TENANTS_KEY)
        .env("GENESIS_LLM_KEY_OTHER_TEAM_TENANTS", other.to_string())
        .env("GENESIS_LLM_KEY_MINE", MY_KEY)
        .env("GENESIS_LLM_KEY_MINE_TENANTS", format!("{tenant},{other}"));
    for var in PLATFORM_VARS {
        child.env(var, platform_value(var));
    }
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("child_reads_the_process_environment ... ok"),
        "the child test did not run:\n{stdout}"
    );
}

/// The child (run only by the parent above): the keys are this process's
/// environment, read as production reads them.
#[tokio::test]
#[ignore = "run by platform_variables_in_the_pods_environment_are_never_sent"]
async fn child_reads_the_process_environment() {
    assert_eq!(
        std::env::var(CHILD).as_deref(),
        Ok("1"),
        "run by the parent"
    );
    for var in PLATFORM_VARS {
        assert_eq!(std::env::var(var).unwrap(), platform_value(var));
    }
    let tenant: Uuid = std::env::var(TICK_TENANT).unwrap().parse().unwrap();
    let keys = ProviderKeys::from_process_env(None).unwrap();
    forbidden_and_foreign_keys_are_never_sent(Arc::new(keys), tenant).await;
}

/// The same through the key directory, a Kubernetes Secret volume's shape:
/// the platform values sit beside the keys (a Secret shared with the agent
/// token), and the other tenant's key is bound by its `.tenants` file.
#[tokio::test]
async fn a_key_directory_serves_only_the_keys_bound_to_the_tenant() {
    let tenant = Uuid::new_v4();
    let other = Uuid::new_v4();
    let dir = std::env::temp_dir().join(format!("genesis-pod-keys-{}", Uuid::new_v4()));
    std::fs::create_dir_all(dir.join("..2026_01_01")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    for var in PLATFORM_VARS {
        write(var, &platform_value(var));
    }
    write("OTHER_TEAM", &format!("{OTHER_TENANTS_KEY}\n"));
    write("OTHER_TEAM.tenants", &format!("{other}\n"));
    write("MINE", MY_KEY);
    let keys = ProviderKeys::load(std::iter::empty(), Some(Path::new(&dir))).unwrap();
    let mut ignored: Vec<&str> = keys.ignored().iter().map(|i| i.entry.as_str()).collect();
    ignored.sort_unstable();
    let mut want = PLATFORM_VARS.to_vec();
    want.sort_unstable();
    assert_eq!(ignored, want);
    forbidden_and_foreign_keys_are_never_sent(Arc::new(keys), tenant).await;
    let _ = std::fs::remove_dir_all(&dir);
}
