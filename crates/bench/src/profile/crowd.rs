//! The crowd of one engine's slice, driven through its stages (sans-IO): who starts, who is
//! ramped down, whose session ends, who churns and when the storm drops everyone. One rule for
//! the ICY engine and the HLS players (each implements [`Audience`]: how its listener is
//! started, closed, and whether it streams); the engines keep their sockets and timers.
//!
//! Times are µs since the run's second 0 (the engines' clock).

use super::slice::Slice;

/// Most listeners started in one step (one turn of an engine's loop), so a ramp of thousands
/// a second still reads the sockets between its connects.
pub const START_BATCH: usize = 1000;
/// How often sessions of a random length are scanned for those due to leave (µs).
const LEAVE_SCAN_US: u64 = 100_000;

/// An engine's listeners, as the crowd drives them. Listeners are slots `0..on()`, started in
/// that order (the stages' order: the lowest ids of the slice first) and ramped down from the
/// top.
pub trait Audience {
    /// Listeners on now.
    fn on(&self) -> usize;
    /// Records that slots `0..on` are on from now (the engine keeps the count, which its
    /// ticks read, and the most ever on).
    fn set_on(&mut self, on: usize);
    /// Opens slot `i`'s connection to its own URL.
    fn open_slot(&mut self, i: usize, now_us: u64);
    /// Closes slot `i` (its session's time counted).
    fn close_slot(&mut self, i: usize, now_us: u64);
    /// Starts slot `on()`, which is on from now (`on()` grows by one).
    fn start_next(&mut self, now_us: u64) {
        let i = self.on();
        self.set_on(i + 1);
        self.open_slot(i, now_us);
    }
    /// Closes the top slot `on() − 1`, which is off from now (`on()` shrinks by one).
    fn stop_last(&mut self, now_us: u64) {
        let i = self.on() - 1;
        self.set_on(i);
        self.close_slot(i, now_us);
    }
    /// Closes slot `i` (below `on()`) and starts it again at once: a listener that leaves and
    /// rejoins.
    fn restart(&mut self, i: usize, now_us: u64) {
        self.close_slot(i, now_us);
        self.open_slot(i, now_us);
    }
    /// Whether slot `i` streams now (churn picks among these).
    fn streaming(&self, i: usize) -> bool;
    /// Whether slot `i` holds or is opening a connection (the storm drops these).
    fn connected(&self, i: usize) -> bool;
    /// When slot `i`'s session of a random length ends, if it has one.
    fn leave_at_us(&self, i: usize) -> Option<u64>;
}

/// The state of a slice's crowd between steps.
#[derive(Debug, Clone)]
pub struct Crowd {
    slice: Slice,
    ids: Vec<u32>,
    /// Listeners leaving and rejoining per second in this slice (its share of the group's).
    churn_rate: f64,
    storm_at_us: Option<u64>,
    sessions: bool,
    next_leave_scan_us: u64,
    storm_done: bool,
    churn_acc: f64,
    churn_cursor: usize,
    last_churn_us: u64,
}

impl Crowd {
    /// The crowd of `slice`, whose listeners have the ids `ids` (ascending, one per slot).
    pub fn new(slice: &Slice, ids: Vec<u32>) -> Crowd {
        let share = slice.segment.share();
        Crowd {
            churn_rate: slice.behaviour.churn_rate.unwrap_or(0.0) * share,
            storm_at_us: slice.behaviour.storm_at.map(|s| (s.0 * 1e6) as u64),
            sessions: slice.behaviour.session_range_us().is_some(),
            slice: slice.clone(),
            ids,
            next_leave_scan_us: 0,
            storm_done: false,
            churn_acc: 0.0,
            churn_cursor: 0,
            last_churn_us: 0,
        }
    }

    /// Listeners the stages want on at `now_us`.
    pub fn want(&self, now_us: u64) -> usize {
        self.slice.on_at(&self.ids, now_us as f64 / 1e6)
    }

