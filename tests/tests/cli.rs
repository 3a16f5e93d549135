//! genesisctl through the real binary against a running fleet: the operator
//! path from tenant creation to a MessageAcknowledged turn, and the one-line
//! error of a refused command.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, bounded, genesisctl, wait_for};

/// Every JSON object printed, with list responses (`{"agents": [...]}`)
/// flattened to their items, so either output shape is read the same.
fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    let mut items = Vec::new();
    for v in stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        match v
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.values().next())
            .and_then(|x| x.as_array())
        {
            Some(list) => items.extend(list.iter().cloned()),
            None => items.push(v),
        }
    }
    items
}

fn run_ok(fleet: &Fleet, args: &[&str]) -> anyhow::Result<String> {
    let (code, out, err) = genesisctl(fleet, args)?;
    ensure!(code == 0, "genesisctl {args:?} exited {code}: {err}");
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_drives_an_agent_from_tenant_create_and_start_to_an_acknowledged_message()
-> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(120), async {
        // The SOA bootstraps Paused, so `agent start` is what wakes it.
        let mut opts = FleetOptions::new("cli-smoke", 1);
        opts.extra_env.push((
            "GENESIS_STANDING_AGENTS_IDLE_BY_DEFAULT".into(),
            "false".into(),
        ));
        let fleet = Fleet::start(opts).await?;
        let out = run_ok(&fleet, &["-o", "json", "tenant", "create", "cli-acme"])?;
        let tenant = json_lines(&out)
            .first()
            .and_then(|v| v["id"].as_str().map(str::to_owned))
            .with_context(|| format!("no tenant id in {out:?}"))?;
        run_ok(
            &fleet,
            &["--tenant", &tenant, "tenant", "standing-agents", "on"],
        )?;

        let soa = wait_for("the SOA in `agent list`", Duration::from_secs(30), || {
            let fleet = &fleet;
            let tenant = tenant.clone();
            async move {
                let out = run_ok(fleet, &["--tenant", &tenant, "-o", "json", "agent", "list"])?;
                Ok(json_lines(&out).into_iter().find_map(|v| {
                    (v["agent_type"] == "Soa")
                        .then(|| v["id"].as_str().map(str::to_owned))
                        .flatten()
                }))
            }
        })
        .await?;
        // The table form names it too.
        let table = run_ok(&fleet, &["--tenant", &tenant, "agent", "list"])?;
        ensure!(
            table.contains(&soa) && table.contains("Soa"),
            "table lacks the SOA: {table}"
        );

        ensure!(
            table.contains("paused"),
            "the SOA should wait paused: {table}"
        );
        let started = run_ok(&fleet, &["--tenant", &tenant, "agent", "start", &soa])?;
        ensure!(started.contains("active"), "agent start printed {started}");
        fleet
            .wait_decision(&soa, 0, "Initialized", Duration::from_secs(30))
            .await?;
        run_ok(
            &fleet,
            &[
                "--tenant",
                &tenant,
                "agent",
                "send",
                &soa,
                "status report please",
            ],
        )?;
        wait_for(
            "MessageAcknowledged in `agent ledger`",
            Duration::from_secs(30),
            || {
                let fleet = &fleet;
                let (tenant, soa) = (tenant.clone(), soa.clone());
                async move {
                    let out = run_ok(
                        fleet,
                        &["--tenant", &tenant, "-o", "json", "agent", "ledger", &soa],
                    )?;
                    Ok(json_lines(&out)
                        .iter()
                        .any(|v| v["decision_kind"] == "MessageAcknowledged")
                        .then_some(()))
                }
            },
        )
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_command_prints_one_line_and_exits_non_zero() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(60), async {
        let fleet = Fleet::start(FleetOptions::new("cli-error", 0)).await?;
        // An unknown instance of an unknown tenant: NOT_FOUND from control.
        let tenant = uuid::Uuid::new_v4().to_string();
        let instance = uuid::Uuid::new_v4().to_string();
        let (code, out, err) =
            genesisctl(&fleet, &["--tenant", &tenant, "agent", "get", &instance])?;
        ensure!(
            code != 0,
            "exit code 0 for an unknown instance (stdout {out:?})"
        );
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        ensure!(lines.len() == 1, "expected one error line, got {lines:?}");
        ensure!(out.trim().is_empty(), "stdout not empty on error: {out:?}");
        // A malformed id is refused locally, also in one line, non-zero.
        let (code, _, err) =
            genesisctl(&fleet, &["--tenant", &tenant, "agent", "get", "not-a-uuid"])?;
        ensure!(code != 0, "exit code 0 for a malformed id");
        ensure!(
            err.lines().filter(|l| !l.trim().is_empty()).count() == 1,
            "malformed id: {err:?}"
        );
        Ok(())
    })
    .await
}
