//! ConstitutionService and KnowledgeService through `run` on real
//! PostgreSQL and NATS: a rule is added, listed, removed (disabled) and no
//! longer listed; an invalid pattern is refused naming the field with
//! nothing written; a document and a source file are ingested and listed
//! (and filtered); one tenant's operator can neither list nor remove
//! another tenant's rules.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use genesis_core::TokenScope;
use genesis_core::constitution::RuleKind;
use genesis_proto::v1;
use sqlx::PgPool;
use tonic::Code;
use tonic::transport::Channel;
use uuid::Uuid;

type Rules = v1::constitution_service_client::ConstitutionServiceClient<Channel>;
type Docs = v1::knowledge_service_client::KnowledgeServiceClient<Channel>;

fn add(tenant: Uuid, name: &str, pattern: &str) -> v1::AddRuleRequest {
    v1::AddRuleRequest {
        tenant_id: tenant.to_string(),
        name: name.into(),
        description: "no credentials in agent output".into(),
        pattern: pattern.into(),
    }
}

fn list(tenant: Uuid) -> v1::ListRulesRequest {
    v1::ListRulesRequest {
        tenant_id: tenant.to_string(),
    }
}

fn remove(tenant: Uuid, rule: &str) -> v1::RemoveRuleRequest {
    v1::RemoveRuleRequest {
        tenant_id: tenant.to_string(),
        rule_id: rule.into(),
    }
}

/// Every constitution row of the tenant, enabled or not.
async fn rule_rows(store: &genesis_store::Store, tenant: Uuid) -> anyhow::Result<i64> {
    let mut tx = store.tenant_tx(tenant).await?;
    let n = genesis_store::inspect::count_rows(tx.conn(), "constitution_rules").await?;
    tx.commit().await?;
    Ok(n)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_rule_is_added_listed_removed_and_no_longer_listed(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = Rules::new(h.channel().await?);

    let added = c
        .add_rule(req(add(t, "no-passwords", r"password\s*="), &op))
        .await?
        .into_inner();
    assert_eq!(added.name, "no-passwords");
    assert_eq!(added.tenant_id, t.to_string());
    assert_eq!(added.pattern, r"password\s*=");
    assert_eq!(added.description, "no credentials in agent output");

    // What the supervisor's cache loads: an enabled, case-insensitive
    // forbidden pattern.
    let stored = store.constitution().list_enabled(t).await?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].id, added.id);
    assert_eq!(
        stored[0].kind,
        RuleKind::ForbiddenPattern {
            pattern: r"(?i)password\s*=".into()
        }
    );

    let listed = c.list_rules(req(list(t), &op)).await?.into_inner();
    assert_eq!(listed.rules, vec![added.clone()]);

    let gone = c
        .remove_rule(req(remove(t, &added.id), &op))
        .await?
        .into_inner();
    assert!(gone.removed);
    assert!(
        c.list_rules(req(list(t), &op))
            .await?
            .into_inner()
            .rules
            .is_empty()
    );
    assert!(store.constitution().list_enabled(t).await?.is_empty());
    // Disabled, not deleted.
    assert_eq!(rule_rows(&store, t).await?, 1);

    // Removing it again answers removed=false; an unknown id is NOT_FOUND.
    let again = c
        .remove_rule(req(remove(t, &added.id), &op))
        .await?
        .into_inner();
    assert!(!again.removed);
    let unknown = c
        .remove_rule(req(remove(t, &Uuid::new_v4().to_string()), &op))
        .await
        .expect_err("unknown rule");
    assert_eq!(unknown.code(), Code::NotFound);
    let bad_id = c
        .remove_rule(req(remove(t, "not-a-uuid"), &op))
        .await
        .expect_err("bad id");
    assert_eq!(bad_id.code(), Code::InvalidArgument);
    assert!(bad_id.message().starts_with("rule_id:"));

    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_invalid_rule_is_refused_naming_the_field_and_nothing_is_written(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = Rules::new(h.channel().await?);

    for (request, field) in [
        (add(t, "broken", "(unclosed"), "pattern:"),
        (add(t, "huge", &"a".repeat(5000)), "pattern:"),
        (add(t, "empty", ""), "pattern:"),
        (add(t, "  ", "ok"), "name:"),
    ] {
        let e = c.add_rule(req(request, &op)).await.expect_err("refused");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().starts_with(field), "{}", e.message());
    }
    assert_eq!(rule_rows(&store, t).await?, 0);

    // A duplicate name is ALREADY_EXISTS and leaves the first rule alone.
    c.add_rule(req(add(t, "one", "x"), &op)).await?;
    let dup = c
        .add_rule(req(add(t, "one", "y"), &op))
        .await
        .expect_err("duplicate");
    assert_eq!(dup.code(), Code::AlreadyExists);
    assert_eq!(rule_rows(&store, t).await?, 1);

    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn another_tenants_rules_can_be_neither_listed_nor_removed(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = Rules::new(h.channel().await?);

    let rule_b = c
        .add_rule(req(add(b, "b-rule", "forbidden"), &op_b))
        .await?
        .into_inner();

    let listed = c
        .list_rules(req(list(b), &op_a))
        .await
        .expect_err("other tenant");
    assert_eq!(listed.code(), Code::PermissionDenied);
    let named_b = c
        .remove_rule(req(remove(b, &rule_b.id), &op_a))
        .await
        .expect_err("other tenant");
    assert_eq!(named_b.code(), Code::PermissionDenied);
    // Naming its own tenant with B's rule id finds nothing.
    let via_a = c
        .remove_rule(req(remove(a, &rule_b.id), &op_a))
        .await
        .expect_err("invisible");
    assert_eq!(via_a.code(), Code::NotFound);
    let added_into_b = c
        .add_rule(req(add(b, "sneaky", "x"), &op_a))
        .await
        .expect_err("other tenant");
    assert_eq!(added_into_b.code(), Code::PermissionDenied);

    assert!(
        c.list_rules(req(list(a), &op_a))
            .await?
            .into_inner()
            .rules
            .is_empty()
    );
    let still = c.list_rules(req(list(b), &op_b)).await?.into_inner();
    assert_eq!(still.rules, vec![rule_b]);

    h.stop().await
}

