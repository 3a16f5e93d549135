//! One handler per subcommand: validate the arguments into a request, connect
//! (only then), make the call, print the answer. Every handler builds its
//! whole request before connecting, so a usage error never touches the
//! network and an unreachable endpoint never hides a usage error.
//!
//! Handlers never retry, never print to stderr and never decide exit codes:
//! they return [`CliError`] and `run` maps it.

use std::path::{Path, PathBuf};

use genesis_core::{
    AgentSignalKind, AgentType, AttentionStatus, InstanceStatus, MissionStatus, TokenScope,
};
use genesis_proto::v1;

use crate::cli::{
    AgentCmd, Cli, CoderCmd, Command, ConfigCmd, ConstitutionCmd, CoupleArgs, DecisionCmd,
    KnowledgeCmd, LlmCmd, MissionCmd, ModeCmd, ModeEditArgs, PresetCmd, PricingCmd, RegistryCmd,
    SpawnTaskArgs, TaskCmd, TenantCmd, TokenCmd,
};
use crate::client::Connection;
use crate::error::CliError;
use crate::output::Printer;
use crate::table::{Column, col};
use crate::validate::{self, choice, json_text, non_empty, opt_uuid, stored, uuid};

/// Registry roles the coordination registry accepts (spec 2.1 b).
pub const REGISTRY_ROLES: &[&str] = &["Developer", "Reviewer", "Coordinator", "Monitor", "Generic"];

/// What one invocation works with: the parsed flags, the connection (opened
/// on first use) and the printer.
pub struct Ctx<'a> {
    cli: &'a Cli,
    conn: Option<Connection>,
    /// Where results go.
    pub out: Printer<'a>,
}

impl<'a> Ctx<'a> {
    /// A context for one invocation.
    pub fn new(cli: &'a Cli, out: Printer<'a>) -> Self {
        Ctx {
            cli,
            conn: None,
            out,
        }
    }

    /// The connection, opened now if it is not yet.
    pub async fn conn(&mut self) -> Result<&Connection, CliError> {
        if self.conn.is_none() {
            let conn = Connection::open(
                &self.cli.endpoint,
                self.cli.token.as_deref(),
                self.cli.timeout,
                self.cli.ca_file.as_deref(),
            )
            .await?;
            self.conn = Some(conn);
        }
        self.conn
            .as_ref()
            .ok_or_else(|| CliError::Render("connection not kept".into()))
    }

    /// `--tenant`, required and a UUID, for the command named.
    pub fn tenant(&self, command: &str) -> Result<String, CliError> {
        validate::tenant(self.cli.tenant.as_deref(), command)
    }

    /// `--tenant` if given (validated), for commands where it is optional.
    pub fn opt_tenant(&self) -> Result<Option<String>, CliError> {
        opt_uuid("--tenant", self.cli.tenant.as_deref())
    }
}

/// Calls `service.method(request)` on the context's connection.
macro_rules! call {
    ($ctx:expr, $service:ident . $method:ident ( $req:expr )) => {{
        let request = $req;
        let mut client = $ctx.conn().await?.$service();
        client.$method(request).await?.into_inner()
    }};
}

const TENANT_COLS: &[Column] = &[
    col("ID", "id"),
    col("NAME", "name"),
    col("STATUS", "status"),
    col("STANDING AGENTS", "standing_agents_enabled"),
    col("FEATURES", "features"),
    col("CREATED", "created_at"),
];

/// Columns of `agent list`.
pub const AGENT_COLS: &[Column] = &[
    col("ID", "id"),
    col("TYPE", "agent_type"),
    col("STATUS", "status"),
    col("MODE", "active_mode"),
    col("PHASE", "phase"),
    col("LAST DECISION", "last_decision_kind"),
    col("NEXT TICK", "next_tick_at"),
    col("IDLE", "consecutive_idle_ticks"),
    col("BLOCKED", "consecutive_blocked_turns"),
    col("PROVIDER FAILURES", "consecutive_provider_failures"),
    col("EXHAUSTED", "consecutive_exhausted_turns"),
];

const MESSAGE_COLS: &[Column] = &[
    col("CREATED", "created_at"),
    col("DIRECTION", "direction"),
    col("BODY", "body"),
    col("ID", "id"),
];

const MODE_COLS: &[Column] = &[
    col("NAME", "name"),
    col("DEFAULT", "is_default"),
    col("TOOLS", "toolset"),
    col("DESCRIPTION", "description"),
];

/// Columns of `agent ledger`.
pub const LEDGER_COLS: &[Column] = &[
    col("TURN", "turn_number"),
    col("CREATED", "created_at"),
    col("EVENT", "event_kind"),
    col("DECISION", "decision_kind"),
    col("MODE", "active_mode"),
    col("PHASE", "phase"),
    col("MODEL", "served_model"),
    col("IN", "input_tokens"),
    col("OUT", "output_tokens"),
    col("COST $", "cost_usd"),
    col("SUMMARY", "reasoning_summary"),
];

const DECISION_COLS: &[Column] = &[
    col("ID", "id"),
    col("KIND", "kind"),
    col("STATUS", "status"),
    col("TITLE", "title"),
    col("INSTANCE", "instance_id"),
    col("CREATED", "created_at"),
    col("RESOLUTION", "resolution"),
];

const SITE_COLS: &[Column] = &[
    col("SITE", "site_id"),
    col("PARENT", "parent_site_id"),
    col("DEFAULT MODEL", "default_model"),
    col("ATTACHED", "attached_preset_id"),
    col("EFFECTIVE", "effective_preset_id"),
    col("INHERITED", "inherited"),
];

const PRESET_COLS: &[Column] = &[
    col("ID", "id"),
    col("NAME", "name"),
    col("MODEL", "primary.model"),
    col("PROVIDER", "primary.provider"),
    col("BACKEND", "primary.backend"),
    col("UPDATED", "updated_at"),
];

const PRICING_COLS: &[Column] = &[
    col("MODEL", "model"),
    col("IN $/MTOK", "input_per_mtok"),
    col("OUT $/MTOK", "output_per_mtok"),
    col("CACHE READ", "cache_read_per_mtok"),
    col("CACHE WRITE", "cache_write_per_mtok"),
    col("UPDATED", "updated_at"),
];

const CONFIG_COLS: &[Column] = &[
    col("KEY", "key"),
    col("VALUE", "value"),
    col("SCOPE", "scope"),
    col("UPDATED", "updated_at"),
];

const MISSION_COLS: &[Column] = &[
    col("ID", "id"),
    col("KIND", "kind"),
    col("STATUS", "status"),
    col("TITLE", "title"),
    col("STEERING INSTANCE", "steering_instance_id"),
    col("UPDATED", "updated_at"),
];

const RULE_COLS: &[Column] = &[
    col("ID", "id"),
    col("NAME", "name"),
    col("PATTERN", "pattern"),
    col("DESCRIPTION", "description"),
];

const DOCUMENT_COLS: &[Column] = &[
    col("ID", "id"),
    col("KIND", "kind"),
    col("TITLE", "title"),
    col("SOURCE", "source"),
    col("PROJECT", "project_id"),
    col("BYTES", "size_bytes"),
    col("CREATED", "created_at"),
];

const REGISTRY_COLS: &[Column] = &[
    col("ID", "id"),
    col("NAME", "name"),
    col("ROLE", "role"),
    col("CAPABILITIES", "capabilities"),
    col("LAST HEARTBEAT", "last_heartbeat_at"),
    col("EXPIRES", "expires_at"),
];

