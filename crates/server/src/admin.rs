//! Admin and status HTTP, served by axum over hyper on the same port as the streams: the
//! connection's head was already read by `connection.rs`, and is replayed to hyper.
//!
//! Routes: `/` (a small page listing mounts), `/status-json.xsl` and `/api/v1/status`
//! (`status.rs`), `/metrics` (Prometheus), and `/admin/metadata` (Icecast 2.4.4 `admin.c`:
//! `mode=updinfo` with `song`, or `artist` and `title`; admin credentials or the mount's source
//! credentials).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use throng_proto::auth::{parse_basic, secrets_equal};
use throng_proto::http::parse_query;
use tokio::net::TcpStream;

use crate::access_log::AccessEntry;
use crate::rewind::Rewind;
use crate::server::ServerCtx;

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
    if let Err(e) = tokio::time::timeout(ctx.config.header_timeout() * 4, conn).await {
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
        .route("/admin/metadata", get(metadata))
        .route("/admin/metadata.xsl", get(metadata))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            ctx.clone(),
            log_request,
        ))
        .with_state(ctx)
}

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
    let agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
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
        referer: None,
        agent: agent.as_deref(),
        duration_secs: 0,
    });
    resp
}

fn json_response(v: serde_json::Value) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json; charset=UTF-8"),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        v.to_string(),
    )
        .into_response()
}

async fn status_json(State(ctx): State<Arc<ServerCtx>>) -> Response {
    json_response(crate::status::icecast_status(&ctx))
}

async fn status_v1(State(ctx): State<Arc<ServerCtx>>) -> Response {
    json_response(crate::status::v1_status(&ctx))
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

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn index(State(ctx): State<Arc<ServerCtx>>) -> Html<String> {
    let mut rows = String::new();
    for m in ctx.registry.list().iter().filter(|m| !m.settings.hidden) {
        let name = html_escape(&m.name);
        rows.push_str(&format!(
            "<li><a href=\"{name}\">{name}</a> — {} — {} listeners — <em>{}</em><br><audio controls preload=\"none\" src=\"{name}\"></audio></li>\n",
            html_escape(&m.settings.info.name),
            m.listeners.load(std::sync::atomic::Ordering::Relaxed),
            html_escape(&m.title()),
        ));
    }
    Html(format!(
        "<!doctype html><meta charset=\"utf-8\"><title>{id}</title><h1>{id}</h1>\
         <p>Mounts live now:</p><ul>\n{rows}</ul>\
         <p><a href=\"/status-json.xsl\">status-json.xsl</a> · <a href=\"/api/v1/status\">/api/v1/status</a> · <a href=\"/metrics\">/metrics</a></p>",
        id = html_escape(&ctx.config.server_id)
    ))
}

/// An Icecast `<iceresponse>` XML body.
fn ice_response(status: StatusCode, message: &str, ok: bool) -> Response {
    let body = format!(
        "<?xml version=\"1.0\"?>\n<iceresponse><message>{}</message><return>{}</return></iceresponse>\n",
        html_escape(message),
        u8::from(ok)
    );
    (status, [(header::CONTENT_TYPE, "text/xml")], body).into_response()
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, crate::source::REALM)],
        "You need to authenticate\n",
    )
        .into_response()
}

/// Whether the request carries admin credentials, or that mount's source credentials sent from
/// the source client's own address (Icecast 2.4.4 `admin.c` asks for admin credentials when a
/// metadata update comes from another address). Empty passwords never match.
fn authorized(
    ctx: &ServerCtx,
    headers: &HeaderMap,
    peer: SocketAddr,
    mount: Option<&crate::mount::Mount>,
) -> bool {
    let Some(c) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_basic)
    else {
        return false;
    };
    let matches = |user: &str, pass: &str| {
        !pass.is_empty() && c.user == user && secrets_equal(&c.password, pass)
    };
    let admin_pass = ctx
        .config
        .authentication
        .admin_password
        .as_deref()
        .unwrap_or("");
    if matches(ctx.config.admin_user(), admin_pass) {
        return true;
    }
    mount.is_some_and(|m| {
        let same_host = m.settings.source_ip.is_none_or(|ip| ip == peer.ip());
        same_host && matches(&m.settings.source_user, &m.settings.source_password)
    })
}

async fn metadata(
    State(ctx): State<Arc<ServerCtx>>,
    Extension(peer): Extension<SocketAddr>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    // Decoded by the proto crate: UTF-8, or Latin-1 from legacy encoders (`song=Caf%E9`).
    let q: HashMap<String, String> = parse_query(query.as_deref().unwrap_or(""))
        .into_iter()
        .collect();
    let mount = q.get("mount").and_then(|name| ctx.registry.get(name));
    if !authorized(&ctx, &headers, peer, mount.as_deref()) {
        return unauthorized();
    }
    let Some(mount) = mount else {
        return ice_response(StatusCode::BAD_REQUEST, "Source does not exist", false);
    };
    if q.get("mode").map(String::as_str) != Some("updinfo") {
        return ice_response(StatusCode::BAD_REQUEST, "No such action", false);
    }
    if mount.settings.format == throng_proto::format::Format::Ogg {
        // Vorbis and Opus: a new chained stream carries the new comments (ogg_retag.rs); other
        // Ogg codecs get Icecast's refusal below.
        let get = |k: &str| q.get(k).map(String::as_str);
        let Some((artist, title)) =
            crate::ogg_retag::tags_from_query(get("song"), get("artist"), get("title"))
        else {
            return ice_response(StatusCode::BAD_REQUEST, "No metadata given", false);
        };
        match crate::ogg_retag::request_ogg_tags(&mount, artist, title) {
            Ok(()) => {
                tracing::info!(mount = %mount.name, %title, ?artist, "Ogg metadata updated");
                return ice_response(StatusCode::OK, "Metadata update successful", true);
            }
            Err(e) => tracing::info!(mount = %mount.name, "Ogg metadata update refused: {e}"),
        }
    }
    if !mount.settings.format.supports_icy_metadata() {
        // Icecast 2.4.4 answers exactly this for Ogg/Opus mounts, with return 1 (docs/peers.md).
        return ice_response(
            StatusCode::OK,
            "Mountpoint will not accept URL updates",
            true,
        );
    }
    let title = match (q.get("song"), q.get("artist"), q.get("title")) {
        (Some(song), _, _) => song.clone(),
        (None, Some(a), Some(t)) => format!("{a} - {t}"),
        (None, None, Some(t)) => t.clone(),
        (None, Some(a), None) => a.clone(),
        (None, None, None) => {
            return ice_response(StatusCode::BAD_REQUEST, "No metadata given", false);
        }
    };
    mount.set_title(&title, q.get("url").map(String::as_str));
    tracing::info!(mount = %mount.name, %title, "metadata updated");
    ice_response(StatusCode::OK, "Metadata update successful", true)
}
