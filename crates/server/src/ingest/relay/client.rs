//! The pure parts of pulling a stream from another server, as Icecast 2.4.4 `slave.c` does it:
//! the relay's `GET` request, what its answer means (stream, `302` redirect, refusal), `http://`
//! URLs of redirects and stream lists, the master's `/admin/streamlist.txt` body, and the
//! reconnect backoff. No I/O here; `relay.rs` and `master.rs` do the talking.

use std::time::Duration;

use throng_proto::auth::basic_authorization;
use throng_proto::http::ResponseHead;

/// Most `302` redirects followed for one connection attempt (Icecast 2.4.4
/// `open_relay_connection` stops after 10).
pub const MAX_REDIRECTS: usize = 10;

/// Where a relay pulls from: host, TCP port and mount (path, optionally with a query).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Upstream {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Path on the upstream server, starting with `/`.
    pub mount: String,
    /// Speak TLS (`https://`), verifying the upstream's certificate for `host`.
    pub tls: bool,
}

impl Upstream {
    /// `host:port` (brackets around an IPv6 address), for connecting and for `Host`.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority(), self.mount)
    }
}

/// The request target for `mount`: as given, with spaces and control characters
/// percent-encoded so the request line stays well-formed (Icecast mount names may hold spaces).
pub fn request_target(mount: &str) -> String {
    let mut out = String::with_capacity(mount.len());
    for c in mount.chars() {
        if c == ' ' || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The head of a relay's request, as Icecast 2.4.4 `slave.c:open_relay_connection` writes it:
/// `GET <mount> HTTP/1.0`, `User-Agent: <server-id>`, `Host`, `Icy-MetaData: 1` when
/// `metadata`, and `Authorization: Basic` when `credentials` are given. `Host` carries the port
/// unless it is 80 (Icecast sends the bare host; both are accepted by every server).
pub fn relay_request(
    upstream: &Upstream,
    server_id: &str,
    metadata: bool,
    credentials: Option<(&str, &str)>,
) -> String {
    let host = if upstream.port == 80 {
        upstream.host.clone()
    } else {
        upstream.authority()
    };
    let mut req = format!(
        "GET {} HTTP/1.0\r\nUser-Agent: {server_id}\r\nHost: {host}\r\n",
        request_target(&upstream.mount)
    );
    if metadata {
        req.push_str("Icy-MetaData: 1\r\n");
    }
    if let Some((user, password)) = credentials {
        req.push_str(&format!(
            "Authorization: {}\r\n",
            basic_authorization(user, password)
        ));
    }
    req.push_str("\r\n");
    req
}

/// The head of a slave's stream-list request, as Icecast 2.4.4 `slave.c:update_from_master`
/// writes it (plus `User-Agent` and `Host`): `GET /admin/streamlist.txt HTTP/1.0` with Basic
/// auth of the master's relay user.
pub fn streamlist_request(
    master: &Upstream,
    server_id: &str,
    user: &str,
    password: &str,
) -> String {
    format!(
        "GET /admin/streamlist.txt HTTP/1.0\r\nUser-Agent: {server_id}\r\nHost: {}\r\nAuthorization: {}\r\n\r\n",
        master.authority(),
        basic_authorization(user, password)
    )
}

/// What an upstream's answer to a relay request means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `200` (HTTP/1.x or `ICY 200 OK`): the stream follows the head.
    Stream,
    /// `302` to an `http://` URL: connect there instead.
    Redirect(Upstream),
    /// Anything else: the relay failed (status and reason as received; a `302` to a non-http
    /// location is a refusal with its location as reason).
    Refused {
        /// Status code.
        status: u16,
        /// Reason phrase, or why a redirect cannot be followed.
        reason: String,
    },
}

/// Classifies an upstream's response head (Icecast 2.4.4 follows only `http://` redirects).
/// A `200` whose `Content-Type` is a document ([`is_document_type`]: an HTML error or
/// login page from a web server or proxy in front of the origin) is refused, so the relay
/// retries with backoff instead of feeding a web page to listeners as audio.
pub fn classify(head: &ResponseHead) -> Answer {
    match head.status {
        200 if head.header("content-type").is_some_and(is_document_type) => Answer::Refused {
            status: 200,
            reason: format!(
                "OK, but with Content-Type {:?}, a document, not an audio stream",
                head.header("content-type").unwrap_or("").trim()
            ),
        },
        200 => Answer::Stream,
        302 => match head.header("location").and_then(parse_http_url) {
            Some(next) => Answer::Redirect(next),
            None => Answer::Refused {
                status: 302,
                reason: format!(
                    "redirect to {:?} (only http:// locations are followed)",
                    head.header("location").unwrap_or("")
                ),
            },
        },
        status => Answer::Refused {
            status,
            reason: head.reason.clone(),
        },
    }
}

/// Whether a `Content-Type` names a document rather than a stream: `text/*` (HTML, plain
/// text), JSON or XML. No audio or video stream Icecast serves has one of these types.
pub fn is_document_type(content_type: &str) -> bool {
    let base = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    base.starts_with("text/")
        || matches!(
            base.as_str(),
            "application/json" | "application/xml" | "application/xhtml+xml"
        )
}

/// Parses `http://[user:pass@]host[:port][/path]` (port 80 when absent, path `/` when absent;
/// user info is ignored). `None` for other schemes or a malformed authority.
pub fn parse_http_url(url: &str) -> Option<Upstream> {
    let url = url.trim();
    let rest = url
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &url[7..])?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i..]),
        Some(i) => (&rest[..i], "/"),
        None => (rest, "/"),
    };
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 80,
            None => return None,
        };
        (h, port)
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, p.parse().ok()?),
            None => (hostport, 80),
        }
    };
    if host.is_empty() || port == 0 || host.contains(|c: char| c.is_whitespace() || c == '/') {
        return None;
    }
    let path = path.split('#').next().unwrap_or("/");
    Some(Upstream {
        host: host.to_owned(),
        port,
        mount: path.to_owned(),
        tls: false,
    })
}

