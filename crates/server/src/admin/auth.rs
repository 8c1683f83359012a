//! Who may call which admin command, as Icecast 2.4.4 `admin.c:admin_handle_request` decides:
//! HTTP Basic credentials of the admin user (`[authentication] admin-user`/`admin-password`) for
//! everything; for commands on one mount (`mount=` given) also that mount's source credentials
//! (`client.c:client_check_source_auth`: the `[[mount]]` user and password, else user `source`
//! with the global source password; with a URL `stream-auth` callback, the credentials it
//! accepted for the live source); for `streamlist.txt` the relay user (`relay-user`/
//! `relay-password`, `connection.c:connection_check_relay_pass`) or the admin. Empty passwords
//! never match, and passwords are compared in constant time.

use axum::http::{header, HeaderMap};
use throng_proto::auth::{parse_basic, secrets_equal, Credentials};

use crate::ctx::ServerCtx;

/// The Basic credentials of a request, if it carries well-formed ones.
pub fn credentials(headers: &HeaderMap) -> Option<Credentials> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_basic)
}

fn matches(c: Option<&Credentials>, user: &str, pass: Option<&str>) -> bool {
    match (c, pass) {
        (Some(c), Some(pass)) => {
            !pass.is_empty() && c.user == user && secrets_equal(&c.password, pass)
        }
        _ => false,
    }
}

/// Whether `c` are the admin's credentials.
pub fn is_admin(ctx: &ServerCtx, c: Option<&Credentials>) -> bool {
    let auth = &ctx.config().authentication;
    matches(c, ctx.config().admin_user(), auth.admin_password.as_deref())
}

/// Whether `c` are the source credentials of mount `mount` (whether or not it is live). On a
/// mount whose URL authenticator has `stream-auth`, the callback decided on the source: only
/// the credentials it accepted for the live source count (not the global source password).
pub fn is_mount_source(ctx: &ServerCtx, c: Option<&Credentials>, mount: &str) -> bool {
    if ctx.auth().has_stream_auth(mount) {
        return ctx.registry.get(mount).is_some_and(|m| {
            let s = &m.settings;
            matches(c, &s.source_user, Some(&s.source_password))
        });
    }
    match ctx.config().source_credentials(mount) {
        Some((user, pass)) => matches(c, &user, Some(&pass)),
        None => false,
    }
}

/// Whether `c` are the relay user's credentials (slaves reading `streamlist.txt`).
pub fn is_relay(ctx: &ServerCtx, c: Option<&Credentials>) -> bool {
    let auth = &ctx.config().authentication;
    matches(c, ctx.config().relay_user(), auth.relay_password.as_deref())
}

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Admin credentials: every command.
    Admin,
    /// The source credentials of the named mount: commands on that mount.
    MountSource,
    /// Neither.
    Denied,
}

/// The access of a request with credentials `c` to commands on `mount` (or to global commands
/// when `mount` is `None`).
pub fn access(ctx: &ServerCtx, c: Option<&Credentials>, mount: Option<&str>) -> Access {
    if is_admin(ctx, c) {
        Access::Admin
    } else if mount.is_some_and(|m| is_mount_source(ctx, c, m)) {
        Access::MountSource
    } else {
        Access::Denied
    }
}
