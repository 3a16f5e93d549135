//! `compliance_dossiers` and `compliance_dossier_translations`: the
//! Compliance agent's artifact records (one dossier per framework control,
//! re-recording bumps its version), their translations, and the compliance
//! posture derived from them (per framework: counts by status, a score and
//! the open gaps). Must never store a posture of its own: it is always
//! computed from the dossiers, so it cannot drift from them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode, decode_all};

/// Longest framework or control id, in bytes.
pub const MAX_KEY_BYTES: usize = 128;
/// Longest dossier title, in bytes.
pub const MAX_TITLE_BYTES: usize = 500;
/// Longest dossier (or translation) body, in bytes.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Most dossiers one list returns.
pub const MAX_LIST: i64 = 200;

/// A control's assessed state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DossierStatus {
    Compliant,
    Partial,
    Gap,
    NotApplicable,
}

impl DossierStatus {
    /// The stored value.
    pub fn as_str(self) -> &'static str {
        match self {
            DossierStatus::Compliant => "compliant",
            DossierStatus::Partial => "partial",
            DossierStatus::Gap => "gap",
            DossierStatus::NotApplicable => "not_applicable",
        }
    }

    /// Parse a stored or supplied value; a field-level error otherwise.
    pub fn parse(field: &str, value: &str) -> Result<Self, StoreError> {
        match value {
            "compliant" => Ok(Self::Compliant),
            "partial" => Ok(Self::Partial),
            "gap" => Ok(Self::Gap),
            "not_applicable" => Ok(Self::NotApplicable),
            other => Err(StoreError::invalid(
                field,
                format!("{other:?} is not one of compliant, partial, gap, not_applicable"),
            )),
        }
    }
}

/// A stored dossier, with the languages it has been translated into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dossier {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub project_id: Option<Uuid>,
    pub framework: String,
    pub control_id: String,
    pub title: String,
    pub body: String,
    pub status: DossierStatus,
    pub language: String,
    pub version: i32,
    pub recorded_by: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default)]
    pub translations: Vec<String>,
}

/// What [`record`] needs.
#[derive(Debug, Clone)]
pub struct NewDossier {
    pub project_id: Option<Uuid>,
    pub framework: String,
    pub control_id: String,
    pub title: String,
    pub body: String,
    pub status: DossierStatus,
    pub language: String,
    pub recorded_by: Option<Uuid>,
}

/// A stored translation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DossierTranslation {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub dossier_id: Uuid,
    pub language: String,
    pub title: String,
    pub body: String,
    pub source_version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One framework's posture, derived from its dossiers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameworkPosture {
    pub framework: String,
    pub controls: i64,
    pub compliant: i64,
    pub partial: i64,
    pub gap: i64,
    pub not_applicable: i64,
    /// (compliant + ½·partial) / applicable controls, 0..=1; `None` when no
    /// control applies.
    pub score: Option<f64>,
    /// Control ids assessed as `gap`, sorted.
    pub gaps: Vec<String>,
}

fn key(field: &str, value: &str) -> Result<(), StoreError> {
    check_text(field, value, MAX_KEY_BYTES)?;
    if value.chars().any(char::is_control) {
        return Err(StoreError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

fn language(field: &str, value: &str) -> Result<(), StoreError> {
    let mut parts = value.splitn(2, '-');
    let primary = parts.next().unwrap_or_default();
    let ok_primary =
        (2..=3).contains(&primary.len()) && primary.bytes().all(|b| b.is_ascii_lowercase());
    let ok_region = parts
        .next()
        .is_none_or(|r| (2..=8).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_alphanumeric()));
    if !(ok_primary && ok_region) {
        return Err(StoreError::invalid(
            field,
            format!("{value:?} is not a language tag such as \"en\" or \"pt-BR\""),
        ));
    }
    Ok(())
}

fn body(field: &str, value: &str) -> Result<(), StoreError> {
    check_text(field, value, MAX_BODY_BYTES)?;
    if value.contains('\0') {
        return Err(StoreError::invalid(
            field,
            "must not contain NUL characters",
        ));
    }
    Ok(())
}

const DOSSIER_JSON: &str = "to_jsonb(d) || jsonb_build_object('translations', coalesce(
    (SELECT jsonb_agg(t.language ORDER BY t.language) FROM compliance_dossier_translations t
     WHERE t.dossier_id = d.id), '[]'::jsonb))";

