//! The command line of `genesisctl`: global flags and one subcommand per admin
//! RPC, grouped by service (clap derive). Parsing only checks what clap can
//! (flags, counts, number ranges); ids and enumeration names are checked in
//! [`crate::validate`] when the request is built.
//!
//! This module must never perform a call or print: it only describes.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Operator CLI for Genesis Agents: drives genesis-control's admin gRPC API.
#[derive(Debug, Parser)]
#[command(name = "genesisctl", version, about, propagate_version = true)]
pub struct Cli {
    /// The control service's gRPC endpoint: `http://HOST:PORT`, or
    /// `https://HOST:PORT` for TLS (the system roots, plus --ca-file).
    #[arg(
        long,
        global = true,
        env = "GENESIS_ENDPOINT",
        default_value = "http://127.0.0.1:50051"
    )]
    pub endpoint: String,
    /// Extra CA (PEM) trusted for control's certificate when --endpoint is
    /// `https://`, beside the system roots (for a private CA).
    #[arg(long, global = true, env = "GENESIS_CA_FILE", value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// Operator token (`gen_...`), sent as `authorization: Bearer`.
    #[arg(long, global = true, env = "GENESIS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The tenant (UUID) tenant-scoped commands act on.
    #[arg(long, global = true, env = "GENESIS_TENANT")]
    pub tenant: Option<String>,
    /// Output format: aligned tables for people, JSON for scripts.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Deadline of each call and of connecting (e.g. 10s, 500ms, 2m).
    #[arg(long, global = true, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns (lists) or `field  value` lines (single objects).
    Table,
    /// One compact JSON object per line (proto3 JSON mapping, snake_case).
    Json,
}

/// A switch argument: `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Enable.
    On,
    /// Disable.
    Off,
}

impl OnOff {
    /// Whether this is `on`.
    pub fn enabled(self) -> bool {
        self == OnOff::On
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if d.is_zero() {
        Err("must be greater than zero".into())
    } else {
        Ok(d)
    }
}

/// Every command group.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Tenants and their feature flags (TenantService).
    #[command(subcommand)]
    Tenant(TenantCmd),
    /// Standing-agent lifecycle, chat, modes and ledger (AgentService).
    #[command(subcommand)]
    Agent(AgentCmd),
    /// The decision queue (DecisionService).
    #[command(subcommand)]
    Decision(DecisionCmd),
    /// Call-sites, presets and pricing (LlmService).
    #[command(subcommand)]
    Llm(LlmCmd),
    /// DB-first configuration (ConfigService).
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Missions (MissionService).
    #[command(subcommand)]
    Mission(MissionCmd),
    /// Constitution rules (ConstitutionService).
    #[command(subcommand)]
    Constitution(ConstitutionCmd),
    /// The knowledge corpus (KnowledgeService).
    #[command(subcommand)]
    Knowledge(KnowledgeCmd),
    /// The coordination registry (RegistryService).
    #[command(subcommand)]
    Registry(RegistryCmd),
    /// On-demand coders (CoderService).
    #[command(subcommand)]
    Coder(CoderCmd),
    /// Coding tasks (CodingTaskService).
    #[command(subcommand)]
    Task(TaskCmd),
    /// The Windows lane, one verb per RPC (WindowsLaneService).
    #[command(subcommand)]
    Windows(WindowsCmd),
    /// API tokens (TokenService).
    #[command(subcommand)]
    Token(TokenCmd),
    /// Live view of a tenant's turns and chat messages (WatchTurns).
    Watch(WatchArgs),
}

/// `genesisctl tenant ...`
#[derive(Debug, Subcommand)]
pub enum TenantCmd {
    /// Creates a tenant (platform-wide token only).
    Create {
        /// The tenant's name.
        name: String,
        /// Turn the standing-agents feature on at once.
        #[arg(long)]
        standing_agents: bool,
    },
    /// Shows a tenant (default: --tenant).
    Get {
        /// Tenant id; defaults to --tenant.
        id: Option<String>,
    },
    /// Lists the tenants the token may see.
    List,
    /// Turns the standing-agents feature of --tenant on or off.
    StandingAgents {
        /// on or off.
        state: OnOff,
    },
    /// Turns a named feature flag of --tenant on or off (windows-pool and
    /// prompt-redactor need a platform-wide token).
    Feature {
        /// Flag name, e.g. windows-pool.
        name: String,
        /// on or off.
        state: OnOff,
    },
}

