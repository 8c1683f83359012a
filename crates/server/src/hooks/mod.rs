//! Event hooks at run time (`[[hook]]`, `[[mount.hook]]`; `config/hooks.rs`): Icecast 2.5's
//! `exec` and `url` events and Icecast-KH's `on-connect`/`on-disconnect` scripts.
//!
//! One task per server looks at the live mounts every [`TICK`] and raises `source-connect` for a
//! feed that appeared, `source-disconnect` for one that ended and `format-metadata-changed`
//! when a title changed, so no source, relay or metadata path waits on a hook or even knows of
//! them. Each hook then runs in its own task, bounded by its `timeout` (default
//! [`DEFAULT_TIMEOUT`]): a program still running then is killed, a call still waiting is
//! dropped, and either is logged. A hanging script never delays a source or a listener.
//! Arguments, environment and form fields are `event.rs`'s.
//!
//! Listener events are raised where URL authentication's `listener_add` and `listener_remove`
//! run: [`listener_attached`] when `respond::admit_listener` lets a listener in (ICY, HLS,
//! WHEP alike), and the close hook it returns when that listener's record ends.
//!
//! Hooks are bounded per server (`budget.rs`, [`Budget`], owned by the server context; `[hooks]`, issue 42): at most `max-concurrent`
//! run at once (a `tokio::sync::Semaphore` of that many permits, held from the program's
//! start or the request's send to its end or timeout), at most `queue` more wait for a permit
//! (first come, first started: tokio's semaphore is fair), and a hook beyond both is dropped,
//! counted in `throng_hooks_dropped_total` and logged at WARN at most once a second with the
//! count. So 300 listeners arriving at once start at most `max-concurrent` programs, where they
//! used to start 600 (attach and detach) at the same moment.

pub mod budget;
pub mod event;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use throng_proto::url_auth::CallbackUrl;

use crate::audience::{CloseHook, ClosedListener};
use crate::config::hooks::HookConfig;
use crate::config::Config;
use crate::ctx::ServerCtx;
use crate::mount::live::{Mount, SourceKind};
use budget::{Admission, Budget};
use event::{Event, ServerInfo};

/// How often the live mounts are compared (an event is raised at most this late).
pub const TICK: Duration = Duration::from_millis(250);

/// How long a hook may run when its `timeout` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the watcher remembers of a live feed.
struct Seen {
    mount: Arc<Mount>,
    title: String,
}

/// Starts the hook watcher of `ctx`'s server; it ends at shutdown.
pub fn start(ctx: Arc<ServerCtx>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(TICK);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = ctx.shutdown.clone();
        let mut seen: HashMap<u64, Seen> = HashMap::new();
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = shutdown.changed() => {}
            }
            if *shutdown.borrow() {
                break;
            }
            watch(&ctx, &mut seen);
        }
    });
}

/// Compares the live mounts with the last look and raises the events.
fn watch(ctx: &ServerCtx, seen: &mut HashMap<u64, Seen>) {
    let config = ctx.config();
    let live = ctx.registry.list();
    let mut events = Vec::new();
    for m in &live {
        let title = m.title();
        match seen.get_mut(&m.id) {
            None => {
                events.push(("source-connect", m.clone()));
                if !title.is_empty() {
                    events.push(("format-metadata-changed", m.clone()));
                }
                seen.insert(
                    m.id,
                    Seen {
                        mount: m.clone(),
                        title,
                    },
                );
            }
            Some(s) if s.title != title => {
                s.title = title;
                events.push(("format-metadata-changed", m.clone()));
            }
            Some(_) => {}
        }
    }
    seen.retain(|id, s| {
        let still = live.iter().any(|m| m.id == *id);
        if !still {
            events.push(("source-disconnect", s.mount.clone()));
        }
        still
    });
    for (trigger, m) in events {
        raise(ctx, &config, trigger, &m);
    }
}

