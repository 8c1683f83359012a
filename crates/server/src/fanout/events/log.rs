//! The event log: every event of the process, encoded once into shared [`Bytes`], numbered by
//! one increasing sequence and kept in a ring of the last [`RING`] events. Subscribers are
//! cursors on it (the sequence number of the next event they need); a publish swaps in a new
//! immutable [`Ring`] (`ArcSwap`, as a mount's queue snapshot), so shards read it without a
//! lock shared with the publisher or each other.
//!
//! The sequence starts at the process's start time in microseconds since the epoch, so an id a
//! client kept from an earlier process is always older than this one's ring: it gets a
//! snapshot, never a wrong replay.

use std::collections::VecDeque;
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::Mutex;

/// Events retained for `Last-Event-ID` replay and for subscribers that are behind.
pub const RING: usize = 512;

/// One encoded event.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its id (the `id:` field).
    pub seq: u64,
    /// The mount it is about.
    pub mount: Arc<str>,
    /// The whole frame, as written to every subscriber.
    pub bytes: Bytes,
}

/// The retained events, oldest first, as published at one moment.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    /// Events `first..=last`, contiguous ids.
    pub events: VecDeque<Event>,
    /// The id of the last event published (the base id when none was yet).
    pub last: u64,
}

impl Ring {
    /// The id of the oldest retained event (`last + 1` when the ring is empty).
    pub fn first(&self) -> u64 {
        self.events.front().map_or(self.last + 1, |e| e.seq)
    }

    /// The retained events from id `next` on (empty when `next` is past the end; all of them
    /// when `next` is older than the ring).
    pub fn from(&self, next: u64) -> impl Iterator<Item = &Event> {
        let skip = next.saturating_sub(self.first()) as usize;
        self.events.iter().skip(skip)
    }

    /// Where a subscriber resuming after event `last_seen` (its `Last-Event-ID`) starts:
    /// `Some(next id)` when every event after it is still retained (replay only those),
    /// `None` when it is unknown, too old or from another process (send the snapshot).
    pub fn resume_after(&self, last_seen: u64) -> Option<u64> {
        (last_seen <= self.last && last_seen + 1 >= self.first()).then_some(last_seen + 1)
    }
}

/// The process's event log: publishers append, shards read [`Ring`]s.
#[derive(Debug)]
pub struct EventLog {
    ring: ArcSwap<Ring>,
    write: Mutex<()>,
}

impl EventLog {
    /// An empty log whose first event will have id `base + 1`.
    pub fn new(base: u64) -> EventLog {
        EventLog {
            ring: ArcSwap::from_pointee(Ring {
                events: VecDeque::new(),
                last: base,
            }),
            write: Mutex::new(()),
        }
    }

    /// An empty log numbered from the current time in microseconds.
    pub fn starting_now() -> EventLog {
        let base = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        EventLog::new(base)
    }

    /// The ring as published now.
    pub fn load(&self) -> Arc<Ring> {
        self.ring.load_full()
    }

    /// Appends one event about `mount` of type `event` with JSON `data` (one line), encoded
    /// once; returns its id.
    pub fn publish(&self, mount: &Arc<str>, event: &str, data: &str) -> u64 {
        let _w = self.write.lock();
        let old = self.ring.load_full();
        let seq = old.last + 1;
        let mut events = old.events.clone();
        if events.len() >= RING {
            events.pop_front();
        }
        events.push_back(Event {
            seq,
            mount: mount.clone(),
            bytes: Bytes::from(throng_proto::sse::frame(seq, event, data)),
        });
        self.ring.store(Arc::new(Ring { events, last: seq }));
        seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_increase_and_the_ring_keeps_the_last() {
        let log = EventLog::new(100);
        let m: Arc<str> = "/a".into();
        assert_eq!(log.publish(&m, "title", "{}"), 101);
        for _ in 0..RING + 10 {
            log.publish(&m, "title", "{}");
        }
        let r = log.load();
        assert_eq!(r.events.len(), RING);
        assert_eq!(r.last, 101 + RING as u64 + 10);
        assert_eq!(r.first(), r.last + 1 - RING as u64);
        assert_eq!(r.from(r.last).count(), 1);
        assert_eq!(r.from(r.last + 1).count(), 0);
        assert_eq!(r.from(0).count(), RING);
    }

    #[test]
    fn resume_replays_only_what_is_retained() {
        let log = EventLog::new(1000);
        let m: Arc<str> = "/a".into();
        // Nothing published yet: the base id itself resumes with nothing to replay.
        assert_eq!(log.load().resume_after(1000), Some(1001));
        for _ in 0..5 {
            log.publish(&m, "title", "{}");
        }
        let r = log.load();
        assert_eq!(r.resume_after(1002), Some(1003));
        assert_eq!(r.resume_after(1005), Some(1006));
        assert_eq!(r.resume_after(1000), Some(1001));
        // Older than the ring (another process's id) or from the future: snapshot.
        assert_eq!(r.resume_after(999), None);
        assert_eq!(r.resume_after(1006), None);
        assert_eq!(r.resume_after(3), None);
    }
}
