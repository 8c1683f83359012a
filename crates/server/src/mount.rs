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
use crate::ring::Feed;

/// Where a mount's bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A source client (`SOURCE` or `PUT`).
    Client,
    /// A file looped in real time (the demo).
    File,
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
        }
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

/// The live mounts, by name.
#[derive(Debug, Default)]
pub struct Registry {
    mounts: RwLock<HashMap<String, Arc<Mount>>>,
}

impl Registry {
    /// Registers `mount` unless its name is taken or `max_sources` client-fed mounts are live.
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
        Ok(LiveMount { ctx, mount })
    }
}

impl Drop for LiveMount {
    fn drop(&mut self) {
        self.ctx.registry.remove(&self.mount.name, self.mount.id);
        self.ctx.metrics.sources.dec();
    }
}
