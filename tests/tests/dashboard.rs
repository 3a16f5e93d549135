//! The operator dashboard in a real browser: a fleet of the real binaries
//! (scripted provider), two tenants with tenant-bound operator tokens, and
//! `tests/browser/dashboard.mjs` driving Debian's headless Chromium through
//! playwright-core. Screenshots land in `target/e2e-logs/dashboard-browser/shots`.
//! Skips with one line when the binaries, Node, Chromium or playwright-core
//! (`npm ci` in tests/browser; `scripts/test.sh` does it) are missing.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, bounded};
use genesis_proto::v1 as pb;

const T: Duration = Duration::from_secs(60);

fn browser_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("browser")
}

fn chromium() -> Option<PathBuf> {
    std::env::var_os("GENESIS_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/usr/bin/chromium", "/usr/bin/chromium-browser"].map(PathBuf::from))
        .find(|p| p.is_file())
}

fn node() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("node"))
            .find(|p| p.is_file())
    })
}

/// Why the browser test cannot run here, if it cannot.
fn missing() -> Option<String> {
    if let Some(why) = binaries_missing() {
        return Some(why);
    }
    if chromium().is_none() {
        return Some("no Chromium (apt-get install chromium, or set GENESIS_CHROMIUM)".to_owned());
    }
    if node().is_none() {
        return Some("no node on PATH".to_owned());
    }
    if !browser_dir()
        .join("node_modules/playwright-core/package.json")
        .is_file()
    {
        return Some("playwright-core is not installed (npm ci in tests/browser)".to_owned());
    }
    None
}

async fn tenant_token(fleet: &Fleet, tenant: &str) -> anyhow::Result<String> {
    Ok(fleet
        .admin()
        .await?
        .tokens()
        .create_token(pb::CreateTokenRequest {
            scope: "operator".into(),
            tenant_id: Some(tenant.to_owned()),
            label: "dashboard-browser".into(),
            ttl_seconds: Some(3600),
            pod_tenant_ids: vec![],
        })
        .await?
        .into_inner()
        .token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_drives_the_dashboard_in_a_browser() -> anyhow::Result<()> {
    if let Some(why) = missing() {
        println!("skipped: dashboard browser test: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(240), async {
        let mut opts = FleetOptions::new("dashboard-browser", 1);
        // The SOA bootstraps Paused, so the browser's Start is what wakes it.
        opts.extra_env.push((
            "GENESIS_STANDING_AGENTS_IDLE_BY_DEFAULT".into(),
            "false".into(),
        ));
        let fleet = Fleet::start(opts).await?;
        let a = fleet.create_tenant("acme").await?;
        let b = fleet.create_tenant("globex").await?;
        let soa = fleet.wait_soa(&a, T).await?;
        fleet.wait_soa(&b, T).await?;
        let token_a = tenant_token(&fleet, &a).await?;
        let token_b = tenant_token(&fleet, &b).await?;
        // A second preset of A's (the offline provider too) to replay the
        // greeting turn against.
        let replay_preset = fleet
            .admin()
            .await?
            .upsert_preset(
                &a,
                None,
                "replay-offline",
                pb::PresetCouple {
                    model: "scripted-1".into(),
                    provider: "scripted".into(),
                    backend: "scripted".into(),
                    credential_names: vec![],
                },
                serde_json::json!({}),
            )
            .await?;
        let out = fleet.logs.join("shots");
        // The scripted provider spends nothing, so the window holds exactly
        // what a real provider's billed calls drew: $0.42, drawn here.
        let store = genesis_store::Store::from_pool(&fleet.db);
        store
            .credit()
            .draw_down(
                a.parse()?,
                genesis_store::credit::week_start(chrono::Utc::now()),
                60.0,
                0.42,
            )
            .await?;

        let mut child = tokio::process::Command::new(node().context("node")?)
            .arg(browser_dir().join("dashboard.mjs"))
            .current_dir(browser_dir())
            .env("DASH_URL", format!("http://{}", fleet.dashboard))
            .env("TOKEN_A", &token_a)
            .env("TOKEN_B", &token_b)
            .env("SOA_A", &soa)
            .env("PRESET_A", &replay_preset.id)
            .env("SPENT_A", "$0.42")
            .env("OUT_DIR", &out)
            .env("CHROMIUM", chromium().context("chromium")?)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("start node")?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let status = tokio::time::timeout(Duration::from_secs(200), child.wait())
            .await
            .context("the browser script did not finish in 200 s")??;
        let mut text = String::new();
        if let Some(mut s) = stdout {
            tokio::io::AsyncReadExt::read_to_string(&mut s, &mut text).await?;
        }
        if let Some(mut s) = stderr {
            tokio::io::AsyncReadExt::read_to_string(&mut s, &mut text).await?;
        }
        print!("{text}");
        ensure!(status.success(), "the browser script failed: {text}");
        ensure!(text.contains("browser: ok"), "no success line: {text}");
        for shot in [
            "02-agents",
            "03-agent-greeted",
            "04-agent-replied",
            "05-decisions",
            "06-agent-mode-audit",
            "07-spend",
            "08-other-tenant-not-found",
            "09-replay",
        ] {
            ensure!(
                out.join(format!("{shot}.png")).is_file(),
                "screenshot {shot} missing"
            );
        }
        Ok(())
    })
    .await
}
