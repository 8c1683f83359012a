//! The TLS client side of `https://` listeners: a rustls configuration (ring provider) that
//! trusts a CA file, the web PKI roots, or anything (`--insecure`, for self-signed test
//! servers). Session resumption is off, so every connection of a run is a full handshake and
//! the handshake rate measured is the server's worst case.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Why the TLS client configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsClientError {
    /// The CA file cannot be read or holds no certificate.
    #[error("CA file {path}: {why}")]
    Ca {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// rustls refused the configuration.
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Accepts any certificate (`--insecure`); signatures are still checked.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The client configuration of a run's `https://` listeners.
///
/// Errors: [`TlsClientError::Ca`] for a CA file that does not load.
pub fn client_config(
    insecure: bool,
    ca: Option<&Path>,
) -> Result<Arc<rustls::ClientConfig>, TlsClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match ca {
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
            Some(path) => {
                let err = |why: String| TlsClientError::Ca {
                    path: path.display().to_string(),
                    why,
                };
                for c in CertificateDer::pem_file_iter(path).map_err(|e| err(e.to_string()))? {
                    roots
                        .add(c.map_err(|e| err(e.to_string()))?)
                        .map_err(|e| err(e.to_string()))?;
                }
                if roots.is_empty() {
                    return Err(err("no PEM CERTIFICATE block".into()));
                }
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}
