//! How the controller and an agent reach each other: plain TCP, TLS over TCP (rustls: the
//! agent's certificate and key, the controller's CA), or an SSH session's standard input and
//! output (`ssh://`, the agent started there by `ssh … throng bench agent --stdio`, as Tsung
//! starts its nodes). Every kind becomes a [`Reader`] and a [`Writer`] of the one line protocol
//! ([`crate::dist::wire`]).

use crate::dist::wire::{Reader, Writer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A TLS stream shared by a reading and a writing thread: each read holds the lock only for
/// one attempt of at most [`POLL`], so writes get through while the reader waits.
struct Shared<T>(Arc<Mutex<T>>);

/// How long one locked read attempt waits.
pub const POLL: Duration = Duration::from_millis(50);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T: Read> Read for Shared<T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let r = {
                let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
                s.read(buf)
            };
            match r {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                other => return other,
            }
        }
    }
}

impl<T: Write> Write for Shared<T> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}

/// Both halves of a plain TCP link.
///
/// Errors: the socket cannot be cloned.
pub fn plain(s: TcpStream) -> std::io::Result<(Reader, Writer)> {
    s.set_nodelay(true)?;
    let w = s.try_clone()?;
    Ok((Reader::new(Box::new(s)), Writer::new(Box::new(w))))
}

fn stream_of<T: Read + Write + Send + 'static>(
    s: &TcpStream,
    stream: T,
) -> std::io::Result<(Reader, Writer)> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(POLL))?;
    let shared = Shared(Arc::new(Mutex::new(stream)));
    Ok((
        Reader::new(Box::new(shared.clone())),
        Writer::new(Box::new(shared)),
    ))
}

/// The controller's side of a TLS link to `host` over `s`, trusting the CA in `ca` (PEM).
///
/// Errors: the CA file, a host name that cannot be a TLS name.
pub fn tls_client(s: TcpStream, host: &str, ca: &Path) -> Result<(Reader, Writer), String> {
    let config = crate::net::tls::client_config(false, Some(ca)).map_err(|e| e.to_string())?;
    let name = ServerName::try_from(host.to_owned()).map_err(|e| format!("{host}: {e}"))?;
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let sock = s.try_clone().map_err(|e| e.to_string())?;
    stream_of(&sock, rustls::StreamOwned::new(conn, s)).map_err(|e| e.to_string())
}

/// The agent's TLS configuration from its certificate chain and key (PEM files).
///
/// Errors: a file that does not load, a key that does not fit.
pub fn tls_server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("{}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(config))
}

/// The agent's side of a TLS link over `s`.
///
/// Errors: the connection cannot be set up.
pub fn tls_server(
    s: TcpStream,
    config: Arc<rustls::ServerConfig>,
) -> Result<(Reader, Writer), String> {
    let conn = rustls::ServerConnection::new(config).map_err(|e| e.to_string())?;
    let sock = s.try_clone().map_err(|e| e.to_string())?;
    stream_of(&sock, rustls::StreamOwned::new(conn, s)).map_err(|e| e.to_string())
}
