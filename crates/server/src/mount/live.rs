//! A live mount: its fixed settings, the settings a reload may change ([`Tuning`]), its queue,
//! ICY metadata and counters. A [`Mount`] does not know where its bytes come from (a source
//! client, a relay, a file): the feeder owns the chunker; listeners see only the [`Queue`]
//! snapshots and the ICY block.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use throng_proto::format::Format;
use throng_proto::framer::StreamParams;
use throng_proto::icy::metadata_block;
use throng_proto::source_info::SourceInfo;

use crate::ledger::{Play, TitleSetter};
use crate::mount::freeze::HandoverSlot;
use crate::mount::icy_meta::IcyMeta;
use crate::mount::ogg_tags::OggTagSlot;
use crate::mount::queue::{Queue, QueueWriter};
use crate::mount::title_history::TitleHistory;
use crate::observe::metrics::{Metrics, MountLabel};

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
    /// Stream description as the origin announced it, before the `[[mount]]` overrides
    /// (those are applied by [`Mount::retune`]: see [`Mount::description`]).
    pub info: SourceInfo,
    /// Hidden whatever the configuration says (webroot fallback files).
    pub force_hidden: bool,
    /// Source user and password accepted for this mount's metadata updates.
    pub source_user: String,
    /// See `source_user`.
    pub source_password: String,
    /// Address of the source client, if any.
    pub source_ip: Option<IpAddr>,
    /// What feeds the mount.
    pub kind: SourceKind,
}

/// The stream description in force: the origin's announcement with the `[[mount]]` overrides
/// of the configuration in force, re-applied at each reload as Icecast 2.4.4
/// `source_update_settings` re-applies a mount's settings to its running source
/// (`source_apply_mount`: `<stream-name>`, `<stream-description>`, `<stream-url>`, `<genre>`,
/// `<bitrate>`, `<public>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Description {
    /// The description (what status documents, YP and the page show).
    pub info: SourceInfo,
    /// `icy-*` headers sent to listeners joining from now on, from [`stream_headers`].
    pub stream_headers: Vec<(String, String)>,
}

impl Description {
    /// `announced` with the overrides of `m` (its `[[mount]]` entry, if any).
    pub fn of(announced: &SourceInfo, m: Option<&crate::config::MountConfig>) -> Description {
        let mut info = announced.clone();
        apply_overrides(&mut info, m);
        Description {
            stream_headers: stream_headers(&info),
            info,
        }
    }
}

/// Applies `[[mount]]` overrides to what the origin announced.
fn apply_overrides(info: &mut SourceInfo, m: Option<&crate::config::MountConfig>) {
    let Some(m) = m else { return };
    if let Some(v) = &m.stream_name {
        info.name = v.clone();
    }
    if let Some(v) = &m.stream_description {
        info.description = v.clone();
    }
    if let Some(v) = &m.stream_url {
        info.url = Some(v.clone());
    }
    if let Some(v) = &m.genre {
        info.genre = v.clone();
    }
    if let Some(v) = &m.bitrate {
        info.bitrate = Some(v.clone());
    }
    if let Some(v) = m.public {
        info.public = v;
    }
}

/// The settings of a live mount that follow the configuration: set from its `[[mount]]` entry
/// and `[limits]` when the mount starts, and again at each reload ([`Mount::retune`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tuning {
    /// Left out of public status pages.
    pub hidden: bool,
    /// Most listeners, if limited (new listeners only: those above a lowered limit stay).
    pub max_listeners: Option<u32>,
    /// Burst-on-connect size in bytes, for listeners joining from now on (at most what the
    /// queue retains).
    pub burst_size: u64,
}

