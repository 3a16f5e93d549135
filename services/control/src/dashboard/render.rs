//! HTML building blocks of the dashboard: escaping, the page layout, the
//! sign-in page, and the JSON the live stream sends. Pure functions over
//! strings; must never emit a caller-supplied value unescaped.

use std::fmt::Write as _;

use genesis_proto::v1;
use serde_json::json;

/// Escape text for an HTML text node or a quoted attribute value.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encode a query value or a path segment (RFC 3986 unreserved
/// characters pass).
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// At most `n` characters of `s`, with an ellipsis when cut.
pub fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(n).collect();
        out.push('…');
        out
    }
}

/// A timestamp as `YYYY-MM-DD HH:MM:SS UTC`, or `—`.
pub fn ts(t: Option<&prost_types::Timestamp>) -> String {
    t.and_then(|t| chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0)))
        .map(|d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "—".to_owned())
}

/// A dollar amount.
pub fn usd(v: f64) -> String {
    if v != 0.0 && v.abs() < 0.01 {
        format!("${v:.4}")
    } else {
        format!("${v:.2}")
    }
}

/// Empty text shown as a dash.
pub fn or_dash(s: &str) -> String {
    if s.trim().is_empty() {
        "—".to_owned()
    } else {
        esc(s)
    }
}

const NAV: &[(&str, &str)] = &[
    ("/agents", "Agents"),
    ("/decisions", "Decisions"),
    ("/tasks", "Tasks"),
    ("/spend", "Spend"),
];

/// The signed-in layout: skip link, navigation, the tenant, sign-out.
pub fn layout(title: &str, csrf: &str, tenant: &str, body: &str) -> String {
    let mut nav = String::new();
    for (href, label) in NAV {
        let current = if title.starts_with(label) {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(nav, "<li><a href=\"{href}\"{current}>{label}</a></li>");
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · Genesis Agents</title><link rel=\"stylesheet\" href=\"/assets/app.css\"><link rel=\"icon\" href=\"/assets/icon.svg\">\
<script src=\"/assets/app.js\" defer></script></head><body>\
<a class=\"skip\" href=\"#main\">Skip to content</a>\
<header><span class=\"brand\">Genesis Agents</span><nav aria-label=\"Main\"><ul>{nav}</ul></nav>\
<span class=\"tenant\" title=\"The tenant this session shows\">tenant <code>{tenant}</code></span>\
<form method=\"post\" action=\"/logout\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
<button type=\"submit\">Sign out</button></form></header>\
<main id=\"main\" tabindex=\"-1\" data-csrf=\"{csrf}\"><h1>{title}</h1>{body}</main></body></html>",
        title = esc(title),
        tenant = esc(tenant),
        csrf = esc(csrf),
    )
}

/// A page outside the session (sign-in problems, refusals).
pub fn bare(title: &str, message: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{t} · Genesis Agents</title><link rel=\"stylesheet\" href=\"/assets/app.css\"><link rel=\"icon\" href=\"/assets/icon.svg\"></head>\
<body><main id=\"main\" class=\"narrow\"><h1>{t}</h1><p role=\"alert\">{m}</p>\
<p><a href=\"/agents\">Back to the dashboard</a></p></main></body></html>",
        t = esc(title),
        m = esc(message)
    )
}

/// The sign-in page.
pub fn login(error: Option<&str>) -> String {
    let alert = error
        .map(|e| {
            format!(
                "<p class=\"error\" role=\"alert\" id=\"login-error\">{}</p>",
                esc(e)
            )
        })
        .unwrap_or_default();
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>Sign in · Genesis Agents</title><link rel=\"stylesheet\" href=\"/assets/app.css\"><link rel=\"icon\" href=\"/assets/icon.svg\"></head>\
<body><main id=\"main\" class=\"narrow\"><h1>Sign in</h1>{alert}\
<form method=\"post\" action=\"/login\" class=\"stack\">\
<label for=\"token\">Operator token</label>\
<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required autofocus>\
<label for=\"tenant_id\">Tenant <small>(only for a platform-wide token)</small></label>\
<input id=\"tenant_id\" name=\"tenant_id\" type=\"text\" inputmode=\"text\" autocomplete=\"off\" \
placeholder=\"00000000-0000-0000-0000-000000000000\">\
<button type=\"submit\">Sign in</button></form>\
<p class=\"hint\">The token is exchanged for a session cookie and is not kept by the browser.</p>\
</main></body></html>"
    )
}

/// The `?note=` / `?error=` banner of a page.
pub fn flash(note: Option<&str>, error: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(n) = note {
        let _ = write!(out, "<p class=\"note\" role=\"status\">{}</p>", esc(n));
    }
    if let Some(e) = error {
        out.push_str(&error_box(e));
    }
    out
}

/// An error banner.
pub fn error_box(message: &str) -> String {
    format!("<p class=\"error\" role=\"alert\">{}</p>", esc(message))
}

/// A live turn as the page's script renders it.
pub fn turn_json(t: &v1::TurnEvent) -> String {
    json!({
        "turn": t.turn_number,
        "at": ts(t.created_at.as_ref()),
        "event": t.event_kind,
        "decision": t.decision_kind,
        "mode": t.mode,
        "phase": t.phase,
        "summary": t.reasoning_summary,
        "model": t.served_model,
        "tokens": t.tokens,
        "cost": usd(t.cost_usd),
    })
    .to_string()
}

/// A live chat message as the page's script renders it.
pub fn message_json(m: &v1::AgentMessage) -> String {
    json!({
        "id": m.id,
        "direction": m.direction,
        "body": m.body,
        "at": ts(m.created_at.as_ref()),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_neutralises_markup_and_attribute_breakouts() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(query_escape("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn clip_cuts_on_characters_not_bytes() {
        assert_eq!(clip("ééééé", 3), "ééé…");
        assert_eq!(clip("abc", 3), "abc");
    }

    #[test]
    fn the_layout_escapes_the_tenant_and_csrf_and_marks_the_current_page() {
        let html = layout("Agents", "tok\"en", "<t>", "<p>x</p>");
        assert!(html.contains("value=\"tok&quot;en\""));
        assert!(html.contains("<code>&lt;t&gt;</code>"));
        assert!(html.contains("<a href=\"/agents\" aria-current=\"page\">Agents</a>"));
        assert!(!html.contains("<a href=\"/spend\" aria-current"));
    }

    #[test]
    fn timestamps_and_amounts_render_for_people() {
        let t = prost_types::Timestamp {
            seconds: 1_772_368_200,
            nanos: 0,
        };
        assert_eq!(ts(Some(&t)), "2026-03-01 12:30:00 UTC");
        assert_eq!(ts(None), "—");
        assert_eq!(usd(1.5), "$1.50");
        assert_eq!(usd(0.0012), "$0.0012");
        assert_eq!(usd(0.0), "$0.00");
    }
}
