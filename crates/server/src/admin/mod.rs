//! Admin and status HTTP, served by axum over hyper on the same port as the streams: the
//! connection's head was already read by `connection.rs`, and is replayed to hyper.
//!
//! Routes: `/` (the station page) and `/static/…` (its files, `station.rs`), the admin web UI
//! at `/admin/` and `/admin/ui/…` (`ui.rs`), `/status-json.xsl` and `/api/v1/status`
//! (`status.rs`), `/metrics` (Prometheus), `/healthz/live` and `/healthz/ready` for probes and
//! `POST /api/v1/drain` (`health.rs`), Icecast 2.4.4's admin commands under `/admin/`
//! (`icecast.rs`, with Icecast 2.5's `reloadconfig`), and the admin JSON API under `/api/v1/`
//! (`api.rs`, with `POST /api/v1/reload`; the cluster's `/api/v1/cluster` in `cluster.rs`). What the
//! commands report and do lives in `data.rs` and `ops.rs`, who may call them in
//! `auth.rs`.
//!
//! Every request passes [`guard`] first: an address blocked for failed logins gets 429 for any
//! request carrying credentials, a state-changing command with credentials sent from another
//! site's page (`Origin`/`Referer`/`Sec-Fetch-Site`, see [`auth::cross_site`]) gets 403
//! (without credentials it gets its usual 401), a 401 answered
//! to a request with credentials counts as a failed login (logged for fail2ban), and every
//! reply carries `X-Frame-Options: DENY` and `Content-Security-Policy: frame-ancestors 'none'`.
//! `/metrics` leaves hidden mounts out unless asked with admin credentials, and needs the
//! `metrics` user's credentials when `[authentication] metrics-password` is set.
//!
//! No route reads a request body before checking credentials: only the `/api/v1/mounts/…`
//! endpoints, the cluster's edge reports and `/api/v1/hls/cache-logs` (`cache_logs.rs`) read
//! one, after authorization, capped and within `body-timeout` (`api.rs`); every
//! other handler ignores it, and hyper closes the connection after the reply without reading it.

pub mod api;
pub mod auth;
pub mod cache_logs;
pub mod cgi;
pub mod cluster;
pub mod data;
pub mod fileserve;
pub mod golive;
pub mod health;
pub mod html;
pub mod icecast;
pub mod listing;
pub mod ops;
pub mod playlist;
pub mod report_charts;
pub mod report_form;
pub mod reports;
pub mod reports_page;
pub mod station;
pub mod status;
pub mod ui;
pub mod xml;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::net::conn::Conn;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Extension, Router};

use crate::auth::throttle::LoginKind;
use crate::ctx::ServerCtx;
use crate::net::rewind::Rewind;
use crate::observe::access_log::AccessEntry;
use crate::observe::metrics::MountView;

/// hyper's `max_buf_size` of an admin connection, in bytes: its read buffer and its write
/// buffer each hold at most about this much (hyper's default is 417,792), so a reply streamed to
/// a client that reads slowly (a [`fileserve`] file) keeps at most this much of it in memory
/// per connection (issue 42, probe 6). Request heads are at most 8 KiB before they get here.
pub const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// Serves one admin/status connection (one request: no keep-alive).
pub async fn serve(ctx: Arc<ServerCtx>, stream: Conn, already_read: Vec<u8>, peer: SocketAddr) {
    let app = router(ctx.clone()).layer(Extension(peer));
    let io = hyper_util::rt::TokioIo::new(Rewind::new(stream, already_read));
    let svc = hyper_util::service::TowerToHyperService::new(app);
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(WRITE_BUFFER_BYTES)
        .serve_connection(io, svc);
    if let Err(e) = tokio::time::timeout(ctx.config().header_timeout() * 4, conn).await {
        tracing::debug!(%peer, "admin connection timed out: {e}");
    }
}

