//! Icecast's `<fileserve>` (`[paths] fileserve`): a GET or HEAD for a path that is no mount is
//! answered with the file of that name in `[paths] webroot`, as Icecast 2.4.4 `fserve.c` serves
//! static files. Only plain names are taken ([`safe_relative`](super::station::safe_relative):
//! no `..`, no hidden files, no encoded slashes), the file is resolved with its symlinks and
//! must stay inside the webroot ([`resolve_inside`](super::station::resolve_inside)), and files
//! over [`MAX_FILE_BYTES`](super::station::MAX_FILE_BYTES) are not served. A live mount of the
//! same name always wins. The connection routes such a request here when [`wants`] says so.
//!
//! A file is streamed from disk in chunks of [`CHUNK_BYTES`] (issue 42, probe 6: it used to be
//! read whole into memory for every connection), so a connection holds at most a chunk and
//! the admin connection's write buffer of it, however slowly its client reads. Replies carry
//! the content type of the extension, `Cache-Control: no-cache`, `Accept-Ranges: bytes`, a
//! strong `ETag` made of the file's size and modification time and `Last-Modified`; `HEAD`,
//! `If-None-Match` (RFC 9110 §13.1.2), `If-Modified-Since` (§13.1.3) and `If-Range` (§13.1.5)
//! are answered from the file's metadata without reading it, and one byte range (`Range`,
//! RFC 9110 §14.2) gets `206 Partial Content` or `416 Range Not Satisfiable` (§15.5.17).

use std::io::SeekFrom;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio_util::io::ReaderStream;

use super::station::{
    content_type, matches_etag, not_found, resolve_inside, safe_relative, MAX_FILE_BYTES,
};
use crate::ctx::ServerCtx;

/// Bytes read from a file at a time for a reply's body: a streamed reply holds one such chunk
/// being read and at most the admin connection's write buffer
/// ([`WRITE_BUFFER_BYTES`](super::WRITE_BUFFER_BYTES)) of chunks waiting for the socket.
pub const CHUNK_BYTES: usize = 16 * 1024;

/// Whether a GET for `path` is a webroot file to serve: fileserve is on, a webroot is set, the
/// path is a plain name with a regular file there, and no mount of that name is live.
pub fn wants(ctx: &ServerCtx, path: &str) -> bool {
    let config = ctx.config();
    let (true, Some(root)) = (config.paths.fileserve, &config.paths.webroot) else {
        return false;
    };
    let Some(rel) = path.strip_prefix('/').and_then(safe_relative) else {
        return false;
    };
    ctx.registry.get(path).is_none() && root.join(rel).is_file()
}

/// What conditional and range requests of a file are answered from: its metadata only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validators {
    /// The file's length, in bytes.
    pub len: u64,
    /// Its modification time, truncated to whole seconds (the unit of an HTTP date).
    pub modified: SystemTime,
    /// Its strong entity tag (RFC 9110 §8.8.3), quoted: the modification time in seconds and
    /// nanoseconds since the Unix epoch and the length, in hex (`"<secs>.<nanos>-<len>"`), so
    /// that a change of size or time changes it.
    pub etag: String,
}

impl Validators {
    /// The validators of a file of `len` bytes last modified at `mtime` (a time before the
    /// epoch counts as the epoch).
    pub fn new(len: u64, mtime: SystemTime) -> Validators {
        let since = mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
        Validators {
            len,
            modified: UNIX_EPOCH + Duration::from_secs(since.as_secs()),
            etag: format!(
                "\"{:x}.{:x}-{len:x}\"",
                since.as_secs(),
                since.subsec_nanos()
            ),
        }
    }
}

/// How a request for a file is answered, by its conditional and range header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `304 Not Modified`: a validator of the request matches.
    NotModified,
    /// `200 OK` with the whole file.
    Whole,
    /// `206 Partial Content` with bytes `start..=end` (offsets in bytes, `end` inclusive and
    /// below the file's length).
    Partial {
        /// Offset of the first byte sent.
        start: u64,
        /// Offset of the last byte sent.
        end: u64,
    },
    /// `416 Range Not Satisfiable`: the range starts at or after the end of the file.
    Unsatisfiable,
}

/// Decides the answer to a GET or HEAD with `headers` for a file with validators `v`, in the
/// order of RFC 9110 §13.2.2: `If-None-Match` (§13.1.2, weak comparison, `*` matches) gives
/// 304 when it matches; without it, `If-Modified-Since` (§13.1.3) gives 304 when the file is
/// not newer than its date; then `Range` ([`range`]) applies unless an `If-Range` (§13.1.5)
/// names another validator (a weak tag or an unparsable date never match), in which case the
/// whole file is sent.
pub fn answer(headers: &HeaderMap, v: &Validators) -> Answer {
    let text = |name| {
        headers
            .get(name)
            .and_then(|h: &HeaderValue| h.to_str().ok())
    };
    if let Some(inm) = text(header::IF_NONE_MATCH) {
        if matches_etag(inm, &v.etag) {
            return Answer::NotModified;
        }
    } else if let Some(since) = text(header::IF_MODIFIED_SINCE) {
        if httpdate::parse_http_date(since).is_ok_and(|since| v.modified <= since) {
            return Answer::NotModified;
        }
    }
    let Some(spec) = text(header::RANGE) else {
        return Answer::Whole;
    };
    if let Some(if_range) = text(header::IF_RANGE) {
        let if_range = if_range.trim();
        let fresh = if if_range.starts_with('"') {
            if_range == v.etag
        } else if if_range.starts_with("W/") {
            false
        } else {
            httpdate::parse_http_date(if_range).is_ok_and(|d| d == v.modified)
        };
        if !fresh {
            return Answer::Whole;
        }
    }
    range(spec, v.len).unwrap_or(Answer::Whole)
}

