//! Deterministic secret and personal-data detection for prompt overlays (the
//! Prompt Engineer's Redact body, spec §2.1 / §3.9): API keys and tokens,
//! bearer tokens, long high-entropy secrets, email addresses, phone numbers,
//! Luhn-valid card numbers and checksum-valid IBANs. Each finding is
//! replaced by a typed placeholder `[REDACTED:<kind>]`.
//!
//! Owns the detectors and the replacement. Must never return, log or
//! summarise a raw finding outside [`Redaction::text`]'s replacement: the
//! summary ([`Redaction::findings`]) carries kinds and counts only, because
//! it is what an LLM and an operator decision get to see.

use std::sync::LazyLock;

use regex::Regex;

use crate::error::CoreError;

/// What a finding is. The placeholder spells it in snake case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    /// A provider API key or access token with a known prefix.
    ApiKey,
    /// An `Authorization: Bearer …` style token.
    BearerToken,
    /// A long high-entropy string with no known prefix.
    Secret,
    /// An email address.
    Email,
    /// A Luhn-valid payment card number.
    CreditCard,
    /// A checksum-valid IBAN.
    Iban,
    /// A phone number.
    Phone,
}

impl FindingKind {
    /// The snake-case spelling used in placeholders and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::ApiKey => "api_key",
            FindingKind::BearerToken => "bearer_token",
            FindingKind::Secret => "secret",
            FindingKind::Email => "email",
            FindingKind::CreditCard => "credit_card",
            FindingKind::Iban => "iban",
            FindingKind::Phone => "phone",
        }
    }

    /// The placeholder a finding of this kind is replaced with.
    pub fn placeholder(self) -> String {
        format!("[REDACTED:{}]", self.as_str())
    }
}

/// A kind with how many times it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindingCount {
    pub kind: FindingKind,
    pub count: usize,
}

/// The redacted text and the findings summary (kinds and counts only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    /// The input with every finding replaced by its placeholder.
    pub text: String,
    /// Per kind, in [`FindingKind`] order; empty when nothing was found.
    pub findings: Vec<FindingCount>,
}

impl Redaction {
    /// Whether anything was found.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

#[allow(clippy::expect_used)] // constant patterns, checked by the tests
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("constant pattern")
}

static API_KEY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abposr]-[A-Za-z0-9\-]{10,}|AIza[0-9A-Za-z_\-]{35})",
    )
});
static BEARER: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bbearer\s+[A-Za-z0-9_\-\.=~+/]{16,}"));
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}\b",
    )
});
static IBAN: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b[A-Z]{2}[0-9]{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b"));
static CARD: LazyLock<Regex> = LazyLock::new(|| re(r"\b(?:[0-9][ \-]?){12,18}[0-9]\b"));
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?:\+[0-9]{1,3}[ \-.]?)?(?:\([0-9]{2,4}\)[ \-.]?)?[0-9]{2,4}(?:[ \-.][0-9]{2,4}){1,4}\b|\+[0-9]{8,15}\b",
    )
});
static TOKEN: LazyLock<Regex> = LazyLock::new(|| re(r"[A-Za-z0-9_\-+/]{32,}={0,2}"));