/// The admin/status routes.
pub fn router(ctx: Arc<ServerCtx>) -> Router {
    Router::new()
        .route("/", get(crate::admin::station::index))
        // Icecast's HTML status page (AzuraCast aliases `/` to it): the station page.
        .route("/status.xsl", get(crate::admin::station::index))
        .route("/static/{*file}", get(crate::admin::station::static_file))
        .route("/status-json.xsl", get(status_json))
        .route("/api/v1/status", get(status_v1))
        .route("/metrics", get(metrics))
        .route("/healthz/live", get(crate::admin::health::live))
        .route("/healthz/ready", get(crate::admin::health::ready))
        .route("/api/v1/drain", any(crate::admin::health::drain))
        .route(
            "/admin/",
            get(crate::admin::ui::index).post(crate::admin::icecast::handle),
        )
        .route("/admin/ui/", get(crate::admin::ui::overview))
        .route("/admin/ui/mount", get(crate::admin::ui::mount))
        .route(crate::admin::golive::PATH, get(crate::admin::golive::page))
        .route(
            crate::admin::reports_page::PATH,
            get(crate::admin::reports_page::page),
        )
        .route(
            "/admin/ui/{action}",
            axum::routing::post(crate::admin::ui::action),
        )
        .route(
            "/admin/{*command}",
            get(crate::admin::icecast::handle).post(crate::admin::icecast::handle),
        )
        .route("/api/v1/stats", get(crate::admin::api::stats))
        .route("/api/v1/reload", any(crate::admin::api::reload))
        .route("/api/v1/mounts", get(crate::admin::api::mounts))
        .route("/api/v1/reports/{name}", get(crate::admin::reports::report))
        .route("/api/v1/cluster", get(crate::admin::cluster::cluster))
        .route("/api/v1/cluster/edges", any(crate::admin::cluster::edges))
        .route(
            "/api/v1/hls/cache-logs",
            any(crate::admin::cache_logs::cache_logs),
        )
        .route(
            crate::event_stream::PATH,
            any(crate::admin::api::events_method_not_allowed),
        )
        .route(
            "/api/v1/mounts/{*mount}",
            any(crate::admin::api::mount_resource),
        )
        .fallback(crate::admin::fileserve::file_or_not_found)
        .layer(axum::middleware::from_fn_with_state(ctx.clone(), guard))
        .layer(axum::middleware::from_fn_with_state(
            ctx.clone(),
            log_request,
        ))
        .with_state(ctx)
}

/// Admin commands (`/admin/<command>`, with or without `.xsl`) that change something (and the
/// admin web UI's `POST /admin/ui/<action>`, see [`state_changing`]).
const STATE_CHANGING_COMMANDS: &[&str] = &[
    "fallbacks",
    "metadata",
    "moveclients",
    "killclient",
    "killsource",
    "manageauth",
    "reloadconfig",
];

/// Whether a request with `method` on `path` changes state (and so must not come from
/// another site's page): the commands of [`STATE_CHANGING_COMMANDS`], any API request but
/// `GET`/`HEAD`/`OPTIONS`, `/api/v1/reload`, and the admin web UI's `POST /admin/ui/<action>`.
pub fn state_changing(method: &axum::http::Method, path: &str) -> bool {
    use axum::http::Method;
    if let Some(cmd) = path.strip_prefix("/admin/") {
        if cmd.starts_with("ui/") {
            // The admin web UI's forms (`ui.rs`).
            return *method == Method::POST;
        }
        let cmd = cmd.strip_suffix(".xsl").unwrap_or(cmd);
        return STATE_CHANGING_COMMANDS.contains(&cmd);
    }
    path.starts_with("/api/")
        && (path == "/api/v1/reload"
            || !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS))
}

/// The mount a request names (`mount=`, or the API path), for the failed-login log line.
fn mount_of_request(uri: &axum::http::Uri) -> Option<String> {
    if let Some(rest) = uri.path().strip_prefix("/api/v1/mounts/") {
        return Some(format!("/{rest}"));
    }
    throng_proto::http::parse_query(uri.query()?)
        .into_iter()
        .find(|(k, _)| k == "mount")
        .map(|(_, v)| v)
}

