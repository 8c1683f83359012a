//! HTTP/1.x request and response heads, as Icecast clients and servers write them.
//!
//! Parsing uses `httparse`, with two rewrites Icecast peers need: a request line ending in
//! `ICE/1.0` (old source clients) is read as `HTTP/1.0`, and a status line starting with `ICY`
//! (SHOUTcast-style servers answer `ICY 200 OK`) is read as `HTTP/1.0`. Heads are limited to
//! [`MAX_HEAD_BYTES`]; bodies are never touched here.

use thiserror::Error;

/// Largest request or response head accepted, in bytes (status line, headers and the blank line).
pub const MAX_HEAD_BYTES: usize = 8192;

/// Most headers accepted in one head.
pub const MAX_HEADERS: usize = 64;

/// Why a head could not be parsed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// No blank line within [`MAX_HEAD_BYTES`] bytes.
    #[error("head larger than {MAX_HEAD_BYTES} bytes")]
    TooLarge,
    /// The bytes are not an HTTP/1.x head (httparse's reason is kept).
    #[error("malformed head: {0}")]
    Malformed(String),
}

/// A parsed request head. Header names keep their case; look them up with [`RequestHead::header`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// Method token as sent (`GET`, `SOURCE`, `PUT`, ...).
    pub method: String,
    /// The raw request target (path and query, still percent-encoded).
    pub target: String,
    /// Percent-decoded path (the part of the target before `?`).
    pub path: String,
    /// Raw query string after `?`, if any.
    pub query: Option<String>,
    /// Minor version: 0 for HTTP/1.0 (and ICE/1.0), 1 for HTTP/1.1.
    pub minor_version: u8,
    /// `true` when the request line said `ICE/1.0`.
    pub ice_protocol: bool,
    /// Headers in order; values decoded as UTF-8, or as ISO-8859-1 when not valid UTF-8.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The first value of header `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The request line as written in access logs: `METHOD target HTTP/1.x`.
    pub fn request_line(&self) -> String {
        format!(
            "{} {} HTTP/1.{}",
            self.method, self.target, self.minor_version
        )
    }
}

/// A parsed response head (used by relays and the load generator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// Status code, e.g. 200.
    pub status: u16,
    /// Reason phrase, e.g. `OK`.
    pub reason: String,
    /// `HTTP/1.0`, `HTTP/1.1`, or `ICY` when the server answered `ICY 200 OK`.
    pub version: String,
    /// Headers in order, values decoded as for [`RequestHead::headers`].
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// The first value of header `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

/// Finds the first header `name` (ASCII case-insensitive) in `headers`.
pub fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Decodes header bytes as UTF-8, falling back to ISO-8859-1 (one char per byte), as Icecast
/// 2.4.4 assumes Latin-1 for MP3 sources without a `charset`.
pub fn decode_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => bytes.iter().map(|&b| b as char).collect(),
    }
}

/// Parses a `k=v&k2=v2` query string (form-urlencoded: `+` is a space). Each name and value is
/// percent-decoded to bytes and read as UTF-8, or as ISO-8859-1 when that fails: legacy
/// encoders send Latin-1 titles (`song=Caf%E9`), which Icecast 2.4.4 passes through.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    parse_query_bytes(query)
        .into_iter()
        .map(|(k, v)| (k, decode_text(&v)))
        .collect()
}

/// Parses a `k=v&k2=v2` query string like [`parse_query`], but leaves each value as the
/// percent-decoded bytes, for callers that know the value's charset (admin `metadata` with
/// `charset=`). Names are decoded as in [`parse_query`].
pub fn parse_query_bytes(query: &str) -> Vec<(String, Vec<u8>)> {
    let decode = |s: &str| -> Vec<u8> {
        let spaced = s.replace('+', " ");
        percent_encoding::percent_decode_str(&spaced).collect()
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode_text(&decode(k)), decode(v))
        })
        .collect()
}

/// Decodes `bytes` in the named `charset` (as the `charset` parameter of Icecast 2.4.4 admin
/// `metadata`, which converts titles from it to UTF-8): `UTF-8` (invalid sequences become
/// U+FFFD), `ISO-8859-1`/`latin1` (one char per byte) and `US-ASCII`, names compared
/// case-insensitively. Without a charset, or with one not listed, the bytes are read as
/// [`decode_text`] does (UTF-8, else ISO-8859-1).
pub fn decode_with_charset(bytes: &[u8], charset: Option<&str>) -> String {
    let name = charset.map(|c| c.trim().to_ascii_lowercase());
    match name.as_deref() {
        Some("utf-8" | "utf8") => String::from_utf8_lossy(bytes).into_owned(),
        Some("iso-8859-1" | "iso8859-1" | "latin1" | "latin-1" | "l1" | "us-ascii" | "ascii") => {
            bytes.iter().map(|&b| b as char).collect()
        }
        _ => decode_text(bytes),
    }
}