fn luhn_ok(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(*d);
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

fn iban_ok(candidate: &str) -> bool {
    let compact: String = candidate.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut rem: u32 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'A'..='Z' => c as u32 - 'A' as u32 + 10,
            _ => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// Shannon entropy in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in s.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let n = s.chars().count() as f64;
    counts
        .values()
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

fn high_entropy_secret(s: &str) -> bool {
    let classes = [
        s.bytes().any(|b| b.is_ascii_lowercase()),
        s.bytes().any(|b| b.is_ascii_uppercase()),
        s.bytes().any(|b| b.is_ascii_digit()),
    ];
    classes.iter().filter(|c| **c).count() >= 2 && entropy(s) >= 4.0
}

/// Replace every match of `re` accepted by `accept` with `kind`'s
/// placeholder, counting the replacements.
fn replace(
    text: &str,
    re: &Regex,
    kind: FindingKind,
    accept: impl Fn(&str) -> bool,
    counts: &mut Vec<FindingCount>,
) -> String {
    let mut n = 0;
    let out = re
        .replace_all(text, |caps: &regex::Captures<'_>| {
            let m = &caps[0];
            if accept(m) {
                n += 1;
                kind.placeholder()
            } else {
                m.to_owned()
            }
        })
        .into_owned();
    if n > 0 {
        counts.push(FindingCount { kind, count: n });
    }
    out
}

/// Mask only credentials in `text`: provider keys and tokens with a known
/// prefix, and bearer tokens. What an episode journal keeps of a
/// conversation: personal data the model was shown stays as it was (a
/// resumed episode must read what the first one read), but no credential is
/// ever stored, whatever put it in a prompt or a tool result.
pub fn redact_credentials(text: &str) -> Redaction {
    let mut counts = Vec::new();
    let t = replace(text, &API_KEY, FindingKind::ApiKey, |_| true, &mut counts);
    let t = replace(&t, &BEARER, FindingKind::BearerToken, |_| true, &mut counts);
    Redaction {
        text: t,
        findings: counts,
    }
}

/// Find and replace every secret and personal datum in `text`. The most
/// specific detectors run first (known key prefixes, bearer tokens, emails,
/// IBANs, card numbers), so a later, broader detector never sees their
/// values; placeholders themselves are never matched again.
pub fn redact(text: &str) -> Redaction {
    let mut counts = Vec::new();
    let t = replace(text, &API_KEY, FindingKind::ApiKey, |_| true, &mut counts);
    let t = replace(&t, &BEARER, FindingKind::BearerToken, |_| true, &mut counts);
    let t = replace(&t, &EMAIL, FindingKind::Email, |_| true, &mut counts);
    let t = replace(&t, &IBAN, FindingKind::Iban, iban_ok, &mut counts);
    let t = replace(
        &t,
        &CARD,
        FindingKind::CreditCard,
        |m| {
            let digits: Vec<u8> = m
                .bytes()
                .filter(u8::is_ascii_digit)
                .map(|b| b - b'0')
                .collect();
            (13..=19).contains(&digits.len()) && luhn_ok(&digits)
        },
        &mut counts,
    );
    let t = replace(
        &t,
        &PHONE,
        FindingKind::Phone,
        |m| {
            let digits = m.bytes().filter(u8::is_ascii_digit).count();
            // Dates (2024-01-15), versions and times do not reach 8 digits
            // with separators of a phone shape; require 8–15 digits.
            (8..=15).contains(&digits) && !looks_like_date(m)
        },
        &mut counts,
    );
    let t = replace(
        &t,
        &TOKEN,
        FindingKind::Secret,
        high_entropy_secret,
        &mut counts,
    );
    counts.sort_by_key(|c| c.kind);
    Redaction {
        text: t,
        findings: counts,
    }
}

fn looks_like_date(m: &str) -> bool {
    let parts: Vec<&str> = m.split(['-', '.', ' ']).collect();
    parts.len() == 3 && parts[0].len() == 4 && parts[1].len() <= 2 && parts[2].len() <= 2
}

/// The largest overlay a redaction proposal may carry (bytes).
pub const MAX_PROPOSED_OVERLAY_BYTES: usize = 64 * 1024;

/// The summary line of findings (`api_key×1, email×2`): kinds and counts,
/// never a value, for tool results, decision bodies and logs.
pub fn findings_summary(findings: &[FindingCount]) -> String {
    summary_line(findings.iter().map(|f| (f.kind.as_str(), f.count)))
}

/// [`findings_summary`] over `(kind, count)` pairs, for findings that
/// travelled as text (the bundle's wire form).
pub fn summary_line<'a>(findings: impl IntoIterator<Item = (&'a str, usize)>) -> String {
    let parts: Vec<String> = findings
        .into_iter()
        .map(|(kind, count)| format!("{kind}×{count}"))
        .collect();
    if parts.is_empty() {
        "nothing found".to_owned()
    } else {
        parts.join(", ")
    }
}

/// A finding count as stored in a proposal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredFinding {
    pub kind: String,
    pub count: usize,
}

/// The Prompt Engineer's proposal, as the `metadata` of a `redaction`
/// attention request (spec §3.9): which site and preset, the SHA-256 of the
/// overlay it was drafted against (so an approval can refuse a stale
/// proposal), the redacted overlay and the findings summary. Never carries
/// the raw overlay or a raw finding. Shared by the supervisor (which writes
/// it) and control (which applies it on approval).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RedactionProposal {
    /// Always `redactor`.
    pub source: String,
    /// The redactor instance that proposed it.
    pub redactor_instance_id: String,
    /// The roster key (the open-items roster and its index read
    /// `soaInstanceId`): the same instance id, so the redactor sees its own
    /// open proposal and does not raise it twice.
    pub soa_instance_id: String,
    /// The call-site the redactor is bound to.
    pub call_site_id: String,
    /// The preset whose overlay is to be replaced.
    pub preset_id: String,
    /// SHA-256 (hex) of the overlay the proposal was drafted against.
    pub base_overlay_sha256: String,
    /// The overlay that replaces it on approval.
    pub redacted_overlay: String,
    /// What the detectors found in the base overlay.
    pub findings: Vec<StoredFinding>,
}

