//! The operator dashboard over real HTTP against the real database: sign-in
//! and its refusals, the session cookie's attributes, tenant confinement,
//! CSRF refusals that write nothing, each form's effect through the admin
//! services (message + enqueue, mode switch audited with source ui, Reset
//! refused mid-tick, decision answered with the resume enqueued), the live
//! stream, the spend page, sign-out and token revocation ending a session.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use genesis_core::{AgentEventKind, AttentionKind, ModeChangeSource, TokenScope};
use genesis_store::NewAttentionRequest;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

struct Dash {
    base: String,
    http: reqwest::Client,
}

impl Dash {
    fn new(addr: SocketAddr) -> anyhow::Result<Self> {
        Ok(Dash {
            base: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(20))
                .build()?,
        })
    }

    async fn sign_in(&self, token: &str, tenant: &str) -> anyhow::Result<reqwest::Response> {
        Ok(self
            .http
            .post(format!("{}/login", self.base))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form_body(&[("token", token), ("tenant_id", tenant)]))
            .send()
            .await?)
    }

    /// Sign in and return the `name=value` cookie pair.
    async fn cookie(&self, token: &str) -> anyhow::Result<String> {
        let r = self.sign_in(token, "").await?;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{:?}", r.text().await);
        let set = r
            .headers()
            .get(SET_COOKIE)
            .ok_or_else(|| anyhow::anyhow!("no Set-Cookie"))?
            .to_str()?
            .to_owned();
        Ok(set.split(';').next().unwrap_or_default().trim().to_owned())
    }

    async fn get(&self, cookie: &str, path: &str) -> anyhow::Result<(StatusCode, String)> {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header(COOKIE, cookie)
            .send()
            .await?;
        let status = r.status();
        Ok((status, r.text().await?))
    }

    async fn post(
        &self,
        cookie: &str,
        path: &str,
        form: &[(&str, &str)],
    ) -> anyhow::Result<reqwest::Response> {
        Ok(self
            .http
            .post(format!("{}{path}", self.base))
            .header(COOKIE, cookie)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form_body(form))
            .send()
            .await?)
    }
}

