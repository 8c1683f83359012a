//! An accepted connection as the request handlers see it: plain TCP, or TLS over TCP once the
//! handshake is done (`tls.rs`). Both read and write as tokio streams, so the source, admin,
//! status and error paths serve HTTPS unchanged; a listener's TLS connection leaves this type
//! for a fan-out shard with its transmit keys ([`Conn::into_parts`]). [`ClientConn`] is the
//! same for connections the server opens (relays to `https://` upstreams). Both are one
//! [`MaybeTls`], so reading and writing are written once for either side of TLS.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connection, plain TCP or TLS over TCP with its handshake done; `T` is the TLS stream of
/// one side ([`Conn`]: the server's, [`ClientConn`]: the client's). Reads and writes go to
/// whichever it is.
#[derive(Debug)]
pub enum MaybeTls<T> {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP, handshake done (boxed: rustls's state is large, and a plain connection
    /// must stay small).
    Tls(Box<T>),
}

/// A client connection to this server, plain or TLS.
pub type Conn = MaybeTls<tokio_rustls::server::TlsStream<TcpStream>>;

/// A connection this server opened to another (a relay's upstream), plain or TLS (the
/// server's certificate verified).
pub type ClientConn = MaybeTls<tokio_rustls::client::TlsStream<TcpStream>>;

impl<T> From<TcpStream> for MaybeTls<T> {
    fn from(s: TcpStream) -> MaybeTls<T> {
        MaybeTls::Plain(s)
    }
}

impl<T> MaybeTls<T> {
    /// The plain socket as a std stream, for hand-over to a thread or another process.
    ///
    /// Errors: the conversion's I/O error; `Unsupported` for a TLS connection, whose keys are
    /// not carried (the peer connects again).
    pub fn into_std(self) -> std::io::Result<std::net::TcpStream> {
        match self {
            MaybeTls::Plain(s) => s.into_std(),
            MaybeTls::Tls(_) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a TLS connection cannot be handed over",
            )),
        }
    }
}

impl Conn {
    /// The TCP socket under the connection.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => t.get_ref().0,
        }
    }

    /// Sets `TCP_NODELAY`.
    ///
    /// Errors: the socket option's I/O error.
    pub fn set_nodelay(&self, on: bool) -> std::io::Result<()> {
        self.tcp().set_nodelay(on)
    }

    /// The TCP socket and, for TLS, the rustls connection (whose secrets the caller extracts).
    pub fn into_parts(self) -> (TcpStream, Option<rustls::ServerConnection>) {
        match self {
            Conn::Plain(s) => (s, None),
            Conn::Tls(t) => {
                let (s, c) = t.into_inner();
                (s, Some(c))
            }
        }
    }
}

impl ClientConn {
    /// Connects TLS over `tcp` to `name`, verified with `config`.
    ///
    /// Errors: the handshake's I/O error (a certificate that does not verify included).
    pub async fn tls(
        tcp: TcpStream,
        name: &str,
        config: std::sync::Arc<rustls::ClientConfig>,
    ) -> std::io::Result<ClientConn> {
        let name = rustls::pki_types::ServerName::try_from(name.to_owned())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let s = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await?;
        Ok(ClientConn::Tls(Box::new(s)))
    }

    /// The TCP socket under the connection.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            ClientConn::Plain(s) => s,
            ClientConn::Tls(t) => t.get_ref().0,
        }
    }

    /// The remote address.
    ///
    /// Errors: the socket's I/O error.
    pub fn peer_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.tcp().peer_addr()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for MaybeTls<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for MaybeTls<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MaybeTls::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            MaybeTls::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            MaybeTls::Plain(s) => s.is_write_vectored(),
            MaybeTls::Tls(t) => t.is_write_vectored(),
        }
    }
}
