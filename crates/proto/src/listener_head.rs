//! The response head a listener receives, as Icecast 2.4.4 `format.c:format_prepare_headers`
//! writes it, plus the CORS headers Icecast-KH sends by default (`params.c:default_headers`).
//!
//! Standard headers are written `Name: value`; the stream's `icy-*` headers are written with no
//! space after the colon and in alphabetical order, byte for byte as Icecast does, because some
//! players match them literally.
//!
//! Configured headers (`<http-headers>`) never duplicate a header Throng writes itself: one
//! named as a built-in or stream header (case-insensitively) replaces its value in place, so an
//! imported icecast.xml setting `Access-Control-Allow-Origin` (Debian's stock file does) yields
//! one such header, not two, which browsers refuse (Chrome: `MultipleAllowOriginValues`).

/// CORS headers sent on every listener response and on `OPTIONS`, as Icecast-KH sends them,
/// with `Ice-Audio-Info` also exposed (a stream reply carries it; KH's list misses it).
pub const CORS_HEADERS: &[(&str, &str)] = &[
    ("Access-Control-Allow-Origin", "*"),
    ("Access-Control-Allow-Credentials", "true"),
    (
        "Access-Control-Allow-Headers",
        "Origin, Icy-MetaData, Range, Authorization",
    ),
    (
        "Access-Control-Expose-Headers",
        "Icy-Br, Icy-Description, Icy-Genre, Icy-MetaInt, Icy-Name, Icy-Pub, Icy-Url, Ice-Audio-Info",
    ),
    (
        "Access-Control-Allow-Methods",
        "GET, OPTIONS, SOURCE, PUT, HEAD, STATS",
    ),
];

/// What goes into a listener's response head.
#[derive(Debug, Clone, Default)]
pub struct ListenerHead<'a> {
    /// `Server:` value, e.g. `Throng 0.1.0`.
    pub server_id: &'a str,
    /// `Date:` value (RFC 7231 IMF-fixdate), supplied by the caller because this crate reads no clock.
    pub date: &'a str,
    /// The source's Content-Type.
    pub content_type: &'a str,
    /// Stream headers as `(name, value)` with names already lower-case `icy-*`/`ice-audio-info`;
    /// they are written sorted by name, `name:value`.
    pub stream_headers: Vec<(String, String)>,
    /// `icy-metaint` in bytes, when the listener asked for ICY metadata and the format carries it.
    pub metaint: Option<usize>,
    /// Extra configured headers (`<http-headers>`), written `Name: value` before the stream headers.
    pub extra_headers: &'a [(String, String)],
}

/// The reply to Safari's probe `Range: bytes=0-1` on a live stream: `206 Partial Content` with
/// exactly the 2 bytes announced (Icecast-KH answers it so; Safari refuses a stream whose
/// probe gets a `200`).
pub const PROBE_RANGE: &str = "bytes=0-1";

impl ListenerHead<'_> {
    /// Serialises the head: `HTTP/1.0 200 OK`, standard headers, CORS, configured headers,
    /// stream headers, `icy-metaint`, blank line.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.write("200 OK", &[])
    }

    /// Serialises the head of the answer to the range probe [`PROBE_RANGE`]: as
    /// [`ListenerHead::to_bytes`] with `206 Partial Content`, `Content-Range: bytes 0-1/*` and
    /// `Content-Length: 2`; the caller sends the 2 bytes and closes.
    pub fn probe_bytes(&self) -> Vec<u8> {
        self.write(
            "206 Partial Content",
            &[("Content-Range", "bytes 0-1/*"), ("Content-Length", "2")],
        )
    }

    fn write(&self, status: &str, more: &[(&str, &str)]) -> Vec<u8> {
        // Configured headers by lower-case name, the last of a name winning; `icy-metaint` is
        // Throng's alone (it frames the metadata the listener parses).
        let mut extra: Vec<(String, &str, &str)> = Vec::new();
        for (k, v) in self.extra_headers {
            let lk = k.to_ascii_lowercase();
            if lk == "icy-metaint" {
                continue;
            }
            match extra.iter_mut().find(|e| e.0 == lk) {
                Some(e) => e.2 = v,
                None => extra.push((lk, k, v)),
            }
        }
        let mut used = vec![false; extra.len()];
        let mut out = String::with_capacity(640);
        out.push_str("HTTP/1.0 ");
        out.push_str(status);
        out.push_str("\r\n");
        let mut std_header = |out: &mut String, name: &str, builtin: &str| {
            let v = match extra.iter().position(|e| e.0.eq_ignore_ascii_case(name)) {
                Some(i) => {
                    used[i] = true;
                    extra[i].2
                }
                None => builtin,
            };
            push_header(out, name, v);
        };
        std_header(&mut out, "Server", self.server_id);
        std_header(&mut out, "Connection", "Close");
        std_header(&mut out, "Date", self.date);
        std_header(&mut out, "Content-Type", self.content_type);
        std_header(&mut out, "Cache-Control", "no-cache, no-store");
        std_header(&mut out, "Expires", "Mon, 26 Jul 1997 05:00:00 GMT");
        std_header(&mut out, "Pragma", "no-cache");
        for (k, v) in more {
            std_header(&mut out, k, v);
        }
        for (k, v) in CORS_HEADERS {
            std_header(&mut out, k, v);
        }
        let mut stream: Vec<&(String, String)> = self.stream_headers.iter().collect();
        stream.sort_by(|a, b| a.0.cmp(&b.0));
        let stream_value = |name: &str| extra.iter().position(|e| e.0.eq_ignore_ascii_case(name));
        // Configured headers not named as a built-in or stream header, in their order.
        for (i, (lk, k, v)) in extra.iter().enumerate() {
            if !used[i] && !stream.iter().any(|s| s.0.eq_ignore_ascii_case(lk)) {
                push_header(&mut out, k, v);
            }
        }
        for (k, v) in stream {
            let v = match stream_value(k) {
                Some(i) => extra[i].2,
                None => v.as_str(),
            };
            out.push_str(k);
            out.push(':');
            out.push_str(&sanitize(v));
            out.push_str("\r\n");
        }
        if let Some(m) = self.metaint {
            out.push_str(&format!("icy-metaint:{m}\r\n"));
        }
        out.push_str("\r\n");
        out.into_bytes()
    }
}

