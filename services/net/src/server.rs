//! The TLS server side: [`ServerTlsArgs`] (the `GENESIS_TLS_*` settings a
//! serving bin flattens into its configuration), [`ServerTls`] (the
//! certificate in use, re-read from its files when they change, and the
//! optional client-certificate verifier), and [`TlsListener`], the accept
//! loop that hands finished handshakes to tonic (as an incoming stream) or
//! to axum (as a listener).
//!
//! A new certificate reaches new connections only; established ones keep
//! the one they shook hands with. A changed file that cannot be used (a
//! half-written pair, a key that does not match) leaves the previous
//! certificate serving and is logged as an error, never a crash: the files
//! are re-checked at the next poll. This module must never serve a
//! connection whose handshake failed, and never log a key.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;

use crate::{SettingPath, TlsError, pem};

/// The setting naming the served certificate chain.
pub const CERT_ENV: &str = "GENESIS_TLS_CERT_FILE";
/// The setting naming the served certificate's private key.
pub const KEY_ENV: &str = "GENESIS_TLS_KEY_FILE";
/// The setting naming the CA client certificates must be signed by.
pub const CLIENT_CA_ENV: &str = "GENESIS_TLS_CLIENT_CA_FILE";

/// ALPN of a gRPC listener: HTTP/2 only (a gRPC client refuses anything
/// else).
pub const ALPN_GRPC: &[&[u8]] = &[b"h2"];
/// ALPN of an HTTP listener (the dashboard): HTTP/2 or HTTP/1.1.
pub const ALPN_HTTP: &[&[u8]] = &[b"h2", b"http/1.1"];

/// How long a client may take to finish its TLS handshake. A slow or
/// silent client holds only its own task, never the accept loop.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Finished handshakes waiting for the server to take them.
const ACCEPTED_BACKLOG: usize = 128;

/// The longest certificate re-check period, in seconds (a day).
pub const MAX_RELOAD_SECS: u64 = 86_400;

/// The server TLS settings a serving bin flattens into its configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args, serde::Serialize)]
pub struct ServerTlsArgs {
    /// PEM certificate chain (leaf first) this service's network listeners
    /// serve over TLS (gRPC; on control the dashboard too). Give it with
    /// GENESIS_TLS_KEY_FILE, or neither to serve plaintext. Re-read when it
    /// changes (see GENESIS_TLS_RELOAD_SECS), so a renewed certificate
    /// (cert-manager) needs no restart.
    #[arg(long, env = CERT_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of GENESIS_TLS_CERT_FILE (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = KEY_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key_file: Option<PathBuf>,
    /// Seconds between checks of the certificate and key files for a
    /// change (1 to 86400); new connections get a changed pair once both
    /// files are read and match. A pair that cannot be used is logged and
    /// the previous certificate keeps serving.
    #[arg(long, env = "GENESIS_TLS_RELOAD_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=MAX_RELOAD_SECS))]
    pub tls_reload_secs: u64,
}

impl ServerTlsArgs {
    /// Plaintext, with the default re-check period.
    pub fn plaintext() -> Self {
        ServerTlsArgs {
            tls_cert_file: None,
            tls_key_file: None,
            tls_reload_secs: 30,
        }
    }

    /// Whether TLS is configured (both files given).
    pub fn enabled(&self) -> bool {
        self.tls_cert_file.is_some() && self.tls_key_file.is_some()
    }

    /// The period between checks of the files.
    pub fn reload_every(&self) -> Duration {
        Duration::from_secs(self.tls_reload_secs.clamp(1, MAX_RELOAD_SECS))
    }

