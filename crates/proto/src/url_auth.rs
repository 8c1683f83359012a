//! URL authentication callbacks, as Icecast 2.4.4 `auth_url.c`: the POST bodies the server
//! sends, the reading of the callback server's reply headers, and the callback URL itself.
//!
//! Every value in a body is escaped as Icecast's `util_url_escape` does: ASCII letters and
//! digits stay, every other byte becomes `%xx` with lowercase hex (so `/live` is `%2flive`).
//! Field order is Icecast's. The reply is judged by its headers only, whatever its status, as
//! libcurl hands every header line to Icecast: the listener (or source) is accepted iff the
//! `auth_header` (default `icecast-auth-user: 1`) is present.

use percent_encoding::percent_decode_str;
use thiserror::Error;

/// Default accepting reply header (`auth_url.c:auth_get_url_auth`).
pub const DEFAULT_AUTH_HEADER: &str = "icecast-auth-user: 1";
/// Default time-limit reply header (value: seconds).
pub const DEFAULT_TIMELIMIT_HEADER: &str = "icecast-auth-timelimit:";
/// Reply header whose value explains a refusal.
pub const MESSAGE_HEADER: &str = "icecast-auth-message";

/// Escapes `s` as Icecast's `util_url_escape`: `[0-9A-Za-z]` kept, any other byte `%xx`
/// (lowercase hex).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(char::from_digit((b >> 4) as u32, 16).unwrap_or('0'));
            out.push(char::from_digit((b & 0xf) as u32, 16).unwrap_or('0'));
        }
    }
    out
}

/// Where and who a callback is about: the fields shared by the listener and source bodies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerId<'a> {
    /// `<hostname>` of the server (`server=`).
    pub hostname: &'a str,
    /// The server's first listen port (`port=`).
    pub port: u16,
}

/// A listener, as `listener_add` and `listener_remove` describe it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenerFields<'a> {
    /// Client id, as admin `listclients` shows it (`client=`).
    pub client: u64,
    /// The raw request target, path and query, as requested (`mount=`).
    pub mount: &'a str,
    /// Basic-auth user, empty when none (`user=`).
    pub user: &'a str,
    /// Basic-auth password, empty when none (`pass=`).
    pub pass: &'a str,
    /// Client IP address (`ip=`).
    pub ip: &'a str,
    /// `User-Agent`, if sent; `-` is sent when absent (`agent=`).
    pub agent: Option<&'a str>,
}

/// `action=listener_add&server=&port=&client=&mount=&user=&pass=&ip=&agent=`, then one
/// `&<prefix><name>=<value>` per forwarded request header present (names as configured, not
/// escaped, as Icecast).
pub fn listener_add_body(
    server: &ServerId<'_>,
    l: &ListenerFields<'_>,
    forwarded: &[(&str, &str)],
    prefix: &str,
) -> String {
    let mut body = format!(
        "action=listener_add&server={}&port={}&client={}&mount={}&user={}&pass={}&ip={}&agent={}",
        escape(server.hostname),
        server.port,
        l.client,
        escape(l.mount),
        escape(l.user),
        escape(l.pass),
        escape(l.ip),
        l.agent.map_or_else(|| "-".to_owned(), escape),
    );
    for (name, value) in forwarded {
        body.push('&');
        body.push_str(prefix);
        body.push_str(name);
        body.push('=');
        body.push_str(&escape(value));
    }
    body
}

/// `action=listener_remove&server=&port=&client=&mount=&user=&pass=&duration=&ip=&agent=`;
/// `duration_secs` is how long the listener was connected.
pub fn listener_remove_body(
    server: &ServerId<'_>,
    l: &ListenerFields<'_>,
    duration_secs: u64,
) -> String {
    format!(
        "action=listener_remove&server={}&port={}&client={}&mount={}&user={}&pass={}&duration={}&ip={}&agent={}",
        escape(server.hostname),
        server.port,
        l.client,
        escape(l.mount),
        escape(l.user),
        escape(l.pass),
        duration_secs,
        escape(l.ip),
        l.agent.map_or_else(|| "-".to_owned(), escape),
    )
}

/// Whether a stream starts or stops on a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountAction {
    /// A source (client or relay) started (`mount_add`).
    Add,
    /// It stopped (`mount_remove`).
    Remove,
}

impl MountAction {
    /// `mount_add` or `mount_remove`.
    pub fn as_str(self) -> &'static str {
        match self {
            MountAction::Add => "mount_add",
            MountAction::Remove => "mount_remove",
        }
    }
}

/// `action=mount_add|mount_remove&mount=&server=&port=`.
pub fn mount_body(action: MountAction, server: &ServerId<'_>, mount: &str) -> String {
    format!(
        "action={}&mount={}&server={}&port={}",
        action.as_str(),
        escape(mount),
        escape(server.hostname),
        server.port
    )
}

