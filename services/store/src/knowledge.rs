//! `knowledge_documents` and `source_files`: the corpora behind
//! `intelligence_knowledge_query`, `compliance_knowledge_query`,
//! `compliance_knowledge_ingest` and `intelligence_code_search`. Search is
//! PostgreSQL full text (generated `tsvector` columns, GIN indexed), ranked
//! with `ts_rank`; code search narrows candidate files by index and reports
//! the matching lines with their 1-based numbers. Must never search across
//! tenants (every call runs in the caller's RLS-scoped connection) nor
//! build a `tsquery` from raw syntax (only `websearch_to_tsquery` /
//! `plainto_tsquery`, which cannot fail on user text).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode, decode_all};

/// Longest search query, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Longest document title, in bytes.
pub const MAX_TITLE_BYTES: usize = 500;
/// Longest document body, in bytes.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Longest source reference, in bytes.
pub const MAX_SOURCE_BYTES: usize = 2048;
/// Largest source file stored, in bytes.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// Most results one search returns.
pub const MAX_RESULTS: i64 = 50;
/// Longest line quoted in a code match, in characters.
const MAX_LINE_CHARS: usize = 300;
/// Candidate files scanned for matching lines per code search.
const CODE_CANDIDATES: i64 = 50;

/// Which corpus a document belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KnowledgeKind {
    Intelligence,
    Compliance,
}

impl KnowledgeKind {
    /// The stored value of `knowledge_documents.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            KnowledgeKind::Intelligence => "intelligence",
            KnowledgeKind::Compliance => "compliance",
        }
    }
}

/// A stored knowledge document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnowledgeDocument {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub project_id: Option<Uuid>,
    pub kind: KnowledgeKind,
    pub title: String,
    pub body: String,
    pub source: String,
    pub created_at: DateTime<Utc>,
}

/// What [`ingest`] needs.
#[derive(Debug, Clone)]
pub struct NewKnowledgeDocument {
    pub project_id: Option<Uuid>,
    pub kind: KnowledgeKind,
    pub title: String,
    pub body: String,
    pub source: String,
}

/// One ranked search hit: the document and a highlighted snippet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeHit {
    pub id: Uuid,
    pub project_id: Option<Uuid>,
    pub title: String,
    pub source: String,
    pub snippet: String,
    pub rank: f32,
}

/// One matching line of a source file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeMatch {
    pub project_id: Uuid,
    pub path: String,
    pub language: String,
    /// 1-based line number.
    pub line: u32,
    pub text: String,
}

fn check_query(query: &str) -> Result<(), StoreError> {
    check_text("query", query, MAX_QUERY_BYTES)?;
    if query.contains('\0') {
        return Err(StoreError::invalid(
            "query",
            "must not contain NUL characters",
        ));
    }
    Ok(())
}

fn check_limit(limit: i64) -> Result<(), StoreError> {
    if !(1..=MAX_RESULTS).contains(&limit) {
        return Err(StoreError::invalid(
            "limit",
            format!("must be between 1 and {MAX_RESULTS}"),
        ));
    }
    Ok(())
}

fn no_nul(field: &str, value: &str) -> Result<(), StoreError> {
    if value.contains('\0') {
        return Err(StoreError::invalid(
            field,
            "must not contain NUL characters",
        ));
    }
    Ok(())
}

/// Store a document in the tenant's corpus.
pub async fn ingest(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    doc: &NewKnowledgeDocument,
) -> Result<KnowledgeDocument, StoreError> {
    check_text("title", &doc.title, MAX_TITLE_BYTES)?;
    check_text("body", &doc.body, MAX_BODY_BYTES)?;
    no_nul("title", &doc.title)?;
    no_nul("body", &doc.body)?;
    no_nul("source", &doc.source)?;
    if doc.source.len() > MAX_SOURCE_BYTES {
        return Err(StoreError::invalid(
            "source",
            format!("must be at most {MAX_SOURCE_BYTES} bytes"),
        ));
    }
    let row: serde_json::Value = sqlx::query_scalar(
        "INSERT INTO knowledge_documents (tenant_id, project_id, kind, title, body, source)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING to_jsonb(knowledge_documents.*) - 'search'",
    )
    .bind(tenant_id)
    .bind(doc.project_id)
    .bind(doc.kind.as_str())
    .bind(&doc.title)
    .bind(&doc.body)
    .bind(&doc.source)
    .fetch_one(&mut *conn)
    .await?;
    decode(row)
}

