//! `/admin/<command>`: Icecast 2.4.4's admin interface (`admin.c:admin_handle_request`), answered
//! as Icecast answers it, so existing tools and scripts work unchanged.
//!
//! Order of checks, as Icecast: an unknown command is `400 Unrecognised command` before any
//! credentials are looked at. With a `mount` parameter the request is a mount command:
//! `buildm3u` needs no credentials; the others need admin credentials or that mount's source
//! credentials (`401` otherwise), then a live mount (`400 Source does not exist` /
//! `Source is not available`). Without `mount`, `streamlist.txt` takes the relay (or admin)
//! credentials and the other global commands admin credentials; a mount command without
//! `mount` is `400 Unknown admin request`. A `mount` that is not a canonical name is
//! `400 Invalid mountpoint` before anything else; with `[authentication] source-admin =
//! "metadata-only"`, source credentials get `403` for anything but `metadata`/`updatemetadata`.
//!
//! Replies: raw commands send the XML document (`text/xml; charset=utf-8`); `*.xsl` commands
//! the same document as a simple HTML page (no XSLT engine: see `html.rs`); errors are
//! Icecast's HTML error page (`text/html; charset=utf-8`), 401s its plain-text one with
//! `WWW-Authenticate: Basic realm="Icecast2 Server"`. The SHOUTcast `/admin.cgi` is
//! `cgi.rs`.
//!
//! `manageauth` lists, adds and deletes the users of a mount's htpasswd file (see
//! `manage_auth`). `reloadconfig` (Icecast 2.5) reloads the configuration as SIGHUP does, with
//! admin credentials only, `mount` or not, and answers an `<iceresponse>` whose `<return>` is
//! 1 with the summary of what changed, or 0 with why the new configuration was refused.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::decode_legacy_text;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use throng_proto::http::{decode_text, decode_with_charset, parse_query_bytes};
use throng_proto::xml::Element;

use crate::admin::auth::{self, Access};
use crate::admin::data;
use crate::admin::html;
use crate::admin::listing::{self, Listing};
use crate::admin::ops::{self, AdminError, MetadataOutcome, MetadataUpdate};
use crate::admin::xml;
use crate::auth::htpasswd::AddOutcome;
use crate::auth::Method;
use crate::ctx::ServerCtx;
use crate::mount::live::Mount;

/// How a command's reply is rendered (Icecast's `RAW`, `TRANSFORMED`, `PLAINTEXT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// The XML document.
    Raw,
    /// An HTML page (`*.xsl`).
    Transformed,
    /// Plain text (`streamlist.txt`).
    Plain,
}

/// An admin command, as `admin.c:admin_get_command` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `fallbacks`: set a mount's fallback.
    Fallbacks,
    /// `metadata`: update a mount's title.
    Metadata(Render),
    /// `listclients`: a mount's listeners.
    ListClients(Render),
    /// `stats`, `stats.xml`: the stats tree (one mount with `mount`).
    Stats(Render),
    /// `listmounts`: every mount.
    ListMounts(Render),
    /// `streamlist` (XML, as listmounts) and `streamlist.txt` (one mount per line).
    StreamList(Render),
    /// `moveclients`: move a mount's listeners (without `destination`: list the choices).
    MoveClients(Render),
    /// `killclient`: disconnect one listener.
    KillClient(Render),
    /// `killsource`: stop a mount's source.
    KillSource(Render),
    /// `updatemetadata`: the document of Icecast's metadata form.
    UpdateMetadata(Render),
    /// `manageauth`: list, add or delete the users of the mount's htpasswd file.
    ManageAuth(Render),
    /// `buildm3u`: a playlist with credentials in the URL (no authentication).
    BuildM3u,
    /// `reloadconfig` (Icecast 2.5): reload the configuration (admin only).
    ReloadConfig(Render),
}

