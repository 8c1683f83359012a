//! One listen socket of an `icecast.xml` as Icecast 2.4.4 holds it (`listener_t`), [`Socket`]:
//! a `<listen-socket>` or the implicit socket of a top-level `<port>`/`<bind-address>`, with
//! Icecast's defaults ([`legacy`]) and its numeric bind address ([`ip`]). The reading of the
//! sockets and their conversion to Throng's settings are in `listen.rs`; this file imports only
//! the element tree and the error.

use std::net::IpAddr;

use super::error::IcecastXmlError;
use super::tree::Element;

/// A `<listen-socket>` (or the implicit one of a top-level `<port>`/`<bind-address>`).
#[derive(Debug, Clone)]
pub(super) struct Socket {
    /// Element path of the socket, e.g. `icecast/listen-socket`, for reports.
    pub path: String,
    /// `<port>` (TCP; Icecast's default 8000).
    pub port: u16,
    /// `<bind-address>`; `None` binds every address.
    pub bind: Option<IpAddr>,
    /// `<shoutcast-mount>`: this port takes HTTP, the next one SHOUTcast sources for that mount.
    pub shoutcast_mount: Option<String>,
    /// `<shoutcast-compat>`: this port itself is the SHOUTcast source port.
    pub shoutcast_compat: bool,
    /// `<so-sndbuf>`: kernel send buffer per listener socket, in bytes.
    pub sndbuf: Option<usize>,
    /// `<ssl>1` (Icecast 2.4) or `<tls>`/`tls=` (Icecast 2.5): what the socket speaks.
    pub tls: SocketTls,
    /// The element that asked for TLS, for reports.
    pub tls_path: Option<String>,
}

/// What a listen socket speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SocketTls {
    /// Plain HTTP.
    Off,
    /// TLS only (`<ssl>1`, 2.5 `rfc2818`, `auto_no_plain`).
    On,
    /// Both, by the first byte (2.5 `auto`).
    Auto,
}

/// Icecast 2.5's `tls` mode word (`disabled`, `auto`, `auto_no_plain`, `rfc2817`, `rfc2818`, or
/// a boolean); `None` for a word it does not know.
pub(super) fn tls_mode(word: &str) -> Option<SocketTls> {
    match word.trim().to_ascii_lowercase().as_str() {
        "disabled" | "off" | "false" | "no" | "0" => Some(SocketTls::Off),
        "auto" => Some(SocketTls::Auto),
        "auto_no_plain" | "rfc2818" | "on" | "true" | "yes" | "1" => Some(SocketTls::On),
        _ => None,
    }
}

/// A socket with Icecast's defaults (port 8000 on every address); also the implicit socket of a
/// top-level `<port>`/`<bind-address>` (Icecast's first `listen_sock`).
pub(super) fn legacy(path: &str) -> Socket {
    Socket {
        path: path.to_owned(),
        port: 8000,
        bind: None,
        shoutcast_mount: None,
        shoutcast_compat: false,
        sndbuf: None,
        tls: SocketTls::Off,
        tls_path: None,
    }
}

/// A numeric bind address (Icecast resolves it with `AI_NUMERICHOST`).
pub(super) fn ip(path: &str, el: &Element) -> Result<IpAddr, IcecastXmlError> {
    let text = el.text().unwrap_or_default();
    text.trim().parse().map_err(|_| IcecastXmlError::BadValue {
        path: path.to_owned(),
        value: text.to_owned(),
        expected: "a numeric IPv4 or IPv6 address",
    })
}
