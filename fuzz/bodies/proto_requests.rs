//! Body of the `proto_requests` fuzz target, shared with genesis-proto's
//! `tests/fuzz_corpus.rs`: decode arbitrary bytes as one of every AgentPod
//! and admin request message (chosen by the first byte) with prost, and
//! check that what decodes re-encodes to a fixpoint. Must never panic on
//! any input; a refusal is a typed `prost::DecodeError`.

use genesis_proto::v1 as pb;
use prost::Message;

macro_rules! requests {
    ($($t:ident),* $(,)?) => {
        /// Every request message type of `genesis.v1.AgentPod` and the admin
        /// services, in the order the first input byte indexes.
        pub const REQUEST_TYPES: &[&str] = &[$(stringify!($t)),*];

        /// Decode `bytes` as request type `index`, re-encode and decode again:
        /// the second encoding must equal the first (prost drops unknown
        /// fields once; after that the bytes are a fixpoint).
        fn decode_as(index: usize, bytes: &[u8]) -> Result<(), prost::DecodeError> {
            let mut i = 0usize;
            $(
                if index == i {
                    let first = pb::$t::decode(bytes)?.encode_to_vec();
                    let second = pb::$t::decode(first.as_slice())
                        .map(|m| m.encode_to_vec());
                    assert_eq!(second.as_ref().ok(), Some(&first), "{} re-encoding is not a fixpoint", stringify!($t));
                    return Ok(());
                }
                i += 1;
            )*
            let _ = i;
            Ok(())
        }
    };
}

requests!(
    ClaimTickRequest,
    RenewLeaseRequest,
    InvokeToolRequest,
    RecordCallAttemptRequest,
    CompleteTickRequest,
    ClaimReplayRequest,
    ReserveReplayCreditRequest,
    RecordReplayAttemptRequest,
    CompleteReplayRequest,
    ReplayTurnRequest,
    GetTurnReplayRequest,
    CreateTenantRequest,
    GetTenantRequest,
    ListTenantsRequest,
    SetStandingAgentsRequest,
    SetFeatureRequest,
    ListAgentsRequest,
    GetAgentRequest,
    StartAgentRequest,
    StopAgentRequest,
    ResetAgentRequest,
    StartComplianceRequest,
    StopComplianceRequest,
    SendMessageRequest,
    ListMessagesRequest,
    SetModeRequest,
    ListModesRequest,
    GetLedgerRequest,
    WatchTurnsRequest,
    RaiseRedactorSignalRequest,
    ListDecisionsRequest,
    GetDecisionRequest,
    RespondDecisionRequest,
    ListSitesRequest,
    ListPresetsRequest,
    UpsertPresetRequest,
    AttachPresetRequest,
    DetachPresetRequest,
    ListPricingRequest,
    SetPricingRequest,
    GetConfigRequest,
    SetConfigRequest,
    ListConfigRequest,
    ListMissionsRequest,
    GetMissionRequest,
    SetMissionStatusRequest,
    ListRulesRequest,
    AddRuleRequest,
    RemoveRuleRequest,
    IngestDocumentRequest,
    IngestSourceFileRequest,
    ListDocumentsRequest,
    RegisterRequest,
    HeartbeatRequest,
    RegistryListRequest,
    UnregisterRequest,
    RouteRequest,
    SpawnCoderRequest,
    ListCodersRequest,
    StopCoderRequest,
    CreateTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    CompleteTaskRequest,
    RunSpecRequest,
    TaskStatusRequest,
    LaunchRequest,
    WindowsRequest,
    FocusRequest,
    CloseRequest,
    SnapshotRequest,
    ClickRequest,
    TypeRequest,
    KeyRequest,
    WaitForRequest,
    ComputerRequest,
    ScreenshotRequest,
    ReleaseRequest,
    CreateTokenRequest,
    RevokeTokenRequest,
    ListTokensRequest,
    // Appended, so the committed seeds keep selecting the types they did.
    ReserveCreditRequest,
    GetModeRequest,
    EditModeRequest,
    ReportProgressRequest,
    AttachArtifactRequest,
    CoderLogsRequest,
    GetArtifactRequest,
    TaskPresetChainRequest,
    ReserveCoderCreditRequest,
    RecordCoderAttemptRequest,
    GetAgentTraceRequest,
);

/// Run one input: the first byte picks the message type, the rest is the
/// encoded message. Returns the decode error for refused input.
pub fn run(data: &[u8]) -> Result<(), prost::DecodeError> {
    let Some((&selector, bytes)) = data.split_first() else {
        return Ok(());
    };
    let index = usize::from(selector) % REQUEST_TYPES.len();
    // The timestamp edge check of genesis-proto on whatever decodes as one.
    if let Ok(ts) = prost_types::Timestamp::decode(bytes) {
        let _ = genesis_proto::convert::chrono_from_timestamp("at", &ts);
    }
    decode_as(index, bytes)
}
