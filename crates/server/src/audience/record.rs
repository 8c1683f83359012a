//! The record every member of an audience has, whatever path it came by (ICY listener, HLS
//! session, WHEP viewer): who it is ([`ListenerInfo`]: id, address, request line, user agent,
//! referrer, user, connected-at, deadline, path), how the admin lists show it
//! ([`ListenerRow`]), and what runs when it ends ([`CloseHook`], given a [`ClosedListener`]).
//! [`ListenerInfo::log_end`] is the one end of a session for every path: the access-log line
//! (ending with the [`EndReason`] key), the session's row in the audience ledger
//! ([`crate::ledger`], through its [`LedgerTicket`]) and the close hook (URL auth
//! `listener_remove`).

use std::net::IpAddr;
use std::time::Instant;

use super::end::EndReason;
use crate::ledger::{Ledger, LedgerTicket, SessionStart};
use crate::observe::access_log::{AccessEntry, AccessLog};

/// How an audience member is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AudiencePath {
    /// A plain HTTP (Icecast/ICY) stream listener, written by a fan-out shard.
    Icy,
    /// An HLS player, counted by its session token while it fetches the playlist.
    Hls,
    /// A WebRTC (WHEP) viewer, fed Opus packets by a WHEP engine.
    Whep,
    /// A now-playing event subscriber (`/api/v1/events`): not a listener, never counted in a
    /// mount's listeners.
    Events,
}

impl AudiencePath {
    /// The path as written in labels, listings and JSON: `icy`, `hls`, `whep`, `events`.
    pub fn as_str(self) -> &'static str {
        match self {
            AudiencePath::Icy => "icy",
            AudiencePath::Hls => "hls",
            AudiencePath::Whep => "whep",
            AudiencePath::Events => "events",
        }
    }
}

/// Most bytes of a `User-Agent` or `Referer` a session keeps (512): what a member holds for
/// its whole session stays small whatever a client sends (a 6 KB User-Agent on every one of
/// thousands of HLS sessions made a flood cost memory, issue 28).
pub const MAX_KEPT_HEADER: usize = 512;

/// `value` as a session keeps it: at most [`MAX_KEPT_HEADER`] bytes, cut on a character
/// boundary.
pub fn kept_header(value: Option<&str>) -> Option<String> {
    value.map(|v| {
        let mut end = v.len().min(MAX_KEPT_HEADER);
        while !v.is_char_boundary(end) {
            end -= 1;
        }
        v[..end].to_owned()
    })
}

/// Called once when a listener is gone (e.g. URL auth `listener_remove`), with what it did.
pub struct CloseHook(pub Box<dyn FnOnce(&ClosedListener) + Send>);

impl std::fmt::Debug for CloseHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CloseHook")
    }
}

/// A listener that has just been closed, as passed to its [`CloseHook`].
#[derive(Debug)]
pub struct ClosedListener<'a> {
    /// The listener's request facts.
    pub info: &'a ListenerInfo,
    /// The mount it was on when closed.
    pub mount: &'a str,
    /// Bytes sent to it, head included.
    pub sent: u64,
    /// Seconds connected.
    pub duration_secs: u64,
    /// Why it ended.
    pub why: EndReason,
}

/// One audience member as admin `listclients`, the JSON API and the admin UI show it.
#[derive(Debug, Clone)]
pub struct ListenerRow {
    /// Listener id (admin `killclient` takes it; unique across paths in this process).
    pub id: u64,
    /// How it is served.
    pub path: AudiencePath,
    /// Client address.
    pub ip: IpAddr,
    /// `User-Agent`, if sent.
    pub agent: Option<String>,
    /// `Referer`, if sent.
    pub referer: Option<String>,
    /// Authenticated user, if any.
    pub user: Option<String>,
    /// Seconds connected.
    pub connected_secs: u64,
    /// The mount it is on now.
    pub mount: String,
    /// The mount it asked for (differs after a fallback or move).
    pub requested_mount: String,
    /// Bytes between its position and the live edge (0 where the path has no such position:
    /// HLS).
    pub lag_bytes: u64,
    /// Bytes sent so far.
    pub sent: u64,
}