    /// Refuse a half-given pair and an out-of-range period, naming the
    /// settings (the files themselves are read by [`Self::load`]).
    pub fn validate(&self) -> Result<(), TlsError> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(_), None) => Err(TlsError::Config(format!(
                "{CERT_ENV} is set but {KEY_ENV} is not: TLS needs the certificate and its \
                 private key (set both, or neither to serve plaintext)"
            ))),
            (None, Some(_)) => Err(TlsError::Config(format!(
                "{KEY_ENV} is set but {CERT_ENV} is not: TLS needs the certificate and its \
                 private key (set both, or neither to serve plaintext)"
            ))),
            _ if !(1..=MAX_RELOAD_SECS).contains(&self.tls_reload_secs) => Err(TlsError::Config(
                format!("GENESIS_TLS_RELOAD_SECS must be 1 to {MAX_RELOAD_SECS}"),
            )),
            _ => Ok(()),
        }
    }

    /// The server TLS these settings describe, its files read now (`None`
    /// when plaintext). `client_ca`: require a client certificate signed
    /// by this CA.
    pub fn load(&self, client_ca: Option<&SettingPath>) -> Result<Option<ServerTls>, TlsError> {
        self.validate()?;
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => ServerTls::load(
                SettingPath::new(CERT_ENV, cert),
                SettingPath::new(KEY_ENV, key),
                client_ca,
            )
            .map(Some),
            _ => match client_ca {
                Some(ca) => Err(TlsError::Config(format!(
                    "{} is set but {CERT_ENV} and {KEY_ENV} are not: client certificates are \
                     verified only over TLS",
                    ca.setting
                ))),
                None => Ok(None),
            },
        }
    }
}

/// What identifies one version of the files: a replaced or rewritten file
/// changes its modification time, length or inode (Kubernetes swaps a
/// Secret volume's files by renaming a directory).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(file: &SettingPath) -> Result<Stamp, TlsError> {
        let meta = std::fs::metadata(&file.path).map_err(|source| TlsError::Read {
            setting: file.setting,
            path: file.path.clone(),
            source,
        })?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Ok(Stamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode,
        })
    }
}

/// The certificate in use, swapped when its files change.
#[derive(Debug)]
struct ReloadingCert {
    cert: SettingPath,
    key: SettingPath,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The stamps of the files last tried, used or not: a pair that failed
    /// is tried again only once a file changes again.
    seen: Mutex<(Stamp, Stamp)>,
}

