//! genesisctl's mode catalogue verbs through the real binary against a
//! running fleet: `agent mode get` shows the platform mode, `agent mode
//! edit` changes it for the tenant alone (a fragment from a file, a
//! toolset, a budget), `agent mode list` shows the tenant's copy, the edit
//! is audited in `agent_mode_change_events` with the token that made it
//! and each change old→new, and the supervisor's next claim for the
//! tenant's SOA runs the new fragment and toolset. A toolset outside the
//! type's superset is refused naming the tool and changes nothing; another
//! tenant's token can neither read nor edit the tenant's modes, and its own
//! catalogue stays the platform's.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{
    Fleet, FleetOptions, argv, binaries_missing, bounded, genesisctl_json, genesisctl_refused,
};
use genesis_proto::v1 as pb;
use genesis_store::inspect::{self, fleet as checks};
use serde_json::json;

const T: Duration = Duration::from_secs(30);
const FRAGMENT: &str = "MODE: Incident (acme) - contain first, then page the on-call.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_edits_a_mode_for_its_tenant_through_genesisctl() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(120), async {
        // No pods: the test's own claim is the only one.
        let fleet = Fleet::start(FleetOptions::new("cli-modes", 0)).await?;
        let tenant = fleet.create_tenant("cli-modes-acme").await?;
        let other = fleet.create_tenant("cli-modes-other").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        let t = ["-o", "json", "--tenant", tenant.as_str()];

        let platform = genesisctl_json(
            &fleet,
            &argv(&t, &["agent", "mode", "get", "Soa", "Incident"]),
        )?;
        ensure!(platform["name"] == "Incident", "{platform}");
        ensure!(
            platform.get("tenant_override").is_none_or(|v| v == false),
            "{platform}"
        );

        // A toolset outside the superset: refused naming the tool, nothing changes.
        let cadence = genesisctl_json(
            &fleet,
            &argv(&t, &["agent", "mode", "get", "Compliance", "Cadence"]),
        )?;
        let (_, err) = genesisctl_refused(
            &fleet,
            &argv(
                &t,
                &[
                    "agent",
                    "mode",
                    "edit",
                    "Compliance",
                    "Cadence",
                    "--tools",
                    "compliance_query_posture,soa_propose_task",
                ],
            ),
        )?;
        ensure!(
            err.contains("INVALID_ARGUMENT")
                && err.contains("toolset")
                && err.contains("soa_propose_task"),
            "{err}"
        );
        let still = genesisctl_json(
            &fleet,
            &argv(&t, &["agent", "mode", "get", "Compliance", "Cadence"]),
        )?;
        ensure!(still == cadence, "a refused edit changed Cadence: {still}");

        // The edit: a fragment from a file, a toolset and a budget.
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("incident.txt");
        std::fs::write(&file, FRAGMENT)?;
        let file = file.to_str().context("utf-8 path")?;
        let edited = genesisctl_json(
            &fleet,
            &argv(
                &t,
                &[
                    "agent",
                    "mode",
                    "edit",
                    "Soa",
                    "Incident",
                    "--fragment-file",
                    file,
                    "--tools",
                    "soa_query_telemetry,soa_send_message",
                    "--budget",
                    r#"{"maxTurns": 6}"#,
                ],
            ),
        )?;
        ensure!(
            edited["changed"] == json!(["prompt_fragment", "toolset", "budget_override"]),
            "{edited}"
        );
        ensure!(edited["mode"]["tenant_override"] == true, "{edited}");
        ensure!(edited["mode"]["prompt_fragment"] == FRAGMENT, "{edited}");
        let event = edited["mode_change_event_id"]
            .as_str()
            .context("no audit row id")?
            .to_owned();
        let listed = genesisctl_json(&fleet, &argv(&t, &["agent", "mode", "list", "Soa"]))?;
        let incident = listed["modes"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["name"] == "Incident"))
            .cloned()
            .with_context(|| format!("no Incident in {listed}"))?;
        ensure!(
            incident == edited["mode"],
            "list shows {incident}, the edit {}",
            edited["mode"]
        );

        // The audit row: who, when, each change old -> new.
        let checks::ModeChangeAudit {
            id,
            actor,
            changes,
            created_at: at,
        } = checks::catalogue_mode_change_of(&fleet.db, tenant.parse()?).await?;
        ensure!(id.to_string() == event, "audit row {id} vs {event}");
        ensure!(actor.contains("(token:"), "actor {actor:?}");
        ensure!(
            (chrono::Utc::now() - at).num_seconds() < 120,
            "created_at {at}"
        );
        ensure!(
            changes["prompt_fragment"]
                == json!({"old": platform["prompt_fragment"], "new": FRAGMENT}),
            "{changes}"
        );
        ensure!(
            changes["budget_override"] == json!({"old": null, "new": {"maxTurns": 6}}),
            "{changes}"
        );

        // The supervisor's next claim for the tenant's SOA runs the edit.
        let admin = fleet.admin().await?;
        admin
            .agents()
            .set_mode(pb::SetModeRequest {
                tenant_id: tenant.clone(),
                instance_id: soa.clone(),
                mode: "Incident".into(),
            })
            .await?;
        let channel =
            tonic::transport::Channel::from_shared(format!("http://{}", fleet.supervisor_grpc))?
                .connect()
                .await?;
        let mut pod = pb::agent_pod_client::AgentPodClient::with_interceptor(
            channel,
            genesis_e2e::Bearer::new(&fleet.pod_token)?,
        );
        let claim = pod
            .claim_tick(pb::ClaimTickRequest {
                instance_id: soa.clone(),
                tenant_id: tenant.clone(),
                event_id: None,
            })
            .await?
            .into_inner();
        let Some(pb::claim_tick_response::Result::Bundle(bundle)) = claim.result else {
            anyhow::bail!("no bundle for the SOA: {claim:?}");
        };
        let mode = bundle.mode.context("the bundle has no mode")?;
        ensure!(mode.name == "Incident", "{mode:?}");
        ensure!(mode.prompt_fragment == FRAGMENT, "{mode:?}");
        ensure!(mode.system_prompt.ends_with(FRAGMENT), "{mode:?}");
        ensure!(
            mode.toolset == ["soa_query_telemetry", "soa_send_message"],
            "{mode:?}"
        );

        // Another tenant's token: cannot read or edit this tenant's modes.
        let other_token = admin
            .tokens()
            .create_token(pb::CreateTokenRequest {
                scope: "operator".into(),
                tenant_id: Some(other.clone()),
                label: "other-operator".into(),
                ttl_seconds: Some(3600),
                pod_tenant_ids: vec![],
            })
            .await?
            .into_inner()
            .token;
        let as_other = ["-o", "json", "--token", other_token.as_str(), "--tenant"];
        let (_, err) = genesisctl_refused(
            &fleet,
            &argv(
                &as_other,
                &[
                    tenant.as_str(),
                    "agent",
                    "mode",
                    "edit",
                    "Soa",
                    "Incident",
                    "--fragment",
                    "mine now",
                ],
            ),
        )?;
        ensure!(err.contains("PERMISSION_DENIED"), "{err}");
        let (_, err) = genesisctl_refused(
            &fleet,
            &argv(
                &as_other,
                &[tenant.as_str(), "agent", "mode", "get", "Soa", "Incident"],
            ),
        )?;
        ensure!(err.contains("PERMISSION_DENIED"), "{err}");
        let theirs = genesisctl_json(
            &fleet,
            &argv(
                &as_other,
                &[other.as_str(), "agent", "mode", "get", "Soa", "Incident"],
            ),
        )?;
        ensure!(
            theirs == platform,
            "the other tenant sees {theirs}, not the platform's {platform}"
        );
        let mine = genesisctl_json(
            &fleet,
            &argv(&t, &["agent", "mode", "get", "Soa", "Incident"]),
        )?;
        ensure!(mine["prompt_fragment"] == FRAGMENT, "{mine}");
        let rows = inspect::count_catalogue_mode_changes(&fleet.db).await?;
        ensure!(rows == 1, "{rows} catalogue audit rows");
        Ok(())
    })
    .await
}
