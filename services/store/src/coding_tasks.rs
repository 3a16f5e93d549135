//! Coding tasks (spec §2.3): the unit of work an on-demand coder executes.
//! Owns creating a task with its already-resolved (model, provider, backend)
//! couple, reading and listing the tenant's tasks, recording which coder
//! runs a task and the progress it reports, keeping the artifacts it
//! attaches (bounded per artifact and per task), and settling a task
//! exactly once. Must never resolve presets itself (the caller resolves the
//! couple, a preset overriding the triple) and never enqueue an event: the
//! control service enqueues `DependencyCompleted` after a settle.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode, decode_all};
use crate::store::Store;

/// Task statuses, as stored.
pub const TASK_STATUSES: &[&str] = &["pending", "running", "completed", "failed"];
/// The statuses a task may be settled with.
pub const SETTLED_STATUSES: &[&str] = &["completed", "failed"];

/// Longest title accepted.
pub const MAX_TITLE_BYTES: usize = 500;
/// Longest instructions accepted.
pub const MAX_INSTRUCTIONS_BYTES: usize = 64 * 1024;
/// Longest repository / branch / coder id accepted.
pub const MAX_REF_BYTES: usize = 512;
/// Longest result summary accepted.
pub const MAX_SUMMARY_BYTES: usize = 16 * 1024;

/// A `coding_tasks` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CodingTaskRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub title: String,
    pub instructions: String,
    pub status: String,
    pub coder_id: Option<String>,
    pub preset_id: Option<Uuid>,
    pub model: String,
    pub provider: String,
    pub backend: String,
    pub credential_names: Vec<String>,
    pub repository: String,
    pub branch: String,
    /// The standing agent told when the task settles.
    pub steering_instance_id: Option<Uuid>,
    pub result_summary: String,
    pub result: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    /// The latest progress its coder reported ('' before any).
    #[serde(default)]
    pub progress_message: String,
    /// The latest percentage reported, when one was.
    #[serde(default)]
    pub progress_percent: Option<i16>,
    /// When progress was last reported.
    #[serde(default)]
    pub progress_at: Option<DateTime<Utc>>,
    /// How many artifacts the task holds (read with the task).
    #[serde(default)]
    pub artifact_count: i64,
    /// The Windows machine its coder holds or is leasing, read with the
    /// task; `None` when it holds none.
    #[serde(default)]
    pub windows_hold: Option<TaskWindowsHold>,
    /// What its coders' LLM calls have cost so far (the priced attempts
    /// recorded against the task), in USD.
    #[serde(default)]
    pub cost_usd: f64,
}

/// The Windows lane's hold of a task's coder, as an operator reads it with
/// the task: never the pool's lease or session ids, which only the lane
/// uses.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TaskWindowsHold {
    /// `leasing` (a first call is leasing the machine) or `held`.
    pub state: String,
    /// The machine, once held.
    pub host: Option<String>,
    /// When the pool's lease ends, when it named an end.
    pub lease_expires_at: Option<DateTime<Utc>>,
}

/// A task row `t` as read for an operator: the row with its artifact count
/// and its coder's Windows hold (the hold's holder is the task's coder id).
/// Each statement that answers a task selects it, `FROM coding_tasks t` or
/// from the row its write returned; a macro so each stays one static text.
macro_rules! task_view {
    () => {
        "SELECT to_jsonb(t) || jsonb_build_object(
        'artifact_count', (SELECT count(*) FROM coding_task_artifacts a
                            WHERE a.tenant_id = t.tenant_id AND a.task_id = t.id),
        'windows_hold', (SELECT jsonb_build_object('state', h.state, 'host', h.host,
                                                   'lease_expires_at', h.lease_expires_at)
                           FROM windows_holds h
                          WHERE h.tenant_id = t.tenant_id AND h.holder = t.coder_id),
        'cost_usd', (SELECT coalesce(sum(s.cost_usd), 0)::float8 FROM llm_call_snapshots s
                      WHERE s.tenant_id = t.tenant_id AND s.coding_task_id = t.id))"
    };
}