const CODER_COLS: &[Column] = &[
    col("ID", "id"),
    col("NAME", "name"),
    col("STATUS", "status"),
    col("MODEL", "couple.model"),
    col("PROVIDER", "couple.provider"),
    col("WINDOWS", "enable_windows_mcp"),
    col("JOB", "job_name"),
    col("CREATED", "created_at"),
];

const TASK_COLS: &[Column] = &[
    col("ID", "id"),
    col("TITLE", "title"),
    col("STATUS", "status"),
    col("CODER", "coder_id"),
    col("PROGRESS", "progress_percent"),
    col("ARTIFACTS", "artifact_count"),
    col("COST", "cost_usd"),
    col("WINDOWS", "windows_hold.host"),
    col("MODEL", "couple.model"),
    col("UPDATED", "updated_at"),
];

const TOKEN_COLS: &[Column] = &[
    col("ID", "id"),
    col("SCOPE", "scope"),
    col("TENANT", "tenant_id"),
    col("POD TENANTS", "pod_tenant_ids"),
    col("LABEL", "label"),
    col("CREATED", "created_at"),
    col("EXPIRES", "expires_at"),
    col("REVOKED", "revoked_at"),
];

/// The admin RPCs only a coder token may call (a coder's credit holds and
/// priced attempts): genesis-coder calls them, no operator command does.
pub const CODER_ONLY_RPCS: &[(&str, &str)] = &[
    ("genesis.v1.CodingTaskService", "ReserveCoderCredit"),
    ("genesis.v1.CodingTaskService", "RecordCoderAttempt"),
];

/// Which command calls which admin RPC: `(service, method, command path)`.
/// A test checks it against the descriptor set, so an RPC added to
/// admin.proto cannot ship without a command (or a deliberate entry here).
pub const RPC_COMMANDS: &[(&str, &str, &str)] = &[
    ("genesis.v1.TenantService", "CreateTenant", "tenant create"),
    ("genesis.v1.TenantService", "GetTenant", "tenant get"),
    ("genesis.v1.TenantService", "ListTenants", "tenant list"),
    (
        "genesis.v1.TenantService",
        "SetStandingAgents",
        "tenant standing-agents",
    ),
    ("genesis.v1.TenantService", "SetFeature", "tenant feature"),
    ("genesis.v1.AgentService", "ListAgents", "agent list"),
    ("genesis.v1.AgentService", "GetAgent", "agent get"),
    ("genesis.v1.AgentService", "StartAgent", "agent start"),
    ("genesis.v1.AgentService", "StopAgent", "agent stop"),
    ("genesis.v1.AgentService", "ResetAgent", "agent reset"),
    (
        "genesis.v1.AgentService",
        "StartCompliance",
        "agent start-compliance",
    ),
    (
        "genesis.v1.AgentService",
        "StopCompliance",
        "agent stop-compliance",
    ),
    ("genesis.v1.AgentService", "SendMessage", "agent send"),
    ("genesis.v1.AgentService", "ListMessages", "agent messages"),
    ("genesis.v1.AgentService", "SetMode", "agent mode set"),
    ("genesis.v1.AgentService", "ListModes", "agent modes"),
    ("genesis.v1.AgentService", "GetMode", "agent mode get"),
    ("genesis.v1.AgentService", "EditMode", "agent mode edit"),
    ("genesis.v1.AgentService", "GetLedger", "agent ledger"),
    ("genesis.v1.AgentService", "GetAgentTrace", "agent trace"),
    ("genesis.v1.AgentService", "ReplayTurn", "agent replay"),
    (
        "genesis.v1.AgentService",
        "GetTurnReplay",
        "agent replay-show",
    ),
    ("genesis.v1.AgentService", "WatchTurns", "watch"),
    (
        "genesis.v1.AgentService",
        "RaiseRedactorSignal",
        "agent raise-redactor-signal",
    ),
    (
        "genesis.v1.DecisionService",
        "ListDecisions",
        "decision list",
    ),
    ("genesis.v1.DecisionService", "GetDecision", "decision get"),
    (
        "genesis.v1.DecisionService",
        "RespondDecision",
        "decision respond",
    ),
    ("genesis.v1.LlmService", "ListSites", "llm sites"),
    ("genesis.v1.LlmService", "ListPresets", "llm presets"),
    ("genesis.v1.LlmService", "UpsertPreset", "llm preset upsert"),
    ("genesis.v1.LlmService", "AttachPreset", "llm attach"),
    ("genesis.v1.LlmService", "DetachPreset", "llm detach"),
    ("genesis.v1.LlmService", "ListPricing", "llm pricing"),
    ("genesis.v1.LlmService", "SetPricing", "llm pricing set"),
    ("genesis.v1.ConfigService", "GetConfig", "config get"),
    ("genesis.v1.ConfigService", "SetConfig", "config set"),
    ("genesis.v1.ConfigService", "ListConfig", "config list"),
    ("genesis.v1.MissionService", "ListMissions", "mission list"),
    ("genesis.v1.MissionService", "GetMission", "mission get"),
    (
        "genesis.v1.MissionService",
        "SetMissionStatus",
        "mission status",
    ),
    (
        "genesis.v1.ConstitutionService",
        "ListRules",
        "constitution list",
    ),
    (
        "genesis.v1.ConstitutionService",
        "AddRule",
        "constitution add",
    ),
    (
        "genesis.v1.ConstitutionService",
        "RemoveRule",
        "constitution remove",
    ),
    (
        "genesis.v1.KnowledgeService",
        "IngestDocument",
        "knowledge ingest",
    ),
    (
        "genesis.v1.KnowledgeService",
        "IngestSourceFile",
        "knowledge ingest-source",
    ),
    (
        "genesis.v1.KnowledgeService",
        "ListDocuments",
        "knowledge list",
    ),
    (
        "genesis.v1.RegistryService",
        "Register",
        "registry register",
    ),
    (
        "genesis.v1.RegistryService",
        "Heartbeat",
        "registry heartbeat",
    ),
    ("genesis.v1.RegistryService", "List", "registry list"),
    (
        "genesis.v1.RegistryService",
        "Unregister",
        "registry unregister",
    ),
    ("genesis.v1.RegistryService", "Route", "registry route"),
    ("genesis.v1.CoderService", "SpawnCoder", "coder spawn"),
    ("genesis.v1.CoderService", "ListCoders", "coder list"),
    ("genesis.v1.CoderService", "StopCoder", "coder stop"),
    ("genesis.v1.CoderService", "CoderLogs", "coder logs"),
    ("genesis.v1.CodingTaskService", "CreateTask", "task create"),
    ("genesis.v1.CodingTaskService", "GetTask", "task get"),
    ("genesis.v1.CodingTaskService", "ListTasks", "task list"),
    (
        "genesis.v1.CodingTaskService",
        "ReportProgress",
        "task progress",
    ),
    (
        "genesis.v1.CodingTaskService",
        "AttachArtifact",
        "task attach",
    ),
    (
        "genesis.v1.CodingTaskService",
        "CompleteTask",
        "task complete",
    ),
    (
        "genesis.v1.CodingTaskService",
        "GetArtifact",
        "task artifact",
    ),
    (
        "genesis.v1.CodingTaskService",
        "TaskPresetChain",
        "task chain",
    ),
    (
        "genesis.v1.WindowsLaneService",
        "RunSpec",
        "windows run-spec",
    ),
    (
        "genesis.v1.WindowsLaneService",
        "TaskStatus",
        "windows task-status",
    ),
    ("genesis.v1.WindowsLaneService", "Launch", "windows launch"),
    (
        "genesis.v1.WindowsLaneService",
        "Windows",
        "windows windows",
    ),
    ("genesis.v1.WindowsLaneService", "Focus", "windows focus"),
    ("genesis.v1.WindowsLaneService", "Close", "windows close"),
    (
        "genesis.v1.WindowsLaneService",
        "Snapshot",
        "windows snapshot",
    ),
    ("genesis.v1.WindowsLaneService", "Click", "windows click"),
    ("genesis.v1.WindowsLaneService", "Type", "windows type"),
    ("genesis.v1.WindowsLaneService", "Key", "windows key"),
    (
        "genesis.v1.WindowsLaneService",
        "WaitFor",
        "windows wait-for",
    ),
    (
        "genesis.v1.WindowsLaneService",
        "Computer",
        "windows computer",
    ),
    (
        "genesis.v1.WindowsLaneService",
        "Screenshot",
        "windows screenshot",
    ),
    (
        "genesis.v1.WindowsLaneService",
        "Release",
        "windows release",
    ),
    ("genesis.v1.TokenService", "CreateToken", "token create"),
    ("genesis.v1.TokenService", "RevokeToken", "token revoke"),
    ("genesis.v1.TokenService", "ListTokens", "token list"),
];