/// Full-text search of one corpus (web-search syntax: words, "phrases",
/// `-exclusions`, `or`), best rank first; optionally one project only.
pub async fn search(
    conn: &mut PgConnection,
    kind: KnowledgeKind,
    query: &str,
    project_id: Option<Uuid>,
    limit: i64,
) -> Result<Vec<KnowledgeHit>, StoreError> {
    check_query(query)?;
    check_limit(limit)?;
    let rows: Vec<serde_json::Value> = sqlx::query_scalar(
        "WITH q AS (SELECT websearch_to_tsquery('english', $2) AS q)
         SELECT jsonb_build_object(
                  'id', d.id, 'projectId', d.project_id, 'title', d.title, 'source', d.source,
                  'snippet', ts_headline('english', d.body, q.q,
                      'MaxWords=35, MinWords=10, MaxFragments=2, StartSel=«, StopSel=»'),
                  'rank', ts_rank(d.search, q.q))
         FROM knowledge_documents d, q
         WHERE d.kind = $1 AND d.search @@ q.q AND ($3::uuid IS NULL OR d.project_id = $3)
         ORDER BY ts_rank(d.search, q.q) DESC, d.created_at DESC, d.id
         LIMIT $4",
    )
    .bind(kind.as_str())
    .bind(query)
    .bind(project_id)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    decode_all(rows)
}

/// Store (or replace) one source file of a project.
pub async fn upsert_source_file(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    project_id: Uuid,
    path: &str,
    language: &str,
    content: &str,
) -> Result<Uuid, StoreError> {
    check_text("path", path, 1024)?;
    no_nul("path", path)?;
    no_nul("content", content)?;
    if content.len() > MAX_FILE_BYTES {
        return Err(StoreError::invalid(
            "content",
            format!("must be at most {MAX_FILE_BYTES} bytes"),
        ));
    }
    let id: Uuid = sqlx::query_scalar(
        "INSERT INTO source_files (tenant_id, project_id, path, language, content)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (tenant_id, project_id, path)
         DO UPDATE SET language = EXCLUDED.language, content = EXCLUDED.content, updated_at = now()
         RETURNING id",
    )
    .bind(tenant_id)
    .bind(project_id)
    .bind(path)
    .bind(language)
    .bind(content)
    .fetch_one(&mut *conn)
    .await?;
    Ok(id)
}

/// The query's terms as code search matches them: runs of letters, digits
/// and `_`, lower-cased, deduplicated.
fn code_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for t in query
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
    {
        let t = t.to_lowercase();
        if !terms.contains(&t) {
            terms.push(t);
        }
    }
    terms
}

