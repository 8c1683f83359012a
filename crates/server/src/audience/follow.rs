//! The follower: the rules by which one audience member follows a mount's queue, whichever
//! engine serves it (the ICY fan-out shard, the HLS packager, the WHEP engine), as pure
//! functions of plain values with `now` passed in. Nothing here reads the clock, touches a
//! socket or allocates, so every rule is unit-tested below on made-up instants, and the ICY
//! shard's hot path calls the same inline functions it always did.
//!
//! - **Join** ([`join`]): at the burst point (burst-on-connect, [`JoinAt::Burst`]), with a small
//!   burst after a switch ([`JoinAt::Switch`], [`SWITCH_BURST`]) or at the live edge (the newest
//!   chunk, [`JoinAt::LiveEdge`]: WHEP viewers), with the Ogg header pages in force there.
//! - **Each step** ([`step`]): past its deadline, the session ends (`policy:time-limit`); the
//!   feed ended with a live fallback and the member drained it (or the [`ENDED_GRACE`] is
//!   over), it switches; the grace is over with nowhere to go, it ends
//!   (`upstream:source-ended`); behind the queue's tail it is dropped (`policy:too-slow`) or
//!   skips ahead, by the lag policy; else it follows.
//! - **Idle** ([`idle`]): a member with nothing due on an ended feed with nowhere to go ends.
//! - **Moves** (`moveclients`, `fallback-override`'s return; [`MoveFilter`], [`move_ready`],
//!   [`move_write_cap`]): a move happens on a chunk (frame or page) boundary with nothing
//!   pending, never across formats ([`may_move`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use throng_proto::format::Format;

use super::end::EndReason;
use crate::config::LagPolicy;
use crate::mount::queue::QueueSnapshot;

/// How long members of an ended mount may take to drain what is left (and wait for an
/// on-demand fallback to start); one that has stopped reading (a paused player) is closed
/// after it, so it does not hold its slot and the mount's queue forever.
pub const ENDED_GRACE: Duration = Duration::from_secs(10);

/// Most bytes of the new mount's recent past a switched member gets at once (16 KiB, 2 s at
/// 64 kbit/s). A member that is switched already has a full player buffer: a whole
/// burst-on-connect again would only add latency at every switch.
pub const SWITCH_BURST: u64 = 16 * 1024;

/// Where a member joins a mount's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinAt {
    /// A new listener: the burst point, `burst-size` bytes behind the live edge
    /// (burst-on-connect, Icecast 2.4.4 `source.c`), rounded to a chunk start.
    Burst(u64),
    /// A member switched to this mount (fallback, move): at most [`SWITCH_BURST`] of the
    /// mount's `burst-size` (bytes).
    Switch(u64),
    /// The newest chunk (WHEP viewers: sub-second latency, the browser's jitter buffer is the
    /// only buffer).
    LiveEdge,
}

/// Where [`join`] puts a member: its stream offset (bytes) and the Ogg header pages it needs
/// first (none for MP3/AAC, or when it starts on a header chunk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// Absolute stream offset of the first byte to send.
    pub pos: u64,
    /// Ogg header pages to send before it.
    pub headers: Option<Arc<Bytes>>,
}

/// Where a member joins `q` by `at`.
pub fn join(q: &QueueSnapshot, at: JoinAt) -> Joined {
    let burst = match at {
        JoinAt::Burst(b) => b,
        JoinAt::Switch(b) => b.min(SWITCH_BURST),
        JoinAt::LiveEdge => {
            let Some(last) = q.chunks.last() else {
                return Joined {
                    pos: q.head,
                    headers: q.ogg_headers.clone(),
                };
            };
            let headers = if last.is_header {
                None
            } else {
                last.ogg_headers.clone()
            };
            return Joined {
                pos: last.start,
                headers,
            };
        }
    };
    let (pos, headers) = q.join_point(burst);
    Joined { pos, headers }
}

