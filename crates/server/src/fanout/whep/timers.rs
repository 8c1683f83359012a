//! The WHEP engine's timer wheel in its simplest sound form: a min-heap of (deadline, session
//! key, generation) with lazy deletion, so the engine wakes only the sessions whose str0m
//! timeout is due instead of scanning every `Rtc` on every loop turn (which made each wake
//! O(sessions)). Rescheduling a key bumps its generation; stale heap entries are skipped when
//! they surface. Pure: `now` is passed in.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Deadlines of sessions identified by a small integer key (a slot index).
#[derive(Debug, Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(Instant, usize, u32)>>,
    /// Per key: its current generation and deadline (`None`: not scheduled).
    current: Vec<(u32, Option<Instant>)>,
}

impl Timers {
    /// Sets `key`'s deadline to `at`, replacing any earlier one. Pushing the same deadline
    /// again is a no-op, so the heap does not grow while a session's timeout stands still.
    pub fn schedule(&mut self, key: usize, at: Instant) {
        if self.current.len() <= key {
            self.current.resize(key + 1, (0, None));
        }
        let entry = &mut self.current[key];
        if entry.1 == Some(at) {
            return;
        }
        entry.0 = entry.0.wrapping_add(1);
        entry.1 = Some(at);
        self.heap.push(Reverse((at, key, entry.0)));
        // Lazy deletion leaves stale entries behind: rebuild when they dominate.
        if self.heap.len() > 64 && self.heap.len() > 4 * self.current.len() {
            self.compact();
        }
    }

    /// Forgets `key` (its session closed); its heap entries become stale.
    pub fn cancel(&mut self, key: usize) {
        if let Some(entry) = self.current.get_mut(key) {
            entry.0 = entry.0.wrapping_add(1);
            entry.1 = None;
        }
    }

    /// The key of a session due at `now` (deadline ≤ `now`), unscheduling it; `None` when no
    /// session is due. Earliest deadline first.
    pub fn pop_due(&mut self, now: Instant) -> Option<usize> {
        while let Some(Reverse((at, key, generation))) = self.heap.peek().copied() {
            if !self.is_current(at, key, generation) {
                self.heap.pop();
                continue;
            }
            if at > now {
                return None;
            }
            self.heap.pop();
            self.current[key].1 = None;
            return Some(key);
        }
        None
    }

    /// The earliest deadline scheduled, if any.
    pub fn next(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, key, generation))) = self.heap.peek().copied() {
            if self.is_current(at, key, generation) {
                return Some(at);
            }
            self.heap.pop();
        }
        None
    }

    /// The deadline of `key`, if scheduled.
    #[cfg(test)]
    pub fn deadline(&self, key: usize) -> Option<Instant> {
        self.current.get(key).and_then(|e| e.1)
    }

    fn is_current(&self, at: Instant, key: usize, generation: u32) -> bool {
        self.current
            .get(key)
            .is_some_and(|e| e.0 == generation && e.1 == Some(at))
    }

    fn compact(&mut self) {
        let current = &self.current;
        self.heap.retain(|Reverse((at, key, g))| {
            current
                .get(*key)
                .is_some_and(|e| e.0 == *g && e.1 == Some(*at))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_due_sessions_come_out_earliest_first() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut t = Timers::default();
        t.schedule(3, ms(30));
        t.schedule(1, ms(10));
        t.schedule(2, ms(20));
        assert_eq!(t.next(), Some(ms(10)));
        assert_eq!(t.pop_due(ms(5)), None);
        assert_eq!(t.pop_due(ms(20)), Some(1));
        assert_eq!(t.pop_due(ms(20)), Some(2));
        assert_eq!(t.pop_due(ms(20)), None);
        assert_eq!(t.next(), Some(ms(30)));
        assert_eq!(t.deadline(1), None, "popped: unscheduled");
    }

    #[test]
    fn rescheduling_and_cancelling_supersede_earlier_deadlines() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut t = Timers::default();
        t.schedule(0, ms(10));
        t.schedule(0, ms(50)); // later: the 10 ms entry is stale
        t.schedule(1, ms(40));
        t.schedule(1, ms(5)); // earlier
        t.schedule(2, ms(1));
        t.cancel(2);
        assert_eq!(t.next(), Some(ms(5)));
        assert_eq!(t.pop_due(ms(45)), Some(1));
        assert_eq!(t.pop_due(ms(45)), None, "0 is due at 50, 2 was cancelled");
        assert_eq!(t.deadline(0), Some(ms(50)));
        assert_eq!(t.pop_due(ms(50)), Some(0));
        assert_eq!(t.next(), None);
        // A key reused after a cancel is scheduled afresh.
        t.schedule(2, ms(60));
        assert_eq!(t.pop_due(ms(60)), Some(2));
    }

    #[test]
    fn stale_entries_do_not_pile_up() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        for i in 0..10_000u64 {
            t.schedule((i % 4) as usize, t0 + Duration::from_millis(i));
        }
        assert!(t.heap.len() <= 64 + 4 * 4, "heap holds {}", t.heap.len());
        // The same deadline twice adds nothing.
        let n = t.heap.len();
        t.schedule(0, t.deadline(0).unwrap());
        assert_eq!(t.heap.len(), n);
    }
}
