//! The one builder of NATS connection options every Genesis connection uses
//! (control's publisher and registry, the agent pods' consumer):
//! credentials (a `.creds` file, or a user and password, or those in the
//! URL), TLS (required by a `tls://` URL or `GENESIS_NATS_TLS_REQUIRED`,
//! upgraded whenever the server asks for it) with the system roots plus an
//! optional extra CA.
//!
//! This module must never log or return a password, a seed or a URL's
//! credentials: errors carry the URL redacted (genesis-telemetry's
//! `redact_url`) and name settings, never values.

use std::path::PathBuf;
use std::str::FromStr as _;

use crate::{ClientTls, SettingPath, TlsError};

/// The setting naming a NATS `.creds` file.
pub const CREDS_ENV: &str = "GENESIS_NATS_CREDS_FILE";
/// The setting naming the NATS user.
pub const USER_ENV: &str = "GENESIS_NATS_USER";
/// The setting holding the NATS user's password.
pub const PASSWORD_ENV: &str = "GENESIS_NATS_PASSWORD";
/// The setting naming an extra CA for the NATS server's certificate.
pub const CA_ENV: &str = "GENESIS_NATS_CA_FILE";

/// The NATS security settings every bin that connects to NATS flattens into
/// its configuration (beside its `GENESIS_NATS_URL`).
#[derive(Clone, Default, PartialEq, Eq, clap::Args, serde::Serialize)]
pub struct NatsArgs {
    /// NATS credentials file (`.creds`: a user JWT and its nkey seed), for
    /// a server secured by an operator and accounts. Not with
    /// GENESIS_NATS_USER or credentials in GENESIS_NATS_URL.
    #[arg(long, env = CREDS_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_creds_file: Option<PathBuf>,
    /// NATS user, with GENESIS_NATS_PASSWORD. A URL's own
    /// `nats://user:password@host` works too, but not both at once.
    #[arg(long, env = USER_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_user: Option<String>,
    /// Password of GENESIS_NATS_USER (secret: never printed or logged).
    #[arg(long, env = PASSWORD_ENV, hide_env_values = true)]
    #[serde(
        serialize_with = "genesis_telemetry::config_file::redacted_secret",
        skip_serializing_if = "Option::is_none"
    )]
    pub nats_password: Option<String>,
    /// Extra CA (PEM) trusted for the NATS server's certificate, beside the
    /// system roots.
    #[arg(long, env = CA_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_ca_file: Option<PathBuf>,
    /// Refuse to talk to NATS without TLS even when the URL is `nats://`
    /// (a `tls://` URL always requires it; either way TLS is used whenever
    /// the server asks for it).
    #[arg(long, env = "GENESIS_NATS_TLS_REQUIRED", default_value_t = false, action = clap::ArgAction::Set)]
    pub nats_tls_required: bool,
}

/// Prints no password.
impl std::fmt::Debug for NatsArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsArgs")
            .field("nats_creds_file", &self.nats_creds_file)
            .field("nats_user", &self.nats_user)
            .field("nats_password", &self.nats_password.as_ref().map(|_| "***"))
            .field("nats_ca_file", &self.nats_ca_file)
            .field("nats_tls_required", &self.nats_tls_required)
            .finish()
    }
}

/// Why a NATS connection could not be set up or made.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    /// The settings contradict each other or one is half-given.
    #[error("{0}")]
    Config(String),
    /// A file setting could not be used.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The server refused or could not be reached; `url` is redacted.
    #[error("NATS {url}: {reason}")]
    Connect { url: String, reason: String },
}

impl NatsArgs {
    /// Refuse half-given or doubled credentials and a URL that does not
    /// parse, naming the settings (never a value).
    pub fn validate(&self, url: &str) -> Result<(), NatsError> {
        let bad = |m: String| Err(NatsError::Config(m));
        match (&self.nats_user, &self.nats_password) {
            (Some(_), None) => {
                return bad(format!("{USER_ENV} is set but {PASSWORD_ENV} is not"));
            }
            (None, Some(_)) => {
                return bad(format!("{PASSWORD_ENV} is set but {USER_ENV} is not"));
            }
            _ => {}
        }
        if self.nats_creds_file.is_some() && self.nats_user.is_some() {
            return bad(format!(
                "{CREDS_ENV} and {USER_ENV} are two ways to log in to NATS: set one"
            ));
        }
        let mut url_has_user = false;
        for server in url.split(',') {
            let addr = async_nats::ServerAddr::from_str(server.trim()).map_err(|e| {
                NatsError::Config(format!(
                    "GENESIS_NATS_URL {}: {e}",
                    genesis_telemetry::config_file::redact_url(server.trim())
                ))
            })?;
            url_has_user |= addr.username().is_some();
        }
        if url_has_user && (self.nats_user.is_some() || self.nats_creds_file.is_some()) {
            return bad(format!(
                "GENESIS_NATS_URL carries credentials and {} is set too: give them once",
                if self.nats_user.is_some() {
                    USER_ENV
                } else {
                    CREDS_ENV
                }
            ));
        }
        Ok(())
    }