/// Runs one parsed command to completion.
pub async fn execute(ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let cli = ctx.cli;
    match &cli.command {
        Command::Tenant(cmd) => tenant(ctx, cmd).await,
        Command::Agent(cmd) => agent(ctx, cmd).await,
        Command::Decision(cmd) => decision(ctx, cmd).await,
        Command::Llm(cmd) => llm(ctx, cmd).await,
        Command::Config(cmd) => config(ctx, cmd).await,
        Command::Mission(cmd) => mission(ctx, cmd).await,
        Command::Constitution(cmd) => constitution(ctx, cmd).await,
        Command::Knowledge(cmd) => knowledge(ctx, cmd).await,
        Command::Registry(cmd) => registry(ctx, cmd).await,
        Command::Coder(cmd) => coder(ctx, cmd).await,
        Command::Task(cmd) => task(ctx, cmd).await,
        Command::Windows(cmd) => crate::windows::run(ctx, cmd).await,
        Command::Token(cmd) => token(ctx, cmd).await,
        Command::Watch(args) => crate::watch::run(ctx, args).await,
    }
}

async fn tenant(ctx: &mut Ctx<'_>, cmd: &TenantCmd) -> Result<(), CliError> {
    match cmd {
        TenantCmd::Create {
            name,
            standing_agents,
        } => {
            let req = v1::CreateTenantRequest {
                name: non_empty("NAME", name)?,
                standing_agents_enabled: *standing_agents,
            };
            let t = call!(ctx, tenants.create_tenant(req));
            ctx.out.object(&t)
        }
        TenantCmd::Get { id } => {
            let tenant_id = match id {
                Some(id) => uuid("ID", id)?,
                None => ctx.tenant("tenant get")?,
            };
            let t = call!(ctx, tenants.get_tenant(v1::GetTenantRequest { tenant_id }));
            ctx.out.object(&t)
        }
        TenantCmd::List => {
            let r = call!(ctx, tenants.list_tenants(v1::ListTenantsRequest {}));
            ctx.out.list(&r, "tenants", TENANT_COLS)
        }
        TenantCmd::StandingAgents { state } => {
            let req = v1::SetStandingAgentsRequest {
                tenant_id: ctx.tenant("tenant standing-agents")?,
                enabled: state.enabled(),
            };
            let t = call!(ctx, tenants.set_standing_agents(req));
            ctx.out.object(&t)
        }
        TenantCmd::Feature { name, state } => {
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
            if !valid {
                return Err(CliError::usage(format!(
                    "NAME: {name:?} is not a feature name (lower-case letters, digits, - and _, e.g. windows-pool)"
                )));
            }
            let req = v1::SetFeatureRequest {
                tenant_id: ctx.tenant("tenant feature")?,
                name: name.clone(),
                enabled: state.enabled(),
            };
            let t = call!(ctx, tenants.set_feature(req));
            ctx.out.object(&t)
        }
    }
}

