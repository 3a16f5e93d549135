//! System-prompt composition (spec §3.5): the invariant base, then the active
//! mode's fragment, then the resolved preset's prompt overlay, each after a
//! blank line. Owns that ordering rule and the overlay's provenance hash, so
//! the supervisor (which renders `base + fragment` for the bundle) and the
//! pod (which appends the overlay) can never disagree. Must never inspect or
//! rewrite the text it joins — redaction is [`crate::redact`]'s job.

use sha2::{Digest, Sha256};

/// `base + "\n\n" + fragment + "\n\n" + overlay`, omitting each empty (or
/// whitespace-only) part together with its separator. The base stays first
/// and mode-invariant; the overlay, being per preset, comes last so that
/// rebinding a preset never reorders the mode's guidance.
pub fn compose_system_prompt(base: &str, fragment: &str, overlay: &str) -> String {
    let mut out = String::with_capacity(base.len() + fragment.len() + overlay.len() + 4);
    for part in [base, fragment, overlay] {
        if part.trim().is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(part);
    }
    out
}

/// The SHA-256 (lowercase hex) of an applied overlay, recorded on the call
/// snapshot as provenance. A hash rather than the text, because an overlay
/// may itself hold the secrets the Prompt Engineer exists to remove; `None`
/// when no overlay was applied.
pub fn overlay_sha256(overlay: &str) -> Option<String> {
    if overlay.trim().is_empty() {
        return None;
    }
    Some(hex::encode(Sha256::digest(overlay.as_bytes())))
}

/// Whether `text` has the shape [`overlay_sha256`] produces (64 lowercase
/// hex digits): the check the supervisor runs on what a pod reports.
pub fn is_overlay_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_joined_base_fragment_overlay_by_blank_lines() {
        assert_eq!(compose_system_prompt("B", "F", "O"), "B\n\nF\n\nO");
    }

    #[test]
    fn empty_parts_are_omitted_with_their_separator() {
        assert_eq!(compose_system_prompt("B", "F", ""), "B\n\nF");
        assert_eq!(compose_system_prompt("B", "", "O"), "B\n\nO");
        assert_eq!(compose_system_prompt("B", "  ", "\n"), "B");
        assert_eq!(compose_system_prompt("", "", "O"), "O");
        assert_eq!(compose_system_prompt("", "", ""), "");
    }

    #[test]
    fn a_prompt_already_carrying_the_fragment_takes_the_overlay_last() {
        let with_fragment = compose_system_prompt("B", "F", "");
        assert_eq!(
            compose_system_prompt(&with_fragment, "", "O"),
            compose_system_prompt("B", "F", "O")
        );
    }

    #[test]
    fn the_overlay_hash_is_sha256_hex_and_absent_for_no_overlay() {
        let h = overlay_sha256("abc").unwrap();
        assert_eq!(
            h,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_overlay_sha256(&h));
        assert_eq!(overlay_sha256(""), None);
        assert_eq!(overlay_sha256("  \n"), None);
        assert!(!is_overlay_sha256(&h.to_uppercase()));
        assert!(!is_overlay_sha256("abc"));
        assert!(!is_overlay_sha256(&format!("{}g", &h[..63])));
    }
}