/// `action=stream_auth&mount=&ip=&server=&port=&user=&pass=`, plus `&admin=1` when an admin
/// request (not a source) is being authorised for the mount.
pub fn stream_auth_body(
    server: &ServerId<'_>,
    mount: &str,
    ip: &str,
    user: &str,
    pass: &str,
    admin: bool,
) -> String {
    format!(
        "action=stream_auth&mount={}&ip={}&server={}&port={}&user={}&pass={}{}",
        escape(mount),
        escape(ip),
        escape(server.hostname),
        server.port,
        escape(user),
        escape(pass),
        if admin { "&admin=1" } else { "" }
    )
}

/// How to read a callback reply: the accepting header and the time-limit header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyRules {
    accept_name: String,
    accept_value: Option<String>,
    timelimit_name: String,
}

impl ReplyRules {
    /// Rules from the `auth_header` (`name: value`; a bare `name` or empty value accepts on the
    /// header's presence) and `timelimit_header` (`name:`) options; `None` takes the defaults.
    pub fn new(auth_header: Option<&str>, timelimit_header: Option<&str>) -> ReplyRules {
        let auth = auth_header.unwrap_or(DEFAULT_AUTH_HEADER);
        let (accept_name, accept_value) = match auth.split_once(':') {
            Some((n, v)) => {
                let v = v.trim();
                (n.trim(), (!v.is_empty()).then(|| v.to_owned()))
            }
            None => (auth.trim(), None),
        };
        let tl = timelimit_header.unwrap_or(DEFAULT_TIMELIMIT_HEADER);
        let timelimit_name = tl.split_once(':').map_or(tl, |(n, _)| n).trim();
        ReplyRules {
            accept_name: accept_name.to_owned(),
            accept_value,
            timelimit_name: timelimit_name.to_owned(),
        }
    }

    /// Judges reply headers (name, value), in order.
    pub fn judge(&self, headers: &[(String, String)]) -> Verdict {
        let mut v = Verdict::default();
        for (name, value) in headers {
            let value = value.trim();
            let wanted = match &self.accept_value {
                None => true,
                Some(want) => value.eq_ignore_ascii_case(want),
            };
            if name.eq_ignore_ascii_case(&self.accept_name) && wanted {
                v.accepted = true;
            }
            if name.eq_ignore_ascii_case(&self.timelimit_name) {
                match leading_u32(value) {
                    Some(s) => v.time_limit_secs = Some(s),
                    None => v.bad_timelimit = true,
                }
            }
            if name.eq_ignore_ascii_case(MESSAGE_HEADER) && !value.is_empty() {
                v.message = Some(value.to_owned());
            }
        }
        v
    }
}

impl Default for ReplyRules {
    fn default() -> Self {
        ReplyRules::new(None, None)
    }
}

/// The leading unsigned decimal of `s` (C `sscanf("%u")` on a trimmed value).
fn leading_u32(s: &str) -> Option<u32> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    s[..digits].parse().ok()
}

/// What a callback reply says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The accepting header was present.
    pub accepted: bool,
    /// Most seconds the listener may stay (the time-limit header).
    pub time_limit_secs: Option<u32>,
    /// The time-limit header was present but not a number (Icecast logs it).
    pub bad_timelimit: bool,
    /// `icecast-auth-message`, the reason for a refusal.
    pub message: Option<String>,
}

/// A parsed `http://` callback URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackUrl {
    /// Host name or address, without IPv6 brackets.
    pub host: String,
    /// Port (80 when absent).
    pub port: u16,
    /// The `Host` header value: host as written (with brackets) and `:port` when given.
    pub authority: String,
    /// Path and query (`/` when empty); any `#fragment` dropped.
    pub path: String,
    /// Percent-decoded `user:password@` of the URL, if any.
    pub credentials: Option<(String, String)>,
}

/// Why a callback URL cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UrlError {
    /// Only `http://` callbacks are supported (no TLS client is built in).
    #[error("unsupported scheme in {0:?}: only http:// callbacks are supported")]
    Scheme(String),
    /// Nothing between `//` and the path.
    #[error("no host in {0:?}")]
    NoHost(String),
    /// The port is not a number in 1..=65535.
    #[error("bad port in {0:?}")]
    BadPort(String),
}

