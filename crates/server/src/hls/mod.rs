//! HLS output (issues 14 and 24): per mount name a [`Packager`] turning what a listener of that
//! name hears into packed-audio or fMP4 segments ([`container`]) and a sliding playlist
//! ([`packager`]), and the HLS
//! sessions, which count as listeners while they keep fetching ([`session`]). [`Hls::tick`] is
//! driven by one task (`hls_http.rs` starts it); the HTTP side (`hls_http.rs`) reads the
//! published windows and opens, touches and ends sessions here; the cache tier's request logs
//! keep sessions behind a cache alive ([`cache_log`]), for tokens Throng issued ([`token`]).

pub mod admission;
pub mod cache_log;
pub mod container;
pub mod packager;
pub mod session;
pub mod token;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Mutex, RwLock};

use crate::config::{Config, HlsSettings};
use crate::mount::registry::Registry;

pub use packager::{InitSection, Packager, Window};

pub use container::container;
pub use session::Sessions;

/// A packager with nothing to follow is dropped after this long (ms), unless it is a
/// configured mount name.
pub const IDLE_PACKAGER_MS: i64 = 10 * 60 * 1000;

/// What readers need of one mount name's HLS output.
#[derive(Debug, Clone)]
pub struct Output {
    /// The published segments and playlist.
    pub window: Arc<ArcSwap<Window>>,
    /// Its settings.
    pub settings: HlsSettings,
    /// Changes after every publication of `window` (held playlist requests wait on it).
    pub updates: tokio::sync::watch::Receiver<u64>,
}

/// Every mount name's HLS output and every HLS session.
#[derive(Debug, Default)]
pub struct Hls {
    packagers: Mutex<HashMap<String, Packager>>,
    outputs: RwLock<HashMap<String, Output>>,
    /// The HLS sessions (listeners).
    pub sessions: Sessions,
    /// The key of the MAC in the session tokens it issues (`token.rs`).
    pub tokens: token::TokenKeys,
}

impl Hls {
    /// The output for mount name `name`, if it is packaged.
    pub fn output(&self, name: &str) -> Option<Output> {
        self.outputs.read().get(name).cloned()
    }

    /// The window published for mount name `name`, if it is packaged (no clone of the
    /// [`Output`]: one reference count, for the per-request path).
    pub fn window(&self, name: &str) -> Option<Arc<Window>> {
        self.outputs.read().get(name).map(|o| o.window.load_full())
    }

    /// Whether mount name `name` offers blocking playlist reload (`[hls] blocking-reload`).
    pub fn blocking_reload(&self, name: &str) -> bool {
        self.outputs
            .read()
            .get(name)
            .is_some_and(|o| o.settings.blocking_reload)
    }

    /// How mount name `name` hands out media playlists (`[hls] playlists`), if it is packaged.
    pub fn playlists(&self, name: &str) -> Option<crate::config::PlaylistMode> {
        self.outputs.read().get(name).map(|o| o.settings.playlists)
    }

    /// Moves the HLS sessions `filter` takes to mount `to` (`moveclients`,
    /// `fallback-override`), each continuing with `to`'s segments after an
    /// `EXT-X-DISCONTINUITY` in a playlist of its own ([`session::MovedPlaylist`]); a session
    /// moved back to the mount name it asked for gets that name's shared playlist again.
    /// Sessions stay where they are when `to` is not packaged. How many moved.
    pub fn move_sessions(
        &self,
        filter: &crate::audience::follow::MoveFilter,
        to: &Arc<crate::mount::live::Mount>,
        metrics: &crate::observe::metrics::Metrics,
    ) -> usize {
        let outputs = self.outputs.read().clone();
        self.sessions
            .move_sessions(filter, to, metrics, |from, to| {
                let from_out = outputs.get(from)?;
                let to_out = outputs.get(to)?;
                Some(session::MovedPlaylist::start(
                    from,
                    &from_out.window.load(),
                    to,
                    &to_out.window.load(),
                    from_out.settings.window,
                ))
            })
    }

    /// The playlist of session `token` if it was moved to another mount name's segments
    /// (`None`: no such session, or not moved); the session is touched.
    pub fn moved_playlist(&self, token: &str, now: std::time::Instant) -> Option<String> {
        self.sessions
            .moved_playlist(token, |name| self.window(name), now)
    }

    /// Initialization section `id` of mount name `name` (fMP4), if a segment in memory uses it.
    pub fn init(&self, name: &str, id: u64) -> Option<Arc<InitSection>> {
        self.outputs
            .read()
            .get(name)
            .and_then(|o| o.window.load().init(id).cloned())
    }

    /// Segment `seq` of mount name `name`, if packaged and still in memory.
    pub fn segment(&self, name: &str, seq: u64) -> Option<Arc<packager::Segment>> {
        self.outputs
            .read()
            .get(name)
            .and_then(|o| o.window.load().segment(seq).cloned())
    }

    /// Packages what each mount produced since the last call: starts a packager for every live
    /// mount HLS carries ([`container`]) and every configured (non-glob) mount name with HLS on, feeds each with the
    /// mount a listener of its name hears now (`Registry::resolve`), and drops packagers whose
    /// HLS was turned off, or which had nothing to follow for [`IDLE_PACKAGER_MS`]. `now_ms`:
    /// wall clock, ms since the Unix epoch.
    pub fn tick(&self, registry: &Registry, config: &Config, now_ms: i64) {
        let mut packagers = self.packagers.lock();
        let mut changed = false;
        let live = registry.list();
        let configured = config
            .mount
            .iter()
            .map(|m| m.name.as_str())
            .filter(|n| !n.contains(['*', '?', '[']));
        let names: Vec<String> = live
            .iter()
            .filter(|m| container(m.settings.format, Default::default()).is_some())
            .map(|m| m.name.clone())
            .chain(configured.map(str::to_owned))
            .collect();
        for name in names {
            if packagers.contains_key(&name) {
                continue;
            }
            if let Some(settings) = config.hls_for(&name) {
                let first_seq = u64::try_from(now_ms / 1000).unwrap_or(0);
                packagers.insert(
                    name.clone(),
                    Packager::new(&name, settings, first_seq, now_ms),
                );
                changed = true;
            }
        }
        packagers.retain(|name, p| {
            let keep = match config.hls_for(name) {
                None => false,
                Some(s) => {
                    p.retune(s);
                    now_ms - p.last_live_ms < IDLE_PACKAGER_MS
                        || config.mount.iter().any(|m| &m.name == name)
                }
            };
            changed |= !keep;
            keep
        });
        for p in packagers.values_mut() {
            p.tick(registry.resolve(&p.name), now_ms);
        }
        if changed {
            *self.outputs.write() = packagers
                .iter()
                .map(|(n, p)| {
                    let out = Output {
                        window: p.window(),
                        settings: p.settings(),
                        updates: p.updates(),
                    };
                    (n.clone(), out)
                })
                .collect();
        } else {
            let mut outputs = self.outputs.write();
            for (n, p) in packagers.iter() {
                if let Some(o) = outputs.get_mut(n) {
                    o.settings = p.settings();
                }
            }
        }
    }
}
