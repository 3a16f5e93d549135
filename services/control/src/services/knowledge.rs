//! `genesis.v1.KnowledgeService`: the operator's way to feed a tenant's
//! knowledge corpus — ingest a document, ingest (replace) a source file,
//! list what is stored (metadata, never bodies). The proto's two kinds map
//! onto the store's two tables: `document` → `knowledge_documents` in the
//! `intelligence` corpus (what `intelligence_knowledge_query` searches;
//! the compliance corpus is fed by `compliance_knowledge_ingest`), and
//! `source_file` → `source_files` (what `intelligence_code_search`
//! searches). Must never write a document except through
//! `genesis_store::knowledge`, and never answer for a tenant the caller is
//! not bound to.

use genesis_proto::convert::{invalid_argument, timestamp_from_chrono};
use genesis_proto::v1::{self, knowledge_service_server::KnowledgeService};
use genesis_store::knowledge::{
    self, DocumentSummary, EntryKind, KnowledgeKind, NewKnowledgeDocument,
};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::{observe, record_ids};
use crate::auth::caller;
use crate::state::AppState;
use crate::status::{limit, opt_uuid, store_status};

/// Default and ceiling of `ListDocumentsRequest.limit`.
const DEFAULT_LIST: i64 = 50;

/// The project a source file without one is filed under: `source_files`
/// requires a project, and code search without a project filter finds
/// these files too. Listed back as an empty `project_id`.
pub const NO_PROJECT: Uuid = Uuid::nil();

/// The service.
#[derive(Clone)]
pub struct Knowledge {
    state: AppState,
}

impl Knowledge {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// A language name guessed from a path's extension; empty when unknown.
pub fn guess_language(path: &str) -> &'static str {
    let ext = path
        .rsplit('/')
        .next()
        .and_then(|name| name.rsplit_once('.'))
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "rs" => "rust",
        "cs" => "csharp",
        "py" => "python",
        "go" => "go",
        "ts" | "tsx" => "typescript",
        "js" | "jsx" | "mjs" => "javascript",
        "java" => "java",
        "kt" => "kotlin",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" => "cpp",
        "rb" => "ruby",
        "sh" => "shell",
        "sql" => "sql",
        "proto" => "protobuf",
        "md" => "markdown",
        "toml" => "toml",
        "yaml" | "yml" => "yaml",
        "json" => "json",
        _ => "",
    }
}

/// Store summary → wire `KnowledgeDocument` (the nil project is empty).
pub fn document(d: &DocumentSummary) -> v1::KnowledgeDocument {
    v1::KnowledgeDocument {
        id: d.id.to_string(),
        tenant_id: d.tenant_id.to_string(),
        kind: d.entry.as_str().to_owned(),
        title: d.title.clone(),
        source: d.source.clone(),
        project_id: d
            .project_id
            .filter(|p| *p != NO_PROJECT)
            .map(|p| p.to_string())
            .unwrap_or_default(),
        size_bytes: d.size_bytes,
        created_at: Some(timestamp_from_chrono(d.created_at)),
    }
}

/// A `kind` filter: `document` or `source_file` (`INVALID_ARGUMENT`
/// naming `kind` otherwise).
fn entry_kind(value: Option<&str>) -> Result<Option<EntryKind>, Status> {
    match value {
        None | Some("") => Ok(None),
        Some("document") => Ok(Some(EntryKind::Document)),
        Some("source_file") => Ok(Some(EntryKind::SourceFile)),
        Some(other) => Err(invalid_argument(
            "kind",
            format!("must be document or source_file, got {other:?}"),
        )),
    }
}

fn required(field: &str, value: &str) -> Result<(), Status> {
    if value.trim().is_empty() {
        return Err(invalid_argument(field, "must not be empty"));
    }
    Ok(())
}