/// `genesisctl agent ...`
#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Lists the tenant's agent instances.
    List {
        /// Only this AgentType (Soa, Compliance, ...).
        #[arg(long = "type")]
        agent_type: Option<String>,
        /// Only this status (active, paused, closed).
        #[arg(long)]
        status: Option<String>,
    },
    /// Shows one instance.
    Get {
        /// Instance id.
        id: String,
    },
    /// Starts an instance (paused -> active, seeds AgentInitialized).
    Start {
        /// Instance id.
        id: String,
    },
    /// Stops an instance (active -> paused).
    Stop {
        /// Instance id.
        id: String,
    },
    /// Clears the ledger, drains stale events, seeds a fresh opener.
    Reset {
        /// Instance id.
        id: String,
    },
    /// Ensures and starts the tenant's Compliance instance.
    StartCompliance,
    /// Pauses the tenant's Compliance instance.
    StopCompliance,
    /// Sends an operator message (wakes the agent now).
    Send {
        /// Instance id.
        id: String,
        /// The message.
        body: String,
    },
    /// The chat transcript, newest first.
    Messages {
        /// Instance id.
        id: String,
        /// How many (1..=500; default 50).
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..=500))]
        limit: Option<i32>,
        /// Only messages before this RFC 3339 instant.
        #[arg(long)]
        before: Option<String>,
    },
    /// Mode control.
    #[command(subcommand)]
    Mode(ModeCmd),
    /// The mode catalogue of an agent type.
    Modes {
        /// AgentType (Soa, Compliance, PromptRedactor, ...).
        agent_type: String,
    },
    /// Ledger turns, newest first.
    Ledger {
        /// Instance id.
        id: String,
        /// How many (1..=500; default 50).
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..=500))]
        limit: Option<i32>,
        /// Only turns numbered below this.
        #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
        before: Option<i64>,
    },
    /// One ledger turn's episode: the turn, its budget per axis, its
    /// decision's mapping, then each LLM turn (request messages, answer,
    /// attempts with their cost) and tool call in order. Long texts are cut
    /// in table mode; `-o json` prints the whole trace.
    Trace {
        /// Instance id.
        id: String,
        /// The ledger turn's number (see `agent ledger`).
        #[arg(value_parser = clap::value_parser!(i64).range(1..))]
        turn: i64,
    },
    /// Replays a ledger turn's episode against another preset, as a dry
    /// run: the preset's chain is asked with the turn's recorded inputs,
    /// every tool with an effect is answered "not executed (replay)" and
    /// every read-only one from the journal. Prints the alternative
    /// decision beside the original. Its calls are billed to the tenant's
    /// credit under the call tag Replay, never to the agent's turns.
    Replay {
        /// Instance id.
        id: String,
        /// The ledger turn's number (see `agent ledger`).
        #[arg(value_parser = clap::value_parser!(i64).range(1..))]
        turn: i64,
        /// The preset to replay it against (see `llm preset list`).
        #[arg(long)]
        preset: String,
        /// Print the pending replay and return at once (follow it with
        /// `agent replay-show`).
        #[arg(long)]
        no_wait: bool,
        /// Seconds to wait for the replay to finish before returning it as
        /// it stands.
        #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=3600))]
        max_wait: u64,
    },
    /// Shows one replay (see `agent replay`) beside its original turn.
    ReplayShow {
        /// Replay id.
        replay_id: String,
    },
    /// Raises a Prompt Engineer signal for a call-site.
    RaiseRedactorSignal {
        /// Call-site id, e.g. Agent:Planning.
        call_site: String,
        /// AgentSignalKind (NewCouple, GuidanceUpdated, RegressionDetected, HumanRequest).
        signal_kind: String,
        /// Free-text note carried by the signal.
        #[arg(long, default_value = "")]
        note: String,
    },
}

/// `genesisctl agent mode ...`
#[derive(Debug, Subcommand)]
pub enum ModeCmd {
    /// Switches an instance's mode (source ui, audited).
    Set {
        /// Instance id.
        id: String,
        /// Mode name from the type's catalogue.
        mode: String,
    },
    /// The mode catalogue of an agent type, as this tenant sees it.
    List {
        /// AgentType (Soa, Compliance, PromptRedactor).
        agent_type: String,
    },
    /// One mode of an agent type's catalogue, as this tenant sees it.
    Get {
        /// AgentType (Soa, Compliance, PromptRedactor).
        agent_type: String,
        /// Mode name.
        mode: String,
    },
    /// Edits a mode for this tenant only (audited; other tenants keep theirs).
    Edit(ModeEditArgs),
}

