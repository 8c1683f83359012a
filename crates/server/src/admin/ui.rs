//! The admin web UI: `/admin/` (the overview: every mount with its listeners, title, format and
//! fallback) and `/admin/ui/mount?mount=/x` (one mount: update its metadata, list and kick its
//! listeners, move them to another mount, set its fallback, manage its htpasswd users, kill its
//! source), with the forms posting to `/admin/ui/<action>`; `/admin/ui/` is the overview too. `/admin/` with a query string is
//! still Icecast's `stats.xsl` (`icecast.rs`), and every `/admin/<command>` is unchanged. The
//! Go-live page (`/admin/ui/golive`) is `golive.rs`'s.
//!
//! Login: HTTP Basic with the admin credentials (`401` with `WWW-Authenticate` otherwise, as
//! every admin route). Each action calls the function the JSON API and the Icecast commands call
//! (`ops.rs`, the htpasswd authenticator): there is no second implementation of any action.
//!
//! CSRF: every form carries a hidden `csrf` token, checked (in constant time) before anything
//! is done; a POST without it or with another one is `403`. The token is a SHA-1 of a random
//! secret drawn at start, the admin user name and password (see [`csrf_token`]): another
//! site's page cannot read it, and it changes when the password changes or the server restarts.
//! The router's guard also refuses these POSTs when `Origin`/`Referer`/`Sec-Fetch-Site` say they
//! come from another site ([`crate::admin::state_changing`]). Actions answer `303 See Other`
//! back to the page, with the outcome in the query (`ok`, `msg`, and `sig`, its keyed hash: an
//! outcome line not signed by this server is not shown), in a `role="status"` line.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use sha1::{Digest, Sha1};
use throng_proto::http::parse_query;

use crate::admin::auth;
use crate::admin::html::{escape, href};
use crate::admin::listing::{self, Listing};
use crate::admin::ops::{self, MetadataOutcome, MetadataUpdate};
use crate::audience::ListenerRow;
use crate::auth::htpasswd::AddOutcome;
use crate::ctx::ServerCtx;

/// The random secret of this process's CSRF tokens, drawn on first use.
fn secret() -> &'static [u8; 32] {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    SECRET.get_or_init(rand::random)
}

/// The CSRF token of the admin `user` with `password` in this process: hex SHA-1 of the
/// secret, the user, the password and the secret again, NUL-separated.
pub fn csrf_token(user: &str, password: &str) -> String {
    token_with(secret(), user, password)
}

