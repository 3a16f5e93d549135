//! `research_records`: the findings `orchestrator_research_create` records
//! and `orchestrator_research_get` reads back (by id, by full-text query, or
//! the most recent). Must never edit a record once written: research is an
//! artifact trail, corrected by a newer record.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode, decode_all};

/// Longest title, in bytes.
pub const MAX_TITLE_BYTES: usize = 500;
/// Longest question or findings text, in bytes.
pub const MAX_TEXT_BYTES: usize = 128 * 1024;
/// Most sources or tags on one record.
pub const MAX_LIST_ITEMS: usize = 50;
/// Longest source or tag, in bytes.
pub const MAX_ITEM_BYTES: usize = 2048;
/// Most records one read returns.
pub const MAX_RESULTS: i64 = 50;

/// A stored research record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchRecord {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Option<Uuid>,
    pub project_id: Option<Uuid>,
    pub title: String,
    pub question: String,
    pub findings: String,
    pub sources: Vec<String>,
    pub tags: Vec<String>,
    pub created_at: DateTime<Utc>,
}

/// What [`create`] needs.
#[derive(Debug, Clone, Default)]
pub struct NewResearchRecord {
    pub project_id: Option<Uuid>,
    pub title: String,
    pub question: String,
    pub findings: String,
    pub sources: Vec<String>,
    pub tags: Vec<String>,
}

fn nul(field: &str, v: &str) -> Result<(), StoreError> {
    if v.contains('\0') {
        return Err(StoreError::invalid(
            field,
            "must not contain NUL characters",
        ));
    }
    Ok(())
}

fn items(field: &str, list: &[String]) -> Result<(), StoreError> {
    if list.len() > MAX_LIST_ITEMS {
        return Err(StoreError::invalid(
            field,
            format!(
                "must have at most {MAX_LIST_ITEMS} items, got {}",
                list.len()
            ),
        ));
    }
    for (i, item) in list.iter().enumerate() {
        check_text(&format!("{field}[{i}]"), item, MAX_ITEM_BYTES)?;
        nul(&format!("{field}[{i}]"), item)?;
    }
    Ok(())
}

/// Record research findings, attributed to `instance_id` (the author agent).
pub async fn create(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Option<Uuid>,
    new: &NewResearchRecord,
) -> Result<ResearchRecord, StoreError> {
    check_text("title", &new.title, MAX_TITLE_BYTES)?;
    nul("title", &new.title)?;
    check_text("findings", &new.findings, MAX_TEXT_BYTES)?;
    nul("findings", &new.findings)?;
    if new.question.len() > MAX_TEXT_BYTES {
        return Err(StoreError::invalid(
            "question",
            format!("must be at most {MAX_TEXT_BYTES} bytes"),
        ));
    }
    nul("question", &new.question)?;
    items("sources", &new.sources)?;
    items("tags", &new.tags)?;
    let row: serde_json::Value = sqlx::query_scalar(
        "INSERT INTO research_records (tenant_id, instance_id, project_id, title, question, findings, sources, tags)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING to_jsonb(research_records.*) - 'search'",
    )
    .bind(tenant_id)
    .bind(instance_id)
    .bind(new.project_id)
    .bind(&new.title)
    .bind(&new.question)
    .bind(&new.findings)
    .bind(serde_json::to_value(&new.sources)?)
    .bind(serde_json::to_value(&new.tags)?)
    .fetch_one(&mut *conn)
    .await?;
    decode(row)
}

/// One record by id; `NotFound` for an unknown id (or another tenant's).
pub async fn get(conn: &mut PgConnection, id: Uuid) -> Result<ResearchRecord, StoreError> {
    let row: Option<serde_json::Value> =
        sqlx::query_scalar("SELECT to_jsonb(r) - 'search' FROM research_records r WHERE r.id = $1")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    match row {
        Some(row) => decode(row),
        None => Err(StoreError::not_found(format!("research record {id}"))),
    }
}

/// Records matching a full-text `query` (best rank first), or the most
/// recent ones when `query` is `None`.
pub async fn search(
    conn: &mut PgConnection,
    query: Option<&str>,
    limit: i64,
) -> Result<Vec<ResearchRecord>, StoreError> {
    if !(1..=MAX_RESULTS).contains(&limit) {
        return Err(StoreError::invalid(
            "limit",
            format!("must be between 1 and {MAX_RESULTS}"),
        ));
    }
    let rows: Vec<serde_json::Value> = match query {
        Some(q) => {
            check_text("query", q, 1024)?;
            nul("query", q)?;
            sqlx::query_scalar(
                "SELECT to_jsonb(r) - 'search' FROM research_records r,
                        websearch_to_tsquery('english', $1) q
                 WHERE r.search @@ q ORDER BY ts_rank(r.search, q) DESC, r.created_at DESC LIMIT $2",
            )
            .bind(q)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?
        }
        None => {
            sqlx::query_scalar(
                "SELECT to_jsonb(r) - 'search' FROM research_records r
                 ORDER BY r.created_at DESC, r.id LIMIT $1",
            )
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?
        }
    };
    decode_all(rows)
}