impl CallbackUrl {
    /// Parses `http://[user[:pass]@]host[:port][/path][?query][#fragment]`.
    ///
    /// Errors: [`UrlError`].
    pub fn parse(url: &str) -> Result<CallbackUrl, UrlError> {
        let url = url.trim();
        let rest = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            _ => return Err(UrlError::Scheme(url.to_owned())),
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_owned()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_owned()),
        };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let credentials = userinfo.map(|u| {
            let (user, pass) = u.split_once(':').unwrap_or((u, ""));
            let dec = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
            (dec(user), dec(pass))
        });
        let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
            let (h, after) = inner
                .split_once(']')
                .ok_or_else(|| UrlError::NoHost(url.to_owned()))?;
            (h, after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(UrlError::NoHost(url.to_owned()));
        }
        let port = match port {
            None | Some("") => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| UrlError::BadPort(url.to_owned()))?,
        };
        Ok(CallbackUrl {
            host: host.to_owned(),
            port,
            authority: hostport.to_owned(),
            path,
            credentials,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: ServerId<'static> = ServerId {
        hostname: "radio.example.org",
        port: 8000,
    };

    #[test]
    fn escapes_like_util_url_escape() {
        assert_eq!(escape("/live.mp3?a=b c"), "%2flive%2emp3%3fa%3db%20c");
        assert_eq!(escape("é"), "%c3%a9");
        assert_eq!(escape("Az09"), "Az09");
    }

    #[test]
    fn listener_bodies_in_icecast_order() {
        let l = ListenerFields {
            client: 7,
            mount: "/live?session=x",
            user: "fred",
            pass: "p&ss",
            ip: "127.0.0.1",
            agent: Some("VLC/3.0"),
        };
        assert_eq!(
            listener_add_body(&SERVER, &l, &[("x-token", "abc")], "ClientHeader."),
            "action=listener_add&server=radio%2eexample%2eorg&port=8000&client=7\
             &mount=%2flive%3fsession%3dx&user=fred&pass=p%26ss&ip=127%2e0%2e0%2e1\
             &agent=VLC%2f3%2e0&ClientHeader.x-token=abc"
        );
        let anon = ListenerFields {
            agent: None,
            user: "",
            pass: "",
            ..l
        };
        assert_eq!(
            listener_remove_body(&SERVER, &anon, 42),
            "action=listener_remove&server=radio%2eexample%2eorg&port=8000&client=7\
             &mount=%2flive%3fsession%3dx&user=&pass=&duration=42&ip=127%2e0%2e0%2e1&agent=-"
        );
    }

    #[test]
    fn mount_and_stream_auth_bodies() {
        assert_eq!(
            mount_body(MountAction::Add, &SERVER, "/live"),
            "action=mount_add&mount=%2flive&server=radio%2eexample%2eorg&port=8000"
        );
        assert_eq!(
            mount_body(MountAction::Remove, &SERVER, "/live"),
            "action=mount_remove&mount=%2flive&server=radio%2eexample%2eorg&port=8000"
        );
        assert_eq!(
            stream_auth_body(&SERVER, "/live", "10.0.0.1", "source", "pw", false),
            "action=stream_auth&mount=%2flive&ip=10%2e0%2e0%2e1&server=radio%2eexample%2eorg\
             &port=8000&user=source&pass=pw"
        );
        assert!(stream_auth_body(&SERVER, "/l", "::1", "", "", true).ends_with("&pass=&admin=1"));
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn judges_reply_headers() {
        let r = ReplyRules::default();
        assert!(!r.judge(&h(&[])).accepted);
        assert!(r.judge(&h(&[("Icecast-Auth-User", "1")])).accepted);
        assert!(!r.judge(&h(&[("icecast-auth-user", "0")])).accepted);
        let v = r.judge(&h(&[
            ("icecast-auth-user", "1"),
            ("icecast-auth-timelimit", "900"),
        ]));
        assert_eq!(v.time_limit_secs, Some(900));
        let v = r.judge(&h(&[
            ("icecast-auth-timelimit", "soon"),
            ("icecast-auth-message", "Not subscribed"),
        ]));
        assert!(v.bad_timelimit && !v.accepted);
        assert_eq!(v.message.as_deref(), Some("Not subscribed"));
        let custom = ReplyRules::new(Some("x-ok"), Some("x-limit:"));
        let v = custom.judge(&h(&[("X-OK", "yes"), ("x-limit", "5")]));
        assert!(v.accepted);
        assert_eq!(v.time_limit_secs, Some(5));
    }

    #[test]
    fn parses_callback_urls() {
        let u = CallbackUrl::parse("http://127.0.0.1:8080/auth.php?x=1#f").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("127.0.0.1", 8080));
        assert_eq!(u.path, "/auth.php?x=1");
        assert_eq!(u.authority, "127.0.0.1:8080");
        assert_eq!(u.credentials, None);
        let u = CallbackUrl::parse("http://us%40r:p%3Aw@[::1]?q").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 80, "/?q")
        );
        assert_eq!(u.credentials, Some(("us@r".into(), "p:w".into())));
        assert!(matches!(
            CallbackUrl::parse("https://a/"),
            Err(UrlError::Scheme(_))
        ));
        assert!(matches!(
            CallbackUrl::parse("http:///x"),
            Err(UrlError::NoHost(_))
        ));
        assert!(matches!(
            CallbackUrl::parse("http://a:99999/"),
            Err(UrlError::BadPort(_))
        ));
    }
}
