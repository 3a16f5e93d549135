//! Where results go: stdout, as tables or as one JSON object per line,
//! flushed after every write so `watch` lines appear as they happen and a
//! pipe sees whole lines.
//!
//! This module formats nothing itself (see [`crate::table`] and
//! [`crate::json`]) and never writes to stderr: errors are the caller's.
//! It never writes a terminal control sequence: every text is stripped of
//! them and every JSON line has its control characters escaped
//! ([`crate::terminal`]).

use std::io::Write;

use serde_json::Value;

use crate::cli::Output;
use crate::error::CliError;
use crate::json::{Wire, to_json};
use crate::table::{self, Column};

/// Prints responses in the chosen format.
pub struct Printer<'a> {
    format: Output,
    out: &'a mut dyn Write,
}

impl<'a> Printer<'a> {
    /// A printer writing to `out`.
    pub fn new(format: Output, out: &'a mut dyn Write) -> Self {
        Printer { format, out }
    }

    /// The chosen format.
    pub fn format(&self) -> Output {
        self.format
    }

    /// A list response: in table mode the repeated field `field` as a table
    /// with `columns`; in JSON mode the whole response on one line.
    pub fn list<M: Wire>(
        &mut self,
        response: &M,
        field: &str,
        columns: &[Column],
    ) -> Result<(), CliError> {
        let value = to_json(response)?;
        match self.format {
            Output::Json => self.json(&value),
            Output::Table => {
                let items = value
                    .get(field)
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                self.text(&table::list(items, columns))
            }
        }
    }

    /// A single-object response: `field  value` lines, or one JSON line.
    pub fn object<M: Wire>(&mut self, response: &M) -> Result<(), CliError> {
        let value = to_json(response)?;
        self.value(&value)
    }

    /// An already-built JSON value, shown as [`Printer::object`] shows one.
    pub fn value(&mut self, value: &Value) -> Result<(), CliError> {
        match self.format {
            Output::Json => self.json(value),
            Output::Table => self.text(&table::object(value)),
        }
    }

    /// One compact JSON line (control characters escaped, never raw:
    /// [`crate::terminal::escape_json_controls`]).
    pub fn json(&mut self, value: &Value) -> Result<(), CliError> {
        let line = value.to_string();
        writeln!(self.out, "{}", crate::terminal::escape_json_controls(&line))?;
        self.out.flush()?;
        Ok(())
    }

    /// Text without terminal control sequences
    /// ([`crate::terminal::strip_controls`]; a trailing newline is added
    /// when missing).
    pub fn text(&mut self, text: &str) -> Result<(), CliError> {
        let text = crate::terminal::strip_controls(text);
        self.out.write_all(text.as_bytes())?;
        if !text.ends_with('\n') {
            self.out.write_all(b"\n")?;
        }
        self.out.flush()?;
        Ok(())
    }
}
