//! Platform-only ceilings through genesisctl against a running fleet: with a
//! tenant-bound token `config set` may lower the weekly credit but not raise
//! it or switch its enforcement off (one PERMISSION_DENIED error line naming
//! the key, the platform's value and who may raise it, and nothing
//! written), a misspelt key is refused listing the known ones, and `tenant
//! feature windows-pool on` is refused; the platform-wide token does both.

use std::time::Duration;

use anyhow::ensure;
use genesis_e2e::{
    Fleet, FleetOptions, argv, binaries_missing, bounded, genesisctl_json, genesisctl_refused,
};
use genesis_proto::v1 as pb;

const CREDIT: &str = "AgentDispatcher:WeeklyCreditUsd";

async fn tenant_rows(fleet: &Fleet, tenant: &str) -> anyhow::Result<i64> {
    Ok(genesis_store::inspect::fleet::count_tenant_configs(&fleet.db, tenant.parse()?).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_token_only_tightens_platform_ceilings_through_genesisctl() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(120), async {
        let fleet = Fleet::start(FleetOptions::new("cli-ceilings", 0)).await?;
        let tenant = fleet.create_tenant("cli-ceilings-acme").await?;
        let token = fleet
            .admin()
            .await?
            .tokens()
            .create_token(pb::CreateTokenRequest {
                scope: "operator".into(),
                tenant_id: Some(tenant.clone()),
                ..Default::default()
            })
            .await?
            .into_inner()
            .token;
        let as_tenant = [
            "-o",
            "json",
            "--token",
            token.as_str(),
            "--tenant",
            tenant.as_str(),
        ];
        let as_platform = ["-o", "json", "--tenant", tenant.as_str()];

        let (_, err) = genesisctl_refused(
            &fleet,
            &argv(&as_tenant, &["config", "set", CREDIT, "1000000"]),
        )?;
        ensure!(err.contains("PERMISSION_DENIED"), "{err}");
        ensure!(
            err.contains(&format!(
                "{CREDIT} is bounded by the platform, whose value for this tenant is 60"
            )) && err.contains("only a platform token may raise it"),
            "{err}"
        );
        let (_, err) = genesisctl_refused(
            &fleet,
            &argv(
                &as_tenant,
                &[
                    "config",
                    "set",
                    "AgentDispatcher:CreditEnforcementEnabled",
                    "false",
                ],
            ),
        )?;
        ensure!(
            err.contains("PERMISSION_DENIED") && err.contains("turn it off"),
            "{err}"
        );
        let (_, err) = genesisctl_refused(
            &fleet,
            &argv(
                &as_tenant,
                &["config", "set", "AgentDispatcher:WeeklyCreditUSD", "5"],
            ),
        )?;
        ensure!(
            err.contains("INVALID_ARGUMENT") && err.contains(CREDIT),
            "{err}"
        );
        ensure!(
            tenant_rows(&fleet, &tenant).await? == 0,
            "a refusal wrote a row"
        );

        let lowered = genesisctl_json(&fleet, &argv(&as_tenant, &["config", "set", CREDIT, "25"]))?;
        ensure!(
            lowered["value"] == "25" && lowered["scope"] == "tenant",
            "{lowered}"
        );
        let raised = genesisctl_json(
            &fleet,
            &argv(&as_platform, &["config", "set", CREDIT, "1000000"]),
        )?;
        ensure!(raised["value"] == "1000000", "{raised}");

        let (_, err) = genesisctl_refused(
            &fleet,
            &argv(&as_tenant, &["tenant", "feature", "windows-pool", "on"]),
        )?;
        ensure!(
            err.contains("PERMISSION_DENIED") && err.contains("windows-pool"),
            "{err}"
        );
        let on = genesisctl_json(
            &fleet,
            &argv(&as_platform, &["tenant", "feature", "windows-pool", "on"]),
        )?;
        ensure!(on["features"]["windows-pool"] == true, "{on}");
        Ok(())
    })
    .await
}