/// `genesisctl agent mode edit`: each option left out keeps its value.
#[derive(Debug, Args)]
pub struct ModeEditArgs {
    /// AgentType (Soa, Compliance, PromptRedactor).
    pub agent_type: String,
    /// Mode name.
    pub mode: String,
    /// New prompt fragment ("" for none).
    #[arg(long, conflicts_with = "fragment_file")]
    pub fragment: Option<String>,
    /// Read the new prompt fragment from this file.
    #[arg(long, value_name = "PATH")]
    pub fragment_file: Option<std::path::PathBuf>,
    /// The whole new toolset, comma-separated ("" for none); each tool must
    /// be in the type's tool superset.
    #[arg(long, value_name = "TOOL,...")]
    pub tools: Option<String>,
    /// Pin one of the tenant's presets (id or name).
    #[arg(long, conflicts_with = "clear_preset")]
    pub preset: Option<String>,
    /// Remove the mode's preset.
    #[arg(long)]
    pub clear_preset: bool,
    /// New budget override as JSON, e.g. '{"maxTokens": 48000, "maxTurns": 24}'
    /// (keys maxTokens, maxOutputTokensPerTurn, maxToolCalls, maxWallSeconds,
    /// maxDollars, maxTurns).
    #[arg(long, value_name = "JSON", conflicts_with = "clear_budget")]
    pub budget: Option<String>,
    /// Remove the mode's budget override.
    #[arg(long)]
    pub clear_budget: bool,
}

/// `genesisctl decision ...`
#[derive(Debug, Subcommand)]
pub enum DecisionCmd {
    /// Lists attention requests, newest first.
    List {
        /// open or resolved.
        #[arg(long)]
        status: Option<String>,
    },
    /// Shows one request.
    Get {
        /// Decision id.
        id: String,
    },
    /// Resolves an open request.
    Respond {
        /// Decision id.
        id: String,
        /// approve (approved), reject (rejected), or the operator's answer.
        #[arg(long)]
        resolution: String,
        /// Notes passed back to the agent.
        #[arg(long, default_value = "")]
        notes: String,
    },
}

/// `genesisctl llm ...`
#[derive(Debug, Subcommand)]
pub enum LlmCmd {
    /// The call-site registry with each site's effective binding.
    Sites,
    /// The tenant's presets.
    Presets,
    /// Preset management.
    #[command(subcommand)]
    Preset(PresetCmd),
    /// Pins a preset to a call-site.
    Attach {
        /// Call-site id, e.g. Agent:Planning.
        site: String,
        /// Preset id.
        preset: String,
    },
    /// Removes a call-site's own binding (it inherits again).
    Detach {
        /// Call-site id.
        site: String,
    },
    /// The pricing table; `pricing set` changes a price.
    Pricing {
        /// Optional action.
        #[command(subcommand)]
        action: Option<PricingCmd>,
    },
}

/// `genesisctl llm preset ...`
#[derive(Debug, Subcommand)]
pub enum PresetCmd {
    /// Creates (no id) or replaces (id set) a preset from a JSON file.
    Upsert {
        /// JSON file with the Preset fields (name, primary, fallback_chain, overlays_json).
        #[arg(long)]
        file: PathBuf,
    },
}

/// `genesisctl llm pricing ...`
#[derive(Debug, Subcommand)]
pub enum PricingCmd {
    /// Sets a model's price (platform-wide token only).
    Set {
        /// Model name.
        model: String,
        /// Input price, dollars per million tokens. Negative numbers are
        /// taken as values (not flags) so `-1` reaches the price check and
        /// its precise refusal instead of a generic unknown-flag error.
        #[arg(value_name = "IN", allow_negative_numbers = true)]
        input_per_mtok: f64,
        /// Output price, dollars per million tokens.
        #[arg(value_name = "OUT", allow_negative_numbers = true)]
        output_per_mtok: f64,
        /// Cache-read price, dollars per million tokens (default: the
        /// row's, or the input price for a new model).
        #[arg(long, value_name = "USD", allow_negative_numbers = true)]
        cache_read: Option<f64>,
        /// Cache-write price, dollars per million tokens (default: the
        /// row's, or 1.25 times the input price for a new model).
        #[arg(long, value_name = "USD", allow_negative_numbers = true)]
        cache_write: Option<f64>,
    },
}