/// Parses a master's `/admin/streamlist.txt` body into the streams to relay, as Icecast 2.4.4
/// `slave.c:update_from_master`: one entry per line (`\r\n` or `\n`), either a mount (`/live`,
/// pulled from the master itself) or a full `http://host[:port]/mount` URL; blank and unusable
/// lines are skipped. Duplicates keep their first occurrence.
pub fn parse_streamlist(body: &str, master: &Upstream) -> Vec<Upstream> {
    let mut out: Vec<Upstream> = Vec::new();
    for line in body.lines() {
        let line = line.trim();
        let entry = if line.starts_with('/') {
            Some(Upstream {
                host: master.host.clone(),
                port: master.port,
                mount: line.to_owned(),
                tls: master.tls,
            })
        } else {
            parse_http_url(line)
        };
        if let Some(e) = entry {
            if e.mount.len() > 1 && !out.iter().any(|o| o.mount == e.mount) {
                out.push(e);
            }
        }
    }
    out
}

/// Delay before reconnecting after the n-th failure in a row: [`Backoff::FIRST`] doubling up to
/// [`Backoff::MAX`]. Icecast 2.4.4 retries a failed relay after `master-update-interval`
/// (120 s); Throng retries sooner and backs off, so a short upstream drop costs seconds.
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// First delay.
    pub const FIRST: Duration = Duration::from_secs(1);
    /// Largest delay.
    pub const MAX: Duration = Duration::from_secs(60);
    /// A connection that fed the mount at least this long resets the backoff.
    pub const RESET_AFTER: Duration = Duration::from_secs(60);

    /// A fresh backoff (next delay is [`Backoff::FIRST`]).
    pub fn new() -> Backoff {
        Backoff::default()
    }

    /// The delay before the next attempt, and counts one more failure.
    pub fn next_delay(&mut self) -> Duration {
        let shift = self.failures.min(16);
        self.failures = self.failures.saturating_add(1);
        (Self::FIRST * 2u32.pow(shift)).min(Self::MAX)
    }

    /// Records a connection that lasted `connected`: one of at least
    /// [`Backoff::RESET_AFTER`] starts the delays over.
    pub fn connected_for(&mut self, connected: Duration) {
        if connected >= Self::RESET_AFTER {
            self.failures = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_proto::http::parse_response_head;

    fn up(host: &str, port: u16, mount: &str) -> Upstream {
        Upstream {
            host: host.into(),
            port,
            mount: mount.into(),
            tls: false,
        }
    }

    #[test]
    fn request_is_icecast_shaped() {
        let r = relay_request(
            &up("origin", 8000, "/live.mp3"),
            "Throng 0.1",
            true,
            Some(("relay", "pw")),
        );
        assert_eq!(
            r,
            "GET /live.mp3 HTTP/1.0\r\nUser-Agent: Throng 0.1\r\nHost: origin:8000\r\nIcy-MetaData: 1\r\nAuthorization: Basic cmVsYXk6cHc=\r\n\r\n"
        );
        let r = relay_request(&up("origin", 80, "/my radio"), "T", false, None);
        assert_eq!(
            r,
            "GET /my%20radio HTTP/1.0\r\nUser-Agent: T\r\nHost: origin\r\n\r\n"
        );
    }

    #[test]
    fn answers_are_classified() {
        let head = |raw: &[u8]| parse_response_head(raw).unwrap().unwrap().0;
        assert_eq!(classify(&head(b"ICY 200 OK\r\n\r\n")), Answer::Stream);
        assert_eq!(
            classify(&head(
                b"HTTP/1.0 200 OK\r\nContent-Type: audio/mpeg\r\n\r\n"
            )),
            Answer::Stream
        );
        assert!(matches!(
            classify(&head(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n")),
            Answer::Refused { status: 200, reason } if reason.contains("text/html")
        ));
        assert_eq!(
            classify(&head(
                b"HTTP/1.0 200 OK\r\nContent-Type: audio/mpeg\r\n\r\n"
            )),
            Answer::Stream
        );
        assert_eq!(
            classify(&head(
                b"HTTP/1.1 302 Found\r\nLocation: http://other:8001/x.mp3?a=1\r\n\r\n"
            )),
            Answer::Redirect(up("other", 8001, "/x.mp3?a=1"))
        );
        assert!(matches!(
            classify(&head(
                b"HTTP/1.1 302 Found\r\nLocation: https://other/x\r\n\r\n"
            )),
            Answer::Refused { status: 302, .. }
        ));
        assert_eq!(
            classify(&head(b"HTTP/1.0 404 File Not Found\r\n\r\n")),
            Answer::Refused {
                status: 404,
                reason: "File Not Found".into()
            }
        );
    }

    #[test]
    fn http_urls() {
        assert_eq!(parse_http_url("http://h"), Some(up("h", 80, "/")));
        assert_eq!(
            parse_http_url("HTTP://u:p@h:81/a/b"),
            Some(up("h", 81, "/a/b"))
        );
        assert_eq!(parse_http_url("http://[::1]:9/m"), Some(up("::1", 9, "/m")));
        assert_eq!(parse_http_url("http://h?x=1"), Some(up("h", 80, "/")));
        assert_eq!(up("::1", 9, "/m").to_string(), "http://[::1]:9/m");
        for bad in [
            "https://h/",
            "ftp://h",
            "http://",
            "http://h:x/",
            "http://h:0/",
            "/m",
        ] {
            assert_eq!(parse_http_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn streamlist_lines_are_mounts_or_urls() {
        let master = up("master", 8000, "/");
        let body = "/a.mp3\r\n\r\nhttp://other:9000/b.ogg\r\n/a.mp3\r\nnonsense\r\n/\r\n/c d\n";
        assert_eq!(
            parse_streamlist(body, &master),
            vec![
                up("master", 8000, "/a.mp3"),
                up("other", 9000, "/b.ogg"),
                up("master", 8000, "/c d"),
            ]
        );
        assert!(parse_streamlist("", &master).is_empty());
    }

    #[test]
    fn backoff_doubles_caps_and_resets() {
        let mut b = Backoff::new();
        let secs: Vec<u64> = (0..9).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        b.connected_for(Duration::from_secs(59));
        assert_eq!(b.next_delay(), Backoff::MAX);
        b.connected_for(Backoff::RESET_AFTER);
        assert_eq!(b.next_delay(), Backoff::FIRST);
    }

    #[test]
    fn streamlist_request_has_basic_auth() {
        let r = streamlist_request(&up("m", 8000, "/"), "T", "relay", "pw");
        assert!(r.starts_with("GET /admin/streamlist.txt HTTP/1.0\r\n"));
        assert!(r.contains("Authorization: Basic cmVsYXk6cHc=\r\n"));
        assert!(r.ends_with("\r\n\r\n"));
    }
}
