//! `genesisctl`, the operator CLI over genesis-control's admin gRPC API: one
//! subcommand per admin RPC ([`cli`]), local argument checks ([`validate`]),
//! the authenticated connection ([`client`]), tables and JSON output
//! ([`table`], [`json`], [`output`]), the handlers ([`commands`],
//! [`windows`]), a turn's episode trace ([`trace`]) and the live turn view
//! ([`watch`]). Nothing the server sent reaches the terminal with its
//! control sequences ([`terminal`]).
//!
//! Everything the binary does goes through [`run`], so tests drive the same
//! path. This crate is a client only: it must never hold database
//! credentials or reach anything but the control endpoint it is given.

pub mod cli;
pub mod client;
pub mod commands;
pub mod error;
pub mod json;
pub mod output;
pub mod replay;
pub mod table;
pub mod terminal;
pub mod trace;
pub mod validate;
pub mod watch;
pub mod windows;

use std::ffi::OsString;
use std::io::Write;

use clap::Parser as _;

pub use cli::Cli;
pub use error::{CliError, EXIT_FAILURE, EXIT_USAGE};

/// Parses `args` (program name first), runs the command, writes results to
/// `stdout` and the one-line error to `stderr`, and answers the exit code:
/// 0 on success, 2 for usage errors (clap's and ours), 1 for the rest.
pub fn run<I, T>(args: I, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // Help and version go to stdout with 0; real errors are usage (2).
            let text = err.render().to_string();
            if err.use_stderr() {
                let _ = stderr.write_all(text.as_bytes());
                return EXIT_USAGE;
            }
            let _ = stdout.write_all(text.as_bytes());
            return 0;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(stderr, "error: starting the runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let mut ctx = commands::Ctx::new(&cli, output::Printer::new(cli.output, stdout));
        commands::execute(&mut ctx).await
    });
    match result {
        Ok(()) => 0,
        Err(err) => {
            // The message may quote the server, and so a tenant's text.
            let line = format!("error: {err}");
            let _ = writeln!(stderr, "{}", terminal::strip_controls(&line));
            err.exit_code()
        }
    }
}
