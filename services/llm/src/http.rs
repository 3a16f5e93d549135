//! What the HTTP providers share: the reqwest client with timeouts, base URL
//! checking, mapping HTTP statuses and client failures onto [`LlmError`],
//! and reading the providers' wait hints (`Retry-After`, `retry-after-ms`,
//! OpenAI's `x-ratelimit-reset-*`).
//!
//! This module must never log or embed request headers or bodies: they carry
//! credentials and prompts.

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::error::LlmError;

/// Default per-request timeout for provider calls (a long completion can take
/// minutes; the planning loop's own budget bounds the episode).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Default TCP connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Timeouts applied to every provider request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpTimeouts {
    /// Whole-request timeout (connect + send + full body).
    pub request: Duration,
    /// Connect timeout.
    pub connect: Duration,
}

impl Default for HttpTimeouts {
    fn default() -> Self {
        HttpTimeouts {
            request: DEFAULT_REQUEST_TIMEOUT,
            connect: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

/// Build the shared reqwest client with the given timeouts.
pub(crate) fn build_client(timeouts: HttpTimeouts) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .timeout(timeouts.request)
        .connect_timeout(timeouts.connect)
        .build()
        .map_err(|e| LlmError::Transport {
            detail: format!("building the HTTP client: {e}"),
        })
}

/// Map a reqwest failure (no HTTP answer, or the body could not be read).
pub(crate) fn map_reqwest_error(error: &reqwest::Error) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout
    } else if error.is_decode() {
        LlmError::malformed(format!("reading the body: {}", without_secrets(error)))
    } else {
        // reqwest's Display names the URL (never headers); its userinfo and
        // secret query values are masked.
        LlmError::Transport {
            detail: without_secrets(error),
        }
    }
}

/// reqwest's text for `error` with the password, a lone user (a token) and
/// any secret query value of the URL it names masked: the text is stored on
/// the attempt and logged.
fn without_secrets(error: &reqwest::Error) -> String {
    let text = error.to_string();
    let Some(url) = error.url() else {
        return text;
    };
    let mut masked = url.clone();
    let mut changed = false;
    if masked.password().is_some() {
        changed |= masked.set_password(Some("***")).is_ok();
    } else if !masked.username().is_empty() {
        changed |= masked.set_username("***").is_ok();
    }
    if masked.query().is_some() {
        let pairs: Vec<(String, String)> = masked
            .query_pairs()
            .map(|(k, v)| {
                let secret = [
                    "key",
                    "api_key",
                    "apikey",
                    "token",
                    "access_token",
                    "password",
                ]
                .iter()
                .any(|s| s.eq_ignore_ascii_case(&k));
                (
                    k.into_owned(),
                    if secret {
                        "***".to_owned()
                    } else {
                        v.into_owned()
                    },
                )
            })
            .collect();
        masked.query_pairs_mut().clear().extend_pairs(pairs);
        changed = true;
    }
    if changed {
        text.replace(url.as_str(), masked.as_str())
    } else {
        text
    }
}