/// Artifact kinds, as stored.
pub const ARTIFACT_KINDS: &[&str] = &["patch", "log", "summary"];
/// Longest artifact name accepted.
pub const MAX_ARTIFACT_NAME_BYTES: usize = 256;
/// Longest progress message accepted.
pub const MAX_PROGRESS_BYTES: usize = 4 * 1024;

/// What a task may hold in artifacts: the caller's configured caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactCaps {
    /// Bytes of one artifact's content.
    pub max_bytes: usize,
    /// Artifacts of one task.
    pub max_count: usize,
    /// Bytes of all of one task's artifacts together.
    pub max_total_bytes: usize,
}

/// A `coding_task_artifacts` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ArtifactRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub task_id: Uuid,
    pub kind: String,
    pub name: String,
    /// Empty when listed without content.
    #[serde(default)]
    pub content: String,
    pub size_bytes: i32,
    pub created_at: DateTime<Utc>,
}

impl CodingTaskRow {
    /// Whether the task is completed or failed.
    pub fn is_settled(&self) -> bool {
        SETTLED_STATUSES.contains(&self.status.as_str())
    }
}

/// A task to create; the couple is already resolved.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewCodingTask {
    pub title: String,
    pub instructions: String,
    pub coder_id: Option<String>,
    pub preset_id: Option<Uuid>,
    pub model: String,
    pub provider: String,
    pub backend: String,
    pub credential_names: Vec<String>,
    pub repository: String,
    pub branch: String,
    pub steering_instance_id: Option<Uuid>,
}

/// Repository handle, from [`Store::coding_tasks`].
pub struct CodingTasks<'a> {
    store: &'a Store,
}

impl Store {
    /// Coding tasks.
    pub fn coding_tasks(&self) -> CodingTasks<'_> {
        CodingTasks { store: self }
    }
}

fn check_optional(field: &str, value: &str, max: usize) -> Result<(), StoreError> {
    if value.len() > max {
        return Err(StoreError::invalid(
            field,
            format!("must be at most {max} bytes, got {}", value.len()),
        ));
    }
    if value.contains('\0') {
        return Err(StoreError::invalid(
            field,
            "must not contain NUL characters",
        ));
    }
    Ok(())
}

