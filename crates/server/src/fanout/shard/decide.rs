//! The decisions a fan-out shard makes, as pure functions of plain values: when the shard's
//! next tick is due and which bucket of listeners it walks ([`Ticker`]); at each visit of a
//! listener, whether it is past its deadline (max-listener-duration, kept in whole seconds since
//! the shard's epoch: [`visit`], which applies the audience follower's rules,
//! `audience::follow::step`, shared with the HLS packager and the WHEP engine); after a write,
//! whether more is due at once ([`more_due`]); which ticks visit a downstream relay ([`extra_tick_visit`]); whether a burst makes the queue run ahead of the regular visits
//! and which listeners then get an extra one ([`runs_ahead`], [`needs_extra_visit`]). `now` is always passed in: nothing here reads the clock, touches a
//! socket or allocates, so `shard.rs` reads the clock once per pass of its loop, does only what
//! these functions say, and every rule is unit-tested below with made-up instants.

use std::time::{Duration, Instant};

use crate::audience::follow::{self, FollowerView};
pub use crate::audience::follow::{idle, move_ready, move_write_cap, MountView, Step as Verdict};
use crate::config::LagPolicy;

/// Buckets per write interval: a listener is visited once per interval, in the bucket
/// `key % BUCKETS`, so the shard's work is spread evenly over time.
pub const BUCKETS: usize = 10;

/// The shard's timer: one tick every `write-interval / BUCKETS`, each walking the next bucket.
/// A tick that comes more than a tick late restarts the cadence from then rather than
/// running the missed ticks back to back.
#[derive(Debug, Clone, Copy)]
pub struct Ticker {
    /// When the next tick is due.
    next: Instant,
    /// Time between ticks.
    tick: Duration,
    /// The bucket the next tick walks.
    bucket: usize,
}

impl Ticker {
    /// A timer started at `start` whose ticks walk every bucket once per `write_interval`; the
    /// first tick (bucket 0) is due one tick after `start`.
    #[inline]
    pub fn new(start: Instant, write_interval: Duration) -> Ticker {
        let tick = write_interval / BUCKETS as u32;
        Ticker {
            next: start + tick,
            tick,
            bucket: 0,
        }
    }

    /// How long to wait at `now` for the next tick (zero when it is due).
    #[inline]
    pub fn timeout(&self, now: Instant) -> Duration {
        self.next.saturating_duration_since(now)
    }

    /// At `now`: the bucket to walk if a tick is due (at or after its time), and the timer
    /// moves on to the next one; `None` if not yet.
    #[inline]
    pub fn due(&mut self, now: Instant) -> Option<usize> {
        if now < self.next {
            return None;
        }
        let bucket = self.bucket;
        self.bucket = (bucket + 1) % BUCKETS;
        self.next += self.tick;
        if self.next < now {
            self.next = now + self.tick;
        }
        Some(bucket)
    }
}

/// The queue runs ahead of the regular visits: at `advance` bytes per tick (what the mount
/// published since the shard's previous tick), one write interval ([`BUCKETS`] ticks) brings
/// more than half the queue's retained `span` (head − tail, bytes), so a listener visited only
/// once per interval could fall behind the tail (lag over queue-size) although it reads at full
/// speed. Its shard then visits the listeners of that mount that lag ([`needs_extra_visit`])
/// at every tick until the burst passes: a burst up to queue-size per interval never drops a
/// listener that keeps up (a source flushing a backlog, a relay catching up).
#[inline]
pub fn runs_ahead(advance: u64, span: u64) -> bool {
    advance.saturating_mul(BUCKETS as u64) > span / 2
}

/// During a burst ([`runs_ahead`]): the listener at `pos` is more than a quarter of the
/// queue's `span` behind its `head` (bytes), so it is written at this tick too.
#[inline]
pub fn needs_extra_visit(pos: u64, head: u64, span: u64) -> bool {
    head.saturating_sub(pos) > span / 4
}

/// A downstream relay at slab `key` gets a visit at the tick that walks `bucket` besides its
/// own bucket's: every tick visits every relay once (`key % BUCKETS` is its own bucket, walked
/// already), so a relay is written within a tenth of the write interval of new audio.
#[inline]
pub fn extra_tick_visit(key: usize, bucket: usize) -> bool {
    key % BUCKETS != bucket
}

/// Whole seconds from `epoch` to `now` (0 if `now` is earlier), as the shard keeps its clock.
#[inline]
pub fn secs_since(epoch: Instant, now: Instant) -> u32 {
    now.saturating_duration_since(epoch).as_secs() as u32
}

/// A listener's deadline in whole seconds since the shard's `epoch`: 0 for none, at least 1
/// for any deadline (one at or before the epoch is due at the first second).
#[inline]
pub fn deadline_secs(deadline: Option<Instant>, epoch: Instant) -> u32 {
    deadline.map_or(0, |d| secs_since(epoch, d).max(1))
}

/// The listener's deadline (`deadline_s`, seconds since the epoch, 0 for none) is reached at
/// `now_s` (seconds since the epoch).
#[inline]
pub fn past_deadline(deadline_s: u32, now_s: u32) -> bool {
    deadline_s != 0 && now_s >= deadline_s
}

