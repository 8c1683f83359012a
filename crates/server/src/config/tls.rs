//! `[tls]`: HTTPS. Sockets that speak only TLS (`listen`), sockets that speak both by sniffing
//! the first byte (`auto`, as Icecast-KH and Icecast 2.5 `tls="auto"`), and the certificates:
//! PEM chains with their PEM keys (PKCS#8, RSA or SEC1 EC), the first one the default and the
//! others chosen by the name the client asks for (SNI). `ca-file` is what relays verify HTTPS
//! upstreams against (the built-in web PKI roots when unset). Loading the files is
//! `net/tls.rs`'s; SIGHUP loads them again.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The `[tls]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct TlsConfig {
    /// Sockets speaking only TLS (HTTPS), e.g. `["0.0.0.0:8443"]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub listen: Vec<SocketAddr>,
    /// Sockets speaking TLS when a connection's first byte is a TLS handshake record (`0x16`),
    /// plain HTTP otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto: Vec<SocketAddr>,
    /// Certificates: the first is served to clients that send no name or a name no
    /// certificate covers; the others to clients asking for a name they cover (SNI).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub certificate: Vec<CertificateFiles>,
    /// PEM file of the certificate authorities relays trust for `https://` upstreams (the
    /// built-in web PKI roots when unset).
    pub ca_file: Option<PathBuf>,
}

/// One certificate: its chain and its key, each a PEM file (Let's Encrypt's `fullchain.pem`
/// and `privkey.pem`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CertificateFiles {
    /// The certificate chain, leaf first (PEM `CERTIFICATE` blocks).
    pub cert: PathBuf,
    /// The private key (PEM `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`).
    pub key: PathBuf,
}

impl TlsConfig {
    /// Whether nothing is set (the section is then left out of a written configuration).
    pub fn is_default(&self) -> bool {
        *self == TlsConfig::default()
    }

    /// Whether any socket speaks TLS.
    pub fn enabled(&self) -> bool {
        !self.listen.is_empty() || !self.auto.is_empty()
    }

    /// Checks that TLS sockets have a certificate.
    ///
    /// Errors: a message naming the key at fault.
    pub fn validate(&self) -> Result<(), String> {
        if self.enabled() && self.certificate.is_empty() {
            return Err("`tls.listen`/`tls.auto` need at least one `[[tls.certificate]]`".into());
        }
        Ok(())
    }
}
