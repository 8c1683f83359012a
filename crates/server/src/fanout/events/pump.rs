//! What turns mount changes into events: a thread that looks at the registry's public mounts
//! every [`POLL`] and publishes `mount` (a mount started), `title` (its ICY generation moved:
//! whatever set it, an ICY update, admin metadata, an Ogg comment or a relay's upstream),
//! `listeners` (coalesced to at most one per mount per [`LISTENERS_EVERY`], the last value
//! wins) and `mount_stop`. A hidden mount is treated as absent, so it never appears.
//!
//! Watching rather than hooking keeps every way a title or a mount changes covered by one
//! rule, with no call from the mount layer up into the fan-out. The decisions are the pure
//! [`Tracker::step`], unit-tested with `now` passed in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often the registry is looked at (so a change is published within this delay).
pub const POLL: Duration = Duration::from_millis(50);

/// Least time between two `listeners` events of one mount.
pub const LISTENERS_EVERY: Duration = Duration::from_secs(1);

/// A public mount as the tracker sees it at one look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The mount's incarnation id.
    pub id: u64,
    /// Its ICY metadata generation (moves on every title update).
    pub title_gen: u64,
    /// Its listener count.
    pub listeners: u32,
}

/// An event to publish, about the mount of incarnation `id` (or the name of one gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The mount started (or became public): publish its whole state.
    Start(u64),
    /// Its title changed.
    Title(u64),
    /// Its listener count is now this.
    Listeners(u64, u32),
    /// The mount of this name stopped (or became hidden).
    Stop(String),
}

#[derive(Debug)]
struct Seen {
    name: String,
    title_gen: u64,
    listeners: u32,
    listeners_at: Instant,
}

/// The last published state of each public mount.
#[derive(Debug, Default)]
pub struct Tracker {
    seen: HashMap<u64, Seen>,
}

impl Tracker {
    /// Compares the public mounts `now` (name and facts) with what was published and returns
    /// the events that bring subscribers up to date: stops first, then starts, titles and
    /// listener counts in the order of `mounts`.
    pub fn step(&mut self, now: Instant, mounts: &[(&str, Facts)]) -> Vec<Change> {
        let mut out = Vec::new();
        let gone: Vec<u64> = self
            .seen
            .keys()
            .filter(|id| !mounts.iter().any(|(_, f)| f.id == **id))
            .copied()
            .collect();
        let mut gone: Vec<(u64, String)> = gone
            .into_iter()
            .filter_map(|id| self.seen.remove(&id).map(|s| (id, s.name)))
            .collect();
        gone.sort();
        out.extend(gone.into_iter().map(|(_, name)| Change::Stop(name)));
        for (name, f) in mounts {
            match self.seen.get_mut(&f.id) {
                None => {
                    self.seen.insert(
                        f.id,
                        Seen {
                            name: (*name).to_owned(),
                            title_gen: f.title_gen,
                            listeners: f.listeners,
                            listeners_at: now,
                        },
                    );
                    out.push(Change::Start(f.id));
                }
                Some(s) => {
                    if s.title_gen != f.title_gen {
                        s.title_gen = f.title_gen;
                        out.push(Change::Title(f.id));
                    }
                    if s.listeners != f.listeners
                        && now.saturating_duration_since(s.listeners_at) >= LISTENERS_EVERY
                    {
                        s.listeners = f.listeners;
                        s.listeners_at = now;
                        out.push(Change::Listeners(f.id, f.listeners));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(id: u64, title_gen: u64, listeners: u32) -> Facts {
        Facts {
            id,
            title_gen,
            listeners,
        }
    }

    #[test]
    fn start_title_stop() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        assert_eq!(t.step(t0, &[("/a", f(1, 0, 0))]), vec![Change::Start(1)]);
        assert_eq!(t.step(t0, &[("/a", f(1, 0, 0))]), vec![]);
        assert_eq!(t.step(t0, &[("/a", f(1, 1, 0))]), vec![Change::Title(1)]);
        assert_eq!(t.step(t0, &[]), vec![Change::Stop("/a".into())]);
        assert_eq!(t.step(t0, &[]), vec![]);
    }

    #[test]
    fn a_restarted_mount_stops_then_starts() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        t.step(t0, &[("/a", f(1, 0, 0))]);
        assert_eq!(
            t.step(t0, &[("/a", f(2, 0, 0))]),
            vec![Change::Stop("/a".into()), Change::Start(2)]
        );
    }

    #[test]
    fn listener_counts_are_coalesced_to_one_a_second_last_wins() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        t.step(t0, &[("/a", f(1, 0, 0))]);
        let ms = Duration::from_millis;
        // Within the first second after the start event: held back.
        assert_eq!(t.step(t0 + ms(100), &[("/a", f(1, 0, 1))]), vec![]);
        assert_eq!(t.step(t0 + ms(500), &[("/a", f(1, 0, 3))]), vec![]);
        assert_eq!(
            t.step(t0 + ms(1000), &[("/a", f(1, 0, 4))]),
            vec![Change::Listeners(1, 4)]
        );
        assert_eq!(t.step(t0 + ms(1200), &[("/a", f(1, 0, 5))]), vec![]);
        assert_eq!(
            t.step(t0 + ms(2000), &[("/a", f(1, 0, 5))]),
            vec![Change::Listeners(1, 5)]
        );
        // No change: nothing, however long.
        assert_eq!(t.step(t0 + ms(9000), &[("/a", f(1, 0, 5))]), vec![]);
    }
}
