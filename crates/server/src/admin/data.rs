//! The facts the admin commands report, gathered from the live server in Icecast 2.4.4's terms
//! and independent of how they are rendered (XML in `xml.rs`, HTML in `html.rs`,
//! JSON in `api.rs`):
//! - [`stats`]: the stats tree of `stats.c:stats_get_xml` with hidden entries shown (global
//!   stats, then one list per mount, each sorted by name as Icecast's AVL trees are).
//! - [`mount_list`]: the entries of `admin.c:admin_build_sourcelist` (`listmounts`).
//! - [`stream_list`]: the mounts of `stats.c:stats_get_streams` (`streamlist.txt`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::Serialize;

use crate::admin::status::{audio_params, bitrate, iso8601, rfc822, subtype};
use crate::config::AuthConfig;
use crate::ctx::ServerCtx;
use crate::mount::live::{Mount, SourceKind};

/// One stat: a name and its text value, e.g. `("listeners", "3")`.
pub type Stat = (String, String);

/// The stats of one mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountStats {
    /// Mount name, e.g. `/live.mp3`.
    pub mount: String,
    /// Its stats, sorted by name.
    pub stats: Vec<Stat>,
}

/// A snapshot of the stats tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Server-wide stats, sorted by name.
    pub global: Vec<Stat>,
    /// Per-mount stats, sorted by mount name.
    pub mounts: Vec<MountStats>,
}

/// The `[[mount]] authentication` type of mount `name` as Icecast names it (`htpasswd`, `url`).
pub fn authenticator(ctx: &ServerCtx, name: &str) -> Option<&'static str> {
    match ctx.config().mount_for(name)?.authentication.as_ref()? {
        AuthConfig::Htpasswd { .. } => Some("htpasswd"),
        AuthConfig::Url(_) => Some("url"),
    }
}

/// Whether mount `m` is left out of public lists (`[[mount]] hidden`).
fn hidden(ctx: &ServerCtx, name: &str) -> bool {
    ctx.config().mount_for(name).is_some_and(|c| c.hidden)
}

fn mount_stats(ctx: &ServerCtx, m: &Mount) -> Vec<Stat> {
    let description = m.description();
    let info = &description.info;
    let (rate, channels) = audio_params(m);
    let mut s: Vec<Stat> = Vec::new();
    let mut add = |k: &str, v: String| s.push((k.to_owned(), v));
    // Ogg: the ARTIST comment or admin `artist` (Icecast 2.4.4 `format_ogg.c:update_comments`).
    if let Some(a) = m.ogg_tags.artist() {
        add("artist", a);
    }
    if let Some(a) = &info.audio_info_raw {
        add("audio_info", a.clone());
    }
    if let Some(a) = authenticator(ctx, &m.name) {
        add("authenticator", a.to_owned());
    }
    if let Some(b) = bitrate(m) {
        add("bitrate", b);
    }
    if let Some(c) = channels {
        add("channels", c);
    }
    add("genre", info.genre.clone());
    add(
        "listener_peak",
        m.listener_peak.load(Ordering::Relaxed).to_string(),
    );
    add("listeners", m.listeners.load(Ordering::Relaxed).to_string());
    add("listenurl", m.listen_url(&ctx.config().hostname, ctx.port));
    add(
        "max_listeners",
        m.max_listeners()
            .map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
    );
    add("public", u8::from(info.public).to_string());
    if let Some(r) = rate {
        add("samplerate", r);
    }
    add("server_description", info.description.clone());
    add("server_name", info.name.clone());
    add("server_type", m.settings.content_type.clone());
    if let Some(u) = &info.url {
        add("server_url", u.clone());
    }
    add(
        "slow_listeners",
        m.slow_listeners.load(Ordering::Relaxed).to_string(),
    );
    if let Some(ip) = m.settings.source_ip {
        add("source_ip", ip.to_string());
    }
    add("stream_start", rfc822(&m.started));
    add("stream_start_iso8601", iso8601(&m.started));
    if let Some(t) = subtype(m) {
        add("subtype", t.to_owned());
    }
    let title = m.title();
    if !title.is_empty() {
        add("title", title);
    }
    add(
        "total_bytes_read",
        m.source_bytes.load(Ordering::Relaxed).to_string(),
    );
    add(
        "total_bytes_sent",
        m.bytes_sent.load(Ordering::Relaxed).to_string(),
    );
    // The source client's User-Agent (Icecast 2.4.4 `source.c`; hidden in status-json).
    if let Some(a) = &info.user_agent {
        add("user_agent", a.clone());
    }
    s.sort();
    s
}

