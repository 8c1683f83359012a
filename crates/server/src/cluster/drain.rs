//! Draining (docs/SCALING.md, "On Kubernetes"): on SIGTERM with `[limits] drain-timeout` set,
//! or on `POST /api/v1/drain`, a server stops taking new listeners and keeps the ones it has
//! until they leave or `drain-timeout` passes; then it closes them (`shutdown:drained`) and
//! exits, so their players reconnect through the origin to another edge. This is how an
//! Ingress controller or a Kubernetes rollout takes a pod out: readiness goes false first
//! (`/healthz/ready`), then the process ends within the pod's grace period.
//!
//! One rule for every door: a newcomer (an ICY listener, a new HLS session, a WHEP offer) of a
//! draining server is sent on by [`newcomer`] (answered by `redirect.rs`'s `turn_away`, which
//! every door calls): to the origin (`[cluster] origin`) on an edge,
//! which sends it to an edge with room; to an edge with room on an origin; else refused `503`.
//! The decisions are pure functions of the state passed in; [`DrainState`] is the one owner of
//! "this server is draining".

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cluster::decide;

/// Whether this server drains, and since when. Shared by the doors (they send newcomers on),
/// `/healthz/ready` (false while draining), the edge's reports (they say `draining`) and the
/// run loop (it ends the drain).
#[derive(Debug, Default)]
pub struct DrainState {
    draining: AtomicBool,
    since: Mutex<Option<Instant>>,
    /// Woken when a drain starts (the edge's report task sends a report at once).
    started: tokio::sync::Notify,
}

impl DrainState {
    /// Starts draining at `now`; `false` when a drain had already started (nothing changes).
    pub fn begin(&self, now: Instant) -> bool {
        let mut since = self.since.lock();
        if since.is_some() {
            return false;
        }
        *since = Some(now);
        self.draining.store(true, Ordering::Release);
        self.started.notify_one();
        true
    }

    /// Whether a drain has started (cheap: one atomic load, read by every newcomer).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// When the drain started, if it did.
    pub fn since(&self) -> Option<Instant> {
        *self.since.lock()
    }

    /// Completes once a drain has started (for the one task that reacts to it: a start before
    /// the call is kept for it, as [`tokio::sync::Notify::notify_one`] keeps a permit).
    pub async fn started(&self) {
        self.started.notified().await;
    }
}

/// Whether a drain that started at `since` is over at `now`: its audience (`members`, every
/// path) has left, or `timeout` has passed since it started.
pub fn over(since: Instant, now: Instant, timeout: Duration, members: usize) -> bool {
    members == 0 || now.saturating_duration_since(since) >= timeout
}

/// What a draining server does with a newcomer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Newcomer {
    /// Not draining: admit it as usual.
    Admit,
    /// Send it to this `Location` (the origin on an edge, an edge with room on an origin).
    Redirect(String),
    /// Refuse it: `503` with `Retry-After` (nowhere to send it).
    Refuse,
}

/// The decision for a newcomer asking for request target `target` (path and query): with
/// `draining` false, [`Newcomer::Admit`]; else to `origin` (an edge's `[cluster] origin`) when
/// set, else to `edge` (an edge with room that carries the mount, on an origin), else refused.
pub fn newcomer(
    draining: bool,
    origin: Option<&str>,
    edge: impl FnOnce() -> Option<String>,
    target: &str,
) -> Newcomer {
    if !draining {
        return Newcomer::Admit;
    }
    let base = match origin {
        Some(o) => Some(o.to_owned()),
        None => edge(),
    };
    match base {
        Some(b) => {
            let location = decide::location(&b, target);
            // Never a header value with a control character (RFC 9110 section 5.5).
            if location.bytes().any(|c| c.is_ascii_control()) {
                Newcomer::Refuse
            } else {
                Newcomer::Redirect(location)
            }
        }
        None => Newcomer::Refuse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_does_not_drain_admits() {
        let asked = std::cell::Cell::new(false);
        let edge = || {
            asked.set(true);
            Some("http://e".to_string())
        };
        assert_eq!(
            newcomer(false, Some("http://o"), edge, "/a"),
            Newcomer::Admit
        );
        assert!(!asked.get(), "no edge is counted as sent one");
    }

    #[test]
    fn an_edge_sends_newcomers_to_its_origin_with_the_whole_target() {
        assert_eq!(
            newcomer(true, Some("http://origin:8000/"), || None, "/live.mp3?x=1"),
            Newcomer::Redirect("http://origin:8000/live.mp3?x=1".into())
        );
    }

    #[test]
    fn an_origin_sends_them_to_an_edge_with_room_else_refuses() {
        assert_eq!(
            newcomer(true, None, || Some("http://edge2:8000".into()), "/live.mp3"),
            Newcomer::Redirect("http://edge2:8000/live.mp3".into())
        );
        assert_eq!(newcomer(true, None, || None, "/live.mp3"), Newcomer::Refuse);
        assert_eq!(
            newcomer(true, Some("http://o"), || None, "/a\r\nX: y"),
            Newcomer::Refuse
        );
    }

    #[test]
    fn a_drain_is_over_when_its_audience_left_or_its_time_passed() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(30);
        assert!(!over(t0, t0 + Duration::from_secs(29), timeout, 5));
        assert!(over(t0, t0 + Duration::from_secs(30), timeout, 5));
        assert!(over(t0, t0 + Duration::from_secs(1), timeout, 0));
        // A zero timeout closes at once.
        assert!(over(t0, t0, Duration::ZERO, 1000));
    }

    #[test]
    fn a_drain_begins_once() {
        let d = DrainState::default();
        assert!(!d.is_draining());
        let t0 = Instant::now();
        assert!(d.begin(t0));
        assert!(d.is_draining());
        assert!(!d.begin(t0 + Duration::from_secs(1)));
        assert_eq!(d.since(), Some(t0));
    }
}
