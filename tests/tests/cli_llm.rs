//! genesisctl's LLM verbs through the real binary against a running fleet:
//! `llm sites` lists the six agent call-sites, `llm preset upsert` creates a
//! preset from a file, `llm attach` pins it to Agent:Planning (which then
//! resolves to it) and `llm detach` restores the inherited binding,
//! `llm pricing set` writes a row `llm pricing` reads back. Each verb's
//! refusal (unknown site or preset, bad preset file, unknown provider,
//! negative price, missing tenant)
//! exits non-zero with a one-line message naming what is wrong, and leaves
//! the sites, presets and prices as they were.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{
    Fleet, FleetOptions, argv, binaries_missing, bounded, genesisctl, genesisctl_json,
    genesisctl_refused, wait_for,
};
use serde_json::Value;

/// The six agent call-sites of the registry (spec §3.7).
const AGENT_SITES: [&str; 6] = [
    "Agent:Default",
    "Agent:Planning",
    "Agent:Compliance",
    "PromptRedactor:Default",
    "PromptRedactor:Redact",
    "Agent:Pod",
];

/// The items of a list response (`{"sites": [...]}`).
fn items(v: &Value, field: &str) -> anyhow::Result<Vec<Value>> {
    v.get(field)
        .and_then(Value::as_array)
        .cloned()
        .with_context(|| format!("no {field:?} list in {v}"))
}