/// The stats tree, hidden mounts included (admin `stats`); only mount `only` when given (the
/// global stats are always there, as `stats?mount=` in Icecast 2.4.4).
pub fn stats(ctx: &ServerCtx, only: Option<&str>) -> Stats {
    let mut global: Vec<Stat> = vec![
        ("admin".into(), ctx.config().admin_email.clone()),
        ("clients".into(), ctx.clients.open().to_string()),
        ("host".into(), ctx.config().hostname.clone()),
        // Every path, as each mount's `listeners` and `/api/v1/status` count them.
        (
            "listeners".into(),
            crate::roster::counts(ctx).total().to_string(),
        ),
        ("location".into(), ctx.config().location.clone()),
        ("server_id".into(), ctx.config().server_id.clone()),
        ("server_start".into(), rfc822(&ctx.started)),
        ("server_start_iso8601".into(), iso8601(&ctx.started)),
        (
            "source_client_connections".into(),
            ctx.metrics.source_connects.get().to_string(),
        ),
        ("sources".into(), ctx.registry.list().len().to_string()),
    ];
    global.sort();
    let mounts = ctx
        .registry
        .list()
        .iter()
        .filter(|m| only.is_none_or(|o| o == m.name))
        .map(|m| MountStats {
            mount: m.name.clone(),
            stats: mount_stats(ctx, m),
        })
        .collect();
    Stats { global, mounts }
}

/// One mount of `listmounts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MountEntry {
    /// Mount name.
    pub mount: String,
    /// Its fallback mount (run-time `fallbacks` setting, else `fallback-mount`), if any.
    pub fallback: Option<String>,
    /// Listeners now.
    pub listeners: u32,
    /// Listener authenticator type (`htpasswd`, `url`), if any.
    pub authenticator: Option<&'static str>,
    /// Seconds since its source client or relay connected (Icecast `Connected`; absent for
    /// file-fed mounts and on-demand mounts not running).
    pub connected_s: Option<i64>,
    /// Content-Type of the stream (absent for on-demand mounts not running).
    pub content_type: Option<String>,
    /// Left out of public lists.
    pub hidden: bool,
    /// Whether a source feeds it now (false: an on-demand relay waiting for a listener).
    pub live: bool,
}

fn entry(ctx: &ServerCtx, m: &Arc<Mount>) -> MountEntry {
    let connected = matches!(m.settings.kind, SourceKind::Client | SourceKind::Relay)
        .then(|| (chrono::Local::now() - m.started).num_seconds().max(0));
    MountEntry {
        mount: m.name.clone(),
        fallback: ctx.registry.fallback_of(&m.name),
        listeners: m.listeners.load(Ordering::Relaxed),
        authenticator: authenticator(ctx, &m.name),
        connected_s: connected,
        content_type: Some(m.settings.content_type.clone()),
        hidden: m.hidden(),
        live: true,
    }
}

/// Every mount, live or on demand, sorted by name, hidden ones included (`listmounts`);
/// without mount `except` (`moveclients` lists the possible destinations).
pub fn mount_list(ctx: &ServerCtx, except: Option<&str>) -> Vec<MountEntry> {
    let mut v: Vec<MountEntry> = ctx.registry.list().iter().map(|m| entry(ctx, m)).collect();
    for name in ctx.registry.on_demand_mounts() {
        if !v.iter().any(|e| e.mount == name) {
            v.push(MountEntry {
                fallback: ctx.registry.fallback_of(&name),
                listeners: 0,
                authenticator: authenticator(ctx, &name),
                connected_s: None,
                content_type: None,
                hidden: hidden(ctx, &name),
                live: false,
                mount: name,
            });
        }
    }
    v.retain(|e| except.is_none_or(|x| x != e.mount));
    v.sort_by(|a, b| a.mount.cmp(&b.mount));
    v
}

/// The mounts a slave relays (`streamlist.txt`): every non-hidden mount, sorted by name.
pub fn stream_list(ctx: &ServerCtx) -> Vec<String> {
    mount_list(ctx, None)
        .into_iter()
        .filter(|e| !e.hidden)
        .map(|e| e.mount)
        .collect()
}