/// The command named `name` (the path after `/admin/`), if it is one.
pub fn parse_command(name: &str) -> Option<Command> {
    use Command::*;
    use Render::*;
    Some(match name {
        "fallbacks" | "fallbacks.xsl" => Fallbacks,
        "metadata" => Metadata(Raw),
        "metadata.xsl" => Metadata(Transformed),
        "listclients" => ListClients(Raw),
        "listclients.xsl" => ListClients(Transformed),
        "stats" | "stats.xml" => Stats(Raw),
        "stats.xsl" | "" => Stats(Transformed),
        "listmounts" => ListMounts(Raw),
        "listmounts.xsl" => ListMounts(Transformed),
        "streamlist" => StreamList(Raw),
        "streamlist.xsl" => StreamList(Transformed),
        "streamlist.txt" => StreamList(Plain),
        "moveclients" => MoveClients(Raw),
        "moveclients.xsl" => MoveClients(Transformed),
        "killclient" => KillClient(Raw),
        "killclient.xsl" => KillClient(Transformed),
        "killsource" => KillSource(Raw),
        "killsource.xsl" => KillSource(Transformed),
        "updatemetadata" => UpdateMetadata(Raw),
        "updatemetadata.xsl" => UpdateMetadata(Transformed),
        "manageauth" => ManageAuth(Raw),
        "manageauth.xsl" => ManageAuth(Transformed),
        "buildm3u" => BuildM3u,
        "reloadconfig" => ReloadConfig(Raw),
        "reloadconfig.xsl" => ReloadConfig(Transformed),
        _ => return None,
    })
}

/// Query parameters: values as percent-decoded bytes (for `metadata`'s `charset`), and as
/// text (UTF-8, else Latin-1).
struct Params(HashMap<String, Vec<u8>>);

impl Params {
    fn parse(query: Option<&str>) -> Params {
        let mut map = HashMap::new();
        for (k, v) in parse_query_bytes(query.unwrap_or("")) {
            // The last occurrence wins, as in Icecast 2.4.4 `httpp_set_query_param`.
            map.insert(k, v);
        }
        Params(map)
    }

    fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| decode_text(v))
    }

    fn raw(&self, name: &str) -> Option<&[u8]> {
        self.0.get(name).map(Vec::as_slice)
    }

    fn get_in(&self, name: &str, charset: Option<&str>) -> Option<String> {
        self.0.get(name).map(|v| decode_with_charset(v, charset))
    }
}

/// Message of the 403 a source gets for a command other than a metadata update under
/// `source-admin = "metadata-only"`.
pub const SOURCE_METADATA_ONLY: &str = "Source credentials may only update metadata";

/// Headers of every admin reply, as Icecast 2.4.4 `util_http_build_header` with caching off.
fn reply(
    ctx: &ServerCtx,
    status: StatusCode,
    content_type: &str,
    body: impl Into<axum::body::Body>,
) -> Response {
    let mut r = (status, body.into()).into_response();
    let h = r.headers_mut();
    let set = |h: &mut HeaderMap, k: header::HeaderName, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    };
    set(h, header::SERVER, &ctx.config().server_id);
    set(h, header::CONTENT_TYPE, content_type);
    set(h, header::CACHE_CONTROL, "no-cache, no-store");
    set(h, header::EXPIRES, "Mon, 26 Jul 1997 05:00:00 GMT");
    set(h, header::PRAGMA, "no-cache");
    r
}

/// The 401 of Icecast 2.4.4 `client_send_401`.
pub fn unauthorized(ctx: &ServerCtx) -> Response {
    let mut r = reply(
        ctx,
        StatusCode::UNAUTHORIZED,
        "text/plain; charset=utf-8",
        "You need to authenticate\r\n",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(crate::respond::REALM),
    );
    r
}

/// An error page of Icecast 2.4.4 `client_send_400`.
fn bad_request(ctx: &ServerCtx, message: &str) -> Response {
    reply(
        ctx,
        StatusCode::BAD_REQUEST,
        "text/html; charset=utf-8",
        html::error_page(400, message),
    )
}

