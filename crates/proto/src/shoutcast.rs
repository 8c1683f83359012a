//! SHOUTcast v1 ("ICY") source login, as Icecast 2.4.4 `connection.c` speaks it on the port
//! after a listen port when `<shoutcast-mount>` is set (`_handle_shoutcast_compatible`).
//!
//! The source first sends a password line, ended by `\r\r\n` (NSV encoders), `\r\n` or `\n`.
//! The server answers [`OK_REPLY`] (exactly `OK2\r\nicy-caps:11\r\n\r\n`, 20 bytes) when it
//! matches; the source then sends `icy-*` header lines ended by a blank line, and the audio.
//! libshout sends the password line and the headers in one write without waiting for `OK2`,
//! and first "pokes" with the password `!POKE` ([`POKE`]) to learn that the server speaks ICY.
//!
//! Password line forms accepted (see [`Login::parse`]): `password` (Icecast 2.4.4),
//! `/mount:password` (Icecast-KH kh14+: the mount is named in the line), and `user:password`
//! (ocaml-cry, i.e. Liquidsoap, prefixes the user when one is set).

use crate::http::{decode_text, HeadError, MAX_HEADERS, MAX_HEAD_BYTES};

/// The reply to a good password, byte for byte as Icecast 2.4.4 sends it.
pub const OK_REPLY: &[u8] = b"OK2\r\nicy-caps:11\r\n\r\n";

/// The reply to a bad password before the connection is closed. Icecast 2.4.4 closes without a
/// word; SHOUTcast DNAS v1 sends this line, which clients show as the reason. It contains no
/// `OK` (libshout treats any reply containing `OK` as success).
pub const INVALID_PASSWORD_REPLY: &[u8] = b"invalid password\r\n";

/// The password libshout sends to probe an ICY server before its real login.
pub const POKE: &str = "!POKE";

/// The mount fed by SHOUTcast sources when none is configured (Icecast 2.4.4
/// `CONFIG_DEFAULT_SHOUTCAST_MOUNT`).
pub const DEFAULT_MOUNT: &str = "/stream";

/// Finds the password line at the start of `buf`: returns the line (without its end) and the
/// number of bytes it used, end included. `None` while no line end has arrived.
///
/// Line ends are `\r\r\n`, `\r\n` or `\n`, as Icecast 2.4.4 `connection.c` accepts them.
pub fn password_line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let nl = buf.iter().position(|&b| b == b'\n')?;
    let mut end = nl;
    // `\r\n` and `\r\r\n`: strip at most two carriage returns.
    for _ in 0..2 {
        if end > 0 && buf[end - 1] == b'\r' {
            end -= 1;
        }
    }
    Some((&buf[..end], nl + 1))
}

/// Whether `line` is an HTTP request line (`METHOD /target HTTP/1.x`) rather than a password:
/// libshout sends its ICY metadata updates (`GET /admin.cgi?...`) to the SHOUTcast port, which
/// Icecast-KH detects the same way.
pub fn looks_like_http(line: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(line) else {
        return false;
    };
    let mut parts = s.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_uppercase())
        && (target.starts_with('/') || target == "*")
        && (version.starts_with("HTTP/1.") || version == "ICE/1.0")
}

/// A decoded password line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// The mount named in the line (`/mount:password`), if any.
    pub mount: Option<String>,
    /// The secret: the whole line, or what follows `/mount:`.
    pub secret: String,
}

impl Login {
    /// Decodes a password line (UTF-8, else ISO-8859-1). A line starting with `/` and holding a
    /// `:` names its mount before the first `:` (Icecast-KH); any other line is all secret.
    pub fn parse(line: &[u8]) -> Login {
        let text = decode_text(line);
        match text.split_once(':') {
            Some((mount, secret)) if mount.starts_with('/') => Login {
                mount: Some(mount.to_owned()),
                secret: secret.to_owned(),
            },
            _ => Login {
                mount: None,
                secret: text,
            },
        }
    }

    /// Whether the secret matches `password` (Icecast 2.4.4), or is `user:password` with the
    /// mount's source user (ocaml-cry's form), compared in constant time. An empty `password`
    /// never matches.
    pub fn matches(&self, user: &str, password: &str) -> bool {
        if password.is_empty() {
            return false;
        }
        crate::auth::secrets_equal(&self.secret, password)
            || self
                .secret
                .split_once(':')
                .is_some_and(|(u, p)| u == user && crate::auth::secrets_equal(p, password))
    }
}