/// Throttling, cross-site refusal, failed-login accounting and framing headers of every
/// admin/status request (see the module comment).
async fn guard(
    State(ctx): State<Arc<ServerCtx>>,
    Extension(peer): Extension<SocketAddr>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let has_credentials = req.headers().contains_key(header::AUTHORIZATION);
    let path = req.uri().path().to_owned();
    let blocked = has_credentials
        .then(|| ctx.auth().login_blocked(peer.ip()).err())
        .flatten();
    let mut resp = if let Some(wait) = blocked {
        tracing::info!(%peer, %path, "admin request from an address blocked for failed logins");
        let mut r = (
            StatusCode::TOO_MANY_REQUESTS,
            crate::auth::THROTTLED_MESSAGE,
        )
            .into_response();
        if let Ok(v) = header::HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        r
    } else if has_credentials
        && state_changing(req.method(), &path)
        && auth::cross_site(req.headers())
    {
        tracing::warn!(
            %peer,
            %path,
            origin = ?header_text(req.headers(), header::ORIGIN),
            referer = ?header_text(req.headers(), header::REFERER),
            "cross-site admin request refused"
        );
        (
            StatusCode::FORBIDDEN,
            "Cross-site request refused: send it from this server's own pages, or without Origin/Referer\n",
        )
            .into_response()
    } else {
        let user = auth::credentials(req.headers()).map(|c| c.user);
        let mount = mount_of_request(req.uri());
        let resp = next.run(req).await;
        if has_credentials && resp.status() == StatusCode::UNAUTHORIZED {
            let kind = if path == "/metrics" {
                LoginKind::Metrics
            } else {
                LoginKind::Admin
            };
            ctx.auth()
                .login_failed(peer.ip(), kind, user.as_deref(), mount.as_deref());
        }
        resp
    };
    let h = resp.headers_mut();
    h.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static("frame-ancestors 'none'"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    resp
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
    // A streamed body (a fileserve file) has no exact size: its Content-Length is the count.
    let bytes = axum::body::HttpBody::size_hint(resp.body())
        .exact()
        .or_else(|| {
            resp.headers()
                .get(header::CONTENT_LENGTH)?
                .to_str()
                .ok()?
                .parse()
                .ok()
        })
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
        end: None,
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

/// `/metrics`: with `metrics-password` set, the `metrics` user's (or the admin's) credentials
/// are required (401 otherwise) and every mount is shown; without it, anyone may read it and
/// hidden mounts are left out unless the request carries admin credentials. Either way the
/// series of mounts that have ended are removed once their listeners are gone.
async fn metrics(State(ctx): State<Arc<ServerCtx>>, headers: header::HeaderMap) -> Response {
    let config = ctx.config();
    let creds = auth::credentials(&headers);
    let is_admin = auth::is_admin(&ctx, creds.as_ref());
    let full = match config.authentication.metrics_password.as_deref() {
        Some(pw) if !pw.is_empty() => {
            let ok = is_admin
                || creds.as_ref().is_some_and(|c| {
                    c.user == "metrics" && throng_proto::auth::secrets_equal(&c.password, pw)
                });
            if !ok {
                return crate::admin::icecast::unauthorized(&ctx);
            }
            true
        }
        _ => is_admin,
    };
    let relays = ctx
        .registry
        .list()
        .iter()
        .filter(|m| m.settings.kind == crate::mount::live::SourceKind::Relay)
        .count();
    ctx.metrics
        .relays
        .set(i64::try_from(relays).unwrap_or(i64::MAX));
    if let Some(age) = ctx
        .ledger
        .as_ref()
        .and_then(|l| l.health().seconds_since_commit(crate::ledger::now_ms()))
    {
        ctx.metrics.ledger_seconds_since_commit.set(age);
    }
    let mut text = ctx
        .metrics
        .encode_view(|name| match ctx.registry.get(name) {
            Some(m) if full || !m.hidden() => MountView::Show,
            Some(_) => MountView::Hide,
            None => MountView::Forget,
        });
    let edge_timeout = std::time::Duration::from_secs(config.cluster.edge_timeout);
    let edges = ctx
        .cluster
        .snapshot(std::time::Instant::now(), edge_timeout);
    crate::cluster::registry::append_metrics(&mut text, &edges);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