async fn agent(ctx: &mut Ctx<'_>, cmd: &AgentCmd) -> Result<(), CliError> {
    match cmd {
        AgentCmd::List { agent_type, status } => {
            let req = v1::ListAgentsRequest {
                tenant_id: ctx.tenant("agent list")?,
                agent_type: agent_type
                    .as_deref()
                    .map(|t| stored::<AgentType>("--type", "agent type", t))
                    .transpose()?,
                status: status
                    .as_deref()
                    .map(|s| stored::<InstanceStatus>("--status", "instance status", s))
                    .transpose()?,
            };
            let r = call!(ctx, agents.list_agents(req));
            ctx.out.list(&r, "agents", AGENT_COLS)
        }
        AgentCmd::Get { id } => {
            let req = v1::GetAgentRequest {
                tenant_id: ctx.tenant("agent get")?,
                instance_id: uuid("ID", id)?,
            };
            let a = call!(ctx, agents.get_agent(req));
            ctx.out.object(&a)
        }
        AgentCmd::Start { id } => {
            let req = v1::StartAgentRequest {
                tenant_id: ctx.tenant("agent start")?,
                instance_id: uuid("ID", id)?,
            };
            let a = call!(ctx, agents.start_agent(req));
            ctx.out.object(&a)
        }
        AgentCmd::Stop { id } => {
            let req = v1::StopAgentRequest {
                tenant_id: ctx.tenant("agent stop")?,
                instance_id: uuid("ID", id)?,
            };
            let a = call!(ctx, agents.stop_agent(req));
            ctx.out.object(&a)
        }
        AgentCmd::Reset { id } => {
            let req = v1::ResetAgentRequest {
                tenant_id: ctx.tenant("agent reset")?,
                instance_id: uuid("ID", id)?,
            };
            let r = call!(ctx, agents.reset_agent(req));
            ctx.out.object(&r)
        }
        AgentCmd::StartCompliance => {
            let req = v1::StartComplianceRequest {
                tenant_id: ctx.tenant("agent start-compliance")?,
            };
            let a = call!(ctx, agents.start_compliance(req));
            ctx.out.object(&a)
        }
        AgentCmd::StopCompliance => {
            let req = v1::StopComplianceRequest {
                tenant_id: ctx.tenant("agent stop-compliance")?,
            };
            let a = call!(ctx, agents.stop_compliance(req));
            ctx.out.object(&a)
        }
        AgentCmd::Send { id, body } => {
            let req = v1::SendMessageRequest {
                tenant_id: ctx.tenant("agent send")?,
                instance_id: uuid("ID", id)?,
                body: non_empty("BODY", body)?,
            };
            let r = call!(ctx, agents.send_message(req));
            ctx.out.object(&r)
        }
        AgentCmd::Messages { id, limit, before } => {
            let req = v1::ListMessagesRequest {
                tenant_id: ctx.tenant("agent messages")?,
                instance_id: uuid("ID", id)?,
                limit: limit.unwrap_or(0),
                before: before
                    .as_deref()
                    .map(|b| validate::instant("--before", b))
                    .transpose()?,
            };
            let r = call!(ctx, agents.list_messages(req));
            ctx.out.list(&r, "messages", MESSAGE_COLS)
        }
        AgentCmd::Mode(ModeCmd::Set { id, mode }) => {
            let req = v1::SetModeRequest {
                tenant_id: ctx.tenant("agent mode set")?,
                instance_id: uuid("ID", id)?,
                mode: validate::mode_name("MODE", mode)?,
            };
            let r = call!(ctx, agents.set_mode(req));
            ctx.out.object(&r)
        }
        AgentCmd::Mode(ModeCmd::List { agent_type }) => {
            let req = v1::ListModesRequest {
                tenant_id: ctx.tenant("agent mode list")?,
                agent_type: stored::<AgentType>("AGENT_TYPE", "agent type", agent_type)?,
            };
            let r = call!(ctx, agents.list_modes(req));
            ctx.out.list(&r, "modes", MODE_COLS)
        }
        AgentCmd::Mode(ModeCmd::Get { agent_type, mode }) => {
            let req = v1::GetModeRequest {
                tenant_id: ctx.tenant("agent mode get")?,
                agent_type: stored::<AgentType>("AGENT_TYPE", "agent type", agent_type)?,
                mode: validate::mode_name("MODE", mode)?,
            };
            let r = call!(ctx, agents.get_mode(req));
            ctx.out.object(&r)
        }
        AgentCmd::Mode(ModeCmd::Edit(args)) => {
            let req = mode_edit_request(ctx.tenant("agent mode edit")?, args)?;
            let r = call!(ctx, agents.edit_mode(req));
            ctx.out.object(&r)
        }
        AgentCmd::Modes { agent_type } => {
            let req = v1::ListModesRequest {
                tenant_id: ctx.tenant("agent modes")?,
                agent_type: stored::<AgentType>("AGENT_TYPE", "agent type", agent_type)?,
            };
            let r = call!(ctx, agents.list_modes(req));
            ctx.out.list(&r, "modes", MODE_COLS)
        }
        AgentCmd::Ledger { id, limit, before } => {
            let req = v1::GetLedgerRequest {
                tenant_id: ctx.tenant("agent ledger")?,
                instance_id: uuid("ID", id)?,
                limit: limit.unwrap_or(0),
                before: *before,
            };
            let r = call!(ctx, agents.get_ledger(req));
            ctx.out.list(&r, "turns", LEDGER_COLS)
        }
        AgentCmd::Trace { id, turn } => {
            let req = v1::GetAgentTraceRequest {
                tenant_id: ctx.tenant("agent trace")?,
                instance_id: uuid("ID", id)?,
                turn_number: *turn,
            };
            let trace = call!(ctx, agents.get_agent_trace(req));
            if ctx.out.format() == crate::cli::Output::Json {
                return ctx.out.object(&trace);
            }
            ctx.out.text(&crate::trace::render(&trace))
        }
        AgentCmd::Replay {
            id,
            turn,
            preset,
            no_wait,
            max_wait,
        } => {
            let tenant_id = ctx.tenant("agent replay")?;
            let req = v1::ReplayTurnRequest {
                tenant_id: tenant_id.clone(),
                instance_id: uuid("ID", id)?,
                turn_number: *turn,
                preset_id: uuid("--preset", preset)?,
            };
            let mut replay = call!(ctx, agents.replay_turn(req));
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(*max_wait);
            while !*no_wait
                && crate::replay::running(&replay)
                && std::time::Instant::now() < deadline
            {
                tokio::time::sleep(crate::replay::POLL).await;
                let req = v1::GetTurnReplayRequest {
                    tenant_id: tenant_id.clone(),
                    replay_id: replay.id.clone(),
                };
                replay = call!(ctx, agents.get_turn_replay(req));
            }
            if ctx.out.format() == crate::cli::Output::Json {
                return ctx.out.object(&replay);
            }
            ctx.out.text(&crate::replay::render(&replay))
        }
        AgentCmd::ReplayShow { replay_id } => {
            let req = v1::GetTurnReplayRequest {
                tenant_id: ctx.tenant("agent replay-show")?,
                replay_id: uuid("REPLAY_ID", replay_id)?,
            };
            let replay = call!(ctx, agents.get_turn_replay(req));
            if ctx.out.format() == crate::cli::Output::Json {
                return ctx.out.object(&replay);
            }
            ctx.out.text(&crate::replay::render(&replay))
        }
        AgentCmd::RaiseRedactorSignal {
            call_site,
            signal_kind,
            note,
        } => {
            let req = v1::RaiseRedactorSignalRequest {
                tenant_id: ctx.tenant("agent raise-redactor-signal")?,
                call_site_id: validate::site_id("CALL_SITE", call_site)?,
                signal_kind: stored::<AgentSignalKind>("SIGNAL_KIND", "signal kind", signal_kind)?,
                note: note.clone(),
            };
            let r = call!(ctx, agents.raise_redactor_signal(req));
            ctx.out.object(&r)
        }
    }
}

/// The resolution sent for `decision respond --resolution`: `approve` and
/// `reject` are shorthands for the stored `approved` / `rejected` (a
/// mode_change request is applied only on `approved`); anything else is the
/// operator's own answer, sent verbatim.
pub fn resolution(value: &str) -> Result<String, CliError> {
    let value = non_empty("--resolution", value)?;
    Ok(match value.as_str() {
        "approve" | "approved" => "approved".into(),
        "reject" | "rejected" => "rejected".into(),
        _ => value,
    })
}

async fn decision(ctx: &mut Ctx<'_>, cmd: &DecisionCmd) -> Result<(), CliError> {
    match cmd {
        DecisionCmd::List { status } => {
            let req = v1::ListDecisionsRequest {
                tenant_id: ctx.tenant("decision list")?,
                status: status
                    .as_deref()
                    .map(|s| stored::<AttentionStatus>("--status", "decision status", s))
                    .transpose()?,
            };
            let r = call!(ctx, decisions.list_decisions(req));
            ctx.out.list(&r, "decisions", DECISION_COLS)
        }
        DecisionCmd::Get { id } => {
            let req = v1::GetDecisionRequest {
                tenant_id: ctx.tenant("decision get")?,
                decision_id: uuid("ID", id)?,
            };
            let d = call!(ctx, decisions.get_decision(req));
            ctx.out.object(&d)
        }
        DecisionCmd::Respond {
            id,
            resolution: res,
            notes,
        } => {
            let req = v1::RespondDecisionRequest {
                tenant_id: ctx.tenant("decision respond")?,
                decision_id: uuid("ID", id)?,
                resolution: resolution(res)?,
                notes: notes.clone(),
            };
            let r = call!(ctx, decisions.respond_decision(req));
            ctx.out.object(&r)
        }
    }
}