fn push_header(out: &mut String, name: &str, value: &str) {
    out.push_str(name);
    out.push_str(": ");
    out.push_str(&sanitize(value));
    out.push_str("\r\n");
}

/// Makes a value safe for a header line: CR and LF become spaces (a value announced by a
/// source cannot inject headers) and other control characters but tab are removed (a NUL or
/// other control byte makes the whole head invalid, RFC 9110 section 5.5, so listeners and
/// relays refuse it; a source can send one percent-encoded in `ice-audio-info`, which
/// `SourceInfo` decodes for `icy-br`).
fn sanitize(v: &str) -> std::borrow::Cow<'_, str> {
    if v.chars().any(|c| c.is_control() && c != '\t') {
        v.chars()
            .filter_map(|c| match c {
                '\r' | '\n' => Some(' '),
                '\t' => Some('\t'),
                c if c.is_control() => None,
                c => Some(c),
            })
            .collect::<String>()
            .into()
    } else {
        v.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_in_stream_headers_leave_a_valid_head() {
        // Found by throng-fuzz (target listener_head): `ice-audio-info: ice-bitrate=%00128`
        // became `icy-br:\0128`, and the head did not parse any more.
        let info = crate::source_info::SourceInfo::from_headers(&[(
            "ice-audio-info".into(),
            "ice-bitrate=%00128%7F;ice-channels=2".into(),
        )]);
        let head = ListenerHead {
            server_id: "Throng",
            date: "Fri, 20 Nov 2026 22:00:00 GMT",
            content_type: "audio/mpeg",
            stream_headers: vec![("icy-br".into(), info.bitrate.unwrap())],
            metaint: None,
            extra_headers: &[],
        };
        let bytes = head.to_bytes();
        let (parsed, len) = crate::http::parse_response_head(&bytes).unwrap().unwrap();
        assert_eq!(len, bytes.len());
        assert_eq!(parsed.header("icy-br"), Some("128"));
    }

    #[test]
    fn head_matches_icecast_layout() {
        let head = ListenerHead {
            server_id: "Throng",
            date: "Fri, 20 Nov 2026 22:00:00 GMT",
            content_type: "audio/mpeg",
            stream_headers: vec![
                ("icy-name".into(), "My\r\nRadio".into()),
                ("icy-br".into(), "64".into()),
                ("icy-pub".into(), "0".into()),
            ],
            metaint: Some(16000),
            extra_headers: &[],
        };
        let s = String::from_utf8(head.to_bytes()).unwrap();
        assert!(s.starts_with("HTTP/1.0 200 OK\r\nServer: Throng\r\nConnection: Close\r\n"));
        assert!(s.contains("Content-Type: audio/mpeg\r\n"));
        assert!(s.contains("Access-Control-Allow-Origin: *\r\n"));
        let br = s.find("icy-br:64\r\n").unwrap();
        let name = s.find("icy-name:My  Radio\r\n").unwrap();
        let pubh = s.find("icy-pub:0\r\n").unwrap();
        assert!(br < name && name < pubh);
        assert!(s.ends_with("icy-metaint:16000\r\n\r\n"));
    }

    #[test]
    fn configured_headers_replace_built_in_ones() {
        let extra = vec![
            (
                "access-control-allow-origin".to_owned(),
                "https://a.example".to_owned(),
            ),
            ("X-Station".to_owned(), "one".to_owned()),
            ("Icy-Name".to_owned(), "Configured".to_owned()),
            ("icy-metaint".to_owned(), "1".to_owned()),
            ("X-Station".to_owned(), "two".to_owned()),
        ];
        let head = ListenerHead {
            server_id: "Throng",
            date: "Fri, 20 Nov 2026 22:00:00 GMT",
            content_type: "audio/mpeg",
            stream_headers: vec![("icy-name".into(), "Radio".into())],
            metaint: Some(16000),
            extra_headers: &extra,
        };
        for bytes in [head.to_bytes(), head.probe_bytes()] {
            let (parsed, _) = crate::http::parse_response_head(&bytes).unwrap().unwrap();
            let count = |n: &str| {
                parsed
                    .headers
                    .iter()
                    .filter(|(k, _)| k.eq_ignore_ascii_case(n))
                    .count()
            };
            for n in [
                "access-control-allow-origin",
                "x-station",
                "icy-name",
                "icy-metaint",
            ] {
                assert_eq!(count(n), 1, "{n}");
            }
            assert_eq!(
                parsed.header("Access-Control-Allow-Origin"),
                Some("https://a.example")
            );
            assert_eq!(parsed.header("x-station"), Some("two"));
            assert_eq!(parsed.header("icy-name"), Some("Configured"));
            assert_eq!(parsed.header("icy-metaint"), Some("16000"));
        }
        let probe = String::from_utf8(head.probe_bytes()).unwrap();
        assert!(probe.starts_with("HTTP/1.0 206 Partial Content\r\n"));
        assert!(probe.contains("Content-Range: bytes 0-1/*\r\n"));
    }
}
