//! What an LLM call costs: which `llm_pricing` row prices a model a provider
//! served, and the dollars of one attempt from its normalised usage.
//!
//! Owns the one rule of model-name matching (exact name, else the longest
//! priced name the served one extends by a date or version suffix) and the
//! one cost formula, so the supervisor's pricing, control's preset checks
//! and the benchmark's per-tick figures can never disagree. Must never read
//! a table or a clock: callers pass the candidate rows in.
//!
//! Usage arrives normalised (see `genesis_llm::Usage`): four disjoint counts,
//! each billed at exactly one price, so no token is ever priced twice and
//! no provider's accounting leaks into this formula.

use serde::{Deserialize, Serialize};

/// Dollars per million tokens for one model, as `llm_pricing` stores them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// Plain (uncached) prompt tokens.
    pub input_usd_per_mtok: f64,
    /// Completion tokens, reasoning included.
    pub output_usd_per_mtok: f64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read_usd_per_mtok: f64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_usd_per_mtok: f64,
}

/// A configured fallback price (dollars per million tokens): a finite
/// number above zero, so an unpriced model still draws the credit down.
/// The one parser of the `GENESIS_UNPRICED_*` settings of every service
/// that prices calls.
pub fn parse_fallback_price(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "{text:?} is not a price: expected dollars per million tokens, a finite number above 0"
        )),
    }
}

impl ModelPrice {
    /// The price of a call that spent nothing (the offline scripted
    /// provider): zero on every axis, recorded as `free`, never as unpriced.
    pub const FREE: ModelPrice = ModelPrice {
        input_usd_per_mtok: 0.0,
        output_usd_per_mtok: 0.0,
        cache_read_usd_per_mtok: 0.0,
        cache_write_usd_per_mtok: 0.0,
    };

    /// The fallback price of a model with no row: the platform's configured
    /// input and output prices, caches at the input price (a cache read is
    /// never cheaper than nothing, and a write is billed as input at least).
    pub fn fallback(input_usd_per_mtok: f64, output_usd_per_mtok: f64) -> ModelPrice {
        ModelPrice {
            input_usd_per_mtok,
            output_usd_per_mtok,
            cache_read_usd_per_mtok: input_usd_per_mtok,
            cache_write_usd_per_mtok: input_usd_per_mtok,
        }
    }

    /// The dollars of one attempt's usage.
    pub fn cost_usd(&self, usage: &TokenUsage) -> f64 {
        let per_mtok = |n: u64, price: f64| n as f64 / 1_000_000.0 * price;
        per_mtok(usage.input_tokens, self.input_usd_per_mtok)
            + per_mtok(usage.cache_read_tokens, self.cache_read_usd_per_mtok)
            + per_mtok(usage.cache_write_tokens, self.cache_write_usd_per_mtok)
            + per_mtok(usage.output_tokens, self.output_usd_per_mtok)
    }

    /// The most one turn can cost before it is made: every prompt token at
    /// the dearest prompt price (a cache write costs more than plain input)
    /// and the whole output cap at the output price. What a turn reserves
    /// against the credit window.
    pub fn worst_case_usd(&self, prompt_tokens: u64, max_output_tokens: u64) -> f64 {
        let dearest_prompt = self
            .input_usd_per_mtok
            .max(self.cache_write_usd_per_mtok)
            .max(self.cache_read_usd_per_mtok);
        prompt_tokens as f64 / 1_000_000.0 * dearest_prompt
            + max_output_tokens as f64 / 1_000_000.0 * self.output_usd_per_mtok
    }
}

/// One attempt's tokens, disjoint as `genesis_llm::Usage` carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

/// How an attempt was priced, as `llm_call_attempts.pricing_source` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PricingSource {
    /// A row named exactly as the model.
    Exact,
    /// The longest priced name the model extends by a date or version suffix.
    Prefix,
    /// No row: the platform's fallback price.
    Fallback,
    /// A provider that spends nothing (scripted).
    Free,
}

impl PricingSource {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PricingSource::Exact => "exact",
            PricingSource::Prefix => "prefix",
            PricingSource::Fallback => "fallback",
            PricingSource::Free => "free",
        }
    }
}

