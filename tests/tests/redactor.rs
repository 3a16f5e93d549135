//! The Prompt Engineer (spec §3.9) end to end on the three real services:
//! it ships dark — a signal raised while the tenant's `prompt-redactor`
//! feature is off creates the Paused redactor and queues the signal, which
//! is published, refused as `not_active` and never ticked; turning the
//! feature on activates the redactor and re-arms the queued signal, whose
//! tick reviews the bound call-site's overlay (masked) and proposes a
//! redacted overlay as one `redaction` decision. A stale approval (the
//! overlay changed since) is refused with nothing changed; an approval
//! replaces the overlay in the same transaction as its resume; a rejection
//! changes nothing; turning the feature off pauses the redactor again. The
//! raw secret never reaches any table but the preset itself, nor any log.

use std::time::Duration;

use anyhow::Context as _;
use genesis_e2e::{Findings, Fleet, FleetOptions, binaries_missing, bounded, metadata, wait_for};
use genesis_proto::v1 as pb;
use genesis_store::inspect::{self, fleet as checks};
use tonic::Code;
use uuid::Uuid;

const T: Duration = Duration::from_secs(30);
const SECRET: &str = "sk-ant-e2eREDACTME0123456789abcdefXYZ";
const EMAIL: &str = "oncall@acme.example";
const SECOND_SECRET: &str = "ghp_e2eSECONDsecret0123456789abcdefghijklmn";
const SITE: &str = "Agent:Planning";

fn dirty() -> String {
    format!("Authenticate with {SECRET}. Page {EMAIL} when the deploy fails.")
}

fn overlays(overlay: &str) -> serde_json::Value {
    serde_json::json!({ "prompt_overlay": overlay })
}

async fn set_overlay(
    admin: &genesis_e2e::Admin,
    preset: &pb::Preset,
    overlay: &str,
) -> anyhow::Result<()> {
    let primary = preset
        .primary
        .clone()
        .context("the preset has no primary")?;
    admin
        .upsert_preset(
            &preset.tenant_id,
            Some(&preset.id),
            &preset.name,
            primary,
            overlays(overlay),
        )
        .await?;
    Ok(())
}

async fn overlay_now(fleet: &Fleet, preset: &str) -> anyhow::Result<String> {
    let o = checks::preset_prompt_overlay(&fleet.db, preset.parse()?).await?;
    Ok(o.unwrap_or_default())
}

async fn open_redactions(
    admin: &genesis_e2e::Admin,
    tenant: &str,
) -> anyhow::Result<Vec<pb::Decision>> {
    Ok(admin
        .decisions()
        .list_decisions(pb::ListDecisionsRequest {
            tenant_id: tenant.to_owned(),
            status: Some("open".into()),
        })
        .await?
        .into_inner()
        .decisions
        .into_iter()
        .filter(|d| d.kind == "redaction")
        .collect())
}

fn signal(tenant: &str, note: &str) -> pb::RaiseRedactorSignalRequest {
    pb::RaiseRedactorSignalRequest {
        tenant_id: tenant.to_owned(),
        call_site_id: SITE.into(),
        signal_kind: "HumanRequest".into(),
        note: note.into(),
    }
}

fn feature(tenant: &str, enabled: bool) -> pb::SetFeatureRequest {
    pb::SetFeatureRequest {
        tenant_id: tenant.to_owned(),
        name: "prompt-redactor".into(),
        enabled,
    }
}

fn respond(tenant: &str, id: &str, resolution: &str) -> pb::RespondDecisionRequest {
    pb::RespondDecisionRequest {
        tenant_id: tenant.to_owned(),
        decision_id: id.to_owned(),
        resolution: resolution.to_owned(),
        notes: String::new(),
    }
}

