//! HLS sessions from the cache tier's request logs (issue 24): behind a cache, players fetch
//! shared playlists and segments from it, so Throng sees few of their requests; the cache's
//! log lines (`throng_proto::hls::cache_log`, pushed as UDP syslog to `[hls] cache-log-listen`
//! or posted to `POST /api/v1/hls/cache-logs`) carry each player's session token in the path
//! and keep its session alive as its own requests would.
//!
//! The rule, in [`Hls::cache_log_line`]: a line the cache served (2xx, 304) naming a packaged
//! mount and a known token touches that session, a playlist with the playlist's bytes and
//! offering the segments listed now, a segment as a sign of life (and, for a session opened by
//! its multivariant playlist at Throng and pending, its start as a listener:
//! `Sessions::fetched`; refused at `max-listeners`, it ends); a token not in the session
//! table opens a session only if Throng issued it (issue 42, item 4: its keyed MAC checks,
//! `hls/token.rs`, or on a signed mount its signature; a forged token is ignored) and only on
//! a segment (a player that really fetches audio: a session expired during a gap in the logs,
//! or opened by another node of the cluster sharing `[hls] token-secret` or the
//! secure-link secret), with the address, User-Agent
//! and Referer of the line, recorded in the audience ledger like any session, taking a
//! listener slot of the mount (refused at
//! `max-listeners`). Such a session has no credentials to check (the cache answered it; signed
//! URLs are the cache tier's check; on a mount that signs tokens only a token signed for it
//! and unexpired counts) and ends like any other through the one audience record
//! (`ListenerInfo::log_end`), as `client:vanished` when its lines stop. Which senders' lines
//! are read at all is the receiver's rule (`hls_http.rs`: `[hls] cache-log-from`, and the
//! POST endpoint's own credentials).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use throng_proto::hls::cache_log::{parse_line, session_request, CacheLogLine};
use throng_proto::hls::path::playlist_path;

use crate::audience::{AudiencePath, ListenerInfo};
use crate::config::Config;
use crate::hls::admission::SessionLimits;
use crate::hls::session::{timeout_for, Fetch, Session};
use crate::hls::Hls;
use crate::mount::registry::Registry;
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::{Metrics, OutcomeLabel};

/// What became of one log line (the `outcome` label of
/// `throng_hls_cache_log_lines_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum LineOutcome {
    /// A session's request: the session was touched.
    Touched = 0,
    /// A segment of an unknown token: a session was opened.
    Opened,
    /// Not a served request of an HLS session of a packaged mount, or refused a slot.
    Ignored,
    /// The line could not be read.
    Invalid,
    /// A datagram from a sender not in `[hls] cache-log-from`, dropped unread (counted by the
    /// UDP receiver, never by [`Hls::cache_log_line`]).
    Refused,
}

/// How many [`LineOutcome`]s there are (the length of a count array indexed by them).
pub const OUTCOMES: usize = 5;

impl LineOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LineOutcome::Touched => "touched",
            LineOutcome::Opened => "opened",
            LineOutcome::Ignored => "ignored",
            LineOutcome::Invalid => "invalid",
            LineOutcome::Refused => "refused",
        }
    }

    /// Counts one line with this outcome in `metrics`.
    pub fn count(self, metrics: &Metrics) {
        metrics
            .hls_cache_log_lines
            .get_or_create(&OutcomeLabel {
                outcome: self.as_str(),
            })
            .inc();
    }
}

/// What applying log lines needs: the mounts, the configuration in force, the metrics, and
/// the time the lines are taken to be from.
#[derive(Debug, Clone, Copy)]
pub struct Lines<'a> {
    /// The mounts (a session opened from a line takes a slot of the one its name resolves to).
    pub registry: &'a Registry,
    /// The configuration in force (signing secrets, time limits).
    pub config: &'a Config,
    /// Where outcomes and sessions are counted.
    pub metrics: &'a Metrics,
    /// The audience ledger a session opened from a line is recorded in, if the server keeps
    /// one.
    pub ledger: Option<&'a crate::ledger::Ledger>,
    /// The access log (a session a line replaces is logged there).
    pub log: &'a AccessLog,
    /// The time the lines count at.
    pub now: Instant,
}