/// `application/x-www-form-urlencoded` as a browser sends it.
fn form_body(pairs: &[(&str, &str)]) -> String {
    let enc = |v: &str| {
        v.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The CSRF token a page carries.
fn csrf_of(html: &str) -> anyhow::Result<String> {
    let marker = "data-csrf=\"";
    let start = html
        .find(marker)
        .ok_or_else(|| anyhow::anyhow!("no csrf on the page"))?
        + marker.len();
    let end = html[start..]
        .find('"')
        .ok_or_else(|| anyhow::anyhow!("unterminated csrf"))?;
    Ok(html[start..start + end].to_owned())
}

fn location(r: &reqwest::Response) -> String {
    r.headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn free_addr() -> anyhow::Result<SocketAddr> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    Ok(l.local_addr()?)
}

async fn start_dashboard(pool: &PgPool) -> anyhow::Result<(Harness, Dash)> {
    start_dashboard_with(pool, |_| {}).await
}

async fn start_dashboard_with(
    pool: &PgPool,
    configure: impl FnOnce(&mut genesis_control::ControlConfig),
) -> anyhow::Result<(Harness, Dash)> {
    let mut cfg = config(pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let addr = free_addr().await?;
    cfg.dashboard_addr = addr.to_string();
    configure(&mut cfg);
    let h = start(cfg).await?;
    let dash = Dash::new(addr)?;
    // The listener binds inside `run`: wait for the sign-in page.
    eventually(Duration::from_secs(10), || async {
        Ok(dash
            .http
            .get(format!("{}/login", dash.base))
            .send()
            .await
            .ok()
            .filter(|r| r.status() == StatusCode::OK)
            .map(|_| ()))
    })
    .await?;
    Ok((h, dash))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn sign_in_sets_a_strict_http_only_session_and_refuses_bad_tokens(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let pod = token(&store, TokenScope::AgentPod, None).await?;
    let platform = token(&store, TokenScope::Operator, None).await?;
    let (h, d) = start_dashboard(&pool).await?;

    // Pages without a session go to the sign-in page.
    let r = d.http.get(format!("{}/agents", d.base)).send().await?;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/login");

    // A malformed token, an agent-pod token, and a platform token without a
    // tenant are refused with a message and no cookie.
    for (tok, tenant, expect) in [
        ("nope", "", "unknown"),
        (pod.as_str(), "", "agent-pod"),
        (platform.as_str(), "", "must name the tenant"),
        (platform.as_str(), "not-a-uuid", "not a UUID"),
        (
            platform.as_str(),
            &Uuid::new_v4().to_string(),
            "no such tenant",
        ),
        (op.as_str(), &Uuid::new_v4().to_string(), "another tenant"),
    ] {
        let r = d.sign_in(tok, tenant).await?;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{expect}");
        assert!(r.headers().get(SET_COOKIE).is_none());
        let body = r.text().await?;
        assert!(body.contains(expect), "{expect}: {body}");
    }
    let sessions = genesis_store::inspect::count_rows(&pool, "dashboard_sessions").await?;
    assert_eq!(sessions, 0, "refused sign-ins write nothing");

    let r = d.sign_in(&op, "").await?;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let set = r
        .headers()
        .get(SET_COOKIE)
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    assert!(set.starts_with("genesis_session=gen_"), "{set}");
    assert!(set.contains("HttpOnly"), "{set}");
    assert!(set.contains("SameSite=Strict"), "{set}");
    assert!(set.contains("Path=/"), "{set}");
    // Only the hash is stored.
    let secret = set
        .trim_start_matches("genesis_session=")
        .split(';')
        .next()
        .unwrap_or_default()
        .to_owned();
    let stored = genesis_store::inspect::one_dashboard_session_sha256(&pool).await?;
    assert_eq!(stored, genesis_proto::auth::token_sha256(&secret));
    assert_ne!(stored, secret);

    // A platform token signs in to the tenant it names.
    let r = d.sign_in(&platform, &t.to_string()).await?;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    h.stop().await
}

/// Failed sign-ins spend the peer's failed-authentication bucket; once it
/// is empty the form is answered 429 with Retry-After before the token is
/// looked up (a valid one too) and no session is opened. A refusal of a
/// valid token (an agent-pod token) is not a failure.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn failed_sign_ins_hold_the_peer_back_before_any_lookup(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let pod = token(&store, TokenScope::AgentPod, None).await?;
    let (h, d) = start_dashboard_with(&pool, |c| c.auth_failures_per_minute = 2).await?;
    for _ in 0..3 {
        let r = d.sign_in(&pod, "").await?;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert!(r.text().await?.contains("agent-pod"));
    }
    for tok in ["nope", genesis_proto::auth::generate_token().as_str()] {
        let r = d.sign_in(tok, "").await?;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{tok}");
    }
    let r = d.sign_in(&op, "").await?;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().get(SET_COOKIE).is_none());
    let wait: u64 = r
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .ok_or_else(|| anyhow::anyhow!("no Retry-After"))?
        .to_str()?
        .parse()?;
    assert!((1..=30).contains(&wait), "{wait}");
    assert!(
        r.text()
            .await?
            .contains("too many failed authentications from this address")
    );
    let sessions = genesis_store::inspect::count_rows(&pool, "dashboard_sessions").await?;
    assert_eq!(sessions, 0);
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn pages_show_the_sessions_tenant_only(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let soa_a = soa(&store, a).await?;
    let soa_b = soa(&store, b).await?;
    store
        .attention()
        .create(
            b,
            NewAttentionRequest {
                instance_id: Some(soa_b.id),
                kind: AttentionKind::Decision,
                title: "tenant b's secret question".into(),
                body: String::new(),
                options: json!([]),
                metadata: json!({"source": "soa", "soaInstanceId": soa_b.id}),
            },
        )
        .await?;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let (h, d) = start_dashboard(&pool).await?;
    let c = d.cookie(&op_a).await?;

    let (st, agents) = d.get(&c, "/agents").await?;
    assert_eq!(st, StatusCode::OK);
    assert!(agents.contains(&soa_a.id.to_string()), "{agents}");
    assert!(!agents.contains(&soa_b.id.to_string()));
    assert!(agents.contains("Coordination registry"));

    let (st, page) = d.get(&c, &format!("/agents/{}", soa_a.id)).await?;
    assert_eq!(st, StatusCode::OK);
    for part in [
        "Live turns",
        "Chat",
        "Ledger",
        "Mode changes",
        "Switch mode",
    ] {
        assert!(page.contains(part), "{part} missing");
    }

    // Tenant B's instance is not found from A's session; a bad id is 400.
    let (st, _) = d.get(&c, &format!("/agents/{}", soa_b.id)).await?;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = d.get(&c, "/agents/not-a-uuid").await?;
    assert_eq!(st, StatusCode::BAD_REQUEST);

    let (st, decisions) = d.get(&c, "/decisions").await?;
    assert_eq!(st, StatusCode::OK);
    assert!(!decisions.contains("secret question"));

    let (st, spend) = d.get(&c, "/spend").await?;
    assert_eq!(st, StatusCode::OK);
    assert!(spend.contains("$60.00"), "the default weekly ceiling");
    assert!(spend.contains("<svg"), "the chart is inline SVG");

    // Assets are served by control itself.
    let (st, js) = d.get(&c, "/assets/app.js").await?;
    assert_eq!(st, StatusCode::OK);
    assert!(js.contains("EventSource"));
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn forms_need_the_csrf_token_and_act_through_the_admin_services(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let (h, d) = start_dashboard(&pool).await?;
    let c = d.cookie(&op).await?;
    let path = format!("/agents/{}", inst.id);
    let (_, page) = d.get(&c, &path).await?;
    let csrf = csrf_of(&page)?;

    // Without or with a wrong CSRF token: 403 and nothing written.
    for bad in ["", "gen_wrong"] {
        let r = d
            .post(
                &c,
                &format!("{path}/message"),
                &[("csrf", bad), ("body", "hi")],
            )
            .await?;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let r = d
            .post(
                &c,
                &format!("{path}/mode"),
                &[("csrf", bad), ("mode", "Incident")],
            )
            .await?;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
    assert!(store.messages().list(t, inst.id, 10).await?.is_empty());
    assert!(store.events().list(t, inst.id).await?.is_empty());
    assert!(store.modes().history(t, inst.id).await?.is_empty());

    // A message: stored and its OperatorMessage enqueued.
    let r = d
        .post(
            &c,
            &format!("{path}/message"),
            &[("csrf", csrf.as_str()), ("body", "hello <agent>")],
        )
        .await?;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(location(&r).contains("note="), "{}", location(&r));
    let msgs = store.messages().list(t, inst.id, 10).await?;
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].body, "hello <agent>");
    let evs = store.events().list(t, inst.id).await?;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].event_kind, AgentEventKind::OperatorMessage);
    // The transcript escapes it.
    let (_, page) = d.get(&c, &path).await?;
    assert!(page.contains("hello &lt;agent&gt;"));
    assert!(!page.contains("hello <agent>"));

    // An empty message is refused by the API's validation: nothing written.
    let r = d
        .post(
            &c,
            &format!("{path}/message"),
            &[("csrf", csrf.as_str()), ("body", "  ")],
        )
        .await?;
    assert!(location(&r).contains("error="), "{}", location(&r));
    assert_eq!(store.messages().list(t, inst.id, 10).await?.len(), 1);

    // Mode switch: applied through the chokepoint, audited with source ui.
    let r = d
        .post(
            &c,
            &format!("{path}/mode"),
            &[("csrf", csrf.as_str()), ("mode", "Incident")],
        )
        .await?;
    assert!(location(&r).contains("note="), "{}", location(&r));
    let hist = store.modes().history(t, inst.id).await?;
    assert_eq!(hist.len(), 1);
    assert_eq!(hist[0].to_mode, "Incident");
    assert_eq!(hist[0].source, ModeChangeSource::Ui);
    assert!(hist[0].actor.contains("dashboard"), "{}", hist[0].actor);
    let (_, page) = d.get(&c, &path).await?;
    assert!(
        page.contains("<td>Incident</td><td>ui</td>"),
        "audit row shown"
    );
    // An unknown mode is refused and changes nothing.
    let r = d
        .post(
            &c,
            &format!("{path}/mode"),
            &[("csrf", csrf.as_str()), ("mode", "Bogus")],
        )
        .await?;
    assert!(location(&r).contains("error="));
    assert_eq!(store.modes().history(t, inst.id).await?.len(), 1);

    // Reset mid-tick: refused (409 for the page script), nothing changed.
    let session = Uuid::new_v4();
    let claimed = store
        .claim_tick(t, inst.id, session, Duration::from_secs(60), 5)
        .await?;
    assert!(matches!(claimed, genesis_store::ClaimOutcome::Claimed(_)));
    let before = queue_shape(store.events().list(t, inst.id).await?);
    let r = d
        .http
        .post(format!("{}{path}/lifecycle", d.base))
        .header(COOKIE, &c)
        .header("x-requested-with", "fetch")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form_body(&[("csrf", csrf.as_str()), ("action", "reset")]))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert_eq!(queue_shape(store.events().list(t, inst.id).await?), before);
    // An unknown lifecycle verb is a 400 naming the field.
    let r = d
        .http
        .post(format!("{}{path}/lifecycle", d.base))
        .header(COOKIE, &c)
        .header("x-requested-with", "fetch")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form_body(&[("csrf", csrf.as_str()), ("action", "explode")]))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await?.contains("action"));
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn answering_a_decision_resolves_it_and_enqueues_the_resume(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let ar = store
        .attention()
        .create(
            t,
            NewAttentionRequest {
                instance_id: Some(inst.id),
                kind: AttentionKind::Decision,
                title: "Rotate the keys?".into(),
                body: "the agent asks".into(),
                options: json!(["yes", "no"]),
                metadata: json!({"source": "soa", "soaInstanceId": inst.id}),
            },
        )
        .await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let (h, d) = start_dashboard(&pool).await?;
    let c = d.cookie(&op).await?;
    let (_, page) = d.get(&c, "/decisions").await?;
    assert!(page.contains("Rotate the keys?"));
    assert!(
        page.contains("origin <code>soa</code>"),
        "SOA-origin metadata"
    );
    let csrf = csrf_of(&page)?;
    let r = d
        .post(
            &c,
            &format!("/decisions/{}/respond", ar.id),
            &[
                ("csrf", csrf.as_str()),
                ("resolution", "yes"),
                ("notes", "go"),
            ],
        )
        .await?;
    assert!(location(&r).contains("resumes"), "{}", location(&r));
    let ar = store.attention().get(t, ar.id).await?;
    assert_eq!(ar.resolution.as_deref(), Some("yes"));
    let evs = store.events().list(t, inst.id).await?;
    assert_eq!(
        evs.iter()
            .filter(|e| e.event_kind == AgentEventKind::OperatorAnsweredEscalation)
            .count(),
        1
    );
    // Answering again changes nothing.
    let r = d
        .post(
            &c,
            &format!("/decisions/{}/respond", ar.id),
            &[("csrf", csrf.as_str()), ("resolution", "no")],
        )
        .await?;
    assert!(location(&r).contains("already"), "{}", location(&r));
    assert_eq!(store.events().list(t, inst.id).await?.len(), evs.len());
    let (_, page) = d.get(&c, "/decisions").await?;
    assert!(page.contains("Nothing is waiting"));
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_live_stream_carries_a_message_sent_from_the_page(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let (h, d) = start_dashboard(&pool).await?;
    let c = d.cookie(&op).await?;
    let path = format!("/agents/{}", inst.id);
    let (_, page) = d.get(&c, &path).await?;
    let csrf = csrf_of(&page)?;
    let mut sse = d
        .http
        .get(format!("{}{path}/events", d.base))
        .header(COOKIE, &c)
        .send()
        .await?;
    assert_eq!(sse.status(), StatusCode::OK);
    assert!(
        sse.headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
    );
    // Let the subscription settle, then send through the page's form.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = d
        .http
        .post(format!("{}{path}/message", d.base))
        .header(COOKIE, &c)
        .header("x-requested-with", "fetch")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form_body(&[
            ("csrf", csrf.as_str()),
            ("body", "live hello"),
        ]))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    let mut seen = String::new();
    let got = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(chunk) = sse.chunk().await? {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("event: message") && seen.contains("live hello") {
                return Ok::<_, anyhow::Error>(true);
            }
        }
        Ok(false)
    })
    .await;
    assert!(matches!(got, Ok(Ok(true))), "stream so far: {seen}");
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn sign_out_and_token_revocation_end_the_session(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let (raw, row) =
        genesis_control::tokens::mint(&store, TokenScope::Operator, Some(t), "ops", None).await?;
    let (h, d) = start_dashboard(&pool).await?;

    let c1 = d.cookie(&raw).await?;
    let (_, page) = d.get(&c1, "/agents").await?;
    let csrf = csrf_of(&page)?;
    let r = d.post(&c1, "/logout", &[("csrf", csrf.as_str())]).await?;
    assert_eq!(location(&r), "/login");
    let (st, _) = d.get(&c1, "/agents").await?;
    assert_eq!(st, StatusCode::SEE_OTHER, "signed out");

    let c2 = d.cookie(&raw).await?;
    assert_eq!(d.get(&c2, "/agents").await?.0, StatusCode::OK);
    assert!(store.tokens().revoke(row.id).await?);
    assert_eq!(
        d.get(&c2, "/agents").await?.0,
        StatusCode::SEE_OTHER,
        "revoking the token ends its sessions at once"
    );
    // A forged cookie of the right shape is no session either.
    let forged = format!("genesis_session={}", genesis_proto::auth::generate_token());
    assert_eq!(d.get(&forged, "/agents").await?.0, StatusCode::SEE_OTHER);
    h.stop().await
}