fn token_with(secret: &[u8], user: &str, password: &str) -> String {
    let mut h = Sha1::new();
    h.update(secret);
    h.update([0]);
    h.update(user.as_bytes());
    h.update([0]);
    h.update(password.as_bytes());
    h.update([0]);
    h.update(secret);
    h.finalize()
        .iter()
        .fold(String::with_capacity(40), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The admin credentials of a request (user, password); `None` when it has none (answer
/// [`crate::admin::icecast::unauthorized`]).
fn admin_only(ctx: &ServerCtx, headers: &HeaderMap) -> Option<(String, String)> {
    let creds = auth::credentials(headers);
    if auth::is_admin(ctx, creds.as_ref()) {
        creds.map(|c| (c.user, c.password))
    } else {
        None
    }
}

/// A whole page titled `title` around `content`, with the outcome line of `query` (`ok`, `msg`).
pub fn page(ctx: &ServerCtx, title: &str, query: Option<&str>, content: &str) -> Response {
    page_response(page_html(ctx, title, query, content))
}

/// The HTML of [`page`].
fn page_html(ctx: &ServerCtx, title: &str, query: Option<&str>, content: &str) -> String {
    let q: Vec<(String, String)> = parse_query(query.unwrap_or(""));
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let signed =
        |msg: &str| get("sig").is_some_and(|s| s == outcome_sig(get("ok") == Some("1"), msg));
    let flash = match get("msg").filter(|m| signed(m)) {
        Some(msg) => {
            let class = if get("ok") == Some("1") { "ok" } else { "err" };
            format!(
                "<p class=\"flash {class}\" role=\"status\" id=\"flash\">{}</p>",
                escape(msg)
            )
        }
        None => "<p class=\"flash-empty\" role=\"status\" id=\"flash\"></p>".into(),
    };
    let server = escape(&ctx.config().server_id);
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"color-scheme\" content=\"light dark\">\
<title>{title} · {server} admin</title>\
<link rel=\"icon\" href=\"/static/favicon.svg\" type=\"image/svg+xml\">\
<link rel=\"stylesheet\" href=\"/static/admin.css\"><script src=\"/static/admin.js\" defer></script></head><body>\
<header class=\"top\"><div class=\"wrap\"><a class=\"brand\" href=\"/admin/\">{server} · admin</a>\
<nav aria-label=\"Admin\"><a href=\"/admin/\">Mounts</a><a href=\"/admin/stats.xsl\">Icecast pages</a>\
<a href=\"/admin/ui/reports\">Reports</a><a href=\"/admin/ui/golive\">Go live</a><a href=\"/\">Station page</a></nav></div></header>\
<main class=\"wrap\"><h1>{title}</h1>{flash}{content}</main></body></html>\n",
        title = escape(title),
    );
    body
}

/// A page's response: `body` (whole or streamed) with the admin pages' headers.
fn page_response(body: impl Into<axum::body::Body>) -> Response {
    let mut r = (StatusCode::OK, body.into()).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-store"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    r
}

/// A byte count with a unit: `512 B`, `1.5 kB`, `12.3 MB`, `4.0 GB` (powers of 1000, as
/// the access log's readers and the bench's reports count).
pub fn bytes_text(n: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1000.0;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// `5s`, `3m 02s`, `2h 05m`, `3d 04h`.
pub fn duration_text(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m {:02}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        s => format!("{}d {:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// `/admin/ui/mount?mount=` + the mount, as a link target.
fn mount_page(name: &str) -> String {
    format!(
        "/admin/ui/mount?mount={}",
        percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
    )
}

/// A form posting `action` with the CSRF token and `mount`, around `fields`.
fn form(token: &str, action: &str, mount: &str, class: &str, fields: &str) -> String {
    format!(
        "<form method=\"post\" action=\"/admin/ui/{action}\" class=\"{class}\">\
<input type=\"hidden\" name=\"csrf\" value=\"{token}\">\
<input type=\"hidden\" name=\"mount\" value=\"{}\">{fields}</form>",
        escape(mount)
    )
}

/// `GET /admin/`: the admin UI's overview; with a query string, Icecast's `stats.xsl` as
/// before (`/admin/?mount=/x`).
pub async fn index(
    state: State<Arc<ServerCtx>>,
    peer: Extension<std::net::SocketAddr>,
    headers: HeaderMap,
    uri: axum::http::Uri,
    query: RawQuery,
) -> Response {
    if query.0.is_some() {
        return crate::admin::icecast::handle(state, peer, uri, headers, query).await;
    }
    overview(state, headers, RawQuery(None)).await
}

/// `GET /admin/ui/`: the admin UI's overview, with the outcome line of an action.
pub async fn overview(
    State(ctx): State<Arc<ServerCtx>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    if admin_only(&ctx, &headers).is_none() {
        return crate::admin::icecast::unauthorized(&ctx);
    }
    let mut rows = String::new();
    let mut files = String::new();
    let wanted = crate::ingest::file::wanted_file_mounts(&ctx.config());
    for e in crate::admin::data::mount_list(&ctx, None) {
        let m = ctx.registry.get(&e.mount);
        // A webroot file played as a fallback: shown as the file it is, not as a mount.
        if let Some((path, true)) = wanted.get(&e.mount) {
            let used_by: Vec<String> = crate::admin::data::mount_list(&ctx, None)
                .into_iter()
                .filter(|o| o.fallback.as_deref() == Some(e.mount.as_str()))
                .map(|o| o.mount)
                .collect();
            let _ = write!(
                files,
                "<tr data-mount=\"{name}\"><th scope=\"row\" data-label=\"File\"><code>{path}</code></th>\
<td data-label=\"Fallback of\">{used}</td><td class=\"num\" data-label=\"Listeners\" data-listeners>{listeners}</td></tr>",
                name = escape(&e.mount),
                path = escape(&path.display().to_string()),
                used = escape(&used_by.join(", ")),
                listeners = e.listeners,
            );
            continue;
        }
        let title = m.as_ref().map(|m| m.title()).unwrap_or_default();
        let format = m
            .as_ref()
            .map(|m| {
                crate::admin::status::subtype(m).map_or_else(
                    || m.settings.content_type.clone(),
                    |s| format!("{} ({s})", m.settings.content_type),
                )
            })
            .unwrap_or_default();
        let bitrate = m
            .as_ref()
            .and_then(|m| crate::admin::status::bitrate(m))
            .map(|b| format!("{b} kbit/s"))
            .unwrap_or_default();
        let mut flags = Vec::new();
        if e.hidden {
            flags.push("hidden");
        }
        if !e.live {
            flags.push("on demand, idle");
        }
        if let Some(a) = e.authenticator {
            flags.push(a);
        }
        let _ = write!(
            rows,
            "<tr data-mount=\"{name}\"><th scope=\"row\" data-label=\"Mount\"><a href=\"{link}\">{name}</a></th>\
<td data-label=\"Title\" data-title>{title}</td>\
<td class=\"num\" data-label=\"Listeners\" data-listeners>{listeners}</td><td data-label=\"Format\">{format}</td>\
<td data-label=\"Bitrate\">{bitrate}</td><td data-label=\"Fallback\">{fallback}</td>\
<td data-label=\"Notes\">{flags}</td><td data-label=\"Connected\">{connected}</td></tr>",
            link = escape(&mount_page(&e.mount)),
            name = escape(&e.mount),
            title = escape(&title),
            listeners = e.listeners,
            format = escape(&format),
            bitrate = escape(&bitrate),
            fallback = escape(e.fallback.as_deref().unwrap_or("")),
            flags = escape(&flags.join(", ")),
            connected = e
                .connected_s
                .map(|s| duration_text(u64::try_from(s).unwrap_or(0)))
                .unwrap_or_default(),
        );
    }
    let table = if rows.is_empty() {
        "<p>No mount is live.</p>".to_owned()
    } else {
        format!(
            "<div class=\"scroll\"><table class=\"stack\"><caption>Mounts</caption><thead><tr><th scope=\"col\">Mount</th>\
<th scope=\"col\">Title</th><th scope=\"col\">Listeners</th><th scope=\"col\">Format</th>\
<th scope=\"col\">Bitrate</th><th scope=\"col\">Fallback</th><th scope=\"col\">Notes</th>\
<th scope=\"col\">Connected</th></tr></thead><tbody>{rows}</tbody></table></div>"
        )
    };
    let files = if files.is_empty() {
        String::new()
    } else {
        format!(
            "<section aria-labelledby=\"h-files\"><h2 id=\"h-files\">Fallback files</h2>\
<p class=\"hint\">Files from the webroot played in a loop to the listeners of a mount whose source is off air.</p>\
<div class=\"scroll\"><table class=\"stack\"><thead><tr><th scope=\"col\">File</th><th scope=\"col\">Fallback of</th>\
<th scope=\"col\">Listeners</th></tr></thead><tbody>{files}</tbody></table></div></section>"
        )
    };
    let uptime = (chrono::Local::now() - ctx.started).num_seconds().max(0);
    let counts = crate::roster::counts(&ctx);
    let summary = format!(
        "<dl class=\"summary\"><div><dt>Listeners</dt><dd id=\"total-listeners\">{}</dd></div><div><dt>Mounts</dt><dd>{}</dd></div>\
<div><dt>Clients</dt><dd>{}</dd></div><div><dt>Uptime</dt><dd>{}</dd></div><div><dt>Version</dt><dd>{}</dd></div></dl>",
        counts.total(),
        ctx.registry.list().len(),
        ctx.clients.open(),
        duration_text(u64::try_from(uptime).unwrap_or(0)),
        env!("CARGO_PKG_VERSION"),
    );
    page(
        &ctx,
        "Mounts",
        query.as_deref(),
        &format!("{summary}{table}{files}{}", ends_table(&ctx)),
    )
}

/// How the admin UI names an audience path.
fn path_text(p: crate::audience::AudiencePath) -> &'static str {
    match p {
        crate::audience::AudiencePath::Icy => "HTTP",
        crate::audience::AudiencePath::Hls => "HLS",
        crate::audience::AudiencePath::Whep => "WebRTC",
        crate::audience::AudiencePath::Events => "Events",
    }
}

/// The "Sessions ended" table of the overview: counts since the start by end reason (rows,
/// with the key the access log and `/metrics` use) and path (columns); reasons never seen are
/// left out.
fn ends_table(ctx: &ServerCtx) -> String {
    let ends = crate::roster::session_ends(ctx);
    let mut rows = String::new();
    for why in crate::audience::EndReason::ALL {
        let counts: Vec<u64> = crate::roster::ENDING_PATHS
            .iter()
            .map(|p| {
                ends.iter()
                    .find(|(path, w, _)| path == p && *w == why)
                    .map_or(0, |e| e.2)
            })
            .collect();
        if counts.iter().all(|&n| n == 0) {
            continue;
        }
        let _ = write!(
            rows,
            "<tr><th scope=\"row\">{} <code>{}</code></th>",
            escape(why.describe()),
            why.key()
        );
        for n in counts {
            let _ = write!(rows, "<td class=\"num\">{n}</td>");
        }
        rows.push_str("</tr>");
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut head = String::new();
    for p in crate::roster::ENDING_PATHS {
        let _ = write!(head, "<th scope=\"col\">{}</th>", path_text(p));
    }
    format!(
        "<section aria-labelledby=\"h-ends\"><h2 id=\"h-ends\">Sessions ended</h2>\
<div class=\"scroll\"><table><thead><tr><th scope=\"col\">Why</th>{head}</tr></thead>\
<tbody>{rows}</tbody></table></div></section>"
    )
}

/// `GET /admin/ui/mount?mount=/x`: one mount and its forms.
pub async fn mount(
    State(ctx): State<Arc<ServerCtx>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let Some((user, password)) = admin_only(&ctx, &headers) else {
        return crate::admin::icecast::unauthorized(&ctx);
    };
    let token = csrf_token(&user, &password);
    let q: Vec<(String, String)> = parse_query(query.as_deref().unwrap_or(""));
    let name = q
        .iter()
        .find(|(k, _)| k == "mount")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let m = match ops::live_mount(&ctx, &name) {
        Ok(m) => m,
        Err(e) => {
            let content = format!(
                "<p class=\"flash err\">{}</p><p><a href=\"/admin/\">Back to the mounts</a></p>",
                escape(&e.to_string())
            );
            let mut r = page(&ctx, &name, None, &content);
            *r.status_mut() = StatusCode::NOT_FOUND;
            return r;
        }
    };
    let mut c = String::new();
    // Facts.
    let description = m.description();
    let info = &description.info;
    let _ = write!(
        c,
        "<dl class=\"summary\"><div><dt>Name</dt><dd>{}</dd></div><div><dt>Title</dt><dd id=\"current-title\">{}</dd></div>\
<div><dt>Listeners</dt><dd id=\"listener-count\">{}</dd></div><div><dt>Format</dt><dd>{}</dd></div>\
<div><dt>Bitrate</dt><dd>{}</dd></div><div><dt>Listen</dt><dd><a href=\"{}\">{}</a></dd></div></dl>",
        escape(&info.name),
        escape(&m.title()),
        m.listeners.load(Ordering::Relaxed),
        escape(&m.settings.content_type),
        escape(
            &crate::admin::status::bitrate(&m)
                .map(|b| format!("{b} kbit/s"))
                .unwrap_or_default()
        ),
        href(&m.name),
        escape(&m.name),
    );
    // Metadata.
    let _ = write!(
        c,
        "<section aria-labelledby=\"h-meta\"><h2 id=\"h-meta\">Now playing</h2>{}</section>",
        form(
            &token,
            "metadata",
            &m.name,
            "row",
            "<label>Artist <input name=\"artist\" id=\"meta-artist\" autocomplete=\"off\"></label>\
<label>Title <input name=\"title\" id=\"meta-title\" required autocomplete=\"off\"></label>\
<button type=\"submit\" id=\"meta-submit\">Update metadata</button>"
        )
    );
    // Listeners: streamed (`listing.rs`), every one, or a page with `after`/`limit`; the page
    // around them is rendered first, with ROWS in their place.
    let param = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let listing = Listing::from_params(param("after"), param("limit"), ctx.next_id());
    let listeners = if m.listeners.load(Ordering::Relaxed) == 0 {
        "<p>No listener.</p>".to_owned()
    } else {
        format!(
            "<div class=\"scroll\"><table class=\"stack\"><thead><tr><th scope=\"col\">Id</th><th scope=\"col\">Via</th><th scope=\"col\">Address</th>\
<th scope=\"col\">Player</th><th scope=\"col\">User</th><th scope=\"col\">Connected</th>\
<th scope=\"col\">Bytes sent</th><th scope=\"col\"><span class=\"visually-hidden\">Actions</span></th></tr></thead>\
<tbody>{ROWS}</tbody></table></div>"
        )
    };
    let _ = write!(
        c,
        "<section aria-labelledby=\"h-listeners\"><h2 id=\"h-listeners\">Listeners</h2>{listeners}</section>"
    );
    // Move listeners.
    let others: Vec<_> = ctx
        .registry
        .list()
        .into_iter()
        .filter(|o| o.name != m.name && o.settings.format == m.settings.format)
        .collect();
    let move_form = if others.is_empty() {
        "<p>No other live mount of the same format to move listeners to.</p>".to_owned()
    } else {
        let options: String = others
            .iter()
            .map(|o| format!("<option>{}</option>", escape(&o.name)))
            .collect();
        form(
            &token,
            "move",
            &m.name,
            "row",
            &format!(
                "<label>Destination <select name=\"destination\" id=\"move-destination\">{options}</select></label>\
<button type=\"submit\" data-confirm=\"Move them all?\">Move all listeners</button>"
            ),
        )
    };
    let _ = write!(
        c,
        "<section aria-labelledby=\"h-move\"><h2 id=\"h-move\">Move listeners</h2>{move_form}</section>"
    );
    // Fallback.
    let fallback = ctx.registry.fallback_of(&m.name).unwrap_or_default();
    let _ = write!(
        c,
        "<section aria-labelledby=\"h-fallback\"><h2 id=\"h-fallback\">Fallback</h2>{}</section>",
        form(
            &token,
            "fallback",
            &m.name,
            "row",
            &format!(
                "<label>Fallback mount <input name=\"fallback\" id=\"fallback\" value=\"{}\" placeholder=\"/other.mp3 (empty: none)\"></label>\
<button type=\"submit\">Set fallback</button>",
                escape(&fallback)
            )
        )
    );
    // Users.
    if let Some(h) = crate::admin::api::htpasswd_of(&ctx, &m.name) {
        let mut urows = String::new();
        for u in h.user_names().await {
            let del = form(
                &token,
                "delete-user",
                &m.name,
                "inline",
                &format!(
                    "<input type=\"hidden\" name=\"username\" value=\"{u}\">\
<button type=\"submit\" class=\"danger\" aria-label=\"Delete user {u}\" data-confirm=\"Delete {u}?\">Delete</button>",
                    u = escape(&u)
                ),
            );
            let _ = write!(urows, "<li><span>{}</span>{del}</li>", escape(&u));
        }
        let add = form(
            &token,
            "add-user",
            &m.name,
            "row",
            "<label>User name <input name=\"username\" required autocomplete=\"off\"></label>\
<label>Password <input name=\"password\" type=\"password\" required autocomplete=\"new-password\"></label>\
<button type=\"submit\">Add user</button>",
        );
        let _ = write!(
            c,
            "<section aria-labelledby=\"h-users\"><h2 id=\"h-users\">Listener accounts (htpasswd)</h2>\
<ul class=\"users\">{urows}</ul>{add}</section>"
        );
    }
    // Kill the source.
    let _ = write!(
        c,
        "<section aria-labelledby=\"h-source\"><h2 id=\"h-source\">Source</h2>{}</section>",
        form(
            &token,
            "kill-source",
            &m.name,
            "row",
            "<button type=\"submit\" class=\"danger\" id=\"kill-source\" data-confirm=\"Really disconnect it?\">Disconnect the source</button>\
<span class=\"hint\">Listeners move to the fallback, if any.</span>"
        )
    );
    let html = page_html(&ctx, &m.name, query.as_deref(), &c);
    let Some((head, tail)) = html.split_once(ROWS) else {
        return page_response(html);
    };
    let (head, tail) = (head.to_owned(), tail.to_owned());
    let body = listing::body(
        ctx.clone(),
        m.name.clone(),
        listing,
        head,
        move |r, _, out| listener_row(&token, &m.name, r, out),
        tail,
    );
    page_response(body)
}

/// Where a mount page's listener rows go in its HTML before they are streamed (a character no
/// escaped text holds).
const ROWS: &str = "\u{0}rows\u{0}";

/// One listener's row of a mount page (`mount`), with its kick form (`token`), appended to
/// `out`.
fn listener_row(token: &str, mount: &str, r: &ListenerRow, out: &mut String) {
    let kick = form(
        token,
        "kill-client",
        mount,
        "inline",
        &format!(
            "<input type=\"hidden\" name=\"id\" value=\"{id}\">\
<button type=\"submit\" class=\"danger\" aria-label=\"Kick listener {id}\" data-kick=\"{id}\" data-confirm=\"Kick {id}?\">Kick</button>",
            id = r.id
        ),
    );
    let _ = write!(
        out,
        "<tr data-listener=\"{id}\"><td class=\"num\" data-label=\"Id\">{id}</td><td data-label=\"Via\">{path}</td>\
<td data-label=\"Address\">{ip}</td><td data-label=\"Player\">{agent}</td><td data-label=\"User\">{user}</td>\
<td data-label=\"Connected\">{connected}</td><td class=\"num\" data-label=\"Sent\">{sent}</td><td>{kick}</td></tr>",
        id = r.id,
        path = path_text(r.path),
        ip = escape(&r.ip.to_string()),
        agent = escape(r.agent.as_deref().unwrap_or("")),
        user = escape(r.user.as_deref().unwrap_or("")),
        connected = duration_text(r.connected_secs),
        sent = bytes_text(r.sent),
    );
}

/// The signature of an outcome line (so a link from elsewhere cannot make an admin page show
/// a message of its choosing): 16 hex digits of the keyed hash of [`csrf_token`].
fn outcome_sig(ok: bool, message: &str) -> String {
    token_with(secret(), if ok { "ok" } else { "failed" }, message)[..16].to_owned()
}

/// A `303 See Other` to `location` with the outcome `ok` and `message` (signed).
fn back(location: &str, ok: bool, message: &str) -> Response {
    let sep = if location.contains('?') { '&' } else { '?' };
    let target = format!(
        "{location}{sep}ok={}&msg={}&sig={}",
        u8::from(ok),
        percent_encoding::utf8_percent_encode(message, percent_encoding::NON_ALPHANUMERIC),
        outcome_sig(ok, message)
    );
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(&target) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// `POST /admin/ui/<action>`: one action of the UI's forms (`metadata`, `kill-client`, `move`,
/// `fallback`, `kill-source`, `add-user`, `delete-user`), form-encoded, with the CSRF token.
pub async fn action(
    State(ctx): State<Arc<ServerCtx>>,
    Path(action): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some((user, password)) = admin_only(&ctx, &headers) else {
        return crate::admin::icecast::unauthorized(&ctx);
    };
    let body = match crate::admin::api::read_body(&headers, body, ctx.config().body_timeout()).await
    {
        Ok(b) => b,
        Err(r) => return r,
    };
    let form: Vec<(String, String)> = parse_query(&String::from_utf8_lossy(&body));
    let get = |k: &str| {
        form.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.trim().to_owned())
    };
    let expected = csrf_token(&user, &password);
    if !get("csrf").is_some_and(|t| throng_proto::auth::secrets_equal(&t, &expected)) {
        tracing::warn!(%action, "admin UI: POST without a valid CSRF token refused");
        return (
            StatusCode::FORBIDDEN,
            "Missing or stale form token: reload the admin page and try again\n",
        )
            .into_response();
    }
    let name = get("mount").unwrap_or_default();
    let here = mount_page(&name);
    let m = match ops::live_mount(&ctx, &name) {
        Ok(m) => m,
        Err(e) => return back("/admin/ui/", false, &e.to_string()),
    };
    match action.as_str() {
        "metadata" => {
            let update = MetadataUpdate {
                song: None,
                artist: get("artist").filter(|a| !a.is_empty()),
                title: get("title").filter(|t| !t.is_empty()),
                url: None,
            };
            match ops::update_metadata(&m, &update) {
                MetadataOutcome::Updated => back(&here, true, "Metadata update successful"),
                MetadataOutcome::Unchanged => back(&here, false, "Give a title"),
                MetadataOutcome::NotAccepted => {
                    back(&here, false, "Mountpoint will not accept URL updates")
                }
            }
        }
        "kill-client" => {
            let id = ops::atoi(&get("id").unwrap_or_default());
            if ops::kill_client(&ctx, &m, id).await {
                back(&here, true, &format!("Client {id} removed"))
            } else {
                back(&here, false, &format!("Client {id} not found"))
            }
        }
        "move" => {
            let dest = get("destination").unwrap_or_default();
            match ops::move_clients(&ctx, &m, &dest).await {
                Ok((to, n)) => back(
                    &here,
                    true,
                    &format!("{n} listeners moved from {} to {}", m.name, to.name),
                ),
                Err(e) => back(&here, false, &e.to_string()),
            }
        }
        "fallback" => {
            let fallback = get("fallback").unwrap_or_default();
            if !fallback.is_empty() {
                if let Err(e) = ops::check_name(&fallback) {
                    return back(&here, false, &e.to_string());
                }
            }
            ops::set_fallback(&ctx, &m, &fallback);
            back(&here, true, "Fallback configured")
        }
        "kill-source" => {
            ops::kill_source(&m);
            back("/admin/ui/", true, &format!("Source of {} removed", m.name))
        }
        "add-user" | "delete-user" => {
            let Some(h) = crate::admin::api::htpasswd_of(&ctx, &m.name) else {
                return back(&here, false, "This mount has no htpasswd authentication");
            };
            let username = get("username").unwrap_or_default();
            if username.is_empty() {
                return back(&here, false, "Missing parameter");
            }
            let outcome = if action == "add-user" {
                let pass = get("password").unwrap_or_default();
                if pass.is_empty() {
                    return back(&here, false, "Missing parameter");
                }
                h.add_user(&username, &pass).await.map(|o| match o {
                    AddOutcome::Added => (true, "User added"),
                    AddOutcome::Exists => (false, "User already exists - not added"),
                })
            } else {
                h.delete_user(&username).await.map(|d| {
                    if d {
                        (true, "User deleted")
                    } else {
                        (false, "User not found")
                    }
                })
            };
            match outcome {
                Ok((ok, msg)) => {
                    tracing::info!(mount = %m.name, user = %username, %action, ok, "admin UI: {msg}");
                    back(&here, ok, msg)
                }
                Err(e) => {
                    tracing::warn!(mount = %m.name, user = %username, "admin UI: {action} failed: {e}");
                    back(&here, false, "User change failed - check the error log")
                }
            }
        }
        _ => (StatusCode::NOT_FOUND, "No such admin action\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_have_units() {
        assert_eq!(bytes_text(0), "0 B");
        assert_eq!(bytes_text(999), "999 B");
        assert_eq!(bytes_text(1500), "1.5 kB");
        assert_eq!(bytes_text(12_345_678), "12.3 MB");
        assert_eq!(bytes_text(4_000_000_000), "4.0 GB");
        assert_eq!(bytes_text(u64::MAX), "18446744.1 TB");
    }

    #[test]
    fn tokens_depend_on_secret_user_and_password() {
        let t = token_with(b"s1", "admin", "pw");
        assert_eq!(t.len(), 40);
        assert_eq!(t, token_with(b"s1", "admin", "pw"));
        assert_ne!(t, token_with(b"s2", "admin", "pw"));
        assert_ne!(t, token_with(b"s1", "admin", "pw2"));
        assert_ne!(t, token_with(b"s1", "admin2", "pw"));
        // The separators keep `ab`+`c` apart from `a`+`bc`.
        assert_ne!(token_with(b"s", "ab", "c"), token_with(b"s", "a", "bc"));
    }

    #[test]
    fn durations_read_as_text() {
        assert_eq!(duration_text(5), "5s");
        assert_eq!(duration_text(182), "3m 02s");
        assert_eq!(duration_text(7500), "2h 05m");
        assert_eq!(duration_text(3 * 86_400 + 4 * 3600), "3d 04h");
    }
}
