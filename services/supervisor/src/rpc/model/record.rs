//! RecordCallAttempt's and ReserveCredit's requests as domain values: a
//! reported call attempt checked field by field by the store's own rule
//! (shared with CompleteTick, whose last attempts travel with the
//! completion), and a reservation's chain and token counts. A reported
//! attempt is not yet priced: its cost is computed by the handler, never
//! taken from the pod.

use genesis_core::journal::{LlmTurnStep, MAX_STEP_BYTES, redact_step};
use genesis_core::redact::redact_credentials;
use genesis_proto::convert::{invalid_argument as inv, parse_uuid, require};
use genesis_proto::v1 as pb;
use genesis_store::StoreError;
use genesis_store::llm::NewCallAttempt;
use genesis_store::llm::PromptText;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tonic::Status;
use uuid::Uuid;

use super::SessionIds;
use crate::error::store_status;

/// A RecordCallAttempt request.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordCallAttempt {
    pub ids: SessionIds,
    /// Checked, not yet priced (`site_id` and `cost_usd` are filled then).
    pub attempt: NewCallAttempt,
    /// On a turn's last attempt: the claimed event and the turn's journal
    /// step, checked and cleared of credentials.
    pub journal: Option<(Uuid, ReportedStep)>,
}

impl TryFrom<pb::RecordCallAttemptRequest> for RecordCallAttempt {
    type Error = Status;

    fn try_from(req: pb::RecordCallAttemptRequest) -> Result<Self, Status> {
        let ids = SessionIds::parse(&req.session_id, &req.instance_id, &req.tenant_id)?;
        let attempt = reported_attempt(
            "",
            ids,
            req.invocation_id,
            req.attempt.as_ref(),
            req.prompt_overlay_sha256,
        )?;
        let journal = match reported_step("journal_step_json", &req.journal_step_json)? {
            Some(step) => Some((parse_uuid("event_id", &req.event_id)?, step)),
            None => None,
        };
        Ok(Self {
            ids,
            attempt,
            journal,
        })
    }
}

/// A ReserveCredit request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveCredit {
    pub ids: SessionIds,
    /// The chain's models, 1 to 64 of them, each 1 to 200 bytes.
    pub models: Vec<String>,
    pub prompt_tokens: u64,
    pub max_output_tokens: u64,
}

impl ReserveCredit {
    /// The chain's first model (the one whose context is read when the
    /// tick's memo is gone).
    pub fn first_model(&self) -> &str {
        self.models.first().map(String::as_str).unwrap_or_default()
    }
}

impl TryFrom<pb::ReserveCreditRequest> for ReserveCredit {
    type Error = Status;

    fn try_from(req: pb::ReserveCreditRequest) -> Result<Self, Status> {
        let ids = SessionIds::parse(&req.session_id, &req.instance_id, &req.tenant_id)?;
        let (models, prompt_tokens, max_output_tokens) =
            worst_case_ask(req.models, req.prompt_tokens, req.max_output_tokens)?;
        Ok(Self {
            ids,
            models,
            prompt_tokens,
            max_output_tokens,
        })
    }
}

/// What a reservation asks to hold the worst case of (a tick's turn or a
/// replay's): the chain's models, checked by the store's rule, and the
/// prompt and output token counts, never negative.
pub(super) fn worst_case_ask(
    models: Vec<String>,
    prompt_tokens: i64,
    max_output_tokens: i64,
) -> Result<(Vec<String>, u64, u64), Status> {
    genesis_store::llm::check_chain_models(&models).map_err(|e| store_status(&e))?;
    let count =
        |field: &str, v: i64| u64::try_from(v).map_err(|_| inv(field, "must be non-negative"));
    Ok((
        models,
        count("prompt_tokens", prompt_tokens)?,
        count("max_output_tokens", max_output_tokens)?,
    ))
}

/// One reported call attempt, checked as RecordCallAttempt checks it, ready
/// to be priced and written. A batch of them (CompleteTick's
/// `call_attempts`) is checked whole before any is written. `prefix` names
/// where the attempt sits in the request: `""` for RecordCallAttempt,
/// `call_attempts[i].` for CompleteTick.
pub(super) fn reported_attempt(
    prefix: &str,
    ids: SessionIds,
    invocation_id: String,
    attempt: Option<&pb::CallAttempt>,
    prompt_overlay_sha256: String,
) -> Result<NewCallAttempt, Status> {
    let a = require(&format!("{prefix}attempt"), attempt)?;
    // Every field is checked once, by the store's rule below; an empty
    // overlay hash means none.
    let prompt_overlay_sha256 =
        (!prompt_overlay_sha256.is_empty()).then_some(prompt_overlay_sha256);
    let attempt = NewCallAttempt {
        instance_id: ids.instance_id,
        session: ids.session,
        invocation_id,
        site_id: String::new(),
        requested_model: a.requested_model.clone(),
        served_model: a.served_model.clone(),
        provider: a.provider.clone(),
        credential_name: a.credential_name.clone(),
        outcome: a.outcome.clone(),
        input_tokens: a.input_tokens,
        output_tokens: a.output_tokens,
        cache_read_tokens: a.cache_read_tokens,
        cache_write_tokens: a.cache_write_tokens,
        latency_ms: a.latency_ms,
        error_message: a.error_message.clone(),
        cost_usd: 0.0,
        priced_as: None,
        pricing_source: None,
        prompt_overlay_sha256,
    };
    match attempt.check_reported() {
        Ok(()) => Ok(attempt),
        Err(StoreError::InvalidArgument { field, reason }) => {
            Err(inv(&format!("{prefix}{field}"), reason))
        }
        Err(e) => Err(store_status(&e)),
    }
}

/// An LLM turn's journal step, checked and cleared of credentials: the
/// entry as stored, and the system prompt it names by SHA-256 (kept once
/// per tenant, not in every step).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedStep {
    pub entry: Value,
    pub system: Option<PromptText>,
}

/// An LLM turn's journal step as the pod sent it (`field` names where):
/// `None` when empty, else parsed as genesis-core's [`LlmTurnStep`],
/// checked, and cleared of every credential before anything stores it.
pub(super) fn reported_step(field: &str, json: &str) -> Result<Option<ReportedStep>, Status> {
    if json.is_empty() {
        return Ok(None);
    }
    if json.len() > MAX_STEP_BYTES {
        return Err(inv(
            field,
            format!("must be at most {MAX_STEP_BYTES} bytes"),
        ));
    }
    let mut step: LlmTurnStep = serde_json::from_str(json)
        .map_err(|e| inv(field, format!("is not a journal turn step: {e}")))?;
    step.check().map_err(|e| inv(field, e.to_string()))?;
    let system = step.request.system.take().map(|text| {
        let text = redact_credentials(&text).text;
        PromptText {
            sha256: hex::encode(Sha256::digest(text.as_bytes())),
            text,
        }
    });
    step.request.system_sha256 = system.as_ref().map(|p| p.sha256.clone());
    let mut entry =
        serde_json::to_value(&step).map_err(|e| inv(field, format!("cannot be stored: {e}")))?;
    redact_step(&mut entry);
    Ok(Some(ReportedStep { entry, system }))
}
