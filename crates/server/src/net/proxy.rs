//! The PROXY protocol on an accepted connection (`paths.proxy-protocol-from`): from a listed
//! load balancer, the first bytes may be a PROXY v1 or v2 header
//! (`throng_proto::proxy_protocol`) naming the client; it is read here, within the
//! header timeout, and the client's address replaces the peer's for everything downstream
//! (filters, throttles, the access log, `listclients`). Bytes after the header, and every byte
//! of a connection that sends none, are handed on as already read. The header has its own short
//! deadline ([`deadline`]): a balancer sends it as soon as it connects.

use std::net::SocketAddr;
use std::time::Duration;

use throng_proto::proxy_protocol::{parse, ProxyError};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The wait for a PROXY header when request heads get `header_timeout`: the shorter of the two
/// and [`super::PROMPT`] (a balancer, HAProxy `send-proxy` or nginx `proxy_protocol`, writes it
/// at once on connecting).
pub fn deadline(header_timeout: Duration) -> Duration {
    header_timeout.min(super::PROMPT)
}

/// Why a connection from a load balancer was closed before its request.
#[derive(Debug, thiserror::Error)]
pub enum ProxyReadError {
    /// The header is broken.
    #[error("{0}")]
    Header(#[from] ProxyError),
    /// No whole header (or first request bytes) within the timeout.
    #[error("no PROXY header within its deadline")]
    Timeout,
    /// The peer closed, or the read failed.
    #[error("connection closed before the PROXY header: {0}")]
    Io(std::io::Error),
}

/// Reads a PROXY header from `stream` (peer `peer`) if it starts with one: returns the client
/// address (the peer's when the header names none, as a `LOCAL` health check) and the bytes
/// read after the header. Waits at most `timeout`.
///
/// Errors: [`ProxyReadError`].
pub async fn read<S: AsyncRead + Unpin>(
    stream: &mut S,
    peer: SocketAddr,
    timeout: Duration,
) -> Result<(SocketAddr, Vec<u8>), ProxyReadError> {
    let work = async {
        let mut buf = Vec::with_capacity(256);
        loop {
            if !buf.is_empty() {
                match parse(&buf) {
                    Ok(Some((h, len))) => {
                        let client = h
                            .source
                            .map_or(peer, |s| SocketAddr::new(s.ip().to_canonical(), s.port()));
                        buf.drain(..len);
                        return Ok((client, buf));
                    }
                    Ok(None) => {}
                    Err(ProxyError::NotProxy) => return Ok((peer, buf)),
                    Err(e) => return Err(ProxyReadError::Header(e)),
                }
            }
            buf.reserve(256);
            let n = stream
                .read_buf(&mut buf)
                .await
                .map_err(ProxyReadError::Io)?;
            if n == 0 {
                return Err(ProxyReadError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or(Err(ProxyReadError::Timeout))
}
