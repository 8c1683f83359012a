//! TLS below any protocol: loading certificates and keys from PEM files, the rustls server
//! configuration (ring provider, TLS 1.2 and 1.3, `http/1.1`), the choice of certificate by
//! SNI, and the acceptor the accept loops use, whose configuration a reload (SIGHUP) swaps: new
//! handshakes get the new certificates, established connections keep theirs, and a set of files
//! that does not load is refused whole (the old one stays). Secret extraction is on, so a
//! listener's connection can hand its transmit keys to a fan-out shard once the handshake is
//! done (`fanout/seal.rs`); the session tickets (TLS 1.3, one per handshake, from one ticketer
//! kept across reloads) are written with the handshake, before that, and make a reconnect
//! storm's handshakes resumptions. Answering a ClientHello takes a unit of a CPU budget
//! ([`TlsAcceptor::handshake_permit`], a fair queue), and a connection refused before its
//! handshake gets a TLS alert ([`refuse`]), never plaintext. Also the first-byte sniffing of
//! `auto` sockets ([`looks_like_tls`]) and the client configuration of relays to `https://`
//! upstreams.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::config::tls::{CertificateFiles, TlsConfig};

/// Why certificates could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate file cannot be read or holds no PEM certificate.
    #[error("certificate {path}: {why}")]
    Cert {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A key file cannot be read, holds no PEM private key, or the key is of an unsupported
    /// type or does not match its certificate.
    #[error("key {path}: {why}")]
    Key {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A CA file for relays cannot be read or holds no usable certificate.
    #[error("CA file {path}: {why}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// No certificate is configured.
    #[error("no certificate configured")]
    NoCertificate,
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The first byte of a TLS connection: a handshake record (RFC 8446 §5.1, content type 22).
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// The refusal of a connection before its handshake: one fatal `internal_error` alert record
/// (RFC 8446 §6: content type 21, legacy version 3.3, length 2, level 2 = fatal, description
/// 80), which every TLS client reports as an alert from the server, not as garbage.
pub const REFUSAL_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 80];

/// How long a refusal waits for the client's first flight before answering: a reset sent while
/// its ClientHello sits unread could discard the alert before the client reads it.
pub const REFUSAL_READ: std::time::Duration = std::time::Duration::from_millis(500);

/// Refuses a connection on a TLS socket before its handshake: reads its first flight (for at
/// most [`REFUSAL_READ`]), writes [`REFUSAL_ALERT`] and closes. Returns the first bytes read,
/// so an `auto` socket's caller can tell a plain HTTP client (which gets a plaintext 503)
/// from a TLS one; the alert is written only when they look like TLS or none came.
pub async fn refuse(stream: &mut tokio::net::TcpStream, auto: bool) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut first = vec![0u8; 2048];
    let n = tokio::time::timeout(REFUSAL_READ, stream.read(&mut first))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(0);
    first.truncate(n);
    if !auto || first.first().is_none_or(|&b| looks_like_tls(b)) {
        let _ = stream.write_all(&REFUSAL_ALERT).await;
        let _ = stream.shutdown().await;
    }
    first
}

/// Whether a connection whose first byte is `first` speaks TLS (an `auto` socket's choice). No
/// HTTP method starts with byte 0x16.
pub fn looks_like_tls(first: u8) -> bool {
    first == HANDSHAKE_RECORD
}

/// The crypto provider every TLS configuration of the server uses (ring).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Loads one certificate chain and its key.
///
/// Errors: [`TlsError::Cert`], [`TlsError::Key`] (also when the key does not match).
pub fn load_certified_key(files: &CertificateFiles) -> Result<CertifiedKey, TlsError> {
    let cert_err = |why: String| TlsError::Cert {
        path: files.cert.clone(),
        why,
    };
    let key_err = |why: String| TlsError::Key {
        path: files.key.clone(),
        why,
    };
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| cert_err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_err(e.to_string()))?;
    if chain.is_empty() {
        return Err(cert_err("no PEM CERTIFICATE block".into()));
    }
    webpki::EndEntityCert::try_from(&chain[0])
        .map_err(|e| cert_err(format!("not a usable certificate: {e}")))?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| key_err(e.to_string()))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| key_err(format!("unsupported key: {e}")))?;
    let ck = CertifiedKey::new(chain, signer);
    ck.keys_match()
        .map_err(|e| key_err(format!("does not match {}: {e}", files.cert.display())))?;
    Ok(ck)
}