impl Tuning {
    /// The tuning of mount `name` under `config`; hidden anyway when `force_hidden`.
    pub fn of(config: &crate::config::Config, name: &str, force_hidden: bool) -> Tuning {
        let cfg = config.mount_for(name);
        Tuning {
            hidden: force_hidden || cfg.is_some_and(|m| m.hidden),
            max_listeners: cfg.and_then(|m| m.max_listeners),
            burst_size: config.burst_and_queue(name).0 as u64,
        }
    }
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
pub struct Announcement {
    /// Framing of the stream.
    pub format: Format,
    /// Content-Type sent to listeners.
    pub content_type: String,
    /// Stream description as announced (the `[[mount]]` overrides are applied by
    /// [`Mount::configured`]).
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
    /// Settings that follow the configuration (see [`Mount::tuning`]).
    tuning: ArcSwap<Tuning>,
    /// The stream description in force (see [`Mount::description`]).
    described: ArcSwap<Description>,
    /// The queue listeners read.
    pub queue: Arc<Queue>,
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
    pub ogg_tags: OggTagSlot,
    /// Where a binary upgrade asks the feeding task to hand its feed over (`handover.rs`).
    pub handover: HandoverSlot,
    /// The audience ledger its title changes go to (set when the mount is registered).
    pub ledger: std::sync::OnceLock<crate::ledger::Ledger>,
    /// The last titles played, with their times and cover art (`title_history.rs`).
    pub history: TitleHistory,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Mount {
    /// A new mount reading `queue`.
    pub fn new(name: &str, settings: MountSettings, queue: Arc<Queue>) -> Mount {
        let described = ArcSwap::from_pointee(Description::of(&settings.info, None));
        Mount {
            name: name.to_owned(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            settings,
            tuning: ArcSwap::from_pointee(Tuning::default()),
            described,
            queue,
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
            handover: Default::default(),
            ledger: Default::default(),
            history: Default::default(),
        }
    }

    /// A new mount `name` fed by `origin`, with its `[[mount]]` settings (hidden,
    /// max-listeners) and its queue sized by [`crate::config::Config::burst_and_queue`]
    /// (retaining `max(queue-size, burst-size)` bytes); returns it and the writer of its queue.
    pub fn configured(
        config: &crate::config::Config,
        name: &str,
        origin: Announcement,
    ) -> (Arc<Mount>, QueueWriter) {
        let (burst, queue) = config.burst_and_queue(name);
        let writer = QueueWriter::new(queue.max(burst) as u64);
        let settings = MountSettings {
            format: origin.format,
            content_type: origin.content_type,
            info: origin.info,
            force_hidden: origin.force_hidden,
            source_user: origin.credentials.0,
            source_password: origin.credentials.1,
            source_ip: origin.source_ip,
            kind: origin.kind,
        };
        let mount = Mount::new(name, settings, writer.queue());
        mount.retune(config);
        (Arc::new(mount), writer)
    }

    /// The settings that follow the configuration, as in force now.
    pub fn tuning(&self) -> Arc<Tuning> {
        self.tuning.load_full()
    }

    /// Re-reads the [`Tuning`] and the [`Description`] from `config` (mount start, reload,
    /// a binary upgrade's new process); returns whether either changed.
    pub fn retune(&self, config: &crate::config::Config) -> bool {
        let tuned = self.set_tuning(Tuning::of(config, &self.name, self.settings.force_hidden));
        let description = Description::of(&self.settings.info, config.mount_for(&self.name));
        let described = **self.described.load() != description;
        if described {
            self.described.store(Arc::new(description));
        }
        tuned || described
    }

    /// The stream description in force: the announcement with the `[[mount]]` overrides of
    /// the configuration last applied.
    pub fn description(&self) -> Arc<Description> {
        self.described.load_full()
    }

    /// Sets the [`Tuning`]; returns whether it changed.
    pub fn set_tuning(&self, tuning: Tuning) -> bool {
        let changed = *self.tuning.load_full() != tuning;
        self.tuning.store(Arc::new(tuning));
        changed
    }

    /// Left out of public status pages.
    pub fn hidden(&self) -> bool {
        self.tuning.load().hidden
    }

    /// Most listeners, if limited.
    pub fn max_listeners(&self) -> Option<u32> {
        self.tuning.load().max_listeners
    }

    /// Burst-on-connect size in bytes for a listener joining now.
    pub fn burst_size(&self) -> u64 {
        self.tuning.load().burst_size
    }

    /// Sets the stream title (and optional URL) sent in ICY metadata and shown in status;
    /// control characters are removed first ([`throng_proto::icy::clean_title`]). A title that
    /// differs from the current one goes into the play log of the audience ledger, with `by`
    /// and the mount's listeners at that moment.
    pub fn set_title(&self, title: &str, url: Option<&str>, by: TitleSetter) {
        self.set_song(None, title, url, by);
    }

    /// [`Mount::set_title`] for a source that names the artist apart (Ogg `ARTIST` and
    /// `TITLE` comments): the mount's title is `title`; the play log records
    /// `artist - title`.
    pub fn set_song(&self, artist: Option<&str>, title: &str, url: Option<&str>, by: TitleSetter) {
        // Whatever sent it (admin update, inline ICY, Ogg comment), no control character
        // reaches the status pages or the ICY block.
        let title = throng_proto::icy::clean_title(title);
        let changed = {
            let mut t = self.title.lock();
            let changed = *t != title;
            *t = title.clone().into_owned();
            changed
        };
        self.history
            .push(chrono::Local::now().timestamp(), &title, url);
        let generation = self.icy.load().generation + 1;
        self.icy.store(Arc::new(IcyMeta {
            generation,
            block: metadata_block(&title, url),
        }));
        if let (true, Some(ledger)) = (changed && !title.is_empty(), self.ledger.get()) {
            let full = match artist.map(throng_proto::icy::clean_title) {
                Some(a) if !a.is_empty() => format!("{a} - {title}"),
                _ => title.into_owned(),
            };
            ledger.play(Play {
                mount: self.name.clone(),
                at_ms: crate::ledger::now_ms(),
                title: full,
                set_by: by,
                listeners: u64::from(self.listeners.load(Ordering::Relaxed)),
            });
        }
    }

    /// Sets the title and the exact ICY block with its generation (a mount rebuilt after a
    /// binary upgrade: listeners that already got this block do not get it again).
    pub fn restore_title(&self, title: &str, icy: IcyMeta) {
        *self.title.lock() = title.to_owned();
        self.icy.store(Arc::new(icy));
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

    /// Whether a listener slot is free now (below max-listeners), taking none: an HLS
    /// playlist request is refused on a full mount, but its session takes a slot only at its
    /// first segment.
    pub fn has_room(&self) -> bool {
        self.listeners.load(Ordering::Acquire) < self.max_listeners().unwrap_or(u32::MAX)
    }

    /// Takes a listener slot, failing when max-listeners is reached.
    pub fn try_add_listener(&self) -> bool {
        let max = self.max_listeners().unwrap_or(u32::MAX);
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

    /// Moves one listener (ICY, HLS session or WHEP viewer) from this mount to `to`, as a
    /// fallback switch or an admin move does: its slot here is released, `to` takes one even
    /// past max-listeners ([`Mount::force_add_listener`]), and the `throng_listeners` gauges of
    /// both mounts follow.
    pub fn move_listener_to(&self, to: &Mount, metrics: &Metrics) {
        self.remove_listener();
        metrics
            .listeners
            .get_or_create(&MountLabel::new(&self.name))
            .dec();
        to.force_add_listener();
        metrics
            .listeners
            .get_or_create(&MountLabel::new(&to.name))
            .inc();
    }

    /// The listener URL, `http://host:port/mount`, as Icecast's `listenurl`.
    pub fn listen_url(&self, host: &str, port: u16) -> String {
        format!("http://{host}:{port}{}", self.name)
    }
}

/// Test support shared by the mount folder's unit tests.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use crate::mount::queue::QueueWriter;

    /// A client-fed mount `name` of `format` with default settings, and its queue's writer.
    pub(crate) fn test_mount(name: &str, format: Format) -> (Arc<Mount>, QueueWriter) {
        let w = QueueWriter::new(1 << 20);
        let settings = MountSettings {
            format,
            content_type: "audio/mpeg".into(),
            info: SourceInfo::default(),
            force_hidden: false,
            source_user: String::new(),
            source_password: String::new(),
            source_ip: None,
            kind: SourceKind::Client,
        };
        (Arc::new(Mount::new(name, settings, w.queue())), w)
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::test_mount as mount;
    use super::*;

    #[test]
    fn forced_listeners_pass_max_listeners() {
        let (m, _w) = mount("/m", Format::Mp3);
        m.set_tuning(Tuning {
            max_listeners: Some(1),
            ..Tuning::default()
        });
        assert!(m.try_add_listener());
        assert!(!m.try_add_listener());
        m.force_add_listener();
        assert_eq!(m.listeners.load(Ordering::Relaxed), 2);
        assert_eq!(m.listener_peak.load(Ordering::Relaxed), 2);
    }
}