/// `RedactionProposal::source`.
pub const REDACTION_SOURCE: &str = "redactor";

impl RedactionProposal {
    /// Read a proposal back from a request's metadata and check it can be
    /// applied: the right source, a well-formed base hash, a bounded
    /// overlay that itself holds nothing the detectors find.
    pub fn from_metadata(metadata: &serde_json::Value) -> Result<Self, CoreError> {
        let p: Self =
            serde_json::from_value(metadata.clone()).map_err(|e| CoreError::InvalidArgument {
                field: "metadata".into(),
                reason: format!("not a redaction proposal: {e}"),
            })?;
        p.check()?;
        Ok(p)
    }

    /// The checks [`RedactionProposal::from_metadata`] applies.
    pub fn check(&self) -> Result<(), CoreError> {
        let invalid = |field: &str, reason: String| CoreError::InvalidArgument {
            field: field.into(),
            reason,
        };
        if self.source != REDACTION_SOURCE {
            return Err(invalid(
                "metadata.source",
                format!("expected {REDACTION_SOURCE:?}, got {:?}", self.source),
            ));
        }
        if !crate::prompt::is_overlay_sha256(&self.base_overlay_sha256) {
            return Err(invalid(
                "metadata.baseOverlaySha256",
                "not a SHA-256 hex digest".into(),
            ));
        }
        if self.redacted_overlay.len() > MAX_PROPOSED_OVERLAY_BYTES {
            return Err(invalid(
                "metadata.redactedOverlay",
                format!(
                    "{} bytes exceeds the {MAX_PROPOSED_OVERLAY_BYTES}-byte limit",
                    self.redacted_overlay.len()
                ),
            ));
        }
        let left = redact(&self.redacted_overlay);
        if !left.is_clean() {
            return Err(invalid(
                "metadata.redactedOverlay",
                format!(
                    "still holds what the detectors find: {}",
                    findings_summary(&left.findings)
                ),
            ));
        }
        Ok(())
    }
}

