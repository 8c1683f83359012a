//! Icecast's `<fileserve>` (`[paths] fileserve`): a GET or HEAD for a path that is no mount is
//! answered with the file of that name in `[paths] webroot`, as Icecast 2.4.4 `fserve.c` serves
//! static files. Only plain names are taken ([`safe_relative`](super::station::safe_relative):
//! no `..`, no hidden files, no encoded slashes), the file is resolved with its symlinks and
//! must stay inside the webroot ([`read_inside`](super::station::read_inside)), and files over
//! [`MAX_FILE_BYTES`](super::station::MAX_FILE_BYTES) are not served. A live mount of the same
//! name always wins. The connection routes such a request here when [`wants`] says so.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;

use super::station::{file_reply, not_found, read_inside, safe_relative};
use crate::ctx::ServerCtx;

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

/// The router's fallback: the webroot file of the request's path when fileserve is on, else
/// Icecast's 404.
pub async fn file_or_not_found(
    State(ctx): State<Arc<ServerCtx>>,
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
    if let (Some(root), Some(rel)) = (root, rel) {
        if let Some(bytes) = read_inside(&root, ".", rel).await {
            return file_reply(rel, bytes, &headers);
        }
    }
    not_found()
}