/// Whether `suffix` (what a served name adds to a priced one) is a date or
/// version stamp, so `gpt-4o-2024-08-06` is priced as `gpt-4o` while
/// `gpt-4o-mini` is never priced as `gpt-4o`. Accepted: `-YYYYMMDD`,
/// `-YYYY-MM-DD`, `-MMDD` (the older OpenAI stamps such as `gpt-4-0613`),
/// `@YYYYMMDD` (Vertex AI), `-latest`, and `-vN` / `-vN:M` (Bedrock), alone
/// or a date followed by a version.
pub fn is_version_suffix(suffix: &str) -> bool {
    fn digits(s: &str, n: usize) -> bool {
        s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
    }
    fn version(s: &str) -> bool {
        // `vN` or `vN:M`.
        let Some(rest) = s.strip_prefix('v') else {
            return false;
        };
        let mut parts = rest.splitn(2, ':');
        let major = parts.next().unwrap_or_default();
        let minor = parts.next();
        !major.is_empty()
            && major.bytes().all(|b| b.is_ascii_digit())
            && minor.is_none_or(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
    }
    fn date(s: &str) -> bool {
        if digits(s, 8) || digits(s, 4) {
            return true;
        }
        let parts: Vec<&str> = s.split('-').collect();
        matches!(parts.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2))
    }
    if let Some(stamp) = suffix.strip_prefix('@') {
        return date(stamp);
    }
    let Some(rest) = suffix.strip_prefix('-') else {
        return false;
    };
    if rest == "latest" || version(rest) || date(rest) {
        return true;
    }
    // A date then a version: `-20240620-v1:0`.
    match rest.rsplit_once('-') {
        Some((d, v)) => date(d) && version(v),
        None => false,
    }
}

/// The name among `priced` that prices `model`: the exact name, else the
/// longest name `model` extends by a [version suffix](is_version_suffix).
pub fn priced_name<'a, I>(model: &str, priced: I) -> Option<(&'a str, PricingSource)>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut best: Option<&'a str> = None;
    for name in priced {
        if name == model {
            return Some((name, PricingSource::Exact));
        }
        if let Some(suffix) = model.strip_prefix(name)
            && !name.is_empty()
            && is_version_suffix(suffix)
            && best.is_none_or(|b| name.len() > b.len())
        {
            best = Some(name);
        }
    }
    best.map(|name| (name, PricingSource::Prefix))
}