/// Record a control's dossier: a new one at version 1, or a re-record of
/// the same (project, framework, control) that replaces it and bumps the
/// version.
pub async fn record(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    new: &NewDossier,
) -> Result<Dossier, StoreError> {
    key("framework", &new.framework)?;
    key("controlId", &new.control_id)?;
    check_text("title", &new.title, MAX_TITLE_BYTES)?;
    body("title", &new.title)?;
    body("body", &new.body)?;
    language("language", &new.language)?;
    let id: Uuid = sqlx::query_scalar(
        "INSERT INTO compliance_dossiers
             (tenant_id, project_id, framework, control_id, title, body, status, language, recorded_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (tenant_id, coalesce(project_id, '00000000-0000-0000-0000-000000000000'::uuid),
                      framework, control_id)
         DO UPDATE SET title = EXCLUDED.title, body = EXCLUDED.body, status = EXCLUDED.status,
                       language = EXCLUDED.language, recorded_by = EXCLUDED.recorded_by,
                       version = compliance_dossiers.version + 1, updated_at = now()
         RETURNING id",
    )
    .bind(tenant_id)
    .bind(new.project_id)
    .bind(&new.framework)
    .bind(&new.control_id)
    .bind(&new.title)
    .bind(&new.body)
    .bind(new.status.as_str())
    .bind(&new.language)
    .bind(new.recorded_by)
    .fetch_one(&mut *conn)
    .await?;
    get(conn, id).await
}

/// One dossier by id; `NotFound` for an unknown id (or another tenant's).
pub async fn get(conn: &mut PgConnection, id: Uuid) -> Result<Dossier, StoreError> {
    let row: Option<serde_json::Value> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {DOSSIER_JSON} FROM compliance_dossiers d WHERE d.id = $1"
    )))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(row) => decode(row),
        None => Err(StoreError::not_found(format!("dossier {id}"))),
    }
}

/// Filters of [`list`]; `None` = any.
#[derive(Debug, Clone, Default)]
pub struct DossierFilter {
    pub framework: Option<String>,
    pub project_id: Option<Uuid>,
    pub status: Option<DossierStatus>,
}

/// Dossiers matching `filter`, by framework then control id.
pub async fn list(
    conn: &mut PgConnection,
    filter: &DossierFilter,
    limit: i64,
) -> Result<Vec<Dossier>, StoreError> {
    if !(1..=MAX_LIST).contains(&limit) {
        return Err(StoreError::invalid(
            "limit",
            format!("must be between 1 and {MAX_LIST}"),
        ));
    }
    if let Some(f) = &filter.framework {
        key("framework", f)?;
    }
    let rows: Vec<serde_json::Value> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {DOSSIER_JSON} FROM compliance_dossiers d
         WHERE ($1::text IS NULL OR d.framework = $1) AND ($2::uuid IS NULL OR d.project_id = $2)
           AND ($3::text IS NULL OR d.status = $3)
         ORDER BY d.framework, d.control_id, d.id LIMIT $4"
    )))
    .bind(filter.framework.as_deref())
    .bind(filter.project_id)
    .bind(filter.status.map(DossierStatus::as_str))
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    decode_all(rows)
}

/// Record (or replace) a dossier's translation into `language`, stamped
/// with the dossier version it was made from. `NotFound` for an unknown
/// dossier; translating into the dossier's own language is refused.
pub async fn translate(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    dossier_id: Uuid,
    lang: &str,
    title: &str,
    text: &str,
) -> Result<DossierTranslation, StoreError> {
    language("language", lang)?;
    check_text("title", title, MAX_TITLE_BYTES)?;
    body("title", title)?;
    body("body", text)?;
    let dossier = get(conn, dossier_id).await?;
    if dossier.language == lang {
        return Err(StoreError::invalid(
            "language",
            format!("the dossier is already written in {lang:?}"),
        ));
    }
    let row: serde_json::Value = sqlx::query_scalar(
        "INSERT INTO compliance_dossier_translations
             (tenant_id, dossier_id, language, title, body, source_version)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (dossier_id, language)
         DO UPDATE SET title = EXCLUDED.title, body = EXCLUDED.body,
                       source_version = EXCLUDED.source_version, updated_at = now()
         RETURNING to_jsonb(compliance_dossier_translations.*)",
    )
    .bind(tenant_id)
    .bind(dossier_id)
    .bind(lang)
    .bind(title)
    .bind(text)
    .bind(dossier.version)
    .fetch_one(&mut *conn)
    .await?;
    decode(row)
}

/// The posture per framework, derived from the dossiers (optionally one
/// framework or one project only).
pub async fn posture(
    conn: &mut PgConnection,
    framework: Option<&str>,
    project_id: Option<Uuid>,
) -> Result<Vec<FrameworkPosture>, StoreError> {
    if let Some(f) = framework {
        key("framework", f)?;
    }
    let rows: Vec<serde_json::Value> = sqlx::query_scalar(
        "SELECT jsonb_build_object(
             'framework', framework,
             'controls', count(*),
             'compliant', count(*) FILTER (WHERE status = 'compliant'),
             'partial', count(*) FILTER (WHERE status = 'partial'),
             'gap', count(*) FILTER (WHERE status = 'gap'),
             'notApplicable', count(*) FILTER (WHERE status = 'not_applicable'),
             'score', (count(*) FILTER (WHERE status = 'compliant') + 0.5 * count(*) FILTER (WHERE status = 'partial'))::float8
                      / nullif(count(*) FILTER (WHERE status <> 'not_applicable'), 0),
             'gaps', coalesce(jsonb_agg(control_id ORDER BY control_id) FILTER (WHERE status = 'gap'), '[]'::jsonb))
         FROM compliance_dossiers
         WHERE ($1::text IS NULL OR framework = $1) AND ($2::uuid IS NULL OR project_id = $2)
         GROUP BY framework ORDER BY framework",
    )
    .bind(framework)
    .bind(project_id)
    .fetch_all(&mut *conn)
    .await?;
    decode_all(rows)
}
