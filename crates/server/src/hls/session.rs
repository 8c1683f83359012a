//! HLS sessions: a player holding a session token in its playlist URL is a listener while it
//! keeps fetching the playlist, within about two target durations ([`Sessions::expire`] closes
//! it after `2 × target + 1 s` without a request). A session takes a listener slot of its mount
//! (max-listeners, status counts), shows in `listclients` and the `throng_listeners` gauge, and
//! is logged once when it ends, with its duration and bytes, as an ICY listener is. Its bytes
//! are the playlists it was sent plus every segment its playlists offered it for the first time
//! (what the player fetches, from Throng or from a cache in front).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::audience::page::{take_page, Page};
use crate::audience::{AudiencePath, EndReason, ListenerInfo, ListenerRow};
use throng_proto::hls::playlist::{MediaPlaylist, PlaylistSegment};

use crate::audience::follow::{self, MoveFilter};
use crate::hls::packager::Window;
use crate::mount::live::Mount;
use crate::mount::registry::Registry;
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::{Metrics, MountLabel};

/// One HLS session.
#[derive(Debug)]
pub struct Session {
    /// Request facts, as for an ICY listener (id, address, agent, user, URL-auth hook).
    pub info: ListenerInfo,
    /// The mount whose listener slot it holds.
    pub mount: Arc<Mount>,
    /// Last playlist request.
    pub last_seen: Instant,
    /// Bytes sent or offered (see the module comment).
    pub bytes: u64,
    /// Highest segment sequence number offered so far.
    pub offered: Option<u64>,
    /// It ends after this long without a request.
    pub timeout: Duration,
    /// Set when the session was moved to another mount name's segments (`moveclients`): its
    /// own playlist from then on.
    pub moved: Option<Box<MovedPlaylist>>,
}

/// One line of a moved session's own playlist.
#[derive(Debug, Clone)]
struct MovedEntry {
    /// The session's own media sequence number.
    seq: u64,
    /// Absolute path of the segment (`/hls/<mount>/<seq>.<ext>`): segments stay shared and
    /// cacheable, only the playlist is the session's.
    uri: String,
    /// Absolute path of its fMP4 initialization section (`EXT-X-MAP`), if any.
    map_uri: Option<String>,
    duration_secs: f64,
    discontinuity: bool,
    pdt_ms: i64,
}

/// The absolute path of segment `seq` (`ext`: `mp3`, `aac`, `m4s`; `mp4`: initialization
/// section `seq`) of mount name `name`.
fn segment_uri(name: &str, seq: u64, ext: &str) -> String {
    format!("/hls/{}/{seq}.{ext}", name.trim_start_matches('/'))
}

/// The media playlist of a session moved from the mount name it asked for to another one
/// (`moveclients`): the segments it was last offered, then an `EXT-X-DISCONTINUITY`, then the
/// new mount name's segments, numbered on from the old ones, so the player's media sequence
/// never jumps (RFC 8216 section 6.2.2: a segment's sequence number never changes) and it
/// decodes the new stream from the discontinuity on.
#[derive(Debug, Clone)]
pub struct MovedPlaylist {
    /// The mount name whose packager supplies the segments now.
    pub serving: String,
    entries: VecDeque<MovedEntry>,
    /// The session's next media sequence number.
    next_seq: u64,
    /// The newest segment of `serving` listed already (its own numbering).
    last_source_seq: Option<u64>,
    /// Discontinuities that slid out of the listed window, and the one before the first.
    discontinuity_sequence: u64,
    /// Segments listed (`[hls] window`).
    window: usize,
    /// The next segment of `serving` starts a discontinuity.
    discontinuity_pending: bool,
}

