//! Minimal `http://` and `https://` URL parsing and resolution.

use std::net::{SocketAddr, ToSocketAddrs};
use thiserror::Error;

/// A parsed `http[s]://[user:pass@]host[:port]/path` URL with its resolved address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    /// `https://`: the listener speaks TLS (the host name is its SNI and verified name).
    pub tls: bool,
    /// Host as written (used in the `Host` header).
    pub host: String,
    /// TCP port (80 when absent, 443 for `https://`).
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
    /// `user:password` given in the URL, if any.
    pub credentials: Option<(String, String)>,
    /// The first resolved address (IPv4 preferred).
    pub addr: SocketAddr,
}

/// Why a URL was rejected.
#[derive(Debug, Error)]
pub enum UrlError {
    /// Not `http://...` or `https://...`.
    #[error("{0:?}: only http:// and https:// URLs are supported")]
    Scheme(String),
    /// Port not a number.
    #[error("{0:?}: bad port")]
    Port(String),
    /// Host did not resolve.
    #[error("{url:?}: cannot resolve host: {source}")]
    Resolve {
        /// The URL.
        url: String,
        /// The resolver's error.
        source: std::io::Error,
    },
}

impl HttpUrl {
    /// Parses and resolves `url`.
    pub fn parse(url: &str) -> Result<HttpUrl, UrlError> {
        let (tls, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(r), _) => (false, r),
            (None, Some(r)) => (true, r),
            (None, None) => return Err(UrlError::Scheme(url.to_owned())),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].to_owned()),
            None => (rest, "/".to_owned()),
        };
        let (credentials, hostport) = match authority.rfind('@') {
            Some(i) => {
                let (u, p) = authority[..i]
                    .split_once(':')
                    .unwrap_or((&authority[..i], ""));
                (Some((u.to_owned(), p.to_owned())), &authority[i + 1..])
            }
            None => (None, authority),
        };
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| UrlError::Port(url.into()))?;
            (h.to_owned(), p.strip_prefix(':').unwrap_or(""))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), p),
                None => (hostport.to_owned(), ""),
            }
        };
        let port = if port.is_empty() {
            if tls {
                443
            } else {
                80
            }
        } else {
            port.parse().map_err(|_| UrlError::Port(url.to_owned()))?
        };
        let addrs: Vec<SocketAddr> = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|source| UrlError::Resolve {
                url: url.to_owned(),
                source,
            })?
            .collect();
        let addr = addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .copied()
            .ok_or_else(|| UrlError::Resolve {
                url: url.to_owned(),
                source: std::io::Error::other("no address"),
            })?;
        Ok(HttpUrl {
            tls,
            host,
            port,
            path,
            credentials,
            addr,
        })
    }

    /// `host:port` for the `Host` header.
    pub fn host_header(&self) -> String {
        if self.port == if self.tls { 443 } else { 80 } {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_parts() {
        let u = HttpUrl::parse("http://source:hack@127.0.0.1:8000/live.mp3?x=1").unwrap();
        assert_eq!(u.port, 8000);
        assert_eq!(u.path, "/live.mp3?x=1");
        assert_eq!(u.credentials, Some(("source".into(), "hack".into())));
        assert_eq!(u.addr, "127.0.0.1:8000".parse().unwrap());
        let u = HttpUrl::parse("http://localhost").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        assert!(HttpUrl::parse("ftp://x/").is_err());
        let u = HttpUrl::parse("https://localhost/a.mp3").unwrap();
        assert!(u.tls && u.port == 443 && u.host_header() == "localhost");
        assert!(HttpUrl::parse("http://127.0.0.1:x/").is_err());
    }
}