/// The `EditModeRequest` of `agent mode edit`: at least one change; the
/// fragment from `--fragment` or `--fragment-file`; `--tools` split on
/// commas ("" is the empty toolset); `--budget` parsed by genesis-core's
/// budget-override rule (the stored camelCase keys) and sent as an
/// envelope. Whether the tools are in the type's superset, and whether the
/// preset exists, is the server's check.
pub fn mode_edit_request(
    tenant_id: String,
    a: &ModeEditArgs,
) -> Result<v1::EditModeRequest, CliError> {
    let agent_type = stored::<AgentType>("AGENT_TYPE", "agent type", &a.agent_type)?;
    let mode = validate::mode_name("MODE", &a.mode)?;
    let prompt_fragment = match (&a.fragment, &a.fragment_file) {
        (Some(f), _) => Some(f.clone()),
        (None, Some(path)) => Some(read_text(path)?),
        (None, None) => None,
    };
    let toolset = a.tools.as_ref().map(|t| v1::ModeToolset {
        tools: t
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect(),
    });
    let preset = match (&a.preset, a.clear_preset) {
        (Some(p), _) => Some(non_empty("--preset", p)?),
        (None, true) => Some(String::new()),
        (None, false) => None,
    };
    let budget_override = a
        .budget
        .as_deref()
        .map(|text| {
            let o = genesis_core::BudgetOverride::from_json_str(text)
                .map_err(|e| CliError::usage(format!("--budget: {e}")))?;
            if o == genesis_core::BudgetOverride::default() {
                return Err(CliError::usage(
                    "--budget: sets no axis; use --clear-budget to remove the override",
                ));
            }
            let i64_of = |v: Option<u64>, key: &str| {
                v.map(|n| {
                    i64::try_from(n)
                        .map_err(|_| CliError::usage(format!("--budget: {key} is too large")))
                })
                .transpose()
            };
            let i32_of = |v: Option<u64>, key: &str| {
                v.map(|n| {
                    i32::try_from(n)
                        .map_err(|_| CliError::usage(format!("--budget: {key} is too large")))
                })
                .transpose()
            };
            Ok(v1::BudgetEnvelope {
                max_tokens: i64_of(o.max_tokens, "maxTokens")?,
                max_tool_calls: i32_of(o.max_tool_calls, "maxToolCalls")?,
                max_wall_ms: i64_of(
                    o.max_wall_seconds.and_then(|s| s.checked_mul(1000)),
                    "maxWallSeconds",
                )?,
                max_cost_usd: o.max_dollars,
                max_turns: i32_of(o.max_turns, "maxTurns")?,
                max_output_tokens_per_turn: i64_of(
                    o.max_output_tokens_per_turn,
                    "maxOutputTokensPerTurn",
                )?,
            })
        })
        .transpose()?;
    if prompt_fragment.is_none()
        && toolset.is_none()
        && preset.is_none()
        && budget_override.is_none()
        && !a.clear_budget
    {
        return Err(CliError::usage(
            "agent mode edit: nothing to change (give --fragment, --fragment-file, --tools, \
             --preset, --clear-preset, --budget or --clear-budget)",
        ));
    }
    Ok(v1::EditModeRequest {
        tenant_id,
        agent_type,
        mode,
        prompt_fragment,
        toolset,
        preset,
        budget_override,
        clear_budget_override: a.clear_budget,
    })
}

fn read_text(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Reads and checks a preset file for `llm preset upsert`: the Preset fields
/// as JSON (proto field names; `overlays_json` may be a JSON object), with a
/// primary couple naming model and provider, and a UUID id when replacing.
pub fn preset_from_file(path: &Path, tenant_id: &str) -> Result<v1::Preset, CliError> {
    let source = path.display().to_string();
    let mut preset: v1::Preset = crate::json::from_json(&source, &read_text(path)?)?;
    if !preset.id.is_empty() {
        preset.id = uuid(&format!("{source}: id"), &preset.id)?;
    }
    non_empty(&format!("{source}: name"), &preset.name)?;
    let primary = preset
        .primary
        .as_ref()
        .ok_or_else(|| CliError::usage(format!("{source}: primary: required")))?;
    non_empty(&format!("{source}: primary.model"), &primary.model)?;
    non_empty(&format!("{source}: primary.provider"), &primary.provider)?;
    for (i, couple) in preset.fallback_chain.iter().enumerate() {
        non_empty(
            &format!("{source}: fallback_chain[{i}].model"),
            &couple.model,
        )?;
        non_empty(
            &format!("{source}: fallback_chain[{i}].provider"),
            &couple.provider,
        )?;
    }
    if !preset.tenant_id.is_empty() && preset.tenant_id != tenant_id {
        return Err(CliError::usage(format!(
            "{source}: tenant_id {:?} differs from --tenant {tenant_id}",
            preset.tenant_id
        )));
    }
    preset.tenant_id = tenant_id.to_owned();
    Ok(preset)
}

async fn llm(ctx: &mut Ctx<'_>, cmd: &LlmCmd) -> Result<(), CliError> {
    match cmd {
        LlmCmd::Sites => {
            let req = v1::ListSitesRequest {
                tenant_id: ctx.tenant("llm sites")?,
            };
            let r = call!(ctx, llm.list_sites(req));
            ctx.out.list(&r, "sites", SITE_COLS)
        }
        LlmCmd::Presets => {
            let req = v1::ListPresetsRequest {
                tenant_id: ctx.tenant("llm presets")?,
            };
            let r = call!(ctx, llm.list_presets(req));
            ctx.out.list(&r, "presets", PRESET_COLS)
        }
        LlmCmd::Preset(PresetCmd::Upsert { file }) => {
            let tenant_id = ctx.tenant("llm preset upsert")?;
            let preset = preset_from_file(file, &tenant_id)?;
            let req = v1::UpsertPresetRequest {
                tenant_id,
                preset: Some(preset),
            };
            let p = call!(ctx, llm.upsert_preset(req));
            ctx.out.object(&p)
        }
        LlmCmd::Attach { site, preset } => {
            let req = v1::AttachPresetRequest {
                tenant_id: ctx.tenant("llm attach")?,
                site_id: validate::site_id("SITE", site)?,
                preset_id: uuid("PRESET", preset)?,
            };
            let s = call!(ctx, llm.attach_preset(req));
            ctx.out.object(&s)
        }
        LlmCmd::Detach { site } => {
            let req = v1::DetachPresetRequest {
                tenant_id: ctx.tenant("llm detach")?,
                site_id: validate::site_id("SITE", site)?,
            };
            let s = call!(ctx, llm.detach_preset(req));
            ctx.out.object(&s)
        }
        LlmCmd::Pricing { action: None } => {
            let r = call!(ctx, llm.list_pricing(v1::ListPricingRequest {}));
            ctx.out.list(&r, "prices", PRICING_COLS)
        }
        LlmCmd::Pricing {
            action:
                Some(PricingCmd::Set {
                    model,
                    input_per_mtok,
                    output_per_mtok,
                    cache_read,
                    cache_write,
                }),
        } => {
            let req = v1::SetPricingRequest {
                model: non_empty("MODEL", model)?,
                input_per_mtok: validate::price("IN", *input_per_mtok)?,
                output_per_mtok: validate::price("OUT", *output_per_mtok)?,
                cache_read_per_mtok: cache_read
                    .map(|v| validate::price("--cache-read", v))
                    .transpose()?,
                cache_write_per_mtok: cache_write
                    .map(|v| validate::price("--cache-write", v))
                    .transpose()?,
            };
            let p = call!(ctx, llm.set_pricing(req));
            ctx.out.object(&p)
        }
    }
}

async fn config(ctx: &mut Ctx<'_>, cmd: &ConfigCmd) -> Result<(), CliError> {
    match cmd {
        ConfigCmd::Get { key, global } => {
            let req = v1::GetConfigRequest {
                tenant_id: if *global { None } else { ctx.opt_tenant()? },
                key: non_empty("KEY", key)?,
            };
            let e = call!(ctx, config.get_config(req));
            ctx.out.object(&e)
        }
        ConfigCmd::Set { key, value, scope } => {
            let scope = choice("--scope", scope, &["tenant", "global"])?;
            let tenant_id = if scope == "tenant" {
                Some(ctx.tenant("config set --scope tenant")?)
            } else {
                None
            };
            let req = v1::SetConfigRequest {
                tenant_id,
                key: non_empty("KEY", key)?,
                value: value.clone(),
                scope,
            };
            let e = call!(ctx, config.set_config(req));
            ctx.out.object(&e)
        }
        ConfigCmd::List { global } => {
            let req = v1::ListConfigRequest {
                tenant_id: if *global { None } else { ctx.opt_tenant()? },
            };
            let r = call!(ctx, config.list_config(req));
            ctx.out.list(&r, "entries", CONFIG_COLS)
        }
    }
}

async fn mission(ctx: &mut Ctx<'_>, cmd: &MissionCmd) -> Result<(), CliError> {
    match cmd {
        MissionCmd::List { status, instance } => {
            let req = v1::ListMissionsRequest {
                tenant_id: ctx.tenant("mission list")?,
                status: status
                    .as_deref()
                    .map(|s| stored::<MissionStatus>("--status", "mission status", s))
                    .transpose()?,
                instance_id: opt_uuid("--instance", instance.as_deref())?,
            };
            let r = call!(ctx, missions.list_missions(req));
            ctx.out.list(&r, "missions", MISSION_COLS)
        }
        MissionCmd::Get { id } => {
            let req = v1::GetMissionRequest {
                tenant_id: ctx.tenant("mission get")?,
                mission_id: uuid("ID", id)?,
            };
            let m = call!(ctx, missions.get_mission(req));
            ctx.out.object(&m)
        }
        MissionCmd::Status { id, status } => {
            let req = v1::SetMissionStatusRequest {
                tenant_id: ctx.tenant("mission status")?,
                mission_id: uuid("ID", id)?,
                status: stored::<MissionStatus>("STATUS", "mission status", status)?,
            };
            let m = call!(ctx, missions.set_mission_status(req));
            ctx.out.object(&m)
        }
    }
}

async fn constitution(ctx: &mut Ctx<'_>, cmd: &ConstitutionCmd) -> Result<(), CliError> {
    match cmd {
        ConstitutionCmd::List => {
            let req = v1::ListRulesRequest {
                tenant_id: ctx.tenant("constitution list")?,
            };
            let r = call!(ctx, constitution.list_rules(req));
            ctx.out.list(&r, "rules", RULE_COLS)
        }
        ConstitutionCmd::Add {
            name,
            pattern,
            description,
        } => {
            let pattern = non_empty("--pattern", pattern)?;
            if let Err(e) = regex::RegexBuilder::new(&pattern)
                .case_insensitive(true)
                .build()
            {
                return Err(CliError::usage(format!(
                    "--pattern: not a valid regular expression: {e}"
                )));
            }
            let req = v1::AddRuleRequest {
                tenant_id: ctx.tenant("constitution add")?,
                name: non_empty("NAME", name)?,
                description: description.clone(),
                pattern,
            };
            let rule = call!(ctx, constitution.add_rule(req));
            ctx.out.object(&rule)
        }
        ConstitutionCmd::Remove { id } => {
            let req = v1::RemoveRuleRequest {
                tenant_id: ctx.tenant("constitution remove")?,
                rule_id: uuid("ID", id)?,
            };
            let r = call!(ctx, constitution.remove_rule(req));
            ctx.out.object(&r)
        }
    }
}

/// A file `knowledge ingest-source` sends: its path relative to the
/// directory (with `/` separators) and its UTF-8 content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative path, `/`-separated.
    pub path: String,
    /// The file's text.
    pub content: String,
}