/// `doc` as XML, or as an HTML page titled `title`.
fn document(ctx: &ServerCtx, render: Render, title: &str, doc: &Element) -> Response {
    match render {
        Render::Transformed => reply(
            ctx,
            StatusCode::OK,
            "text/html; charset=utf-8",
            html::page(title, doc),
        ),
        Render::Raw | Render::Plain => reply(
            ctx,
            StatusCode::OK,
            "text/xml; charset=utf-8",
            doc.to_document(),
        ),
    }
}

fn response(ctx: &ServerCtx, render: Render, message: &str, ok: bool) -> Response {
    document(
        ctx,
        render,
        "Admin response",
        &xml::ice_response(message, ok),
    )
}

/// Serves `/admin/<command>`.
pub async fn handle(
    State(ctx): State<Arc<ServerCtx>>,
    Extension(peer): Extension<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let name = uri.path().strip_prefix("/admin/").unwrap_or("");
    let Some(cmd) = parse_command(name) else {
        tracing::info!(%peer, command = name, "unrecognised admin command");
        return bad_request(&ctx, "Unrecognised command");
    };
    let params = Params::parse(query.as_deref());
    let creds = auth::credentials(&headers);
    if let Command::ReloadConfig(r) = cmd {
        if !auth::is_admin(&ctx, creds.as_ref()) {
            tracing::info!(%peer, command = name, "admin: bad or missing credentials");
            return unauthorized(&ctx);
        }
        tracing::info!(%peer, "admin: configuration reload requested");
        return match ctx.control.reload().await {
            Ok(summary) => response(&ctx, r, &summary, true),
            Err(why) => response(
                &ctx,
                r,
                &format!("configuration not reloaded: {why}"),
                false,
            ),
        };
    }
    match params.get("mount") {
        Some(mount) => {
            if let Err(e) = ops::check_name(&mount) {
                tracing::info!(%peer, command = name, mount = %mount.escape_debug(), "admin: {e}");
                return bad_request(&ctx, &e.to_string());
            }
            if cmd == Command::BuildM3u {
                return build_m3u(&ctx, &mount, &params);
            }
            let access = auth::access(&ctx, creds.as_ref(), Some(&mount));
            if access == Access::Denied {
                tracing::info!(%peer, command = name, %mount, "admin: bad or missing credentials");
                return unauthorized(&ctx);
            }
            if access == Access::MountSource
                && auth::source_metadata_only(&ctx)
                && !matches!(cmd, Command::Metadata(_) | Command::UpdateMetadata(_))
            {
                tracing::info!(%peer, command = name, %mount, "admin: source credentials may only update metadata (source-admin = \"metadata-only\")");
                return reply(
                    &ctx,
                    StatusCode::FORBIDDEN,
                    "text/html; charset=utf-8",
                    html::error_page(403, SOURCE_METADATA_ONLY),
                );
            }
            let m = match ops::live_mount(&ctx, &mount) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(%peer, command = name, %mount, "admin: {e}");
                    return bad_request(&ctx, &e.to_string());
                }
            };
            mount_command(&ctx, cmd, &m, &params, access, peer).await
        }
        None => {
            let allowed = match cmd {
                Command::StreamList(Render::Plain) => {
                    auth::is_relay(&ctx, creds.as_ref()) || auth::is_admin(&ctx, creds.as_ref())
                }
                _ => auth::is_admin(&ctx, creds.as_ref()),
            };
            if !allowed {
                tracing::info!(%peer, command = name, "admin: bad or missing credentials");
                return unauthorized(&ctx);
            }
            general_command(&ctx, cmd)
        }
    }
}

/// Commands without `mount` (`admin_handle_general_request`).
fn general_command(ctx: &ServerCtx, cmd: Command) -> Response {
    match cmd {
        Command::Stats(r) => document(
            ctx,
            r,
            "Server statistics",
            &xml::stats(&data::stats(ctx, None)),
        ),
        Command::ListMounts(r)
        | Command::StreamList(r @ (Render::Raw | Render::Transformed))
        | Command::MoveClients(r @ Render::Transformed) => document(
            ctx,
            r,
            "Mounts",
            &xml::source_list(&data::mount_list(ctx, None), None),
        ),
        Command::StreamList(Render::Plain) => {
            let body: String = data::stream_list(ctx)
                .iter()
                .map(|m| format!("{m}\r\n"))
                .collect();
            reply(ctx, StatusCode::OK, "text/plain; charset=utf-8", body)
        }
        _ => bad_request(ctx, "Unknown admin request"),
    }
}

