//! The `url` authenticator of a mount, as Icecast 2.4.4 `auth_url.c`: an HTTP server decides on
//! listeners (`listener_add`) and source clients (`stream_auth`), and is told when listeners
//! leave (`listener_remove`) and streams start and stop (`mount_add`, `mount_remove`).
//!
//! Unlike Icecast's one thread per authenticator working a serial queue, every request is its
//! own tokio task bounded by the timeout (default 5 s; Icecast's libcurl waits 15 s), so a slow
//! or dead callback server delays only the clients it decides on. Notifications (remove, mount
//! add/remove) never delay anything: they run in the background, at most
//! [`NOTIFY_CONCURRENCY`] at a time, with at most [`NOTIFY_QUEUE`] waiting (more are dropped
//! and logged).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use throng_proto::url_auth::{CallbackUrl, ReplyRules, UrlError, Verdict};
use tokio::sync::Semaphore;

use crate::auth::http_client::post_form;
use crate::config::UrlAuthConfig;

/// Default callback timeout (s).
pub const DEFAULT_TIMEOUT_SECS: u64 = 5;
/// Notifications in flight at once, per authenticator.
pub const NOTIFY_CONCURRENCY: usize = 32;
/// Notifications waiting for a slot, per authenticator, beyond which new ones are dropped.
pub const NOTIFY_QUEUE: usize = 10_000;

/// Which callback a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Callback {
    /// `listener_add`.
    ListenerAdd,
    /// `listener_remove`.
    ListenerRemove,
    /// `mount_add`.
    MountAdd,
    /// `mount_remove`.
    MountRemove,
    /// `stream_auth`.
    StreamAuth,
}

impl Callback {
    /// The option name.
    pub fn as_str(self) -> &'static str {
        match self {
            Callback::ListenerAdd => "listener-add",
            Callback::ListenerRemove => "listener-remove",
            Callback::MountAdd => "mount-add",
            Callback::MountRemove => "mount-remove",
            Callback::StreamAuth => "stream-auth",
        }
    }
}

/// A configured `url` authenticator.
#[derive(Debug)]
pub struct UrlAuth {
    listener_add: Option<CallbackUrl>,
    listener_remove: Option<CallbackUrl>,
    mount_add: Option<CallbackUrl>,
    mount_remove: Option<CallbackUrl>,
    stream_auth: Option<CallbackUrl>,
    /// `username`/`password` options: Basic credentials for the callback server.
    basic: Option<(String, String)>,
    /// Request headers forwarded to `listener_add`.
    forward: Vec<String>,
    prefix: String,
    rules: ReplyRules,
    timeout: Duration,
    notify_slots: Semaphore,
    notify_waiting: AtomicUsize,
}

/// The callback server's answer on a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Accepted, with the reply's time limit (s), if any.
    Accepted {
        /// `icecast-auth-timelimit` (s).
        time_limit_secs: Option<u32>,
    },
    /// Refused by the reply, with its `icecast-auth-message`, if any.
    Refused {
        /// The reason given.
        message: Option<String>,
    },
    /// No usable reply (logged): the client is refused, as Icecast.
    Failed,
}

