//! Reading PEM certificates, private keys and CA bundles from files, with
//! errors that name the setting and the path. Must never put a file's
//! content in an error or a log line (a key file is a secret).

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::{SettingPath, TlsError};

/// The bytes of `file`.
pub fn read(file: &SettingPath) -> Result<Vec<u8>, TlsError> {
    std::fs::read(&file.path).map_err(|source| TlsError::Read {
        setting: file.setting,
        path: file.path.clone(),
        source,
    })
}

fn content(file: &SettingPath, reason: impl Into<String>) -> TlsError {
    TlsError::Content {
        setting: file.setting,
        path: file.path.clone(),
        reason: reason.into(),
    }
}

/// Every `CERTIFICATE` block of PEM `bytes` read from `file`, in order; at
/// least one.
pub fn certs_in(
    file: &SettingPath,
    bytes: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| content(file, format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(content(file, "holds no PEM CERTIFICATE block"));
    }
    Ok(certs)
}

/// The certificate chain in `file` (leaf first).
pub fn certs(file: &SettingPath) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    certs_in(file, &read(file)?)
}

/// The private key in PEM `bytes` read from `file` (PKCS#8, PKCS#1 or SEC1).
pub fn key_in(file: &SettingPath, bytes: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(bytes).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => content(
            file,
            "holds no PEM private key (PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block)",
        ),
        other => content(file, format!("not a valid PEM private key: {other}")),
    })
}

/// The private key in `file`.
pub fn key(file: &SettingPath) -> Result<PrivateKeyDer<'static>, TlsError> {
    key_in(file, &read(file)?)
}

/// The CA certificates in `file` as trust anchors; at least one, each a
/// certificate rustls accepts as a root.
pub fn roots(file: &SettingPath) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in certs(file)? {
        store
            .add(cert)
            .map_err(|e| content(file, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(store)
}