fn list_docs(tenant: Uuid, kind: Option<&str>, project: Option<Uuid>) -> v1::ListDocumentsRequest {
    v1::ListDocumentsRequest {
        tenant_id: tenant.to_string(),
        kind: kind.map(str::to_owned),
        project_id: project.map(|p| p.to_string()),
        limit: 0,
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_ingested_document_and_source_file_are_listed_and_searchable(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let other = store.tenants().create("b").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let op_other = token(&store, TokenScope::Operator, Some(other)).await?;
    let project = Uuid::new_v4();
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = Docs::new(h.channel().await?);

    let body = "Retry budgets bound the load a failing dependency sees.";
    let doc = c
        .ingest_document(req(
            v1::IngestDocumentRequest {
                tenant_id: t.to_string(),
                title: "Retry budgets".into(),
                body: body.into(),
                source: "https://example.invalid/retries".into(),
                project_id: String::new(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(doc.kind, "document");
    assert_eq!(doc.title, "Retry budgets");
    assert_eq!(doc.size_bytes, body.len() as i64);
    assert_eq!(doc.project_id, "");

    let content = "fn retry_budget() -> u32 {\n    3\n}\n";
    let file = c
        .ingest_source_file(req(
            v1::IngestSourceFileRequest {
                tenant_id: t.to_string(),
                path: "src/retry.rs".into(),
                content: content.into(),
                language: String::new(),
                project_id: project.to_string(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(file.kind, "source_file");
    assert_eq!(file.title, "src/retry.rs");
    assert_eq!(file.source, "rust", "language guessed from the path");
    assert_eq!(file.project_id, project.to_string());
    assert_eq!(file.size_bytes, content.len() as i64);

    let all = c
        .list_documents(req(list_docs(t, None, None), &op))
        .await?
        .into_inner()
        .documents;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0], file, "newest first");
    assert_eq!(all[1], doc);
    let only_docs = c
        .list_documents(req(list_docs(t, Some("document"), None), &op))
        .await?
        .into_inner()
        .documents;
    assert_eq!(only_docs, vec![doc.clone()]);
    let in_project = c
        .list_documents(req(list_docs(t, None, Some(project)), &op))
        .await?
        .into_inner()
        .documents;
    assert_eq!(in_project, vec![file.clone()]);

    // What the agents' tools search.
    let mut tx = store.tenant_tx(t).await?;
    let hits = genesis_store::knowledge::search(
        tx.conn(),
        genesis_store::knowledge::KnowledgeKind::Intelligence,
        "retry budgets",
        None,
        5,
    )
    .await?;
    let lines = genesis_store::knowledge::code_search(tx.conn(), "retry_budget", None, 5).await?;
    tx.commit().await?;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id.to_string(), doc.id);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].line, 1);

    // Bad input names the field and writes nothing.
    for (request, field) in [
        (
            v1::IngestDocumentRequest {
                tenant_id: t.to_string(),
                title: " ".into(),
                body: "b".into(),
                source: String::new(),
                project_id: String::new(),
            },
            "title:",
        ),
        (
            v1::IngestDocumentRequest {
                tenant_id: t.to_string(),
                title: "t".into(),
                body: String::new(),
                source: String::new(),
                project_id: String::new(),
            },
            "body:",
        ),
        (
            v1::IngestDocumentRequest {
                tenant_id: t.to_string(),
                title: "t".into(),
                body: "b".into(),
                source: String::new(),
                project_id: "nope".into(),
            },
            "project_id:",
        ),
    ] {
        let e = c
            .ingest_document(req(request, &op))
            .await
            .expect_err("refused");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().starts_with(field), "{}", e.message());
    }
    let no_path = c
        .ingest_source_file(req(
            v1::IngestSourceFileRequest {
                tenant_id: t.to_string(),
                path: String::new(),
                content: "x".into(),
                language: String::new(),
                project_id: String::new(),
            },
            &op,
        ))
        .await
        .expect_err("no path");
    assert!(no_path.message().starts_with("path:"));
    let bad_kind = c
        .list_documents(req(list_docs(t, Some("intelligence"), None), &op))
        .await
        .expect_err("bad kind");
    assert!(bad_kind.message().starts_with("kind:"));
    assert_eq!(
        c.list_documents(req(list_docs(t, None, None), &op))
            .await?
            .into_inner()
            .documents
            .len(),
        2
    );

    // Another tenant sees none of it and cannot read this tenant's list.
    assert!(
        c.list_documents(req(list_docs(other, None, None), &op_other))
            .await?
            .into_inner()
            .documents
            .is_empty()
    );
    let denied = c
        .list_documents(req(list_docs(t, None, None), &op_other))
        .await
        .expect_err("other tenant");
    assert_eq!(denied.code(), Code::PermissionDenied);

    h.stop().await
}