    /// The latest time (µs) the engine may next step, no later than `wake_us`: within 1 ms
    /// while listeners are due to start or stop, 2 ms while the stages ramp, 100 ms while
    /// listeners churn or have sessions of a random length.
    pub fn wake_us(&self, now_us: u64, on: usize, wake_us: u64) -> u64 {
        let mut wake = wake_us;
        let schedule = &self.slice.schedule;
        if self.want(now_us) != on {
            wake = wake.min(now_us + 1000);
        } else if schedule.target_at(now_us as f64 / 1e6)
            != schedule.target_at((now_us + 20_000) as f64 / 1e6)
        {
            // Ramping: the next listener is due soon.
            wake = wake.min(now_us + 2000);
        }
        if self.churn_rate > 0.0 || self.sessions {
            wake = wake.min(now_us + LEAVE_SCAN_US);
        }
        wake
    }

    /// Whether the stages change the listeners on at `now_us` (someone is due to start or
    /// stop).
    pub fn due(&self, now_us: u64, on: usize) -> bool {
        self.want(now_us) != on
    }

    /// One step at `now_us`: starts the listeners due (at most [`START_BATCH`]), stops those
    /// ramped down, restarts those whose session ended, churns in hold seconds (the slice's
    /// rate, accumulated over the time since the last step, at most 1 s of it), and at the
    /// storm's time drops and restarts every connected listener once.
    pub fn step(&mut self, now_us: u64, a: &mut impl Audience) {
        let want = self.want(now_us);
        let mut batch = 0;
        while a.on() < want && batch < START_BATCH {
            a.start_next(now_us);
            batch += 1;
        }
        while a.on() > want {
            a.stop_last(now_us);
        }
        if self.sessions && now_us >= self.next_leave_scan_us {
            self.next_leave_scan_us = now_us + LEAVE_SCAN_US;
            for i in 0..a.on() {
                if a.leave_at_us(i).is_some_and(|t| now_us >= t) {
                    a.restart(i, now_us);
                }
            }
        }
        let second = (now_us / 1_000_000) as u32;
        if self.churn_rate > 0.0 && self.slice.schedule.is_hold_second(second) {
            let dt = now_us.saturating_sub(self.last_churn_us) as f64 / 1e6;
            self.churn_acc += dt.min(1.0) * self.churn_rate;
            while self.churn_acc >= 1.0 {
                self.churn_acc -= 1.0;
                if let Some(i) = self.next_streaming(a) {
                    a.restart(i, now_us);
                }
            }
        }
        self.last_churn_us = now_us;
        if let (Some(at), false) = (self.storm_at_us, self.storm_done) {
            if now_us >= at {
                self.storm_done = true;
                for i in 0..a.on() {
                    if a.connected(i) {
                        a.restart(i, now_us);
                    }
                }
            }
        }
    }

