//! The station page: `/` and its static files under `/static/`. The page is static HTML
//! (`assets/web/index.html`) that its script fills from `/api/v1/status` and keeps current from
//! the event stream `/api/v1/events` (`/?embed=<mount>` is the same page showing one mount's
//! player, for an `<iframe>`); the files are embedded in the binary (no external CDN; hls.js
//! is vendored as `/static/vendor/hls.min.js`),
//! and each can be replaced by a file of the same name in `[paths] webroot`: `index.html` for
//! the page, `static/<name>` for the rest (other files can be added there too).
//!
//! Files from the webroot are served safely: a request path is accepted only as plain segments
//! of `[A-Za-z0-9._-]` not starting with a dot (so no `..`, no percent-encoded dots or slashes,
//! no hidden files, no backslashes), and the file found is resolved with its symlinks and must
//! still lie inside `<webroot>/static` (or be `<webroot>/index.html`). Replies carry the
//! content type of the file's extension, `Cache-Control: no-cache` and a strong `ETag`
//! (a hash of the bytes): `If-None-Match` with it gets `304 Not Modified`.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::ctx::ServerCtx;

/// The embedded files: name under `/static/` (or `index.html`) and bytes.
const EMBEDDED: &[(&str, &[u8])] = &[
    ("index.html", include_bytes!("../../assets/web/index.html")),
    (
        "station.css",
        include_bytes!("../../assets/web/station.css"),
    ),
    ("station.js", include_bytes!("../../assets/web/station.js")),
    (
        "favicon.svg",
        include_bytes!("../../assets/web/favicon.svg"),
    ),
    ("admin.css", include_bytes!("../../assets/web/admin.css")),
    ("admin.js", include_bytes!("../../assets/web/admin.js")),
    ("golive.js", include_bytes!("../../assets/web/golive.js")),
    // hls.js 1.6.19 (npm `hls.js`, `dist/hls.min.js` as published, Apache-2.0; its license is
    // `vendor/hls.js-LICENSE.txt`): the station page's HLS player where the browser has no
    // native HLS.
    (
        "vendor/hls.min.js",
        include_bytes!("../../assets/web/vendor/hls.min.js"),
    ),
    (
        "vendor/hls.js-LICENSE.txt",
        include_bytes!("../../assets/web/vendor/hls.js-LICENSE.txt"),
    ),
];

/// Largest webroot file served, in bytes (a bigger one is answered 404, as if absent).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The embedded file `name`, if there is one.
pub fn embedded(name: &str) -> Option<&'static [u8]> {
    EMBEDDED.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// Checks a request path below `/static/` (`rest`, still percent-encoded as sent) and returns
/// it when every segment is a plain name: ASCII letters, digits, `.`, `_`, `-`, not starting
/// with `.`, not empty. Anything else (`..`, `%2e`, `%2f`, `\`, `//`, a trailing `/`) is `None`.
pub fn safe_relative(rest: &str) -> Option<&str> {
    if rest.is_empty() || rest.len() > 512 {
        return None;
    }
    let plain = |seg: &str| {
        !seg.is_empty()
            && !seg.starts_with('.')
            && seg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    rest.split('/').all(plain).then_some(rest)
}

/// The `Content-Type` of a file named `name`, by its extension.
pub fn content_type(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "txt" => "text/plain; charset=utf-8",
        "xml" | "xsl" => "text/xml; charset=utf-8",
        "mp3" => "audio/mpeg",
        "ogg" | "opus" => "audio/ogg",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// The strong `ETag` of `bytes` (a quoted 64-bit hash and the length).
pub fn etag(bytes: &[u8]) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    format!("\"{:016x}-{:x}\"", h.finish(), bytes.len())
}

/// Whether an `If-None-Match` value names `tag` (or is `*`).
pub fn matches_etag(if_none_match: &str, tag: &str) -> bool {
    if_none_match
        .split(',')
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t == tag)
}

/// Resolves `rel` (already checked by [`safe_relative`]) under `root/sub`, following symlinks
/// only while the resolved file stays inside the resolved `root/sub`, and returns the resolved
/// path with its metadata (nothing of the file is read). `None` when absent, not a regular
/// file, outside, or over [`MAX_FILE_BYTES`].
pub async fn resolve_inside(
    root: &Path,
    sub: &str,
    rel: &str,
) -> Option<(PathBuf, std::fs::Metadata)> {
    let base = tokio::fs::canonicalize(root.join(sub)).await.ok()?;
    let file: PathBuf = tokio::fs::canonicalize(base.join(rel)).await.ok()?;
    if !file.starts_with(&base) {
        tracing::info!(path = %file.display(), "webroot file outside the webroot refused");
        return None;
    }
    let meta = tokio::fs::metadata(&file).await.ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    Some((file, meta))
}

