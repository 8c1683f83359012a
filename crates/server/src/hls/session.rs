//! HLS sessions: a player holding a session token in its playlist URL. A session opened by a
//! playlist request is *pending* until it fetches a segment (`hls/admission.rs` bounds pending
//! sessions per address, per second and over the table, evicting the oldest pending one at the
//! table's bound): only then is it a listener ([`Sessions::fetched`]). A listening session
//! takes a listener slot of its mount (max-listeners, status counts), shows in `listclients`
//! and the `throng_listeners` gauge, is recorded in the audience ledger with the time of its
//! first request, and is logged once when it ends, with its duration and bytes, as an ICY
//! listener is; it lives while it keeps fetching, within about two target durations
//! ([`Sessions::expire`] closes it after `2 × target + 1 s` without a request). A pending
//! session ends that long after its start, whatever playlists it reloads, with no log line
//! (its URL-auth close hook still runs). Its bytes are the playlists it was sent plus every
//! segment its playlists offered it for the first time (what the player fetches, from Throng or
//! from a cache in front).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::audience::page::{take_page, Page};
use crate::audience::{AudiencePath, ClosedListener, EndReason, ListenerInfo, ListenerRow};
use crate::hls::admission::{room, AddressState, Room, SessionLimits, SessionRefused};
use crate::ledger::Ledger;
use crate::net::clients::address_key;
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
    /// The mount whose listener slot it holds (once it fetched a segment).
    pub mount: Arc<Mount>,
    /// Whether it played a segment: a listener. Set by [`Sessions`] (whatever the caller
    /// gives is overwritten by `open`/`open_pending`).
    pub fetched: bool,
    /// Segment bytes written to it while pending (ranges counted as sent): it becomes a
    /// listener once they reach a whole segment's ([`Played`]).
    pub played: u64,
    /// Last request (playlist or segment).
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

/// The session table: sessions by token, the pending ones (no segment fetched yet) oldest
/// first, and what each address has (`hls/admission.rs`).
#[derive(Debug, Default)]
pub struct Sessions {
    table: Mutex<Table>,
}

/// What [`Sessions`] guards: every change goes through [`Table::insert`] and
/// [`Table::remove`], which keep the indexes and counts in step.
#[derive(Debug, Default)]
struct Table {
    by_token: HashMap<String, Session>,
    /// Pending sessions by listener id (ids grow: the first is the oldest): their tokens.
    pending: BTreeMap<u64, String>,
    /// By address key (`net::clients::address_key`): pending sessions and the bucket of new
    /// ones; an address is absent when idle ([`AddressState::is_idle`]).
    addresses: HashMap<IpAddr, AddressState>,
    /// Sessions that fetched a segment (listeners).
    listening: usize,
}

impl Table {
    /// Adds `s` under `token`; the session it replaces (same token), if any.
    fn insert(
        &mut self,
        token: String,
        s: Session,
        limits: &SessionLimits,
        now: Instant,
    ) -> Option<Session> {
        let old = self.remove(&token);
        if s.fetched {
            self.listening += 1;
        } else {
            self.pending.insert(s.info.id, token.clone());
            self.addresses
                .entry(address_key(s.info.ip))
                .or_insert_with(|| AddressState::new(limits, now))
                .pending
                .push(s.info.id);
        }
        self.by_token.insert(token, s);
        old
    }

    /// Removes session `token`.
    fn remove(&mut self, token: &str) -> Option<Session> {
        let s = self.by_token.remove(token)?;
        if s.fetched {
            self.listening -= 1;
        } else {
            self.unpend(&s.info);
        }
        Some(s)
    }

    /// Forgets pending session `info` in the pending indexes (it fetched a segment or ends).
    fn unpend(&mut self, info: &ListenerInfo) {
        self.pending.remove(&info.id);
        let key = address_key(info.ip);
        if let Some(a) = self.addresses.get_mut(&key) {
            a.pending.retain(|&id| id != info.id);
        }
    }

    /// Makes room for one more session under `limits`, evicting the oldest pending session if
    /// the table is at its bound (returned, to be discarded outside the lock).
    ///
    /// Errors: [`SessionRefused::Full`].
    fn make_room(&mut self, limits: &SessionLimits) -> Result<Option<Session>, SessionRefused> {
        match room(self.by_token.len(), self.pending.len(), limits)? {
            Room::Free => Ok(None),
            Room::EvictOldestPending => {
                let token = self.pending.first_key_value().map(|(_, t)| t.clone());
                Ok(token.and_then(|t| self.remove(&t)))
            }
        }
    }

