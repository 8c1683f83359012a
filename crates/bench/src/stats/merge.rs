//! Merging ticks second by second: the one merge of every level (a host merges its engines'
//! ticks, the controller its hosts'), exact because a [`Snapshot`] merges by addition.
//!
//! A [`SecondMerger`] knows its *streams* up front (one engine's ticks of one group, or one
//! host's of one group) and hands out each second, merged per group, once every stream has
//! reported it. A stream that ended (its `done` tick) or was lost (a worker process that died,
//! an agent cut off) is not waited for: its running totals carry on into the later seconds,
//! its states count as 0 (it holds no listener any more), so no listener is counted twice and
//! none vanishes from the totals. Engines tick at the same instants of the run's one clock
//! and never skip a second (a late engine reports late, not less), so a second's ticks all
//! arrive, or their stream is lost.

use crate::stats::{GroupTick, Snapshot};
use std::collections::BTreeMap;

/// One stream's state.
#[derive(Debug, Clone, Default)]
struct Stream {
    group: u16,
    /// Its last snapshot (for carrying its totals on).
    last: Option<Snapshot>,
    /// The second of its `done` tick.
    done_at: Option<u32>,
    /// The second it was lost at (its last reported second + 1).
    lost_at: Option<u32>,
}

/// A merged second: every group's snapshot (index = group).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergedSecond {
    /// The second.
    pub second: u32,
    /// Each group's merge over its streams.
    pub groups: Vec<Snapshot>,
    /// Every stream has ended or was lost by this second: the run's last second.
    pub last: bool,
}

/// Merges the ticks of a fixed set of streams (see the module comment).
#[derive(Debug, Default)]
pub struct SecondMerger {
    streams: Vec<Stream>,
    groups: usize,
    pending: BTreeMap<u32, Vec<Option<Snapshot>>>,
    /// The next second to hand out.
    next: u32,
}

/// The totals of `s` with no listener states and no histograms: what a stream that stopped
/// contributes to later seconds.
fn carried(s: &Snapshot) -> Snapshot {
    let mut c = s.clone();
    c.want = 0;
    c.connecting = 0;
    c.streaming = 0;
    c.stalled = 0;
    c.starved = 0;
    c.down = 0;
    c.stalled_held_bytes = 0;
    c.clear_hists();
    c
}

impl SecondMerger {
    /// A merger of streams, each of the group at its index in `stream_groups`, for `groups`
    /// groups in all.
    pub fn new(stream_groups: &[u16], groups: usize) -> SecondMerger {
        SecondMerger {
            streams: stream_groups
                .iter()
                .map(|&group| Stream {
                    group,
                    ..Stream::default()
                })
                .collect(),
            groups,
            pending: BTreeMap::new(),
            next: 0,
        }
    }

    /// Streams in all.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether there is no stream.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Takes stream `stream`'s tick (a tick of a stopped stream, or for a second already
    /// handed out, is dropped).
    pub fn add(&mut self, stream: usize, tick: GroupTick) {
        let n = self.streams.len();
        let Some(st) = self.streams.get_mut(stream) else {
            return;
        };
        if st.done_at.is_some() || st.lost_at.is_some() || tick.second < self.next {
            return;
        }
        if tick.done {
            st.done_at = Some(tick.second);
        }
        st.last = Some(tick.snap.clone());
        self.pending
            .entry(tick.second)
            .or_insert_with(|| vec![None; n])[stream] = Some(tick.snap);
    }

    /// Marks stream `stream` lost: its ticks from the next second on are not waited for.
    /// Returns its last snapshot (what it held when it was lost), if it reported any.
    pub fn lose(&mut self, stream: usize) -> Option<Snapshot> {
        let next = self.next;
        let st = self.streams.get_mut(stream)?;
        if st.done_at.is_some() || st.lost_at.is_some() {
            return None;
        }
        // Its ticks already in count; from the first second it did not report, it is gone.
        let reported = self
            .pending
            .iter()
            .filter(|(_, v)| v[stream].is_some())
            .map(|(&s, _)| s + 1)
            .max()
            .unwrap_or(next);
        st.lost_at = Some(reported.max(next));
        st.last.clone()
    }