/// The live stream of `path` (an agent page) for `cookie`.
async fn live(d: &Dash, cookie: &str, path: &str) -> anyhow::Result<reqwest::Response> {
    Ok(d.http
        .get(format!("{}{path}/events", d.base))
        .header(COOKIE, cookie)
        .send()
        .await?)
}

/// Signing out ends an open live stream with an `end` event, then closes
/// it, within the re-check interval; a live stream of another session of the
/// same token stays open.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn signing_out_ends_the_open_live_stream(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let (h, d) = start_dashboard_with(&pool, |c| c.stream_recheck_secs = 1).await?;
    let c = d.cookie(&op).await?;
    let other = d.cookie(&op).await?;
    let path = format!("/agents/{}", inst.id);
    let (_, page) = d.get(&c, &path).await?;
    let csrf = csrf_of(&page)?;
    let mut sse = live(&d, &c, &path).await?;
    assert_eq!(sse.status(), StatusCode::OK);
    let mut kept = live(&d, &other, &path).await?;
    assert_eq!(kept.status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = d.post(&c, "/logout", &[("csrf", csrf.as_str())]).await?;
    assert_eq!(location(&r), "/login");
    let mut seen = String::new();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = sse.chunk().await? {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        Ok::<_, anyhow::Error>(())
    })
    .await;
    assert!(matches!(ended, Ok(Ok(()))), "still open: {seen}");
    assert!(seen.contains("event: end"), "{seen}");
    assert!(seen.contains("signed out"), "{seen}");
    // The other session's stream sends nothing but keep-alives meanwhile.
    let still = tokio::time::timeout(Duration::from_millis(1500), kept.chunk()).await;
    assert!(
        still.is_err(),
        "the other session's stream stays open: {still:?}"
    );
    h.stop().await
}