/// Rows of every table but `llm_presets` (where the overlay lives) whose
/// text holds `needle`, as `table: count`.
async fn stored_copies(fleet: &Fleet, needle: &str) -> anyhow::Result<Vec<String>> {
    Ok(
        checks::tables_holding_text(&fleet.db, needle, &["llm_presets"])
            .await?
            .into_iter()
            .map(|(t, n)| format!("{t}: {n}"))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_engineer_ships_dark_then_proposes_a_redaction_the_operator_decides()
-> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(240), async {
        let fleet = Fleet::start(FleetOptions::new("redactor", 1)).await?;
        let admin = fleet.admin().await?;
        let tenant = fleet.create_tenant_with("acme", false).await?;
        let mut f = Findings::default();

        // The call-site's preset carries a secret and an email address.
        let default = wait_for("the Default preset", T, || async {
            Ok(admin
                .llm()
                .list_presets(pb::ListPresetsRequest { tenant_id: tenant.clone() })
                .await?
                .into_inner()
                .presets
                .into_iter()
                .find(|p| p.name == "Default"))
        })
        .await?;
        let primary = default.primary.clone().context("the Default preset has no primary")?;
        let ops = admin.upsert_preset(&tenant, None, "ops", primary, overlays(&dirty())).await?;
        admin
            .llm()
            .attach_preset(pb::AttachPresetRequest {
                tenant_id: tenant.clone(),
                site_id: SITE.into(),
                preset_id: ops.id.clone(),
            })
            .await?;

        // Dark: the signal creates the Paused redactor and is queued; it is
        // published and refused as not_active, and never ticked.
        let raised = admin
            .agents()
            .raise_redactor_signal(signal(&tenant, "please review"))
            .await?
            .into_inner();
        f.check(raised.instance_created, "the first signal created no redactor");
        let redactor = raised.instance_id.clone();
        let dark_event: Uuid = raised.event_id.parse()?;
        wait_for("the dark signal to be published and refused", T, || async {
            let published = checks::event_published_at(&fleet.db, dark_event).await?;
            let refused = fleet
                .counter("supervisor", "genesis_supervisor_claims_total{outcome=\"not_active\"}")
                .await?;
            Ok((published.is_some() && refused >= 1.0).then_some(()))
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        f.check(
            fleet.turns(&redactor).await?.is_empty(),
            "the redactor ticked while the feature was off",
        );
        let (consumed, status) =
            checks::event_consumed_at_and_instance_status(&fleet.db, dark_event).await?;
        f.check(consumed.is_none(), "the dark signal was consumed");
        f.check(status == "paused", format!("the dark redactor is {status}"));
        f.check(open_redactions(&admin, &tenant).await?.is_empty(), "a proposal exists while dark");

        // On: the redactor is activated and the queued signal re-armed and
        // ticked; one proposal, carrying the masked overlay only.
        let on = admin.tenants().set_feature(feature(&tenant, true)).await?.into_inner();
        f.check(on.features.get("prompt-redactor") == Some(&true), "the flag is not on");
        let proposed = fleet
            .wait_turn(&redactor, 0, T, "the signal's turn", |t| t.event_kind == "ExternalSignalReceived")
            .await?;
        f.check(proposed.event_id == Some(dark_event), "the turn consumed another event than the dark signal");
        f.check(proposed.decision_kind == "Escalated", format!("the signal's turn is {}", proposed.decision_kind));
        let open = open_redactions(&admin, &tenant).await?;
        f.check(open.len() == 1, format!("{} open redaction proposals", open.len()));
        let proposal = open.first().cloned().context("no redaction proposal")?;
        let md = metadata(&proposal);
        f.check(md["source"] == "redactor", format!("metadata source: {md}"));
        f.check(md["callSiteId"] == SITE, format!("metadata callSiteId: {md}"));
        f.check(md["presetId"] == ops.id.as_str(), format!("metadata presetId: {md}"));
        f.check(
            md["redactedOverlay"]
                == "Authenticate with [REDACTED:api_key]. Page [REDACTED:email] when the deploy fails.",
            format!("redacted overlay: {}", md["redactedOverlay"]),
        );
        f.check(
            md["findings"] == serde_json::json!([{"kind": "api_key", "count": 1}, {"kind": "email", "count": 1}]),
            format!("findings: {}", md["findings"]),
        );
        for needle in [SECRET, EMAIL] {
            let copies = stored_copies(&fleet, needle).await?;
            f.check(copies.is_empty(), format!("the raw {needle:?} was stored outside its preset: {copies:?}"));
        }

        // Stale: the overlay changed since; the approval is refused and
        // nothing changes.
        set_overlay(&admin, &ops, "Authenticate with the vault.").await?;
        let stale = admin.decisions().respond_decision(respond(&tenant, &proposal.id, "approved")).await;
        f.check(
            matches!(&stale, Err(s) if s.code() == Code::FailedPrecondition && s.message().contains("changed since")),
            format!("a stale approval: {stale:?}"),
        );
        f.check(overlay_now(&fleet, &ops.id).await? == "Authenticate with the vault.", "a stale approval wrote the overlay");
        f.check(open_redactions(&admin, &tenant).await?.len() == 1, "a stale approval resolved the proposal");

        // Approved against the overlay it was drafted for: replaced, and the
        // redactor resumes once.
        set_overlay(&admin, &ops, &dirty()).await?;
        let before = fleet.last_turn(&redactor).await?;
        let approved = admin
            .decisions()
            .respond_decision(respond(&tenant, &proposal.id, "approved"))
            .await?
            .into_inner();
        f.check(!approved.already_resolved, "the approval was reported already_resolved");
        f.check(
            overlay_now(&fleet, &ops.id).await? == md["redactedOverlay"].as_str().unwrap_or("?"),
            "the approval did not install the redacted overlay",
        );
        let resumed = fleet
            .wait_turn(&redactor, before, T, "the resumed turn", |t| t.event_kind == "OperatorAnsweredEscalation")
            .await?;
        f.check(
            resumed.event_id.map(|e| e.to_string()) == approved.resume_event_id,
            "the resumed turn consumed another event than the approval's resume",
        );

        // Rejected: a new secret, a new proposal, the overlay kept.
        let second = format!("Use {SECOND_SECRET} for the mirror.");
        set_overlay(&admin, &ops, &second).await?;
        let before = fleet.last_turn(&redactor).await?;
        admin.agents().raise_redactor_signal(signal(&tenant, "again")).await?;
        fleet
            .wait_turn(&redactor, before, T, "the second signal's turn", |t| t.event_kind == "ExternalSignalReceived")
            .await?;
        let open = open_redactions(&admin, &tenant).await?;
        let again = open.first().cloned().context("no second proposal")?;
        f.check(open.len() == 1, format!("{} open proposals after the second signal", open.len()));
        admin.decisions().respond_decision(respond(&tenant, &again.id, "rejected")).await?;
        f.check(overlay_now(&fleet, &ops.id).await? == second, "a rejection changed the overlay");
        f.check(stored_copies(&fleet, SECOND_SECRET).await?.is_empty(), "the second secret was stored outside its preset");

        // Off: the redactor is paused; a new signal is queued, not ticked.
        fleet.wait_quiescent(T).await?;
        admin.tenants().set_feature(feature(&tenant, false)).await?;
        let turns = fleet.turns(&redactor).await?.len();
        let r = admin.agents().raise_redactor_signal(signal(&tenant, "while off")).await?.into_inner();
        f.check(!r.instance_created && r.instance_id == redactor, "a signal while off made another redactor");
        tokio::time::sleep(Duration::from_secs(3)).await;
        f.check(fleet.turns(&redactor).await?.len() == turns, "the redactor ticked after the feature was turned off");
        let status = inspect::instance_counters(&fleet.db, redactor.parse()?).await?.status;
        f.check(status == "paused", format!("the redactor is {status} after the feature was turned off"));

        // No raw secret in any log of the run.
        let logs = fleet.logs.clone();
        drop(fleet);
        for entry in std::fs::read_dir(&logs)? {
            let path = entry?.path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for needle in [SECRET, EMAIL, SECOND_SECRET] {
                f.check(!text.contains(needle), format!("{needle:?} in {}", path.display()));
            }
        }
        f.finish()
    })
    .await
}
