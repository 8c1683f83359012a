//! When the WHEP engine does what, as pure functions of `now`: the loop's own clock
//! ([`LoopSchedule`]: the [`MEDIA_TICK`] media pass keeping its phase, restarted after a pass
//! later than a whole tick, the [`HEALTH_INTERVAL`] health pass, the next wake-up given the
//! sessions' earliest str0m timeout), what one drive does with the timeout str0m asks for
//! ([`on_timeout`]: wait for it or run a round), and whether a session is over
//! ([`connect_timed_out`], [`past_deadline`]).
//!
//! Nothing here reads the clock, touches a socket or allocates: `engine.rs` reads the clock in
//! its loop and does what these say; every rule is unit-tested below on made-up instants.

use std::time::{Duration, Instant};

use super::shared::{CONNECT_TIMEOUT, HEALTH_INTERVAL, MEDIA_TICK};

/// The engine loop's timers: the next media pass and the next health pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopSchedule {
    next_media: Instant,
    next_health: Instant,
}

impl LoopSchedule {
    /// A schedule started at `start`: the first media pass due at once, the first health
    /// pass one [`HEALTH_INTERVAL`] later.
    pub fn new(start: Instant) -> LoopSchedule {
        LoopSchedule {
            next_media: start,
            next_health: start + HEALTH_INTERVAL,
        }
    }

    /// At `now`: if a media pass is due, how late it starts after its tick, and the next one
    /// is scheduled one [`MEDIA_TICK`] after this tick (the phase is kept: a late pass does
    /// not push every later one back), or one tick after `now` when the pass is so late that
    /// its next tick is already past (the ticks missed are not run back to back). `None`:
    /// not due yet.
    pub fn media_due(&mut self, now: Instant) -> Option<Duration> {
        if now < self.next_media {
            return None;
        }
        let late = now.saturating_duration_since(self.next_media);
        self.next_media += MEDIA_TICK;
        if self.next_media <= now {
            self.next_media = now + MEDIA_TICK;
        }
        Some(late)
    }

    /// At `now`: whether the health pass is due; the next one is then due one
    /// [`HEALTH_INTERVAL`] after `now`.
    pub fn health_due(&mut self, now: Instant) -> bool {
        if now < self.next_health {
            return false;
        }
        self.next_health = now + HEALTH_INTERVAL;
        true
    }

    /// When the loop must wake next: the earliest of the next media pass, the next health
    /// pass and `timer`, the sessions' earliest str0m timeout (if any).
    pub fn wake(&self, timer: Option<Instant>) -> Instant {
        let own = self.next_media.min(self.next_health);
        timer.map_or(own, |t| t.min(own))
    }

    /// How long the loop may sleep at `now` ([`Self::wake`]; zero when it is past).
    pub fn wait(&self, timer: Option<Instant>, now: Instant) -> Duration {
        self.wake(timer).saturating_duration_since(now)
    }
}

/// What a drive does with the timeout `at` str0m asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutStep {
    /// Not due: the session sleeps until then (its timer).
    Wait(Instant),
    /// Due: run one `handle_timeout` round (on a fresh clock) and poll again.
    Round,
}

/// The step for str0m's timeout `at` at `now`. (str0m sends no media of a viewer, whose
/// packets the engine seals itself, `srtp_send.rs`: what is left for its rounds, ICE, DTLS
/// and RTCP, is due about once a second, so a drive follows them to the end.)
pub fn on_timeout(at: Instant, now: Instant) -> TimeoutStep {
    if at > now {
        TimeoutStep::Wait(at)
    } else {
        TimeoutStep::Round
    }
}

/// Whether a session started at `started` and not `connected` yet has been connecting for
/// longer than [`CONNECT_TIMEOUT`] at `now` (its peer never completed ICE and DTLS): it ends.
pub fn connect_timed_out(connected: bool, started: Instant, now: Instant) -> bool {
    !connected && now.saturating_duration_since(started) > CONNECT_TIMEOUT
}