impl UrlAuth {
    /// An authenticator from its options.
    ///
    /// Errors: the option and why, when a callback URL is not a usable `http://` URL.
    pub fn new(cfg: &UrlAuthConfig) -> Result<UrlAuth, (Callback, UrlError)> {
        let parse = |c: Callback, u: &Option<String>| {
            u.as_deref()
                .map(CallbackUrl::parse)
                .transpose()
                .map_err(|e| (c, e))
        };
        Ok(UrlAuth {
            listener_add: parse(Callback::ListenerAdd, &cfg.listener_add)?,
            listener_remove: parse(Callback::ListenerRemove, &cfg.listener_remove)?,
            mount_add: parse(Callback::MountAdd, &cfg.mount_add)?,
            mount_remove: parse(Callback::MountRemove, &cfg.mount_remove)?,
            stream_auth: parse(Callback::StreamAuth, &cfg.stream_auth)?,
            basic: cfg.username.clone().zip(cfg.password.clone()),
            forward: cfg
                .headers
                .as_deref()
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect(),
            prefix: cfg.header_prefix.clone().unwrap_or_default(),
            rules: ReplyRules::new(cfg.auth_header.as_deref(), cfg.timelimit_header.as_deref()),
            timeout: Duration::from_secs(cfg.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS).max(1)),
            notify_slots: Semaphore::new(NOTIFY_CONCURRENCY),
            notify_waiting: AtomicUsize::new(0),
        })
    }

    /// The URL of `which`, if configured.
    pub fn url(&self, which: Callback) -> Option<&CallbackUrl> {
        match which {
            Callback::ListenerAdd => self.listener_add.as_ref(),
            Callback::ListenerRemove => self.listener_remove.as_ref(),
            Callback::MountAdd => self.mount_add.as_ref(),
            Callback::MountRemove => self.mount_remove.as_ref(),
            Callback::StreamAuth => self.stream_auth.as_ref(),
        }
    }

    /// Names of the request headers forwarded to `listener_add` (the `headers` option).
    pub fn forwarded_headers(&self) -> &[String] {
        &self.forward
    }

    /// Prefix of forwarded header fields (the `header_prefix` option; empty by default).
    pub fn header_prefix(&self) -> &str {
        &self.prefix
    }

    /// Basic credentials for a request to `url`, as Icecast 2.4.4: none when the URL carries
    /// its own `user:pass@`; else the `username`/`password` options; else, for listener
    /// callbacks, the listener's own credentials (`client`).
    fn credentials(
        &self,
        url: &CallbackUrl,
        client: Option<&(String, String)>,
    ) -> Option<(String, String)> {
        if url.credentials.is_some() {
            return url.credentials.clone();
        }
        self.basic.clone().or_else(|| client.cloned())
    }

    /// Asks `which` (`listener_add` or `stream_auth`) about a client by POSTing `body` (built by
    /// `throng_proto::url_auth`); `client` are its Basic credentials (sent to the callback
    /// server for listener callbacks without a configured user, as Icecast). An unconfigured
    /// `which` accepts; no reply within the authenticator's timeout (s) is
    /// [`Decision::Failed`]. Logs failures and refusals.
    pub async fn decide(
        &self,
        which: Callback,
        body: String,
        client: Option<&(String, String)>,
        user_agent: &str,
        mount: &str,
    ) -> Decision {
        let Some(url) = self.url(which) else {
            return Decision::Accepted {
                time_limit_secs: None,
            };
        };
        let client = if which == Callback::StreamAuth {
            None
        } else {
            client
        };
        let creds = self.credentials(url, client);
        match post_form(url, creds.as_ref(), user_agent, body, self.timeout).await {
            Ok(reply) => {
                let Verdict {
                    accepted,
                    time_limit_secs,
                    bad_timelimit,
                    message,
                } = self.rules.judge(&reply.headers);
                if bad_timelimit {
                    tracing::warn!(%mount, callback = which.as_str(), "callback returned an invalid time limit header");
                }
                if accepted {
                    Decision::Accepted { time_limit_secs }
                } else {
                    tracing::info!(%mount, callback = which.as_str(), status = reply.status,
                        "callback refused: {}", message.as_deref().unwrap_or("no reason given"));
                    Decision::Refused { message }
                }
            }
            Err(e) => {
                tracing::warn!(%mount, callback = which.as_str(), url = %url.authority, "auth callback failed: {e}");
                Decision::Failed
            }
        }
    }

    /// Sends a notification (`listener_remove`, `mount_add`, `mount_remove`) in the background
    /// on `rt`; its reply is ignored. Returns the task, or `None` when `which` is not configured
    /// or too many notifications are waiting (logged).
    pub fn notify(
        self: &Arc<Self>,
        rt: &tokio::runtime::Handle,
        which: Callback,
        body: String,
        client: Option<(String, String)>,
        user_agent: String,
    ) -> Option<tokio::task::JoinHandle<()>> {
        self.url(which)?;
        if self.notify_waiting.fetch_add(1, Ordering::Relaxed) >= NOTIFY_QUEUE {
            self.notify_waiting.fetch_sub(1, Ordering::Relaxed);
            tracing::warn!(
                callback = which.as_str(),
                "auth notification dropped: {NOTIFY_QUEUE} already waiting"
            );
            return None;
        }
        let me = self.clone();
        Some(rt.spawn(async move {
            let permit = me.notify_slots.acquire().await;
            me.notify_waiting.fetch_sub(1, Ordering::Relaxed);
            let Ok(_permit) = permit else { return };
            let Some(url) = me.url(which) else { return };
            let creds = me.credentials(url, client.as_ref());
            match post_form(url, creds.as_ref(), &user_agent, body, me.timeout).await {
                Ok(reply) => tracing::debug!(
                    callback = which.as_str(),
                    status = reply.status,
                    "auth notification sent"
                ),
                Err(e) => tracing::warn!(callback = which.as_str(), url = %url.authority,
                    "auth notification failed: {e}"),
            }
        }))
    }
}