/// Collects the UTF-8 source files under `dir`, sorted by path. Hidden
/// entries, `target/` and `node_modules/`, empty files, files over
/// `max_bytes` and files that are not UTF-8 are skipped (and counted).
pub fn collect_sources(dir: &Path, max_bytes: u64) -> Result<(Vec<SourceFile>, usize), CliError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| CliError::Io { path, source }
    };
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "DIR: {} is not a directory",
            dir.display()
        )));
    }
    let mut files = Vec::new();
    let mut skipped = 0;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).map_err(io(&current))? {
            let entry = entry.map_err(io(&current))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            let path = entry.path();
            let kind = entry.file_type().map_err(io(&path))?;
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            if !kind.is_file() {
                continue;
            }
            let size = entry.metadata().map_err(io(&path))?.len();
            if size == 0 || size > max_bytes {
                skipped += 1;
                continue;
            }
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            let Ok(content) = String::from_utf8(bytes) else {
                skipped += 1;
                continue;
            };
            let relative = path.strip_prefix(dir).unwrap_or(&path);
            let rel: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            files.push(SourceFile {
                path: rel.join("/"),
                content,
            });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, skipped))
}

async fn knowledge(ctx: &mut Ctx<'_>, cmd: &KnowledgeCmd) -> Result<(), CliError> {
    match cmd {
        KnowledgeCmd::Ingest {
            file,
            title,
            source,
            project,
        } => {
            let tenant_id = ctx.tenant("knowledge ingest")?;
            let body = read_text(file)?;
            non_empty(&format!("{}: content", file.display()), &body)?;
            let title = match title {
                Some(t) => non_empty("--title", t)?,
                None => file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| file.display().to_string()),
            };
            let req = v1::IngestDocumentRequest {
                tenant_id,
                title,
                body,
                source: source.clone().unwrap_or_else(|| file.display().to_string()),
                project_id: project.clone(),
            };
            let d = call!(ctx, knowledge.ingest_document(req));
            ctx.out.object(&d)
        }
        KnowledgeCmd::IngestSource {
            dir,
            language,
            project,
            max_bytes,
        } => {
            let tenant_id = ctx.tenant("knowledge ingest-source")?;
            let (files, skipped) = collect_sources(dir, *max_bytes)?;
            if files.is_empty() {
                return Err(CliError::usage(format!(
                    "DIR: no UTF-8 files to ingest under {} ({skipped} skipped)",
                    dir.display()
                )));
            }
            let mut documents = Vec::with_capacity(files.len());
            for file in files {
                let req = v1::IngestSourceFileRequest {
                    tenant_id: tenant_id.clone(),
                    path: file.path,
                    content: file.content,
                    language: language.clone(),
                    project_id: project.clone(),
                };
                documents.push(call!(ctx, knowledge.ingest_source_file(req)));
            }
            let r = v1::ListDocumentsResponse { documents };
            ctx.out.list(&r, "documents", DOCUMENT_COLS)
        }
        KnowledgeCmd::List {
            kind,
            project,
            limit,
        } => {
            let req = v1::ListDocumentsRequest {
                tenant_id: ctx.tenant("knowledge list")?,
                kind: kind
                    .as_deref()
                    .map(|k| choice("--kind", k, &["document", "source_file"]))
                    .transpose()?,
                project_id: project.clone(),
                limit: limit.unwrap_or(0),
            };
            let r = call!(ctx, knowledge.list_documents(req));
            ctx.out.list(&r, "documents", DOCUMENT_COLS)
        }
    }
}

fn capabilities(values: &[String]) -> Result<Vec<String>, CliError> {
    values
        .iter()
        .map(|c| non_empty("--capability", c))
        .collect()
}

