//! Mounts: a live stream's description, queue, metadata and counters, and the registry of
//! mounts that are live now.
//!
//! A [`Mount`] does not know where its bytes come from (a source client, a file, later a relay):
//! the feeder owns the `Chunker`; listeners see only the [`Feed`] snapshots and the ICY block.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Mutex, RwLock};
use throng_proto::format::Format;
use throng_proto::framer::StreamParams;
use throng_proto::icy::metadata_block;
use throng_proto::source_info::SourceInfo;

use crate::cursor::IcyMeta;
use crate::ring::{Feed, FeedWriter};

/// Where a mount's bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A source client (`SOURCE` or `PUT`).
    Client,
    /// A file looped in real time (the demo, `[[mount]] file`, a webroot fallback file).
    File,
    /// A relay pulling the mount from another server.
    Relay,
}

/// Settings fixed when the mount starts.
#[derive(Debug, Clone)]
pub struct MountSettings {
    /// Framing of the stream.
    pub format: Format,
    /// Content-Type sent to listeners.
    pub content_type: String,
    /// Stream description, after `[[mount]]` overrides.
    pub info: SourceInfo,
    /// Left out of public status pages.
    pub hidden: bool,
    /// Most listeners, if limited.
    pub max_listeners: Option<u32>,
    /// Burst-on-connect size in bytes.
    pub burst_size: u64,
    /// Source user and password accepted for this mount's metadata updates.
    pub source_user: String,
    /// See `source_user`.
    pub source_password: String,
    /// Address of the source client, if any.
    pub source_ip: Option<IpAddr>,
    /// What feeds the mount.
    pub kind: SourceKind,
    /// `icy-*` headers sent to listeners, from [`stream_headers`].
    pub stream_headers: Vec<(String, String)>,
}

/// The `icy-*` headers a listener gets for a stream described by `info`, as Icecast 2.4.4
/// `format.c:format_prepare_headers` derives them from the source's `ice-*`/`icy-*` headers:
/// `icy-br`, `ice-audio-info`, `icy-description`, `icy-genre`, `icy-name`, `icy-pub`, `icy-url`.
/// Fields still at Icecast's placeholder defaults are left out.
pub fn stream_headers(info: &SourceInfo) -> Vec<(String, String)> {
    let mut h = Vec::new();
    let mut add = |k: &str, v: &str| h.push((k.to_owned(), v.to_owned()));
    if let Some(b) = &info.bitrate {
        add("icy-br", b);
    }
    if let Some(a) = &info.audio_info_raw {
        add("ice-audio-info", a);
    }
    if info.description != "Unspecified description" {
        add("icy-description", &info.description);
    }
    if info.genre != "various" {
        add("icy-genre", &info.genre);
    }
    if info.name != "Unspecified name" {
        add("icy-name", &info.name);
    }
    add("icy-pub", if info.public { "1" } else { "0" });
    if let Some(u) = &info.url {
        add("icy-url", u);
    }
    h
}

/// What the origin of a mount (source client, relay, file) knows about it; the rest comes
/// from the configuration (see [`Mount::configured`]).
#[derive(Debug, Clone)]
pub struct Origin {
    /// Framing of the stream.
    pub format: Format,
    /// Content-Type sent to listeners.
    pub content_type: String,
    /// Stream description, `[[mount]]` overrides already applied.
    pub info: SourceInfo,
    /// Source user and password accepted for metadata updates of this mount.
    pub credentials: (String, String),
    /// Address of the source client (or a relay's upstream), if any.
    pub source_ip: Option<IpAddr>,
    /// What feeds the mount.
    pub kind: SourceKind,
    /// Hidden whatever the configuration says (webroot fallback files).
    pub force_hidden: bool,
}

