//! The TLS client side: which servers a client trusts (the system's roots
//! plus an optional extra CA file) and the identity it presents for mutual
//! TLS, as a tonic [`ClientTlsConfig`] (gRPC) or a rustls
//! [`rustls::ClientConfig`] (NATS). Files are read and checked here, so a
//! bad one fails at start-up with its setting named, not at the first
//! handshake. This module must never disable certificate verification.

use rustls::RootCertStore;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::{SettingPath, TlsError, pem};

/// A client certificate and its key, for servers that verify clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// PEM certificate chain, leaf first.
    pub cert: SettingPath,
    /// PEM private key of the certificate.
    pub key: SettingPath,
}

impl ClientIdentity {
    /// Both or neither of `cert` and `key`; one alone is an error naming
    /// both settings.
    pub fn pair(
        cert: Option<SettingPath>,
        key: Option<SettingPath>,
    ) -> Result<Option<ClientIdentity>, TlsError> {
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(ClientIdentity { cert, key })),
            (None, None) => Ok(None),
            (Some(c), None) => Err(TlsError::Config(format!(
                "{} is set without its private key: a client certificate needs both",
                c.setting
            ))),
            (None, Some(k)) => Err(TlsError::Config(format!(
                "{} is set without its certificate: a client certificate needs both",
                k.setting
            ))),
        }
    }
}

/// What a TLS client trusts and presents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// An extra CA (PEM) trusted beside the system roots.
    pub ca: Option<SettingPath>,
    /// The client certificate, for servers that require one.
    pub identity: Option<ClientIdentity>,
}

impl ClientTls {
    /// The tonic configuration: the system roots, the extra CA and the
    /// identity, every file read and checked now.
    pub fn tonic(&self) -> Result<ClientTlsConfig, TlsError> {
        let mut config = ClientTlsConfig::new().with_native_roots();
        if let Some(ca) = &self.ca {
            let bytes = pem::read(ca)?;
            pem::certs_in(ca, &bytes)?;
            config = config.ca_certificate(Certificate::from_pem(bytes));
        }
        if let Some(id) = &self.identity {
            let (cert, key) = identity_pem(id)?;
            config = config.identity(Identity::from_pem(cert, key));
        }
        Ok(config)
    }

    /// The rustls configuration (for clients that take one, NATS).
    pub fn rustls(&self) -> Result<rustls::ClientConfig, TlsError> {
        let mut roots = RootCertStore::empty();
        // Unreadable system certificates are skipped: the extra CA may be
        // all a private deployment needs.
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        if let Some(ca) = &self.ca {
            roots.extend(pem::roots(ca)?.roots);
        }
        let builder = rustls::ClientConfig::builder_with_provider(crate::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Rustls(e.to_string()))?
            .with_root_certificates(roots);
        match &self.identity {
            None => Ok(builder.with_no_client_auth()),
            Some(id) => builder
                .with_client_auth_cert(pem::certs(&id.cert)?, pem::key(&id.key)?)
                .map_err(|e| mismatched(id, e)),
        }
    }
}

/// The identity's PEM files, each checked to hold what it should and the
/// key checked to match the certificate.
fn identity_pem(id: &ClientIdentity) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let cert = pem::read(&id.cert)?;
    let key = pem::read(&id.key)?;
    let chain = pem::certs_in(&id.cert, &cert)?;
    let der = pem::key_in(&id.key, &key)?;
    rustls::sign::CertifiedKey::from_der(chain, der, &crate::provider())
        .map_err(|e| mismatched(id, e))?;
    Ok((cert, key))
}

/// The identity's key and certificate, by setting and path, do not make a
/// pair (`e`: rustls's reason).
fn mismatched(id: &ClientIdentity, e: impl std::fmt::Display) -> TlsError {
    TlsError::Config(format!(
        "{} {} does not go with {} {}: {e}",
        id.key.setting,
        id.key.path.display(),
        id.cert.setting,
        id.cert.path.display()
    ))
}

/// Whether `err` (or an error in its `source()` chain) is a TLS failure: a
/// refused certificate, a peer that does not speak TLS, a failed
/// handshake. Lets a client tell an operator "TLS" rather than "unreachable".
pub fn is_tls_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if e.is::<rustls::Error>()
            || e.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        current = e.source();
    }
    false
}