/// Runs every hook of `trigger` on `m` (the global ones, then the mount's), each in its task.
fn raise(ctx: &ServerCtx, config: &Arc<Config>, trigger: &'static str, m: &Mount) {
    let hooks = hooks_for(config, trigger, &m.name);
    if hooks.is_empty() {
        return;
    }
    let mc = config.mount_for(&m.name);
    let s = &m.settings;
    let description = m.description();
    let header = |name: &str| {
        description
            .stream_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let ev = Event {
        trigger,
        mount: m.name.clone(),
        client_id: m.id,
        connected_at: m.started.timestamp(),
        duration: (chrono::Local::now() - m.started).num_seconds().max(0) as u64,
        role: match s.kind {
            SourceKind::Client => "source",
            SourceKind::Relay => "relay",
            SourceKind::File => "file",
        },
        username: s.source_user.clone(),
        ip: s.source_ip.map(|ip| ip.to_string()),
        agent: header("user-agent"),
        media_type: s.content_type.clone(),
        stream: stream_fields(mc),
        public: mc.and_then(|c| c.public).unwrap_or(false),
        hidden: mc.is_some_and(|c| c.hidden),
        title: m.title(),
    };
    spawn_all(
        &ctx.hooks.clone(),
        config,
        hooks,
        ev,
        server_info(ctx, config),
    );
}

/// The hooks of `trigger` for mount `mount`: the global ones, then the mount's.
fn hooks_for(config: &Config, trigger: &str, mount: &str) -> Vec<HookConfig> {
    config
        .hook
        .iter()
        .chain(
            config
                .mount_for(mount)
                .map(|c| c.hook.as_slice())
                .unwrap_or_default(),
        )
        .filter(|h| h.trigger == trigger)
        .cloned()
        .collect()
}

/// A listener's facts for its events.
#[derive(Debug, Clone)]
pub struct ListenerFacts {
    /// Its id (Icecast's client id, as URL auth's `client=`).
    pub id: u64,
    /// Its address.
    pub ip: std::net::IpAddr,
    /// Its `User-Agent`.
    pub agent: Option<String>,
    /// Its authenticated user.
    pub user: Option<String>,
}

/// Raises `source-listener-attach` for a listener let in on `mount`, and returns the close
/// hook to keep in its record: `on_close` (URL auth's `listener_remove`), then
/// `source-listener-detach`. Nothing is done or wrapped when no hook asks for these.
pub fn listener_attached(
    ctx: &ServerCtx,
    mount: &str,
    who: ListenerFacts,
    on_close: Option<CloseHook>,
) -> Option<CloseHook> {
    let config = ctx.config();
    let attach = hooks_for(&config, "source-listener-attach", mount);
    if !attach.is_empty() {
        let ev = listener_event(&config, "source-listener-attach", mount, &who, 0);
        spawn_all(
            &ctx.hooks.clone(),
            &config,
            attach,
            ev,
            server_info(ctx, &config),
        );
    }
    if hooks_for(&config, "source-listener-detach", mount).is_empty() {
        return on_close;
    }
    let server = server_info(ctx, &config);
    let budget = ctx.hooks.clone();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return on_close;
    };
    Some(CloseHook(Box::new(move |closed: &ClosedListener| {
        if let Some(inner) = on_close {
            (inner.0)(closed);
        }
        // The configuration of the attach; the task runs on the server's runtime.
        let _enter = runtime.enter();
        let detach = hooks_for(&config, "source-listener-detach", closed.mount);
        let ev = listener_event(
            &config,
            "source-listener-detach",
            closed.mount,
            &who,
            closed.duration_secs,
        );
        spawn_all(&budget, &config, detach, ev, server);
    })))
}

/// The event of a listener on `mount`.
fn listener_event(
    config: &Config,
    trigger: &'static str,
    mount: &str,
    who: &ListenerFacts,
    duration: u64,
) -> Event {
    let mc = config.mount_for(mount);
    Event {
        trigger,
        mount: mount.to_owned(),
        client_id: who.id,
        connected_at: chrono::Local::now().timestamp() - duration as i64,
        duration,
        role: "listener",
        username: who.user.clone().unwrap_or_default(),
        ip: Some(who.ip.to_string()),
        agent: who.agent.clone(),
        media_type: String::new(),
        stream: stream_fields(mc),
        public: mc.and_then(|c| c.public).unwrap_or(false),
        hidden: mc.is_some_and(|c| c.hidden),
        title: String::new(),
    }
}