/// Commands on one live mount (`admin_handle_mount_request`).
async fn mount_command(
    ctx: &Arc<ServerCtx>,
    cmd: Command,
    m: &Arc<Mount>,
    params: &Params,
    access: Access,
    peer: SocketAddr,
) -> Response {
    match cmd {
        Command::Stats(r) => document(
            ctx,
            r,
            &format!("Statistics of {}", m.name),
            &xml::stats(&data::stats(ctx, Some(&m.name))),
        ),
        Command::Fallbacks => {
            let Some(fallback) = params.get("fallback") else {
                return bad_request(ctx, &AdminError::MissingParameter.to_string());
            };
            // An empty fallback clears it; anything else must be a canonical name.
            if !fallback.is_empty() {
                if let Err(e) = ops::check_name(&fallback) {
                    return bad_request(ctx, &e.to_string());
                }
            }
            ops::set_fallback(ctx, m, &fallback);
            reply(
                ctx,
                StatusCode::OK,
                "text/html; charset=utf-8",
                html::success_page("Fallback configured"),
            )
        }
        Command::Metadata(r) => metadata(ctx, m, params, access, peer, r),
        Command::ListClients(r) => {
            // `after` (the last ID of a previous page) and `limit`; `<Listeners>` stays the
            // mount's total.
            let after = params.get("after");
            let limit = params.get("limit");
            let count = m.listeners.load(std::sync::atomic::Ordering::Relaxed);
            if r == Render::Transformed {
                // The HTML page is rendered whole: one page of rows (`audience/page.rs`).
                let page =
                    crate::audience::page::Page::from_params(after.as_deref(), limit.as_deref());
                let rows = ops::listeners(ctx, m, page).await;
                return document(
                    ctx,
                    r,
                    &format!("Listeners of {}", m.name),
                    &xml::listeners(&m.name, count, &rows),
                );
            }
            // The XML is streamed, every listener unless a `limit` is given (`listing.rs`).
            let listing = Listing::from_params(after.as_deref(), limit.as_deref(), ctx.next_id());
            let body = listing::body(
                ctx.clone(),
                m.name.clone(),
                listing,
                xml::listeners_head(&m.name, count),
                |row, _, out| xml::listener(row).write_to(out),
                xml::LISTENERS_TAIL.to_owned(),
            );
            reply(ctx, StatusCode::OK, "text/xml; charset=utf-8", body)
        }
        Command::MoveClients(r) => {
            let Some(dest) = params.get("destination") else {
                let doc = xml::source_list(&data::mount_list(ctx, Some(&m.name)), Some(&m.name));
                return document(ctx, r, &format!("Move listeners of {}", m.name), &doc);
            };
            match ops::move_clients(ctx, m, &dest).await {
                Ok(_) => response(
                    ctx,
                    r,
                    &format!("Clients moved from {} to {dest}", m.name),
                    true,
                ),
                Err(e @ AdminError::FormatMismatch { .. }) => {
                    response(ctx, r, &e.to_string(), false)
                }
                Err(e) => bad_request(ctx, &e.to_string()),
            }
        }
        Command::KillClient(r) => {
            let Some(id) = params.get("id") else {
                return bad_request(ctx, &AdminError::MissingParameter.to_string());
            };
            let id = ops::atoi(&id);
            if ops::kill_client(ctx, m, id).await {
                response(ctx, r, &format!("Client {id} removed"), true)
            } else {
                response(ctx, r, &format!("Client {id} not found"), false)
            }
        }
        Command::KillSource(r) => {
            ops::kill_source(m);
            response(ctx, r, "Source Removed", true)
        }
        Command::UpdateMetadata(r) => document(
            ctx,
            r,
            &format!("Update metadata of {}", m.name),
            &xml::mount_only(&m.name),
        ),
        Command::ManageAuth(r) => manage_auth(ctx, m, params, r, peer).await,
        Command::ListMounts(_)
        | Command::StreamList(_)
        | Command::BuildM3u
        | Command::ReloadConfig(_) => bad_request(ctx, "Mount request unknown"),
    }
}

