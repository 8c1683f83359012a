//! The admin JSON API under `/api/v1/`: the data and actions of Icecast's `/admin/*` commands
//! with a consistent shape, for dashboards and scripts. Same credentials as `/admin/*`: admin
//! for everything; a mount's source credentials for that mount's endpoints.
//!
//! | Method and path | Icecast command | Reply |
//! |---|---|---|
//! | `GET /api/v1/stats` | `stats` | `{"global":{name:value},"mounts":[{"mount":…, name:value…}]}` (values are strings, as in the XML) |
//! | `GET /api/v1/mounts` | `listmounts` | `{"mounts":[mount…]}` |
//! | `GET /api/v1/mounts/{mount}` | `stats?mount=` | one mount object |
//! | `DELETE /api/v1/mounts/{mount}` | `killsource` | reply |
//! | `GET /api/v1/mounts/{mount}/listeners` | `listclients` | `{"mount":…,"listener_count":n,"listeners":[listener…]}`, streamed: every listener, or `limit` of them after `after` (`listing.rs`) |
//! | `DELETE /api/v1/mounts/{mount}/listeners/{id}` | `killclient` | reply (404 when not found) |
//! | `POST /api/v1/mounts/{mount}/move` `{"destination":"/b"}` | `moveclients` | reply plus `"moved"`, `"destination"` |
//! | `PUT /api/v1/mounts/{mount}/fallback` `{"fallback":"/b"}` (`""` clears) | `fallbacks` | reply |
//! | `PUT /api/v1/mounts/{mount}/metadata` `{"song":…}` or `{"artist":…,"title":…}`, optional `"url"` | `metadata` | reply |
//! | `GET /api/v1/mounts/{mount}/users` | `manageauth` | `{"mount":…,"users":["name"…]}` (sorted) |
//! | `POST /api/v1/mounts/{mount}/users` `{"username":…,"password":…}` | `manageauth?action=add` | reply (409 when the user exists) |
//! | `DELETE /api/v1/mounts/{mount}/users/{user}` | `manageauth?action=delete` | reply (404 when not listed) |
//! | `POST /api/v1/reload` | `reloadconfig` (Icecast 2.5) | reply: the summary of what changed, or 422 with why the configuration was refused |
//!
//! `{mount}` is the mount name without its leading `/` (`/api/v1/mounts/live.mp3/listeners`;
//! nested names work: `/api/v1/mounts/radio/hi.mp3`). Parameters come from a JSON object body
//! of strings, or else from the query string. Every action and every error replies
//! `{"ok":bool,"message":"…"}` with Icecast's message; statuses: 400 bad parameters, 401 no
//! valid credentials (with `WWW-Authenticate`), 404 no such mount or listener, 409 mount not
//! available, 405 wrong method, 408 a body not sent within `body-timeout`, 413 a body over
//! [`MAX_BODY_BYTES`]. A body is read only after the credentials are checked and the mount
//! found, and never more than [`MAX_BODY_BYTES`] of it. The `users` endpoints need a mount with an htpasswd
//! authenticator (400 otherwise); a failed file change is 500 with Icecast's message (the
//! reason is logged).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::{json, Map, Value};
use throng_proto::auth::Credentials;
use throng_proto::http::parse_query;

use crate::admin::auth::{self, Access};
use crate::admin::data::{self, Stat};
use crate::admin::listing::{self, Listing};
use crate::admin::ops::{self, AdminError, MetadataOutcome, MetadataUpdate};
use crate::audience::ListenerRow;
use crate::auth::htpasswd::{AddOutcome, HtpasswdAuth, UserFileError};
use crate::ctx::ServerCtx;

/// A JSON reply of the admin API: `status`, `v` as the body, not cached.
pub(crate) fn json_reply(status: StatusCode, v: Value) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        v.to_string(),
    )
        .into_response()
}

/// One listener of `GET /api/v1/mounts/{mount}/listeners`.
fn listener_json(r: &ListenerRow) -> Value {
    json!({
        "id": r.id,
        "path": r.path.as_str(),
        "ip": r.ip.to_string(),
        "user_agent": r.agent,
        "referer": r.referer,
        "username": r.user,
        "connected_s": r.connected_secs,
        "requested_mount": r.requested_mount,
        "lag_bytes": r.lag_bytes,
        "sent_bytes": r.sent,
    })
}

pub(crate) fn outcome(status: StatusCode, ok: bool, message: &str) -> Response {
    json_reply(status, json!({ "ok": ok, "message": message }))
}