/// Check a provider base URL and bring it to the form the providers append
/// their paths to: `http` or `https` with a host, no query or fragment, no
/// trailing `/`, and no trailing `/v1` — the official Anthropic SDKs read
/// `ANTHROPIC_BASE_URL` without it (`https://api.anthropic.com`) while the
/// OpenAI SDKs read `OPENAI_BASE_URL` with it (`https://api.openai.com/v1`),
/// and either spelling must reach `…/v1/messages` or
/// `…/v1/chat/completions` exactly once. The error never repeats the URL
/// (it may carry a password).
pub fn normalize_base_url(raw: &str) -> Result<String, LlmError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(LlmError::invalid("base URL is empty"));
    }
    let url = reqwest::Url::parse(trimmed)
        .map_err(|e| LlmError::invalid(format!("base URL is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(LlmError::invalid(format!(
            "base URL must be http:// or https://, not {}://",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(LlmError::invalid("base URL has no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(LlmError::invalid(
            "base URL must not carry a query or a fragment",
        ));
    }
    Ok(trim_base_url(trimmed))
}

/// The lenient half of [`normalize_base_url`], for providers built directly
/// on a URL the caller vouches for: trailing slashes and one trailing `/v1`
/// dropped, nothing checked.
pub(crate) fn trim_base_url(raw: &str) -> String {
    let base = raw.trim().trim_end_matches('/');
    base.strip_suffix("/v1")
        .unwrap_or(base)
        .trim_end_matches('/')
        .to_string()
}

/// Map a non-2xx status onto the error vocabulary. `body` is a short excerpt
/// of the provider's error body, kept for invalid requests only.
pub(crate) fn map_status(status: u16, headers: &HeaderMap, body: &str) -> LlmError {
    let now = std::time::SystemTime::now();
    match status {
        429 => LlmError::RateLimited {
            retry_after: parse_retry_after(headers, now)
                .or_else(|| parse_rate_limit_reset(headers)),
        },
        401 | 403 => LlmError::Unauthorized { status },
        // Anthropic's 529 "overloaded" and a 503 that say when to come back
        // are waited for like a 429; without a hint, every 5xx is a
        // transient server error.
        503 | 529 => match parse_retry_after(headers, now) {
            Some(retry_after) => LlmError::Overloaded {
                status,
                retry_after,
            },
            None => LlmError::Server { status },
        },
        500..=599 => LlmError::Server { status },
        // Everything else in 4xx (400, 404, 413, 422) is a request the
        // provider will not serve.
        _ => LlmError::invalid(format!(
            "provider answered HTTP {status}: {}",
            excerpt(body, 300)
        )),
    }
}

/// Read a provider's wait hint: `retry-after-ms` (OpenAI) first, then
/// `Retry-After` as delta-seconds or an HTTP date (RFC 9110 §10.2.3). A date
/// in the past is a zero wait; an unreadable header is no hint.
pub fn parse_retry_after(headers: &HeaderMap, now: std::time::SystemTime) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        // A hint beyond what a Duration holds is unreadable, not a panic.
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let raw = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(secs) = raw.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = raw.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let when = chrono::DateTime::parse_from_rfc2822(raw).ok()?;
    let when: std::time::SystemTime = when.with_timezone(&chrono::Utc).into();
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Read OpenAI's rate-limit reset headers, `x-ratelimit-reset-requests` and
/// `x-ratelimit-reset-tokens` (Go durations such as `1s`, `6m0s`, `20ms`):
/// the reset of the limit that is used up (its `x-ratelimit-remaining-*` is
/// `0`), else the later of the two, so the retry does not come before the
/// limit that refused it has room again. No readable header is no hint.
pub fn parse_rate_limit_reset(headers: &HeaderMap) -> Option<Duration> {
    let reset = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_go_duration)
    };
    let exhausted = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() == "0")
    };
    let requests = reset("x-ratelimit-reset-requests");
    let tokens = reset("x-ratelimit-reset-tokens");
    match (
        exhausted("x-ratelimit-remaining-requests"),
        exhausted("x-ratelimit-remaining-tokens"),
    ) {
        (true, false) if requests.is_some() => requests,
        (false, true) if tokens.is_some() => tokens,
        _ => match (requests, tokens) {
            (Some(r), Some(t)) => Some(r.max(t)),
            (r, t) => r.or(t),
        },
    }
}

/// Parse a Go `time.Duration` string as OpenAI writes its reset headers:
/// one or more `<number><unit>` terms (`h`, `m`, `s`, `ms`, `us`/`µs`,
/// `ns`), the number possibly fractional (`1h2m3.5s`, `6m0s`, `20ms`). A
/// bare number is seconds. Anything else, a negative value or one too large
/// for a `Duration` is `None`.
pub fn parse_go_duration(raw: &str) -> Option<Duration> {
    let s = raw.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(secs) = s.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::try_from_secs_f64(secs).ok())
            .flatten();
    }
    let mut total = 0.0_f64;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let value: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * seconds_per_unit;
    }
    (total.is_finite() && total >= 0.0)
        .then(|| Duration::try_from_secs_f64(total).ok())
        .flatten()
}