/// `genesisctl config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// The effective value of a key (tenant scope, else global).
    Get {
        /// Config key.
        key: String,
        /// Read the global value only, ignoring --tenant.
        #[arg(long)]
        global: bool,
    },
    /// Writes a value of a known key. A tenant-bound token may only tighten
    /// a key that bounds spend or load (lower a ceiling, raise a floor, turn
    /// a guard on) against the platform's value; a platform-wide token sets
    /// any.
    Set {
        /// Config key.
        key: String,
        /// Value.
        value: String,
        /// tenant (needs --tenant) or global (platform-wide token).
        #[arg(long, default_value = "tenant")]
        scope: String,
    },
    /// The entries of a scope (tenant with --tenant, else global).
    List {
        /// List the global scope even when --tenant is set.
        #[arg(long)]
        global: bool,
    },
}

/// `genesisctl mission ...`
#[derive(Debug, Subcommand)]
pub enum MissionCmd {
    /// Lists missions.
    List {
        /// Only this status.
        #[arg(long)]
        status: Option<String>,
        /// Only missions steered by this instance.
        #[arg(long)]
        instance: Option<String>,
    },
    /// Shows one mission.
    Get {
        /// Mission id.
        id: String,
    },
    /// Sets a mission's status (enqueues MissionStateChanged).
    Status {
        /// Mission id.
        id: String,
        /// proposed, active, blocked, completed or cancelled.
        status: String,
    },
}

/// `genesisctl constitution ...`
#[derive(Debug, Subcommand)]
pub enum ConstitutionCmd {
    /// Lists the tenant's rules.
    List,
    /// Adds a rule.
    Add {
        /// Rule name.
        name: String,
        /// Case-insensitive regular expression; matching content violates the rule.
        #[arg(long)]
        pattern: String,
        /// Why the rule exists (returned to the model).
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Removes a rule.
    Remove {
        /// Rule id.
        id: String,
    },
}

/// `genesisctl knowledge ...`
#[derive(Debug, Subcommand)]
pub enum KnowledgeCmd {
    /// Ingests one document (a UTF-8 text file).
    Ingest {
        /// The file.
        file: PathBuf,
        /// Title; defaults to the file name.
        #[arg(long)]
        title: Option<String>,
        /// Where it came from; defaults to the path given.
        #[arg(long)]
        source: Option<String>,
        /// Project it belongs to.
        #[arg(long, default_value = "")]
        project: String,
    },
    /// Ingests every UTF-8 source file under a directory.
    IngestSource {
        /// The directory (hidden entries, target/ and node_modules/ skipped).
        dir: PathBuf,
        /// Language of every file; empty lets the server guess per path.
        #[arg(long, default_value = "")]
        language: String,
        /// Project the files belong to.
        #[arg(long, default_value = "")]
        project: String,
        /// Larger files are skipped.
        #[arg(long, default_value_t = 1_048_576)]
        max_bytes: u64,
    },
    /// Lists documents.
    List {
        /// document or source_file.
        #[arg(long)]
        kind: Option<String>,
        /// Only this project.
        #[arg(long)]
        project: Option<String>,
        /// How many (1..=500; default 50).
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..=500))]
        limit: Option<i32>,
    },
}

/// `genesisctl registry ...`
#[derive(Debug, Subcommand)]
pub enum RegistryCmd {
    /// Registers a worker agent.
    Register {
        /// Name.
        name: String,
        /// Developer, Reviewer, Coordinator, Monitor or Generic.
        #[arg(long)]
        role: String,
        /// A capability (repeatable).
        #[arg(long = "capability")]
        capabilities: Vec<String>,
        /// Free-form metadata as JSON.
        #[arg(long)]
        metadata: Option<String>,
    },
    /// Extends an entry's expiry.
    Heartbeat {
        /// Registry agent id.
        id: String,
    },
    /// Lists live entries.
    List {
        /// Only this role.
        #[arg(long)]
        role: Option<String>,
        /// Only entries with this capability.
        #[arg(long)]
        capability: Option<String>,
    },
    /// Removes an entry.
    Unregister {
        /// Registry agent id.
        id: String,
    },
    /// The live entry that holds every capability asked for.
    Route {
        /// A required capability (repeatable, at least one).
        #[arg(long = "capability", required = true)]
        capabilities: Vec<String>,
        /// Required role.
        #[arg(long)]
        role: Option<String>,
    },
}