/// The request facts of one audience member, kept for its whole session by whichever engine
/// serves it, for the access log, the admin lists and its close hook.
#[derive(Debug)]
pub struct ListenerInfo {
    /// Listener id, unique in this process across every path.
    pub id: u64,
    /// How it is served.
    pub path: AudiencePath,
    /// Client address.
    pub ip: IpAddr,
    /// Request line as logged.
    pub request_line: String,
    /// `User-Agent`, if sent.
    pub agent: Option<String>,
    /// `Referer`, if sent.
    pub referer: Option<String>,
    /// When the request arrived.
    pub started: Instant,
    /// The mount the listener asked for (it may be served by a fallback).
    pub requested_mount: String,
    /// Authenticated user name, if any (shown in listclients and the access log).
    pub user: Option<String>,
    /// When the listener must be disconnected (max-listener-duration, URL-auth time limit).
    pub deadline: Option<Instant>,
    /// Run once when the listener is gone.
    pub on_close: Option<CloseHook>,
    /// Its row in the audience ledger, if the server keeps one (see
    /// [`ListenerInfo::open_in_ledger`]).
    pub ledger: Option<LedgerTicket>,
}

impl ListenerInfo {
    /// Records the session's start in `ledger` (none: no ledger), as a relay's or edge's pull
    /// when `relay`, at its true start ([`Self::started`], which may be earlier: an HLS session
    /// is recorded once it fetches a segment). Event subscribers are not listeners and are
    /// never recorded; a session is recorded once.
    pub fn open_in_ledger(&mut self, ledger: Option<&Ledger>, relay: bool) {
        let Some(ledger) = ledger else { return };
        if self.path == AudiencePath::Events || self.ledger.is_some() {
            return;
        }
        let ago = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let started_ms = crate::ledger::now_ms().saturating_sub(ago);
        self.ledger = Some(ledger.open_at(
            SessionStart {
                mount: self.requested_mount.clone(),
                path: self.path.as_str(),
                relay,
                agent: self.agent.clone(),
                referer: self.referer.clone(),
                user: self.user.clone(),
                ip: self.ip,
            },
            started_ms,
        ));
    }

    /// Its row for the admin lists, on `mount` now, at `now`, with `lag_bytes` behind the live
    /// edge and `sent` bytes so far.
    pub fn row(&self, mount: &str, now: Instant, lag_bytes: u64, sent: u64) -> ListenerRow {
        ListenerRow {
            id: self.id,
            path: self.path,
            ip: self.ip,
            agent: self.agent.clone(),
            referer: self.referer.clone(),
            user: self.user.clone(),
            connected_secs: now.saturating_duration_since(self.started).as_secs(),
            mount: mount.to_owned(),
            requested_mount: self.requested_mount.clone(),
            lag_bytes,
            sent,
        }
    }

    /// The end of a session on any path, at `ended` (now, or for an HLS player that stopped
    /// fetching, its last request): writes its access-log line (`status` as answered: 200 for
    /// a stream or playlist, 201 for a WHEP session; `sent` bytes; whole seconds from its
    /// start; the line ends with `why`'s key), completes its ledger row (seconds to the
    /// millisecond), and runs its close hook once (URL authentication's `listener_remove`),
    /// with `mount` the mount it was on at the end.
    pub fn log_end(
        &mut self,
        log: &AccessLog,
        mount: &str,
        status: u16,
        sent: u64,
        ended: Instant,
        why: EndReason,
    ) {
        let listened = ended.saturating_duration_since(self.started);
        let duration_secs = listened.as_secs();
        log.log(&AccessEntry {
            ip: self.ip,
            user: self.user.as_deref(),
            request_line: &self.request_line,
            status,
            bytes: sent,
            referer: self.referer.as_deref(),
            agent: self.agent.as_deref(),
            duration_secs,
            end: Some(why.key()),
        });
        if let Some(ticket) = self.ledger.take() {
            ticket.end(mount, sent, why.key(), listened.as_secs_f64());
        }
        if let Some(hook) = self.on_close.take() {
            (hook.0)(&ClosedListener {
                info: self,
                mount,
                sent,
                duration_secs,
                why,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_headers_are_cut_on_a_character_boundary() {
        assert_eq!(kept_header(None), None);
        assert_eq!(kept_header(Some("VLC/3.0")).as_deref(), Some("VLC/3.0"));
        let long = "é".repeat(MAX_KEPT_HEADER); // 2 bytes each
        let kept = kept_header(Some(&long)).unwrap();
        assert_eq!(kept.len(), MAX_KEPT_HEADER);
        let odd = format!("a{long}");
        let kept = kept_header(Some(&odd)).unwrap();
        assert_eq!(kept.len(), MAX_KEPT_HEADER - 1);
        assert!(odd.starts_with(&kept));
    }
}
