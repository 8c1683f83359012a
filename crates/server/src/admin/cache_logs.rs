//! `POST /api/v1/hls/cache-logs`: the cache tier's HLS request logs as JSON lines, as
//! a CDN's log streaming pushes them (one object per line, the `throng_hls` record of
//! `throng_proto::hls::cache_log`); each line keeps a session behind the cache alive
//! (`hls/cache_log.rs`). Credentials of its own (issue 42, item 4): user `cache-log` with
//! `[authentication] cache-log-password`, or the admin's (`auth::may_post_cache_logs`);
//! otherwise `401`. At most [`MAX_BATCH_BYTES`] per request, read after authorization
//! within `body-timeout`. Reply: `{"ok":true,"lines":n,"touched":…,"opened":…,"ignored":…,
//! "invalid":…}`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use serde_json::json;

use crate::admin::api::{json_reply, method_not_allowed, outcome, read_body_up_to, unauthorized};
use crate::admin::auth;
use crate::ctx::ServerCtx;
use crate::hls::cache_log::LineOutcome;

/// Most bytes of one batch of log lines.
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// The handler (see the module comment).
pub async fn cache_logs(
    State(ctx): State<Arc<ServerCtx>>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !auth::may_post_cache_logs(&ctx, auth::credentials(&headers).as_ref()) {
        return unauthorized();
    }
    if method != Method::POST {
        return method_not_allowed("POST");
    }
    let body =
        match read_body_up_to(&headers, body, ctx.config().body_timeout(), MAX_BATCH_BYTES).await {
            Ok(b) => b,
            Err(r) => return r,
        };
    let Ok(text) = std::str::from_utf8(&body) else {
        return outcome(StatusCode::BAD_REQUEST, false, "The body is not UTF-8");
    };
    let counts = crate::hls_http::apply_cache_logs(&ctx, text);
    let n = |o: LineOutcome| counts[o as usize];
    json_reply(
        StatusCode::OK,
        json!({
            "ok": true,
            "lines": counts.iter().sum::<u64>(),
            "touched": n(LineOutcome::Touched),
            "opened": n(LineOutcome::Opened),
            "ignored": n(LineOutcome::Ignored),
            "invalid": n(LineOutcome::Invalid),
        }),
    )
}