async fn registry(ctx: &mut Ctx<'_>, cmd: &RegistryCmd) -> Result<(), CliError> {
    match cmd {
        RegistryCmd::Register {
            name,
            role,
            capabilities: caps,
            metadata,
        } => {
            let req = v1::RegisterRequest {
                tenant_id: ctx.tenant("registry register")?,
                name: non_empty("NAME", name)?,
                role: choice("--role", role, REGISTRY_ROLES)?,
                capabilities: capabilities(caps)?,
                metadata_json: json_text("--metadata", metadata.as_deref())?,
            };
            let a = call!(ctx, registry.register(req));
            ctx.out.object(&a)
        }
        RegistryCmd::Heartbeat { id } => {
            let req = v1::HeartbeatRequest {
                tenant_id: ctx.tenant("registry heartbeat")?,
                agent_id: uuid("ID", id)?,
            };
            let a = call!(ctx, registry.heartbeat(req));
            ctx.out.object(&a)
        }
        RegistryCmd::List { role, capability } => {
            let req = v1::RegistryListRequest {
                tenant_id: ctx.tenant("registry list")?,
                role: role
                    .as_deref()
                    .map(|r| choice("--role", r, REGISTRY_ROLES))
                    .transpose()?,
                capability: capability
                    .as_deref()
                    .map(|c| non_empty("--capability", c))
                    .transpose()?,
            };
            let r = call!(ctx, registry.list(req));
            ctx.out.list(&r, "agents", REGISTRY_COLS)
        }
        RegistryCmd::Unregister { id } => {
            let req = v1::UnregisterRequest {
                tenant_id: ctx.tenant("registry unregister")?,
                agent_id: uuid("ID", id)?,
            };
            let r = call!(ctx, registry.unregister(req));
            ctx.out.object(&r)
        }
        RegistryCmd::Route {
            capabilities: caps,
            role,
        } => {
            let req = v1::RouteRequest {
                tenant_id: ctx.tenant("registry route")?,
                capabilities: capabilities(caps)?,
                role: role
                    .as_deref()
                    .map(|r| choice("--role", r, REGISTRY_ROLES))
                    .transpose()?,
            };
            let r = call!(ctx, registry.route(req));
            ctx.out.object(&r)
        }
    }
}

/// The couple of a coder or task: a preset id (UUID) or the explicit triple.
fn couple(args: &CoupleArgs) -> Result<(Option<String>, String, String, String), CliError> {
    Ok((
        opt_uuid("--preset", args.preset.as_deref())?,
        args.model.clone(),
        args.provider.clone(),
        args.backend.clone(),
    ))
}

async fn coder(ctx: &mut Ctx<'_>, cmd: &CoderCmd) -> Result<(), CliError> {
    match cmd {
        CoderCmd::Spawn {
            name,
            task,
            couple: c,
            windows,
        } => {
            let (preset_id, model, provider, backend) = couple(c)?;
            let SpawnTaskArgs {
                task,
                title,
                instructions,
                repository,
                branch,
            } = task.as_ref();
            let task_id = opt_uuid("--task", task.as_deref())?;
            if task_id.is_none() {
                non_empty("--title", title.as_deref().unwrap_or_default())?;
                non_empty(
                    "--instructions",
                    instructions.as_deref().unwrap_or_default(),
                )?;
            }
            let req = v1::SpawnCoderRequest {
                tenant_id: ctx.tenant("coder spawn")?,
                name: non_empty("NAME", name)?,
                preset_id,
                model,
                provider,
                backend,
                enable_windows_mcp: *windows,
                task_id,
                title: title.clone(),
                instructions: instructions.clone(),
                repository: repository.clone(),
                branch: branch.clone(),
            };
            let coder = call!(ctx, coders.spawn_coder(req));
            ctx.out.object(&coder)
        }
        CoderCmd::List => {
            let req = v1::ListCodersRequest {
                tenant_id: ctx.tenant("coder list")?,
            };
            let r = call!(ctx, coders.list_coders(req));
            ctx.out.list(&r, "coders", CODER_COLS)
        }
        CoderCmd::Stop { id } => {
            let req = v1::StopCoderRequest {
                tenant_id: ctx.tenant("coder stop")?,
                // A coder's id is its Job's name (`coder-…`), not a UUID.
                coder_id: non_empty("ID", id)?,
            };
            let coder = call!(ctx, coders.stop_coder(req));
            ctx.out.object(&coder)
        }
        CoderCmd::Logs { task, tail } => {
            let req = v1::CoderLogsRequest {
                tenant_id: ctx.tenant("coder logs")?,
                task_id: uuid("TASK", task)?,
                tail_lines: *tail,
            };
            let logs = call!(ctx, coders.coder_logs(req));
            if ctx.out.format() == crate::cli::Output::Json {
                return ctx.out.object(&logs);
            }
            // For people: the text alone, as the coder wrote it (terminal
            // control sequences stripped, as everywhere); an empty log
            // prints nothing rather than a blank line.
            if logs.text.is_empty() {
                return Ok(());
            }
            ctx.out.text(&logs.text)
        }
    }
}

