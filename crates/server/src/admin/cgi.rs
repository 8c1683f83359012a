//! `GET /admin.cgi?mode=updinfo&song=...&pass=...`: the SHOUTcast v1 metadata update, as Icecast
//! 2.4.4 `admin.c` (`COMMAND_SHOUTCAST_METADATA_UPDATE`, `command_shoutcast_metadata`) answers
//! it. SHOUTcast encoders (Liquidsoap's ICY output, libshout/ezstream in ICY mode, BUTT, SAM...)
//! send it to the HTTP port or, for libshout, to the SHOUTcast port.
//!
//! - Mount: `mount=` when given, else `shoutcast-mount`, else `/stream`. (2.4.4 always uses the
//!   SHOUTcast mount; honouring `mount=` lets one server take updates for several mounts.)
//! - Credentials: `pass=` equal to the mount's source password (or `user:password`), or HTTP
//!   Basic with the admin credentials or the mount's source credentials. No `pass` and no
//!   `Authorization` → 400 "missing pass parameter"; wrong ones → 401 (counted by the
//!   failed-login throttle, `auth/throttle.rs`; a blocked address gets 429).
//! - The mount must be live (400 "Source does not exist", after waiting up to
//!   [`LOGIN_GRACE`] for a source still logging in), `mode` must be `updinfo` (400 "No
//!   such action") and `song` present, or `artist` and/or `title` as `/admin/metadata` takes
//!   them (400 "Missing parameter"; libshout ≥ 2.4 in ICY mode sends `artist`+`title` only,
//!   which 2.4.4 refuses here). Without admin credentials the
//!   update must come from the source's own address, and the format must carry ICY titles
//!   (MP3, AAC...), else 400 "mountpoint will not accept URL updates".
//! - Success: 200 with 2.4.4's HTML page "Metadata update successful"; `song` (UTF-8, or
//!   Latin-1 from legacy encoders) becomes `StreamTitle`, and `url=` `StreamUrl`.
//!
//! Unlike 2.4.4, the mount need not be fed by a SHOUTcast source (2.4.4 answers 400 "illegal
//! metadata call" otherwise): the credentials checked are the same as for `/admin/metadata`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::decode_legacy_text;
use crate::ledger::TitleSetter;
use crate::net::conn::Conn;
use throng_proto::auth::{parse_basic, secrets_equal};
use throng_proto::http::{decode_text, parse_query, parse_query_bytes, RequestHead};
use throng_proto::shoutcast::Login;

use crate::auth::throttle::LoginKind;
use crate::ctx::ServerCtx;
use crate::respond::reply;

/// The body of a successful update, as Icecast 2.4.4 `admin.c:html_success` writes it.
pub const SUCCESS_BODY: &str = "<html><head><title>Admin request successful</title></head><body><p>Metadata update successful</p></body></html>";

/// The body of the answer for a mount that is not live (Icecast 2.4.4's text).
const NO_SOURCE: &str = "Source does not exist\n";

/// The answer to one request: status, headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Extra headers (Content-Type, `WWW-Authenticate`).
    pub headers: Vec<(&'static str, &'static str)>,
    /// Body text.
    pub body: String,
}

impl Answer {
    fn error(status: u16, message: &str) -> Answer {
        Answer {
            status,
            headers: vec![("Content-Type", "text/plain; charset=utf-8")],
            body: format!("{message}\n"),
        }
    }

    fn unauthorized() -> Answer {
        Answer {
            status: 401,
            headers: vec![
                ("WWW-Authenticate", crate::respond::REALM),
                ("Content-Type", "text/plain; charset=utf-8"),
            ],
            body: "You need to authenticate\n".into(),
        }
    }
}

/// How long an authenticated update for a mount that is not live waits for it to come up.
/// libshout (ezstream) sends its first update as soon as it has read `OK2`, which can be before
/// the server has read the source's headers and registered the mount.
pub const LOGIN_GRACE: Duration = Duration::from_secs(2);

