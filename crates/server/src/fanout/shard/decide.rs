//! The decisions a fan-out shard makes, as pure functions of plain values: when the shard's
//! next tick is due and which bucket of listeners it walks ([`Ticker`]); at each visit of a
//! listener, whether it is past its deadline (max-listener-duration), whether its mount's feed
//! ended more than [`ENDED_GRACE`] ago, whether it switches to the mount's live fallback,
//! whether it lags more than queue-size and what the lag policy does then ([`visit`], giving a
//! [`Verdict`]); after a write, whether more is due at once ([`more_due`]) and whether a drained
//! listener is closed or waits for an on-demand fallback ([`idle`]); whether a pending move may
//! happen ([`move_ready`]); which ticks visit a downstream relay ([`extra_tick_visit`]); whether a burst makes the queue run ahead of the regular visits
//! and which listeners then get an extra one ([`runs_ahead`], [`needs_extra_visit`]). `now` is always passed in: nothing here reads the clock, touches a
//! socket or allocates, so `shard.rs` reads the clock once per pass of its loop, does only what
//! these functions say, and every rule is unit-tested below with made-up instants.

use std::time::{Duration, Instant};

use crate::config::LagPolicy;

/// Buckets per write interval: a listener is visited once per interval, in the bucket
/// `key % BUCKETS`, so the shard's work is spread evenly over time.
pub const BUCKETS: usize = 10;

/// How long listeners of an ended mount may take to drain what is left; a listener that has
/// stopped reading (a paused player) is closed after it, so it does not hold its slot and the
/// mount's queue forever.
pub const ENDED_GRACE: Duration = Duration::from_secs(10);

/// Why a listener is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// The peer closed its side (or its socket failed) while we read it.
    HungUp,
    /// A `writev` failed.
    WriteError,
    /// It fell behind the queue's tail (lag over queue-size) under [`LagPolicy::Drop`].
    TooSlow,
    /// Its feed ended: nowhere to go, or it could not drain in [`ENDED_GRACE`].
    SourceEnded,
    /// Its deadline passed (max-listener-duration, URL-auth time limit).
    Duration,
    /// Admin `killclient`.
    Killed,
    /// The server is shutting down.
    Shutdown,
}

impl Close {
    /// The reason as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            Close::HungUp => "listener hung up",
            Close::WriteError => "write error",
            Close::TooSlow => "fell too far behind (lag over queue-size)",
            Close::SourceEnded => "source ended",
            Close::Duration => "max listening time reached",
            Close::Killed => "killed by admin",
            Close::Shutdown => "server shutting down",
        }
    }
}

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

/// The mount's feed ended (the shard saw it at `ended_at`) more than [`ENDED_GRACE`] before
/// `now`.
#[inline]
pub fn grace_over(ended_at: Option<Instant>, now: Instant) -> bool {
    ended_at.is_some_and(|t| now.saturating_duration_since(t) > ENDED_GRACE)
}

/// The listener at stream offset `pos` (bytes) has been sent everything up to the queue's
/// `head` and owes nothing from outside the stream (`pending`: prefix or a cut metadata block).
#[inline]
pub fn drained(pos: u64, head: u64, pending: bool) -> bool {
    pos >= head && !pending
}

/// The listener at stream offset `pos` (bytes) is behind the oldest retained byte `tail` (its
/// lag is over queue-size) and owes nothing from outside the stream (`pending`), so it could
/// not continue where it is.
#[inline]
pub fn lagging(pos: u64, tail: u64, pending: bool) -> bool {
    pos < tail && !pending
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

/// What [`visit`] needs to know about the listener's mount, as the shard last loaded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountView {
    /// Stream offset of the oldest retained byte (bytes).
    pub tail: u64,
    /// Stream offset one past the newest byte (bytes).
    pub head: u64,
    /// When the shard first saw the feed ended; `None` while it is live.
    pub ended_at: Option<Instant>,
    /// The feed ended and a live fallback was found for its listeners.
    pub successor: bool,
}

