//! genesis-llm-standin: strict stand-ins of the two provider APIs the agents
//! talk to — Anthropic Messages (`POST /v1/messages`) and OpenAI Chat
//! Completions (`POST /v1/chat/completions`) — on one loopback HTTP server.
//!
//! **A test and demo tool only.** It never talks to a real provider, holds
//! only the throwaway keys it is given, and must never be deployed in front
//! of real traffic.
//!
//! It is strict on purpose: a request the real API would refuse is refused
//! with the real status and error shape (missing or wrong key, missing
//! `anthropic-version`, `tool_use` not answered by a leading `tool_result`,
//! OpenAI `tool_calls` not answered by `tool` messages, non-string function
//! arguments, bad tool names or schemas, `max_tokens` on reasoning models,
//! more than four `cache_control` blocks, …), so a provider that passes it
//! speaks the wire format. Valid requests are answered from a queue of
//! scripted [`Answer`]s per endpoint — replies shaped as the API references
//! show, or faults (429 with `Retry-After`, 500, 503, 529, a dropped
//! connection) — and, once a queue is empty, with a default answer (a
//! `phase_complete` call when that tool is offered, else a short text).
//! Every request is recorded, credentials removed, for tests to assert on.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use genesis_llm_standin::{Reply, StandIn, ToolCallSpec};
//! let standin = StandIn::builder()
//!     .key("sk-test")
//!     .anthropic(Reply::tool_call("phase_complete", serde_json::json!({"summary": "done"})))
//!     .start()
//!     .await?;
//! let base_url = standin.base_url(); // give it to the provider under test
//! # let _ = (base_url, ToolCallSpec::new("x", serde_json::json!({})));
//! assert_eq!(standin.request_count(), 0);
//! # Ok(()) }
//! ```

mod answer;
mod anthropic;
mod ids;
mod openai;
mod server;

pub use answer::{Answer, Reply, Script, ToolCallSpec, WireUsage};
pub use server::{Endpoint, Recorded, StandIn, StandInBuilder};