/// The (model, provider, backend) triple or preset a coder or task uses.
#[derive(Debug, Args)]
pub struct CoupleArgs {
    /// Preset id; overrides --model/--provider/--backend.
    #[arg(long)]
    pub preset: Option<String>,
    /// Model.
    #[arg(long, default_value = "")]
    pub model: String,
    /// Provider (anthropic, openai, scripted, ...).
    #[arg(long, default_value = "")]
    pub provider: String,
    /// Backend.
    #[arg(long, default_value = "")]
    pub backend: String,
}

/// The coding task `coder spawn` runs: an existing one, or one it creates.
#[derive(Debug, Args)]
pub struct SpawnTaskArgs {
    /// The coding task to run (its couple is used).
    #[arg(long)]
    pub task: Option<String>,
    /// Title of the task to create (without --task).
    #[arg(long)]
    pub title: Option<String>,
    /// Instructions of the task to create (without --task).
    #[arg(long)]
    pub instructions: Option<String>,
    /// Repository of the task to create.
    #[arg(long)]
    pub repository: Option<String>,
    /// Branch of the task to create.
    #[arg(long)]
    pub branch: Option<String>,
}

/// `genesisctl coder ...`
#[derive(Debug, Subcommand)]
pub enum CoderCmd {
    /// Spawns an on-demand coder running one coding task: --task, or a new
    /// task from --title and --instructions.
    Spawn {
        /// Name.
        name: String,
        /// The task it runs.
        #[command(flatten)]
        task: Box<SpawnTaskArgs>,
        /// The couple to use.
        #[command(flatten)]
        couple: CoupleArgs,
        /// Attach the Windows lane tools (needs the windows-pool feature).
        #[arg(long)]
        windows: bool,
    },
    /// Lists coders.
    List,
    /// Stops a coder.
    Stop {
        /// Coder id.
        id: String,
    },
    /// Prints the log of the coder running a coding task (its Job's newest
    /// pod), as the coder wrote it; --output json adds the pod's name and
    /// whether older or further output was left out.
    Logs {
        /// The coding task's id.
        task: String,
        /// How many trailing lines (1..=10000; default 500).
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..=10_000))]
        tail: Option<i32>,
    },
}

/// `genesisctl task ...`
#[derive(Debug, Subcommand)]
pub enum TaskCmd {
    /// Creates a coding task.
    Create {
        /// Title.
        #[arg(long)]
        title: String,
        /// Instructions.
        #[arg(long)]
        instructions: String,
        /// Coder to run it.
        #[arg(long)]
        coder: Option<String>,
        /// The couple to use.
        #[command(flatten)]
        couple: CoupleArgs,
        /// Repository.
        #[arg(long, default_value = "")]
        repository: String,
        /// Branch.
        #[arg(long, default_value = "")]
        branch: String,
    },
    /// Shows one task.
    Get {
        /// Task id.
        id: String,
    },
    /// Lists tasks.
    List {
        /// pending, running, completed or failed.
        #[arg(long)]
        status: Option<String>,
        /// Only tasks of this coder.
        #[arg(long)]
        coder: Option<String>,
    },
    /// Shows the model chain a task's coder calls: its preset's couples
    /// (or the task's own couple) and the credential names they use.
    Chain {
        /// Task id.
        id: String,
    },
    /// Prints one artifact of a task (ids from `task get`): a patch to
    /// apply, a log or a summary.
    Artifact {
        /// Task id.
        id: String,
        /// Artifact id.
        artifact: String,
        /// Write the content, exactly as attached, to this file (new or
        /// replaced) instead of the terminal, e.g. a patch for `git apply`.
        #[arg(long)]
        save: Option<std::path::PathBuf>,
    },
    /// Reports a task's progress (what its coder does; an operator may too).
    Progress {
        /// Task id.
        id: String,
        /// What is happening.
        #[arg(long, default_value = "")]
        message: String,
        /// 0..=100.
        #[arg(long)]
        percent: Option<i32>,
    },
    /// Attaches a patch, log or summary (a text file) to a task.
    Attach {
        /// Task id.
        id: String,
        /// patch, log or summary.
        #[arg(long)]
        kind: String,
        /// The artifact's name (default: the file's name).
        #[arg(long)]
        name: Option<String>,
        /// The text file to attach.
        #[arg(long)]
        file: std::path::PathBuf,
    },
    /// Settles a task.
    Complete {
        /// Task id.
        id: String,
        /// completed or failed.
        #[arg(long)]
        status: String,
        /// Summary of the result.
        #[arg(long, default_value = "")]
        summary: String,
        /// Result as JSON.
        #[arg(long)]
        result: Option<String>,
    },
}

