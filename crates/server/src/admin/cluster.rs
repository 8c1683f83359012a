//! The cluster endpoints of the admin API (docs/SCALING.md):
//!
//! | Method and path | Who | Reply |
//! |---|---|---|
//! | `POST` or `PUT /api/v1/cluster/edges` with an `EdgeReport` JSON body (`{"url":…,"capacity":…,"listeners":…,"mounts":{"/live.mp3":12}}`) | an edge: Basic `edge` and `[cluster] secret`, or the admin | `{"ok":true,"message":…,"edge-timeout":s}`; 400 for a bad report, 503 when the registry is full |
//! | `GET /api/v1/cluster` | admin | this server's role, its own listeners, every edge alive (URL, capacity, listeners, room, mounts, last report, health, listeners redirected there) and the totals |
//!
//! The edges' series in `/metrics` are added by `admin/mod.rs` through
//! `cluster::registry::append_metrics`.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::Extension;
use serde_json::{json, Value};

use crate::admin::api::{json_reply, read_body};
use crate::admin::auth;
use crate::cluster::registry::{EdgeReport, ReportError};
use crate::cluster::sign;
use crate::config::cluster::RedirectMode;
use crate::ctx::ServerCtx;

fn outcome(status: StatusCode, ok: bool, message: &str) -> Response {
    json_reply(status, json!({ "ok": ok, "message": message }))
}

fn unauthorized() -> Response {
    let mut r = outcome(StatusCode::UNAUTHORIZED, false, "You need to authenticate");
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(crate::respond::REALM),
    );
    r
}

/// Whether `headers` carry an edge's credentials (user `edge`, the cluster secret) or the
/// admin's.
fn is_edge_or_admin(ctx: &ServerCtx, headers: &HeaderMap) -> bool {
    let creds = auth::credentials(headers);
    if auth::is_admin(ctx, creds.as_ref()) {
        return true;
    }
    let config = ctx.config();
    match (config.cluster.secret.as_deref(), creds) {
        (Some(secret), Some(c)) if !secret.is_empty() => {
            c.user == "edge" && throng_proto::auth::secrets_equal(&c.password, secret)
        }
        _ => false,
    }
}

/// `POST`/`PUT /api/v1/cluster/edges`: an edge's report (see the module documentation).
pub async fn edges(
    State(ctx): State<Arc<ServerCtx>>,
    Extension(peer): Extension<SocketAddr>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !is_edge_or_admin(&ctx, &headers) {
        return unauthorized();
    }
    if method == Method::GET || method == Method::HEAD {
        return cluster(State(ctx), headers).await;
    }
    if method != Method::POST && method != Method::PUT {
        let mut r = outcome(StatusCode::METHOD_NOT_ALLOWED, false, "Method not allowed");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, POST, PUT"));
        return r;
    }
    let body = match read_body(&headers, body, ctx.config().body_timeout()).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    // The report's bytes must be signed with the cluster secret (its time is inside them).
    let signed = ctx
        .config()
        .cluster
        .secret
        .as_deref()
        .is_some_and(|secret| {
            headers
                .get(sign::SIGNATURE_HEADER)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|sig| !secret.is_empty() && sign::verify(secret, &body, sig))
        });
    if !signed {
        tracing::info!(%peer, "edge report refused: missing or wrong signature");
        return outcome(
            StatusCode::UNAUTHORIZED,
            false,
            "The report must be signed with the cluster secret (X-Throng-Signature)",
        );
    }
    let report: EdgeReport = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return outcome(
                StatusCode::BAD_REQUEST,
                false,
                &format!("Bad edge report: {e}"),
            );
        }
    };
    let url = report.url.clone();
    let timeout = ctx.config().cluster.edge_timeout;
    let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    match ctx
        .cluster
        .report(report, peer.ip(), Instant::now(), now_ms)
    {
        Ok(new) => {
            if new {
                tracing::info!(edge = %url, "edge registered");
            }
            json_reply(
                StatusCode::OK,
                json!({ "ok": true, "message": if new { "Edge registered" } else { "Edge updated" }, "edge-timeout": timeout }),
            )
        }
        Err(e @ ReportError::Full) => {
            outcome(StatusCode::SERVICE_UNAVAILABLE, false, &e.to_string())
        }
        Err(e @ ReportError::Taken) => {
            tracing::warn!(%peer, edge = %url, "edge report refused: {e}");
            outcome(StatusCode::CONFLICT, false, &e.to_string())
        }
        Err(e) => {
            tracing::info!(%peer, edge = %url, "edge report refused: {e}");
            outcome(StatusCode::BAD_REQUEST, false, &e.to_string())
        }
    }
}

/// `GET /api/v1/cluster` (admin): the cluster as this server sees it.
pub async fn cluster(State(ctx): State<Arc<ServerCtx>>, headers: HeaderMap) -> Response {
    if !auth::is_admin(&ctx, auth::credentials(&headers).as_ref()) {
        return unauthorized();
    }
    json_reply(StatusCode::OK, view(&ctx))
}

/// The document of `GET /api/v1/cluster`.
pub fn view(ctx: &ServerCtx) -> Value {
    let config = ctx.config();
    let c = &config.cluster;
    let timeout = Duration::from_secs(c.edge_timeout);
    let edges = ctx.cluster.snapshot(Instant::now(), timeout);
    let mut own = serde_json::Map::new();
    let mut own_total = 0u64;
    for m in ctx.registry.list() {
        if !m.queue.load().ended {
            let n = u64::from(m.listeners.load(Ordering::Relaxed));
            own_total += n;
            own.insert(m.name.clone(), json!(n));
        }
    }
    let edge_listeners: u64 = edges.iter().map(|e| e.listeners).sum();
    let edge_capacity: u64 = edges.iter().map(|e| e.capacity).sum();
    let role = match (&c.origin, edges.is_empty()) {
        (Some(_), _) => "edge",
        (None, false) => "origin",
        (None, true) => "standalone",
    };
    let redirect = match c.redirect {
        RedirectMode::Overflow => "overflow",
        RedirectMode::All => "all",
        RedirectMode::Off => "off",
    };
    json!({
        "role": role,
        "origin": c.origin,
        "public-url": c.public_url,
        "redirect": redirect,
        "edge-timeout": c.edge_timeout,
        "server": { "listeners": own_total, "mounts": own, "capacity": ctx.clients.max() },
        "edges": edges,
        "totals": {
            "edges": edges.len(),
            "edge-listeners": edge_listeners,
            "edge-capacity": edge_capacity,
            "listeners": own_total + edge_listeners,
        },
    })
}