impl ReloadingCert {
    fn read(
        cert: &SettingPath,
        key: &SettingPath,
        provider: &CryptoProvider,
    ) -> Result<CertifiedKey, TlsError> {
        let chain = pem::certs(cert)?;
        let der = pem::key(key)?;
        CertifiedKey::from_der(chain, der, provider).map_err(|e| {
            TlsError::Config(format!(
                "{KEY_ENV} {} does not go with {CERT_ENV} {}: {e}",
                key.path.display(),
                cert.path.display()
            ))
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

/// A service's server TLS: the certificate (re-read on change) and, for
/// mutual TLS, the verifier of client certificates.
#[derive(Clone)]
pub struct ServerTls {
    cert: Arc<ReloadingCert>,
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert", &self.cert.cert.path)
            .field("key", &self.cert.key.path)
            .field("client_certificates", &self.client_verifier.is_some())
            .finish()
    }
}

impl ServerTls {
    /// Read `cert` and `key` now (a missing, unreadable or mismatched file
    /// is an error naming its setting) and, when `client_ca` is given,
    /// require every client to present a certificate it signed.
    pub fn load(
        cert: SettingPath,
        key: SettingPath,
        client_ca: Option<&SettingPath>,
    ) -> Result<ServerTls, TlsError> {
        let provider = crate::provider();
        let stamps = (Stamp::of(&cert)?, Stamp::of(&key)?);
        let current = ReloadingCert::read(&cert, &key, &provider)?;
        let client_verifier = match client_ca {
            None => None,
            Some(ca) => Some(
                WebPkiClientVerifier::builder_with_provider(
                    Arc::new(pem::roots(ca)?),
                    provider.clone(),
                )
                .build()
                .map_err(|e| TlsError::Content {
                    setting: ca.setting,
                    path: ca.path.clone(),
                    reason: format!("cannot verify client certificates with it: {e}"),
                })?,
            ),
        };
        Ok(ServerTls {
            cert: Arc::new(ReloadingCert {
                cert,
                key,
                provider,
                current: RwLock::new(Arc::new(current)),
                seen: Mutex::new(stamps),
            }),
            client_verifier,
        })
    }

    /// Whether clients must present a certificate.
    pub fn verifies_clients(&self) -> bool {
        self.client_verifier.is_some()
    }

    /// A rustls server configuration serving the current certificate with
    /// the given ALPN protocols ([`ALPN_GRPC`], [`ALPN_HTTP`]).
    pub fn server_config(&self, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, TlsError> {
        let builder = ServerConfig::builder_with_provider(self.cert.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Rustls(e.to_string()))?;
        let builder = match &self.client_verifier {
            Some(v) => builder.with_client_cert_verifier(v.clone()),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(self.cert.clone());
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }

    /// Re-read the files if either changed since last tried: `Ok(true)`
    /// when a new certificate now serves, `Ok(false)` when nothing changed,
    /// an error (the previous certificate still serving) when the changed
    /// files cannot be used.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let c = &self.cert;
        let stamps = (Stamp::of(&c.cert)?, Stamp::of(&c.key)?);
        {
            let mut seen = c.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if *seen == stamps {
                return Ok(false);
            }
            *seen = stamps;
        }
        let fresh = ReloadingCert::read(&c.cert, &c.key, &c.provider)?;
        *c.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(fresh);
        Ok(true)
    }

    /// Check the files every `every` until `stop`, logging each reload and
    /// each changed pair that could not be used (run it as a task).
    pub async fn watch(self, every: Duration, stop: CancellationToken) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            match self.reload_if_changed() {
                Ok(true) => tracing::info!(
                    cert = %self.cert.cert.path.display(),
                    "TLS certificate reloaded; new connections use it"
                ),
                Ok(false) => {}
                Err(e) => tracing::error!(
                    error = %e,
                    "TLS certificate files changed but cannot be used; still serving the previous certificate"
                ),
            }
        }
    }
}

/// One accepted TLS connection. Tonic sees its peer as a TCP peer
/// ([`tonic::transport::server::TcpConnectInfo`]), so the per-peer limits
/// keyed on the remote address work the same over TLS.
pub struct TlsConn {
    stream: tokio_rustls::server::TlsStream<TcpStream>,
    local: Option<SocketAddr>,
    remote: SocketAddr,
}

impl TlsConn {
    /// The client's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.remote
    }
}

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        tonic::transport::server::TcpConnectInfo {
            local_addr: self.local,
            remote_addr: Some(self.remote),
        }
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// A TCP listener whose connections are handed over only once their TLS
/// handshake succeeded. Each handshake runs in its own task under
/// [`HANDSHAKE_TIMEOUT`]; a client that fails it (a plaintext client, an
/// unknown or missing client certificate) is logged and dropped. The accept
/// loop stops when the listener (or its stream) is dropped.
pub struct TlsListener {
    accepted: mpsc::Receiver<TlsConn>,
    local: SocketAddr,
}

impl TlsListener {
    /// Start accepting on `listener` with `config`.
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, accepted) = mpsc::channel(ACCEPTED_BACKLOG);
        tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), tx));
        Ok(TlsListener { accepted, local })
    }

    /// The connections as the incoming stream tonic serves from.
    pub fn into_incoming(self) -> impl Stream<Item = Result<TlsConn, std::io::Error>> {
        tokio_stream::wrappers::ReceiverStream::new(self.accepted).map_ok()
    }
}

/// `Stream<Item = T>` → `Stream<Item = Result<T, io::Error>>`.
trait MapOk: Stream + Sized {
    fn map_ok(self) -> OkStream<Self> {
        OkStream(self)
    }
}

impl<S: Stream> MapOk for S {}

struct OkStream<S>(S);

impl<S: Stream + Unpin> Stream for OkStream<S> {
    type Item = Result<S::Item, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.0).poll_next(cx).map(|o| o.map(Ok))
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsConn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(conn) => {
                let peer = conn.remote;
                (conn, peer)
            }
            // The accept loop ends only once this receiver is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, tx: mpsc::Sender<TlsConn>) {
    loop {
        let accepted = tokio::select! {
            () = tx.closed() => return,
            r = listener.accept() => r,
        };
        let (tcp, remote) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                // Out of descriptors and the like: pause instead of spinning.
                tracing::warn!(error = %e, "accepting a TCP connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let local = tcp.local_addr().ok();
        let acceptor = acceptor.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let _ = tx
                        .send(TlsConn {
                            stream,
                            local,
                            remote,
                        })
                        .await;
                }
                Ok(Err(e)) => {
                    tracing::info!(peer = %remote, error = %e, "TLS handshake refused");
                }
                Err(_) => {
                    tracing::info!(peer = %remote, "TLS handshake timed out");
                }
            }
        });
    }
}