/// Live streams are capped per token: past it the page's stream is
/// answered 429, and a closed stream frees its slot.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn live_streams_past_the_tokens_cap_are_refused_429(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let (h, d) = start_dashboard_with(&pool, |c| c.streams_per_token = 1).await?;
    let c = d.cookie(&op).await?;
    let path = format!("/agents/{}", inst.id);
    let first = live(&d, &c, &path).await?;
    assert_eq!(first.status(), StatusCode::OK);
    let second = live(&d, &c, &path).await?;
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(
        second.text().await?.contains("GENESIS_STREAMS_PER_TOKEN"),
        "names the cap"
    );
    drop(first);
    eventually(Duration::from_secs(5), || async {
        let r = live(&d, &c, &path).await?;
        Ok((r.status() == StatusCode::OK).then_some(()))
    })
    .await?;
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_task_pages_show_coder_progress_artifacts_and_windows_hold(
    pool: PgPool,
) -> anyhow::Result<()> {
    use genesis_store::coding_tasks::{ArtifactCaps, NewCodingTask};
    use genesis_store::windows_holds::{HoldClaim, HoldLease};
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let new = |title: &str| NewCodingTask {
        title: title.into(),
        instructions: "fix the <b>build</b>".into(),
        coder_id: Some("coder-7".into()),
        preset_id: None,
        model: "claude-opus-4-8".into(),
        provider: "anthropic".into(),
        backend: String::new(),
        credential_names: vec![],
        repository: "https://git.example/repo.git".into(),
        branch: "main".into(),
        steering_instance_id: None,
    };
    let tasks = store.coding_tasks();
    let mine = tasks.create(a, new("<script>alert(1)</script>")).await?;
    let theirs = tasks.create(b, new("tenant b's secret task")).await?;
    tasks
        .report_progress(a, mine.id, "compiling", Some(40))
        .await?;
    let caps = ArtifactCaps {
        max_bytes: 1024,
        max_count: 4,
        max_total_bytes: 4096,
    };
    let patch = tasks
        .attach_artifact(
            a,
            mine.id,
            "patch",
            "fix.diff",
            "--- a\n+++ b\n+<img src=x onerror=alert(1)>\n",
            caps,
        )
        .await?;
    // Its coder's calls have cost 1.25 USD.
    store
        .llm()
        .record_coder_attempt(
            a,
            mine.id,
            &genesis_store::llm::NewCallAttempt {
                instance_id: Uuid::nil(),
                session: Uuid::nil(),
                invocation_id: "turn-1".into(),
                site_id: "Coder:Default".into(),
                requested_model: "claude-opus-4-8".into(),
                served_model: "claude-opus-4-8".into(),
                provider: "anthropic".into(),
                credential_name: "k".into(),
                outcome: "success".into(),
                input_tokens: 10,
                output_tokens: 10,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                latency_ms: 5,
                error_message: String::new(),
                cost_usd: 1.25,
                priced_as: None,
                pricing_source: None,
                prompt_overlay_sha256: None,
            },
            genesis_store::llm::CreditDraw {
                week_start: genesis_store::credit::week_start(chrono::Utc::now()),
                limit_usd: 60.0,
            },
        )
        .await?;
    let HoldClaim::Claimed { revision } = store
        .windows_holds()
        .claim(a, "coder-7", Duration::from_secs(30))
        .await?
    else {
        anyhow::bail!("a fresh holder's first claim is its own");
    };
    store
        .windows_holds()
        .fill(
            a,
            "coder-7",
            revision,
            &HoldLease {
                lease_id: "lease-1",
                session_id: "secret-session-id",
                host: "win-host-3",
                expires_at: None,
            },
        )
        .await?;

    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let (h, d) = start_dashboard(&pool).await?;
    let c = d.cookie(&op_a).await?;
    let (st, list) = d.get(&c, "/tasks").await?;
    assert_eq!(st, StatusCode::OK);
    assert!(list.contains(&mine.id.to_string()), "{list}");
    assert!(
        !list.contains("secret task"),
        "another tenant's task is not listed"
    );
    assert!(
        list.contains("&lt;script&gt;") && !list.contains("<script>alert"),
        "the title is escaped"
    );
    assert!(list.contains("coder-7"));
    assert!(list.contains("40% · compiling"), "{list}");
    assert!(list.contains("<td>1</td>"), "one artifact: {list}");
    assert!(list.contains("<td>$1.25</td>"), "the task's cost: {list}");
    assert!(list.contains("win-host-3"), "the coder's Windows machine");
    assert!(
        !list.contains("secret-session-id"),
        "the pool's ids stay with the lane"
    );

    let (st, page) = d.get(&c, &format!("/tasks/{}", mine.id)).await?;
    assert_eq!(st, StatusCode::OK);
    assert!(
        page.contains("fix.diff") && page.contains("patch"),
        "{page}"
    );
    assert!(page.contains("fix the &lt;b&gt;build&lt;/b&gt;"));
    assert!(page.contains("held on <code>win-host-3</code>"), "{page}");
    assert!(
        !page.contains("+++ b"),
        "the task page lists artifacts, not their content"
    );
    assert!(page.contains("<dd id=\"cost\">$1.25</dd>"), "{page}");
    let at = format!("/tasks/{}/artifacts/{}", mine.id, patch.id);
    assert!(page.contains(&format!("href=\"{at}\"")), "{page}");
    // The artifact's page: its content, escaped.
    let (st, shown) = d.get(&c, &at).await?;
    assert_eq!(st, StatusCode::OK);
    assert!(shown.contains("+++ b"), "{shown}");
    assert!(
        shown.contains("&lt;img src=x") && !shown.contains("<img src=x"),
        "the content is escaped: {shown}"
    );
    // Another tenant's operator, or another task's id: not found.
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let cb = d.cookie(&op_b).await?;
    let (st, _) = d.get(&cb, &at).await?;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = d
        .get(&c, &format!("/tasks/{}/artifacts/{}", theirs.id, patch.id))
        .await?;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = d
        .get(&c, &format!("/tasks/{}/artifacts/nope", mine.id))
        .await?;
    assert_eq!(st, StatusCode::BAD_REQUEST);

    let (st, _) = d.get(&c, &format!("/tasks/{}", theirs.id)).await?;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = d.get(&c, "/tasks/not-a-uuid").await?;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    h.stop().await
}