    /// Marks session `token` alive at `now` (it fetched a segment) and, if pending, starts it
    /// listening: it takes a listener slot of its mount, counts in the metrics and is recorded
    /// in the audience ledger (at its true start). Refused a slot (max-listeners) it is removed
    /// and returned.
    fn start_listening(
        &mut self,
        token: &str,
        now: Instant,
        played: Played,
        metrics: &Metrics,
        ledger: Option<&Ledger>,
    ) -> Fetch {
        let Some(s) = self.by_token.get_mut(token) else {
            return Fetch::Unknown;
        };
        s.last_seen = now;
        if s.fetched {
            return Fetch::Listening;
        }
        // A listener once it has been sent a segment's worth of media: a one-byte range of a
        // segment (kept alive with HEADs) never takes a slot (issue 42).
        if let Played::Bytes { sent, whole } = played {
            s.played = s.played.saturating_add(sent);
            if s.played < whole {
                return Fetch::Pending;
            }
        }
        if !s.mount.try_add_listener() {
            let mount = s.mount.name.clone();
            let s = self.remove(token);
            tracing::info!(%mount, "max listeners reached (HLS session fetching its first segment)");
            return Fetch::Full(s.map(Box::new));
        }
        s.fetched = true;
        count_listener(s, metrics);
        s.info.open_in_ledger(ledger, false);
        let info_id = s.info.id;
        let ip = s.info.ip;
        self.pending.remove(&info_id);
        if let Some(a) = self.addresses.get_mut(&address_key(ip)) {
            a.pending.retain(|&id| id != info_id);
        }
        self.listening += 1;
        Fetch::Started
    }
}

/// Counts listening session `s` in the metrics (`connects`, the `listeners` gauge).
fn count_listener(s: &Session, metrics: &Metrics) {
    let label = MountLabel::new(&s.mount.name);
    metrics.connects.get_or_create(&label).inc();
    metrics.listeners.get_or_create(&label).inc();
    tracing::debug!(id = s.info.id, mount = %s.mount.name, "HLS session listening");
}

/// What a segment fetch sent a session, for [`Sessions::played`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Played {
    /// A whole segment (a cache tier's log line, a full `GET`).
    Whole,
    /// `sent` bytes of a segment of `whole` bytes (a range, a `HEAD`: 0).
    Bytes {
        /// Bytes of the segment written (bytes).
        sent: u64,
        /// The whole segment's size (bytes).
        whole: u64,
    },
}

/// What a segment fetch did to a session ([`Sessions::fetched`]).
#[derive(Debug)]
pub enum Fetch {
    /// No such session.
    Unknown,
    /// It was listening already: marked alive.
    Listening,
    /// Still pending: marked alive, but not yet sent a segment's worth of media.
    Pending,
    /// Its first segment: it is a listener from now on.
    Started,
    /// Its first segment, but its mount is at max-listeners: the session ended (the fetch is
    /// answered `403`); the session, to discard, when the caller must (see
    /// [`Sessions::fetched`]).
    Full(Option<Box<Session>>),
}

/// The timeout of a session of segments of `target_secs`: two target durations and a second.
pub fn timeout_for(target_secs: u64) -> Duration {
    Duration::from_secs(2 * target_secs.max(1) + 1)
}