/// Picks a certificate by the name the client asks for (SNI): the first whose leaf is valid
/// for that name, else the first configured.
#[derive(Debug)]
struct SniResolver {
    certs: Vec<Arc<CertifiedKey>>,
}

impl SniResolver {
    fn pick(&self, name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let found = name
            .and_then(|n| ServerName::try_from(n.to_owned()).ok())
            .and_then(|n| {
                self.certs.iter().find(|ck| {
                    ck.end_entity_cert()
                        .ok()
                        .and_then(|der| webpki::EndEntityCert::try_from(der).ok())
                        .is_some_and(|ee| ee.verify_is_valid_for_subject_name(&n).is_ok())
                })
            });
        found.or_else(|| self.certs.first()).cloned()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.pick(hello.server_name())
    }
}

/// Builds the server configuration for the certificates of `tls`.
///
/// Errors: the first file that does not load ([`load_certified_key`]), or
/// [`TlsError::NoCertificate`].
pub fn server_config(
    tls: &TlsConfig,
    ticketer: Arc<dyn rustls::server::ProducesTickets>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    if tls.certificate.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let certs = tls
        .certificate
        .iter()
        .map(|c| load_certified_key(c).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SniResolver { certs }));
    // A listener's keys go to its fan-out shard: nothing may be left pending in rustls. The
    // TLS 1.3 ticket is written with the server's last handshake flight, so it is out before
    // the keys are taken (its record is counted in the sequence number they carry).
    config.enable_secret_extraction = true;
    config.ticketer = ticketer;
    config.send_tls13_tickets = 1;
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Checks that every certificate and key of `tls` loads (`check-config`); one message per
/// file at fault.
pub fn check(tls: &TlsConfig) -> Vec<String> {
    let mut problems: Vec<String> = tls
        .certificate
        .iter()
        .filter_map(|c| load_certified_key(c).err())
        .map(|e| e.to_string())
        .collect();
    if let Some(ca) = &tls.ca_file {
        if let Err(e) = root_store(Some(ca)) {
            problems.push(e.to_string());
        }
    }
    problems
}

/// Sessions kept for TLS 1.2 resumption by session ID (TLS 1.3 and ticket-capable TLS 1.2
/// clients resume by ticket, which costs the server no memory).
pub const SESSION_CACHE: usize = 4096;

/// Handshakes in progress at once per core: the CPU budget of handshakes. Others wait their
/// turn in a fair queue (within the connection's `header-timeout`), so a reconnect storm is
/// served in arrival order at the rate the CPU allows instead of every handshake slowing down
/// until all of them time out.
pub const HANDSHAKES_PER_CORE: usize = 8;

/// The TLS configuration the accept loops use now (a reload swaps it) and the budget of
/// handshakes in progress.
pub struct TlsAcceptor {
    current: ArcSwapOption<rustls::ServerConfig>,
    /// The one ticketer of the process: a reload keeps it, so tickets stay valid.
    ticketer: Arc<dyn rustls::server::ProducesTickets>,
    /// Units of the handshake budget ([`HANDSHAKES_PER_CORE`] per core).
    handshakes: tokio::sync::Semaphore,
}

impl std::fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("enabled", &self.current.load().is_some())
            .field("handshakes_free", &self.handshakes.available_permits())
            .finish()
    }
}

impl TlsAcceptor {
    /// An acceptor for the certificates of `tls` (none when no socket speaks TLS).
    ///
    /// Errors: as [`server_config`]; [`TlsError::Rustls`] when no ticketer can be made.
    pub fn from_config(tls: &TlsConfig) -> Result<TlsAcceptor, TlsError> {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let a = TlsAcceptor {
            current: ArcSwapOption::empty(),
            ticketer: rustls::crypto::ring::Ticketer::new()?,
            handshakes: tokio::sync::Semaphore::new(cores * HANDSHAKES_PER_CORE),
        };
        if tls.enabled() {
            a.current
                .store(Some(server_config(tls, a.ticketer.clone())?));
        }
        Ok(a)
    }

    /// Waits for a unit of the handshake budget, in arrival order; a handshake holds it while
    /// the server answers its ClientHello (`connection.rs`), not while it waits on the client.
    /// The caller bounds the wait (the connection's `header-timeout`).
    pub async fn handshake_permit(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.handshakes
            .acquire()
            .await
            .expect("the handshake budget is never closed")
    }

