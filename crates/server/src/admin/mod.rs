//! Admin and status HTTP, served by axum over hyper on the same port as the streams: the
//! connection's head was already read by `connection.rs`, and is replayed to hyper.
//!
//! Routes: `/` (a small page listing mounts), `/status-json.xsl` and `/api/v1/status`
//! (`status.rs`), `/metrics` (Prometheus), Icecast 2.4.4's admin commands under `/admin/`
//! (`icecast.rs`, with Icecast 2.5's `reloadconfig`), and the admin JSON API under `/api/v1/`
//! (`api.rs`, with `POST /api/v1/reload`). What the
//! commands report and do lives in `data.rs` and `ops.rs`, who may call them in
//! `auth.rs`.

pub mod api;
pub mod auth;
pub mod cgi;
pub mod data;
pub mod html;
pub mod icecast;
pub mod ops;
pub mod status;
pub mod xml;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Extension, Router};
use tokio::net::TcpStream;

use crate::ctx::ServerCtx;
use crate::net::rewind::Rewind;
use crate::observe::access_log::AccessEntry;

/// Serves one admin/status connection (one request: no keep-alive).
pub async fn serve(
    ctx: Arc<ServerCtx>,
    stream: TcpStream,
    already_read: Vec<u8>,
    peer: SocketAddr,
) {
    let app = router(ctx.clone()).layer(Extension(peer));
    let io = hyper_util::rt::TokioIo::new(Rewind::new(stream, already_read));
    let svc = hyper_util::service::TowerToHyperService::new(app);
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .serve_connection(io, svc);
    if let Err(e) = tokio::time::timeout(ctx.config().header_timeout() * 4, conn).await {
        tracing::debug!(%peer, "admin connection timed out: {e}");
    }
}

/// The admin/status routes.
pub fn router(ctx: Arc<ServerCtx>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/status-json.xsl", get(status_json))
        .route("/api/v1/status", get(status_v1))
        .route("/metrics", get(metrics))
        .route(
            "/admin/",
            get(crate::admin::icecast::handle).post(crate::admin::icecast::handle),
        )
        .route(
            "/admin/{*command}",
            get(crate::admin::icecast::handle).post(crate::admin::icecast::handle),
        )
        .route("/api/v1/stats", get(crate::admin::api::stats))
        .route("/api/v1/reload", any(crate::admin::api::reload))
        .route("/api/v1/mounts", get(crate::admin::api::mounts))
        .route(
            "/api/v1/mounts/{*mount}",
            any(crate::admin::api::mount_resource),
        )
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            ctx.clone(),
            log_request,
        ))
        .with_state(ctx)
}

/// The value of header `name` as text, if present and visible ASCII.
fn header_text(headers: &header::HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Writes the access-log line of an admin, status or API request, with its `User-Agent` and
/// `Referer` (the request target is redacted by the access log itself).
async fn log_request(
    State(ctx): State<Arc<ServerCtx>>,
    Extension(peer): Extension<SocketAddr>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let line = format!(
        "{} {} {:?}",
        req.method(),
        req.uri().path_and_query().map_or("/", |p| p.as_str()),
        req.version()
    );
    let agent = header_text(req.headers(), header::USER_AGENT);
    let referer = header_text(req.headers(), header::REFERER);
    let resp = next.run(req).await;
    let bytes = axum::body::HttpBody::size_hint(resp.body())
        .exact()
        .unwrap_or(0);
    ctx.access_log.log(&AccessEntry {
        ip: peer.ip(),
        user: None,
        request_line: &line,
        status: resp.status().as_u16(),
        bytes,
        referer: referer.as_deref(),
        agent: agent.as_deref(),
        duration_secs: 0,
    });
    resp
}

/// A status document (`/status-json.xsl`, `/api/v1/status`): the admin API's JSON reply with
/// the Content-Type Icecast 2.4.4's `status-json.xsl` sends, readable by any web page (CORS).
fn status_document(v: serde_json::Value) -> Response {
    let mut r = crate::admin::api::json_reply(StatusCode::OK, v);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json; charset=UTF-8"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        header::HeaderValue::from_static("*"),
    );
    r
}

async fn status_json(State(ctx): State<Arc<ServerCtx>>) -> Response {
    status_document(crate::admin::status::icecast_status(&ctx))
}

async fn status_v1(State(ctx): State<Arc<ServerCtx>>) -> Response {
    status_document(crate::admin::status::v1_status(&ctx))
}

async fn metrics(State(ctx): State<Arc<ServerCtx>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        ctx.metrics.encode(),
    )
        .into_response()
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "The file you requested could not be found\n",
    )
        .into_response()
}

async fn index(State(ctx): State<Arc<ServerCtx>>) -> Html<String> {
    let mut rows = String::new();
    for m in ctx.registry.list().iter().filter(|m| !m.hidden()) {
        let name = crate::admin::html::escape(&m.name);
        let href = crate::admin::html::href(&m.name);
        rows.push_str(&format!(
            "<li><a href=\"{href}\">{name}</a> — {} — {} listeners — <em>{}</em><br><audio controls preload=\"none\" src=\"{href}\"></audio></li>\n",
            crate::admin::html::escape(&m.settings.info.name),
            m.listeners.load(std::sync::atomic::Ordering::Relaxed),
            crate::admin::html::escape(&m.title()),
        ));
    }
    Html(format!(
        "<!doctype html><meta charset=\"utf-8\"><title>{id}</title><h1>{id}</h1>\
         <p>Mounts live now:</p><ul>\n{rows}</ul>\
         <p><a href=\"/status-json.xsl\">status-json.xsl</a> · <a href=\"/api/v1/status\">/api/v1/status</a> · <a href=\"/metrics\">/metrics</a></p>",
        id = crate::admin::html::escape(&ctx.config().server_id)
    ))
}