impl CodingTasks<'_> {
    /// Create a pending task. A `steering_instance_id` of another tenant (or
    /// unknown) → `NotFound`; bad fields → `InvalidArgument`, nothing written.
    pub async fn create(
        &self,
        tenant_id: Uuid,
        new: NewCodingTask,
    ) -> Result<CodingTaskRow, StoreError> {
        check_text("title", &new.title, MAX_TITLE_BYTES)?;
        check_text("instructions", &new.instructions, MAX_INSTRUCTIONS_BYTES)?;
        check_text("model", &new.model, 200)?;
        check_text("provider", &new.provider, 100)?;
        check_optional("backend", &new.backend, 100)?;
        check_optional("repository", &new.repository, MAX_REF_BYTES)?;
        check_optional("branch", &new.branch, MAX_REF_BYTES)?;
        if let Some(c) = &new.coder_id {
            check_text("coder_id", c, MAX_REF_BYTES)?;
        }
        for (i, n) in new.credential_names.iter().enumerate() {
            check_text(&format!("credential_names[{i}]"), n, 200)?;
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: serde_json::Value = sqlx::query_scalar(concat!(
            "WITH t AS (
             INSERT INTO coding_tasks (tenant_id, title, instructions, coder_id, preset_id, model,
                 provider, backend, credential_names, repository, branch, steering_instance_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             RETURNING *) ",
            task_view!(),
            " FROM t"
        ))
        .bind(tenant_id)
        .bind(&new.title)
        .bind(&new.instructions)
        .bind(&new.coder_id)
        .bind(new.preset_id)
        .bind(&new.model)
        .bind(&new.provider)
        .bind(&new.backend)
        .bind(serde_json::to_value(&new.credential_names)?)
        .bind(&new.repository)
        .bind(&new.branch)
        .bind(new.steering_instance_id)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        decode(row)
    }

    /// One task of the tenant; another tenant's id → `NotFound`.
    pub async fn get(&self, tenant_id: Uuid, id: Uuid) -> Result<CodingTaskRow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(concat!(
            task_view!(),
            " FROM coding_tasks t WHERE t.id = $1"
        ))
        .bind(id)
        .fetch_optional(tx.conn())
        .await?;
        tx.commit().await?;
        row.map(decode)
            .transpose()?
            .ok_or_else(|| StoreError::not_found("coding task"))
    }

    /// The tenant's tasks, newest first, optionally filtered by status and
    /// coder. An unknown status → `InvalidArgument`.
    pub async fn list(
        &self,
        tenant_id: Uuid,
        status: Option<&str>,
        coder_id: Option<&str>,
    ) -> Result<Vec<CodingTaskRow>, StoreError> {
        if let Some(s) = status
            && !TASK_STATUSES.contains(&s)
        {
            return Err(StoreError::invalid(
                "status",
                format!("unknown status {s:?}; known: {}", TASK_STATUSES.join(", ")),
            ));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(concat!(
            task_view!(),
            " FROM coding_tasks t
              WHERE ($1::text IS NULL OR t.status = $1) AND ($2::text IS NULL OR t.coder_id = $2)
              ORDER BY t.created_at DESC, t.id DESC"
        ))
        .bind(status)
        .bind(coder_id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// Hand an unsettled task back when its coder `coder_id` is stopped:
    /// no coder, status `pending`, its progress and artifacts kept, so a new
    /// coder may be spawned for it. Answers the task as it now stands, or
    /// `None` when it is settled or already has another coder (nothing
    /// changes); unknown → `NotFound`.
    pub async fn release_coder(
        &self,
        tenant_id: Uuid,
        id: Uuid,
        coder_id: &str,
    ) -> Result<Option<CodingTaskRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(concat!(
            "WITH t AS (
             UPDATE coding_tasks SET coder_id = NULL, status = 'pending', updated_at = now()
              WHERE id = $1 AND coder_id = $2 AND status IN ('pending', 'running')
              RETURNING *) ",
            task_view!(),
            " FROM t"
        ))
        .bind(id)
        .bind(coder_id)
        .fetch_optional(tx.conn())
        .await?;
        let Some(row) = row else {
            // Settled or taken by another coder: nothing to hand back.
            let why = why_not_unsettled(tx.conn(), id).await?;
            tx.commit().await?;
            return match why {
                e @ StoreError::NotFound { .. } => Err(e),
                _ => Ok(None),
            };
        };
        tx.commit().await?;
        decode(row).map(Some)
    }

    /// Record the coder (its Job name) that runs a pending or running task
    /// and mark it running. A settled task → `FailedPrecondition`; unknown
    /// (or another tenant's) → `NotFound`.
    pub async fn assign_coder(
        &self,
        tenant_id: Uuid,
        id: Uuid,
        coder_id: &str,
    ) -> Result<CodingTaskRow, StoreError> {
        check_text("coder_id", coder_id, MAX_REF_BYTES)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(concat!(
            "WITH t AS (
             UPDATE coding_tasks SET coder_id = $2, status = 'running', updated_at = now()
              WHERE id = $1 AND status IN ('pending', 'running')
              RETURNING *) ",
            task_view!(),
            " FROM t"
        ))
        .bind(id)
        .bind(coder_id)
        .fetch_optional(tx.conn())
        .await?;
        let Some(row) = row else {
            let refusal = why_not_unsettled(tx.conn(), id).await?;
            tx.commit().await?;
            return Err(refusal);
        };
        tx.commit().await?;
        decode(row)
    }

    /// Record the latest progress of an unsettled task (a pending task
    /// becomes running). A settled task → `FailedPrecondition`; unknown →
    /// `NotFound`; a percent outside 0..=100 → `InvalidArgument`.
    pub async fn report_progress(
        &self,
        tenant_id: Uuid,
        id: Uuid,
        message: &str,
        percent: Option<i16>,
    ) -> Result<CodingTaskRow, StoreError> {
        check_optional("message", message, MAX_PROGRESS_BYTES)?;
        if let Some(p) = percent
            && !(0..=100).contains(&p)
        {
            return Err(StoreError::invalid(
                "percent",
                format!("must be between 0 and 100, got {p}"),
            ));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(concat!(
            "WITH t AS (
             UPDATE coding_tasks SET progress_message = $2, progress_percent = $3,
                    progress_at = now(), status = 'running', updated_at = now()
              WHERE id = $1 AND status IN ('pending', 'running')
              RETURNING *) ",
            task_view!(),
            " FROM t"
        ))
        .bind(id)
        .bind(message)
        .bind(percent)
        .fetch_optional(tx.conn())
        .await?;
        let Some(row) = row else {
            let refusal = why_not_unsettled(tx.conn(), id).await?;
            tx.commit().await?;
            return Err(refusal);
        };
        tx.commit().await?;
        decode(row)
    }

    /// Attach an artifact to an unsettled task, within `caps`: content over
    /// the per-artifact cap, an unknown kind or a bad name →
    /// `InvalidArgument`; a task already at its count or total →
    /// `FailedPrecondition`; settled → `FailedPrecondition`; unknown →
    /// `NotFound`. Nothing is written on any refusal. The task row is locked
    /// so two attaches cannot both pass the per-task caps.
    pub async fn attach_artifact(
        &self,
        tenant_id: Uuid,
        id: Uuid,
        kind: &str,
        name: &str,
        content: &str,
        caps: ArtifactCaps,
    ) -> Result<ArtifactRow, StoreError> {
        if !ARTIFACT_KINDS.contains(&kind) {
            return Err(StoreError::invalid(
                "kind",
                format!(
                    "unknown kind {kind:?}; known: {}",
                    ARTIFACT_KINDS.join(", ")
                ),
            ));
        }
        check_text("name", name, MAX_ARTIFACT_NAME_BYTES)?;
        if content.len() > caps.max_bytes {
            return Err(StoreError::invalid(
                "content",
                format!(
                    "is {} bytes; the limit is {} per artifact",
                    content.len(),
                    caps.max_bytes
                ),
            ));
        }
        check_optional("content", content, caps.max_bytes)?;
        let size = i32::try_from(content.len())
            .map_err(|_| StoreError::invalid("content", "too large"))?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM coding_tasks WHERE id = $1 FOR UPDATE")
                .bind(id)
                .fetch_optional(tx.conn())
                .await?;
        match status.as_deref() {
            None => return Err(StoreError::not_found("coding task")),
            Some(s) if SETTLED_STATUSES.contains(&s) => {
                return Err(StoreError::precondition(format!(
                    "the coding task is already settled ({s})"
                )));
            }
            Some(_) => {}
        }
        let (count, total): (i64, i64) = sqlx::query_as(
            "SELECT count(*), COALESCE(sum(size_bytes), 0)::bigint
               FROM coding_task_artifacts WHERE task_id = $1",
        )
        .bind(id)
        .fetch_one(tx.conn())
        .await?;
        if usize::try_from(count).unwrap_or(usize::MAX) >= caps.max_count {
            return Err(StoreError::precondition(format!(
                "the coding task already holds {count} artifacts; the limit is {}",
                caps.max_count
            )));
        }
        let total = usize::try_from(total).unwrap_or(usize::MAX);
        if total.saturating_add(content.len()) > caps.max_total_bytes {
            return Err(StoreError::precondition(format!(
                "the coding task's artifacts would total {} bytes; the limit is {}",
                total.saturating_add(content.len()),
                caps.max_total_bytes
            )));
        }
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO coding_task_artifacts (tenant_id, task_id, kind, name, content, size_bytes)
             VALUES ($1, $2, $3, $4, $5, $6)
             RETURNING to_jsonb(coding_task_artifacts.*) - 'content'",
        )
        .bind(tenant_id)
        .bind(id)
        .bind(kind)
        .bind(name)
        .bind(content)
        .bind(size)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        decode(row)
    }

    /// A task's artifacts, oldest first, without their content.
    pub async fn list_artifacts(
        &self,
        tenant_id: Uuid,
        id: Uuid,
    ) -> Result<Vec<ArtifactRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(a) - 'content' FROM coding_task_artifacts a
              WHERE task_id = $1 ORDER BY created_at, id",
        )
        .bind(id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// One artifact of a task with its content. `NotFound` for an unknown
    /// artifact, one of another task, or of another tenant (the same
    /// answer, so ids of others are never confirmed).
    pub async fn artifact(
        &self,
        tenant_id: Uuid,
        task_id: Uuid,
        artifact_id: Uuid,
    ) -> Result<ArtifactRow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(a) FROM coding_task_artifacts a WHERE task_id = $1 AND id = $2",
        )
        .bind(task_id)
        .bind(artifact_id)
        .fetch_optional(tx.conn())
        .await?;
        tx.commit().await?;
        decode(row.ok_or_else(|| StoreError::not_found("coding task artifact"))?)
    }

    /// Settle a task with `completed` or `failed`, exactly once: a settled
    /// task → `FailedPrecondition` and nothing changes; unknown → `NotFound`.
    pub async fn complete(
        &self,
        tenant_id: Uuid,
        id: Uuid,
        status: &str,
        result_summary: &str,
        result: &serde_json::Value,
    ) -> Result<CodingTaskRow, StoreError> {
        if !SETTLED_STATUSES.contains(&status) {
            return Err(StoreError::invalid(
                "status",
                format!("must be completed or failed, got {status:?}"),
            ));
        }
        check_optional("result_summary", result_summary, MAX_SUMMARY_BYTES)?;
        if !result.is_object() {
            return Err(StoreError::invalid("result_json", "must be a JSON object"));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let current: Option<String> =
            sqlx::query_scalar("SELECT status FROM coding_tasks WHERE id = $1 FOR UPDATE")
                .bind(id)
                .fetch_optional(tx.conn())
                .await?;
        match current.as_deref() {
            None => return Err(StoreError::not_found("coding task")),
            Some(s) if SETTLED_STATUSES.contains(&s) => {
                return Err(StoreError::precondition(format!(
                    "the coding task is already settled ({s})"
                )));
            }
            Some(_) => {}
        }
        let row: serde_json::Value = sqlx::query_scalar(concat!(
            "WITH t AS (
             UPDATE coding_tasks SET status = $2, result_summary = $3, result = $4,
                    completed_at = now(), updated_at = now()
              WHERE id = $1 RETURNING *) ",
            task_view!(),
            " FROM t"
        ))
        .bind(id)
        .bind(status)
        .bind(result_summary)
        .bind(result)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        decode(row)
    }
}

/// Why a guarded update of an unsettled task matched no row: the task is
/// unknown (or another tenant's) or already settled.
async fn why_not_unsettled(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
) -> Result<StoreError, StoreError> {
    let status: Option<String> =
        sqlx::query_scalar("SELECT status FROM coding_tasks WHERE id = $1")
            .bind(id)
            .fetch_optional(conn)
            .await?;
    Ok(match status {
        None => StoreError::not_found("coding task"),
        Some(s) => StoreError::precondition(format!("the coding task is already settled ({s})")),
    })
}