    /// The next streaming listener after the churn cursor (round-robin), if any.
    fn next_streaming(&mut self, a: &impl Audience) -> Option<usize> {
        let n = a.on();
        for _ in 0..n {
            let i = self.churn_cursor % n;
            self.churn_cursor = (i + 1) % n;
            if a.streaming(i) {
                return Some(i);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::secs::Secs;
    use crate::profile::segment::ExecutionSegment;
    use crate::profile::slice::Behaviour;
    use crate::profile::stages::{Schedule, Stage};

    /// Slots that stream once started; every start and stop written down.
    #[derive(Default)]
    struct Seats {
        on: usize,
        streaming: Vec<bool>,
        starts: usize,
        stops: usize,
        restarts: usize,
        leave_at: Vec<Option<u64>>,
    }

    impl Audience for Seats {
        fn on(&self) -> usize {
            self.on
        }
        fn set_on(&mut self, on: usize) {
            self.on = on;
        }
        fn open_slot(&mut self, i: usize, _now_us: u64) {
            if self.streaming.len() <= i {
                self.streaming.push(false);
                self.leave_at.push(None);
            }
            self.streaming[i] = true;
            self.starts += 1;
        }
        fn close_slot(&mut self, i: usize, _now_us: u64) {
            self.streaming[i] = false;
            self.stops += 1;
        }
        fn restart(&mut self, i: usize, _now_us: u64) {
            self.restarts += 1;
            self.leave_at[i] = None;
        }
        fn streaming(&self, i: usize) -> bool {
            self.streaming[i]
        }
        fn connected(&self, i: usize) -> bool {
            self.streaming[i]
        }
        fn leave_at_us(&self, i: usize) -> Option<u64> {
            self.leave_at[i]
        }
    }

    fn slice(stages: &[(f64, u32)], behaviour: Behaviour) -> (Slice, Vec<u32>) {
        let slice = Slice {
            schedule: Schedule {
                stages: stages
                    .iter()
                    .map(|&(d, target)| Stage {
                        duration: Secs(d),
                        target,
                    })
                    .collect(),
            },
            segment: ExecutionSegment::whole(),
            behaviour,
            ..Slice::default()
        };
        let n = slice.schedule.peak();
        (slice, (0..n).collect())
    }

    #[test]
    fn the_stages_start_and_stop_listeners_in_their_order() {
        // Ramp to 100 over 10 s, hold 10 s, ramp to 40 over 10 s.
        let (s, ids) = slice(
            &[(10.0, 100), (10.0, 100), (10.0, 40)],
            Behaviour::default(),
        );
        let mut crowd = Crowd::new(&s, ids);
        let mut seats = Seats::default();
        crowd.step(5_000_000, &mut seats);
        assert_eq!(seats.on, 50);
        assert!(!crowd.due(5_000_000, seats.on));
        crowd.step(15_000_000, &mut seats);
        assert_eq!(seats.on, 100);
        crowd.step(25_000_000, &mut seats);
        assert_eq!((seats.on, seats.starts, seats.stops), (70, 100, 30));
        // Due at once while the stages disagree with the listeners on; soon while ramping.
        assert_eq!(crowd.wake_us(25_000_000, 69, 26_000_000), 25_001_000);
        assert_eq!(crowd.wake_us(25_000_000, 70, 26_000_000), 25_002_000);
        assert_eq!(crowd.wake_us(15_000_000, 100, 16_000_000), 16_000_000);
    }

    #[test]
    fn one_step_starts_at_most_a_batch() {
        let (s, ids) = slice(&[(1.0, 3000)], Behaviour::default());
        let mut crowd = Crowd::new(&s, ids);
        let mut seats = Seats::default();
        crowd.step(2_000_000, &mut seats);
        assert_eq!(seats.on, START_BATCH);
        crowd.step(2_000_000, &mut seats);
        crowd.step(2_000_000, &mut seats);
        assert_eq!(seats.on, 3000);
    }

    #[test]
    fn churn_restarts_its_rate_in_hold_seconds_and_the_storm_everyone_once() {
        let behaviour = Behaviour {
            churn_rate: Some(10.0),
            storm_at: Some(Secs(8.0)),
            ..Behaviour::default()
        };
        let (s, ids) = slice(&[(1.0, 50), (10.0, 50)], behaviour);
        let mut crowd = Crowd::new(&s, ids);
        let mut seats = Seats::default();
        crowd.step(900_000, &mut seats);
        assert_eq!(
            (seats.on, seats.restarts),
            (45, 0),
            "no churn while ramping"
        );
        crowd.step(1_000_000, &mut seats);
        assert_eq!(seats.on, 50);
        // Second 1 holds: the 100 ms since the last step churn 1; then two hold seconds in
        // steps of 100 ms, 20 more.
        for k in 1..=20 {
            crowd.step(1_000_000 + k * 100_000, &mut seats);
        }
        assert_eq!(seats.restarts, 21);
        crowd.step(8_000_000, &mut seats);
        crowd.step(8_100_000, &mut seats);
        // At most 1 s of churn (10) at the first step after the gap, the storm's 50 once, and
        // the next step's 1.
        assert_eq!(seats.restarts, 21 + 10 + 50 + 1);
    }

    #[test]
    fn sessions_that_end_rejoin() {
        let behaviour = Behaviour {
            session_min: Some(Secs(1.0)),
            session_max: Some(Secs(2.0)),
            ..Behaviour::default()
        };
        let (s, ids) = slice(&[(1.0, 10), (10.0, 10)], behaviour);
        let mut crowd = Crowd::new(&s, ids);
        let mut seats = Seats::default();
        crowd.step(1_000_000, &mut seats);
        seats.leave_at[3] = Some(2_500_000);
        crowd.step(2_000_000, &mut seats);
        assert_eq!(seats.restarts, 0);
        crowd.step(2_600_000, &mut seats);
        assert_eq!(seats.restarts, 1);
        assert_eq!(crowd.wake_us(2_600_000, 10, 3_000_000), 2_700_000);
    }
}