async fn task(ctx: &mut Ctx<'_>, cmd: &TaskCmd) -> Result<(), CliError> {
    match cmd {
        TaskCmd::Create {
            title,
            instructions,
            coder,
            couple: c,
            repository,
            branch,
        } => {
            let (preset_id, model, provider, backend) = couple(c)?;
            let req = v1::CreateTaskRequest {
                tenant_id: ctx.tenant("task create")?,
                title: non_empty("--title", title)?,
                instructions: non_empty("--instructions", instructions)?,
                coder_id: opt_uuid("--coder", coder.as_deref())?,
                preset_id,
                model,
                provider,
                backend,
                repository: repository.clone(),
                branch: branch.clone(),
            };
            let t = call!(ctx, tasks.create_task(req));
            ctx.out.object(&t)
        }
        TaskCmd::Get { id } => {
            let req = v1::GetTaskRequest {
                tenant_id: ctx.tenant("task get")?,
                task_id: uuid("ID", id)?,
            };
            let t = call!(ctx, tasks.get_task(req));
            ctx.out.object(&t)
        }
        TaskCmd::List { status, coder } => {
            let req = v1::ListTasksRequest {
                tenant_id: ctx.tenant("task list")?,
                status: status
                    .as_deref()
                    .map(|s| {
                        choice(
                            "--status",
                            s,
                            &["pending", "running", "completed", "failed"],
                        )
                    })
                    .transpose()?,
                coder_id: coder
                    .as_deref()
                    .map(|c| non_empty("--coder", c))
                    .transpose()?,
            };
            let r = call!(ctx, tasks.list_tasks(req));
            ctx.out.list(&r, "tasks", TASK_COLS)
        }
        TaskCmd::Chain { id } => {
            let req = v1::TaskPresetChainRequest {
                tenant_id: ctx.tenant("task chain")?,
                task_id: uuid("ID", id)?,
            };
            let chain = call!(ctx, tasks.task_preset_chain(req));
            ctx.out.object(&chain)
        }
        TaskCmd::Artifact { id, artifact, save } => {
            let req = v1::GetArtifactRequest {
                tenant_id: ctx.tenant("task artifact")?,
                task_id: uuid("ID", id)?,
                artifact_id: uuid("ARTIFACT", artifact)?,
            };
            let a = call!(ctx, tasks.get_artifact(req));
            if let Some(path) = save {
                // Exactly as attached: a patch must apply byte for byte.
                return std::fs::write(path, a.content.as_bytes()).map_err(|source| CliError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
            if ctx.out.format() == crate::cli::Output::Json {
                return ctx.out.object(&a);
            }
            ctx.out.text(&a.content)
        }
        TaskCmd::Progress {
            id,
            message,
            percent,
        } => {
            if let Some(p) = percent
                && !(0..=100).contains(p)
            {
                return Err(CliError::usage("--percent: must be between 0 and 100"));
            }
            let req = v1::ReportProgressRequest {
                tenant_id: ctx.tenant("task progress")?,
                task_id: uuid("ID", id)?,
                message: message.clone(),
                percent: *percent,
            };
            let t = call!(ctx, tasks.report_progress(req));
            ctx.out.object(&t)
        }
        TaskCmd::Attach {
            id,
            kind,
            name,
            file,
        } => {
            let name = match name {
                Some(n) => non_empty("--name", n)?,
                None => file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .ok_or_else(|| CliError::usage("--name: required when --file has no name"))?,
            };
            let req = v1::AttachArtifactRequest {
                tenant_id: ctx.tenant("task attach")?,
                task_id: uuid("ID", id)?,
                kind: choice("--kind", kind, &["patch", "log", "summary"])?,
                name,
                content: read_text(file)?,
            };
            let a = call!(ctx, tasks.attach_artifact(req));
            ctx.out.object(&a)
        }
        TaskCmd::Complete {
            id,
            status,
            summary,
            result,
        } => {
            let req = v1::CompleteTaskRequest {
                tenant_id: ctx.tenant("task complete")?,
                task_id: uuid("ID", id)?,
                status: choice("--status", status, &["completed", "failed"])?,
                result_summary: summary.clone(),
                result_json: json_text("--result", result.as_deref())?,
            };
            let t = call!(ctx, tasks.complete_task(req));
            ctx.out.object(&t)
        }
    }
}

async fn token(ctx: &mut Ctx<'_>, cmd: &TokenCmd) -> Result<(), CliError> {
    match cmd {
        TokenCmd::Create {
            scope,
            label,
            ttl,
            pod_tenants,
        } => {
            let ttl_seconds = ttl
                .map(|d| {
                    i64::try_from(d.as_secs())
                        .ok()
                        .filter(|s| *s > 0)
                        .ok_or_else(|| CliError::usage("--ttl: must be at least one second"))
                })
                .transpose()?;
            let req = v1::CreateTokenRequest {
                scope: stored::<TokenScope>("--scope", "token scope", scope)?,
                tenant_id: ctx.opt_tenant()?,
                label: label.clone(),
                ttl_seconds,
                pod_tenant_ids: pod_tenants
                    .iter()
                    .map(|t| uuid("--pod-tenant", t))
                    .collect::<Result<_, _>>()?,
            };
            let r = call!(ctx, tokens.create_token(req));
            ctx.out.object(&r)
        }
        TokenCmd::Revoke { id } => {
            let req = v1::RevokeTokenRequest {
                token_id: uuid("ID", id)?,
                tenant_id: ctx.opt_tenant()?,
            };
            let t = call!(ctx, tokens.revoke_token(req));
            ctx.out.object(&t)
        }
        TokenCmd::List => {
            let req = v1::ListTokensRequest {
                tenant_id: ctx.opt_tenant()?,
            };
            let r = call!(ctx, tokens.list_tokens(req));
            ctx.out.list(&r, "tokens", TOKEN_COLS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_admin_rpc_has_a_command_and_every_command_exists() {
        use clap::CommandFactory as _;
        let admin: Vec<(String, String)> = genesis_proto::convert::all_rpcs()
            .into_iter()
            .filter(|(s, _)| s != genesis_proto::auth::AGENT_POD_SERVICE)
            .filter(|(s, m)| !CODER_ONLY_RPCS.contains(&(s.as_str(), m.as_str())))
            .collect();
        for (service, method) in &admin {
            assert!(
                RPC_COMMANDS
                    .iter()
                    .any(|(s, m, _)| s == service && m == method),
                "{service}/{method} has no genesisctl command"
            );
        }
        assert_eq!(
            RPC_COMMANDS.len(),
            admin.len(),
            "stale entries in RPC_COMMANDS"
        );
        let root = crate::cli::Cli::command();
        for (_, _, path) in RPC_COMMANDS {
            let mut cmd = &root;
            for word in path.split(' ') {
                cmd = cmd
                    .find_subcommand(word)
                    .unwrap_or_else(|| panic!("no subcommand {word:?} in {path:?}"));
            }
        }
    }

    #[test]
    fn resolutions_expand_shorthands_and_keep_answers() {
        assert_eq!(resolution("approve").expect("ok"), "approved");
        assert_eq!(resolution("approved").expect("ok"), "approved");
        assert_eq!(resolution("reject").expect("ok"), "rejected");
        assert_eq!(
            resolution("ship it on Friday").expect("ok"),
            "ship it on Friday"
        );
        let err = resolution(" ").expect_err("empty refused");
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
    }

    #[test]
    fn preset_files_are_checked_and_bound_to_the_tenant() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tenant = "0195b5a0-0000-7000-8000-000000000001";
        let good = dir.path().join("good.json");
        std::fs::write(
            &good,
            r#"{"name":"p","primary":{"model":"claude-opus-4-8","provider":"anthropic"}}"#,
        )
        .expect("write");
        let preset = preset_from_file(&good, tenant).expect("valid preset");
        assert_eq!(preset.tenant_id, tenant);
        assert!(preset.id.is_empty());

        let no_primary = dir.path().join("np.json");
        std::fs::write(&no_primary, r#"{"name":"p"}"#).expect("write");
        let err = preset_from_file(&no_primary, tenant).expect_err("primary required");
        assert!(err.to_string().ends_with("primary: required"), "{err}");

        let bad_id = dir.path().join("id.json");
        std::fs::write(
            &bad_id,
            r#"{"id":"p1","name":"p","primary":{"model":"m","provider":"x"}}"#,
        )
        .expect("write");
        let err = preset_from_file(&bad_id, tenant).expect_err("id must be a UUID");
        assert!(err.to_string().contains("id: not a UUID"), "{err}");

        let missing = dir.path().join("absent.json");
        let err = preset_from_file(&missing, tenant).expect_err("missing file");
        assert!(matches!(err, CliError::Io { .. }), "{err:?}");
    }

    #[test]
    fn source_collection_skips_hidden_build_binary_and_empty_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/nested")).expect("mkdir");
        std::fs::create_dir_all(root.join("target/debug")).expect("mkdir");
        std::fs::create_dir_all(root.join(".git")).expect("mkdir");
        std::fs::write(root.join("src/lib.rs"), "pub fn a() {}").expect("write");
        std::fs::write(root.join("src/nested/b.rs"), "fn b() {}").expect("write");
        std::fs::write(root.join("README.md"), "# hi").expect("write");
        std::fs::write(root.join("target/debug/x.rs"), "no").expect("write");
        std::fs::write(root.join(".git/config"), "no").expect("write");
        std::fs::write(root.join("blob.bin"), [0xff_u8, 0xfe, 0x00]).expect("write");
        std::fs::write(root.join("empty.rs"), "").expect("write");
        std::fs::write(root.join("big.rs"), "x".repeat(100)).expect("write");
        let (files, skipped) = collect_sources(root, 50).expect("collects");
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["README.md", "src/lib.rs", "src/nested/b.rs"]);
        assert_eq!(files[1].content, "pub fn a() {}");
        assert_eq!(skipped, 3);
        let err = collect_sources(&root.join("README.md"), 50).expect_err("not a dir");
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
    }
}