/// The coder whose Windows session a verb acts in.
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// Coder id holding the session.
    #[arg(long)]
    pub coder: String,
}

/// How Click / Type / WaitFor find their element.
#[derive(Debug, Args, Default)]
pub struct TargetArgs {
    /// A ref=eN from the last snapshot.
    #[arg(long = "ref")]
    pub element_ref: Option<String>,
    /// UI Automation id.
    #[arg(long)]
    pub automation_id: Option<String>,
    /// Element name.
    #[arg(long)]
    pub name: Option<String>,
    /// Control type (Button, Edit, ...).
    #[arg(long)]
    pub control_type: Option<String>,
    /// Screen x (with --y).
    #[arg(long, requires = "y")]
    pub x: Option<i32>,
    /// Screen y (with --x).
    #[arg(long, requires = "x")]
    pub y: Option<i32>,
    /// Restrict the search to this window.
    #[arg(long)]
    pub hwnd: Option<i64>,
}

/// `genesisctl windows ...`
#[derive(Debug, Subcommand)]
pub enum WindowsCmd {
    /// Submits a build script (build shape).
    RunSpec {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// File holding the script.
        #[arg(long)]
        script: PathBuf,
        /// powershell or cmd.
        #[arg(long, default_value = "powershell")]
        shell: String,
        /// Extras as JSON (environment, working directory, timeout).
        #[arg(long)]
        spec: Option<String>,
    },
    /// Polls a RunSpec task.
    TaskStatus {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// The task handle RunSpec answered.
        handle: String,
    },
    /// Starts a program.
    Launch {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// Program.
        program: String,
        /// Its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
        /// Working directory.
        #[arg(long, default_value = "")]
        working_directory: String,
        /// How long to wait for a window (clamped to 55000 by the server).
        #[arg(long)]
        wait_for_window_ms: Option<i64>,
    },
    /// Visible top-level windows.
    Windows {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
    },
    /// Brings a window to the front.
    Focus {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// Window handle.
        hwnd: i64,
    },
    /// Closes a window.
    Close {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// Window handle.
        hwnd: i64,
    },
    /// The UI Automation tree as indented text.
    Snapshot {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// Only this window's subtree.
        #[arg(long)]
        hwnd: Option<i64>,
    },
    /// Clicks an element or a screen point.
    Click {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// Target.
        #[command(flatten)]
        target: TargetArgs,
        /// left, right or middle.
        #[arg(long, default_value = "left")]
        button: String,
        /// Double-click.
        #[arg(long)]
        double: bool,
    },
    /// Types text, or a provisioned secret, into an element.
    Type {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// Target.
        #[command(flatten)]
        target: TargetArgs,
        /// Text to type.
        #[arg(long, conflicts_with = "secret_ref")]
        text: Option<String>,
        /// Bare name of a secret provisioned on the pool.
        #[arg(long)]
        secret_ref: Option<String>,
    },
    /// Sends a key chord (Ctrl+S, Alt+F4, ...).
    Key {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// The chord.
        keys: String,
        /// Window to send it to.
        #[arg(long)]
        hwnd: Option<i64>,
    },
    /// Waits for an element or a window title to reach a condition.
    WaitFor {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// Target element.
        #[command(flatten)]
        target: TargetArgs,
        /// Or a window with this title.
        #[arg(long)]
        window_title: Option<String>,
        /// exists, enabled or gone.
        #[arg(long, default_value = "exists")]
        condition: String,
        /// How long to wait (clamped to 600000 by the server).
        #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(i64).range(1..))]
        timeout_ms: i64,
    },
    /// Raw mouse / keyboard input.
    Computer {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// move, click, double_click, right_click, drag, scroll, type or key.
        action: String,
        /// Screen x.
        #[arg(long)]
        x: Option<i32>,
        /// Screen y.
        #[arg(long)]
        y: Option<i32>,
        /// Extras as JSON (drag end point, scroll delta, text, keys).
        #[arg(long)]
        args: Option<String>,
    },
    /// Saves a screenshot (primary screen, or one window) as PNG.
    Screenshot {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
        /// Crop to this window.
        #[arg(long)]
        hwnd: Option<i64>,
        /// Where to write the PNG.
        #[arg(long)]
        out: PathBuf,
    },
    /// Hands the machine back to the pool.
    Release {
        /// Session.
        #[command(flatten)]
        session: SessionArgs,
    },
}