    /// Loads the certificates of `tls` again and uses them for new handshakes; on any error
    /// the previous ones stay.
    ///
    /// Errors: as [`server_config`].
    pub fn reload(&self, tls: &TlsConfig) -> Result<(), TlsError> {
        if !tls.enabled() && tls.certificate.is_empty() {
            return Ok(());
        }
        let config = server_config(tls, self.ticketer.clone())?;
        self.current.store(Some(config));
        Ok(())
    }

    /// The rustls configuration in force for a new handshake, if TLS is configured.
    pub fn server_config(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.current.load_full()
    }
}

/// The roots relays trust: the certificates of `ca_file`, or the built-in web PKI roots.
///
/// Errors: [`TlsError::Ca`] for a file that cannot be read or holds no certificate.
pub fn root_store(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            let err = |why: String| TlsError::Ca {
                path: path.to_owned(),
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
    Ok(roots)
}

/// The client configuration of relays to `https://` upstreams, trusting `ca_file` or the web
/// PKI roots.
///
/// Errors: as [`root_store`].
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let roots = root_store(ca_file)?;
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_cert(dir: &Path, name: &str, serial: u64) -> CertificateFiles {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.serial_number = Some(rcgen::SerialNumber::from(serial));
        let cert = params.self_signed(&key).unwrap();
        let files = CertificateFiles {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        files
    }

    #[test]
    fn sni_picks_the_certificate_covering_the_name_else_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let a = write_cert(dir.path(), "a.example", 1);
        let b = write_cert(dir.path(), "b.example", 2);
        let r = SniResolver {
            certs: vec![
                Arc::new(load_certified_key(&a).unwrap()),
                Arc::new(load_certified_key(&b).unwrap()),
            ],
        };
        let leaf = |ck: Arc<CertifiedKey>| ck.end_entity_cert().unwrap().to_vec();
        let ca = leaf(r.certs[0].clone());
        let cb = leaf(r.certs[1].clone());
        assert_eq!(leaf(r.pick(Some("b.example")).unwrap()), cb);
        assert_eq!(leaf(r.pick(Some("a.example")).unwrap()), ca);
        assert_eq!(leaf(r.pick(Some("c.example")).unwrap()), ca);
        assert_eq!(leaf(r.pick(None).unwrap()), ca);
    }

    #[test]
    fn bad_files_are_refused_and_a_reload_keeps_the_old_config() {
        let dir = tempfile::tempdir().unwrap();
        let a = write_cert(dir.path(), "a.example", 1);
        let b = write_cert(dir.path(), "b.example", 2);
        let mut tls = TlsConfig {
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            certificate: vec![a.clone()],
            ..TlsConfig::default()
        };
        let acceptor = TlsAcceptor::from_config(&tls).unwrap();
        let before = acceptor.current.load_full().unwrap();
        // A key of another certificate.
        tls.certificate = vec![CertificateFiles {
            cert: a.cert.clone(),
            key: b.key.clone(),
        }];
        let e = acceptor.reload(&tls).unwrap_err();
        assert!(matches!(e, TlsError::Key { .. }), "{e}");
        assert_eq!(check(&tls).len(), 1);
        // Not PEM at all.
        std::fs::write(dir.path().join("junk"), "junk").unwrap();
        tls.certificate = vec![CertificateFiles {
            cert: dir.path().join("junk"),
            key: a.key.clone(),
        }];
        assert!(matches!(acceptor.reload(&tls), Err(TlsError::Cert { .. })));
        assert!(Arc::ptr_eq(&before, &acceptor.current.load_full().unwrap()));
        tls.certificate = vec![b];
        acceptor.reload(&tls).unwrap();
        assert!(!Arc::ptr_eq(
            &before,
            &acceptor.current.load_full().unwrap()
        ));
        assert!(check(&tls).is_empty());
    }

    #[test]
    fn only_a_handshake_record_is_sniffed_as_tls() {
        assert!(looks_like_tls(0x16));
        for method in ["GET", "HEAD", "SOURCE", "PUT", "POST", "OPTIONS", "DELETE"] {
            assert!(!looks_like_tls(method.as_bytes()[0]));
        }
    }
}