impl Hls {
    /// Reads and applies one cache log line of text (a JSON object, bare or in a syslog
    /// message); an unreadable one is counted as [`LineOutcome::Invalid`] and logged at debug
    /// level (a cache tier sends many: no warning per line).
    pub fn cache_log_text(
        &self,
        text: &str,
        lines: &Lines<'_>,
        next_id: impl FnOnce() -> u64,
    ) -> LineOutcome {
        match parse_line(text) {
            Ok(line) => self.cache_log_line(&line, lines, next_id),
            Err(e) => {
                tracing::debug!("cache log line refused: {e}");
                LineOutcome::Invalid.count(lines.metrics);
                LineOutcome::Invalid
            }
        }
    }

    /// Applies one cache log line (see the module comment); `next_id` gives a listener id to
    /// a session it opens. The outcome is counted in `metrics`.
    pub fn cache_log_line(
        &self,
        line: &CacheLogLine,
        lines: &Lines<'_>,
        next_id: impl FnOnce() -> u64,
    ) -> LineOutcome {
        let outcome = self.apply_line(line, lines, next_id);
        outcome.count(lines.metrics);
        outcome
    }

    fn apply_line(
        &self,
        line: &CacheLogLine,
        lines: &Lines<'_>,
        next_id: impl FnOnce() -> u64,
    ) -> LineOutcome {
        let Lines {
            registry,
            config,
            metrics,
            ledger,
            log,
            now,
        } = *lines;
        let Some(req) = session_request(line).filter(|r| r.served) else {
            return LineOutcome::Ignored;
        };
        let name = req.target.mount();
        let Some(window) = self.window(name) else {
            return LineOutcome::Ignored;
        };
        if let Some((secret, _)) = config.hls_secure_link(name) {
            // A signed mount: only tokens Throng signed count (the cache checks them too).
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            if throng_proto::hls::secure_link::check(req.token, name, secret, now).is_err() {
                return LineOutcome::Ignored;
            }
        }
        let is_segment = req.target.kind() == "segment";
        if is_segment {
            match self.sessions.fetched(req.token, now, metrics, ledger) {
                Fetch::Unknown => {}
                Fetch::Listening | Fetch::Pending | Fetch::Started => return LineOutcome::Touched,
                Fetch::Full(_) => return LineOutcome::Ignored,
            }
        } else if self.sessions.touch(req.token, &window, line.bytes, now) {
            return LineOutcome::Touched;
        }
        if !is_segment {
            return LineOutcome::Ignored;
        }
        // Not in the table: only a token Throng issued opens a session (a signed mount's was
        // checked above; its signature is its MAC).
        if config.hls_secure_link(name).is_none()
            && !self
                .tokens
                .issued(req.token, config.hls.token_secret.as_deref())
        {
            tracing::debug!(mount = %name, "cache log line of a token Throng did not issue");
            return LineOutcome::Ignored;
        }
        let Some(mount) = registry.resolve(name) else {
            return LineOutcome::Ignored;
        };
        if !mount.try_add_listener() {
            tracing::debug!(mount = %mount.name, "max listeners reached (HLS from cache logs)");
            return LineOutcome::Ignored;
        }
        let info = ListenerInfo {
            id: next_id(),
            path: AudiencePath::Hls,
            ip: line.addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            request_line: format!("GET {} HTTP/1.1", playlist_path(name)),
            agent: crate::audience::record::kept_header(line.agent.as_deref()),
            referer: crate::audience::record::kept_header(line.referer.as_deref()),
            started: now,
            requested_mount: name.to_owned(),
            user: None,
            deadline: config.listening_limit(name, None).map(|l| now + l),
            on_close: None,
            ledger: None,
        };
        let opened = self.sessions.open(
            req.token.to_owned(),
            Session {
                info,
                mount,
                fetched: true,
                played: 0,
                last_seen: now,
                bytes: line.bytes,
                offered: None,
                timeout: timeout_for(window.target_secs),
                moved: None,
            },
            &SessionLimits::of(&config.hls),
            metrics,
            ledger,
            log,
        );
        match opened {
            Ok(()) => LineOutcome::Opened,
            Err(why) => {
                tracing::debug!("HLS session from cache logs refused: {why}");
                LineOutcome::Ignored
            }
        }
    }
}