/// Reads `rel` under `root/sub` as [`resolve_inside`] finds it: its bytes, or `None` when
/// [`resolve_inside`] refuses it or it cannot be read.
pub async fn read_inside(root: &Path, sub: &str, rel: &str) -> Option<Vec<u8>> {
    let (file, _) = resolve_inside(root, sub, rel).await?;
    tokio::fs::read(&file).await.ok()
}

/// A file reply: its bytes with content type, `Cache-Control: no-cache` and `ETag`, or 304
/// when `headers` carry a matching `If-None-Match`.
pub fn file_reply(name: &str, bytes: Vec<u8>, headers: &HeaderMap) -> Response {
    let tag = etag(&bytes);
    let not_modified = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| matches_etag(v, &tag));
    let mut r = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, bytes).into_response()
    };
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(name)),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&tag) {
        h.insert(header::ETAG, v);
    }
    r
}

/// The file `name` from the webroot's `sub` folder (`""` for `index.html`), else embedded.
async fn load(ctx: &ServerCtx, sub: &str, name: &str) -> Option<Vec<u8>> {
    let root = ctx.config().paths.webroot.clone();
    if let Some(root) = root {
        if let Some(b) = read_inside(&root, sub, name).await {
            return Some(b);
        }
    }
    embedded(name).map(<[u8]>::to_vec)
}

/// Icecast's 404 of a file that is not there (also the admin router's fallback answer).
pub fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "The file you requested could not be found\n",
    )
        .into_response()
}

/// `GET /`: the station page.
pub async fn index(State(ctx): State<Arc<ServerCtx>>, headers: HeaderMap) -> Response {
    match load(&ctx, ".", "index.html").await {
        Some(b) => file_reply("index.html", b, &headers),
        None => not_found(),
    }
}

/// `GET /static/<file>`: a file of the station page or the admin UI.
pub async fn static_file(
    State(ctx): State<Arc<ServerCtx>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let rest = uri.path().strip_prefix("/static/").unwrap_or("");
    let Some(rel) = safe_relative(rest) else {
        return not_found();
    };
    match load(&ctx, "static", rel).await {
        Some(b) => file_reply(rel, b, &headers),
        None => not_found(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_segments_are_safe() {
        assert_eq!(safe_relative("station.css"), Some("station.css"));
        assert_eq!(safe_relative("img/logo-2.png"), Some("img/logo-2.png"));
        for bad in [
            "",
            "..",
            "../etc/passwd",
            "a/../../b",
            "%2e%2e/x",
            "a%2fb",
            ".hidden",
            "a/.git/config",
            "a//b",
            "a/",
            "/abs",
            "a\\..\\b",
            "nul\0",
            "sp ace",
        ] {
            assert_eq!(safe_relative(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn types_and_tags() {
        assert_eq!(content_type("a.CSS"), "text/css; charset=utf-8");
        assert_eq!(content_type("x.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("noext"), "application/octet-stream");
        let t = etag(b"abc");
        assert_ne!(t, etag(b"abd"));
        assert!(matches_etag(&t, &t));
        assert!(matches_etag(&format!("\"x\", W/{t}"), &t));
        assert!(matches_etag("*", &t));
        assert!(!matches_etag("\"other\"", &t));
    }

    #[test]
    fn every_embedded_file_is_there() {
        for name in [
            "index.html",
            "station.js",
            "station.css",
            "favicon.svg",
            "vendor/hls.min.js",
        ] {
            assert!(embedded(name).is_some_and(|b| !b.is_empty()), "{name}");
        }
    }

    #[tokio::test]
    async fn symlinks_out_of_the_root_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("web");
        std::fs::create_dir_all(root.join("static")).unwrap();
        std::fs::write(root.join("static/ok.css"), "x").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "s").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("static/link.txt"))
            .unwrap();
        assert_eq!(
            read_inside(&root, "static", "ok.css").await.as_deref(),
            Some(&b"x"[..])
        );
        assert_eq!(read_inside(&root, "static", "link.txt").await, None);
        assert_eq!(read_inside(&root, "static", "missing").await, None);
    }
}