impl Sessions {
    /// Sessions in the table, listening or pending.
    pub fn len(&self) -> usize {
        self.table.lock().by_token.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sessions that fetched a segment: the HLS listeners.
    pub fn listeners(&self) -> usize {
        self.table.lock().listening
    }

    /// Sessions that have not fetched a segment yet.
    pub fn pending(&self) -> usize {
        self.table.lock().pending.len()
    }

    /// Whether `token` names an open session.
    pub fn contains(&self, token: &str) -> bool {
        self.table.lock().by_token.contains_key(token)
    }

    /// Whether an address `ip` may open a new session at `now` under `limits` (its bucket of
    /// new sessions, its pending sessions, the table's room counting the eviction of pending
    /// ones); asked before the listener's authentication, so a flood costs no more than this.
    /// An admitted attempt takes one of the address's new sessions.
    ///
    /// Errors: [`SessionRefused`] (answered `503`).
    pub fn may_open(
        &self,
        ip: IpAddr,
        limits: &SessionLimits,
        now: Instant,
    ) -> Result<(), SessionRefused> {
        let mut t = self.table.lock();
        room(t.by_token.len(), t.pending.len(), limits)?;
        t.addresses
            .entry(address_key(ip))
            .or_insert_with(|| AddressState::new(limits, now))
            .admit(limits, now)
    }

    /// Opens pending session `token` (its `fetched` false: no slot, not counted): it becomes a
    /// listener at its first segment ([`Self::fetched`]). At the table's bound the oldest
    /// pending session is evicted; a session of the same token is replaced.
    ///
    /// Errors: [`SessionRefused::PerAddress`] when its address reached its pending cap while
    /// it was being authenticated, [`SessionRefused::Full`]; the session is discarded (its
    /// close hook runs).
    pub fn open_pending(
        &self,
        token: String,
        mut session: Session,
        limits: &SessionLimits,
        metrics: &Metrics,
        log: &AccessLog,
        now: Instant,
    ) -> Result<(), SessionRefused> {
        session.fetched = false;
        let (evicted, replaced) = {
            let mut t = self.table.lock();
            let mine = t
                .addresses
                .get(&address_key(session.info.ip))
                .map_or(0, |a| a.pending.len());
            let refused = if mine >= limits.pending_per_address as usize {
                Err(SessionRefused::PerAddress)
            } else {
                t.make_room(limits)
            };
            match refused {
                Err(why) => {
                    drop(t);
                    discard(session, EndReason::Evicted);
                    return Err(why);
                }
                Ok(evicted) => (evicted, t.insert(token, session, limits, now)),
            }
        };
        settle(evicted, replaced, metrics, log, now);
        Ok(())
    }

    /// Opens listening session `token`, holding a listener slot of its mount (already taken
    /// by the caller), counted in the metrics and recorded in `ledger` from now on (a session
    /// seen first fetching a segment: the cache tier's logs). At the table's bound the oldest
    /// pending session is evicted.
    ///
    /// Errors: [`SessionRefused::Full`]: the slot is given back and the session discarded.
    pub fn open(
        &self,
        token: String,
        mut session: Session,
        limits: &SessionLimits,
        metrics: &Metrics,
        ledger: Option<&Ledger>,
        log: &AccessLog,
    ) -> Result<(), SessionRefused> {
        session.fetched = true;
        let now = Instant::now();
        let (evicted, replaced) = {
            let mut t = self.table.lock();
            match t.make_room(limits) {
                Err(why) => {
                    drop(t);
                    session.mount.remove_listener();
                    discard(session, EndReason::Evicted);
                    return Err(why);
                }
                Ok(evicted) => {
                    count_listener(&session, metrics);
                    session.info.open_in_ledger(ledger, false);
                    (evicted, t.insert(token, session, limits, now))
                }
            }
        };
        settle(evicted, replaced, metrics, log, now);
        Ok(())
    }

    /// Records a segment fetched by session `token` at `now` (from Throng or, in its logs, from
    /// the cache tier): a sign of life, and at the first one the session becomes a listener
    /// (a slot of its mount, the metrics, the audience ledger at its true start). A session
    /// refused a slot ends; its close hook runs here.
    pub fn fetched(
        &self,
        token: &str,
        now: Instant,
        metrics: &Metrics,
        ledger: Option<&Ledger>,
    ) -> Fetch {
        self.played(token, now, Played::Whole, metrics, ledger)
    }

    /// As [`Self::fetched`] for a fetch that `played` (a whole segment, or bytes of one): a
    /// pending session becomes a listener once its segment bytes reach a whole segment's.
    pub fn played(
        &self,
        token: &str,
        now: Instant,
        played: Played,
        metrics: &Metrics,
        ledger: Option<&Ledger>,
    ) -> Fetch {
        let fetch = {
            let mut t = self.table.lock();
            t.start_listening(token, now, played, metrics, ledger)
        };
        discard_refused(fetch)
    }

    /// As [`Self::fetched`] for a segment of mount name `mount` fetched without a token (a
    /// per-session playlist names segments without one): the oldest pending session of that
    /// address key on that mount name starts listening. [`Fetch::Unknown`] when there is none.
    pub fn fetched_from(
        &self,
        ip: IpAddr,
        mount: &str,
        now: Instant,
        played: Played,
        metrics: &Metrics,
        ledger: Option<&Ledger>,
    ) -> Fetch {
        let fetch = {
            let mut t = self.table.lock();
            let Some(a) = t.addresses.get(&address_key(ip)) else {
                return Fetch::Unknown;
            };
            let token = a.pending.iter().find_map(|id| {
                let token = t.pending.get(id)?;
                let s = t.by_token.get(token)?;
                (s.info.requested_mount == mount).then(|| token.clone())
            });
            let Some(token) = token else {
                return Fetch::Unknown;
            };
            t.start_listening(&token, now, played, metrics, ledger)
        };
        discard_refused(fetch)
    }

    /// Records a playlist request of session `token` answered with `window` (`sent` bytes);
    /// false when there is no such session.
    pub fn touch(&self, token: &str, window: &Window, sent: u64, now: Instant) -> bool {
        let mut t = self.table.lock();
        let Some(s) = t.by_token.get_mut(token) else {
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

    /// Moves the sessions `filter` takes to mount `to` (`moveclients`, `fallback-override`):
    /// each holds `to`'s listener slot from now on (a pending one will take it there); a
    /// session whose own mount name is `to` is served by its own playlist again, any other gets
    /// a [`MovedPlaylist`] made by `moved_playlist(requested mount name, to)` (`None`: HLS is
    /// not packaged for `to`, so the session stays). How many moved.
    pub fn move_sessions(
        &self,
        filter: &MoveFilter,
        to: &Arc<Mount>,
        metrics: &Metrics,
        moved_playlist: impl Fn(&str, &str) -> Option<MovedPlaylist>,
    ) -> usize {
        let mut n = 0;
        for s in self.table.lock().by_token.values_mut() {
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
            if s.fetched {
                s.mount.move_listener_to(to, metrics);
            }
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
        let mut t = self.table.lock();
        let s = t.by_token.get_mut(token)?;
        let moved = s.moved.as_mut()?;
        let source = window_of(&moved.serving)?;
        let (text, offered) = moved.render(&source);
        s.last_seen = now;
        s.timeout = timeout_for(source.target_secs);
        s.bytes += offered + text.len() as u64;
        Some(text)
    }

    /// The listening sessions on mount `name` (all when `None`) as listener rows.
    pub fn rows(&self, name: Option<&str>, now: Instant) -> Vec<ListenerRow> {
        self.rows_page(name, now, Page::FIRST)
    }

    /// As [`Self::rows`], on `page` only (`audience/page.rs`): at most a page of rows is made.
    pub fn rows_page(&self, name: Option<&str>, now: Instant, page: Page) -> Vec<ListenerRow> {
        let t = self.table.lock();
        let rows = t
            .by_token
            .values()
            .filter(|s| {
                s.fetched && s.info.id > page.after && name.is_none_or(|n| s.mount.name == n)
            })
            .map(|s| s.info.row(&s.mount.name, now, 0, s.bytes));
        take_page(rows, page)
    }

    /// Ends session `id` (admin `killclient`); whether there was one.
    pub fn kill(&self, id: u64, metrics: &Metrics, log: &AccessLog) -> bool {
        let found = {
            let mut t = self.table.lock();
            let token = t
                .by_token
                .iter()
                .find(|(_, s)| s.info.id == id)
                .map(|(t, _)| t.clone());
            token.and_then(|tok| t.remove(&tok))
        };
        match found {
            Some(s) => {
                end(s, EndReason::Killed, metrics, log, Instant::now());
                true
            }
            None => false,
        }
    }

    /// Ends every session idle past its timeout or past its deadline, and every pending one
    /// whose timeout passed since it started (playlist reloads alone do not make a listener),
    /// forgets idle addresses, and moves sessions whose mount ended to the mount their
    /// listeners hear now (as fan-out moves ICY listeners to a fallback). `limits`: the bounds
    /// in force (an address's bucket refills at its rate).
    pub fn expire(
        &self,
        now: Instant,
        limits: &SessionLimits,
        registry: &Registry,
        metrics: &Metrics,
        log: &AccessLog,
    ) {
        let mut ended = Vec::new();
        {
            let mut t = self.table.lock();
            let gone: Vec<(String, EndReason)> = t
                .by_token
                .iter()
                .filter_map(|(tok, s)| {
                    let since = if s.fetched {
                        s.last_seen
                    } else {
                        s.info.started
                    };
                    if now.saturating_duration_since(since) > s.timeout {
                        Some((tok.clone(), EndReason::Vanished))
                    } else if s.info.deadline.is_some_and(|d| now >= d) {
                        Some((tok.clone(), EndReason::TimeLimit))
                    } else {
                        None
                    }
                })
                .collect();
            for (tok, why) in gone {
                if let Some(s) = t.remove(&tok) {
                    ended.push((s, why));
                }
            }
            t.addresses.retain(|_, a| !a.is_idle(limits, now));
            // Whether each mount ended, read once per sweep (sessions share a few mounts).
            let mut mount_ended = std::collections::HashMap::new();
            for s in t.by_token.values_mut() {
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
                    if s.fetched {
                        s.mount.move_listener_to(&next, metrics);
                    }
                    s.mount = next;
                }
            }
        }
        // Closed outside the lock: a URL-auth hook may take time.
        for (s, why) in ended {
            end(s, why, metrics, log, now);
        }
    }

    /// Ends every session with `why` (the server shuts down, `EndReason::Shutdown`, or ends a
    /// drain, `EndReason::Drained`): each is logged as when it stops fetching.
    pub fn close_all(&self, why: EndReason, metrics: &Metrics, log: &AccessLog) {
        let all: Vec<Session> = {
            let mut t = self.table.lock();
            t.pending.clear();
            t.addresses.clear();
            t.listening = 0;
            t.by_token.drain().map(|(_, s)| s).collect()
        };
        let now = Instant::now();
        for s in all {
            end(s, why, metrics, log, now);
        }
    }
}

/// Ends, outside the table's lock, the sessions an opening displaced: `evicted` (the oldest
/// pending one, at the table's bound) and `replaced` (the same token twice: a client reusing
/// an expired token raced itself; the older goes).
fn settle(
    evicted: Option<Session>,
    replaced: Option<Session>,
    metrics: &Metrics,
    log: &AccessLog,
    now: Instant,
) {
    if let Some(s) = evicted {
        tracing::debug!(
            id = s.info.id,
            "HLS session that fetched no segment evicted"
        );
        discard(s, EndReason::Evicted);
    }
    if let Some(s) = replaced {
        end(s, EndReason::Evicted, metrics, log, now);
    }
}

/// `fetch` with the session a full mount refused discarded (outside the table's lock).
fn discard_refused(fetch: Fetch) -> Fetch {
    match fetch {
        Fetch::Full(Some(s)) => {
            discard(*s, EndReason::Evicted);
            Fetch::Full(None)
        }
        other => other,
    }
}

/// Ends session `s` removed from the table: [`close`] for a listener, [`discard`] for a
/// pending one.
fn end(s: Session, why: EndReason, metrics: &Metrics, log: &AccessLog, now: Instant) {
    if s.fetched {
        close(s, why, metrics, log, now);
    } else {
        discard(s, why);
    }
}

/// Ends pending session `s`: it was never a listener (no slot, no count, no ledger row, no
/// access-log line), but its close hook runs (URL authentication's `listener_remove` answers
/// the `listener_add` of its admission).
fn discard(mut s: Session, why: EndReason) {
    if let Some(hook) = s.info.on_close.take() {
        (hook.0)(&ClosedListener {
            info: &s.info,
            mount: &s.mount.name,
            sent: s.bytes,
            duration_secs: s
                .last_seen
                .saturating_duration_since(s.info.started)
                .as_secs(),
            why,
        });
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

        /// A session of listener `id` from `ip` on `mount`, started at `at` (deadline `limit`
        /// after), whose close hook records its end in `ends`; `fetched` or pending.
        #[allow(clippy::too_many_arguments)]
        fn session(
            &self,
            id: u64,
            ip: &str,
            mount: &Arc<Mount>,
            at: Instant,
            limit: Option<Duration>,
            agent: Option<&str>,
            fetched: bool,
        ) -> Session {
            let ends = self.ends.clone();
            let info = ListenerInfo {
                id,
                path: AudiencePath::Hls,
                ip: ip.parse().unwrap(),
                request_line: format!("GET {}.m3u8 HTTP/1.1", mount.name),
                agent: agent.map(str::to_owned),
                referer: None,
                started: at,
                requested_mount: mount.name.clone(),
                user: None,
                deadline: limit.map(|l| at + l),
                on_close: Some(CloseHook(Box::new(move |c: &ClosedListener| {
                    ends.lock()
                        .push((c.why, c.sent, c.mount.to_owned(), c.duration_secs));
                }))),
                ledger: None,
            };
            Session {
                info,
                mount: mount.clone(),
                fetched,
                played: 0,
                last_seen: at,
                bytes: 0,
                offered: None,
                timeout: timeout_for(2),
                moved: None,
            }
        }

        /// Opens session `token` (listener `id`) on `mount`, taking its slot as the caller
        /// does, with an optional deadline `limit` after the start.
        fn open(&self, token: &str, id: u64, mount: &Arc<Mount>, limit: Option<Duration>) {
            assert!(mount.try_add_listener());
            let session = self.session(
                id,
                "192.0.2.7",
                mount,
                self.t0,
                limit,
                Some("player/1"),
                true,
            );
            self.sessions
                .open(
                    token.to_owned(),
                    session,
                    &SessionLimits::default(),
                    &self.metrics,
                    None,
                    &self.log,
                )
                .unwrap();
        }

        /// A pending session `token` (listener `id`) from `ip` on `mount`, started at `at`,
        /// as a playlist request opens it, under `limits`.
        fn pending(
            &self,
            token: &str,
            id: u64,
            ip: &str,
            mount: &Arc<Mount>,
            at: Instant,
            limits: &SessionLimits,
        ) -> Result<(), SessionRefused> {
            let session = self.session(id, ip, mount, at, None, None, false);
            self.sessions.open_pending(
                token.to_owned(),
                session,
                limits,
                &self.metrics,
                &self.log,
                at,
            )
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
        f.sessions.expire(
            touched + timeout,
            &SessionLimits::default(),
            &registry,
            &f.metrics,
            &f.log,
        );
        assert!(f.sessions.contains("tok"), "not past the timeout yet");
        assert!(f.ends().is_empty());
        f.sessions.expire(
            touched + timeout + Duration::from_millis(1),
            &SessionLimits::default(),
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
            &SessionLimits::default(),
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
            f.sessions
                .expire(t, &SessionLimits::default(), &registry, &f.metrics, &f.log);
        }
        assert_eq!(f.sessions.len(), 2, "both within their limits");
        let deadline = f.t0 + Duration::from_secs(10);
        f.sessions.expire(
            deadline - Duration::from_millis(1),
            &SessionLimits::default(),
            &registry,
            &f.metrics,
            &f.log,
        );
        assert_eq!(f.sessions.len(), 2);
        f.sessions.expire(
            deadline,
            &SessionLimits::default(),
            &registry,
            &f.metrics,
            &f.log,
        );
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
        f.sessions
            .close_all(EndReason::Shutdown, &f.metrics, &f.log);
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
        f.sessions.expire(
            f.t0,
            &SessionLimits::default(),
            &registry,
            &f.metrics,
            &f.log,
        );
        assert_eq!(f.sessions.rows(None, f.t0)[0].mount, "/live");
        wl.end();
        f.sessions.expire(
            f.t0,
            &SessionLimits::default(),
            &registry,
            &f.metrics,
            &f.log,
        );
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

    use crate::hls::admission::SessionLimits as L;

    fn limits(max: usize, per_address: u32, rate: u32) -> SessionLimits {
        L::new(max, per_address, rate)
    }

    #[test]
    fn a_pending_session_becomes_a_listener_at_its_first_segment() {
        let f = Fixture::new();
        let (m, _w) = test_mount("/live", Format::Mp3);
        let l = SessionLimits::default();
        f.pending("tok", 3, "192.0.2.1", &m, f.t0, &l).unwrap();
        assert_eq!((f.sessions.len(), f.sessions.listeners()), (1, 0));
        assert_eq!(listeners(&m), 0, "no slot before a segment");
        assert_eq!(f.listeners_gauge("/live"), 0);
        assert!(f.sessions.rows(None, f.t0).is_empty(), "not listed");
        // Playlist reloads alone change nothing.
        let t = f.t0 + Duration::from_secs(1);
        assert!(f.sessions.touch("tok", &window(&[(1, 100)], 2), 40, t));
        assert_eq!(f.sessions.listeners(), 0);
        // The first segment: a listener, counted once.
        let t = f.t0 + Duration::from_secs(2);
        assert!(matches!(
            f.sessions.fetched("tok", t, &f.metrics, None),
            Fetch::Started
        ));
        assert_eq!((f.sessions.listeners(), f.sessions.pending()), (1, 0));
        assert_eq!(listeners(&m), 1);
        assert_eq!(f.listeners_gauge("/live"), 1);
        let rows = f.sessions.rows(None, t);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].connected_secs, 2, "its start is its first request");
        assert_eq!(rows[0].sent, 140);
        assert!(matches!(
            f.sessions.fetched("tok", t, &f.metrics, None),
            Fetch::Listening
        ));
        assert!(matches!(
            f.sessions.fetched("nope", t, &f.metrics, None),
            Fetch::Unknown
        ));
        assert_eq!(listeners(&m), 1);
        assert_eq!(
            f.metrics
                .connects
                .get_or_create(&MountLabel::new("/live"))
                .get(),
            1
        );
    }

    #[test]
    fn a_pending_session_ends_its_timeout_after_its_start_unlisted_and_unlogged() {
        let f = Fixture::new();
        let registry = Registry::default();
        let (m, _w) = test_mount("/live", Format::Mp3);
        let l = SessionLimits::default();
        f.pending("tok", 1, "192.0.2.1", &m, f.t0, &l).unwrap();
        let timeout = timeout_for(2);
        // Reloading its playlist does not keep it.
        for s in 1..=timeout.as_secs() {
            let t = f.t0 + Duration::from_secs(s);
            f.sessions.touch("tok", &window(&[], 2), 10, t);
            f.sessions.expire(t, &l, &registry, &f.metrics, &f.log);
        }
        assert!(f.sessions.contains("tok"), "not past its timeout yet");
        let t = f.t0 + timeout + Duration::from_millis(1);
        f.sessions.expire(t, &l, &registry, &f.metrics, &f.log);
        assert!(f.sessions.is_empty());
        // Its close hook ran (URL auth's listener_remove); nothing counted or logged.
        assert_eq!(f.ends().len(), 1);
        assert_eq!(f.ends()[0].0, EndReason::Vanished);
        assert_eq!(f.ended(EndReason::Vanished), 0);
        assert_eq!(
            f.metrics
                .disconnects
                .get_or_create(&MountLabel::new("/live"))
                .get(),
            0
        );
        assert_eq!(f.log_text(), "");
        assert_eq!(listeners(&m), 0);
        // Its address is forgotten once its bucket is full again.
        assert!(f.sessions.table.lock().addresses.is_empty());
    }

    #[test]
    fn at_the_bound_the_oldest_pending_session_is_evicted_and_listeners_never() {
        let f = Fixture::new();
        let (m, _w) = test_mount("/live", Format::Mp3);
        let l = limits(3, 8, 8);
        f.pending("a", 1, "192.0.2.1", &m, f.t0, &l).unwrap();
        f.pending("b", 2, "192.0.2.2", &m, f.t0, &l).unwrap();
        f.pending("c", 3, "192.0.2.3", &m, f.t0, &l).unwrap();
        f.sessions.fetched("a", f.t0, &f.metrics, None);
        // Full: "b" (the oldest pending; "a" listens) goes.
        f.pending("d", 4, "192.0.2.4", &m, f.t0, &l).unwrap();
        assert!(f.sessions.contains("a") && !f.sessions.contains("b"));
        assert_eq!(f.ends().len(), 1);
        assert_eq!(f.ends()[0].0, EndReason::Evicted);
        f.sessions.fetched("c", f.t0, &f.metrics, None);
        f.sessions.fetched("d", f.t0, &f.metrics, None);
        // Every session listens: a new one is refused (and its hook runs).
        assert_eq!(
            f.pending("e", 5, "192.0.2.5", &m, f.t0, &l),
            Err(SessionRefused::Full)
        );
        assert_eq!(
            f.sessions.may_open("192.0.2.5".parse().unwrap(), &l, f.t0),
            Err(SessionRefused::Full)
        );
        assert_eq!((f.sessions.len(), f.sessions.listeners()), (3, 3));
        assert_eq!(listeners(&m), 3);
        assert_eq!(f.ends().len(), 2);
    }

    #[test]
    fn pending_sessions_are_capped_per_address_and_new_ones_per_second() {
        let f = Fixture::new();
        let (m, _w) = test_mount("/live", Format::Mp3);
        let l = limits(1000, 2, 3);
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        let same_64 = "2001:db8::2";
        let t0 = f.t0;
        assert_eq!(f.sessions.may_open(ip, &l, t0), Ok(()));
        f.pending("a", 1, "2001:db8::1", &m, t0, &l).unwrap();
        assert_eq!(f.sessions.may_open(ip, &l, t0), Ok(()));
        f.pending("b", 2, same_64, &m, t0, &l).unwrap();
        // Two pending in the /64: a third is refused, before and after authentication.
        assert_eq!(
            f.sessions.may_open(ip, &l, t0),
            Err(SessionRefused::PerAddress)
        );
        assert_eq!(
            f.pending("c", 3, same_64, &m, t0, &l),
            Err(SessionRefused::PerAddress)
        );
        // One listens: room for one more pending, and the bucket has one left this second.
        f.sessions.fetched("a", t0, &f.metrics, None);
        assert_eq!(f.sessions.may_open(ip, &l, t0), Ok(()));
        f.pending("c", 3, same_64, &m, t0, &l).unwrap();
        f.sessions.fetched("c", t0, &f.metrics, None);
        assert_eq!(f.sessions.may_open(ip, &l, t0), Err(SessionRefused::Rate));
        // A third of a second later, one more.
        let t = t0 + Duration::from_millis(334);
        assert_eq!(f.sessions.may_open(ip, &l, t), Ok(()));
        assert_eq!(f.sessions.may_open(ip, &l, t), Err(SessionRefused::Rate));
        // Another address is not affected.
        assert_eq!(
            f.sessions.may_open("2001:db8:1::1".parse().unwrap(), &l, t),
            Ok(())
        );
    }

    #[test]
    fn a_first_segment_on_a_full_mount_ends_the_session() {
        let f = Fixture::new();
        let (m, _w) = test_mount("/live", Format::Mp3);
        let l = SessionLimits::default();
        f.pending("tok", 1, "192.0.2.1", &m, f.t0, &l).unwrap();
        m.set_tuning(crate::mount::live::Tuning {
            hidden: false,
            max_listeners: Some(1),
            burst_size: 0,
        });
        assert!(m.has_room());
        // An ICY listener takes the one slot while the session is pending.
        assert!(m.try_add_listener());
        assert!(!m.has_room());
        assert!(matches!(
            f.sessions.fetched("tok", f.t0, &f.metrics, None),
            Fetch::Full(None)
        ));
        assert!(f.sessions.is_empty());
        assert_eq!(f.ends().len(), 1);
    }

    #[test]
    fn a_segment_without_a_token_starts_the_addresss_oldest_pending_session_of_that_mount() {
        let f = Fixture::new();
        let (a, _wa) = test_mount("/a", Format::Mp3);
        let (b, _wb) = test_mount("/b", Format::Mp3);
        let l = SessionLimits::default();
        f.pending("b1", 1, "192.0.2.1", &b, f.t0, &l).unwrap();
        f.pending("a1", 2, "192.0.2.1", &a, f.t0, &l).unwrap();
        f.pending("a2", 3, "192.0.2.1", &a, f.t0, &l).unwrap();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(matches!(
            f.sessions.fetched_from(
                "192.0.2.9".parse().unwrap(),
                "/a",
                f.t0,
                Played::Whole,
                &f.metrics,
                None
            ),
            Fetch::Unknown
        ));
        assert!(matches!(
            f.sessions
                .fetched_from(ip, "/a", f.t0, Played::Whole, &f.metrics, None),
            Fetch::Started
        ));
        let rows = f.sessions.rows(None, f.t0);
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), [2]);
        assert_eq!((listeners(&a), listeners(&b)), (1, 0));
        f.sessions
            .fetched_from(ip, "/a", f.t0, Played::Whole, &f.metrics, None);
        assert!(matches!(
            f.sessions
                .fetched_from(ip, "/a", f.t0, Played::Whole, &f.metrics, None),
            Fetch::Unknown
        ));
        assert_eq!(f.sessions.pending(), 1, "b1 still pends");
    }
}