/// The member's position against its mount's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerView {
    /// Stream offset of the next byte to send (bytes).
    pub pos: u64,
    /// Bytes from outside the stream remain to be sent (response head, intro, header pages,
    /// the rest of a cut ICY block).
    pub pending: bool,
    /// Its deadline (max-listener-duration, URL-auth time limit) has passed.
    pub past_deadline: bool,
}

/// What the follower needs to know about the member's mount, as last loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountView {
    /// Stream offset of the oldest retained byte (bytes).
    pub tail: u64,
    /// Stream offset one past the newest byte (bytes).
    pub head: u64,
    /// When the follower first saw the feed ended; `None` while it is live.
    pub ended_at: Option<Instant>,
    /// The feed ended and a live fallback was found for its members.
    pub successor: bool,
}

/// What a member does at a step, before it is sent anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Follow: send what it is due.
    Follow,
    /// Move to the mount's live fallback now (it drained the ended mount, or the grace is
    /// over), unless a pending move names another live mount; then follow the new mount.
    Switch,
    /// It lags over queue-size under [`LagPolicy::Skip`]: rejoin the mount (burst point or
    /// live edge, with the Ogg header pages in force there), then follow.
    SkipAhead,
    /// End the session.
    End(EndReason),
}

impl Step {
    /// The member lagged over queue-size (a slow listener to count, whatever the policy did).
    #[inline]
    pub fn lagging(self) -> bool {
        matches!(self, Step::SkipAhead | Step::End(EndReason::TooSlow))
    }
}

/// The mount's feed ended (the follower saw it at `ended_at`) more than [`ENDED_GRACE`] before
/// `now`.
#[inline]
pub fn grace_over(ended_at: Option<Instant>, now: Instant) -> bool {
    ended_at.is_some_and(|t| now.saturating_duration_since(t) > ENDED_GRACE)
}

/// The member at stream offset `pos` (bytes) has been sent everything up to the queue's
/// `head` and owes nothing from outside the stream (`pending`).
#[inline]
pub fn drained(pos: u64, head: u64, pending: bool) -> bool {
    pos >= head && !pending
}

/// The member at stream offset `pos` (bytes) is behind the oldest retained byte `tail` (its
/// lag is over queue-size) and owes nothing from outside the stream (`pending`), so it could
/// not continue where it is.
#[inline]
pub fn lagging(pos: u64, tail: u64, pending: bool) -> bool {
    pos < tail && !pending
}

/// The step of member `l` of mount `m` at `now`, in this order: past its deadline, ended
/// (`policy:time-limit`); the feed ended with a live fallback and the member drained it (or
/// the grace is over), switched; grace over with nowhere to go, ended
/// (`upstream:source-ended`); behind the queue's tail, ended (`policy:too-slow`) under
/// [`LagPolicy::Drop`] or skipped ahead under [`LagPolicy::Skip`]; else it follows.
#[inline]
pub fn step(l: FollowerView, m: MountView, now: Instant, lag_policy: LagPolicy) -> Step {
    if l.past_deadline {
        return Step::End(EndReason::TimeLimit);
    }
    if m.successor && (drained(l.pos, m.head, l.pending) || grace_over(m.ended_at, now)) {
        return Step::Switch;
    }
    if grace_over(m.ended_at, now) {
        return Step::End(EndReason::SourceEnded);
    }
    if lagging(l.pos, m.tail, l.pending) {
        return match lag_policy {
            LagPolicy::Drop => Step::End(EndReason::TooSlow),
            LagPolicy::Skip => Step::SkipAhead,
        };
    }
    Step::Follow
}

/// A member had nothing due: it ends (`upstream:source-ended`) when its mount's feed ended
/// (`feed_ended`) with nowhere to go, no live fallback (`successor`) and no on-demand one
/// starting (`awaiting_fallback`); otherwise it waits (for new bytes, for its switch at the
/// next step, or for the fallback, at most [`ENDED_GRACE`] as [`step`] rules).
#[inline]
pub fn idle(feed_ended: bool, successor: bool, awaiting_fallback: bool) -> Option<EndReason> {
    (feed_ended && !successor && !awaiting_fallback).then_some(EndReason::SourceEnded)
}

