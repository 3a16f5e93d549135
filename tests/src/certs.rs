//! Test certificates made in-process: a CA, server leaves for `localhost`
//! and `127.0.0.1`, client leaves for mutual TLS, written as PEM files, and
//! a raw TLS handshake that reports the certificate a server presented.
//! The one home of the TLS tests' certificate helpers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A test certificate authority.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A leaf certificate and its key, PEM.
pub struct Leaf {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM (PKCS#8).
    pub key_pem: String,
    /// The certificate, DER (to compare with what a server presented).
    pub der: Vec<u8>,
}

impl TestCa {
    /// A fresh CA named `name`.
    pub fn new(name: &str) -> anyhow::Result<TestCa> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ok(TestCa {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate()?)?,
        })
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn leaf(&self, name: &str, usage: ExtendedKeyUsagePurpose) -> anyhow::Result<Leaf> {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        })
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub fn server(&self, name: &str) -> anyhow::Result<Leaf> {
        self.leaf(name, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate (mutual TLS).
    pub fn client(&self, name: &str) -> anyhow::Result<Leaf> {
        self.leaf(name, ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// Write the CA certificate to `dir/<name>.pem`.
    pub fn write(&self, dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
        let path = dir.join(format!("{name}.pem"));
        std::fs::write(&path, self.pem()).with_context(|| format!("write {}", path.display()))?;
        Ok(path)
    }
}

impl Leaf {
    /// Write the pair to `dir/<stem>.crt` and `dir/<stem>.key`, replacing
    /// what is there the way a Secret update does (write aside, rename), so
    /// a reader never sees half a file.
    pub fn write(&self, dir: &Path, stem: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        let cert = dir.join(format!("{stem}.crt"));
        let key = dir.join(format!("{stem}.key"));
        for (path, text) in [(&key, &self.key_pem), (&cert, &self.cert_pem)] {
            let aside = path.with_extension("tmp");
            std::fs::write(&aside, text)?;
            std::fs::rename(&aside, path)?;
        }
        Ok((cert, key))
    }
}

/// Shake hands with `addr` as a TLS client trusting `ca_pem` (a file),
/// presenting `identity` (cert and key files) when given, offering `alpn`;
/// the DER of the leaf certificate the server presented. A refused
/// handshake is the error.
pub async fn presented_certificate(
    addr: SocketAddr,
    ca_pem: &Path,
    identity: Option<(&Path, &Path)>,
    alpn: &[&[u8]],
) -> anyhow::Result<Vec<u8>> {
    use genesis_net::SettingPath;
    let tls = genesis_net::ClientTls {
        ca: Some(SettingPath::new("test CA", ca_pem)),
        identity: identity.map(|(c, k)| genesis_net::ClientIdentity {
            cert: SettingPath::new("test client cert", c),
            key: SettingPath::new("test client key", k),
        }),
    };
    let mut config = tls.rustls()?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost")?;
    let mut stream = connector.connect(name, tcp).await?;
    // TLS 1.3 reports a refused client certificate only after the client
    // finished: read once so the server's verdict arrives.
    let leaf = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .ok_or_else(|| anyhow::anyhow!("the server presented no certificate"))?;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await?;
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf))
        .await
        .context("no answer after the handshake")??;
    anyhow::ensure!(
        n > 0,
        "the server closed the connection after the handshake"
    );
    Ok(leaf)
}