/// A live mount.
#[derive(Debug)]
pub struct Mount {
    /// Mount name, e.g. `/live.mp3`.
    pub name: String,
    /// Unique id of this incarnation (a mount re-created by a reconnecting source gets a new one).
    pub id: u64,
    /// Fixed settings.
    pub settings: MountSettings,
    /// The queue listeners read.
    pub feed: Arc<Feed>,
    /// Current ICY metadata block.
    pub icy: ArcSwap<IcyMeta>,
    title: Mutex<String>,
    params: Mutex<StreamParams>,
    /// Current listeners.
    pub listeners: AtomicU32,
    /// Most listeners seen at once.
    pub listener_peak: AtomicU32,
    /// Listeners dropped for lagging more than queue-size.
    pub slow_listeners: AtomicU64,
    /// Bytes received from the source (after ICY metadata was stripped).
    pub source_bytes: AtomicU64,
    /// Bytes sent to listeners (flushed by shards once per tick).
    pub bytes_sent: AtomicU64,
    /// When the mount started.
    pub started: chrono::DateTime<chrono::Local>,
    /// Set to ask the feeder to stop (shutdown, admin kill).
    pub stop: AtomicBool,
    /// Ogg only: comment updates for the feeder and the `artist` stat (`ogg_retag.rs`).
    pub ogg_tags: crate::ogg_retag::OggTagSlot,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Mount {
    /// A new mount reading `feed`.
    pub fn new(name: &str, settings: MountSettings, feed: Arc<Feed>) -> Mount {
        Mount {
            name: name.to_owned(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            settings,
            feed,
            icy: ArcSwap::from_pointee(IcyMeta {
                generation: 0,
                block: metadata_block("", None),
            }),
            title: Mutex::new(String::new()),
            params: Mutex::new(StreamParams::default()),
            listeners: AtomicU32::new(0),
            listener_peak: AtomicU32::new(0),
            slow_listeners: AtomicU64::new(0),
            source_bytes: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            started: chrono::Local::now(),
            stop: AtomicBool::new(false),
            ogg_tags: Default::default(),
        }
    }

    /// A new mount `name` fed by `origin`, with its `[[mount]]` settings (hidden,
    /// max-listeners) and its queue sized by [`crate::config::Config::burst_and_queue`]
    /// (retaining `max(queue-size, burst-size)` bytes); returns it and the writer of its queue.
    pub fn configured(
        config: &crate::config::Config,
        name: &str,
        origin: Origin,
    ) -> (Arc<Mount>, FeedWriter) {
        let cfg = config.mount_for(name);
        let (burst, queue) = config.burst_and_queue(name);
        let writer = FeedWriter::new(queue.max(burst) as u64);
        let settings = MountSettings {
            format: origin.format,
            content_type: origin.content_type,
            stream_headers: stream_headers(&origin.info),
            info: origin.info,
            hidden: origin.force_hidden || cfg.is_some_and(|m| m.hidden),
            max_listeners: cfg.and_then(|m| m.max_listeners),
            burst_size: burst as u64,
            source_user: origin.credentials.0,
            source_password: origin.credentials.1,
            source_ip: origin.source_ip,
            kind: origin.kind,
        };
        (Arc::new(Mount::new(name, settings, writer.feed())), writer)
    }

    /// Sets the stream title (and optional URL) sent in ICY metadata and shown in status.
    pub fn set_title(&self, title: &str, url: Option<&str>) {
        let mut t = self.title.lock();
        *t = title.to_owned();
        let generation = self.icy.load().generation + 1;
        self.icy.store(Arc::new(IcyMeta {
            generation,
            block: metadata_block(title, url),
        }));
    }

    /// The current stream title ("" before any update).
    pub fn title(&self) -> String {
        self.title.lock().clone()
    }

    /// Records audio parameters seen by the framer.
    pub fn set_params(&self, p: StreamParams) {
        *self.params.lock() = p;
    }

    /// Audio parameters seen by the framer.
    pub fn params(&self) -> StreamParams {
        *self.params.lock()
    }

    /// Takes a listener slot, failing when max-listeners is reached.
    pub fn try_add_listener(&self) -> bool {
        let max = self.settings.max_listeners.unwrap_or(u32::MAX);
        let prev = self
            .listeners
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        match prev {
            Ok(n) => {
                self.listener_peak.fetch_max(n + 1, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    /// Takes a listener slot even past max-listeners (a listener moved here by a fallback or an
    /// admin move is never dropped for it).
    pub fn force_add_listener(&self) {
        let n = self.listeners.fetch_add(1, Ordering::AcqRel);
        self.listener_peak.fetch_max(n + 1, Ordering::Relaxed);
    }

    /// Releases a listener slot.
    pub fn remove_listener(&self) {
        self.listeners.fetch_sub(1, Ordering::AcqRel);
    }

    /// The listener URL, `http://host:port/mount`, as Icecast's `listenurl`.
    pub fn listen_url(&self, host: &str, port: u16) -> String {
        format!("http://{host}:{port}{}", self.name)
    }
}

/// Why a mount could not be registered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReserveError {
    /// Another source already feeds this mount (Icecast 2.4.4: 403 "Mountpoint in use").
    #[error("mountpoint in use")]
    InUse,
    /// The `sources` limit is reached (Icecast 2.4.4: 403 "too many sources connected").
    #[error("too many sources connected")]
    TooManySources,
}

/// Where the listeners of an ended mount go (see [`Registry::fallback_target`]).
#[derive(Debug, Clone)]
pub enum Fallback {
    /// This live mount.
    Live(Arc<Mount>),
    /// An on-demand relay along the chain was asked to start: keep the listeners a while.
    Starting,
    /// Nowhere: the listeners are closed once they have drained the mount.
    Nothing,
}

/// Most fallback hops followed, as Icecast 2.4.4 `source_find_mount` (10).
pub const MAX_FALLBACK_HOPS: usize = 10;

/// The live mounts, by name, and the fallback rules between mount names.
#[derive(Debug, Default)]
pub struct Registry {
    mounts: RwLock<HashMap<String, Arc<Mount>>>,
    config: Arc<crate::config::Config>,
    /// Fallbacks set at run time (admin `fallbacks`), over the configuration's.
    fallback_overrides: RwLock<HashMap<String, String>>,
    /// Mounts started on demand (on-demand relays), woken by the first listener.
    on_demand: RwLock<HashMap<String, Arc<tokio::sync::Notify>>>,
}

impl Registry {
    /// An empty registry taking fallback rules from `config`.
    pub fn new(config: Arc<crate::config::Config>) -> Registry {
        Registry {
            config,
            ..Registry::default()
        }
    }

    /// Declares `name` an on-demand mount; the returned `Notify` is signalled each time a
    /// listener asks for it while it is not live.
    pub fn register_on_demand(&self, name: &str) -> Arc<tokio::sync::Notify> {
        self.on_demand
            .write()
            .entry(name.to_owned())
            .or_default()
            .clone()
    }

    /// Forgets the on-demand mount `name`.
    pub fn unregister_on_demand(&self, name: &str) {
        self.on_demand.write().remove(name);
    }

    /// Names of the declared on-demand mounts.
    pub fn on_demand_mounts(&self) -> Vec<String> {
        let mut v: Vec<String> = self.on_demand.read().keys().cloned().collect();
        v.sort();
        v
    }

    /// Asks the on-demand mount `name` to start; false if `name` is not one.
    pub fn request_on_demand(&self, name: &str) -> bool {
        match self.on_demand.read().get(name) {
            Some(n) => {
                n.notify_one();
                true
            }
            None => false,
        }
    }

    /// The fallback of mount `name`: set by admin `fallbacks`, else `[[mount]] fallback-mount`.
    pub fn fallback_of(&self, name: &str) -> Option<String> {
        if let Some(f) = self.fallback_overrides.read().get(name) {
            return (!f.is_empty()).then(|| f.clone());
        }
        self.config.fallback_for(name).map(str::to_owned)
    }

    /// Sets (or with `""` clears) the fallback of mount `name` at run time (admin `fallbacks`).
    pub fn set_fallback(&self, name: &str, fallback: &str) {
        self.fallback_overrides
            .write()
            .insert(name.to_owned(), fallback.to_owned());
    }

    /// The mount serving a listener who asks for `name`: the live mount `name`, else the first
    /// live mount along its fallback chain (at most [`MAX_FALLBACK_HOPS`]), as Icecast 2.4.4
    /// `source_find_mount`.
    pub fn resolve(&self, name: &str) -> Option<Arc<Mount>> {
        if let Some(m) = self.get(name).filter(|m| !m.feed.load().ended) {
            return Some(m);
        }
        self.follow_fallbacks(name, None)
    }

    /// The first live mount along the fallback chain after `name` (not `name` itself) whose
    /// format is `format` when given.
    pub fn follow_fallbacks(&self, name: &str, format: Option<Format>) -> Option<Arc<Mount>> {
        self.live_fallbacks(name, format).into_iter().next()
    }

    /// Every live mount along the fallback chain after `name`, in order (at most
    /// [`MAX_FALLBACK_HOPS`] hops), whose format is `format` when given.
    pub fn live_fallbacks(&self, name: &str, format: Option<Format>) -> Vec<Arc<Mount>> {
        let mut found = Vec::new();
        let mut at = name.to_owned();
        for _ in 0..MAX_FALLBACK_HOPS {
            let Some(next) = self.fallback_of(&at) else {
                break;
            };
            if next == name {
                break;
            }
            if let Some(m) = self.get(&next) {
                if !m.feed.load().ended && format.is_none_or(|f| f == m.settings.format) {
                    found.push(m);
                }
            }
            at = next;
        }
        found
    }

    /// Where listeners of `mount` go when its feed ends: the first live fallback of the same
    /// format (Icecast moves clients only between mounts of one format); else, when the chain
    /// holds an idle on-demand relay, that relay is asked to start ([`Fallback::Starting`]).
    pub fn fallback_target(&self, mount: &Mount) -> Fallback {
        if let Some(m) = self
            .follow_fallbacks(&mount.name, Some(mount.settings.format))
            .filter(|m| m.id != mount.id)
        {
            return Fallback::Live(m);
        }
        if self.start_on_demand_fallback(&mount.name) {
            Fallback::Starting
        } else {
            Fallback::Nothing
        }
    }

    /// The mount names along the fallback chain after `name` (at most [`MAX_FALLBACK_HOPS`]),
    /// live or not.
    pub fn fallback_chain(&self, name: &str) -> Vec<String> {
        let mut chain = Vec::new();
        let mut at = name.to_owned();
        while chain.len() < MAX_FALLBACK_HOPS {
            match self.fallback_of(&at) {
                Some(next) if next != name && !chain.contains(&next) => {
                    chain.push(next.clone());
                    at = next;
                }
                _ => break,
            }
        }
        chain
    }

    /// Asks the first on-demand mount along the fallback chain of `name` to start, as Icecast
    /// 2.4.4 starts an on-demand relay that a listener is sent to; false if there is none.
    pub fn start_on_demand_fallback(&self, name: &str) -> bool {
        self.fallback_chain(name)
            .iter()
            .any(|n| self.get(n).is_none() && self.request_on_demand(n))
    }

    /// Registers `mount` unless its name is taken or `max_sources` client-fed mounts are live.
    ///
    /// Errors: [`ReserveError::InUse`] when a mount of that name is registered,
    /// [`ReserveError::TooManySources`] when `mount` is client-fed and `max_sources` client-fed
    /// mounts are registered.
    pub fn reserve(&self, mount: Arc<Mount>, max_sources: usize) -> Result<(), ReserveError> {
        let mut map = self.mounts.write();
        if map.contains_key(&mount.name) {
            return Err(ReserveError::InUse);
        }
        let clients = map
            .values()
            .filter(|m| m.settings.kind == SourceKind::Client)
            .count();
        if mount.settings.kind == SourceKind::Client && clients >= max_sources {
            return Err(ReserveError::TooManySources);
        }
        map.insert(mount.name.clone(), mount);
        Ok(())
    }

    /// Unregisters the mount `name` if it is still incarnation `id`.
    pub fn remove(&self, name: &str, id: u64) {
        let mut map = self.mounts.write();
        if map.get(name).is_some_and(|m| m.id == id) {
            map.remove(name);
        }
    }

    /// The live mount `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Mount>> {
        self.mounts.read().get(name).cloned()
    }

    /// All live mounts, sorted by name.
    pub fn list(&self) -> Vec<Arc<Mount>> {
        let mut v: Vec<Arc<Mount>> = self.mounts.read().values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }
}

/// Keeps a mount registered while its feeder runs: dropping it (normal end, error or panic)
/// unregisters the mount and lowers the `throng_sources` gauge, so a mount can never stay
/// "in use" after its feeder is gone.
#[derive(Debug)]
pub struct LiveMount {
    ctx: std::sync::Arc<crate::server::ServerCtx>,
    mount: Arc<Mount>,
    /// URL-auth `mount_add` sent; `mount_remove` when dropped (after the registry removal).
    _notice: Option<crate::auth::StreamNotice>,
}

impl LiveMount {
    /// Registers `mount` (see [`Registry::reserve`]) and raises the `throng_sources` gauge.
    ///
    /// Errors: [`ReserveError`] when the name is taken or too many sources are live.
    pub fn reserve(
        ctx: std::sync::Arc<crate::server::ServerCtx>,
        mount: Arc<Mount>,
        max_sources: usize,
    ) -> Result<LiveMount, ReserveError> {
        ctx.registry.reserve(mount.clone(), max_sources)?;
        ctx.metrics.sources.inc();
        if ctx
            .config
            .mount_for(&mount.name)
            .is_some_and(|m| m.fallback_override)
        {
            bring_back_listeners(ctx.clone(), mount.clone());
        }
        // Source clients and relays are streams to Icecast (`source_init`); looped files are not.
        let notice = (mount.settings.kind != SourceKind::File)
            .then(|| crate::auth::stream_started(&ctx, &mount.name))
            .flatten();
        Ok(LiveMount {
            ctx,
            mount,
            _notice: notice,
        })
    }
}

/// `fallback-override` (Icecast 2.4.4 `source.c:source_init`): once the returning source has
/// queued its first audio (waiting at most 2 s), every listener that asked for its mount and is
/// now on a fallback is moved back, at a frame boundary.
fn bring_back_listeners(ctx: std::sync::Arc<crate::server::ServerCtx>, mount: Arc<Mount>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    rt.spawn(async move {
        for _ in 0..40 {
            if mount.feed.load().head > 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let ring = mount.feed.load();
        if ring.ended || ring.head == 0 {
            return;
        }
        let n = ctx
            .fanout
            .move_listeners(
                crate::shard::MoveFilter {
                    from: None,
                    requested: Some(mount.name.clone()),
                },
                mount.clone(),
            )
            .await;
        if n > 0 {
            tracing::info!(mount = %mount.name, listeners = n, "fallback override: listeners back");
        }
    });
}

impl Drop for LiveMount {
    fn drop(&mut self) {
        self.ctx.registry.remove(&self.mount.name, self.mount.id);
        self.ctx.metrics.sources.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::FeedWriter;

    fn mount(name: &str, format: Format) -> (Arc<Mount>, FeedWriter) {
        let w = FeedWriter::new(1 << 20);
        let settings = MountSettings {
            format,
            content_type: "audio/mpeg".into(),
            info: SourceInfo::default(),
            hidden: false,
            max_listeners: None,
            burst_size: 0,
            source_user: String::new(),
            source_password: String::new(),
            source_ip: None,
            kind: SourceKind::Client,
            stream_headers: Vec::new(),
        };
        (Arc::new(Mount::new(name, settings, w.feed())), w)
    }

    fn registry(toml: &str) -> Registry {
        Registry::new(Arc::new(crate::config::Config::from_toml(toml).unwrap()))
    }

    #[test]
    fn fallback_chains_skip_dead_mounts_and_stop_at_loops() {
        let r = registry(
            "[[mount]]\nname = \"/a\"\nfallback-mount = \"/b\"\n\
             [[mount]]\nname = \"/b\"\nfallback-mount = \"/c\"\n\
             [[mount]]\nname = \"/c\"\nfallback-mount = \"/a\"\n",
        );
        assert!(r.resolve("/a").is_none(), "a loop of dead mounts ends");
        let (c, _wc) = mount("/c", Format::Mp3);
        r.reserve(c.clone(), 16).unwrap();
        assert_eq!(
            r.resolve("/a").unwrap().name,
            "/c",
            "/b is down, /c is live"
        );
        assert!(r.follow_fallbacks("/a", Some(Format::Ogg)).is_none());
        let (b, mut wb) = mount("/b", Format::Mp3);
        r.reserve(b.clone(), 16).unwrap();
        assert_eq!(r.resolve("/a").unwrap().name, "/b");
        // An ended feed is not live, even while still registered.
        wb.end();
        assert_eq!(r.resolve("/a").unwrap().name, "/c");
        assert!(
            matches!(r.fallback_target(&c), Fallback::Nothing),
            "/c → /a is down"
        );
        // Admin `fallbacks` overrides the configuration; "" clears it.
        r.set_fallback("/a", "/c");
        assert_eq!(r.fallback_of("/a").as_deref(), Some("/c"));
        r.set_fallback("/a", "");
        assert!(r.resolve("/a").is_none());
    }

    #[test]
    fn forced_listeners_pass_max_listeners() {
        let (m, _w) = mount("/m", Format::Mp3);
        let m = Arc::new(Mount::new(
            "/m",
            MountSettings {
                max_listeners: Some(1),
                ..m.settings.clone()
            },
            m.feed.clone(),
        ));
        assert!(m.try_add_listener());
        assert!(!m.try_add_listener());
        m.force_add_listener();
        assert_eq!(m.listeners.load(Ordering::Relaxed), 2);
        assert_eq!(m.listener_peak.load(Ordering::Relaxed), 2);
    }
}