/// Which members a move takes (`moveclients`: those on mount `from`; `fallback-override`:
/// those that asked for mount `requested`; both when both are given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveFilter {
    /// Only members now on this mount.
    pub from: Option<String>,
    /// Only members that asked for this mount.
    pub requested: Option<String>,
}

impl MoveFilter {
    /// Whether a member on mount `on`, which asked for `requested`, is taken.
    pub fn takes(&self, on: &str, requested: &str) -> bool {
        self.from.as_deref().is_none_or(|f| f == on)
            && self.requested.as_deref().is_none_or(|r| r == requested)
    }
}

/// Whether a member on mount `on` (id `on_id`, format `on_format`) may be moved to mount `to`
/// (`to_id`, `to_format`): not to where it is, never across formats (Icecast 2.4.4
/// `source_move_clients`: the player was told the other `Content-Type` and could not decode
/// the new stream).
#[inline]
pub fn may_move(on_id: u64, on_format: Format, to_id: u64, to_format: Format) -> bool {
    on_id != to_id && on_format == to_format
}

/// A pending move (fallback-override, admin `moveclients`) may happen now: the member at `pos`
/// (bytes) sits on a chunk (frame or page) boundary and owes nothing from outside the stream
/// (`pending`). `chunk_start` is the start (bytes) of the retained chunk holding `pos`, `None`
/// when `pos` is outside the queue (at the live edge: a boundary).
#[inline]
pub fn move_ready(chunk_start: Option<u64>, pos: u64, pending: bool) -> bool {
    chunk_start.is_none_or(|s| s == pos) && !pending
}