    /// What this client trusts: the system roots and the extra CA.
    pub fn client_tls(&self) -> ClientTls {
        ClientTls {
            ca: self
                .nats_ca_file
                .as_ref()
                .map(|p| SettingPath::new(CA_ENV, p)),
            identity: None,
        }
    }

    /// The connection options for `url` under `name` (the client name the
    /// server's monitoring shows): credentials, TLS and the CA, every file
    /// read now. Callers add their own timeouts.
    pub async fn options(
        &self,
        url: &str,
        name: &str,
    ) -> Result<async_nats::ConnectOptions, NatsError> {
        self.validate(url)?;
        let mut options = async_nats::ConnectOptions::new().name(name);
        if let Some(path) = &self.nats_creds_file {
            let file = SettingPath::new(CREDS_ENV, path);
            let text =
                String::from_utf8(crate::pem::read(&file)?).map_err(|_| TlsError::Content {
                    setting: CREDS_ENV,
                    path: path.clone(),
                    reason: "not a NATS credentials file (not text)".into(),
                })?;
            options = options.credentials(&text).map_err(|e| TlsError::Content {
                setting: CREDS_ENV,
                path: path.clone(),
                reason: format!("not a NATS credentials file (a user JWT and nkey seed): {e}"),
            })?;
        }
        if let (Some(user), Some(password)) = (&self.nats_user, &self.nats_password) {
            options = options.user_and_password(user.clone(), password.clone());
        } else if let Some((user, password)) = url_login(url) {
            // async-nats parses a URL's user and password but never sends
            // them: hand them over as options.
            options = options.user_and_password(user, password);
        }
        // async-nats builds its own rustls configuration from a process
        // default provider, which a graph with two providers lacks: hand it
        // one that names its provider.
        options = options
            .tls_client_config(self.client_tls().rustls()?)
            .require_tls(self.nats_tls_required);
        Ok(options)
    }

    /// Connect to `url` with [`Self::options`] plus whatever `tune` adds
    /// (timeouts, callbacks). A refusal names the redacted URL and why.
    pub async fn connect(
        &self,
        url: &str,
        name: &str,
        tune: impl FnOnce(async_nats::ConnectOptions) -> async_nats::ConnectOptions,
    ) -> Result<async_nats::Client, NatsError> {
        let options = tune(self.options(url, name).await?);
        options
            .connect(url)
            .await
            .map_err(|e| connect_error(url, &e))
    }
}

/// The user and password of the first server of `url` that carries both,
/// percent-decoded.
fn url_login(url: &str) -> Option<(String, String)> {
    url.split(',').find_map(|server| {
        let addr = async_nats::ServerAddr::from_str(server.trim()).ok()?;
        Some((
            percent_decode(addr.username()?),
            percent_decode(addr.password()?),
        ))
    })
}

/// `%XX` escapes decoded (a URL's userinfo is percent-encoded); anything
/// that is not a valid escape is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let hex = |b: Option<&u8>| b.and_then(|b| char::from(*b).to_digit(16));
    while let Some(&b) = bytes.get(i) {
        match (b, hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
            // Two hex digits make at most 255.
            (b'%', Some(h), Some(l)) => {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A connect failure as a [`NatsError`]: the URL redacted, the reason with
/// any URL inside it redacted too, and a hint for the two refusals an
/// operator most often meets.
pub fn connect_error(url: &str, e: &async_nats::ConnectError) -> NatsError {
    use async_nats::ConnectErrorKind as K;
    let detail = genesis_telemetry::config_file::redact_urls_in(&e.to_string()).into_owned();
    let reason = match e.kind() {
        K::AuthorizationViolation => format!(
            "the server refused the credentials ({detail}); check {CREDS_ENV}, {USER_ENV}/{PASSWORD_ENV} or the URL's user"
        ),
        K::Tls => format!("TLS failed ({detail}); check {CA_ENV} and the server's certificate"),
        _ if crate::is_tls_failure(e) => format!(
            "TLS failed ({detail}); is the server serving TLS, and is its certificate signed by \
             a system root or {CA_ENV}?"
        ),
        _ => detail,
    };
    NatsError::Connect {
        url: genesis_telemetry::config_file::redact_url(url),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_logins_are_read_and_percent_decoded() {
        assert_eq!(
            url_login("nats://a:b%40c%2Fd@h:4222"),
            Some(("a".into(), "b@c/d".into()))
        );
        assert_eq!(
            url_login("nats://h1:4222, tls://u:p@h2:4222"),
            Some(("u".into(), "p".into()))
        );
        assert_eq!(url_login("nats://h:4222"), None);
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }

    #[test]
    fn debug_and_dump_never_show_the_password() {
        let a = NatsArgs {
            nats_user: Some("u".into()),
            nats_password: Some("hunter2".into()),
            ..NatsArgs::default()
        };
        assert!(!format!("{a:?}").contains("hunter2"));
        let dumped = genesis_telemetry::config_file::dump(&a);
        assert!(!dumped.contains("hunter2"), "{dumped}");
        assert!(dumped.contains("nats_password = \"***\""), "{dumped}");
    }
}