/// `genesisctl token ...`
#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// Mints a token (for --tenant, or platform-wide without it).
    Create {
        /// operator or agent-pod.
        #[arg(long, default_value = "operator")]
        scope: String,
        /// Label (shown as resolved_by on decisions).
        #[arg(long, default_value = "")]
        label: String,
        /// Lifetime (e.g. 30d); default none.
        #[arg(long, value_parser = parse_duration)]
        ttl: Option<Duration>,
        /// Scope agent-pod only: a tenant the token may serve (repeat the
        /// flag or separate ids with commas; platform-wide token only).
        /// Unset: every tenant (a shared pool's token).
        #[arg(long = "pod-tenant", value_name = "TENANT", value_delimiter = ',')]
        pod_tenants: Vec<String>,
    },
    /// Revokes a token.
    Revoke {
        /// Token id.
        id: String,
    },
    /// Token metadata (--tenant's, else platform-wide).
    List,
}

/// `genesisctl watch`
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Only this instance.
    #[arg(long)]
    pub instance: Option<String>,
    /// Exit after this many turns.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Exit after the first turn with this decision kind.
    #[arg(long)]
    pub until_decision: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("genesisctl").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_work_after_the_subcommand() {
        let cli = parse(&[
            "agent",
            "list",
            "--tenant",
            "t1",
            "--output",
            "json",
            "--timeout",
            "3s",
            "--endpoint",
            "http://h:1",
            "--token",
            "gen_x",
        ])
        .expect("parses");
        assert_eq!(cli.tenant.as_deref(), Some("t1"));
        assert_eq!(cli.output, Output::Json);
        assert_eq!(cli.timeout, Duration::from_secs(3));
        assert_eq!(cli.endpoint, "http://h:1");
        assert_eq!(cli.token.as_deref(), Some("gen_x"));
        assert!(matches!(cli.command, Command::Agent(AgentCmd::List { .. })));
    }

    #[test]
    fn defaults_apply_without_flags() {
        // The env fallbacks are covered by the binary tests; here none is set
        // for these names in the test process unless the developer set them.
        if std::env::var_os("GENESIS_ENDPOINT").is_some() {
            return;
        }
        let cli = parse(&["tenant", "list"]).expect("parses");
        assert_eq!(cli.endpoint, "http://127.0.0.1:50051");
        assert_eq!(cli.output, Output::Table);
        assert_eq!(cli.timeout, Duration::from_secs(10));
    }

    #[test]
    fn nested_switches_parse() {
        let cli = parse(&["tenant", "feature", "windows-pool", "on"]).expect("parses");
        match cli.command {
            Command::Tenant(TenantCmd::Feature { name, state }) => {
                assert_eq!(name, "windows-pool");
                assert!(state.enabled());
            }
            other => panic!("unexpected {other:?}"),
        }
        let err = parse(&["tenant", "standing-agents", "maybe"]).expect_err("on|off only");
        assert_eq!(err.kind(), ErrorKind::InvalidValue);
    }

    #[test]
    fn pricing_lists_without_an_action_and_sets_with_one() {
        let cli = parse(&["llm", "pricing"]).expect("parses");
        assert!(matches!(
            cli.command,
            Command::Llm(LlmCmd::Pricing { action: None })
        ));
        let cli = parse(&["llm", "pricing", "set", "claude-opus-4-8", "15", "75"]).expect("parses");
        match cli.command {
            Command::Llm(LlmCmd::Pricing {
                action:
                    Some(PricingCmd::Set {
                        model,
                        input_per_mtok,
                        output_per_mtok,
                        cache_read,
                        cache_write,
                    }),
            }) => {
                assert_eq!(model, "claude-opus-4-8");
                assert_eq!((input_per_mtok, output_per_mtok), (15.0, 75.0));
                assert_eq!((cache_read, cache_write), (None, None));
            }
            other => panic!("unexpected {other:?}"),
        }
        let cli = parse(&[
            "llm",
            "pricing",
            "set",
            "claude-sonnet-4-5",
            "3",
            "15",
            "--cache-read",
            "0.3",
            "--cache-write",
            "3.75",
        ])
        .expect("parses");
        match cli.command {
            Command::Llm(LlmCmd::Pricing {
                action:
                    Some(PricingCmd::Set {
                        cache_read,
                        cache_write,
                        ..
                    }),
            }) => assert_eq!((cache_read, cache_write), (Some(0.3), Some(3.75))),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn negative_prices_parse_as_values_for_the_price_check() {
        let cli = parse(&["llm", "pricing", "set", "m", "-1", "-0.5"]).expect("parses");
        match cli.command {
            Command::Llm(LlmCmd::Pricing {
                action:
                    Some(PricingCmd::Set {
                        input_per_mtok,
                        output_per_mtok,
                        ..
                    }),
            }) => assert_eq!((input_per_mtok, output_per_mtok), (-1.0, -0.5)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn decision_respond_requires_a_resolution() {
        let err = parse(&["decision", "respond", "d1"]).expect_err("resolution required");
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
        let cli = parse(&[
            "decision",
            "respond",
            "d1",
            "--resolution",
            "approve",
            "--notes",
            "ok",
        ])
        .expect("parses");
        assert!(matches!(
            cli.command,
            Command::Decision(DecisionCmd::Respond { ref resolution, ref notes, .. })
                if resolution == "approve" && notes == "ok"
        ));
    }

    #[test]
    fn limits_and_counts_are_range_checked() {
        let err = parse(&["agent", "ledger", "x", "--limit", "501"]).expect_err("over 500");
        assert_eq!(err.kind(), ErrorKind::ValueValidation);
        let err = parse(&["watch", "--count", "0"]).expect_err("zero turns");
        assert_eq!(err.kind(), ErrorKind::ValueValidation);
        let err = parse(&["tenant", "list", "--timeout", "0s"]).expect_err("zero timeout");
        assert_eq!(err.kind(), ErrorKind::ValueValidation);
        let cli =
            parse(&["watch", "--count", "3", "--until-decision", "Escalated"]).expect("parses");
        match cli.command {
            Command::Watch(w) => {
                assert_eq!(w.count, Some(3));
                assert_eq!(w.until_decision.as_deref(), Some("Escalated"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn windows_type_takes_text_or_secret_but_not_both() {
        let err = parse(&[
            "windows",
            "type",
            "--coder",
            "c",
            "--ref",
            "e1",
            "--text",
            "a",
            "--secret-ref",
            "pw",
        ])
        .expect_err("both refused");
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
        let cli = parse(&[
            "windows",
            "launch",
            "--coder",
            "c",
            "notepad.exe",
            "-n",
            "x.txt",
        ])
        .expect("parses");
        match cli.command {
            Command::Windows(WindowsCmd::Launch { program, args, .. }) => {
                assert_eq!(program, "notepad.exe");
                assert_eq!(args, ["-n", "x.txt"]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn coder_logs_takes_a_task_and_a_bounded_tail() {
        let cli = parse(&["coder", "logs", "t1", "--tail", "20"]).expect("parses");
        match cli.command {
            Command::Coder(CoderCmd::Logs { task, tail }) => {
                assert_eq!((task.as_str(), tail), ("t1", Some(20)));
            }
            other => panic!("unexpected {other:?}"),
        }
        let cli = parse(&["coder", "logs", "t1"]).expect("parses");
        assert!(matches!(
            cli.command,
            Command::Coder(CoderCmd::Logs { tail: None, .. })
        ));
        for bad in ["0", "-1", "10001", "many"] {
            let err = parse(&["coder", "logs", "t1", "--tail", bad]).expect_err(bad);
            assert!(
                matches!(
                    err.kind(),
                    ErrorKind::ValueValidation | ErrorKind::UnknownArgument
                ),
                "{bad}: {:?}",
                err.kind()
            );
            assert_eq!(err.exit_code(), 2);
        }
        let err = parse(&["coder", "logs"]).expect_err("task required");
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn unknown_subcommands_are_usage_errors() {
        let err = parse(&["agent", "explode"]).expect_err("unknown");
        assert_eq!(err.kind(), ErrorKind::InvalidSubcommand);
        assert_eq!(err.exit_code(), 2);
    }
}