/// While a move waits for member `pos` (bytes) to reach a boundary, the most bytes its next
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
    use super::*;
    use crate::mount::queue::Chunk;

    const SEC: Duration = Duration::from_secs(1);
    const NS: Duration = Duration::from_nanos(1);

    fn member(pos: u64) -> FollowerView {
        FollowerView {
            pos,
            pending: false,
            past_deadline: false,
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

    /// A queue of chunks of 1000 bytes from 1000 to 5000; the chunk at 3000 starts a new
    /// Ogg header set when `ogg`.
    fn queue(ogg: bool) -> QueueSnapshot {
        let h1 = Arc::new(Bytes::from_static(b"H1"));
        let h2 = Arc::new(Bytes::from_static(b"H2"));
        let chunks = (1..5u64)
            .map(|i| Chunk {
                start: i * 1000,
                data: Bytes::from(vec![0u8; 1000]),
                ogg_headers: ogg.then(|| if i < 3 { h1.clone() } else { h2.clone() }),
                is_header: ogg && i == 3,
            })
            .collect();
        QueueSnapshot {
            chunks,
            head: 5000,
            ogg_headers: ogg.then(|| h2.clone()),
            ended: false,
        }
    }

    // Joining.

    #[test]
    fn a_new_listener_joins_at_the_burst_point() {
        let q = queue(false);
        assert_eq!(join(&q, JoinAt::Burst(2500)).pos, 3000);
        assert_eq!(join(&q, JoinAt::Burst(3000)).pos, 2000);
        assert_eq!(join(&q, JoinAt::Burst(0)).pos, 5000);
        assert_eq!(join(&q, JoinAt::Burst(1 << 30)).pos, 1000);
    }

    #[test]
    fn a_switch_gets_at_most_the_switch_burst() {
        let mut q = queue(false);
        // A long queue: 100 chunks of 1000 bytes.
        q.chunks = (0..100u64)
            .map(|i| Chunk {
                start: i * 1000,
                data: Bytes::from(vec![0u8; 1000]),
                ogg_headers: None,
                is_header: false,
            })
            .collect();
        q.head = 100_000;
        let j = join(&q, JoinAt::Switch(64_000));
        assert!(q.head - j.pos <= SWITCH_BURST + 1000, "{}", j.pos);
        assert!(q.head - j.pos >= SWITCH_BURST - 1000, "{}", j.pos);
        // A burst-size below the switch burst is kept.
        assert_eq!(join(&q, JoinAt::Switch(2000)).pos, 98_000);
    }

    #[test]
    fn the_live_edge_is_the_newest_chunk_with_its_header_pages() {
        let q = queue(true);
        let j = join(&q, JoinAt::LiveEdge);
        assert_eq!(j.pos, 4000);
        assert_eq!(j.headers.as_deref().map(|b| &b[..]), Some(&b"H2"[..]));
        // An empty queue: its head, with the current header set.
        let empty = QueueSnapshot {
            head: 7,
            ogg_headers: Some(Arc::new(Bytes::from_static(b"H"))),
            ..Default::default()
        };
        let j = join(&empty, JoinAt::LiveEdge);
        assert_eq!((j.pos, j.headers.is_some()), (7, true));
    }

    #[test]
    fn joining_on_a_header_chunk_needs_no_extra_header_pages() {
        let mut q = queue(true);
        q.chunks.truncate(3); // newest chunk is the header chunk at 3000
        q.head = 4000;
        let j = join(&q, JoinAt::LiveEdge);
        assert_eq!((j.pos, j.headers), (3000, None));
        let j = join(&q, JoinAt::Burst(1000));
        assert_eq!((j.pos, j.headers), (3000, None));
        let j = join(&q, JoinAt::Burst(2500));
        assert_eq!(j.pos, 2000);
        assert_eq!(j.headers.as_deref().map(|b| &b[..]), Some(&b"H1"[..]));
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

    // The step.

    #[test]
    fn a_member_in_the_queue_follows() {
        let now = Instant::now();
        for pos in [1000, 3000, 4999, 5000] {
            for policy in [LagPolicy::Drop, LagPolicy::Skip] {
                assert_eq!(step(member(pos), live(), now, policy), Step::Follow);
            }
        }
    }

    #[test]
    fn a_member_exactly_at_the_tail_is_not_lagging() {
        let s = step(member(1000), live(), Instant::now(), LagPolicy::Drop);
        assert_eq!(s, Step::Follow);
        assert!(!s.lagging());
    }

    #[test]
    fn a_lagging_member_is_dropped_under_drop() {
        let s = step(member(999), live(), Instant::now(), LagPolicy::Drop);
        assert_eq!(s, Step::End(EndReason::TooSlow));
        assert!(s.lagging());
    }

    #[test]
    fn a_lagging_member_skips_ahead_under_skip() {
        let s = step(member(999), live(), Instant::now(), LagPolicy::Skip);
        assert_eq!(s, Step::SkipAhead);
        assert!(s.lagging());
    }

    #[test]
    fn a_member_behind_the_tail_with_bytes_pending_follows() {
        let l = FollowerView {
            pending: true,
            ..member(0)
        };
        for policy in [LagPolicy::Drop, LagPolicy::Skip] {
            assert_eq!(step(l, live(), Instant::now(), policy), Step::Follow);
        }
    }

    #[test]
    fn the_deadline_wins_over_everything() {
        let t = Instant::now();
        let now = t + ENDED_GRACE + SEC;
        let l = FollowerView {
            past_deadline: true,
            ..member(0)
        };
        let long_ended = ended(live(), t, true);
        assert_eq!(
            step(l, long_ended, now, LagPolicy::Skip),
            Step::End(EndReason::TimeLimit)
        );
        // Before the deadline it lags (and is skipped ahead).
        assert_eq!(
            step(member(0), live(), now, LagPolicy::Skip),
            Step::SkipAhead
        );
    }

    #[test]
    fn a_drained_member_switches_to_the_live_fallback() {
        let now = Instant::now();
        let m = ended(live(), now, true);
        assert_eq!(step(member(5000), m, now, LagPolicy::Drop), Step::Switch);
    }

    #[test]
    fn a_member_with_bytes_left_keeps_draining_before_the_switch() {
        let now = Instant::now();
        let m = ended(live(), now, true);
        assert_eq!(step(member(4999), m, now, LagPolicy::Drop), Step::Follow);
        let pending = FollowerView {
            pending: true,
            ..member(5000)
        };
        assert_eq!(step(pending, m, now, LagPolicy::Drop), Step::Follow);
    }

    #[test]
    fn a_member_that_cannot_drain_switches_when_the_grace_is_over() {
        let t = Instant::now();
        let m = ended(live(), t, true);
        let stuck = FollowerView {
            pending: true,
            ..member(2000)
        };
        assert_eq!(
            step(stuck, m, t + ENDED_GRACE, LagPolicy::Drop),
            Step::Follow
        );
        assert_eq!(
            step(stuck, m, t + ENDED_GRACE + NS, LagPolicy::Drop),
            Step::Switch
        );
    }

    #[test]
    fn without_a_fallback_members_end_when_the_grace_is_over() {
        let t = Instant::now();
        let m = ended(live(), t, false);
        // Even one that drained: ending it is `idle`'s call, not the step's.
        for pos in [2000, 5000] {
            assert_eq!(
                step(member(pos), m, t + ENDED_GRACE, LagPolicy::Skip),
                Step::Follow
            );
            assert_eq!(
                step(member(pos), m, t + ENDED_GRACE + NS, LagPolicy::Skip),
                Step::End(EndReason::SourceEnded)
            );
        }
    }

    #[test]
    fn a_lagging_member_of_an_ended_mount_follows_the_lag_policy_during_the_grace() {
        let t = Instant::now();
        let m = ended(live(), t, true);
        assert_eq!(
            step(member(10), m, t, LagPolicy::Drop),
            Step::End(EndReason::TooSlow)
        );
        assert_eq!(step(member(10), m, t, LagPolicy::Skip), Step::SkipAhead);
        // After the grace it switches, lagging or not.
        assert_eq!(
            step(member(10), m, t + ENDED_GRACE + NS, LagPolicy::Drop),
            Step::Switch
        );
    }

    #[test]
    fn only_lag_steps_count_as_slow() {
        assert!(!Step::Follow.lagging());
        assert!(!Step::Switch.lagging());
        assert!(!Step::End(EndReason::SourceEnded).lagging());
        assert!(!Step::End(EndReason::TimeLimit).lagging());
        assert!(Step::End(EndReason::TooSlow).lagging());
        assert!(Step::SkipAhead.lagging());
    }

    // A member with nothing due.

    #[test]
    fn an_idle_member_of_a_live_feed_waits() {
        assert_eq!(idle(false, false, false), None);
        assert_eq!(idle(false, false, true), None);
    }

    #[test]
    fn an_idle_member_of_an_ended_feed_with_nowhere_to_go_ends() {
        assert_eq!(idle(true, false, false), Some(EndReason::SourceEnded));
    }

    #[test]
    fn an_idle_member_waits_for_a_live_or_starting_fallback() {
        assert_eq!(idle(true, true, false), None);
        assert_eq!(idle(true, false, true), None);
    }

    // Moves.

    #[test]
    fn a_move_filter_takes_by_current_and_requested_mount() {
        let all = MoveFilter::default();
        assert!(all.takes("/a", "/b"));
        let from = MoveFilter {
            from: Some("/a".into()),
            requested: None,
        };
        assert!(from.takes("/a", "/x"));
        assert!(!from.takes("/b", "/a"));
        let back = MoveFilter {
            from: None,
            requested: Some("/live".into()),
        };
        assert!(back.takes("/fallback", "/live"));
        assert!(!back.takes("/fallback", "/other"));
    }

    #[test]
    fn a_move_never_crosses_formats_nor_stays_put() {
        assert!(may_move(1, Format::Mp3, 2, Format::Mp3));
        assert!(!may_move(1, Format::Mp3, 1, Format::Mp3));
        assert!(!may_move(1, Format::Mp3, 2, Format::Ogg));
    }

    #[test]
    fn a_move_waits_for_a_chunk_boundary_with_nothing_pending() {
        assert!(move_ready(Some(3000), 3000, false));
        assert!(!move_ready(Some(3000), 3001, false));
        assert!(!move_ready(Some(3000), 3000, true));
        // At the live edge (outside the queue): a boundary.
        assert!(move_ready(None, 5000, false));
        assert!(!move_ready(None, 5000, true));
    }

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
}