/// The agent page links each ledger turn to its trace; the trace page shows
/// the three-turn episode with its fallback attempt and each attempt's
/// cost, every text escaped; another tenant's trace is 404, bad ids 400,
/// and a pruned journal is said so.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_trace_page_shows_an_episode_with_a_fallback_and_another_tenants_is_404(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let ep = seed_episode(&store, a).await?;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let (h, d) = start_dashboard(&pool).await?;
    let c = d.cookie(&op_a).await?;
    let inst = ep.instance.id;
    let at = format!("/agents/{inst}/turns/{}/trace", ep.turn_number);

    let (st, page) = d.get(&c, &format!("/agents/{inst}")).await?;
    assert_eq!(st, StatusCode::OK);
    assert!(page.contains(&format!("href=\"{at}\"")), "{page}");

    let (st, trace) = d.get(&c, &at).await?;
    assert_eq!(st, StatusCode::OK, "{trace}");
    for part in [
        "<dd id=\"completion\">completed</dd>",
        "Budget used",
        "Decision mapping",
        "You are the SOA of this tenant.",
        "<h3>LLM turn 1</h3>",
        "<h3>LLM turn 2</h3>",
        "<h3>LLM turn 3</h3>",
        "Tool call <code>soa_send_message</code>",
        "<td>server_error</td>",
        "HTTP 529 overloaded",
        "<td>openai</td><td>gpt-5</td><td>gpt-5</td><td>success</td>",
        "<td class=\"num\">$0.02</td>",
        "END-OF-OBJECTIVE",
    ] {
        assert!(trace.contains(part), "{part:?} missing in {trace}");
    }
    assert_eq!(trace.matches("class=\"step llm-turn\"").count(), 3);
    // Everything is escaped: the objective's script and the arguments' markup.
    assert!(
        trace.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !trace.contains("<script>alert"),
        "the messages are escaped"
    );
    assert!(trace.contains("hello &lt;b&gt;operator&lt;/b&gt;") && !trace.contains("<b>operator"));

    // Another tenant's operator: 404; bad ids: 400.
    let cb = d.cookie(&op_b).await?;
    let (st, _) = d.get(&cb, &at).await?;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = d
        .get(
            &c,
            &format!("/agents/{inst}/turns/{}/trace", ep.turn_number + 1),
        )
        .await?;
    assert_eq!(st, StatusCode::NOT_FOUND);
    for bad in [
        "/agents/not-a-uuid/turns/1/trace".to_owned(),
        format!("/agents/{inst}/turns/0/trace"),
        format!("/agents/{inst}/turns/one/trace"),
    ] {
        let (st, _) = d.get(&c, &bad).await?;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}");
    }

    // The journal pruned: the turn is still shown, and the page says why
    // it has no steps.
    let event = store
        .traces()
        .turn(a, inst, ep.turn_number)
        .await?
        .turn
        .event_id
        .ok_or_else(|| anyhow::anyhow!("the turn consumed an event"))?;
    genesis_store::inspect::force_journal_age(&pool, event, Duration::from_secs(31 * 24 * 3600))
        .await?;
    store
        .journal()
        .prune(genesis_core::journal::DEFAULT_RETENTION, 100)
        .await?;
    let (st, pruned) = d.get(&c, &at).await?;
    assert_eq!(st, StatusCode::OK);
    assert!(pruned.contains("id=\"no-journal\""), "{pruned}");
    assert!(pruned.contains("<dd id=\"completion\">completed</dd>"));
    assert!(!pruned.contains("class=\"step llm-turn\""));
    h.stop().await
}
