//! InvokeTool's request as a domain value: the session's ids, the call's
//! idempotency key, the tool's name and its arguments text, each within its
//! bounds. The arguments stay text here: whether they are JSON, and whether
//! they match the tool's schema, is answered in band by the handler (the
//! model reads why), never as an RPC error.

use genesis_proto::convert::{invalid_argument as inv, parse_uuid};
use genesis_proto::v1 as pb;
use tonic::Status;
use uuid::Uuid;

use super::SessionIds;

/// Longest arguments JSON accepted for one tool call, in bytes.
pub const MAX_TOOL_ARGUMENTS_BYTES: usize = 256 * 1024;

/// Longest call id and tool name, in bytes.
const MAX_NAME_BYTES: usize = 200;

/// An InvokeTool request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvokeTool {
    pub ids: SessionIds,
    /// The idempotency key: a repeat within the session replays the result.
    pub call_id: String,
    pub tool_name: String,
    /// At most [`MAX_TOOL_ARGUMENTS_BYTES`]; not yet parsed.
    pub arguments_json: String,
    /// The event the session claimed: a call that runs is journaled in its
    /// effect's transaction. `None` from a pod that journals nothing.
    pub event_id: Option<Uuid>,
}

impl TryFrom<pb::InvokeToolRequest> for InvokeTool {
    type Error = Status;

    fn try_from(req: pb::InvokeToolRequest) -> Result<Self, Status> {
        let ids = SessionIds::parse(&req.session_id, &req.instance_id, &req.tenant_id)?;
        let bounded = |text: &str| !text.trim().is_empty() && text.len() <= MAX_NAME_BYTES;
        if !bounded(&req.call_id) {
            return Err(inv("call_id", "must be 1 to 200 bytes"));
        }
        if !bounded(&req.tool_name) {
            return Err(inv("tool_name", "must be 1 to 200 bytes"));
        }
        if req.arguments_json.len() > MAX_TOOL_ARGUMENTS_BYTES {
            return Err(inv(
                "arguments_json",
                format!("must be at most {MAX_TOOL_ARGUMENTS_BYTES} bytes"),
            ));
        }
        let event_id = match req.event_id.as_str() {
            "" => None,
            id => Some(parse_uuid("event_id", id)?),
        };
        Ok(Self {
            ids,
            call_id: req.call_id,
            tool_name: req.tool_name,
            arguments_json: req.arguments_json,
            event_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> pb::InvokeToolRequest {
        pb::InvokeToolRequest {
            session_id: Uuid::new_v4().to_string(),
            instance_id: Uuid::new_v4().to_string(),
            tenant_id: Uuid::new_v4().to_string(),
            call_id: "call-1".into(),
            tool_name: "soa_send_message".into(),
            arguments_json: "{}".into(),
            event_id: Uuid::new_v4().to_string(),
        }
    }

    #[test]
    fn each_bound_is_refused_naming_its_field() {
        let refused = |req: pb::InvokeToolRequest| {
            InvokeTool::try_from(req)
                .expect_err("refused")
                .message()
                .to_owned()
        };
        assert!(InvokeTool::try_from(request()).is_ok());
        assert!(
            refused(pb::InvokeToolRequest {
                call_id: " ".into(),
                ..request()
            })
            .starts_with("call_id: ")
        );
        assert!(
            refused(pb::InvokeToolRequest {
                tool_name: "t".repeat(201),
                ..request()
            })
            .starts_with("tool_name: ")
        );
        assert!(
            refused(pb::InvokeToolRequest {
                arguments_json: " ".repeat(MAX_TOOL_ARGUMENTS_BYTES + 1),
                ..request()
            })
            .starts_with("arguments_json: ")
        );
        assert!(
            refused(pb::InvokeToolRequest {
                event_id: "not-an-event".into(),
                ..request()
            })
            .starts_with("event_id: ")
        );
        let unjournaled = InvokeTool::try_from(pb::InvokeToolRequest {
            event_id: String::new(),
            ..request()
        })
        .expect("an empty event id journals nothing");
        assert_eq!(unjournaled.event_id, None);
    }
}
