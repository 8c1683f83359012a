//! HLS sessions: a player holding a session token in its playlist URL is a listener while it
//! keeps fetching the playlist, within about two target durations ([`Sessions::expire`] closes
//! it after `2 × target + 1 s` without a request). A session takes a listener slot of its mount
//! (max-listeners, status counts), shows in `listclients` and the `throng_listeners` gauge, and
//! is logged once when it ends, with its duration and bytes, as an ICY listener is. Its bytes
//! are the playlists it was sent plus every segment its playlists offered it for the first time
//! (what the player fetches, from Throng or from a cache in front).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::audience::{AudiencePath, EndReason, ListenerInfo, ListenerRow};
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

    /// The sessions on mount `name` (all when `None`) as listener rows.
    pub fn rows(&self, name: Option<&str>, now: Instant) -> Vec<ListenerRow> {
        self.by_token
            .lock()
            .values()
            .filter(|s| name.is_none_or(|n| s.mount.name == n))
            .map(|s| s.info.row(&s.mount.name, now, 0, s.bytes))
            .collect()
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
                if let Some(next) = registry
                    .resolve(&s.info.requested_mount)
                    .filter(|m| m.id != s.mount.id)
                {
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
    let secs = now.duration_since(s.info.started).as_secs();
    tracing::debug!(id = s.info.id, mount = %s.mount.name, why = why.key(), "HLS session ended");
    s.info.log_end(log, &s.mount.name, 200, s.bytes, secs, why);
}