/// Whether a session with time limit `deadline` (max-listener-duration; `None`: none) is past
/// it at `now`: it ends.
pub fn past_deadline(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|d| now >= d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn the_media_tick_keeps_its_phase() {
        let t0 = Instant::now();
        let mut s = LoopSchedule::new(t0);
        assert_eq!(
            s.media_due(t0),
            Some(Duration::ZERO),
            "the first pass at once"
        );
        assert_eq!(s.media_due(ms(t0, 9)), None);
        // 3 ms late: the next tick is still at 20, not 23.
        assert_eq!(s.media_due(ms(t0, 13)), Some(Duration::from_millis(3)));
        assert_eq!(s.media_due(ms(t0, 19)), None);
        assert_eq!(s.media_due(ms(t0, 20)), Some(Duration::ZERO));
        // 9 ms late: still in phase (the next tick, 40, is ahead).
        assert_eq!(s.media_due(ms(t0, 39)), Some(Duration::from_millis(9)));
        assert_eq!(s.media_due(ms(t0, 39)), None);
        assert_eq!(s.wake(None), ms(t0, 40));
    }

    #[test]
    fn a_pass_later_than_a_tick_restarts_the_tick_from_now() {
        let t0 = Instant::now();
        let mut s = LoopSchedule::new(t0);
        s.media_due(t0);
        // Due at 10, starts at 35: the ticks at 20 and 30 are not run back to back.
        assert_eq!(s.media_due(ms(t0, 35)), Some(Duration::from_millis(25)));
        assert_eq!(s.media_due(ms(t0, 44)), None);
        assert_eq!(s.wake(None), ms(t0, 45));
        assert_eq!(s.media_due(ms(t0, 45)), Some(Duration::ZERO));
        // Exactly one tick late: the next tick would be now, so it starts from now too.
        assert_eq!(s.media_due(ms(t0, 65)), Some(Duration::from_millis(10)));
        assert_eq!(s.wake(None), ms(t0, 75));
    }

    #[test]
    fn the_health_pass_comes_once_an_interval() {
        let t0 = Instant::now();
        let mut s = LoopSchedule::new(t0);
        assert!(!s.health_due(t0));
        assert!(!s.health_due(t0 + HEALTH_INTERVAL - Duration::from_millis(1)));
        let late = t0 + HEALTH_INTERVAL + Duration::from_millis(30);
        assert!(s.health_due(late));
        assert!(!s.health_due(late));
        // Counted from the pass, not from the missed time.
        assert!(!s.health_due(late + HEALTH_INTERVAL - Duration::from_millis(1)));
        assert!(s.health_due(late + HEALTH_INTERVAL));
    }

    #[test]
    fn the_loop_wakes_for_the_earliest_of_its_timers() {
        let t0 = Instant::now();
        let mut s = LoopSchedule::new(t0);
        assert_eq!(s.wake(None), t0, "the first media pass");
        s.media_due(t0);
        assert_eq!(s.wake(None), ms(t0, 10));
        assert_eq!(
            s.wake(Some(ms(t0, 4))),
            ms(t0, 4),
            "a session's timeout first"
        );
        assert_eq!(s.wake(Some(ms(t0, 30))), ms(t0, 10));
        assert_eq!(s.wait(Some(ms(t0, 4)), ms(t0, 1)), Duration::from_millis(3));
        assert_eq!(s.wait(None, ms(t0, 12)), Duration::ZERO, "past: no sleep");
        // With the media passes far ahead the health pass is next.
        let mut h = LoopSchedule::new(t0);
        h.next_media = t0 + Duration::from_secs(5);
        assert_eq!(h.wake(None), t0 + HEALTH_INTERVAL);
        assert_eq!(
            h.wake(Some(t0 + Duration::from_secs(2))),
            t0 + HEALTH_INTERVAL
        );
    }

    #[test]
    fn a_drive_runs_the_rounds_due_and_waits_for_the_next() {
        let t0 = Instant::now();
        assert_eq!(on_timeout(ms(t0, 5), t0), TimeoutStep::Wait(ms(t0, 5)));
        assert_eq!(on_timeout(t0, t0), TimeoutStep::Round, "due at now");
        assert_eq!(on_timeout(t0, ms(t0, 3)), TimeoutStep::Round);
    }

    #[test]
    fn a_session_that_never_connects_times_out() {
        let t0 = Instant::now();
        assert!(!connect_timed_out(false, t0, t0));
        assert!(
            !connect_timed_out(false, t0, t0 + CONNECT_TIMEOUT),
            "at the limit"
        );
        assert!(connect_timed_out(
            false,
            t0,
            t0 + CONNECT_TIMEOUT + Duration::from_millis(1)
        ));
        assert!(
            !connect_timed_out(true, t0, t0 + CONNECT_TIMEOUT * 10),
            "connected"
        );
        // A clock before the start (never in the engine) is not a timeout.
        assert!(!connect_timed_out(false, ms(t0, 10), t0));
    }

    #[test]
    fn a_session_ends_at_its_deadline() {
        let t0 = Instant::now();
        assert!(!past_deadline(None, t0 + Duration::from_secs(86_400)));
        assert!(!past_deadline(Some(ms(t0, 10)), ms(t0, 9)));
        assert!(past_deadline(Some(ms(t0, 10)), ms(t0, 10)), "at it");
        assert!(past_deadline(Some(ms(t0, 10)), ms(t0, 11)));
    }
}