/// Parses the `icy-*` header block a source sends after `OK2`: `name:value` lines (a space
/// after the colon is optional) ended by a blank line, with `\r\r\n`, `\r\n` or `\n` line ends.
///
/// Returns `Ok(None)` while incomplete, else the headers (values decoded as UTF-8, else
/// ISO-8859-1) and the block's length in bytes; what follows is audio. Errors:
/// [`HeadError::TooLarge`] past [`MAX_HEAD_BYTES`] or [`MAX_HEADERS`] headers,
/// [`HeadError::Malformed`] for a line without a colon.
#[allow(clippy::type_complexity)]
pub fn parse_headers(buf: &[u8]) -> Result<Option<(Vec<(String, String)>, usize)>, HeadError> {
    let mut headers = Vec::new();
    let mut pos = 0;
    loop {
        let Some((line, used)) = password_line(&buf[pos..]) else {
            return if buf.len() >= MAX_HEAD_BYTES {
                Err(HeadError::TooLarge)
            } else {
                Ok(None)
            };
        };
        pos += used;
        if pos > MAX_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
        if line.is_empty() {
            return Ok(Some((headers, pos)));
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(HeadError::Malformed(format!(
                "ICY header line without a colon: {:?}",
                decode_text(line)
            )));
        };
        if headers.len() == MAX_HEADERS {
            return Err(HeadError::TooLarge);
        }
        let name = decode_text(&line[..colon]).trim().to_owned();
        let value = decode_text(&line[colon + 1..]).trim().to_owned();
        headers.push((name, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_reply_is_icecasts_twenty_bytes() {
        assert_eq!(OK_REPLY.len(), 20);
        assert!(!String::from_utf8_lossy(INVALID_PASSWORD_REPLY).contains("OK"));
    }

    #[test]
    fn password_line_ends() {
        assert_eq!(password_line(b"pw"), None);
        assert_eq!(password_line(b"pw\nicy"), Some((&b"pw"[..], 3)));
        assert_eq!(password_line(b"pw\r\nicy"), Some((&b"pw"[..], 4)));
        assert_eq!(password_line(b"pw\r\r\nicy"), Some((&b"pw"[..], 5)));
        assert_eq!(password_line(b"\n"), Some((&b""[..], 1)));
    }

    #[test]
    fn login_forms() {
        let plain = Login::parse(b"hackme");
        assert_eq!(plain.mount, None);
        assert!(plain.matches("source", "hackme"));
        assert!(!plain.matches("source", "other"));
        assert!(!Login::parse(b"").matches("source", ""));

        let kh = Login::parse(b"/live.mp3:hack:me");
        assert_eq!(kh.mount.as_deref(), Some("/live.mp3"));
        assert!(kh.matches("source", "hack:me"));

        let cry = Login::parse(b"source:hackme");
        assert_eq!(cry.mount, None);
        assert!(cry.matches("source", "hackme"));
        assert!(!cry.matches("dj", "hackme"));
        // A password that itself holds a colon still matches whole.
        assert!(Login::parse(b"a:b").matches("source", "a:b"));
        assert!(!Login::parse(b"!POKE").matches("source", "hackme"));
    }

    #[test]
    fn http_request_lines_are_told_apart() {
        assert!(looks_like_http(
            b"GET /admin.cgi?mode=updinfo&pass=x&song=a HTTP/1.1"
        ));
        assert!(looks_like_http(b"SOURCE /live ICE/1.0"));
        assert!(!looks_like_http(b"hackme"));
        assert!(!looks_like_http(b"GET me a coffee"));
        assert!(!looks_like_http(b"get /x HTTP/1.0"));
        assert!(!looks_like_http(b"!POKE"));
    }

    #[test]
    fn headers_as_liquidsoap_and_libshout_send_them() {
        let cry = b"icy-br:64\r\nicy-pub:1\r\nicy-name:LS Name\r\ncontent-type:audio/mpeg\r\n\r\n\xff\xfb";
        let (h, len) = parse_headers(cry).unwrap().unwrap();
        assert_eq!(&cry[len..], b"\xff\xfb");
        assert_eq!(h[2], ("icy-name".to_owned(), "LS Name".to_owned()));
        assert_eq!(h[3], ("content-type".to_owned(), "audio/mpeg".to_owned()));

        let shout = b"icy-name:Caf\xe9\nicy-url:http://x/\nicy-br: 128\n\nAUDIO";
        let (h, len) = parse_headers(shout).unwrap().unwrap();
        assert_eq!(&shout[len..], b"AUDIO");
        assert_eq!(h[0].1, "Café");
        assert_eq!(h[1].1, "http://x/");
        assert_eq!(h[2].1, "128");

        let nsv = b"icy-name:x\r\r\n\r\r\nNSV";
        let (h, len) = parse_headers(nsv).unwrap().unwrap();
        assert_eq!((h.len(), &nsv[len..]), (1, &b"NSV"[..]));

        assert_eq!(parse_headers(b"\r\nAUDIO").unwrap().unwrap().1, 2);
        assert_eq!(parse_headers(b"icy-name:x\r\n").unwrap(), None);
        assert!(matches!(
            parse_headers(b"no colon\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert_eq!(
            parse_headers(&vec![b'a'; MAX_HEAD_BYTES]),
            Err(HeadError::TooLarge)
        );
    }
}
