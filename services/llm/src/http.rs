//! What the HTTP providers share: the reqwest client with timeouts, mapping
//! HTTP statuses and client failures onto [`LlmError`], and `Retry-After`
//! parsing.
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
        LlmError::malformed(format!("reading the body: {error}"))
    } else {
        // reqwest's Display names the URL, never headers.
        LlmError::Transport {
            detail: error.to_string(),
        }
    }
}

/// Map a non-2xx status onto the error vocabulary. `body` is a short excerpt
/// of the provider's error body, kept for invalid requests only.
pub(crate) fn map_status(status: u16, headers: &HeaderMap, body: &str) -> LlmError {
    match status {
        429 => LlmError::RateLimited {
            retry_after: parse_retry_after(headers, std::time::SystemTime::now()),
        },
        401 | 403 => LlmError::Unauthorized { status },
        500..=599 => LlmError::Server { status },
        // Anthropic's "overloaded" is 529, covered above; everything else in
        // 4xx (400, 404, 413, 422) is a request the provider will not serve.
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
