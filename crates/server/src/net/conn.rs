//! An accepted connection as the request handlers see it: plain TCP, or TLS over TCP once the
//! handshake is done (`tls.rs`). Both read and write as tokio streams, so the source, admin,
//! status and error paths serve HTTPS unchanged; a listener's TLS connection leaves this type
//! for a fan-out shard with its transmit keys ([`Conn::into_parts`]). [`ClientConn`] is the
//! same for connections the server opens (relays to `https://` upstreams).

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A client connection, plain or TLS.
#[derive(Debug)]
pub enum Conn {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP, handshake done (boxed: rustls's state is large, and a plain connection
    /// must stay small).
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl From<TcpStream> for Conn {
    fn from(s: TcpStream) -> Conn {
        Conn::Plain(s)
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

    /// The plain socket as a blocking-mode-agnostic std stream, for hand-over to a thread or
    /// another process.
    ///
    /// Errors: the conversion's I/O error; `Unsupported` for a TLS connection, whose keys are
    /// not carried (the client reconnects).
    pub fn into_std(self) -> std::io::Result<std::net::TcpStream> {
        match self {
            Conn::Plain(s) => s.into_std(),
            Conn::Tls(_) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a TLS connection cannot be handed over",
            )),
        }
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

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(t) => t.is_write_vectored(),
        }
    }
}

/// A connection this server opened to another (a relay's upstream): plain or TLS.
#[derive(Debug)]
pub enum ClientConn {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP, handshake done and the server's certificate verified.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
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

    /// The plain socket as a std stream, for hand-over to another process.
    ///
    /// Errors: the conversion's I/O error; `Unsupported` for TLS (its keys are not carried:
    /// the relay connects again).
    pub fn into_std(self) -> std::io::Result<std::net::TcpStream> {
        match self {
            ClientConn::Plain(s) => s.into_std(),
            ClientConn::Tls(_) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a TLS connection cannot be handed over",
            )),
        }
    }
}

impl AsyncRead for ClientConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientConn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientConn::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            ClientConn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ClientConn::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientConn::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientConn::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientConn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ClientConn::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}