/// `metadata` (`command_metadata`): `mode=updinfo` with `song`, or `artist` and `title`, in
/// `charset` (default: UTF-8, else Latin-1). A source client may update its own mount only
/// from its own address; anyone else needs admin credentials.
fn metadata(
    ctx: &ServerCtx,
    m: &Mount,
    params: &Params,
    access: Access,
    peer: SocketAddr,
    render: Render,
) -> Response {
    if access == Access::MountSource && m.settings.source_ip.is_some_and(|ip| ip != peer.ip()) {
        tracing::info!(%peer, mount = %m.name, "metadata with source credentials from another address");
        return unauthorized(ctx);
    }
    let Some(mode) = params.get("mode") else {
        return bad_request(ctx, &AdminError::MissingParameter.to_string());
    };
    if mode != "updinfo" {
        return response(ctx, render, "No such action", false);
    }
    let charset = params.get("charset");
    // Without `charset=`, the mount's `charset` (Icecast `<charset>`) says what non-UTF-8
    // values are.
    let config = ctx.config();
    let mount_charset = config.mount_for(&m.name).and_then(|c| c.charset.as_deref());
    let get = |k: &str| match &charset {
        Some(c) => params.get_in(k, Some(c)),
        None => params.raw(k).map(|v| decode_legacy_text(v, mount_charset)),
    };
    let update = MetadataUpdate {
        song: get("song"),
        artist: get("artist"),
        title: get("title"),
        url: get("url"),
    };
    match ops::update_metadata(m, &update) {
        MetadataOutcome::NotAccepted => {
            response(ctx, render, "Mountpoint will not accept URL updates", true)
        }
        MetadataOutcome::Updated | MetadataOutcome::Unchanged => {
            response(ctx, render, "Metadata update successful", true)
        }
    }
}

/// The 400 message of `manageauth` when it cannot proceed (lowercase, unlike
/// `COMMAND_REQUIRE`'s "Missing parameter").
const MANAGEAUTH_MISSING: &str = "missing parameter";