/// Parses a request head at the start of `buf`.
///
/// Returns `Ok(None)` while the head is incomplete and shorter than [`MAX_HEAD_BYTES`], and
/// `Ok(Some((head, len)))` with the head's length in bytes once complete; any bytes after `len`
/// belong to the body (a source's audio). Errors: [`HeadError::TooLarge`], [`HeadError::Malformed`].
pub fn parse_request_head(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, HeadError> {
    let window = &buf[..buf.len().min(MAX_HEAD_BYTES)];
    // Old source clients send `SOURCE /mount ICE/1.0`: read it as HTTP/1.0 (Icecast 2.4.4
    // `connection.c:_handle_connection` accepts both protocol tokens).
    let line_end = window.windows(2).position(|w| w == b"\r\n");
    let rewritten;
    let mut ice = false;
    let parse_buf: &[u8] = match line_end {
        Some(end) if window[..end].ends_with(b" ICE/1.0") => {
            let mut fixed = Vec::with_capacity(window.len() + 1);
            fixed.extend_from_slice(&window[..end - 7]);
            fixed.extend_from_slice(b"HTTP/1.0");
            fixed.extend_from_slice(&window[end..]);
            rewritten = fixed;
            ice = true;
            &rewritten
        }
        _ => window,
    };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(parse_buf) {
        Ok(httparse::Status::Complete(len)) => {
            let target = req.path.unwrap_or("/").to_owned();
            let (raw_path, query) = match target.split_once('?') {
                Some((p, q)) => (p, Some(q.to_owned())),
                None => (target.as_str(), None),
            };
            let path = percent_encoding::percent_decode_str(raw_path)
                .decode_utf8_lossy()
                .into_owned();
            let head = RequestHead {
                method: req.method.unwrap_or("").to_owned(),
                path,
                query,
                target: target.clone(),
                minor_version: req.version.unwrap_or(0),
                ice_protocol: ice,
                headers: req
                    .headers
                    .iter()
                    .map(|h| (h.name.to_owned(), decode_text(h.value)))
                    .collect(),
            };
            // The rewrite made the head one byte longer than what was received.
            Ok(Some((head, if ice { len - 1 } else { len })))
        }
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => Err(HeadError::TooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooLarge),
        Err(e) => Err(HeadError::Malformed(e.to_string())),
    }
}

/// Parses a response head at the start of `buf`, accepting `ICY 200 OK` (SHOUTcast v1 servers).
///
/// Returns `Ok(None)` while incomplete, else the head and its length in bytes (of `buf` as
/// given, also for an `ICY` status line). Errors: [`HeadError::TooLarge`] when no complete head
/// fits in [`MAX_HEAD_BYTES`] or it has more than [`MAX_HEADERS`] headers,
/// [`HeadError::Malformed`] for bytes that are not a response head.
pub fn parse_response_head(buf: &[u8]) -> Result<Option<(ResponseHead, usize)>, HeadError> {
    let window = &buf[..buf.len().min(MAX_HEAD_BYTES)];
    let icy = window.starts_with(b"ICY ");
    let rewritten;
    let parse_buf: &[u8] = if icy {
        let mut v = Vec::with_capacity(window.len() + 5);
        v.extend_from_slice(b"HTTP/1.0 ");
        v.extend_from_slice(&window[4..]);
        rewritten = v;
        &rewritten
    } else {
        window
    };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(parse_buf) {
        Ok(httparse::Status::Complete(len)) => {
            let head = ResponseHead {
                status: resp.code.unwrap_or(0),
                reason: resp.reason.unwrap_or("").to_owned(),
                version: if icy {
                    "ICY".to_owned()
                } else {
                    format!("HTTP/1.{}", resp.version.unwrap_or(0))
                },
                headers: resp
                    .headers
                    .iter()
                    .map(|h| (h.name.to_owned(), decode_text(h.value)))
                    .collect(),
            };
            Ok(Some((head, if icy { len - 5 } else { len })))
        }
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => Err(HeadError::TooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooLarge),
        Err(e) => Err(HeadError::Malformed(e.to_string())),
    }
}

/// Standard reason phrase for the status codes Throng sends.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Authentication Required",
        403 => "Forbidden",
        404 => "File Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Writes a complete small response: `HTTP/1.0 {status} {reason}`, the given headers (written as
/// `Name: value`), `Content-Length` and `Connection: Close`, then `body`.
pub fn simple_response(status: u16, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut out = format!("HTTP/1.0 {} {}\r\n", status, reason_phrase(status));
    for (k, v) in headers {
        out.push_str(k);
        out.push_str(": ");
        out.push_str(v);
        out.push_str("\r\n");
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: Close\r\n\r\n",
        body.len()
    ));
    out.push_str(body);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_source_request_with_body_bytes_after_head() {
        let raw = b"SOURCE /live.mp3 HTTP/1.0\r\nAuthorization: Basic c291cmNlOmhhY2ttZQ==\r\nContent-Type: audio/mpeg\r\nice-name: Caf\xe9\r\n\r\n\xff\xfb";
        let (head, len) = parse_request_head(raw).unwrap().unwrap();
        assert_eq!(head.method, "SOURCE");
        assert_eq!(head.path, "/live.mp3");
        assert_eq!(head.minor_version, 0);
        assert_eq!(head.header("content-type"), Some("audio/mpeg"));
        assert_eq!(head.header("ICE-NAME"), Some("Café"));
        assert_eq!(&raw[len..], b"\xff\xfb");
    }

    #[test]
    fn ice_protocol_is_read_as_http_1_0() {
        let raw = b"SOURCE /a ICE/1.0\r\nice-password: x\r\n\r\nAUDIO";
        let (head, len) = parse_request_head(raw).unwrap().unwrap();
        assert!(head.ice_protocol);
        assert_eq!(head.method, "SOURCE");
        assert_eq!(&raw[len..], b"AUDIO");
    }

    #[test]
    fn partial_head_waits_and_oversized_head_fails() {
        assert_eq!(
            parse_request_head(b"GET / HTTP/1.0\r\nHost: x").unwrap(),
            None
        );
        let mut big = b"GET / HTTP/1.0\r\nX: ".to_vec();
        big.resize(MAX_HEAD_BYTES + 10, b'a');
        assert_eq!(parse_request_head(&big), Err(HeadError::TooLarge));
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(matches!(
            parse_request_head(b"GARBAGE\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse_request_head(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
            Err(HeadError::Malformed(_))
        ));
    }

    #[test]
    fn query_values_in_a_given_charset() {
        let q = parse_query_bytes("song=Caf%C3%A9&x");
        assert_eq!(q[0], ("song".to_owned(), b"Caf\xc3\xa9".to_vec()));
        assert_eq!(q[1], ("x".to_owned(), Vec::new()));
        assert_eq!(decode_with_charset(&q[0].1, None), "Café");
        assert_eq!(decode_with_charset(&q[0].1, Some("UTF-8")), "Café");
        assert_eq!(decode_with_charset(&q[0].1, Some("ISO-8859-1")), "CafÃ©");
        assert_eq!(decode_with_charset(b"Caf\xe9", None), "Café");
        assert_eq!(
            decode_with_charset(b"Caf\xe9", Some("utf-8")),
            "Caf\u{fffd}"
        );
        assert_eq!(decode_with_charset(b"Caf\xe9", Some("koi8-r")), "Café");
    }

    #[test]
    fn query_and_percent_decoding() {
        let raw =
            b"GET /admin/metadata?mount=%2Flive.mp3&mode=updinfo&song=A+B%26C HTTP/1.1\r\n\r\n";
        let (head, _) = parse_request_head(raw).unwrap().unwrap();
        assert_eq!(head.path, "/admin/metadata");
        let q = parse_query(head.query.as_deref().unwrap());
        assert_eq!(q[0], ("mount".into(), "/live.mp3".into()));
        assert_eq!(q[2], ("song".into(), "A B&C".into()));
        assert_eq!(parse_query("song=Caf%E9")[0].1, "Café", "Latin-1 fallback");
        assert_eq!(parse_query("song=Caf%C3%A9")[0].1, "Café");
        let (head, _) = parse_request_head(b"GET /my%20radio.mp3 HTTP/1.0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(head.path, "/my radio.mp3");
    }

    #[test]
    fn icy_status_line_is_accepted() {
        let raw = b"ICY 200 OK\r\nicy-metaint:8192\r\nicy-name:Test\r\n\r\nDATA";
        let (head, len) = parse_response_head(raw).unwrap().unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(head.version, "ICY");
        assert_eq!(head.header("Icy-MetaInt"), Some("8192"));
        assert_eq!(&raw[len..], b"DATA");
        let raw = b"HTTP/1.0 200 OK\r\nContent-Type: audio/mpeg\r\n\r\n";
        let (head, len) = parse_response_head(raw).unwrap().unwrap();
        assert_eq!(
            (head.status, head.version.as_str(), len),
            (200, "HTTP/1.0", raw.len())
        );
    }

    #[test]
    fn simple_response_has_length_and_close() {
        let r = String::from_utf8(simple_response(
            404,
            &[("Content-Type", "text/plain")],
            "nope",
        ))
        .unwrap();
        assert!(r.starts_with("HTTP/1.0 404 File Not Found\r\n"));
        assert!(r.contains("Content-Length: 4\r\n"));
        assert!(r.ends_with("\r\n\r\nnope"));
    }
}