fn site<'a>(sites: &'a [Value], id: &str) -> anyhow::Result<&'a Value> {
    sites
        .iter()
        .find(|s| s["site_id"] == id)
        .with_context(|| format!("{id} not listed: {sites:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_manages_presets_bindings_and_prices_through_genesisctl() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(120), async {
        let fleet = Fleet::start(FleetOptions::new("cli-llm", 0)).await?;
        let tenant = fleet.create_tenant("cli-llm-acme").await?;
        let t = ["-o", "json", "--tenant", tenant.as_str()];
        let sites_now = || -> anyhow::Result<Vec<Value>> {
            items(&genesisctl_json(&fleet, &argv(&t, &["llm", "sites"]))?, "sites")
        };
        let presets_now = || -> anyhow::Result<Vec<Value>> {
            items(&genesisctl_json(&fleet, &argv(&t, &["llm", "presets"]))?, "presets")
        };
        let prices_now = || -> anyhow::Result<Vec<Value>> {
            items(&genesisctl_json(&fleet, &["-o", "json", "llm", "pricing"])?, "prices")
        };

        // Control's bootstrap loop seeds the tenant's Default preset and
        // binds it to Agent:Default shortly after the tenant is created, not
        // within CreateTenant; wait for it, so the state the detach must
        // restore is the settled one and not a race with the seeder.
        let default_preset = wait_for(
            "the Default preset bound to Agent:Default",
            Duration::from_secs(30),
            || async {
                let sites = sites_now()?;
                Ok(site(&sites, "Agent:Default")?["attached_preset_id"]
                    .as_str()
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned))
            },
        )
        .await?;

        // `llm sites`: every agent call-site, each with its parent.
        let sites = sites_now()?;
        let ids: Vec<&str> = sites.iter().filter_map(|s| s["site_id"].as_str()).collect();
        for id in AGENT_SITES {
            ensure!(ids.contains(&id), "`llm sites` lacks {id}: {ids:?}");
        }
        ensure!(
            site(&sites, "Agent:Planning")?["parent_site_id"] == "Agent:Default",
            "Agent:Planning's parent: {sites:?}"
        );
        let planning_before = site(&sites, "Agent:Planning")?.clone();
        ensure!(
            planning_before["inherited"] == true
                && planning_before["effective_preset_id"] == default_preset.as_str(),
            "Agent:Planning before attach does not inherit the Default preset: {planning_before}"
        );
        // The table form names them too.
        let (code, table, err) = genesisctl(&fleet, &["--tenant", &tenant, "llm", "sites"])?;
        ensure!(code == 0, "table `llm sites` exited {code}: {err}");
        for id in AGENT_SITES {
            ensure!(table.contains(id), "table lacks {id}: {table}");
        }

        // `llm preset upsert` from a file.
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("fast.json");
        std::fs::write(
            &file,
            r#"{"name": "cli-fast",
                "primary": {"model": "claude-sonnet-4-5", "provider": "anthropic",
                            "credential_names": ["ANTHROPIC_API_KEY"]},
                "fallback_chain": [{"model": "gpt-4o-2024-08-06", "provider": "openai",
                                    "credential_names": ["OPENAI_API_KEY"]}],
                "overlays_json": {"sampling": {"temperature": 0.2}}}"#,
        )?;
        let file_arg = file.to_str().context("temp path is UTF-8")?;
        let created = genesisctl_json(
            &fleet,
            &argv(&t, &["llm", "preset", "upsert", "--file", file_arg]),
        )?;
        let preset_id = created["id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .with_context(|| format!("no preset id in {created}"))?
            .to_owned();
        ensure!(created["name"] == "cli-fast", "{created}");
        ensure!(created["tenant_id"] == tenant.as_str(), "{created}");
        ensure!(created["primary"]["model"] == "claude-sonnet-4-5", "{created}");
        ensure!(
            created["fallback_chain"][0]["provider"] == "openai",
            "{created}"
        );
        ensure!(
            created["overlays_json"]["sampling"]["temperature"] == 0.2,
            "{created}"
        );
        let presets = presets_now()?;
        ensure!(
            presets
                .iter()
                .any(|p| p["id"] == preset_id.as_str() && p["name"] == "cli-fast"),
            "`llm presets` lacks the new preset: {presets:?}"
        );

        // `llm attach`: Agent:Planning now resolves to the preset, its own.
        let attached = genesisctl_json(
            &fleet,
            &argv(&t, &["llm", "attach", "Agent:Planning", preset_id.as_str()]),
        )?;
        ensure!(attached["site_id"] == "Agent:Planning", "{attached}");
        ensure!(attached["attached_preset_id"] == preset_id.as_str(), "{attached}");
        let sites = sites_now()?;
        let planning = site(&sites, "Agent:Planning")?;
        ensure!(
            planning["attached_preset_id"] == preset_id.as_str()
                && planning["effective_preset_id"] == preset_id.as_str()
                && planning["inherited"] == false,
            "Agent:Planning after attach: {planning}"
        );
        // Its parent is not affected.
        ensure!(
            site(&sites, "Agent:Default")?["attached_preset_id"] != preset_id.as_str(),
            "the parent was bound too: {sites:?}"
        );

        // Refusals of attach/detach: nothing changes.
        let (code, err) = genesisctl_refused(
            &fleet,
            &argv(&t, &["llm", "attach", "Agent:Nowhere", preset_id.as_str()]),
        )?;
        ensure!(
            code == 1 && err == "error: NOT_FOUND: call-site \"Agent:Nowhere\" not found",
            "attach to an unknown site: {code} {err}"
        );
        let (code, err) = genesisctl_refused(
            &fleet,
            &argv(&t, &["llm", "attach", "Planning", preset_id.as_str()]),
        )?;
        ensure!(
            code == 2
                && err
                    == "error: SITE: \"Planning\" is not a call-site id (expected Family:Name, e.g. Agent:Planning)",
            "attach to a malformed site: {code} {err}"
        );
        let unknown_preset = "0195b5a0-0000-7000-8000-00000000dead";
        let (code, err) = genesisctl_refused(
            &fleet,
            &argv(&t, &["llm", "attach", "Agent:Compliance", unknown_preset]),
        )?;
        ensure!(
            code == 1 && err == format!("error: NOT_FOUND: preset {unknown_preset} not found"),
            "attach of an unknown preset: {code} {err}"
        );
        let (code, err) = genesisctl_refused(
            &fleet,
            &argv(&t, &["llm", "detach", "Agent:Nowhere"]),
        )?;
        ensure!(
            code == 1 && err == "error: NOT_FOUND: call-site \"Agent:Nowhere\" not found",
            "detach of an unknown site: {code} {err}"
        );
        ensure!(
            sites_now()? == sites,
            "a refused attach or detach changed the sites"
        );

        // `llm detach`: Agent:Planning inherits again, exactly as before.
        let detached = genesisctl_json(&fleet, &argv(&t, &["llm", "detach", "Agent:Planning"]))?;
        ensure!(detached["site_id"] == "Agent:Planning", "{detached}");
        ensure!(
            detached["attached_preset_id"].is_null(),
            "still attached after detach: {detached}"
        );
        let planning_after = site(&sites_now()?, "Agent:Planning")?.clone();
        ensure!(
            planning_after == planning_before,
            "Agent:Planning after detach {planning_after} differs from before attach {planning_before}"
        );

        // Refusals of preset upsert: a file without a primary couple, one
        // with an unknown field, one that does not exist. Nothing is stored.
        let presets = presets_now()?;
        let no_primary = dir.path().join("no-primary.json");
        std::fs::write(&no_primary, r#"{"name": "cli-broken"}"#)?;
        let typo = dir.path().join("typo.json");
        std::fs::write(
            &typo,
            r#"{"name": "cli-typo", "primary": {"model": "scripted-1", "provider": "scripted"}, "fallback": []}"#,
        )?;
        let absent = dir.path().join("absent.json");
        // (file, the start of the error line, a word it must name, exit code)
        let cases = [
            (&no_primary, "primary: required", "primary", 2),
            (&typo, "", "fallback", 2),
            (&absent, "", "No such file", 1),
        ];
        for (path, reason, names, expected_code) in cases {
            let path = path.to_str().context("temp path is UTF-8")?;
            let (code, err) = genesisctl_refused(
                &fleet,
                &argv(&t, &["llm", "preset", "upsert", "--file", path]),
            )?;
            ensure!(
                code == expected_code
                    && err.starts_with(&format!("error: {path}: {reason}"))
                    && err.contains(names),
                "upsert of {path}: exit {code}, {err}"
            );
        }
        ensure!(
            presets_now()? == presets,
            "a refused upsert changed the presets"
        );
        // A file the CLI accepts but control refuses: an unknown provider.
        let acme = dir.path().join("acme.json");
        std::fs::write(
            &acme,
            r#"{"name": "cli-acme", "primary": {"model": "m-1", "provider": "acme"}}"#,
        )?;
        let acme = acme.to_str().context("temp path is UTF-8")?;
        let (code, err) = genesisctl_refused(
            &fleet,
            &argv(&t, &["llm", "preset", "upsert", "--file", acme]),
        )?;
        ensure!(
            code == 1
                && err.starts_with("error: INVALID_ARGUMENT: ")
                && err.contains("primary.provider")
                && err.contains("unknown provider \"acme\""),
            "upsert with an unknown provider: {code} {err}"
        );
        ensure!(
            presets_now()? == presets,
            "a refused upsert changed the presets"
        );
        // A model the pricing table does not know: refused, naming the fix.
        let unpriced = dir.path().join("unpriced.json");
        std::fs::write(
            &unpriced,
            r#"{"name": "cli-unpriced", "primary": {"model": "brand-new-model", "provider": "openai",
                "credential_names": ["OPENAI_API_KEY"]}}"#,
        )?;
        let unpriced = unpriced.to_str().context("temp path is UTF-8")?;
        let (code, err) = genesisctl_refused(
            &fleet,
            &argv(&t, &["llm", "preset", "upsert", "--file", unpriced]),
        )?;
        ensure!(
            code == 1
                && err.starts_with("error: FAILED_PRECONDITION: ")
                && err.contains("genesisctl llm pricing set brand-new-model"),
            "upsert of an unpriced model: {code} {err}"
        );
        ensure!(
            presets_now()? == presets,
            "a refused upsert changed the presets"
        );

        // `llm sites` needs a tenant; refused before anything is sent.
        let (code, err) = genesisctl_refused(&fleet, &["-o", "json", "llm", "sites"])?;
        ensure!(
            code == 2 && err == "error: --tenant (or GENESIS_TENANT) is required for `llm sites`",
            "sites without a tenant: {code} {err}"
        );

        // `llm pricing set` then `llm pricing` reads the row back.
        let model = "cli-e2e-model";
        let set = genesisctl_json(&fleet, &["-o", "json", "llm", "pricing", "set", model, "3.5", "12"])?;
        ensure!(
            set["model"] == model && set["input_per_mtok"] == 3.5 && set["output_per_mtok"] == 12.0,
            "{set}"
        );
        let prices = prices_now()?;
        let row = prices
            .iter()
            .find(|p| p["model"] == model)
            .with_context(|| format!("`llm pricing` lacks {model}: {prices:?}"))?;
        ensure!(
            row["input_per_mtok"] == 3.5 && row["output_per_mtok"] == 12.0,
            "{row}"
        );

        // A negative price is refused with the argument named, as given
        // directly or after `--`, and the row keeps its price.
        for args in [
            vec!["-o", "json", "llm", "pricing", "set", model, "-1", "12"],
            vec!["-o", "json", "llm", "pricing", "set", model, "--", "-1", "12"],
        ] {
            let (code, err) = genesisctl_refused(&fleet, &args)?;
            ensure!(
                code == 2
                    && err
                        == "error: IN: must be a finite, non-negative number of dollars per million tokens, got -1",
                "{args:?}: {code} {err}"
            );
        }
        let (code, err) = genesisctl_refused(
            &fleet,
            &["-o", "json", "llm", "pricing", "set", "cli-new-model", "1", "--", "-0.5"],
        )?;
        ensure!(
            code == 2
                && err
                    == "error: OUT: must be a finite, non-negative number of dollars per million tokens, got -0.5",
            "negative output price: {code} {err}"
        );
        ensure!(
            prices_now()? == prices,
            "a refused price changed the pricing table"
        );
        Ok(())
    })
    .await
}
