//! `intelligence_knowledge_query` and `compliance_knowledge_query`
//! (read-only): ranked full-text search of one of the tenant's two knowledge
//! corpora (`knowledge_documents` of kind `intelligence` or `compliance`),
//! optionally one project. The two tools differ only in their corpus, so one
//! handler serves both, each value bound to one corpus. Must never write,
//! and a tool must never search the other tool's corpus.

use genesis_store::knowledge::{self, KnowledgeKind};
use serde_json::{Value, json};

use super::args::{limit, optional_uuid, required_str};
use super::{Tool, ToolContext, ToolError};

/// A corpus search, bound to its corpus.
pub struct KnowledgeQuery(KnowledgeKind);

impl KnowledgeQuery {
    /// `intelligence_knowledge_query`.
    pub const INTELLIGENCE: Self = Self(KnowledgeKind::Intelligence);
    /// `compliance_knowledge_query`.
    pub const COMPLIANCE: Self = Self(KnowledgeKind::Compliance);
}

#[async_trait::async_trait]
impl Tool for KnowledgeQuery {
    fn name(&self) -> &'static str {
        match self.0 {
            KnowledgeKind::Intelligence => "intelligence_knowledge_query",
            KnowledgeKind::Compliance => "compliance_knowledge_query",
        }
    }

    fn description(&self) -> &'static str {
        match self.0 {
            KnowledgeKind::Intelligence => {
                "Full-text search of the tenant's intelligence knowledge (web-search syntax: words, \
                 \"phrases\", -exclusions, or). Best matches first, each with a highlighted snippet."
            }
            KnowledgeKind::Compliance => {
                "Full-text search of the tenant's compliance knowledge (web-search syntax: words, \
                 \"phrases\", -exclusions, or). Best matches first, each with a highlighted snippet."
            }
        }
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 1024},
                "projectId": {"type": "string", "description": "Only this project (UUID)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let query = required_str(args, "query")?;
        let project = optional_uuid(args, "projectId")?;
        let n = limit(args, "limit", 10, 1, 50)?;
        let hits = knowledge::search(ctx.conn, self.0, query, project, n).await?;
        Ok(json!({"query": query, "results": hits}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tool_names_its_own_corpus() {
        for (tool, corpus) in [
            (KnowledgeQuery::INTELLIGENCE, "intelligence"),
            (KnowledgeQuery::COMPLIANCE, "compliance"),
        ] {
            assert_eq!(tool.0.as_str(), corpus);
            assert_eq!(tool.name(), format!("{corpus}_knowledge_query"));
            assert!(
                tool.description().contains(&format!("{corpus} knowledge")),
                "{}",
                tool.description()
            );
            assert!(genesis_core::modes::tool_class(tool.name()).is_some());
        }
    }
}