/// The row that prices an attempt: the served model's, else the requested
/// model's (a provider that reports an id nothing prices is still billed at
/// what was asked for), each by [`priced_name`]. `None` means no row
/// applies and the caller charges the fallback price.
pub fn choose_price<'a, I>(
    served: &str,
    requested: &str,
    priced: I,
) -> Option<(&'a str, PricingSource)>
where
    I: IntoIterator<Item = &'a str> + Clone,
{
    if !served.is_empty()
        && let Some(found) = priced_name(served, priced.clone())
    {
        return Some(found);
    }
    priced_name(requested, priced)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(input: f64, output: f64, read: f64, write: f64) -> ModelPrice {
        ModelPrice {
            input_usd_per_mtok: input,
            output_usd_per_mtok: output,
            cache_read_usd_per_mtok: read,
            cache_write_usd_per_mtok: write,
        }
    }

    #[test]
    fn openai_cached_tokens_are_billed_once_at_the_cache_price() {
        // gpt-4o: 812 prompt tokens of which 512 cached, 37 out. The
        // provider module hands over 300 uncached + 512 cached.
        let gpt4o = price(2.5, 10.0, 1.25, 2.5);
        let usage = TokenUsage {
            input_tokens: 300,
            cache_read_tokens: 512,
            output_tokens: 37,
            cache_write_tokens: 0,
        };
        let cost = gpt4o.cost_usd(&usage);
        assert!((cost - 0.00176).abs() < 1e-12, "{cost}");
    }

    #[test]
    fn anthropic_cache_writes_are_billed_at_the_write_price() {
        // claude-sonnet-4-5: $3 in, $15 out, $0.30 read, $3.75 write.
        let sonnet = price(3.0, 15.0, 0.30, 3.75);
        let usage = TokenUsage {
            input_tokens: 100,
            cache_write_tokens: 2_000,
            cache_read_tokens: 10_000,
            output_tokens: 500,
        };
        let expected = (100.0 * 3.0 + 2_000.0 * 3.75 + 10_000.0 * 0.30 + 500.0 * 15.0) / 1e6;
        assert!((sonnet.cost_usd(&usage) - expected).abs() < 1e-12);
    }

    #[test]
    fn free_costs_nothing_and_fallback_never_does() {
        let usage = TokenUsage {
            input_tokens: 1_000,
            output_tokens: 1_000,
            cache_read_tokens: 1_000,
            cache_write_tokens: 1_000,
        };
        assert_eq!(ModelPrice::FREE.cost_usd(&usage), 0.0);
        let fallback = ModelPrice::fallback(15.0, 75.0);
        let expected = (1_000.0 * 15.0 * 3.0 + 1_000.0 * 75.0) / 1e6;
        assert!((fallback.cost_usd(&usage) - expected).abs() < 1e-12);
    }

    #[test]
    fn the_worst_case_takes_the_dearest_prompt_price_and_the_whole_cap() {
        let sonnet = price(3.0, 15.0, 0.30, 3.75);
        let worst = sonnet.worst_case_usd(10_000, 4_096);
        let expected = (10_000.0 * 3.75 + 4_096.0 * 15.0) / 1e6;
        assert!((worst - expected).abs() < 1e-12);
    }

    #[test]
    fn version_suffixes_are_dates_versions_and_latest_only() {
        for ok in [
            "-2024-08-06",
            "-20250929",
            "-0613",
            "@20240620",
            "-latest",
            "-v1",
            "-v1:0",
            "-20240620-v1:0",
        ] {
            assert!(is_version_suffix(ok), "{ok}");
        }
        for bad in [
            "",
            "-mini",
            "-mini-2024-07-18",
            "-4-5",
            "-5",
            "-2024-8-6",
            "@latest",
            "-v",
            "-v1:",
            "-vx",
            "x20240101",
            "-202406",
        ] {
            assert!(!is_version_suffix(bad), "{bad}");
        }
    }

    #[test]
    fn a_dated_served_name_is_priced_by_its_longest_priced_prefix() {
        let priced = [
            "gpt-4o",
            "gpt-4o-mini",
            "claude-sonnet-4-5",
            "claude-sonnet-4",
        ];
        let it = || priced.iter().copied();
        assert_eq!(
            priced_name("gpt-4o-2024-08-06", it()),
            Some(("gpt-4o", PricingSource::Prefix))
        );
        assert_eq!(
            priced_name("gpt-4o-mini-2024-07-18", it()),
            Some(("gpt-4o-mini", PricingSource::Prefix))
        );
        assert_eq!(
            priced_name("claude-sonnet-4-5-20250929", it()),
            Some(("claude-sonnet-4-5", PricingSource::Prefix))
        );
        assert_eq!(
            priced_name("gpt-4o", it()),
            Some(("gpt-4o", PricingSource::Exact))
        );
        // Not a version suffix: never priced as the shorter model.
        assert_eq!(priced_name("gpt-4o-audio-preview", it()), None);
        assert_eq!(priced_name("claude-sonnet-4-7", it()), None);
        assert_eq!(priced_name("o3", it()), None);
    }

    #[test]
    fn the_served_name_wins_then_the_requested_one() {
        let priced = ["gpt-4o", "gpt-4o-mini"];
        let it = || priced.iter().copied();
        assert_eq!(
            choose_price("gpt-4o-mini-2024-07-18", "gpt-4o", it()),
            Some(("gpt-4o-mini", PricingSource::Prefix))
        );
        assert_eq!(
            choose_price("some-router-id", "gpt-4o", it()),
            Some(("gpt-4o", PricingSource::Exact))
        );
        assert_eq!(
            choose_price("", "gpt-4o-2024-08-06", it()),
            Some(("gpt-4o", PricingSource::Prefix))
        );
        assert_eq!(choose_price("x", "y", it()), None);
    }
}