/// Lines of the tenant's source files matching `query`: files must contain
/// every term (index-served), and each reported line contains at least one
/// of them; lines with more terms first, then by file rank, path and line.
pub async fn code_search(
    conn: &mut PgConnection,
    query: &str,
    project_id: Option<Uuid>,
    limit: i64,
) -> Result<Vec<CodeMatch>, StoreError> {
    check_query(query)?;
    check_limit(limit)?;
    let terms = code_terms(query);
    if terms.is_empty() {
        return Err(StoreError::invalid(
            "query",
            "must contain at least one letter or digit",
        ));
    }
    let files: Vec<(Uuid, String, String, String)> = sqlx::query_as(
        "WITH q AS (SELECT plainto_tsquery('simple', $1) AS q)
         SELECT f.project_id, f.path, f.language, f.content
         FROM source_files f, q
         WHERE f.search @@ q.q AND ($2::uuid IS NULL OR f.project_id = $2)
         ORDER BY ts_rank(f.search, q.q) DESC, f.path
         LIMIT $3",
    )
    .bind(terms.join(" "))
    .bind(project_id)
    .bind(CODE_CANDIDATES)
    .fetch_all(&mut *conn)
    .await?;
    let mut found: Vec<(usize, usize, CodeMatch)> = Vec::new();
    for (file_rank, (project_id, path, language, content)) in files.iter().enumerate() {
        for (i, line) in content.lines().enumerate() {
            let lower = line.to_lowercase();
            let hits = terms.iter().filter(|t| lower.contains(t.as_str())).count();
            if hits == 0 {
                continue;
            }
            found.push((
                hits,
                file_rank,
                CodeMatch {
                    project_id: *project_id,
                    path: path.clone(),
                    language: language.clone(),
                    line: u32::try_from(i + 1).unwrap_or(u32::MAX),
                    text: line.trim_end().chars().take(MAX_LINE_CHARS).collect(),
                },
            ));
        }
    }
    found.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.line.cmp(&b.2.line))
    });
    let keep = usize::try_from(limit).unwrap_or(0);
    Ok(found.into_iter().take(keep).map(|(_, _, m)| m).collect())
}

/// Which table a listed entry lives in: a corpus document or a project's
/// source file (the admin surface's `document` / `source_file`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    Document,
    SourceFile,
}

impl EntryKind {
    /// The wire spelling (`document`, `source_file`).
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Document => "document",
            EntryKind::SourceFile => "source_file",
        }
    }
}

/// One listed entry: metadata only, never the body, so listing a large
/// corpus stays cheap. A source file's `title` is its path, its `corpus`
/// is `None`, its `source` its language and its `created_at` the time it
/// was last written (source files are replaced in place).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocumentSummary {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub entry: EntryKind,
    pub corpus: Option<KnowledgeKind>,
    pub project_id: Option<Uuid>,
    pub title: String,
    pub source: String,
    pub size_bytes: i64,
    pub created_at: DateTime<Utc>,
}

/// Most entries one [`list`] returns.
pub const MAX_LIST: i64 = 500;

const SUMMARIES: &str =
    "SELECT id, tenant_id, 'document' AS entry, kind AS corpus, project_id, title,
            source, octet_length(body)::bigint AS size_bytes, created_at
     FROM knowledge_documents
     UNION ALL
     SELECT id, tenant_id, 'source_file', NULL, project_id, path, language,
            octet_length(content)::bigint, updated_at
     FROM source_files";

/// The transaction tenant's documents and source files, newest first,
/// optionally of one entry kind and one project; `limit` is 1..=[`MAX_LIST`].
pub async fn list(
    conn: &mut PgConnection,
    entry: Option<EntryKind>,
    project_id: Option<Uuid>,
    limit: i64,
) -> Result<Vec<DocumentSummary>, StoreError> {
    if !(1..=MAX_LIST).contains(&limit) {
        return Err(StoreError::invalid(
            "limit",
            format!("must be between 1 and {MAX_LIST}"),
        ));
    }
    let rows: Vec<serde_json::Value> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT to_jsonb(e.*) FROM ({SUMMARIES}) e
         WHERE ($1::text IS NULL OR e.entry = $1) AND ($2::uuid IS NULL OR e.project_id = $2)
         ORDER BY e.created_at DESC, e.id
         LIMIT $3"
    )))
    .bind(entry.map(EntryKind::as_str))
    .bind(project_id)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    decode_all(rows)
}

/// One source file's summary by id (what an upsert answers with);
/// `NotFound` for an unknown id or another tenant's.
pub async fn source_file_summary(
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<DocumentSummary, StoreError> {
    let row: Option<serde_json::Value> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT to_jsonb(e.*) FROM ({SUMMARIES}) e WHERE e.entry = 'source_file' AND e.id = $1"
    )))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(v) => decode(v),
        None => Err(StoreError::not_found(format!("source file {id}"))),
    }
}

