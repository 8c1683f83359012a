//! Who may call which admin command, as Icecast 2.4.4 `admin.c:admin_handle_request` decides:
//! HTTP Basic credentials of the admin user (`[authentication] admin-user`/`admin-password`) for
//! everything; for commands on one mount (`mount=` given) also that mount's source credentials
//! (`client.c:client_check_source_auth`: the `[[mount]]` user and password, else user `source`
//! with the global source password; with a URL `stream-auth` callback, the credentials it
//! accepted for the live source); for `streamlist.txt` the relay user (`relay-user`/
//! `relay-password`, `connection.c:connection_check_relay_pass`) or the admin; for `POST
//! /api/v1/hls/cache-logs` user `cache-log` (`cache-log-password`) or the admin. Empty passwords
//! never match, and passwords are compared in constant time.
//!
//! With `[authentication] source-admin = "metadata-only"`, source credentials open only the
//! metadata update of their mount ([`source_metadata_only`]). State-changing requests coming
//! from another site's page are refused ([`cross_site`]): browsers send `Origin`,
//! `Referer` or `Sec-Fetch-Site` with them, while curl, scripts and encoders send none of
//! these and work exactly as with Icecast.

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

/// User name of the credentials `[authentication] cache-log-password` opens.
pub const CACHE_LOG_USER: &str = "cache-log";

/// Whether `c` may post the cache tier's request logs (`POST /api/v1/hls/cache-logs`): the
/// admin's credentials, or user [`CACHE_LOG_USER`] with `[authentication]
/// cache-log-password` (which opens nothing else).
pub fn may_post_cache_logs(ctx: &ServerCtx, c: Option<&Credentials>) -> bool {
    let auth = &ctx.config().authentication;
    is_admin(ctx, c) || matches(c, CACHE_LOG_USER, auth.cache_log_password.as_deref())
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

/// Whether source credentials are limited to metadata updates (`[authentication]
/// source-admin = "metadata-only"`).
pub fn source_metadata_only(ctx: &ServerCtx) -> bool {
    ctx.config().authentication.source_admin == crate::config::SourceAdmin::MetadataOnly
}

/// The host name of an absolute URL or origin (`scheme://[user@]host[:port]/...`),
/// lower-cased (`None` for anything else, such as `null`).
fn host_of_url(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    Some(host_name(host_port)).filter(|h| !h.is_empty())
}

/// The host name of a `host[:port]` (an IPv6 literal keeps its brackets), lower-cased.
fn host_name(host_port: &str) -> String {
    let h = host_port.trim();
    let name = match h.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map_or(h, |(a, _)| &h[..a.len() + 2]),
        None => h.split(':').next().unwrap_or(h),
    };
    name.to_ascii_lowercase()
}

/// Whether a request with `headers` comes from another site's page (cross-site request
/// forgery): `Sec-Fetch-Site: cross-site`, or an `Origin` (else a `Referer`) whose host name
/// differs from that of the `Host` the request was sent to (ports are not compared: the same
/// host name is the operator's; `Origin: null` and unparsable values count as another site;
/// without `Host` any `Origin` or `Referer` does). A request with none of these headers (curl,
/// scripts, encoders) is not cross-site; `Sec-Fetch-Site: same-site` is not either.
pub fn cross_site(headers: &HeaderMap) -> bool {
    let text = |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or(""));
    if text(header::HeaderName::from_static("sec-fetch-site"))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("cross-site"))
    {
        return true;
    }
    let host = text(header::HOST).map(host_name);
    let other = |url: &str| match (&host, host_of_url(url)) {
        (Some(host), Some(h)) => h != *host,
        _ => true,
    };
    if let Some(origin) = text(header::ORIGIN) {
        return other(origin);
    }
    text(header::REFERER).is_some_and(other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                header::HeaderName::from_static(k),
                header::HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn scripts_and_same_origin_pages_are_not_cross_site() {
        assert!(!cross_site(&headers(&[])));
        assert!(!cross_site(&headers(&[("host", "radio.example:8000")])));
        assert!(!cross_site(&headers(&[
            ("host", "radio.example:8000"),
            ("origin", "http://radio.example:8000"),
        ])));
        assert!(!cross_site(&headers(&[
            ("host", "Radio.Example"),
            ("referer", "https://radio.example/admin/stats.xsl"),
        ])));
        assert!(!cross_site(&headers(&[
            ("host", "[::1]:8000"),
            ("origin", "http://[::1]:8000"),
        ])));
        assert!(!cross_site(&headers(&[
            ("host", "radio.example:443"),
            ("origin", "https://radio.example"),
        ])));
        assert!(!cross_site(&headers(&[
            ("host", "radio.example:80"),
            ("referer", "http://radio.example/admin/"),
        ])));
        assert!(!cross_site(&headers(&[
            ("host", "127.0.0.1:8000"),
            ("sec-fetch-site", "same-origin"),
            (
                "referer",
                "http://127.0.0.1:8000/admin/listclients.xsl?mount=/a"
            ),
        ])));
    }

    #[test]
    fn other_sites_are_cross_site() {
        assert!(cross_site(&headers(&[("sec-fetch-site", "cross-site")])));
        let host = ("host", "radio.example:8000");
        for (k, v) in [
            ("origin", "http://evil.example"),
            ("origin", "null"),
            ("referer", "http://evil.example/page"),
            ("referer", "http://radio.example.evil.example:8000/"),
            ("referer", "http://radio.example:8000@evil.example/"),
            ("referer", "not a url"),
            ("origin", "http://[::2]:8000"),
        ] {
            assert!(cross_site(&headers(&[host, (k, v)])), "{k}: {v}");
        }
        // Without `Host`, any `Origin` is another site.
        assert!(cross_site(&headers(&[("origin", "http://radio.example")])));
    }
}
