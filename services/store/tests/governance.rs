//! Database tests of the governance and tool-backend repositories:
//! constitution rules, knowledge and code search, dossiers and posture,
//! research records — each happy path on real rows and its refusal path,
//! plus tenant isolation of the new tables. Must never mock the database.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use genesis_core::constitution::{self as gc, CheckContext, Constitution, RuleKind};
use genesis_store::StoreError;
use genesis_store::constitution::{self as rules, NewConstitutionRule};
use genesis_store::dossiers::{self, DossierFilter, DossierStatus, NewDossier};
use genesis_store::knowledge::{self, KnowledgeKind, NewKnowledgeDocument};
use genesis_store::research::{self, NewResearchRecord};
use sqlx::PgPool;
use uuid::Uuid;

fn term_rule(name: &str, term: &str) -> NewConstitutionRule {
    NewConstitutionRule {
        name: name.into(),
        kind: RuleKind::ForbiddenTerm { term: term.into() },
        description: "no".into(),
        tools: vec![],
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn constitution_rules_round_trip_into_a_working_constitution(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let other = tenant(&store, "other").await?;
    let r1 = store
        .constitution()
        .insert(t, &term_rule("no-prod", "drop production"))
        .await?;
    let limit = NewConstitutionRule {
        name: "one-task-per-tick".into(),
        kind: RuleKind::ActionLimit {
            tool: "soa_propose_task".into(),
            max_per_tick: Some(1),
            max_per_day: None,
        },
        description: String::new(),
        tools: vec![],
    };
    store.constitution().insert(t, &limit).await?;
    store
        .constitution()
        .insert(other, &term_rule("other-rule", "hello"))
        .await?;

    let loaded = store.constitution().list_enabled(t).await?;
    assert_eq!(loaded.len(), 2);
    assert_eq!(loaded[0], r1);
    assert_eq!(
        loaded[0].kind,
        RuleKind::ForbiddenTerm {
            term: "drop production".into()
        }
    );
    let c = Constitution::compile(&loaded)?;
    let err = gc::check(
        "soa_send_message",
        &[("body", "please DROP production")],
        &c,
        &CheckContext::default(),
    )
    .unwrap_err();
    assert_eq!(err.violations[0].rule_id, r1.id);
    // The other tenant's rule is invisible here.
    assert!(
        gc::check(
            "soa_send_message",
            &[("body", "hello")],
            &c,
            &CheckContext::default()
        )
        .is_ok()
    );

    // Disabling takes the rule out of force; unknown ids are NotFound.
    store
        .constitution()
        .set_enabled(t, r1.id.parse()?, false)
        .await?;
    assert_eq!(store.constitution().list_enabled(t).await?.len(), 1);
    let missing = store
        .constitution()
        .set_enabled(t, Uuid::new_v4(), false)
        .await;
    assert!(
        matches!(missing, Err(StoreError::NotFound { .. })),
        "{missing:?}"
    );
    // Another tenant's rule is NotFound too (RLS).
    let theirs = store.constitution().list_enabled(other).await?;
    let cross = store
        .constitution()
        .set_enabled(t, theirs[0].id.parse()?, false)
        .await;
    assert!(matches!(cross, Err(StoreError::NotFound { .. })));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_bad_rule_is_refused_and_nothing_is_written(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let bad = NewConstitutionRule {
        name: "broken".into(),
        kind: RuleKind::ForbiddenPattern {
            pattern: "([a-z".into(),
        },
        description: String::new(),
        tools: vec![],
    };
    let err = store.constitution().insert(t, &bad).await.unwrap_err();
    match err {
        StoreError::InvalidArgument { field, .. } => assert_eq!(field, "pattern"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM constitution_rules WHERE tenant_id = $1",
            t
        )
        .await?,
        0
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn call_counts_split_the_tick_from_the_day(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let soa = soa(&store, t).await?;
    let (s1, s2) = (Uuid::new_v4(), Uuid::new_v4());
    for (session, call, blocked) in [
        (s1, "a", false),
        (s2, "b", false),
        (s2, "c", false),
        (s2, "d", true),
    ] {
        sqlx::query(
            "INSERT INTO tool_invocations (tenant_id, instance_id, session, call_id, tool_name, arguments, result, blocked)
             VALUES ($1, $2, $3, $4, 'soa_propose_task', '{}', '{}', $5)",
        )
        .bind(t).bind(soa.id).bind(session).bind(call).bind(blocked)
        .execute(&pool).await?;
    }
    let mut tx = store.tenant_tx(t).await?;
    assert_eq!(
        rules::call_counts(tx.conn(), soa.id, s2, "soa_propose_task").await?,
        (2, 3)
    );
    assert_eq!(
        rules::call_counts(tx.conn(), soa.id, s2, "soa_send_message").await?,
        (0, 0)
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn knowledge_search_is_ranked_scoped_by_kind_and_tenant(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let other = tenant(&store, "other").await?;
    let project = Uuid::new_v4();
    let mut tx = store.tenant_tx(t).await?;
    let doc = |kind, title: &str, body: &str| NewKnowledgeDocument {
        project_id: Some(project),
        kind,
        title: title.into(),
        body: body.into(),
        source: "wiki".into(),
    };
    let best = knowledge::ingest(
        tx.conn(),
        t,
        &doc(
            KnowledgeKind::Intelligence,
            "Payment retries",
            "How payment retries back off.",
        ),
    )
    .await?;
    knowledge::ingest(
        tx.conn(),
        t,
        &doc(
            KnowledgeKind::Intelligence,
            "Onboarding",
            "A note mentioning a payment once.",
        ),
    )
    .await?;
    knowledge::ingest(
        tx.conn(),
        t,
        &doc(
            KnowledgeKind::Compliance,
            "PCI payment controls",
            "Payment card data rules.",
        ),
    )
    .await?;
    tx.commit().await?;
    let mut tx = store.tenant_tx(other).await?;
    knowledge::ingest(
        tx.conn(),
        other,
        &NewKnowledgeDocument {
            project_id: None,
            kind: KnowledgeKind::Intelligence,
            title: "Payment secrets".into(),
            body: "payment payment payment".into(),
            source: String::new(),
        },
    )
    .await?;
    tx.commit().await?;

    let mut tx = store.tenant_tx(t).await?;
    let hits =
        knowledge::search(tx.conn(), KnowledgeKind::Intelligence, "payment", None, 10).await?;
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(hits[0].id, best.id);
    assert!(hits[0].rank >= hits[1].rank);
    assert!(hits[0].snippet.contains("«"), "{}", hits[0].snippet);
    let comp = knowledge::search(
        tx.conn(),
        KnowledgeKind::Compliance,
        "payment card",
        Some(project),
        10,
    )
    .await?;
    assert_eq!(comp.len(), 1);
    assert!(
        knowledge::search(
            tx.conn(),
            KnowledgeKind::Compliance,
            "payment",
            Some(Uuid::new_v4()),
            10
        )
        .await?
        .is_empty()
    );
    // Bad input is refused by field.
    for (q, limit, field) in [("", 10, "query"), ("x", 0, "limit"), ("x", 51, "limit")] {
        match knowledge::search(tx.conn(), KnowledgeKind::Intelligence, q, None, limit).await {
            Err(StoreError::InvalidArgument { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{q:?} {limit}: {other:?}"),
        }
    }
    let empty = knowledge::ingest(tx.conn(), t, &doc(KnowledgeKind::Compliance, " ", "body")).await;
    assert!(matches!(empty, Err(StoreError::InvalidArgument { .. })));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn code_search_reports_paths_and_line_numbers(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let p = Uuid::new_v4();
    let mut tx = store.tenant_tx(t).await?;
    knowledge::upsert_source_file(tx.conn(), t, p, "src/config.rs", "rust",
        "use std::fs;\n\npub fn parse_config(path: &str) -> Config {\n    todo\n}\n// parse_config is called at boot\n").await?;
    knowledge::upsert_source_file(
        tx.conn(),
        t,
        p,
        "src/main.rs",
        "rust",
        "fn main() {\n    run();\n}\n",
    )
    .await?;
    let matches = knowledge::code_search(tx.conn(), "parse_config", None, 10).await?;
    assert_eq!(matches.len(), 2, "{matches:?}");
    assert_eq!(matches[0].path, "src/config.rs");
    assert_eq!(matches[0].line, 3);
    assert!(matches[0].text.contains("pub fn parse_config"));
    assert_eq!(matches[1].line, 6);
    // Replacing a file re-indexes it.
    knowledge::upsert_source_file(tx.conn(), t, p, "src/config.rs", "rust", "nothing here\n")
        .await?;
    assert!(
        knowledge::code_search(tx.conn(), "parse_config", Some(p), 10)
            .await?
            .is_empty()
    );
    let err = knowledge::code_search(tx.conn(), "()", None, 10)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidArgument { ref field, .. } if field == "query"),
        "{err:?}"
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn dossiers_version_on_rerecord_translate_and_derive_posture(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let mut tx = store.tenant_tx(t).await?;
    let new = |control: &str, status| NewDossier {
        project_id: None,
        framework: "SOC2".into(),
        control_id: control.into(),
        title: format!("Control {control}"),
        body: "Evidence and assessment.".into(),
        status,
        language: "en".into(),
        recorded_by: None,
    };
    let d1 = dossiers::record(tx.conn(), t, &new("CC1.1", DossierStatus::Gap)).await?;
    assert_eq!(d1.version, 1);
    let d1b = dossiers::record(tx.conn(), t, &new("CC1.1", DossierStatus::Compliant)).await?;
    assert_eq!(
        (d1b.id, d1b.version, d1b.status),
        (d1.id, 2, DossierStatus::Compliant)
    );
    dossiers::record(tx.conn(), t, &new("CC2.1", DossierStatus::Partial)).await?;
    dossiers::record(tx.conn(), t, &new("CC3.1", DossierStatus::Gap)).await?;
    dossiers::record(tx.conn(), t, &new("CC9.9", DossierStatus::NotApplicable)).await?;

    let tr = dossiers::translate(tx.conn(), t, d1.id, "de", "Kontrolle", "Nachweis.").await?;
    assert_eq!(tr.source_version, 2);
    let listed = dossiers::list(
        tx.conn(),
        &DossierFilter {
            framework: Some("SOC2".into()),
            ..Default::default()
        },
        50,
    )
    .await?;
    assert_eq!(listed.len(), 4);
    assert_eq!(listed[0].translations, ["de"]);
    let gaps = dossiers::list(
        tx.conn(),
        &DossierFilter {
            status: Some(DossierStatus::Gap),
            ..Default::default()
        },
        50,
    )
    .await?;
    assert_eq!(gaps.len(), 1);

    let posture = dossiers::posture(tx.conn(), None, None).await?;
    assert_eq!(posture.len(), 1);
    let p = &posture[0];
    assert_eq!(
        (p.controls, p.compliant, p.partial, p.gap, p.not_applicable),
        (4, 1, 1, 1, 1)
    );
    assert!((p.score.unwrap() - 0.5).abs() < 1e-9, "{p:?}");
    assert_eq!(p.gaps, ["CC3.1"]);

    // Refusals: unknown dossier, same language, bad tag, bad status text.
    let missing = dossiers::translate(tx.conn(), t, Uuid::new_v4(), "de", "x", "y").await;
    assert!(matches!(missing, Err(StoreError::NotFound { .. })));
    let same = dossiers::translate(tx.conn(), t, d1.id, "en", "x", "y").await;
    assert!(
        matches!(same, Err(StoreError::InvalidArgument { ref field, .. }) if field == "language")
    );
    let tag = dossiers::translate(tx.conn(), t, d1.id, "German", "x", "y").await;
    assert!(
        matches!(tag, Err(StoreError::InvalidArgument { ref field, .. }) if field == "language")
    );
    assert!(DossierStatus::parse("status", "green").is_err());
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn research_records_are_created_found_and_isolated(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let other = tenant(&store, "other").await?;
    let soa = soa(&store, t).await?;
    let mut tx = store.tenant_tx(t).await?;
    let rec = research::create(
        tx.conn(),
        t,
        Some(soa.id),
        &NewResearchRecord {
            title: "Latency regression".into(),
            question: "Why did p95 rise?".into(),
            findings: "The cache eviction policy changed.".into(),
            sources: vec!["dashboards/p95".into()],
            tags: vec!["perf".into()],
            ..Default::default()
        },
    )
    .await?;
    research::create(
        tx.conn(),
        t,
        None,
        &NewResearchRecord {
            title: "Other".into(),
            findings: "Unrelated.".into(),
            ..Default::default()
        },
    )
    .await?;
    assert_eq!(research::get(tx.conn(), rec.id).await?, rec);
    let found = research::search(tx.conn(), Some("cache eviction"), 10).await?;
    assert_eq!(found.iter().map(|r| r.id).collect::<Vec<_>>(), [rec.id]);
    assert_eq!(research::search(tx.conn(), None, 10).await?.len(), 2);
    let blank = research::create(
        tx.conn(),
        t,
        None,
        &NewResearchRecord {
            title: "x".into(),
            findings: " ".into(),
            ..Default::default()
        },
    )
    .await;
    assert!(
        matches!(blank, Err(StoreError::InvalidArgument { ref field, .. }) if field == "findings")
    );
    tx.commit().await?;
    let mut tx = store.tenant_tx(other).await?;
    assert!(matches!(
        research::get(tx.conn(), rec.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(research::search(tx.conn(), None, 10).await?.is_empty());
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_compliance_cold_sweep_finds_the_tenants_projects_in_order_and_bounded(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let other = tenant(&store, "other").await?;
    let (mut p1, mut p2) = (Uuid::new_v4(), Uuid::new_v4());
    if p2 < p1 {
        std::mem::swap(&mut p1, &mut p2);
    }
    let doc = |project, kind| NewKnowledgeDocument {
        project_id: project,
        kind,
        title: "Policy".into(),
        body: "Access reviews happen quarterly.".into(),
        source: "wiki".into(),
    };
    let mut tx = store.tenant_tx(t).await?;
    // An empty tenant has nothing to sweep.
    let empty = knowledge::compliance_corpus(tx.conn(), knowledge::MAX_CORPUS_PROJECTS).await?;
    assert!(empty.is_empty(), "{empty:?}");
    knowledge::ingest(tx.conn(), t, &doc(Some(p2), KnowledgeKind::Compliance)).await?;
    knowledge::ingest(tx.conn(), t, &doc(Some(p2), KnowledgeKind::Compliance)).await?;
    knowledge::ingest(tx.conn(), t, &doc(None, KnowledgeKind::Compliance)).await?;
    // An intelligence document does not make a compliance project.
    knowledge::ingest(
        tx.conn(),
        t,
        &doc(Some(Uuid::new_v4()), KnowledgeKind::Intelligence),
    )
    .await?;
    knowledge::upsert_source_file(tx.conn(), t, p1, "src/auth.rs", "rust", "fn login() {}").await?;
    dossiers::record(
        tx.conn(),
        t,
        &NewDossier {
            project_id: Some(p1),
            framework: "SOC2".into(),
            control_id: "CC6.1".into(),
            title: "Logical access".into(),
            body: "Evidence.".into(),
            status: DossierStatus::Partial,
            language: "en".into(),
            recorded_by: None,
        },
    )
    .await?;
    tx.commit().await?;
    let foreign = Uuid::new_v4();
    let mut tx = store.tenant_tx(other).await?;
    knowledge::ingest(
        tx.conn(),
        other,
        &doc(Some(foreign), KnowledgeKind::Compliance),
    )
    .await?;
    tx.commit().await?;

    let mut tx = store.tenant_tx(t).await?;
    let corpus = knowledge::compliance_corpus(tx.conn(), knowledge::MAX_CORPUS_PROJECTS).await?;
    assert_eq!(
        corpus.projects,
        vec![
            knowledge::CorpusProject {
                project_id: p1,
                documents: 0,
                source_files: 1,
                dossiers: 1
            },
            knowledge::CorpusProject {
                project_id: p2,
                documents: 2,
                source_files: 0,
                dossiers: 0
            },
        ]
    );
    assert_eq!(corpus.tenant_wide_entries, 1);
    assert!(!corpus.truncated);
    // Bounded: past the limit the rest is reported, not silently dropped.
    let first = knowledge::compliance_corpus(tx.conn(), 1).await?;
    assert_eq!(first.projects.len(), 1);
    assert_eq!(first.projects[0].project_id, p1);
    assert!(first.truncated);
    for bad in [0, knowledge::MAX_CORPUS_PROJECTS + 1] {
        let err = knowledge::compliance_corpus(tx.conn(), bad)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::InvalidArgument { field, .. } if field == "limit"),
            "{err:?}"
        );
    }
    tx.commit().await?;
    // The other tenant sees only its own project.
    let mut tx = store.tenant_tx(other).await?;
    let theirs = knowledge::compliance_corpus(tx.conn(), knowledge::MAX_CORPUS_PROJECTS).await?;
    let ids: Vec<Uuid> = theirs.projects.iter().map(|p| p.project_id).collect();
    assert_eq!(ids, vec![foreign]);
    tx.commit().await?;
    Ok(())
}