/// The answer to a `Range` value `spec` for a file of `len` bytes (RFC 9110 §14.1.2, §14.2):
/// `bytes=first-last`, `bytes=first-` and `bytes=-suffix` give [`Answer::Partial`] (`last`
/// past the end is cut to the end, a suffix longer than the file is the whole file) or
/// [`Answer::Unsatisfiable`] (`first` at or past the end, a zero suffix, an empty file).
/// `None` means the field is ignored and the whole file sent, as §14.2 allows: another unit,
/// a syntax error, `last` below `first`, or more than one range (no `multipart/byteranges`).
pub fn range(spec: &str, len: u64) -> Option<Answer> {
    let (unit, set) = spec.trim().split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return None;
    }
    let (first, last) = set.trim().split_once('-')?;
    let number = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (start, end) = match (first.trim().is_empty(), last.trim().is_empty()) {
        // `-suffix`: the last `suffix` bytes.
        (true, false) => {
            let suffix = number(last)?;
            if suffix == 0 || len == 0 {
                return Some(Answer::Unsatisfiable);
            }
            (len.saturating_sub(suffix), len - 1)
        }
        // `first-`: from `first` to the end.
        (false, true) => (number(first)?, u64::MAX),
        // `first-last`.
        (false, false) => {
            let (first, last) = (number(first)?, number(last)?);
            if last < first {
                return None;
            }
            (first, last)
        }
        (true, true) => return None,
    };
    if start >= len {
        return Some(Answer::Unsatisfiable);
    }
    Some(Answer::Partial {
        start,
        end: end.min(len - 1),
    })
}

/// The router's fallback: the webroot file of the request's path when fileserve is on, else
/// Icecast's 404. The file is streamed ([`CHUNK_BYTES`] at a time) and never read for a `HEAD`,
/// a 304 or a 416.
pub async fn file_or_not_found(
    State(ctx): State<Arc<ServerCtx>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let root = {
        let config = ctx.config();
        config
            .paths
            .webroot
            .clone()
            .filter(|_| config.paths.fileserve)
    };
    let rel = uri.path().strip_prefix('/').and_then(safe_relative);
    let (Some(root), Some(rel)) = (root, rel) else {
        return not_found();
    };
    let Some((path, meta)) = resolve_inside(&root, ".", rel).await else {
        return not_found();
    };
    if method == Method::HEAD {
        let v = Validators::new(meta.len(), meta.modified().unwrap_or(UNIX_EPOCH));
        let answer = answer(&headers, &v);
        return reply(rel, &v, answer, Body::empty());
    }
    // The validators of the file opened, so that the headers describe the bytes sent even if
    // the file was replaced since it was resolved.
    let Ok(mut file) = tokio::fs::File::open(&path).await else {
        return not_found();
    };
    let Some(meta) = file
        .metadata()
        .await
        .ok()
        .filter(|m| m.is_file() && m.len() <= MAX_FILE_BYTES)
    else {
        return not_found();
    };
    let v = Validators::new(meta.len(), meta.modified().unwrap_or(UNIX_EPOCH));
    let answer = answer(&headers, &v);
    let (start, count) = match answer {
        Answer::Whole => (0, v.len),
        Answer::Partial { start, end } => (start, end - start + 1),
        Answer::NotModified | Answer::Unsatisfiable => {
            return reply(rel, &v, answer, Body::empty())
        }
    };
    if start > 0 && file.seek(SeekFrom::Start(start)).await.is_err() {
        return not_found();
    }
    let chunks = ReaderStream::with_capacity(file.take(count), CHUNK_BYTES);
    reply(rel, &v, answer, Body::from_stream(chunks))
}