/// Most projects the Compliance cold sweep (spec §3.4 step 8) names in one
/// tick. Bounds the claim's read and the objective's size; the projects
/// past it are reported as `truncated`, never silently dropped.
pub const MAX_CORPUS_PROJECTS: i64 = 50;

/// One project of the compliance corpus and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusProject {
    pub project_id: Uuid,
    /// Compliance knowledge documents scoped to the project.
    pub documents: i64,
    /// Ingested source files of the project's tree.
    pub source_files: i64,
    /// Compliance dossiers of the project.
    pub dossiers: i64,
}

/// The tenant's compliance corpus as the cold sweep discovers it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ComplianceCorpus {
    /// The projects, in project-id order, at most the requested limit.
    pub projects: Vec<CorpusProject>,
    /// Compliance documents and dossiers scoped to no project.
    pub tenant_wide_entries: i64,
    /// More projects exist than the ones listed.
    pub truncated: bool,
}

impl ComplianceCorpus {
    /// Nothing to sweep: no project and no tenant-wide entry.
    pub fn is_empty(&self) -> bool {
        self.projects.is_empty() && self.tenant_wide_entries == 0
    }
}

/// The Compliance cold sweep (spec §3.4 step 8): the transaction tenant's
/// compliance corpus discovered from its own data — every project owning a
/// compliance knowledge document, an ingested source file or a dossier —
/// in project-id order (deterministic, and stable as entries are added),
/// at most `limit` (1..=[`MAX_CORPUS_PROJECTS`]) of them. RLS confines the
/// read to the tenant of `conn`'s transaction.
pub async fn compliance_corpus(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<ComplianceCorpus, StoreError> {
    if !(1..=MAX_CORPUS_PROJECTS).contains(&limit) {
        return Err(StoreError::invalid(
            "limit",
            format!("must be between 1 and {MAX_CORPUS_PROJECTS}"),
        ));
    }
    let raw: serde_json::Value = sqlx::query_scalar(
        "WITH per_table AS (
             SELECT project_id, count(*) AS documents, 0::bigint AS source_files, 0::bigint AS dossiers
               FROM knowledge_documents WHERE kind = 'compliance' AND project_id IS NOT NULL
              GROUP BY project_id
             UNION ALL
             SELECT project_id, 0, count(*), 0 FROM source_files GROUP BY project_id
             UNION ALL
             SELECT project_id, 0, 0, count(*) FROM compliance_dossiers
              WHERE project_id IS NOT NULL GROUP BY project_id),
         projects AS (
             SELECT project_id, sum(documents)::bigint AS documents,
                    sum(source_files)::bigint AS source_files, sum(dossiers)::bigint AS dossiers
               FROM per_table GROUP BY project_id ORDER BY project_id LIMIT $1 + 1)
         SELECT jsonb_build_object(
             'projects', (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.project_id), '[]'::jsonb)
                            FROM projects p),
             'tenant_wide_entries',
                 (SELECT count(*) FROM knowledge_documents
                   WHERE kind = 'compliance' AND project_id IS NULL)
               + (SELECT count(*) FROM compliance_dossiers WHERE project_id IS NULL),
             'truncated', false)",
    )
    .bind(limit)
    .fetch_one(&mut *conn)
    .await?;
    let mut corpus: ComplianceCorpus = decode(raw)?;
    let keep = usize::try_from(limit).unwrap_or(0);
    if corpus.projects.len() > keep {
        corpus.projects.truncate(keep);
        corpus.truncated = true;
    }
    Ok(corpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_terms_split_on_punctuation_and_dedupe() {
        assert_eq!(
            code_terms("fn parse_config(Path) parse_config"),
            ["fn", "parse_config", "path"]
        );
        assert!(code_terms("()->;").is_empty());
    }
}
