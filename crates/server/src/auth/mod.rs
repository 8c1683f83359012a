//! Listener and source authentication of a mount (`[[mount]] authentication`), as Icecast 2.4.4
//! `auth.c`: the decision on each new listener, what happens when it leaves, source-client
//! authentication by URL (`stream_auth`), and stream start/stop notices (`mount_add`,
//! `mount_remove`).
//!
//! A mount without an authenticator lets every listener in. Authenticators: `htpasswd`
//! (`htpasswd.rs`) and `url` callbacks (`url.rs`). Listener credentials are HTTP Basic
//! only, as Icecast 2.4.4 (`auth_client_setup`); players given `http://user:pass@host/mount`
//! send them that way, and a URL authenticator also sees the query string in `mount=`. Bad or
//! missing credentials, a refusing or unreachable callback, and a second login of the same
//! user (unless `allow-duplicate-users`) get **401**; more than [`MAX_PENDING`] listeners
//! waiting on one authenticator get **403** "busy, please try again later".

pub mod htpasswd;
pub mod http_client;
pub mod throttle;
pub mod url;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use throng_proto::auth::parse_basic;
use throng_proto::htpasswd::Check;
use throng_proto::http::RequestHead;
use throng_proto::url_auth::{
    listener_add_body, listener_remove_body, mount_body, stream_auth_body, ListenerFields,
    MountAction, ServerId, UrlError,
};

use crate::audience::{CloseHook, ClosedListener};
use crate::auth::htpasswd::HtpasswdAuth;
use crate::auth::throttle::{LoginKind, Throttle};
use crate::auth::url::{Callback, Decision, UrlAuth};
use crate::config::{AuthConfig, Config};

/// Most listeners waiting on one authenticator; the next ones get 403 (Icecast 2.4.4
/// `auth_add_listener`: `pending_count > 100`).
pub const MAX_PENDING: usize = 100;
/// Body of the 403 when too many listeners are waiting (Icecast's text).
pub const BUSY_MESSAGE: &str = "busy, please try again later\n";
/// Body of a 401 without a callback message (Icecast's `client_send_401` text).
pub const UNAUTHORIZED_MESSAGE: &str = "You need to authenticate\n";

/// The decision on a listener.
#[derive(Debug)]
pub enum ListenerAuth {
    /// Let it in.
    Allowed {
        /// Authenticated user name, if any.
        user: Option<String>,
        /// Most time it may listen (URL auth `icecast-auth-timelimit`).
        time_limit: Option<Duration>,
        /// Run when it leaves (URL auth `listener_remove`, end of a login).
        on_close: Option<CloseHook>,
    },
    /// Refuse it with this status (401 for bad credentials, 403 when busy, 429 while its
    /// address is blocked for failed logins) and message.
    Refused {
        /// HTTP status.
        status: u16,
        /// Body text (URL auth `icecast-auth-message`).
        message: String,
        /// `Retry-After` in seconds (429).
        retry_after: Option<u64>,
    },
}

/// The decision on a source client of a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceAuth {
    /// The mount has no `stream-auth` URL: check the source password as usual.
    Unconfigured,
    /// The callback accepted these Basic credentials (empty when none were sent).
    Accepted {
        /// User sent.
        user: String,
        /// Password sent.
        pass: String,
    },
    /// The callback refused, or gave no usable reply: answer 401.
    Refused,
}

/// A configuration error in an authenticator.
#[derive(Debug, Error)]
pub enum AuthError {
    /// A `url` authenticator's callback URL cannot be used.
    #[error("mount {mount:?}: authentication `{option}`: {source}")]
    BadUrl {
        /// The `[[mount]]` name or pattern.
        mount: String,
        /// The option (`listener-add`, ...).
        option: &'static str,
        /// Why.
        source: UrlError,
    },
}

/// How an authenticator decides.
#[derive(Debug)]
pub enum Method {
    /// An htpasswd file (one shared `HtpasswdAuth` per file name, so its cache and its
    /// `manageauth` changes are shared by every mount that names it).
    Htpasswd(Arc<HtpasswdAuth>),
    /// URL callbacks.
    Url(Arc<UrlAuth>),
}