    /// Whether stream `stream` ended or was lost.
    pub fn stopped(&self, stream: usize) -> bool {
        self.streams
            .get(stream)
            .is_none_or(|s| s.done_at.is_some() || s.lost_at.is_some())
    }

    /// Whether every stream ended or was lost, and every second was handed out.
    pub fn finished(&self) -> bool {
        self.pending.is_empty() && (0..self.streams.len()).all(|i| self.stopped(i))
    }

    /// The next complete second, merged, if there is one (call until `None`).
    pub fn pop(&mut self) -> Option<MergedSecond> {
        let s = self.next;
        let row = self.pending.get(&s);
        let mut groups = vec![Snapshot::default(); self.groups];
        let mut all_stopped_here = true;
        for (k, st) in self.streams.iter().enumerate() {
            let got = row.and_then(|r| r[k].as_ref());
            let stopped_before =
                st.done_at.is_some_and(|d| d < s) || st.lost_at.is_some_and(|l| l <= s);
            let snap = match (got, stopped_before) {
                (Some(snap), _) => snap.clone(),
                (None, true) => st.last.as_ref().map(carried).unwrap_or_default(),
                // Not reported yet, still running: the second is not complete.
                (None, false) => return None,
            };
            let ends_here =
                st.done_at.is_some_and(|d| d <= s) || st.lost_at.is_some_and(|l| l <= s + 1);
            all_stopped_here &= ends_here;
            if let Some(g) = groups.get_mut(st.group as usize) {
                g.merge(&snap);
            }
        }
        // Nothing can complete a second nobody reports and everyone stopped before.
        if row.is_none() && all_stopped_here && self.pending.is_empty() {
            return None;
        }
        self.pending.remove(&s);
        self.next += 1;
        Some(MergedSecond {
            second: s,
            groups,
            last: all_stopped_here && self.pending.is_empty(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(group: u16, second: u32, streaming: u32, connects: u64, done: bool) -> GroupTick {
        let mut t = GroupTick {
            group,
            second,
            done,
            ..GroupTick::default()
        };
        t.snap.streaming = streaming;
        t.snap.want = streaming;
        t.snap.connects = connects;
        t.snap.ttfb.record_us(1000);
        t
    }

    #[test]
    fn seconds_come_out_once_every_stream_has_them() {
        // Streams 0 and 1 of group 0, stream 2 of group 1.
        let mut m = SecondMerger::new(&[0, 0, 1], 2);
        m.add(0, tick(0, 0, 5, 5, false));
        m.add(2, tick(1, 0, 3, 3, false));
        assert_eq!(m.pop(), None, "stream 1 has not reported second 0");
        m.add(1, tick(0, 0, 4, 4, false));
        m.add(1, tick(0, 1, 4, 4, false));
        let s0 = m.pop().unwrap();
        assert_eq!(s0.second, 0);
        assert_eq!((s0.groups[0].streaming, s0.groups[1].streaming), (9, 3));
        assert_eq!(s0.groups[0].ttfb.count(), 2);
        assert_eq!(m.pop(), None);
        // Stream 2 ends at second 1; stream 0 is lost after second 0.
        m.add(2, tick(1, 1, 0, 3, true));
        assert_eq!(m.lose(0).unwrap().connects, 5);
        let s1 = m.pop().unwrap();
        // The lost stream's totals carry on; its listeners are no longer counted.
        assert_eq!((s1.groups[0].streaming, s1.groups[0].connects), (4, 9));
        assert!(!s1.last);
        m.add(1, tick(0, 2, 4, 6, true));
        let s2 = m.pop().unwrap();
        assert_eq!((s2.groups[0].connects, s2.groups[1].connects), (11, 3));
        assert!(s2.last);
        assert!(m.finished());
        assert_eq!(m.pop(), None);
    }
}