/// A mount's `stream-name`, `stream-description`, `stream-url` and `genre` ([`Event::stream`]).
fn stream_fields(mc: Option<&crate::config::MountConfig>) -> [Option<String>; 4] {
    [
        mc.and_then(|c| c.stream_name.clone()),
        mc.and_then(|c| c.stream_description.clone()),
        mc.and_then(|c| c.stream_url.clone()),
        mc.and_then(|c| c.genre.clone()),
    ]
}

/// The server-wide values of `config`.
fn server_info(ctx: &ServerCtx, config: &Config) -> ServerInfo {
    ServerInfo {
        hostname: config.hostname.clone(),
        admin: config.admin_email.clone(),
        logdir: std::path::Path::new(&config.logging.error_log)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        port: ctx.port,
    }
}

/// Runs each of `hooks` for `ev` in its own task, within `budget` under `config`'s `[hooks]`:
/// at once when a permit is free, after the hooks before it when it can wait, else not at all
/// (counted and logged, [`Budget`]). A hook's `timeout` counts from its start, not its wait.
fn spawn_all(
    budget: &Arc<Budget>,
    config: &Config,
    hooks: Vec<HookConfig>,
    ev: Event,
    server: ServerInfo,
) {
    let limits = config.hooks;
    for h in hooks {
        let waited = match budget.admit(&limits) {
            Admission::Run(permit) => Ok(permit),
            Admission::Wait => Err(()),
            Admission::Drop => {
                budget.dropped(&h, &ev, &limits);
                continue;
            }
        };
        let (ev, server, ua) = (ev.clone(), server.clone(), config.server_id.clone());
        let budget = budget.clone();
        tokio::spawn(async move {
            let permit = match waited {
                Ok(permit) => permit,
                Err(()) => match budget.wait().await {
                    Some(p) => p,
                    None => return, // the semaphore is never closed
                },
            };
            run(h, ev, server, ua).await;
            budget.release(permit);
        });
    }
}

/// Runs one hook to its end or its timeout, logging what happened.
async fn run(hook: HookConfig, ev: Event, server: ServerInfo, user_agent: String) {
    let limit = hook.timeout.map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    if let Some(exe) = &hook.exec {
        let argv = event::argv(&hook, exe, &ev);
        let mut cmd = tokio::process::Command::new(exe);
        cmd.args(&argv[1..])
            .envs(event::environment(&ev, &server))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(hook = %exe.display(), mount = %ev.mount, trigger = ev.trigger, "hook not started: {e}");
                return;
            }
        };
        match tokio::time::timeout(limit, child.wait()).await {
            Ok(Ok(status)) if status.success() => {
                tracing::debug!(hook = %exe.display(), mount = %ev.mount, trigger = ev.trigger, "hook ran");
            }
            Ok(Ok(status)) => {
                tracing::warn!(hook = %exe.display(), mount = %ev.mount, trigger = ev.trigger, "hook failed: {status}");
            }
            Ok(Err(e)) => {
                tracing::error!(hook = %exe.display(), mount = %ev.mount, "hook lost: {e}");
            }
            Err(_) => {
                let _ = child.kill().await;
                tracing::warn!(
                    hook = %exe.display(),
                    mount = %ev.mount,
                    trigger = ev.trigger,
                    "hook still running after {} s: killed",
                    limit.as_secs()
                );
            }
        }
    } else if let Some(url) = &hook.url {
        let Ok(target) = CallbackUrl::parse(url) else {
            return; // checked when the configuration was loaded
        };
        let basic = hook
            .username
            .clone()
            .map(|u| (u, hook.password.clone().unwrap_or_default()));
        let body = event::form(&hook, &ev, &server);
        let sent =
            crate::auth::http_client::post_form(&target, basic.as_ref(), &user_agent, body, limit)
                .await;
        if let Err(e) = sent {
            tracing::warn!(hook = %url, mount = %ev.mount, trigger = ev.trigger, "hook call failed: {e}");
        }
    }
}