/// The authenticator of one `[[mount]]` entry (shared by every mount its pattern matches).
#[derive(Debug)]
pub struct Authenticator {
    /// The `[[mount]]` name or pattern.
    pub pattern: String,
    /// How it decides.
    pub method: Method,
    allow_duplicates: bool,
    pending: AtomicUsize,
    /// Listening users per (requested mount, user), for the duplicate-login rule.
    logins: parking_lot::Mutex<HashMap<(String, String), usize>>,
}

/// Every authenticator of the configuration, by `[[mount]]` name, with what the callbacks say
/// about this server (`server=`, `port=`, the User-Agent).
#[derive(Debug)]
pub struct Authenticators {
    by_pattern: HashMap<String, Arc<Authenticator>>,
    config: Arc<Config>,
    /// The first listen port (`port=` of the callbacks).
    port: u16,
    /// Failed logins per address (kept across reloads by [`Authenticators::rebuild`]).
    throttle: Arc<Throttle>,
}

impl Authenticators {
    /// Builds the authenticators of every `[[mount]]` with `authentication` of `config`, for
    /// a server whose first listen port is `port`.
    ///
    /// Errors: [`AuthError::BadUrl`] for a callback URL that is not a usable `http://` URL.
    pub fn from_config(config: Arc<Config>, port: u16) -> Result<Authenticators, AuthError> {
        let mut by_pattern = HashMap::new();
        let mut files: HashMap<std::path::PathBuf, Arc<HtpasswdAuth>> = HashMap::new();
        for m in &config.mount {
            let Some(a) = &m.authentication else { continue };
            if by_pattern.contains_key(&m.name) {
                continue; // `mount_for` only ever finds the first entry of a name
            }
            let (method, allow_duplicates) = match a {
                AuthConfig::Htpasswd {
                    filename,
                    allow_duplicate_users,
                } => (
                    Method::Htpasswd(
                        files
                            .entry(filename.clone())
                            .or_insert_with(|| Arc::new(HtpasswdAuth::new(filename)))
                            .clone(),
                    ),
                    *allow_duplicate_users,
                ),
                AuthConfig::Url(u) => {
                    let url = UrlAuth::new(u).map_err(|(c, source)| AuthError::BadUrl {
                        mount: m.name.clone(),
                        option: c.as_str(),
                        source,
                    })?;
                    (Method::Url(Arc::new(url)), u.allow_duplicate_users)
                }
            };
            by_pattern.insert(
                m.name.clone(),
                Arc::new(Authenticator {
                    pattern: m.name.clone(),
                    method,
                    allow_duplicates,
                    pending: AtomicUsize::new(0),
                    logins: Default::default(),
                }),
            );
        }
        Ok(Authenticators {
            by_pattern,
            config,
            port,
            throttle: Arc::new(Throttle::new()),
        })
    }

    /// The authenticators of `config` for a reload: like [`Authenticators::from_config`], but
    /// a `[[mount]]` whose `authentication` is unchanged keeps its authenticator as it is
    /// (htpasswd cache and `manageauth` changes, logged-in users for the duplicate-login rule,
    /// listeners waiting on a callback).
    ///
    /// Errors: as [`Authenticators::from_config`].
    pub fn rebuild(&self, config: Arc<Config>, port: u16) -> Result<Authenticators, AuthError> {
        let mut fresh = Authenticators::from_config(config.clone(), port)?;
        fresh.throttle = self.throttle.clone();
        let first = |c: &Config, name: &str| {
            c.mount
                .iter()
                .find(|m| m.name == name)
                .and_then(|m| m.authentication.clone())
        };
        for (pattern, auth) in fresh.by_pattern.iter_mut() {
            if let Some(old) = self.by_pattern.get(pattern) {
                if first(&self.config, pattern) == first(&config, pattern) {
                    *auth = old.clone();
                }
            }
        }
        Ok(fresh)
    }