/// The stored form of a findings summary.
pub fn stored_findings(findings: &[FindingCount]) -> Vec<StoredFinding> {
    findings
        .iter()
        .map(|f| StoredFinding {
            kind: f.kind.as_str().to_owned(),
            count: f.count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(FindingKind, usize)> {
        redact(text)
            .findings
            .iter()
            .map(|f| (f.kind, f.count))
            .collect()
    }

    #[test]
    fn provider_keys_and_tokens_are_api_keys() {
        for key in [
            "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv",
            "sk-proj-abcdefghijklmnop1234",
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "xoxb-123456789012-abcdefghij",
        ] {
            let r = redact(&format!("use {key} here"));
            assert_eq!(r.text, "use [REDACTED:api_key] here", "{key}");
            assert_eq!(kinds(key), [(FindingKind::ApiKey, 1)], "{key}");
        }
    }

    #[test]
    fn bearer_tokens_are_redacted_with_their_scheme() {
        let r = redact("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig");
        assert_eq!(r.text, "Authorization: [REDACTED:bearer_token]");
        // The word alone, or a short value, is prose.
        assert!(redact("The bearer of this note").is_clean());
    }

    #[test]
    fn emails_are_redacted_and_at_signs_in_prose_are_not() {
        let r = redact("Write to jane.doe+ops@example.co.uk today.");
        assert_eq!(r.text, "Write to [REDACTED:email] today.");
        assert!(redact("meet @ noon; tag @channel").is_clean());
    }

    #[test]
    fn card_numbers_must_pass_luhn() {
        let r = redact("card 4111 1111 1111 1111 exp");
        assert_eq!(r.text, "card [REDACTED:credit_card] exp");
        assert_eq!(kinds("4111-1111-1111-1111"), [(FindingKind::CreditCard, 1)]);
        // One digit off fails Luhn and is not a card.
        let off = redact("order 4111 1111 1111 1112");
        assert!(!off.text.contains("credit_card"), "{}", off.text);
    }

    #[test]
    fn ibans_must_pass_their_checksum() {
        let r = redact("IBAN GB82 WEST 1234 5698 7654 32 please");
        assert_eq!(r.text, "IBAN [REDACTED:iban] please");
        assert_eq!(kinds("DE89370400440532013000"), [(FindingKind::Iban, 1)]);
        // A wrong check digit is not an IBAN.
        assert!(!redact("GB83 WEST 1234 5698 7654 32").text.contains("iban"));
    }

    #[test]
    fn phone_numbers_are_redacted_and_dates_and_versions_are_not() {
        assert_eq!(
            redact("call +44 20 7946 0958").text,
            "call [REDACTED:phone]"
        );
        assert_eq!(
            redact("or (555) 123-4567 now").text,
            "or [REDACTED:phone] now"
        );
        for prose in [
            "released 2024-01-15",
            "version 1.2.3",
            "at 10:30",
            "top 10 of 200",
        ] {
            assert!(redact(prose).is_clean(), "{prose}");
        }
    }

    #[test]
    fn long_high_entropy_strings_are_secrets_and_plain_words_are_not() {
        let r = redact("token=Zx9Qw3Er7Ty1Ui5Op2As8Df4Gh6Jk0LmNb");
        assert_eq!(r.text, "token=[REDACTED:secret]");
        for prose in [
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "internationalizationlocalizationprocess",
            "Answer tersely and cite the runbook section for every step.",
        ] {
            assert!(redact(prose).is_clean(), "{prose}");
        }
    }

    #[test]
    fn the_summary_counts_per_kind_and_never_holds_a_value() {
        let text = "a@b.io c@d.io sk-abcdefghijklmnopqrstuvwx";
        let r = redact(text);
        assert_eq!(
            r.findings,
            [
                FindingCount {
                    kind: FindingKind::ApiKey,
                    count: 1
                },
                FindingCount {
                    kind: FindingKind::Email,
                    count: 2
                },
            ]
        );
        assert!(!r.text.contains("a@b.io") && !r.text.contains("sk-abc"));
        // Redacting the redacted text finds nothing more.
        assert!(redact(&r.text).is_clean());
    }

    #[test]
    fn clean_text_is_returned_unchanged() {
        let text = "You are terse. Prefer bullet lists.\n\nNever guess.";
        let r = redact(text);
        assert!(r.is_clean());
        assert_eq!(r.text, text);
    }

    fn proposal(overlay: &str) -> serde_json::Value {
        serde_json::json!({
            "source": "redactor",
            "redactorInstanceId": "i", "soaInstanceId": "i",
            "callSiteId": "Agent:Default", "presetId": "p",
            "baseOverlaySha256": crate::prompt::overlay_sha256("x").unwrap_or_default(),
            "redactedOverlay": overlay,
            "findings": [{"kind": "api_key", "count": 1}],
        })
    }

    #[test]
    fn a_clean_proposal_reads_back_and_a_dirty_or_foreign_one_is_refused() {
        let p = RedactionProposal::from_metadata(&proposal("Use key [REDACTED:api_key]."))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.call_site_id, "Agent:Default");
        assert_eq!(p.findings[0].kind, "api_key");

        let dirty =
            RedactionProposal::from_metadata(&proposal("Use key sk-ant-abcdefghijklmnopqrstuvwx."))
                .unwrap_err()
                .to_string();
        assert!(dirty.contains("api_key×1"), "{dirty}");
        assert!(
            !dirty.contains("sk-ant"),
            "the error must not echo the secret: {dirty}"
        );

        let mut soa = proposal("fine");
        soa["source"] = "soa".into();
        assert!(RedactionProposal::from_metadata(&soa).is_err());
        let mut bad_hash = proposal("fine");
        bad_hash["baseOverlaySha256"] = "abc".into();
        assert!(RedactionProposal::from_metadata(&bad_hash).is_err());
        let huge = "a ".repeat(MAX_PROPOSED_OVERLAY_BYTES);
        assert!(RedactionProposal::from_metadata(&proposal(&huge)).is_err());
        assert!(RedactionProposal::from_metadata(&serde_json::json!({"source": "soa"})).is_err());
    }

    #[test]
    fn the_findings_summary_names_kinds_and_counts_only() {
        let r = redact("mail a@b.example and c@d.example, key sk-proj-abcdefghijklmnopqrstu");
        assert_eq!(findings_summary(&r.findings), "api_key×1, email×2");
        assert_eq!(findings_summary(&[]), "nothing found");
        let stored = stored_findings(&r.findings);
        assert_eq!(stored.len(), 2);
        assert_eq!(
            stored[1],
            StoredFinding {
                kind: "email".into(),
                count: 2
            }
        );
    }
}