/// What [`visit`] needs to know about one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerView {
    /// Stream offset of the next byte to send (bytes).
    pub pos: u64,
    /// Bytes from outside the stream remain to be sent (response head, intro, header pages,
    /// the rest of a cut ICY block).
    pub pending: bool,
    /// Deadline in seconds since the shard's epoch; 0 for none.
    pub deadline_s: u32,
}

/// The verdict for listener `l` of mount `m` visited at `now` (`now_s`: the same instant in
/// whole seconds since the shard's epoch): the audience follower's step
/// (`audience::follow::step`), with the listener's deadline judged in the shard's seconds.
#[inline]
pub fn visit(
    l: ListenerView,
    m: MountView,
    now: Instant,
    now_s: u32,
    lag_policy: LagPolicy,
) -> Verdict {
    let f = FollowerView {
        pos: l.pos,
        pending: l.pending,
        past_deadline: past_deadline(l.deadline_s, now_s),
    };
    follow::step(f, m, now, lag_policy)
}

/// After a `writev` that the kernel took whole (`whole`), the listener at `pos` (bytes) is due
/// another one in the same visit if it is still behind the queue's `head` (bytes).
#[inline]
pub fn more_due(whole: bool, pos: u64, head: u64) -> bool {
    whole && pos < head
}