/// Serves one `/admin.cgi` request from client address `peer`.
pub async fn handle(ctx: Arc<ServerCtx>, mut stream: Conn, head: RequestHead, peer: SocketAddr) {
    let has_password = head.header("authorization").is_some()
        || parse_query(head.query.as_deref().unwrap_or(""))
            .iter()
            .any(|(k, _)| k == "pass");
    if has_password {
        if let Err(wait) = ctx.auth().login_blocked(peer.ip()) {
            let retry = wait.as_secs().max(1).to_string();
            let headers = [
                ("Retry-After", retry.as_str()),
                ("Content-Type", "text/plain; charset=utf-8"),
            ];
            let body = crate::auth::THROTTLED_MESSAGE;
            let _ = reply(&ctx, &mut stream, peer, Some(&head), 429, &headers, body).await;
            return;
        }
    }
    let mut a = update(&ctx, &head, peer);
    let until = tokio::time::Instant::now() + LOGIN_GRACE;
    while a.status == 400 && a.body == NO_SOURCE && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
        a = update(&ctx, &head, peer);
    }
    let _ = reply(
        &ctx,
        &mut stream,
        peer,
        Some(&head),
        a.status,
        &a.headers,
        &a.body,
    )
    .await;
}

/// Decides and applies one `/admin.cgi` request (see the module documentation).
pub fn update(ctx: &ServerCtx, head: &RequestHead, peer: SocketAddr) -> Answer {
    // Values are bytes until the mount, hence its `charset`, is known.
    let raw = parse_query_bytes(head.query.as_deref().unwrap_or(""));
    let mount = raw
        .iter()
        .rev()
        .find(|(k, _)| k == "mount")
        .map(|(_, v)| decode_text(v));
    let config = ctx.config();
    let mount = mount.as_deref().unwrap_or(config.shoutcast_default_mount());
    let charset = config.mount_for(mount).and_then(|c| c.charset.as_deref());
    let q: HashMap<String, String> = raw
        .iter()
        .map(|(k, v)| (k.clone(), decode_legacy_text(v, charset)))
        .collect();
    let basic = head.header("authorization").and_then(parse_basic);
    let pass = q.get("pass");
    if pass.is_none() && basic.is_none() {
        return Answer::error(400, "missing pass parameter");
    }
    let name = q
        .get("mount")
        .cloned()
        .unwrap_or_else(|| ctx.config().shoutcast_default_mount().to_owned());
    let live = ctx.registry.get(&name);
    let (user, password) = match &live {
        Some(m) => (
            m.settings.source_user.clone(),
            m.settings.source_password.clone(),
        ),
        None => ctx.config().source_credentials(&name).unwrap_or_default(),
    };
    let config = ctx.config();
    let admin_pass = config
        .authentication
        .admin_password
        .as_deref()
        .unwrap_or("");
    let is_admin = basic.as_ref().is_some_and(|c| {
        !admin_pass.is_empty()
            && c.user == ctx.config().admin_user()
            && secrets_equal(&c.password, admin_pass)
    });
    let is_source = !password.is_empty()
        && (pass.is_some_and(|p| {
            Login {
                mount: None,
                secret: p.clone(),
            }
            .matches(&user, &password)
        }) || basic
            .as_ref()
            .is_some_and(|c| c.user == user && secrets_equal(&c.password, &password)));
    if !is_admin && !is_source {
        tracing::info!(%peer, mount = %name, "admin.cgi: bad or missing password");
        let sent_user = basic.as_ref().map(|c| c.user.as_str()).or(Some(&user));
        ctx.auth()
            .login_failed(peer.ip(), LoginKind::Source, sent_user, Some(&name));
        return Answer::unauthorized();
    }
    let Some(mount) = live else {
        return Answer::error(400, NO_SOURCE.trim_end());
    };
    let song = match (q.get("song"), q.get("artist"), q.get("title")) {
        (Some(song), _, _) => Some(song.clone()),
        (None, Some(a), Some(t)) => Some(format!("{a} - {t}")),
        (None, a, t) => a.or(t).cloned(),
    };
    let (Some(mode), Some(song)) = (q.get("mode"), song) else {
        return Answer::error(400, "Missing parameter");
    };
    if mode != "updinfo" {
        return Answer::error(400, "No such action");
    }
    let same_host = mount.settings.source_ip.is_none_or(|ip| ip == peer.ip());
    if !(is_admin || same_host) || !mount.settings.format.supports_icy_metadata() {
        tracing::info!(%peer, mount = %name, "admin.cgi: update not accepted");
        return Answer::error(400, "mountpoint will not accept URL updates");
    }
    mount.set_title(&song, q.get("url").map(String::as_str), TitleSetter::Admin);
    tracing::info!(mount = %mount.name, title = %song, "metadata updated (admin.cgi)");
    Answer {
        status: 200,
        headers: vec![("Content-Type", "text/html; charset=utf-8")],
        body: SUCCESS_BODY.into(),
    }
}