pub(crate) fn unauthorized() -> Response {
    let mut r = outcome(StatusCode::UNAUTHORIZED, false, "You need to authenticate");
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(crate::respond::REALM),
    );
    r
}

pub(crate) fn method_not_allowed(allow: &'static str) -> Response {
    let mut r = outcome(StatusCode::METHOD_NOT_ALLOWED, false, "Method not allowed");
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// `/api/v1/events` with a method other than `GET`/`HEAD` (those are answered before axum,
/// in `event_stream.rs`; `OPTIONS` is the CORS preflight): the stream is read-only.
pub async fn events_method_not_allowed() -> Response {
    method_not_allowed("GET, HEAD, OPTIONS")
}

fn admin_error(e: &AdminError) -> Response {
    let status = match e {
        AdminError::SourceDoesNotExist => StatusCode::NOT_FOUND,
        AdminError::SourceNotAvailable => StatusCode::CONFLICT,
        AdminError::MissingParameter
        | AdminError::InvalidMountName
        | AdminError::NoSuchDestination
        | AdminError::IdenticalMounts
        | AdminError::FormatMismatch { .. } => StatusCode::BAD_REQUEST,
    };
    outcome(status, false, &e.to_string())
}

fn stats_object(stats: &[Stat]) -> Map<String, Value> {
    stats
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect()
}

/// `POST /api/v1/reload` (admin): reloads the configuration as SIGHUP does. 200 with
/// `{"ok": true, "message": summary}`, or 422 with `{"ok": false, "message": why}` when the new
/// configuration is refused (the running one is kept); other methods 405.
pub async fn reload(
    State(ctx): State<Arc<ServerCtx>>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if !auth::is_admin(&ctx, auth::credentials(&headers).as_ref()) {
        return unauthorized();
    }
    if method != Method::POST {
        return method_not_allowed("POST");
    }
    match ctx.control.reload().await {
        Ok(summary) => outcome(StatusCode::OK, true, &summary),
        Err(why) => outcome(StatusCode::UNPROCESSABLE_ENTITY, false, &why),
    }
}

/// `GET /api/v1/stats` (admin).
pub async fn stats(State(ctx): State<Arc<ServerCtx>>, headers: HeaderMap) -> Response {
    if !auth::is_admin(&ctx, auth::credentials(&headers).as_ref()) {
        return unauthorized();
    }
    let s = data::stats(&ctx, None);
    let mounts: Vec<Value> = s
        .mounts
        .iter()
        .map(|m| {
            let mut o = Map::new();
            o.insert("mount".into(), json!(m.mount));
            o.extend(stats_object(&m.stats));
            Value::Object(o)
        })
        .collect();
    json_reply(
        StatusCode::OK,
        json!({ "global": stats_object(&s.global), "mounts": mounts }),
    )
}

/// A mount as the API shows it: its `listmounts` entry, merged for live mounts with its
/// `/api/v1/status` object.
fn mount_object(ctx: &ServerCtx, e: &data::MountEntry) -> Value {
    let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
    if let (Value::Object(o), Some(m)) = (&mut v, ctx.registry.get(&e.mount)) {
        if let Value::Object(status) = crate::admin::status::v1_mount(ctx, &m) {
            o.extend(status);
        }
    }
    v
}

/// `GET /api/v1/mounts` (admin).
pub async fn mounts(State(ctx): State<Arc<ServerCtx>>, headers: HeaderMap) -> Response {
    if !auth::is_admin(&ctx, auth::credentials(&headers).as_ref()) {
        return unauthorized();
    }
    let list: Vec<Value> = data::mount_list(&ctx, None)
        .iter()
        .map(|e| mount_object(&ctx, e))
        .collect();
    json_reply(StatusCode::OK, json!({ "mounts": list }))
}

/// What under `/api/v1/mounts/{mount}` a request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// The mount itself.
    Mount,
    /// `…/listeners`.
    Listeners,
    /// `…/listeners/{id}`.
    Listener(u64),
    /// `…/move`.
    Move,
    /// `…/fallback`.
    Fallback,
    /// `…/metadata`.
    Metadata,
    /// `…/users`.
    Users,
    /// `…/users/{user}`.
    User(String),
}

