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

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Seconds in an hour: the span of the hourly counters.
pub const HOUR_S: i64 = 3_600;
/// Seconds in a day: the span of the daily counters.
pub const DAY_S: i64 = 86_400;

/// One counter of `audience_uniques`: span (Unix seconds, [`HOUR_S`] or [`DAY_S`]), the
/// period's start (Unix seconds), mount (empty: all mounts), path, country (empty: unknown),
/// player.
pub type UniqueKey = (i64, i64, String, String, String, String);

/// The listeners seen per period, and the counters their first sessions increment.
#[derive(Debug, Default)]
pub struct Uniques {
    /// (span, period start, hash of mount and address): listeners already counted.
    seen: HashSet<(i64, i64, u64)>,
    /// The latest hour and day starts seen (Unix seconds); older periods are forgotten.
    hour: i64,
    day: i64,
}

/// What a session start says about its listener.
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    /// Start, Unix milliseconds.
    pub started_ms: i64,
    /// The mount.
    pub mount: &'a str,
    /// The address as stored (`[ledger] address` policy).
    pub address: &'a str,
    /// `icy`, `hls` or `whep`.
    pub path: &'a str,
    /// Country code, empty when unknown.
    pub country: &'a str,
    /// Player family.
    pub player: &'a str,
}

fn listener(mount: &str, address: &str) -> u64 {
    let mut h = DefaultHasher::new();
    mount.hash(&mut h);
    address.hash(&mut h);
    h.finish()
}

impl Uniques {
    /// No listener seen yet.
    pub fn new() -> Uniques {
        Uniques::default()
    }

    /// Records a session start; returns the counters it increments by one (none for a
    /// listener already counted in every period).
    pub fn arrive(&mut self, a: Arrival<'_>) -> Vec<UniqueKey> {
        let mut out = Vec::new();
        for (span, at, mount) in self.periods(a.started_ms, a.mount) {
            if self.seen.insert((span, at, listener(mount, a.address))) {
                out.push((
                    span,
                    at,
                    mount.to_owned(),
                    a.path.to_owned(),
                    a.country.to_owned(),
                    a.player.to_owned(),
                ));
            }
        }
        out
    }

    /// Records a listener already counted (read back at start from today's sessions).
    pub fn remember(&mut self, started_ms: i64, mount: &str, address: &str) {
        for (span, at, mount) in self.periods(started_ms, mount) {
            self.seen.insert((span, at, listener(mount, address)));
        }
    }

    /// How many (period, listener) pairs are remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The four periods a start at `started_ms` counts in (its hour and day, on its mount and
    /// over all mounts); forgets hours before the previous hour and days before the previous
    /// day.
    fn periods<'m>(&mut self, started_ms: i64, mount: &'m str) -> [(i64, i64, &'m str); 4] {
        let secs = started_ms.div_euclid(1000);
        let day = secs.div_euclid(DAY_S) * DAY_S;
        let hour = secs.div_euclid(HOUR_S) * HOUR_S;
        // Keep the previous hour and day (a start a little late), forget the rest: memory is
        // about two hours and two days of listeners.
        if hour > self.hour || day > self.day {
            self.hour = self.hour.max(hour);
            self.day = self.day.max(day);
            let (h, d) = (self.hour, self.day);
            self.seen.retain(|(span, at, _)| {
                if *span == HOUR_S {
                    *at >= h - HOUR_S
                } else {
                    *at >= d - DAY_S
                }
            });
        }
        [
            (HOUR_S, hour, mount),
            (HOUR_S, hour, ""),
            (DAY_S, day, mount),
            (DAY_S, day, ""),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64, mount: &'static str, address: &'static str) -> Arrival<'static> {
        Arrival {
            started_ms: ms,
            mount,
            address,
            path: "icy",
            country: "DE",
            player: "VLC",
        }
    }

    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    #[test]
    fn a_listener_counts_once_per_hour_and_day_per_mount_and_overall() {
        let mut u = Uniques::new();
        let first = u.arrive(at(T0, "/a", "x"));
        assert_eq!(first.len(), 4);
        assert!(first.contains(&(
            DAY_S,
            T0 / 1000,
            String::new(),
            "icy".into(),
            "DE".into(),
            "VLC".into()
        )));
        // Again the same hour: nothing new.
        assert!(u.arrive(at(T0 + 60_000, "/a", "x")).is_empty());
        // Another mount: new on that mount only.
        let other = u.arrive(at(T0 + 120_000, "/b", "x"));
        assert_eq!(other.len(), 2);
        assert!(other.iter().all(|k| k.2 == "/b"));
        // The next hour: its hour counters only.
        let later = u.arrive(at(T0 + 3_600_000, "/a", "x"));
        assert_eq!(later.len(), 2);
        assert!(later.iter().all(|k| k.0 == HOUR_S));
        // Another listener: all four.
        assert_eq!(u.arrive(at(T0, "/a", "y")).len(), 4);
    }

    #[test]
    fn remembered_listeners_are_not_counted_again() {
        let mut u = Uniques::new();
        u.remember(T0, "/a", "x");
        assert!(u.arrive(at(T0 + 1_000, "/a", "x")).is_empty());
    }

    #[test]
    fn periods_older_than_a_day_are_forgotten() {
        let mut u = Uniques::new();
        u.arrive(at(T0, "/a", "x"));
        assert_eq!(u.len(), 4);
        u.arrive(at(T0 + 2 * 3_600_000, "/a", "y"));
        assert_eq!(u.len(), 6, "the first hour is forgotten, its day kept");
        u.arrive(at(T0 + 2 * 86_400_000, "/a", "y"));
        assert_eq!(u.len(), 4, "only the new day's periods remain");
        // The listener of two days ago is new today.
        assert_eq!(u.arrive(at(T0 + 2 * 86_400_000, "/a", "x")).len(), 4);
    }
}
