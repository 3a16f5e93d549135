//! `genesis-llm-standin`: the strict Anthropic / OpenAI stand-in as a
//! process, for shell scripts and end-to-end tests. A test and demo tool
//! only — never put it in front of real traffic.
//!
//! ```text
//! genesis-llm-standin --listen 127.0.0.1:0 --key KEY [--key KEY2] [--script FILE]
//! ```
//!
//! The first line on stdout is the bound address (`127.0.0.1:PORT`); the base
//! URL of both APIs is `http://` followed by it. One line per request goes to
//! stderr. It runs until interrupted (SIGINT / SIGTERM).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use genesis_llm_standin::{Script, StandIn};

#[derive(Debug, Parser)]
#[command(
    name = "genesis-llm-standin",
    about = "Strict loopback stand-in of the Anthropic Messages and OpenAI Chat Completions APIs (tests and demos only)"
)]
struct Args {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// An API key to accept (`x-api-key` or `Authorization: Bearer`); repeatable.
    #[arg(long = "key", required = true)]
    keys: Vec<String>,
    /// A JSON script of queued answers: {"anthropic": [...], "openai": [...]}.
    #[arg(long)]
    script: Option<PathBuf>,
    /// Serve only these models (others are HTTP 404); repeatable.
    #[arg(long = "known-model")]
    known_models: Vec<String>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let mut builder = StandIn::builder().listen(args.listen).log_requests(true);
    for key in args.keys {
        builder = builder.key(key);
    }
    if !args.known_models.is_empty() {
        builder = builder.known_models(args.known_models);
    }
    if let Some(path) = &args.script {
        let script = match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| Script::from_json(&text).map_err(|e| e.to_string()))
        {
            Ok(script) => script,
            Err(e) => {
                eprintln!("genesis-llm-standin: cannot load {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        builder = builder.script(script);
    }
    let standin = match builder.start().await {
        Ok(standin) => standin,
        Err(e) => {
            eprintln!("genesis-llm-standin: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{}", standin.addr())
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::from(1);
        }
    }
    wait_for_signal().await;
    eprintln!(
        "genesis-llm-standin: stopping after {} request(s)",
        standin.request_count()
    );
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