impl MovedPlaylist {
    /// A session moved from `from` (its current window, served under the mount name
    /// `from_name`) to mount name `to`, whose window is `to_window`; `window` segments listed.
    /// The playlist keeps `from`'s listed segments and continues with `to`'s newest one.
    pub fn start(
        from_name: &str,
        from: &Window,
        to: &str,
        to_window: &Window,
        window: usize,
    ) -> MovedPlaylist {
        let listed = from.segments.len().min(window.max(1));
        let entries: VecDeque<MovedEntry> = from.segments[from.segments.len() - listed..]
            .iter()
            .map(|s| MovedEntry {
                seq: s.seq,
                uri: segment_uri(from_name, s.seq, s.ext),
                map_uri: s.map.as_ref().map(|m| segment_uri(from_name, m.id, "mp4")),
                duration_secs: s.duration_ns as f64 / 1e9,
                discontinuity: s.discontinuity,
                pdt_ms: s.pdt_ms,
            })
            .collect();
        let next_seq = entries.back().map_or(0, |e| e.seq + 1);
        MovedPlaylist {
            serving: to.to_owned(),
            entries,
            next_seq,
            // From `to`'s newest segment on: the player has its next audio soonest.
            last_source_seq: to_window.segments.last().and_then(|s| s.seq.checked_sub(1)),
            discontinuity_sequence: from.discontinuity_sequence,
            window: window.max(1),
            discontinuity_pending: true,
        }
    }

    /// Lists the segments of `serving` cut since the last call (`source` is its window now)
    /// and returns the playlist text and the bytes of the segments newly offered.
    pub fn render(&mut self, source: &Window) -> (String, u64) {
        let mut offered = 0;
        for s in &source.segments {
            if self.last_source_seq.is_some_and(|l| s.seq <= l) {
                continue;
            }
            self.last_source_seq = Some(s.seq);
            offered += s.data.len() as u64;
            self.entries.push_back(MovedEntry {
                seq: self.next_seq,
                uri: segment_uri(&self.serving, s.seq, s.ext),
                map_uri: s
                    .map
                    .as_ref()
                    .map(|m| segment_uri(&self.serving, m.id, "mp4")),
                duration_secs: s.duration_ns as f64 / 1e9,
                discontinuity: std::mem::take(&mut self.discontinuity_pending) || s.discontinuity,
                pdt_ms: s.pdt_ms,
            });
            self.next_seq += 1;
        }
        while self.entries.len() > self.window {
            if self.entries.pop_front().is_some_and(|e| e.discontinuity) {
                self.discontinuity_sequence += 1;
            }
        }
        let target = throng_proto::hls::cutter::target_duration_secs(
            (source.target_secs.max(1)) * 1000,
            self.entries.iter().map(|e| (e.duration_secs * 1e9) as u64),
        );
        let playlist = MediaPlaylist {
            target_duration: target,
            media_sequence: self.entries.front().map_or(self.next_seq, |e| e.seq),
            discontinuity_sequence: self.discontinuity_sequence,
            segments: self
                .entries
                .iter()
                .map(|e| PlaylistSegment {
                    uri: e.uri.clone(),
                    duration_secs: e.duration_secs,
                    discontinuity: e.discontinuity,
                    program_date_time_ms: Some(e.pdt_ms),
                    map_uri: e.map_uri.clone(),
                    parts: Vec::new(),
                })
                .collect(),
            ended: false,
            can_block_reload: false,
            low_latency: None,
        };
        (playlist.render(), offered)
    }
}

/// The session table, by token.
#[derive(Debug, Default)]
pub struct Sessions {
    by_token: Mutex<HashMap<String, Session>>,
}

/// The timeout of a session of segments of `target_secs`: two target durations and a second.
pub fn timeout_for(target_secs: u64) -> Duration {
    Duration::from_secs(2 * target_secs.max(1) + 1)
}