#[tonic::async_trait]
impl KnowledgeService for Knowledge {
    /// Store a document in the tenant's `intelligence` corpus.
    async fn ingest_document(
        &self,
        request: Request<v1::IngestDocumentRequest>,
    ) -> Result<Response<v1::KnowledgeDocument>, Status> {
        observe(
            &self.state,
            "/genesis.v1.KnowledgeService/IngestDocument",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                required("title", &req.title)?;
                required("body", &req.body)?;
                let project = opt_uuid("project_id", Some(&req.project_id))?;
                record_ids(t, None);
                let mut tx = self.state.store.tenant_tx(t).await.map_err(store_status)?;
                let d = knowledge::ingest(
                    tx.conn(),
                    t,
                    &NewKnowledgeDocument {
                        project_id: project,
                        kind: KnowledgeKind::Intelligence,
                        title: req.title.clone(),
                        body: req.body.clone(),
                        source: req.source.clone(),
                    },
                )
                .await
                .map_err(store_status)?;
                tx.commit().await.map_err(store_status)?;
                let size = i64::try_from(d.body.len()).unwrap_or(i64::MAX);
                Ok(document(&DocumentSummary {
                    id: d.id,
                    tenant_id: d.tenant_id,
                    entry: EntryKind::Document,
                    corpus: Some(d.kind),
                    project_id: d.project_id,
                    title: d.title,
                    source: d.source,
                    size_bytes: size,
                    created_at: d.created_at,
                }))
            },
        )
        .await
    }

    /// Store or replace (same project and path) one source file; an empty
    /// `language` is guessed from the path, an empty `project_id` files it
    /// under [`NO_PROJECT`].
    async fn ingest_source_file(
        &self,
        request: Request<v1::IngestSourceFileRequest>,
    ) -> Result<Response<v1::KnowledgeDocument>, Status> {
        observe(
            &self.state,
            "/genesis.v1.KnowledgeService/IngestSourceFile",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                required("path", &req.path)?;
                required("content", &req.content)?;
                let project = opt_uuid("project_id", Some(&req.project_id))?.unwrap_or(NO_PROJECT);
                let language = if req.language.trim().is_empty() {
                    guess_language(&req.path).to_owned()
                } else {
                    req.language.trim().to_owned()
                };
                record_ids(t, None);
                let mut tx = self.state.store.tenant_tx(t).await.map_err(store_status)?;
                let id = knowledge::upsert_source_file(
                    tx.conn(),
                    t,
                    project,
                    &req.path,
                    &language,
                    &req.content,
                )
                .await
                .map_err(store_status)?;
                let summary = knowledge::source_file_summary(tx.conn(), id)
                    .await
                    .map_err(store_status)?;
                tx.commit().await.map_err(store_status)?;
                Ok(document(&summary))
            },
        )
        .await
    }

    /// Documents and source files, newest first, optionally of one kind
    /// and one project; metadata only.
    async fn list_documents(
        &self,
        request: Request<v1::ListDocumentsRequest>,
    ) -> Result<Response<v1::ListDocumentsResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.KnowledgeService/ListDocuments",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let entry = entry_kind(req.kind.as_deref())?;
                let project = opt_uuid("project_id", req.project_id.as_deref())?;
                let n = limit("limit", req.limit, DEFAULT_LIST, knowledge::MAX_LIST)?;
                record_ids(t, None);
                let mut tx = self.state.store.tenant_tx(t).await.map_err(store_status)?;
                let rows = knowledge::list(tx.conn(), entry, project, n)
                    .await
                    .map_err(store_status)?;
                tx.commit().await.map_err(store_status)?;
                Ok(v1::ListDocumentsResponse {
                    documents: rows.iter().map(document).collect(),
                })
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn languages_are_guessed_from_the_extension() {
        assert_eq!(guess_language("src/lib.rs"), "rust");
        assert_eq!(guess_language("App/Program.CS"), "csharp");
        assert_eq!(guess_language("Makefile"), "");
        assert_eq!(guess_language("dir.v2/README"), "");
    }

    #[test]
    fn an_unknown_kind_filter_names_the_field() {
        assert_eq!(
            entry_kind(Some("source_file")).expect("known"),
            Some(EntryKind::SourceFile)
        );
        assert_eq!(entry_kind(None).expect("unset"), None);
        let e = entry_kind(Some("intelligence")).expect_err("unknown");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().starts_with("kind:"));
    }
}