/// At most `max` characters of `s`, on a char boundary.
pub(crate) fn excerpt(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((idx, _)) => format!("{}…", &s[..idx]),
        None => s.to_string(),
    }
}

/// Send a prepared JSON POST and return the parsed 2xx body, or the mapped
/// error.
pub(crate) async fn post_json(
    builder: reqwest::RequestBuilder,
    body: &serde_json::Value,
) -> Result<serde_json::Value, LlmError> {
    let response = builder
        .json(body)
        .send()
        .await
        .map_err(|e| map_reqwest_error(&e))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.map_err(|e| map_reqwest_error(&e))?;
    if !(200..300).contains(&status) {
        return Err(map_status(status, &headers, &text));
    }
    serde_json::from_str(&text).map_err(|e| LlmError::malformed(format!("body is not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).expect("header value"));
        h
    }

    /// A transport error's text names the URL without its password, a lone
    /// user (a token) or a secret query value.
    #[tokio::test]
    async fn a_transport_errors_url_keeps_no_secret() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = closed.local_addr().expect("addr").port();
        drop(closed);
        let client = reqwest::Client::new();
        for url in [
            format!("http://user:hunter2@127.0.0.1:{port}/v1/chat/completions"),
            format!("http://hunter2@127.0.0.1:{port}/v1/messages"),
            format!("http://127.0.0.1:{port}/v1/models?key=hunter2&alt=json"),
        ] {
            let err = client.get(&url).send().await.expect_err("nothing listens");
            let LlmError::Transport { detail } = map_reqwest_error(&err) else {
                panic!("not a transport error: {err}");
            };
            assert!(!detail.contains("hunter2"), "{detail}");
            assert!(detail.contains(&format!("127.0.0.1:{port}")), "{detail}");
        }
    }

    #[test]
    fn retry_after_seconds_are_read() {
        let got = parse_retry_after(&headers("retry-after", "7"), std::time::SystemTime::now());
        assert_eq!(got, Some(Duration::from_secs(7)));
    }

    #[test]
    fn retry_after_ms_wins_over_seconds() {
        let mut h = headers("retry-after", "7");
        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        let got = parse_retry_after(&h, std::time::SystemTime::now());
        assert_eq!(got, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn retry_after_http_date_is_relative_to_now() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        // 2015-10-21T07:28:00Z is 1445412480: ten seconds after `now`.
        let got = parse_retry_after(
            &headers("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
            now,
        );
        assert_eq!(got, Some(Duration::from_secs(10)));
    }

    #[test]
    fn retry_after_garbage_is_no_hint() {
        let got = parse_retry_after(
            &headers("retry-after", "soon"),
            std::time::SystemTime::now(),
        );
        assert_eq!(got, None);
    }

    #[test]
    fn openai_reset_durations_are_read_as_go_durations() {
        for (raw, want) in [
            ("1s", Duration::from_secs(1)),
            ("6m0s", Duration::from_secs(360)),
            ("20ms", Duration::from_millis(20)),
            ("1h2m3.5s", Duration::from_millis(3_723_500)),
            ("0.5s", Duration::from_millis(500)),
            ("250us", Duration::from_micros(250)),
            ("2", Duration::from_secs(2)),
        ] {
            assert_eq!(parse_go_duration(raw), Some(want), "{raw}");
        }
        for bad in ["", "s", "1x", "-1s", "1s-", "ms20", "1e400s", "NaN"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_reset_of_the_exhausted_limit_is_the_hint() {
        let mut h = headers("x-ratelimit-reset-requests", "1s");
        h.insert("x-ratelimit-reset-tokens", HeaderValue::from_static("6m0s"));
        assert_eq!(
            parse_rate_limit_reset(&h),
            Some(Duration::from_secs(360)),
            "neither known to be used up: the later one"
        );
        h.insert(
            "x-ratelimit-remaining-requests",
            HeaderValue::from_static("0"),
        );
        h.insert(
            "x-ratelimit-remaining-tokens",
            HeaderValue::from_static("5000"),
        );
        assert_eq!(parse_rate_limit_reset(&h), Some(Duration::from_secs(1)));
        let tokens_only = headers("x-ratelimit-reset-tokens", "20ms");
        assert_eq!(
            parse_rate_limit_reset(&tokens_only),
            Some(Duration::from_millis(20))
        );
        assert_eq!(
            parse_rate_limit_reset(&headers("x-ratelimit-reset-requests", "soon")),
            None
        );
        assert_eq!(parse_rate_limit_reset(&HeaderMap::new()), None);
    }

    #[test]
    fn a_429_without_retry_after_takes_the_openai_reset() {
        let err = map_status(429, &headers("x-ratelimit-reset-requests", "1s"), "");
        assert_eq!(
            err,
            LlmError::RateLimited {
                retry_after: Some(Duration::from_secs(1))
            }
        );
        let mut h = headers("x-ratelimit-reset-requests", "1s");
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(
            map_status(429, &h, "").retry_hint(),
            Some(Duration::from_secs(3)),
            "Retry-After wins"
        );
    }

    #[test]
    fn an_overloaded_provider_with_retry_after_is_told_apart() {
        let h = headers("retry-after", "2");
        assert_eq!(
            map_status(529, &h, ""),
            LlmError::Overloaded {
                status: 529,
                retry_after: Duration::from_secs(2)
            }
        );
        assert_eq!(
            map_status(503, &h, "").retry_hint(),
            Some(Duration::from_secs(2))
        );
        assert_eq!(map_status(500, &h, ""), LlmError::Server { status: 500 });
        assert_eq!(
            map_status(503, &HeaderMap::new(), ""),
            LlmError::Server { status: 503 }
        );
        // The OpenAI reset headers describe rate limits, not outages.
        assert_eq!(
            map_status(503, &headers("x-ratelimit-reset-requests", "1s"), ""),
            LlmError::Server { status: 503 }
        );
    }

    #[test]
    fn base_urls_are_checked_and_brought_to_the_path_less_form() {
        for (raw, want) in [
            ("https://api.anthropic.com", "https://api.anthropic.com"),
            ("https://api.openai.com/v1", "https://api.openai.com"),
            ("https://api.openai.com/v1/", "https://api.openai.com"),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
            (
                " https://gw.example/llm/openai/v1 ",
                "https://gw.example/llm/openai",
            ),
            ("https://gw.example/v1beta", "https://gw.example/v1beta"),
        ] {
            assert_eq!(normalize_base_url(raw).as_deref(), Ok(want), "{raw}");
        }
        for (raw, says) in [
            ("", "empty"),
            ("api.openai.com", "not a URL"),
            ("ftp://files.example", "http:// or https://"),
            ("unix:///run/llm.sock", "http:// or https://"),
            ("https://gw.example/v1?key=x", "query"),
        ] {
            let err = normalize_base_url(raw).expect_err(raw).to_string();
            assert!(err.contains(says), "{raw}: {err}");
        }
        let err = normalize_base_url("ftp://user:hunter2@files.example")
            .expect_err("refused")
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn statuses_map_to_failover_classes() {
        let h = HeaderMap::new();
        assert_eq!(
            map_status(401, &h, ""),
            LlmError::Unauthorized { status: 401 }
        );
        assert_eq!(map_status(529, &h, ""), LlmError::Server { status: 529 });
        assert!(map_status(400, &h, "bad").to_string().contains("HTTP 400"));
        assert!(!map_status(400, &h, "bad").is_failover());
    }

    #[test]
    fn excerpt_cuts_on_char_boundary() {
        assert_eq!(excerpt("héllo", 2), "hé…");
        assert_eq!(excerpt("hi", 5), "hi");
    }
}