/// Splits the path after `/api/v1/mounts/` into a mount name and a resource. A live mount
/// whose whole name matches is the mount itself; otherwise a known last segment (`listeners`,
/// `listeners/{id}`, `move`, `fallback`, `metadata`, `users`, `users/{user}`) names the
/// resource.
pub fn split_path(rest: &str, is_live: impl Fn(&str) -> bool) -> (String, Resource) {
    let full = format!("/{}", rest.trim_start_matches('/'));
    if is_live(&full) {
        return (full, Resource::Mount);
    }
    if let Some((m, id)) = full.rsplit_once("/listeners/") {
        if let (false, Ok(id)) = (m.is_empty(), id.parse::<u64>()) {
            return (m.to_owned(), Resource::Listener(id));
        }
    }
    if let Some((m, user)) = full.rsplit_once("/users/") {
        if !m.is_empty() && !user.is_empty() && !user.contains('/') {
            return (m.to_owned(), Resource::User(user.to_owned()));
        }
    }
    for (suffix, r) in [
        ("/listeners", Resource::Listeners),
        ("/users", Resource::Users),
        ("/move", Resource::Move),
        ("/fallback", Resource::Fallback),
        ("/metadata", Resource::Metadata),
    ] {
        if let Some(m) = full.strip_suffix(suffix).filter(|m| !m.is_empty()) {
            return (m.to_owned(), r);
        }
    }
    (full, Resource::Mount)
}

pub use crate::respond::MAX_BODY_BYTES;

/// Reads the body of an authorized request: at most [`MAX_BODY_BYTES`] (a larger
/// `Content-Length` is refused before reading), within `timeout`.
///
/// Errors: the reply to send instead: 413 for a body too large, 408 for one not sent in
/// time, 400 for one that cannot be read.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    timeout: std::time::Duration,
) -> Result<Bytes, Response> {
    read_body_up_to(headers, body, timeout, MAX_BODY_BYTES).await
}

/// [`read_body`] with a limit of `max` bytes instead of [`MAX_BODY_BYTES`] (batches of log
/// lines, `POST /api/v1/hls/cache-logs`).
pub(crate) async fn read_body_up_to(
    headers: &HeaderMap,
    body: Body,
    timeout: std::time::Duration,
    max: usize,
) -> Result<Bytes, Response> {
    use http_body_util::BodyExt;
    let too_large = || {
        outcome(
            StatusCode::PAYLOAD_TOO_LARGE,
            false,
            &format!("The body must be at most {max} bytes"),
        )
    };
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let limited = http_body_util::Limited::new(body, max);
    match tokio::time::timeout(timeout, limited.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(outcome(
            StatusCode::BAD_REQUEST,
            false,
            "The body could not be read",
        )),
        Err(_) => Err(outcome(
            StatusCode::REQUEST_TIMEOUT,
            false,
            "The body was not sent within body-timeout",
        )),
    }
}

/// Parameters from a JSON object body (string values), else from the query string; `None`
/// when the body is not such an object.
fn params(body: &[u8], query: Option<&str>) -> Option<HashMap<String, String>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Some(parse_query(query.unwrap_or("")).into_iter().collect());
    }
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    o.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Some((k, s)),
            _ => None,
        })
        .collect()
}

/// The htpasswd authenticator of `mount`, if it has one.
pub(crate) fn htpasswd_of(ctx: &ServerCtx, mount: &str) -> Option<Arc<HtpasswdAuth>> {
    match &ctx.auth().for_mount(mount)?.method {
        crate::auth::Method::Htpasswd(h) => Some(h.clone()),
        crate::auth::Method::Url(_) => None,
    }
}

/// The 400 of the `users` endpoints on a mount without an htpasswd authenticator.
fn no_htpasswd() -> Response {
    outcome(
        StatusCode::BAD_REQUEST,
        false,
        "This mount has no htpasswd authentication",
    )
}

/// The reply to a failed user change: 400 for a name that cannot be written, else 500 with
/// Icecast's `failed` message (the reason, which names files, is only logged).
fn user_change_failed(mount: &str, user: &str, e: &UserFileError, failed: &str) -> Response {
    tracing::warn!(%mount, %user, "admin API: {failed}: {e}");
    match e {
        UserFileError::UserName(e) => outcome(StatusCode::BAD_REQUEST, false, &e.to_string()),
        _ => outcome(StatusCode::INTERNAL_SERVER_ERROR, false, failed),
    }
}