/// What the shard does with a listener at a visit, before writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Write what it is due.
    Write,
    /// Move it to the mount's live fallback now (it drained the ended mount, or the grace is
    /// over), unless a pending move names another live mount; then write on the new mount.
    Switch,
    /// It lags over queue-size under [`LagPolicy::Skip`]: move it to the mount's burst point
    /// (with the Ogg header pages in force there), then write.
    SkipAhead,
    /// Close it.
    Close(Close),
}

impl Verdict {
    /// The listener lagged over queue-size (a slow listener to count, whatever the policy did).
    #[inline]
    pub fn lagging(self) -> bool {
        matches!(self, Verdict::SkipAhead | Verdict::Close(Close::TooSlow))
    }
}

/// The verdict for listener `l` of mount `m` visited at `now` (`now_s`: the same instant in
/// whole seconds since the shard's epoch), in this order: past its deadline, closed; the feed
/// ended with a live fallback and the listener drained it (or the grace is over), switched;
/// grace over with nowhere to go, closed; behind the queue's tail, closed under
/// [`LagPolicy::Drop`] or skipped ahead under [`LagPolicy::Skip`]; else written to.
#[inline]
pub fn visit(
    l: ListenerView,
    m: MountView,
    now: Instant,
    now_s: u32,
    lag_policy: LagPolicy,
) -> Verdict {
    if past_deadline(l.deadline_s, now_s) {
        return Verdict::Close(Close::Duration);
    }
    if m.successor && (drained(l.pos, m.head, l.pending) || grace_over(m.ended_at, now)) {
        return Verdict::Switch;
    }
    if grace_over(m.ended_at, now) {
        return Verdict::Close(Close::SourceEnded);
    }
    if lagging(l.pos, m.tail, l.pending) {
        return match lag_policy {
            LagPolicy::Drop => Verdict::Close(Close::TooSlow),
            LagPolicy::Skip => Verdict::SkipAhead,
        };
    }
    Verdict::Write
}