impl Sessions {
    /// Sessions open now.
    pub fn len(&self) -> usize {
        self.by_token.lock().len()
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `token` names an open session.
    pub fn contains(&self, token: &str) -> bool {
        self.by_token.lock().contains_key(token)
    }

    /// Opens session `token` holding a listener slot of `mount` (already taken by the caller),
    /// counted in the metrics from now on.
    pub fn open(&self, token: String, session: Session, metrics: &Metrics) {
        let label = MountLabel::new(&session.mount.name);
        metrics.connects.get_or_create(&label).inc();
        metrics.listeners.get_or_create(&label).inc();
        tracing::debug!(id = session.info.id, mount = %session.mount.name, "HLS session opened");
        if let Some(old) = self.by_token.lock().insert(token, session) {
            // Same token twice (a client reusing an expired token raced itself): the older goes.
            old.mount.remove_listener();
            metrics
                .listeners
                .get_or_create(&MountLabel::new(&old.mount.name))
                .dec();
        }
    }

    /// Records a playlist request of session `token` answered with `window` (`sent` bytes);
    /// false when there is no such session.
    pub fn touch(&self, token: &str, window: &Window, sent: u64, now: Instant) -> bool {
        let mut map = self.by_token.lock();
        let Some(s) = map.get_mut(token) else {
            return false;
        };
        s.last_seen = now;
        s.bytes += sent;
        s.timeout = timeout_for(window.target_secs);
        for seg in &window.segments {
            if s.offered.is_none_or(|o| seg.seq > o) {
                s.bytes += seg.data.len() as u64;
                s.offered = Some(seg.seq);
            }
        }
        true
    }

    /// Records a sign of life of session `token` at `now` (a segment it fetched); false when
    /// there is no such session.
    pub fn seen(&self, token: &str, now: Instant) -> bool {
        match self.by_token.lock().get_mut(token) {
            Some(s) => {
                s.last_seen = now;
                true
            }
            None => false,
        }
    }

    /// Moves the sessions `filter` takes to mount `to` (`moveclients`, `fallback-override`):
    /// each holds `to`'s listener slot from now on; a session whose own mount name is `to`
    /// is served by its own playlist again, any other gets a [`MovedPlaylist`] made by
    /// `moved_playlist(requested mount name, to)` (`None`: HLS is not packaged for `to`, so
    /// the session stays). How many moved.
    pub fn move_sessions(
        &self,
        filter: &MoveFilter,
        to: &Arc<Mount>,
        metrics: &Metrics,
        moved_playlist: impl Fn(&str, &str) -> Option<MovedPlaylist>,
    ) -> usize {
        let mut n = 0;
        for s in self.by_token.lock().values_mut() {
            if !follow::may_move(
                s.mount.id,
                s.mount.settings.format,
                to.id,
                to.settings.format,
            ) || !filter.takes(&s.mount.name, &s.info.requested_mount)
            {
                continue;
            }
            if to.name == s.info.requested_mount {
                s.moved = None;
            } else {
                // Already moved: it continues from the mount name it was served.
                let from = s
                    .moved
                    .as_ref()
                    .map_or(s.info.requested_mount.clone(), |m| m.serving.clone());
                match moved_playlist(&from, &to.name) {
                    Some(mut p) => {
                        if let Some(old) = &s.moved {
                            // Keep the numbering the player has seen.
                            p.entries = old.entries.clone();
                            p.next_seq = old.next_seq;
                            p.discontinuity_sequence = old.discontinuity_sequence;
                        }
                        s.moved = Some(Box::new(p));
                    }
                    None => continue,
                }
            }
            s.mount.move_listener_to(to, metrics);
            s.mount = to.clone();
            n += 1;
        }
        n
    }

    /// For session `token`, if it was moved: the mount name it is served from now, and its
    /// playlist rendered with `window_of(that name)` (its bytes and the new segments offered
    /// count in the session); the session is touched at `now`. `None`: no such session, or not
    /// moved (it gets the shared playlist of the name it asked for).
    pub fn moved_playlist(
        &self,
        token: &str,
        window_of: impl Fn(&str) -> Option<Arc<Window>>,
        now: Instant,
    ) -> Option<String> {
        let mut map = self.by_token.lock();
        let s = map.get_mut(token)?;
        let moved = s.moved.as_mut()?;
        let source = window_of(&moved.serving)?;
        let (text, offered) = moved.render(&source);
        s.last_seen = now;
        s.timeout = timeout_for(source.target_secs);
        s.bytes += offered + text.len() as u64;
        Some(text)
    }

    /// The sessions on mount `name` (all when `None`) as listener rows.
    pub fn rows(&self, name: Option<&str>, now: Instant) -> Vec<ListenerRow> {
        self.rows_page(name, now, Page::FIRST)
    }

    /// As [`Self::rows`], on `page` only (`audience/page.rs`): at most a page of rows is made.
    pub fn rows_page(&self, name: Option<&str>, now: Instant, page: Page) -> Vec<ListenerRow> {
        let map = self.by_token.lock();
        let rows = map
            .values()
            .filter(|s| s.info.id > page.after && name.is_none_or(|n| s.mount.name == n))
            .map(|s| s.info.row(&s.mount.name, now, 0, s.bytes));
        take_page(rows, page)
    }

    /// Ends session `id` (admin `killclient`); whether there was one.
    pub fn kill(&self, id: u64, metrics: &Metrics, log: &AccessLog) -> bool {
        let found = {
            let mut map = self.by_token.lock();
            let token = map
                .iter()
                .find(|(_, s)| s.info.id == id)
                .map(|(t, _)| t.clone());
            token.and_then(|t| map.remove(&t))
        };
        match found {
            Some(s) => {
                close(s, EndReason::Killed, metrics, log, Instant::now());
                true
            }
            None => false,
        }
    }

    /// Ends every session idle past its timeout or past its deadline, and moves sessions whose
    /// mount ended to the mount their listeners hear now (as fan-out moves ICY listeners to a
    /// fallback).
    pub fn expire(&self, now: Instant, registry: &Registry, metrics: &Metrics, log: &AccessLog) {
        let mut ended = Vec::new();
        {
            let mut map = self.by_token.lock();
            let gone: Vec<(String, EndReason)> = map
                .iter()
                .filter_map(|(t, s)| {
                    if now.duration_since(s.last_seen) > s.timeout {
                        Some((t.clone(), EndReason::Vanished))
                    } else if s.info.deadline.is_some_and(|d| now >= d) {
                        Some((t.clone(), EndReason::TimeLimit))
                    } else {
                        None
                    }
                })
                .collect();
            for (t, why) in gone {
                if let Some(s) = map.remove(&t) {
                    ended.push((s, why));
                }
            }
            // Whether each mount ended, read once per sweep (sessions share a few mounts).
            let mut mount_ended = std::collections::HashMap::new();
            for s in map.values_mut() {
                let ended = *mount_ended
                    .entry(s.mount.id)
                    .or_insert_with(|| s.mount.queue.load().ended);
                if !ended {
                    continue;
                }
                let name = s
                    .moved
                    .as_ref()
                    .map_or(s.info.requested_mount.as_str(), |m| m.serving.as_str());
                if let Some(next) = registry.resolve(name).filter(|m| m.id != s.mount.id) {
                    s.mount.move_listener_to(&next, metrics);
                    s.mount = next;
                }
            }
        }
        // Closed outside the lock: a URL-auth hook may take time.
        for (s, why) in ended {
            close(s, why, metrics, log, now);
        }
    }
}

impl Sessions {
    /// Ends every session (the server shuts down): each is logged as when it stops fetching.
    pub fn close_all(&self, metrics: &Metrics, log: &AccessLog) {
        let all: Vec<Session> = self.by_token.lock().drain().map(|(_, s)| s).collect();
        let now = Instant::now();
        for s in all {
            close(s, EndReason::Shutdown, metrics, log, now);
        }
    }
}

/// Ends session `s`: releases its listener slot, updates the metrics, writes the access-log
/// line (its request line, 200, bytes, duration) and runs its URL-auth hook.
fn close(mut s: Session, why: EndReason, metrics: &Metrics, log: &AccessLog, now: Instant) {
    s.mount.remove_listener();
    let label = MountLabel::new(&s.mount.name);
    metrics.listeners.get_or_create(&label).dec();
    metrics.disconnects.get_or_create(&label).inc();
    metrics.count_end(AudiencePath::Hls.as_str(), why.key());
    // A player that stopped fetching listened until its last request.
    let ended = if why == EndReason::Vanished {
        s.last_seen
    } else {
        now
    };
    tracing::debug!(id = s.info.id, mount = %s.mount.name, why = why.key(), "HLS session ended");
    s.info.log_end(log, &s.mount.name, 200, s.bytes, ended, why);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    use bytes::Bytes;
    use throng_proto::format::Format;

    use crate::audience::{CloseHook, ClosedListener};
    use crate::hls::packager::Segment;
    use crate::mount::live::test_support::test_mount;
    use crate::observe::metrics::EndLabel;

    /// What a session's close hook saw: why, bytes, the mount it ended on, seconds.
    type Ends = Arc<Mutex<Vec<(EndReason, u64, String, u64)>>>;

    struct Fixture {
        sessions: Sessions,
        metrics: Metrics,
        log: AccessLog,
        log_path: std::path::PathBuf,
        _dir: tempfile::TempDir,
        ends: Ends,
        /// The time every session starts.
        t0: Instant,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let log_path = dir.path().join("access.log");
            Fixture {
                sessions: Sessions::default(),
                metrics: Metrics::new(),
                log: AccessLog::open(log_path.to_str().unwrap()).unwrap(),
                log_path,
                _dir: dir,
                ends: Ends::default(),
                t0: Instant::now(),
            }
        }

        /// Opens session `token` (listener `id`) on `mount`, taking its slot as the caller
        /// does, with an optional deadline `limit` after the start.
        fn open(&self, token: &str, id: u64, mount: &Arc<Mount>, limit: Option<Duration>) {
            assert!(mount.try_add_listener());
            let ends = self.ends.clone();
            let info = ListenerInfo {
                id,
                path: AudiencePath::Hls,
                ip: "192.0.2.7".parse().unwrap(),
                request_line: format!("GET {}.m3u8 HTTP/1.1", mount.name),
                agent: Some("player/1".into()),
                referer: None,
                started: self.t0,
                requested_mount: mount.name.clone(),
                user: None,
                deadline: limit.map(|l| self.t0 + l),
                on_close: Some(CloseHook(Box::new(move |c: &ClosedListener| {
                    ends.lock()
                        .push((c.why, c.sent, c.mount.to_owned(), c.duration_secs));
                }))),
                ledger: None,
            };
            let session = Session {
                info,
                mount: mount.clone(),
                last_seen: self.t0,
                bytes: 0,
                offered: None,
                timeout: timeout_for(2),
                moved: None,
            };
            self.sessions.open(token.to_owned(), session, &self.metrics);
        }

        fn ends(&self) -> Vec<(EndReason, u64, String, u64)> {
            self.ends.lock().clone()
        }

        fn listeners_gauge(&self, mount: &str) -> i64 {
            self.metrics
                .listeners
                .get_or_create(&MountLabel::new(mount))
                .get()
        }

        fn ended(&self, why: EndReason) -> u64 {
            self.metrics
                .session_ends
                .get_or_create(&EndLabel {
                    path: "hls",
                    reason: why.key(),
                })
                .get()
        }

        fn log_text(&self) -> String {
            self.log.flush(Duration::from_secs(5));
            std::fs::read_to_string(&self.log_path).unwrap_or_default()
        }
    }