/// Everything under `/api/v1/mounts/{mount}` (admin, or that mount's source credentials).
pub async fn mount_resource(
    State(ctx): State<Arc<ServerCtx>>,
    Extension(peer): Extension<SocketAddr>,
    Path(rest): Path<String>,
    method: Method,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Body,
) -> Response {
    let (name, resource) = split_path(&rest, |n| ctx.registry.get(n).is_some());
    let creds: Option<Credentials> = auth::credentials(&headers);
    let access = auth::access(&ctx, creds.as_ref(), Some(&name));
    if access == Access::Denied {
        tracing::info!(mount = %name, "admin API: bad or missing credentials");
        return unauthorized();
    }
    if access == Access::MountSource
        && auth::source_metadata_only(&ctx)
        && !matches!(resource, Resource::Metadata)
    {
        let msg = crate::admin::icecast::SOURCE_METADATA_ONLY;
        return outcome(StatusCode::FORBIDDEN, false, msg);
    }
    let m = match ops::live_mount(&ctx, &name) {
        Ok(m) => m,
        Err(e) => return admin_error(&e),
    };
    // Only now, authorized and for a live mount, is the body read (bounded in size and time).
    let body = match read_body(&headers, body, ctx.config().body_timeout()).await {
        Ok(b) => b,
        Err(reply) => {
            tracing::info!(%peer, mount = %name, status = reply.status().as_u16(), "admin API: request body refused");
            return reply;
        }
    };
    let Some(p) = params(&body, query.as_deref()) else {
        return outcome(
            StatusCode::BAD_REQUEST,
            false,
            "The body must be a JSON object of strings",
        );
    };
    match (resource, method) {
        (Resource::Mount, Method::GET | Method::HEAD) => {
            let e = data::mount_list(&ctx, None)
                .into_iter()
                .find(|e| e.mount == m.name);
            match e {
                Some(e) => json_reply(StatusCode::OK, mount_object(&ctx, &e)),
                None => admin_error(&AdminError::SourceDoesNotExist),
            }
        }
        (Resource::Mount, Method::DELETE) => {
            ops::kill_source(&m);
            outcome(StatusCode::OK, true, "Source Removed")
        }
        (Resource::Mount, _) => method_not_allowed("GET, HEAD, DELETE"),
        (Resource::Listeners, Method::GET | Method::HEAD) => {
            // Streamed (`listing.rs`): every listener, or one page with `after`/`limit`.
            let q = parse_query(query.as_deref().unwrap_or(""));
            let param = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
            let listing = Listing::from_params(param("after"), param("limit"), ctx.next_id());
            let head = format!(
                "{{\"mount\":{},\"listener_count\":{},\"listeners\":[",
                Value::from(m.name.as_str()),
                m.listeners.load(Ordering::Relaxed)
            );
            let body = listing::body(
                ctx.clone(),
                m.name.clone(),
                listing,
                head,
                |r, first, out| {
                    if !first {
                        out.push(',');
                    }
                    out.push_str(&listener_json(r).to_string());
                },
                "]}".to_owned(),
            );
            (
                StatusCode::OK,
                [
                    (header::CONTENT_TYPE, "application/json; charset=utf-8"),
                    (header::CACHE_CONTROL, "no-cache"),
                ],
                body,
            )
                .into_response()
        }
        (Resource::Listeners, _) => method_not_allowed("GET, HEAD"),
        (Resource::Listener(id), Method::DELETE) => {
            let signed = i64::try_from(id).unwrap_or(-1);
            if ops::kill_client(&ctx, &m, signed).await {
                outcome(StatusCode::OK, true, &format!("Client {id} removed"))
            } else {
                outcome(
                    StatusCode::NOT_FOUND,
                    false,
                    &format!("Client {id} not found"),
                )
            }
        }
        (Resource::Listener(_), _) => method_not_allowed("DELETE"),
        (Resource::Move, Method::POST) => {
            let Some(dest) = p.get("destination") else {
                return admin_error(&AdminError::MissingParameter);
            };
            match ops::move_clients(&ctx, &m, dest).await {
                Ok((to, n)) => json_reply(
                    StatusCode::OK,
                    json!({
                        "ok": true,
                        "message": format!("Clients moved from {} to {dest}", m.name),
                        "destination": to.name,
                        "moved": n,
                    }),
                ),
                Err(e) => admin_error(&e),
            }
        }
        (Resource::Move, _) => method_not_allowed("POST"),
        (Resource::Fallback, Method::PUT | Method::POST) => {
            let Some(fallback) = p.get("fallback") else {
                return admin_error(&AdminError::MissingParameter);
            };
            ops::set_fallback(&ctx, &m, fallback);
            outcome(StatusCode::OK, true, "Fallback configured")
        }
        (Resource::Fallback, _) => method_not_allowed("PUT, POST"),
        (Resource::Metadata, Method::PUT | Method::POST) => {
            // As `/admin/metadata`: with source credentials, only from the source's address.
            if access == Access::MountSource
                && m.settings.source_ip.is_some_and(|ip| ip != peer.ip())
            {
                tracing::info!(%peer, mount = %m.name, "admin API: metadata with source credentials from another address");
                return unauthorized();
            }
            let update = MetadataUpdate {
                song: p.get("song").cloned(),
                artist: p.get("artist").cloned(),
                title: p.get("title").cloned(),
                url: p.get("url").cloned(),
            };
            match ops::update_metadata(&m, &update) {
                MetadataOutcome::Updated => {
                    outcome(StatusCode::OK, true, "Metadata update successful")
                }
                MetadataOutcome::Unchanged => admin_error(&AdminError::MissingParameter),
                MetadataOutcome::NotAccepted => outcome(
                    StatusCode::CONFLICT,
                    false,
                    "Mountpoint will not accept URL updates",
                ),
            }
        }
        (Resource::Metadata, _) => method_not_allowed("PUT, POST"),
        (Resource::Users, Method::GET | Method::HEAD) => {
            let Some(h) = htpasswd_of(&ctx, &m.name) else {
                return no_htpasswd();
            };
            json_reply(
                StatusCode::OK,
                json!({ "mount": m.name, "users": h.user_names().await }),
            )
        }
        (Resource::Users, Method::POST) => {
            let Some(h) = htpasswd_of(&ctx, &m.name) else {
                return no_htpasswd();
            };
            let (Some(user), Some(pass)) = (p.get("username"), p.get("password")) else {
                return admin_error(&AdminError::MissingParameter);
            };
            match h.add_user(user, pass).await {
                Ok(AddOutcome::Added) => {
                    tracing::info!(%peer, mount = %m.name, %user, "admin API: user added");
                    outcome(StatusCode::OK, true, "User added")
                }
                Ok(AddOutcome::Exists) => outcome(
                    StatusCode::CONFLICT,
                    false,
                    "User already exists - not added",
                ),
                Err(e) => user_change_failed(
                    &m.name,
                    user,
                    &e,
                    "User add failed - check the icecast error log",
                ),
            }
        }
        (Resource::Users, _) => method_not_allowed("GET, HEAD, POST"),
        (Resource::User(user), Method::DELETE) => {
            let Some(h) = htpasswd_of(&ctx, &m.name) else {
                return no_htpasswd();
            };
            match h.delete_user(&user).await {
                Ok(true) => {
                    tracing::info!(%peer, mount = %m.name, %user, "admin API: user deleted");
                    outcome(StatusCode::OK, true, "User deleted")
                }
                Ok(false) => outcome(StatusCode::NOT_FOUND, false, "User not found"),
                Err(e) => user_change_failed(
                    &m.name,
                    &user,
                    &e,
                    "User delete failed - check the icecast error log",
                ),
            }
        }
        (Resource::User(_), _) => method_not_allowed("DELETE"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_mount_and_resource() {
        let none = |_: &str| false;
        assert_eq!(
            split_path("a.mp3", none),
            ("/a.mp3".into(), Resource::Mount)
        );
        assert_eq!(
            split_path("radio/hi.mp3/listeners", none),
            ("/radio/hi.mp3".into(), Resource::Listeners)
        );
        assert_eq!(
            split_path("a.mp3/listeners/42", none),
            ("/a.mp3".into(), Resource::Listener(42))
        );
        assert_eq!(
            split_path("a.mp3/move", none),
            ("/a.mp3".into(), Resource::Move)
        );
        assert_eq!(
            split_path("a.mp3/fallback", none),
            ("/a.mp3".into(), Resource::Fallback)
        );
        assert_eq!(
            split_path("a.mp3/metadata", none),
            ("/a.mp3".into(), Resource::Metadata)
        );
        assert_eq!(
            split_path("a.mp3/users", none),
            ("/a.mp3".into(), Resource::Users)
        );
        assert_eq!(
            split_path("radio/a.mp3/users/bob smith", none),
            ("/radio/a.mp3".into(), Resource::User("bob smith".into()))
        );
        assert_eq!(
            split_path("a.mp3/users/listeners", none),
            ("/a.mp3".into(), Resource::User("listeners".into()))
        );
        assert_eq!(
            split_path("users/x.mp3/listeners", none),
            ("/users/x.mp3".into(), Resource::Listeners)
        );
        assert_eq!(split_path("move", none), ("/move".into(), Resource::Mount));
        // A live mount named like a resource is the mount.
        let live = |n: &str| n == "/shows/move";
        assert_eq!(
            split_path("shows/move", live),
            ("/shows/move".into(), Resource::Mount)
        );
    }
}