/// A listener had nothing due: closed (source ended) when its mount's feed ended
/// (`feed_ended`) with nowhere to go, no live fallback (`successor`) and no on-demand one
/// starting (`awaiting_fallback`); otherwise it waits (for new bytes, for its switch at the
/// next visit, or for the fallback, at most [`ENDED_GRACE`] as [`visit`] rules).
#[inline]
pub fn idle(feed_ended: bool, successor: bool, awaiting_fallback: bool) -> Option<Close> {
    (feed_ended && !successor && !awaiting_fallback).then_some(Close::SourceEnded)
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

/// A pending move (fallback-override, admin `moveclients`) may happen now: the listener at
/// `pos` (bytes) sits on a chunk (frame or page) boundary and owes nothing from outside the
/// stream (`pending`). `chunk_start` is the start (bytes) of the retained chunk holding `pos`,
/// `None` when `pos` is outside the queue (at the live edge: a boundary).
#[inline]
pub fn move_ready(chunk_start: Option<u64>, pos: u64, pending: bool) -> bool {
    chunk_start.is_none_or(|s| s == pos) && !pending
}

/// While a move waits for listener `pos` (bytes) to reach a boundary, the most bytes its next
/// write may take so that it ends where the move can happen: after the `pending` bytes from
/// outside the stream (response head, intro, header pages, a cut metadata block), at the end
/// (`chunk_end`, bytes) of the retained chunk holding `pos`. Without this cap a listener behind
/// the live edge whose writes are cut by a full socket would rarely stop exactly on a boundary,
/// and the move would wait until it caught up with the live edge. `None`: no cap (`pos` outside
/// the queue, i.e. at the live edge, or nothing left to reach).
#[inline]
pub fn move_write_cap(pending: usize, chunk_end: Option<u64>, pos: u64) -> Option<usize> {
    let rest = chunk_end.map_or(0, |e| e.saturating_sub(pos)) as usize;
    let cap = pending + rest;
    (cap > 0).then_some(cap)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_waiting_move_caps_the_write_at_the_next_boundary() {
        // Mid-chunk, nothing pending: up to the chunk's end.
        assert_eq!(move_write_cap(0, Some(1_000), 400), Some(600));
        // Response head and intro pending at a chunk start: just those.
        assert_eq!(move_write_cap(5_000, Some(1_000), 1_000), Some(5_000));
        // Both: the pending bytes, then the rest of the chunk.
        assert_eq!(move_write_cap(300, Some(1_000), 900), Some(400));
        // At the live edge (outside the queue): no cap.
        assert_eq!(move_write_cap(0, None, 7_000), None);
        // Already on a boundary with nothing pending (the move applies before writing).
        assert_eq!(move_write_cap(0, Some(1_000), 1_000), None);
    }

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

    // The grace of an ended feed.

    #[test]
    fn grace_is_never_over_while_the_feed_is_live() {
        assert!(!grace_over(None, Instant::now()));
    }

    #[test]
    fn grace_is_over_only_strictly_after_ended_grace() {
        let t = Instant::now();
        assert!(!grace_over(Some(t), t));
        assert!(!grace_over(Some(t), t + ENDED_GRACE - NS));
        assert!(!grace_over(Some(t), t + ENDED_GRACE));
        assert!(grace_over(Some(t), t + ENDED_GRACE + NS));
        // `now` before `ended_at` (seen ended later in the same pass): not over.
        assert!(!grace_over(Some(t + SEC), t));
    }

    // Position against the queue.

    #[test]
    fn drained_at_or_past_the_head_with_nothing_pending() {
        assert!(!drained(4999, 5000, false));
        assert!(drained(5000, 5000, false));
        assert!(drained(5001, 5000, false));
        assert!(!drained(5000, 5000, true));
    }

    #[test]
    fn lagging_only_strictly_behind_the_tail_with_nothing_pending() {
        assert!(lagging(999, 1000, false));
        assert!(!lagging(1000, 1000, false));
        assert!(!lagging(1001, 1000, false));
        // Still sending its head or a cut ICY block: not judged until that is out.
        assert!(!lagging(999, 1000, true));
    }

    // The verdict at a visit.

    #[test]
    fn a_listener_in_the_queue_is_written_to() {
        let now = Instant::now();
        for pos in [1000, 3000, 4999, 5000] {
            for policy in [LagPolicy::Drop, LagPolicy::Skip] {
                assert_eq!(visit(listener(pos), live(), now, 0, policy), Verdict::Write);
            }
        }
    }

    #[test]
    fn a_listener_exactly_at_the_tail_is_not_lagging() {
        let v = visit(listener(1000), live(), Instant::now(), 0, LagPolicy::Drop);
        assert_eq!(v, Verdict::Write);
        assert!(!v.lagging());
    }

    #[test]
    fn a_lagging_listener_is_dropped_under_drop() {
        let v = visit(listener(999), live(), Instant::now(), 0, LagPolicy::Drop);
        assert_eq!(v, Verdict::Close(Close::TooSlow));
        assert!(v.lagging());
    }

    #[test]
    fn a_lagging_listener_skips_ahead_under_skip() {
        let v = visit(listener(999), live(), Instant::now(), 0, LagPolicy::Skip);
        assert_eq!(v, Verdict::SkipAhead);
        assert!(v.lagging());
    }

    #[test]
    fn a_listener_behind_the_tail_with_bytes_pending_is_written_to() {
        let l = ListenerView {
            pending: true,
            ..listener(0)
        };
        for policy in [LagPolicy::Drop, LagPolicy::Skip] {
            assert_eq!(visit(l, live(), Instant::now(), 0, policy), Verdict::Write);
        }
    }

    #[test]
    fn the_deadline_wins_over_everything() {
        let t = Instant::now();
        let now = t + ENDED_GRACE + SEC;
        let l = ListenerView {
            deadline_s: 7,
            ..listener(0)
        };
        let long_ended = ended(live(), t, true);
        assert_eq!(
            visit(l, long_ended, now, 7, LagPolicy::Skip),
            Verdict::Close(Close::Duration)
        );
        // One second earlier it lags (and is skipped ahead).
        assert_eq!(
            visit(l, live(), now, 6, LagPolicy::Skip),
            Verdict::SkipAhead
        );
    }

    #[test]
    fn a_drained_listener_switches_to_the_live_fallback() {
        let now = Instant::now();
        let m = ended(live(), now, true);
        assert_eq!(
            visit(listener(5000), m, now, 0, LagPolicy::Drop),
            Verdict::Switch
        );
    }

    #[test]
    fn a_listener_with_bytes_left_keeps_draining_before_the_switch() {
        let now = Instant::now();
        let m = ended(live(), now, true);
        assert_eq!(
            visit(listener(4999), m, now, 0, LagPolicy::Drop),
            Verdict::Write
        );
        let pending = ListenerView {
            pending: true,
            ..listener(5000)
        };
        assert_eq!(visit(pending, m, now, 0, LagPolicy::Drop), Verdict::Write);
    }

    #[test]
    fn a_listener_that_cannot_drain_switches_when_the_grace_is_over() {
        let t = Instant::now();
        let m = ended(live(), t, true);
        let stuck = ListenerView {
            pending: true,
            ..listener(2000)
        };
        assert_eq!(
            visit(stuck, m, t + ENDED_GRACE, 0, LagPolicy::Drop),
            Verdict::Write
        );
        assert_eq!(
            visit(stuck, m, t + ENDED_GRACE + NS, 0, LagPolicy::Drop),
            Verdict::Switch
        );
    }

    #[test]
    fn without_a_fallback_the_listeners_are_closed_when_the_grace_is_over() {
        let t = Instant::now();
        let m = ended(live(), t, false);
        // Even one that drained: closing it is `idle`'s call, not the visit's.
        for pos in [2000, 5000] {
            assert_eq!(
                visit(listener(pos), m, t + ENDED_GRACE, 0, LagPolicy::Skip),
                Verdict::Write
            );
            assert_eq!(
                visit(listener(pos), m, t + ENDED_GRACE + NS, 0, LagPolicy::Skip),
                Verdict::Close(Close::SourceEnded)
            );
        }
    }

    #[test]
    fn a_lagging_listener_of_an_ended_mount_follows_the_lag_policy_during_the_grace() {
        let t = Instant::now();
        let m = ended(live(), t, true);
        assert_eq!(
            visit(listener(10), m, t, 0, LagPolicy::Drop),
            Verdict::Close(Close::TooSlow)
        );
        assert_eq!(
            visit(listener(10), m, t, 0, LagPolicy::Skip),
            Verdict::SkipAhead
        );
        // After the grace it switches, lagging or not.
        assert_eq!(
            visit(listener(10), m, t + ENDED_GRACE + NS, 0, LagPolicy::Drop),
            Verdict::Switch
        );
    }

    #[test]
    fn only_lag_verdicts_count_as_slow() {
        assert!(!Verdict::Write.lagging());
        assert!(!Verdict::Switch.lagging());
        assert!(!Verdict::Close(Close::SourceEnded).lagging());
        assert!(!Verdict::Close(Close::Duration).lagging());
        assert!(Verdict::Close(Close::TooSlow).lagging());
        assert!(Verdict::SkipAhead.lagging());
    }

    // A listener with nothing due.

    #[test]
    fn an_idle_listener_of_a_live_feed_waits() {
        assert_eq!(idle(false, false, false), None);
        assert_eq!(idle(false, false, true), None);
    }

    #[test]
    fn an_idle_listener_of_an_ended_feed_with_nowhere_to_go_is_closed() {
        assert_eq!(idle(true, false, false), Some(Close::SourceEnded));
    }

    #[test]
    fn an_idle_listener_waits_for_a_live_or_starting_fallback() {
        assert_eq!(idle(true, true, false), None);
        assert_eq!(idle(true, false, true), None);
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

    // Moves.

    #[test]
    fn a_move_waits_for_a_chunk_boundary_with_nothing_pending() {
        assert!(move_ready(Some(3000), 3000, false));
        assert!(!move_ready(Some(3000), 3001, false));
        assert!(!move_ready(Some(3000), 3000, true));
        // At the live edge (outside the queue): a boundary.
        assert!(move_ready(None, 5000, false));
        assert!(!move_ready(None, 5000, true));
    }
}