    /// What [`Authenticators::from_config`] would refuse in `config` (a callback URL that
    /// cannot be used), one `key: problem` line each, for `throng check-config`.
    pub fn problems(config: &Config) -> Vec<String> {
        config
            .mount
            .iter()
            .filter_map(|m| match &m.authentication {
                Some(AuthConfig::Url(u)) => UrlAuth::new(u)
                    .err()
                    .map(|(c, e)| format!("mount[{}].authentication.{}: {e}", m.name, c.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The authenticator that applies to mount `name` (that of the first matching
    /// `[[mount]]`), if any.
    pub fn for_mount(&self, name: &str) -> Option<&Arc<Authenticator>> {
        self.by_pattern.get(&self.config.mount_for(name)?.name)
    }

    /// `Err(wait)` while address `ip` is blocked for failed logins ([`throttle`]): a request
    /// from it carrying credentials is then answered 429 with `Retry-After: wait`.
    pub fn login_blocked(&self, ip: IpAddr) -> Result<(), Duration> {
        self.throttle
            .check(ip, Instant::now(), &self.config.login_throttle())
    }

    /// Records a failed login from `ip` (logging the fail2ban line, and the start of a block).
    pub fn login_failed(
        &self,
        ip: IpAddr,
        kind: LoginKind,
        user: Option<&str>,
        mount: Option<&str>,
    ) {
        throttle::log_failure(ip, kind, user, mount);
        let rule = self.config.login_throttle();
        if self.throttle.failed(ip, Instant::now(), &rule) {
            throttle::log_block(ip, kind, rule.block);
        }
    }

    /// The `server=`/`port=` of callbacks: `hostname` and the first listen port.
    fn server_id(&self) -> ServerId<'_> {
        ServerId {
            hostname: &self.config.hostname,
            port: self.port,
        }
    }
}

/// One listener waiting on an authenticator; leaves the count when dropped.
struct Pending<'a>(&'a AtomicUsize);

impl<'a> Pending<'a> {
    fn enter(count: &'a AtomicUsize) -> Option<Pending<'a>> {
        if count.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING {
            count.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Pending(count))
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Body of the 429 an address blocked for failed logins gets.
pub const THROTTLED_MESSAGE: &str = "Too many failed logins, try again later\n";

fn throttled(wait: Duration) -> ListenerAuth {
    ListenerAuth::Refused {
        status: 429,
        message: THROTTLED_MESSAGE.to_owned(),
        retry_after: Some(wait.as_secs().max(1)),
    }
}

fn unauthorized(message: Option<String>) -> ListenerAuth {
    ListenerAuth::Refused {
        status: 401,
        message: message.map_or_else(|| UNAUTHORIZED_MESSAGE.to_owned(), |m| format!("{m}\n")),
        retry_after: None,
    }
}

/// A listener as the callbacks describe it (owned, for `listener_remove` later).
#[derive(Debug, Clone)]
struct ListenerFacts {
    client: u64,
    target: String,
    creds: Option<(String, String)>,
    ip: String,
    agent: Option<String>,
}

impl ListenerFacts {
    fn fields(&self) -> ListenerFields<'_> {
        ListenerFields {
            client: self.client,
            mount: &self.target,
            user: self.creds.as_ref().map_or("", |c| c.0.as_str()),
            pass: self.creds.as_ref().map_or("", |c| c.1.as_str()),
            ip: &self.ip,
            agent: self.agent.as_deref(),
        }
    }
}

impl Authenticators {
    /// Decides whether the listener asking for `mount` with request `head` from `peer` may listen;
    /// `id` is the client id it will have (sent to `listener_add` as `client=`).
    pub async fn authorize_listener(
        &self,
        head: &RequestHead,
        peer: SocketAddr,
        mount: &str,
        id: u64,
    ) -> ListenerAuth {
        let Some(auth) = self.for_mount(mount).cloned() else {
            return ListenerAuth::Allowed {
                user: None,
                time_limit: None,
                on_close: None,
            };
        };
        let sent_credentials = head.header("authorization").is_some();
        if sent_credentials {
            if let Err(wait) = self.login_blocked(peer.ip()) {
                return throttled(wait);
            }
        }
        let Some(pending) = Pending::enter(&auth.pending) else {
            tracing::warn!(%peer, %mount, "too many clients awaiting authentication");
            return ListenerAuth::Refused {
                status: 403,
                message: BUSY_MESSAGE.to_owned(),
                retry_after: None,
            };
        };
        // `mount=` of the callbacks: an ICY listener's request URI, as Icecast 2.4.4
        // `auth_url.c` sends it; an HLS playlist or a WHEP offer names its mount, not the
        // path it was asked on (`/hls/radio.mp3/s/<token>/index.m3u8`, `/whep/radio.mp3`).
        let asked = head.target.split('?').next().unwrap_or_default();
        let target = if asked == mount {
            head.target.clone()
        } else {
            mount.to_owned()
        };
        let facts = ListenerFacts {
            client: id,
            target,
            creds: head
                .header("authorization")
                .and_then(parse_basic)
                .map(|c| (c.user, c.password)),
            ip: peer.ip().to_string(),
            agent: head.header("user-agent").map(str::to_owned),
        };
        let time_limit = match &auth.method {
            Method::Htpasswd(h) => {
                let Some((user, pass)) = &facts.creds else {
                    tracing::debug!(%peer, %mount, "listener without credentials");
                    return unauthorized(None);
                };
                match h.check(user, pass).await {
                    Check::Ok => None,
                    why => {
                        tracing::info!(%peer, %mount, %user, file = %h.path().display(), "htpasswd login failed: {why:?}");
                        self.login_failed(peer.ip(), LoginKind::Listener, Some(user), Some(mount));
                        return unauthorized(None);
                    }
                }
            }
            Method::Url(url) => {
                let forwarded: Vec<(&str, &str)> = url
                    .forwarded_headers()
                    .iter()
                    .filter_map(|n| head.header(n).map(|v| (n.as_str(), v)))
                    .collect();
                let body = listener_add_body(
                    &self.server_id(),
                    &facts.fields(),
                    &forwarded,
                    url.header_prefix(),
                );
                let ua = &self.config.server_id;
                match url
                    .decide(Callback::ListenerAdd, body, facts.creds.as_ref(), ua, mount)
                    .await
                {
                    Decision::Accepted { time_limit_secs } => {
                        time_limit_secs.map(|s| Duration::from_secs(s.into()))
                    }
                    Decision::Refused { message } => {
                        if sent_credentials {
                            let user = facts.creds.as_ref().map(|c| c.0.as_str());
                            self.login_failed(peer.ip(), LoginKind::Listener, user, Some(mount));
                        }
                        return unauthorized(message);
                    }
                    Decision::Failed => return unauthorized(None),
                }
            }
        };
        drop(pending);
        let user = facts.creds.as_ref().map(|c| c.0.clone());
        let login = match (&user, auth.allow_duplicates) {
            (Some(u), false) => {
                let key = (mount.to_owned(), u.clone());
                let mut logins = auth.logins.lock();
                let n = logins.entry(key.clone()).or_insert(0);
                if *n > 0 {
                    drop(logins);
                    tracing::info!(%peer, %mount, user = %u, "duplicate login refused");
                    return unauthorized(None);
                }
                *n += 1;
                Some(key)
            }
            _ => None,
        };
        let remove = match &auth.method {
            Method::Url(url) if url.url(Callback::ListenerRemove).is_some() => Some(RemoveNotice {
                url: url.clone(),
                hostname: self.config.hostname.clone(),
                port: self.port,
                user_agent: self.config.server_id.clone(),
                facts,
            }),
            _ => None,
        };
        let on_close = (login.is_some() || remove.is_some()).then(|| {
            let mut session = Session {
                auth: auth.clone(),
                login,
                remove,
                rt: tokio::runtime::Handle::current(),
                started: Instant::now(),
            };
            CloseHook(Box::new(move |c: &ClosedListener| {
                session.end(c.duration_secs)
            }))
        });
        ListenerAuth::Allowed {
            user,
            time_limit,
            on_close,
        }
    }
}

/// What `listener_remove` needs.
struct RemoveNotice {
    url: Arc<UrlAuth>,
    hostname: String,
    port: u16,
    user_agent: String,
    facts: ListenerFacts,
}

/// An accepted listener's login: ended once, by its close hook or, if the listener never
/// reached a shard (HEAD, max-listeners), when dropped. Ending it frees the user for the
/// duplicate-login rule and sends `listener_remove` (Icecast sends it for every authenticated
/// client it destroys). It runs on a fan-out thread, so it only spawns.
struct Session {
    auth: Arc<Authenticator>,
    login: Option<(String, String)>,
    remove: Option<RemoveNotice>,
    rt: tokio::runtime::Handle,
    started: Instant,
}

impl Session {
    fn end(&mut self, duration_secs: u64) {
        if let Some(key) = self.login.take() {
            let mut logins = self.auth.logins.lock();
            if let Some(n) = logins.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    logins.remove(&key);
                }
            }
        }
        if let Some(r) = self.remove.take() {
            let server = ServerId {
                hostname: &r.hostname,
                port: r.port,
            };
            let body = listener_remove_body(&server, &r.facts.fields(), duration_secs);
            r.url.notify(
                &self.rt,
                Callback::ListenerRemove,
                body,
                r.facts.creds.clone(),
                r.user_agent,
            );
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let secs = self.started.elapsed().as_secs();
        self.end(secs);
    }
}

impl Authenticators {
    /// Whether the `url` authenticator of `mount` has a `stream-auth` callback (which then alone
    /// decides on its sources).
    pub fn has_stream_auth(&self, mount: &str) -> bool {
        self.for_mount(mount).is_some_and(
            |a| matches!(&a.method, Method::Url(u) if u.url(Callback::StreamAuth).is_some()),
        )
    }

    /// Decides on a source client of `mount` when its `url` authenticator has `stream-auth`
    /// (Icecast 2.4.4 `client_check_source_auth`: then the callback alone decides, with the Basic
    /// credentials sent). `admin` adds `&admin=1` (an admin request on the mount, such as a metadata
    /// update, authorised as its source).
    pub async fn authorize_source(
        &self,
        head: &RequestHead,
        peer: SocketAddr,
        mount: &str,
        admin: bool,
    ) -> SourceAuth {
        let Some(auth) = self.for_mount(mount) else {
            return SourceAuth::Unconfigured;
        };
        let Method::Url(url) = &auth.method else {
            return SourceAuth::Unconfigured;
        };
        if url.url(Callback::StreamAuth).is_none() {
            return SourceAuth::Unconfigured;
        }
        let (user, pass) = head
            .header("authorization")
            .and_then(parse_basic)
            .map(|c| (c.user, c.password))
            .unwrap_or_default();
        let ip = peer.ip().to_string();
        let body = stream_auth_body(&self.server_id(), mount, &ip, &user, &pass, admin);
        let ua = &self.config.server_id;
        match url
            .decide(Callback::StreamAuth, body, None, ua, mount)
            .await
        {
            Decision::Accepted { .. } => SourceAuth::Accepted { user, pass },
            _ => {
                tracing::info!(%peer, %mount, "failed auth for source");
                SourceAuth::Refused
            }
        }
    }

    /// Sends `mount_add` for a stream starting on `mount` (a source client or a relay, as Icecast
    /// 2.4.4 `source.c:source_init`); keep the notice while the stream runs. `None` when the mount
    /// has no such callbacks, or outside a tokio runtime.
    pub fn stream_started(&self, mount: &str) -> Option<StreamNotice> {
        let auth = self.for_mount(mount)?;
        let Method::Url(url) = &auth.method else {
            return None;
        };
        if url.url(Callback::MountAdd).is_none() && url.url(Callback::MountRemove).is_none() {
            return None;
        }
        let rt = tokio::runtime::Handle::try_current().ok()?;
        let body = mount_body(MountAction::Add, &self.server_id(), mount);
        let added = url.notify(
            &rt,
            Callback::MountAdd,
            body,
            None,
            self.config.server_id.clone(),
        );
        Some(StreamNotice {
            url: url.clone(),
            rt,
            mount: mount.to_owned(),
            hostname: self.config.hostname.clone(),
            port: self.port,
            user_agent: self.config.server_id.clone(),
            added,
        })
    }
}

/// A live stream on a mount whose `url` authenticator has `mount-add` or `mount-remove`:
/// `mount_add` is sent when it is made, `mount_remove` when it is dropped (after `mount_add`
/// has completed, so the callback server sees them in order). Neither waits for the reply.
#[derive(Debug)]
pub struct StreamNotice {
    url: Arc<UrlAuth>,
    rt: tokio::runtime::Handle,
    mount: String,
    hostname: String,
    port: u16,
    user_agent: String,
    added: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for StreamNotice {
    fn drop(&mut self) {
        if self.url.url(Callback::MountRemove).is_none() {
            return;
        }
        let server = ServerId {
            hostname: &self.hostname,
            port: self.port,
        };
        let body = mount_body(MountAction::Remove, &server, &self.mount);
        let (url, rt, ua) = (
            self.url.clone(),
            self.rt.clone(),
            std::mem::take(&mut self.user_agent),
        );
        match self.added.take() {
            None => {
                url.notify(&rt, Callback::MountRemove, body, None, ua);
            }
            Some(added) => {
                self.rt.spawn(async move {
                    let _ = added.await;
                    url.notify(&rt, Callback::MountRemove, body, None, ua);
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authenticators_follow_mount_matching() {
        let cfg = Config::from_toml(
            r#"
            [[mount]]
            name = "/open.mp3"
            [[mount]]
            name = "/vip*"
            authentication = { type = "htpasswd", filename = "/nonexistent", allow-duplicate-users = true }
            [[mount]]
            name = "/paid.mp3"
            authentication = { type = "url", listener-add = "http://127.0.0.1:9/add" }
            "#,
        )
        .unwrap();
        let a = Authenticators::from_config(Arc::new(cfg.clone()), 8000).unwrap();
        assert!(a.for_mount("/open.mp3").is_none());
        assert!(a.for_mount("/elsewhere").is_none());
        let vip = a.for_mount("/vip-room.ogg").unwrap();
        assert_eq!(vip.pattern, "/vip*");
        assert!(vip.allow_duplicates && matches!(vip.method, Method::Htpasswd(_)));
        let paid = a.for_mount("/paid.mp3").unwrap();
        // Mounts naming the same file share its authenticator (cache and write lock).
        let cfg2 = Config::from_toml(
            r#"
            [[mount]]
            name = "/a.mp3"
            authentication = { type = "htpasswd", filename = "/etc/users" }
            [[mount]]
            name = "/b.mp3"
            authentication = { type = "htpasswd", filename = "/etc/users" }
            "#,
        )
        .unwrap();
        let a2 = Authenticators::from_config(Arc::new(cfg2.clone()), 8000).unwrap();
        let file_of = |m: &str| match &a2.for_mount(m).unwrap().method {
            Method::Htpasswd(h) => h.clone(),
            Method::Url(_) => panic!("not htpasswd"),
        };
        assert!(Arc::ptr_eq(&file_of("/a.mp3"), &file_of("/b.mp3")));
        assert!(!paid.allow_duplicates && matches!(paid.method, Method::Url(_)));
    }

    #[test]
    fn unusable_callback_urls_are_errors() {
        let cfg = Config::from_toml(
            "[[mount]]\nname = \"/x\"\nauthentication = { type = \"url\", mount-add = \"ftp://h/\" }",
        )
        .unwrap();
        let e = Authenticators::from_config(Arc::new(cfg.clone()), 8000).unwrap_err();
        assert!(e.to_string().contains("mount-add"), "{e}");
    }

    #[test]
    fn pending_count_stops_at_the_limit_and_unwinds() {
        let n = AtomicUsize::new(0);
        let held: Vec<_> = (0..MAX_PENDING)
            .map(|_| Pending::enter(&n).unwrap())
            .collect();
        assert!(Pending::enter(&n).is_none());
        drop(held);
        assert_eq!(n.load(Ordering::Relaxed), 0);
        assert!(Pending::enter(&n).is_some());
    }
}
