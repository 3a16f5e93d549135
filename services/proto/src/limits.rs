//! The message size limits every gRPC server of the fleet applies to each
//! service it serves (tonic sets them per service; there is no server-wide
//! knob). One place, so control and the supervisor cannot drift apart; each
//! server asserts at compile time that its own largest legitimate request
//! fits. Constants only: must never hold a transport or a policy.

/// Largest request message a server decodes, in bytes. Twice the largest
/// legitimate payload a store ceiling admits (a 1 MiB source file for
/// control, a 1 MiB completion for the supervisor) leaves room for the other
/// fields; a bigger body is refused from its 5-byte frame header (tonic
/// answers `OUT_OF_RANGE`) before it is buffered, instead of tonic's
/// unconfigured 4 MiB default.
pub const MAX_REQUEST_BYTES: usize = 2 * 1024 * 1024;

/// Largest response message a server encodes, in bytes: the decoding limit
/// of a default tonic client (genesisctl, the agent pod and the e2e harness
/// configure none), so an oversized answer fails at the server with a status
/// instead of inside the client's decoder.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