    fn segment(seq: u64, len: usize) -> Arc<Segment> {
        Arc::new(Segment {
            seq,
            ext: "mp3",
            data: Bytes::from(vec![0u8; len]),
            duration_ns: 2_000_000_000,
            discontinuity: false,
            pdt_ms: 0,
            map: None,
            parts: Vec::new(),
            fetches: AtomicU64::new(0),
        })
    }

    /// A window offering segments `(seq, bytes)` with target `target_secs`.
    fn window(segs: &[(u64, usize)], target_secs: u64) -> Window {
        Window {
            segments: segs.iter().map(|&(s, l)| segment(s, l)).collect(),
            playlist: Bytes::from_static(b"#EXTM3U\n"),
            target_secs,
            bandwidth: 64_000,
            discontinuity_sequence: 0,
            ..Window::default()
        }
    }

    #[test]
    fn a_moved_session_numbers_on_and_marks_the_switch() {
        let from = Window {
            discontinuity_sequence: 2,
            ..window(&[(10, 100), (11, 100), (12, 100), (13, 100)], 2)
        };
        let to = window(&[(500, 70), (501, 70)], 2);
        let mut p = MovedPlaylist::start("/a.mp3", &from, "/b.mp3", &to, 3);
        let (text, offered) = p.render(&to);
        // /a.mp3's listed 11..=13, then /b.mp3's newest as 14; three listed.
        assert_eq!(offered, 70);
        let parsed = throng_proto::hls::playlist::parse(&text).unwrap();
        let listed: Vec<(u64, &str)> = parsed
            .segments
            .iter()
            .map(|(n, u, _)| (*n, u.as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                (12, "/hls/a.mp3/12.mp3"),
                (13, "/hls/a.mp3/13.mp3"),
                (14, "/hls/b.mp3/501.mp3")
            ]
        );
        assert!(
            text.contains("#EXT-X-DISCONTINUITY\n#EXT-X-PROGRAM-DATE-TIME:1970-01-01T00:00:00.000Z\n#EXTINF:2.000,\n/hls/b.mp3/501.mp3"),
            "{text}"
        );
        assert!(text.contains("#EXT-X-DISCONTINUITY-SEQUENCE:2\n"), "{text}");
        // Nothing new: the same list, nothing offered.
        assert_eq!(p.render(&to), (text.clone(), 0));
        // The next /b.mp3 segment numbers on, without a discontinuity; the switch slides on.
        let to = window(&[(501, 70), (502, 70)], 2);
        let (text, offered) = p.render(&to);
        assert_eq!(offered, 70);
        let parsed = throng_proto::hls::playlist::parse(&text).unwrap();
        assert_eq!(parsed.media_sequence, 13);
        assert_eq!(parsed.segments.last().unwrap().1, "/hls/b.mp3/502.mp3");
        assert_eq!(text.matches("#EXT-X-DISCONTINUITY\n").count(), 1);
        // Two more: the discontinuity slides out and is counted.
        let to = window(&[(503, 70), (504, 70)], 2);
        let (text, _) = p.render(&to);
        assert_eq!(text.matches("#EXT-X-DISCONTINUITY\n").count(), 0, "{text}");
        assert!(text.contains("#EXT-X-DISCONTINUITY-SEQUENCE:3\n"), "{text}");
    }

