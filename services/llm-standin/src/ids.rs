//! Identifiers shaped like the real ones (`msg_01…`, `toolu_01…`,
//! `chatcmpl-…`, `call_…`, `req_…`, `fp_…`): a counter mixed with a
//! per-process seed, so they do not repeat within a process nor across two
//! runs of the binary that serve turns of the same conversation (the
//! Messages API refuses a reused `tool_use` id).

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// The start time and process id, mixed: different for every run.
static SEED: LazyLock<u64> = LazyLock::new(|| {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    splitmix64((nanos as u64) ^ (u64::from(std::process::id()) << 32))
});

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `prefix` followed by `len` characters drawn from `alphabet`.
fn make(prefix: &str, len: usize, alphabet: &[u8]) -> String {
    let mut state = NEXT.fetch_add(1, Ordering::Relaxed) ^ *SEED;
    let mut out = String::with_capacity(prefix.len() + len);
    out.push_str(prefix);
    let mut word = 0u64;
    let mut left = 0u32;
    for _ in 0..len {
        if left == 0 {
            state = splitmix64(state);
            word = state;
            left = 8;
        }
        let idx = (word & 0xFF) as usize % alphabet.len();
        out.push(char::from(alphabet[idx]));
        word >>= 8;
        left -= 1;
    }
    out
}

/// An Anthropic message id, `msg_01` + 22 base62 characters.
pub(crate) fn anthropic_message() -> String {
    make("msg_01", 22, BASE62)
}

/// An Anthropic tool-use id, `toolu_01` + 22 base62 characters.
pub(crate) fn anthropic_tool_use() -> String {
    make("toolu_01", 22, BASE62)
}

/// An Anthropic request id, `req_011C` + 20 base62 characters.
pub(crate) fn anthropic_request() -> String {
    make("req_011C", 20, BASE62)
}

/// An OpenAI completion id, `chatcmpl-` + 29 base62 characters.
pub(crate) fn openai_completion() -> String {
    make("chatcmpl-", 29, BASE62)
}

/// An OpenAI tool-call id, `call_` + 24 base62 characters.
pub(crate) fn openai_tool_call() -> String {
    make("call_", 24, BASE62)
}

/// An OpenAI request id, `req_` + 32 hex characters.
pub(crate) fn openai_request() -> String {
    make("req_", 32, b"0123456789abcdef")
}

/// An OpenAI system fingerprint, `fp_` + 10 hex characters.
pub(crate) fn openai_fingerprint() -> String {
    make("fp_", 10, b"0123456789abcdef")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_real_prefixes_and_do_not_repeat() {
        let a = anthropic_tool_use();
        let b = anthropic_tool_use();
        assert!(a.starts_with("toolu_01") && a.len() == 30, "{a}");
        assert_ne!(a, b);
        assert!(openai_completion().starts_with("chatcmpl-"));
        assert!(openai_tool_call().starts_with("call_"));
        assert!(anthropic_message().starts_with("msg_01"));
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        );
    }
}