/// The reply for `answer` of the file `name` with validators `v`: the status, the headers the
/// [module](self) lists, `Content-Length` (and `Content-Range` for 206 and 416, RFC 9110
/// §14.4) and `body` (empty for a HEAD, a 304 or a 416).
fn reply(name: &str, v: &Validators, answer: Answer, body: Body) -> Response {
    let (status, length, content_range) = match answer {
        Answer::NotModified => (StatusCode::NOT_MODIFIED, None, None),
        Answer::Whole => (StatusCode::OK, Some(v.len), None),
        Answer::Partial { start, end } => (
            StatusCode::PARTIAL_CONTENT,
            Some(end - start + 1),
            Some(format!("bytes {start}-{end}/{}", v.len)),
        ),
        Answer::Unsatisfiable => (
            StatusCode::RANGE_NOT_SATISFIABLE,
            Some(0),
            Some(format!("bytes */{}", v.len)),
        ),
    };
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(name)),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Ok(tag) = HeaderValue::from_str(&v.etag) {
        h.insert(header::ETAG, tag);
    }
    if let Ok(date) = HeaderValue::from_str(&httpdate::fmt_http_date(v.modified)) {
        h.insert(header::LAST_MODIFIED, date);
    }
    if let Some(length) = length {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    if let Some(value) = content_range.and_then(|r| HeaderValue::from_str(&r).ok()) {
        h.insert(header::CONTENT_RANGE, value);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partial(start: u64, end: u64) -> Option<Answer> {
        Some(Answer::Partial { start, end })
    }

    #[test]
    fn byte_ranges_follow_rfc_9110() {
        let len = 1000;
        assert_eq!(range("bytes=0-0", len), partial(0, 0));
        assert_eq!(range("bytes=10-19", len), partial(10, 19));
        assert_eq!(range("bytes=990-5000", len), partial(990, 999));
        assert_eq!(range("bytes=500-", len), partial(500, 999));
        assert_eq!(range("bytes=-100", len), partial(900, 999));
        assert_eq!(range("bytes=-5000", len), partial(0, 999));
        assert_eq!(range("Bytes = 1-2", len), partial(1, 2));
        assert_eq!(range("bytes=999-", len), partial(999, 999));
        for unsatisfiable in ["bytes=1000-", "bytes=1000-1001", "bytes=-0"] {
            assert_eq!(
                range(unsatisfiable, len),
                Some(Answer::Unsatisfiable),
                "{unsatisfiable}"
            );
        }
        assert_eq!(range("bytes=0-0", 0), Some(Answer::Unsatisfiable));
        assert_eq!(range("bytes=-1", 0), Some(Answer::Unsatisfiable));
        // Ignored: the whole file is sent.
        for ignored in [
            "items=0-1",
            "bytes=5-1",
            "bytes=0-1,5-6",
            "bytes=-",
            "bytes=a-1",
            "bytes=+1-2",
            "bytes=0x10-",
            "bytes",
            "bytes=99999999999999999999999-",
        ] {
            assert_eq!(range(ignored, len), None, "{ignored}");
        }
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn the_tag_is_made_of_size_and_time() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let v = Validators::new(16 << 20, t);
        assert_eq!(v.etag, "\"6553f100.5-1000000\"");
        assert_eq!(v.modified, UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        assert_ne!(
            Validators::new(16 << 20, t + Duration::from_nanos(1)).etag,
            v.etag
        );
        assert_ne!(Validators::new(15 << 20, t).etag, v.etag);
    }

    #[test]
    fn conditionals_are_answered_in_rfc_9110_order() {
        let v = Validators::new(1000, UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        let date = httpdate::fmt_http_date(v.modified);
        let earlier = httpdate::fmt_http_date(v.modified - Duration::from_secs(1));
        let a = |pairs: &[(header::HeaderName, &str)]| answer(&headers(pairs), &v);
        assert_eq!(a(&[]), Answer::Whole);
        assert_eq!(a(&[(header::IF_NONE_MATCH, &v.etag)]), Answer::NotModified);
        assert_eq!(a(&[(header::IF_NONE_MATCH, "*")]), Answer::NotModified);
        assert_eq!(a(&[(header::IF_NONE_MATCH, "\"other\"")]), Answer::Whole);
        assert_eq!(
            a(&[(header::IF_MODIFIED_SINCE, &date)]),
            Answer::NotModified
        );
        assert_eq!(a(&[(header::IF_MODIFIED_SINCE, &earlier)]), Answer::Whole);
        // If-None-Match wins over If-Modified-Since (§13.1.3).
        assert_eq!(
            a(&[
                (header::IF_NONE_MATCH, "\"other\""),
                (header::IF_MODIFIED_SINCE, &date)
            ]),
            Answer::Whole
        );
        let r = (header::RANGE, "bytes=-10");
        assert_eq!(
            a(std::slice::from_ref(&r)),
            Answer::Partial {
                start: 990,
                end: 999
            }
        );
        assert_eq!(
            a(&[r.clone(), (header::IF_RANGE, &v.etag)]),
            Answer::Partial {
                start: 990,
                end: 999
            }
        );
        assert_eq!(
            a(&[r.clone(), (header::IF_RANGE, &date)]),
            Answer::Partial {
                start: 990,
                end: 999
            }
        );
        for stale in ["\"other\"", &format!("W/{}", v.etag), &earlier, "garbage"] {
            assert_eq!(
                a(&[r.clone(), (header::IF_RANGE, stale)]),
                Answer::Whole,
                "{stale}"
            );
        }
        assert_eq!(a(&[(header::RANGE, "bytes=1000-")]), Answer::Unsatisfiable);
    }
}