/// `manageauth` (Icecast 2.4.4 `command_manageauth`): `action` is `list` (the default; any
/// other value lists too), `add` (needs `username` and `password`) or `delete` (needs
/// `username`). Answers the mount's users, after an add or delete with Icecast's message:
/// "User added", "User already exists - not added", "User deleted" (also for a user not
/// listed), or "User add/delete failed - check the icecast error log" (the reason is logged).
/// A mount without an authenticator, or an add or delete missing its parameters, is
/// `400 missing parameter`. A `url` authenticator has no users: an empty list, and adds and
/// deletes fail, as Icecast's `auth_url.c` stubs.
async fn manage_auth(
    ctx: &ServerCtx,
    m: &Mount,
    params: &Params,
    render: Render,
    peer: SocketAddr,
) -> Response {
    let Some(auth) = ctx.auth().for_mount(&m.name).cloned() else {
        tracing::warn!(%peer, mount = %m.name, "manageauth on a mount without authentication");
        return bad_request(ctx, MANAGEAUTH_MISSING);
    };
    let file = match &auth.method {
        Method::Htpasswd(h) => Some(h.clone()),
        Method::Url(_) => None,
    };
    let action = params.get("action").unwrap_or_else(|| "list".to_owned());
    let username = params.get("username");
    let message = match action.as_str() {
        "add" => {
            let (Some(user), Some(pass)) = (username, params.get("password")) else {
                tracing::warn!(%peer, mount = %m.name, "manageauth add without username or password");
                return bad_request(ctx, MANAGEAUTH_MISSING);
            };
            let outcome = match &file {
                Some(h) => h.add_user(&user, &pass).await.map_err(|e| e.to_string()),
                None => Err("the url authenticator has no users".to_owned()),
            };
            Some(match outcome {
                Ok(AddOutcome::Added) => {
                    tracing::info!(%peer, mount = %m.name, %user, "manageauth: user added");
                    "User added"
                }
                Ok(AddOutcome::Exists) => "User already exists - not added",
                Err(e) => {
                    tracing::warn!(%peer, mount = %m.name, %user, "manageauth: user add failed: {e}");
                    "User add failed - check the icecast error log"
                }
            })
        }
        "delete" => {
            let Some(user) = username else {
                tracing::warn!(%peer, mount = %m.name, "manageauth delete without username");
                return bad_request(ctx, MANAGEAUTH_MISSING);
            };
            let outcome = match &file {
                Some(h) => h.delete_user(&user).await.map_err(|e| e.to_string()),
                None => Err("the url authenticator has no users".to_owned()),
            };
            Some(match outcome {
                Ok(found) => {
                    tracing::info!(%peer, mount = %m.name, %user, found, "manageauth: user deleted");
                    "User deleted"
                }
                Err(e) => {
                    tracing::warn!(%peer, mount = %m.name, %user, "manageauth: user delete failed: {e}");
                    "User delete failed - check the icecast error log"
                }
            })
        }
        _ => None,
    };
    let users = match &file {
        Some(h) => h.user_names().await,
        None => Vec::new(),
    };
    match render {
        Render::Transformed => reply(
            ctx,
            StatusCode::OK,
            "text/html; charset=utf-8",
            html::manage_auth_page(&m.name, &users, message),
        ),
        Render::Raw | Render::Plain => reply(
            ctx,
            StatusCode::OK,
            "text/xml; charset=utf-8",
            xml::manage_auth(&m.name, &users, message).to_document(),
        ),
    }
}

/// Characters escaped in the user and password of a URL (RFC 3986 userinfo).
const USERINFO: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `buildm3u` (`command_buildm3u`): `http://user:pass@host:port/mount` as an m3u playlist, for
/// players of mounts with listener authentication. Needs `username` and `password`; the mount
/// need not be live. User and password are percent-encoded (Icecast inserts them raw).
fn build_m3u(ctx: &ServerCtx, mount: &str, params: &Params) -> Response {
    let (Some(user), Some(pass)) = (params.get("username"), params.get("password")) else {
        return bad_request(ctx, &AdminError::MissingParameter.to_string());
    };
    let enc = |s: &str| percent_encoding::utf8_percent_encode(s, USERINFO).to_string();
    let body = format!(
        "http://{}:{}@{}:{}{mount}\r\n",
        enc(&user),
        enc(&pass),
        ctx.config().hostname,
        ctx.port
    );
    let mut r = reply(ctx, StatusCode::OK, "audio/x-mpegurl", body);
    r.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=listen.m3u"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_as_icecast_names_them() {
        assert_eq!(
            parse_command("stats.xml"),
            Some(Command::Stats(Render::Raw))
        );
        assert_eq!(parse_command(""), Some(Command::Stats(Render::Transformed)));
        assert_eq!(
            parse_command("streamlist.txt"),
            Some(Command::StreamList(Render::Plain))
        );
        assert_eq!(parse_command("fallbacks.xsl"), Some(Command::Fallbacks));
        assert_eq!(
            parse_command("manageauth"),
            Some(Command::ManageAuth(Render::Raw))
        );
        assert_eq!(
            parse_command("manageauth.xsl"),
            Some(Command::ManageAuth(Render::Transformed))
        );
        assert_eq!(parse_command("nope"), None);
        assert_eq!(parse_command("stats.json"), None);
    }

    #[test]
    fn last_query_value_wins() {
        let p = Params::parse(Some("mount=/a&mount=/b&song=Caf%E9"));
        assert_eq!(p.get("mount").as_deref(), Some("/b"));
        assert_eq!(p.get("song").as_deref(), Some("Café"));
        assert_eq!(
            p.get_in("song", Some("utf-8")).as_deref(),
            Some("Caf\u{fffd}")
        );
    }
}