/// A listener is written to between its turns only when its socket becomes `writable` after
/// it was `backlogged` (a `writev` not taken whole, or refused).
#[inline]
pub fn write_on_event(writable: bool, backlogged: bool) -> bool {
    writable && backlogged
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_burst_brings_extra_visits_to_the_listeners_that_lag() {
        // 64 kbit/s: 800 bytes per 100 ms tick against a 512 kB queue: no burst.
        assert!(!runs_ahead(800, 512_000));
        // 800 kB/s: 80 kB per tick, 800 kB per interval > half the queue.
        assert!(runs_ahead(80_000, 512_000));
        // Exactly half per interval is still fine.
        assert!(!runs_ahead(25_600, 512_000));
        assert!(runs_ahead(25_601, 512_000));
        // A queue just started (empty span) runs ahead at any rate, harmlessly.
        assert!(runs_ahead(1, 0));
        assert!(needs_extra_visit(0, 128_001, 512_000));
        assert!(!needs_extra_visit(0, 128_000, 512_000));
        assert!(!needs_extra_visit(600_000, 500_000, 512_000));
    }

    use super::*;
    use crate::audience::follow::ENDED_GRACE;
    use crate::audience::EndReason;

    const SEC: Duration = Duration::from_secs(1);
    const NS: Duration = Duration::from_nanos(1);

    fn listener(pos: u64) -> ListenerView {
        ListenerView {
            pos,
            pending: false,
            deadline_s: 0,
        }
    }

    /// A live mount retaining bytes 1000..5000.
    fn live() -> MountView {
        MountView {
            tail: 1000,
            head: 5000,
            ended_at: None,
            successor: false,
        }
    }

    /// `m`, its feed ended at `at`, with or without a live fallback.
    fn ended(m: MountView, at: Instant, successor: bool) -> MountView {
        MountView {
            ended_at: Some(at),
            successor,
            ..m
        }
    }

    // The tick schedule.

    #[test]
    fn ticker_is_due_exactly_at_its_tick_and_not_before() {
        let t0 = Instant::now();
        let mut t = Ticker::new(t0, SEC);
        let tick = SEC / BUCKETS as u32;
        assert_eq!(t.timeout(t0), tick);
        assert_eq!(t.due(t0), None);
        assert_eq!(t.due(t0 + tick - NS), None);
        assert_eq!(t.timeout(t0 + tick - NS), NS);
        assert_eq!(t.timeout(t0 + tick), Duration::ZERO);
        assert_eq!(t.due(t0 + tick), Some(0));
        // Not twice for the same tick.
        assert_eq!(t.due(t0 + tick), None);
        assert_eq!(t.timeout(t0 + tick), tick);
    }

    #[test]
    fn ticker_walks_every_bucket_once_per_write_interval() {
        let t0 = Instant::now();
        let mut t = Ticker::new(t0, SEC);
        let tick = SEC / BUCKETS as u32;
        let walked: Vec<usize> = (1..=2 * BUCKETS as u32)
            .filter_map(|i| t.due(t0 + tick * i))
            .collect();
        let expected: Vec<usize> = (0..BUCKETS).chain(0..BUCKETS).collect();
        assert_eq!(walked, expected);
    }

    #[test]
    fn a_slightly_late_tick_keeps_the_cadence() {
        let t0 = Instant::now();
        let mut t = Ticker::new(t0, SEC);
        let tick = SEC / BUCKETS as u32;
        // Late by less than a tick: the next one stays on the original grid.
        assert_eq!(t.due(t0 + tick + tick / 2), Some(0));
        assert_eq!(t.timeout(t0 + tick + tick / 2), tick / 2);
        assert_eq!(t.due(t0 + tick * 2), Some(1));
    }

    #[test]
    fn a_tick_late_by_more_than_a_tick_restarts_from_now() {
        let t0 = Instant::now();
        let mut t = Ticker::new(t0, SEC);
        let tick = SEC / BUCKETS as u32;
        let late = t0 + tick * 5 + tick / 2;
        assert_eq!(t.due(late), Some(0));
        // No burst of missed ticks: the next one is a whole tick after the late one.
        assert_eq!(t.due(late + tick - NS), None);
        assert_eq!(t.due(late + tick), Some(1));
    }

    #[test]
    fn a_tick_late_by_exactly_one_tick_stays_on_the_grid() {
        let t0 = Instant::now();
        let mut t = Ticker::new(t0, SEC);
        let tick = SEC / BUCKETS as u32;
        // Due at t0+tick, run at t0+2*tick: the next (t0+2*tick) is not before now, so kept.
        assert_eq!(t.due(t0 + tick * 2), Some(0));
        assert_eq!(t.due(t0 + tick * 2), Some(1));
        assert_eq!(t.due(t0 + tick * 2), None);
    }

    // The deadline (max-listener-duration).

    #[test]
    fn deadline_secs_counts_from_the_epoch_and_is_never_zero() {
        let epoch = Instant::now();
        assert_eq!(deadline_secs(None, epoch), 0);
        assert_eq!(deadline_secs(Some(epoch), epoch), 1);
        assert_eq!(deadline_secs(Some(epoch + SEC * 2 + SEC / 2), epoch), 2);
        assert_eq!(deadline_secs(Some(epoch + SEC * 30), epoch), 30);
        // A deadline before the shard started is due at once.
        if let Some(before) = epoch.checked_sub(SEC * 5) {
            assert_eq!(deadline_secs(Some(before), epoch), 1);
        }
    }

    #[test]
    fn secs_since_truncates_and_saturates() {
        let epoch = Instant::now();
        assert_eq!(secs_since(epoch, epoch), 0);
        assert_eq!(secs_since(epoch, epoch + SEC - NS), 0);
        assert_eq!(secs_since(epoch, epoch + SEC), 1);
        assert_eq!(secs_since(epoch + SEC, epoch), 0);
    }

    #[test]
    fn no_deadline_is_never_past() {
        assert!(!past_deadline(0, 0));
        assert!(!past_deadline(0, u32::MAX));
    }

    #[test]
    fn a_deadline_is_past_exactly_at_its_second() {
        assert!(!past_deadline(30, 29));
        assert!(past_deadline(30, 30));
        assert!(past_deadline(30, 31));
    }

    // Downstream relays.

    #[test]
    fn a_relay_is_visited_exactly_once_per_tick() {
        for key in [0usize, 3, 17, 1009] {
            for bucket in 0..BUCKETS {
                // The bucket walk visits it when the bucket is its own; the extra visit
                // covers every other tick, never both.
                let walked = key % BUCKETS == bucket;
                assert_ne!(
                    walked,
                    extra_tick_visit(key, bucket),
                    "key {key} bucket {bucket}"
                );
            }
        }
    }

    // The verdict at a visit.

    /// `visit` is the audience follower's `step` (whose rules are tested in
    /// `audience/follow.rs`) with the deadline judged in the shard's whole seconds: the same
    /// verdict for every listener and mount, past its deadline exactly from its second on.
    #[test]
    fn visit_is_the_followers_step_with_the_deadline_in_seconds() {
        use crate::audience::follow::{step, FollowerView};
        let t = Instant::now();
        let mounts = [live(), ended(live(), t, true), ended(live(), t, false)];
        for m in mounts {
            for now in [t, t + ENDED_GRACE + SEC] {
                for pos in [0, 999, 1000, 4999, 5000] {
                    for pending in [false, true] {
                        for (deadline_s, now_s, past) in
                            [(0, 9, false), (7, 6, false), (7, 7, true)]
                        {
                            for policy in [LagPolicy::Drop, LagPolicy::Skip] {
                                let l = ListenerView {
                                    pos,
                                    pending,
                                    deadline_s,
                                };
                                let f = FollowerView {
                                    pos,
                                    pending,
                                    past_deadline: past,
                                };
                                assert_eq!(
                                    visit(l, m, now, now_s, policy),
                                    step(f, m, now, policy),
                                    "{l:?} {m:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(
            visit(
                ListenerView {
                    deadline_s: 7,
                    ..listener(0)
                },
                live(),
                t,
                7,
                LagPolicy::Skip
            ),
            Verdict::End(EndReason::TimeLimit)
        );
    }

    // Writes within a visit and between turns.

    #[test]
    fn another_write_is_due_only_after_a_whole_write_behind_the_head() {
        assert!(more_due(true, 4999, 5000));
        assert!(!more_due(true, 5000, 5000));
        assert!(!more_due(false, 4000, 5000));
    }

    #[test]
    fn a_writable_socket_is_written_to_only_when_backlogged() {
        assert!(write_on_event(true, true));
        assert!(!write_on_event(true, false));
        assert!(!write_on_event(false, true));
    }
}