    fn listeners(m: &Mount) -> u32 {
        m.listeners.load(Ordering::Relaxed)
    }

    #[test]
    fn timeout_is_two_targets_and_a_second() {
        assert_eq!(
            timeout_for(0),
            Duration::from_secs(3),
            "at least a 1 s target"
        );
        assert_eq!(timeout_for(1), Duration::from_secs(3));
        assert_eq!(timeout_for(2), Duration::from_secs(5));
        assert_eq!(timeout_for(6), Duration::from_secs(13));
    }

    #[test]
    fn open_counts_a_listener_and_touch_counts_each_offered_segment_once() {
        let f = Fixture::new();
        let (m, _w) = test_mount("/live", Format::Mp3);
        assert!(f.sessions.is_empty());
        f.open("tok", 7, &m, None);
        assert_eq!(f.sessions.len(), 1);
        assert!(f.sessions.contains("tok") && !f.sessions.contains("other"));
        assert_eq!(f.listeners_gauge("/live"), 1);
        assert_eq!(
            f.metrics
                .connects
                .get_or_create(&MountLabel::new("/live"))
                .get(),
            1
        );
        assert_eq!(listeners(&m), 1);

        let t = f.t0 + Duration::from_secs(1);
        // First playlist: 50 bytes of playlist, two segments offered.
        assert!(f
            .sessions
            .touch("tok", &window(&[(10, 100), (11, 200)], 6), 50, t));
        let rows = f.sessions.rows(None, t);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].sent, 350);
        assert_eq!(rows[0].id, 7);
        assert_eq!(rows[0].path, AudiencePath::Hls);
        assert_eq!(rows[0].mount, "/live");
        assert_eq!(rows[0].connected_secs, 1);
        assert_eq!(rows[0].lag_bytes, 0);
        // The same playlist again: only its own bytes.
        assert!(f
            .sessions
            .touch("tok", &window(&[(10, 100), (11, 200)], 6), 50, t));
        assert_eq!(f.sessions.rows(None, t)[0].sent, 400);
        // The window slid: only segment 12 is new.
        assert!(f
            .sessions
            .touch("tok", &window(&[(11, 200), (12, 300)], 6), 50, t));
        assert_eq!(f.sessions.rows(Some("/live"), t)[0].sent, 750);
        assert!(f.sessions.rows(Some("/other"), t).is_empty());
        // An unknown token is not a session.
        assert!(!f.sessions.touch("nope", &window(&[(13, 1)], 6), 50, t));
        assert_eq!(f.sessions.rows(None, t)[0].sent, 750);
    }

    #[test]
    fn an_idle_session_vanishes_after_its_timeout() {
        let f = Fixture::new();
        let registry = Registry::default();
        let (m, _w) = test_mount("/live", Format::Mp3);
        f.open("tok", 1, &m, None);
        // The playlist's target sets the timeout: 2 × 4 s + 1 s.
        let touched = f.t0 + Duration::from_secs(3);
        f.sessions
            .touch("tok", &window(&[(1, 1000)], 4), 24, touched);
        let timeout = timeout_for(4);
        f.sessions
            .expire(touched + timeout, &registry, &f.metrics, &f.log);
        assert!(f.sessions.contains("tok"), "not past the timeout yet");
        assert!(f.ends().is_empty());
        f.sessions.expire(
            touched + timeout + Duration::from_millis(1),
            &registry,
            &f.metrics,
            &f.log,
        );
        assert!(!f.sessions.contains("tok"));
        assert_eq!(
            f.ends(),
            // It listened until its last request (3 s), not until it was found gone.
            vec![(EndReason::Vanished, 1024, "/live".to_owned(), 3)]
        );
        assert_eq!(listeners(&m), 0, "its slot is released");
        assert_eq!(f.listeners_gauge("/live"), 0);
        assert_eq!(
            f.metrics
                .disconnects
                .get_or_create(&MountLabel::new("/live"))
                .get(),
            1
        );
        assert_eq!(f.ended(EndReason::Vanished), 1);
        assert_eq!(f.ended(EndReason::TimeLimit), 0);
        let text = f.log_text();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains("\"GET /live.m3u8 HTTP/1.1\" 200 1024"),
            "{text}"
        );
        assert!(
            text.trim_end().ends_with("\"player/1\" 3 client:vanished"),
            "{text}"
        );
        // Expiring again ends nothing more.
        f.sessions.expire(
            touched + Duration::from_secs(100),
            &registry,
            &f.metrics,
            &f.log,
        );
        assert_eq!(f.ends().len(), 1);
    }

    #[test]
    fn a_session_past_its_deadline_ends_with_time_limit() {
        let f = Fixture::new();
        let registry = Registry::default();
        let (m, _w) = test_mount("/live", Format::Mp3);
        f.open("limited", 1, &m, Some(Duration::from_secs(10)));
        f.open("free", 2, &m, None);
        assert_eq!(listeners(&m), 2);
        // Both keep fetching every second.
        for s in 1..10 {
            let t = f.t0 + Duration::from_secs(s);
            for tok in ["limited", "free"] {
                assert!(f.sessions.touch(tok, &window(&[], 2), 10, t));
            }
            f.sessions.expire(t, &registry, &f.metrics, &f.log);
        }
        assert_eq!(f.sessions.len(), 2, "both within their limits");
        let deadline = f.t0 + Duration::from_secs(10);
        f.sessions.expire(
            deadline - Duration::from_millis(1),
            &registry,
            &f.metrics,
            &f.log,
        );
        assert_eq!(f.sessions.len(), 2);
        f.sessions.expire(deadline, &registry, &f.metrics, &f.log);
        assert!(!f.sessions.contains("limited") && f.sessions.contains("free"));
        assert_eq!(
            f.ends(),
            vec![(EndReason::TimeLimit, 90, "/live".to_owned(), 10)]
        );
        assert_eq!(listeners(&m), 1);
        assert_eq!(f.listeners_gauge("/live"), 1);
        assert_eq!(f.ended(EndReason::TimeLimit), 1);
        let text = f.log_text();
        assert!(text.trim_end().ends_with("policy:time-limit"), "{text}");
    }

    #[test]
    fn kill_ends_the_session_with_that_id() {
        let f = Fixture::new();
        let (m, _w) = test_mount("/live", Format::Mp3);
        f.open("a", 11, &m, None);
        f.open("b", 12, &m, None);
        assert!(!f.sessions.kill(99, &f.metrics, &f.log));
        assert_eq!(f.sessions.len(), 2);
        assert!(f.sessions.kill(12, &f.metrics, &f.log));
        assert!(f.sessions.contains("a") && !f.sessions.contains("b"));
        assert!(!f.sessions.kill(12, &f.metrics, &f.log), "only once");
        assert_eq!(f.ends().len(), 1);
        assert_eq!(f.ends()[0].0, EndReason::Killed);
        assert_eq!(listeners(&m), 1);
        assert_eq!(f.ended(EndReason::Killed), 1);
        let rows = f.sessions.rows(None, f.t0);
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), [11]);
        f.sessions.close_all(&f.metrics, &f.log);
        assert!(f.sessions.is_empty());
        assert_eq!(f.ends()[1].0, EndReason::Shutdown);
        assert_eq!(listeners(&m), 0);
        assert_eq!(f.listeners_gauge("/live"), 0);
    }

    #[test]
    fn a_token_opened_twice_releases_the_older_session() {
        let f = Fixture::new();
        let (m, _w) = test_mount("/live", Format::Mp3);
        f.open("tok", 1, &m, None);
        f.open("tok", 2, &m, None);
        assert_eq!(f.sessions.len(), 1);
        assert_eq!(listeners(&m), 1, "the older slot is released");
        assert_eq!(f.listeners_gauge("/live"), 1);
        assert_eq!(f.sessions.rows(None, f.t0)[0].id, 2);
    }

    #[test]
    fn sessions_on_an_ended_mount_move_to_its_fallback() {
        let f = Fixture::new();
        let registry = Registry::new(Arc::new(
            crate::config::Config::from_toml(
                "[[mount]]\nname = \"/live\"\nfallback-mount = \"/fb\"\n",
            )
            .unwrap(),
        ));
        let (live, mut wl) = test_mount("/live", Format::Mp3);
        let (fb, _wf) = test_mount("/fb", Format::Mp3);
        registry.reserve(live.clone(), 16).unwrap();
        registry.reserve(fb.clone(), 16).unwrap();
        f.open("tok", 1, &live, None);
        f.sessions.expire(f.t0, &registry, &f.metrics, &f.log);
        assert_eq!(f.sessions.rows(None, f.t0)[0].mount, "/live");
        wl.end();
        f.sessions.expire(f.t0, &registry, &f.metrics, &f.log);
        let rows = f.sessions.rows(None, f.t0);
        assert_eq!(rows[0].mount, "/fb");
        assert_eq!(rows[0].requested_mount, "/live");
        assert_eq!((listeners(&live), listeners(&fb)), (0, 1));
        assert_eq!(
            (f.listeners_gauge("/live"), f.listeners_gauge("/fb")),
            (0, 1)
        );
        assert!(f.ends().is_empty(), "moved, not ended");
    }
}
