//! Unique listeners, counted as they arrive: the writer remembers which listeners (stored
//! addresses, so under `hashed` one address per UTC day) it has seen in the current hour and
//! day, per mount and over all mounts, and a session start by a listener not seen yet in a
//! period adds one to that period's counter in `audience_uniques`. A report then sums a few
//! counter rows instead of counting distinct addresses over every session of its range, so
//! it answers in the same time over ten million sessions as over a thousand.
//!
//! A listener is attributed to the path, country and player of its first session in the
//! period. Each server counts the listeners it served: a listener who reaches two servers of a
//! cluster on one day counts once on each. Pure: no clock, no database.

use std::hash::BuildHasher;

use foldhash::fast::FixedState;
use foldhash::{HashMap, HashSet};
use smallvec::SmallVec;

/// Seconds in an hour: the span of the hourly counters.
pub const HOUR_S: i64 = 3_600;
/// Seconds in a day: the span of the daily counters.
pub const DAY_S: i64 = 86_400;

/// One counter of `audience_uniques` a start increments, as this module decides it: the
/// writer adds the start's mount (or none, [`Counter::per_mount`] false), path, country and
/// player to make its row key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Counter {
    /// The period's span, seconds ([`HOUR_S`] or [`DAY_S`]).
    pub span_s: i64,
    /// The period's start, Unix seconds.
    pub at_s: i64,
    /// The start's own mount's counter; `false`: the counter over all mounts.
    pub per_mount: bool,
}

/// The listeners seen per period, and the counters their first sessions increment.
#[derive(Debug, Default)]
pub struct Uniques {
    /// Per period (span, start): the listeners already counted, as 64-bit hashes of mount
    /// (empty: all mounts) and stored address. Hashes, not strings: one small entry per
    /// listener and period, compared as integers (a collision, about one in 2^64 per pair,
    /// would miss one listener).
    seen: HashMap<(i64, i64), HashSet<u64>>,
    /// The latest hour and day starts seen (Unix seconds); older periods are forgotten.
    hour: i64,
    day: i64,
}

/// The hash of a listener (mount, stored address): fixed within the process, which is all
/// the sets need (they are rebuilt from the sessions at each start, [`Uniques::remember`]).
fn listener(mount: &str, address: &str) -> u64 {
    FixedState::with_seed(0x7468_726f_6e67).hash_one((mount, address))
}

impl Uniques {
    /// No listener seen yet.
    pub fn new() -> Uniques {
        Uniques::default()
    }

    /// Records a session start at `started_ms` (Unix ms) on `mount` by the listener whose
    /// address is stored as `address`; returns the counters it increments by one (none for
    /// a listener already counted in every period).
    pub fn arrive(
        &mut self,
        started_ms: i64,
        mount: &str,
        address: &str,
    ) -> SmallVec<[Counter; 4]> {
        let mut out = SmallVec::new();
        let (own, all) = (listener(mount, address), listener("", address));
        for (span_s, at_s) in self.periods(started_ms) {
            let seen = self.seen.entry((span_s, at_s)).or_default();
            for (hash, per_mount) in [(own, true), (all, false)] {
                if seen.insert(hash) {
                    out.push(Counter {
                        span_s,
                        at_s,
                        per_mount,
                    });
                }
            }
        }
        out
    }

    /// Records a listener already counted (read back at start from today's sessions).
    pub fn remember(&mut self, started_ms: i64, mount: &str, address: &str) {
        self.arrive(started_ms, mount, address);
    }

    /// How many (period, listener) pairs are remembered.
    pub fn len(&self) -> usize {
        self.seen.values().map(HashSet::len).sum()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.values().all(HashSet::is_empty)
    }

    /// The two periods a start at `started_ms` counts in (its hour and its day); forgets
    /// hours before the previous hour and days before the previous day.
    fn periods(&mut self, started_ms: i64) -> [(i64, i64); 2] {
        let secs = started_ms.div_euclid(1000);
        let day = secs.div_euclid(DAY_S) * DAY_S;
        let hour = secs.div_euclid(HOUR_S) * HOUR_S;
        // Keep the previous hour and day (a start a little late), forget the rest: memory is
        // about two hours and two days of listeners.
        if hour > self.hour || day > self.day {
            self.hour = self.hour.max(hour);
            self.day = self.day.max(day);
            let (h, d) = (self.hour, self.day);
            self.seen.retain(|(span, at), _| {
                if *span == HOUR_S {
                    *at >= h - HOUR_S
                } else {
                    *at >= d - DAY_S
                }
            });
        }
        [(HOUR_S, hour), (DAY_S, day)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(
        ms: i64,
        mount: &'static str,
        address: &'static str,
    ) -> (i64, &'static str, &'static str) {
        (ms, mount, address)
    }

    fn arrive(u: &mut Uniques, (ms, mount, address): (i64, &str, &str)) -> Vec<Counter> {
        u.arrive(ms, mount, address).into_vec()
    }

    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    #[test]
    fn a_listener_counts_once_per_hour_and_day_per_mount_and_overall() {
        let mut u = Uniques::new();
        let first = arrive(&mut u, at(T0, "/a", "x"));
        assert_eq!(first.len(), 4);
        assert!(first.contains(&Counter {
            span_s: DAY_S,
            at_s: T0 / 1000,
            per_mount: false,
        }));
        // Again the same hour: nothing new.
        assert!(arrive(&mut u, at(T0 + 60_000, "/a", "x")).is_empty());
        // Another mount: new on that mount only.
        let other = arrive(&mut u, at(T0 + 120_000, "/b", "x"));
        assert_eq!(other.len(), 2);
        assert!(other.iter().all(|k| k.per_mount));
        // The next hour: its hour counters only.
        let later = arrive(&mut u, at(T0 + 3_600_000, "/a", "x"));
        assert_eq!(later.len(), 2);
        assert!(later.iter().all(|k| k.span_s == HOUR_S));
        // Another listener: all four.
        assert_eq!(arrive(&mut u, at(T0, "/a", "y")).len(), 4);
    }

    #[test]
    fn remembered_listeners_are_not_counted_again() {
        let mut u = Uniques::new();
        u.remember(T0, "/a", "x");
        assert!(arrive(&mut u, at(T0 + 1_000, "/a", "x")).is_empty());
    }

    #[test]
    fn periods_older_than_a_day_are_forgotten() {
        let mut u = Uniques::new();
        arrive(&mut u, at(T0, "/a", "x"));
        assert_eq!(u.len(), 4);
        arrive(&mut u, at(T0 + 2 * 3_600_000, "/a", "y"));
        assert_eq!(u.len(), 6, "the first hour is forgotten, its day kept");
        arrive(&mut u, at(T0 + 2 * 86_400_000, "/a", "y"));
        assert_eq!(u.len(), 4, "only the new day's periods remain");
        // The listener of two days ago is new today.
        assert_eq!(arrive(&mut u, at(T0 + 2 * 86_400_000, "/a", "x")).len(), 4);
    }
}
