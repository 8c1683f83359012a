//! One fan-out tick over 10,000 listeners, for an instruction count under callgrind
//! (instruction counts are stable on a noisy machine, unlike time):
//!
//! ```text
//! cargo build --release -p throng-server --bench fanout_tick
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect=throng_fanout_tick \
//!     --callgrind-out-file=/dev/null target/release/deps/fanout_tick-* --tick
//! ```
//!
//! The tick is what a shard does for each listener it visits: plan what is due (one second of
//! a 64 kbit/s stream, 10 % of listeners with ICY metadata every 4000 bytes), build the iovec, write it (to a
//! sink, so only user-space work is counted: the kernel's `writev` comes on top), advance.
//! Without `--tick` (as `cargo bench` runs it) it times a few ticks and prints ns per listener.

mod common;

use std::io::sink;
use std::time::Instant;

use throng_server::bench_api::IcyMeta;
use throng_server::bench_api::QueueSnapshot;
use throng_server::bench_api::{visit, LagPolicy, ListenerView, MountView};
use throng_server::bench_api::{write_due, Written, MAX_WRITE_BYTES};
use throng_server::bench_api::{Cursor, SegKind};

/// Listeners in one tick.
const LISTENERS: usize = 10_000;

/// One tick: every listener gets what it is due. Not inlined and not mangled so callgrind can
/// count exactly this function and what it calls.
#[no_mangle]
#[inline(never)]
pub fn throng_fanout_tick(
    cursors: &mut [Cursor],
    snapshot: &QueueSnapshot,
    icy: &IcyMeta,
    kinds: &mut Vec<(SegKind, usize)>,
) -> usize {
    let mut bytes = 0;
    for c in cursors.iter_mut() {
        if let Written::Bytes { bytes: n, .. } =
            write_due(sink(), c, snapshot, icy, MAX_WRITE_BYTES, kinds)
        {
            bytes += n;
        }
    }
    bytes
}

/// The shard's per-visit decision (`decide::visit`: deadline, ended feed, fallback, lag) for
/// every listener of one tick, as the shard makes it before writing: how many lag. Counted
/// alone with `--visit` (`--toggle-collect=throng_visit_tick`).
#[no_mangle]
#[inline(never)]
pub fn throng_visit_tick(listeners: &[ListenerView], mount: MountView, now: Instant) -> usize {
    let mut lagging = 0;
    for (i, l) in listeners.iter().enumerate() {
        let policy = if i % 2 == 0 {
            LagPolicy::Drop
        } else {
            LagPolicy::Skip
        };
        lagging += usize::from(std::hint::black_box(visit(*l, mount, now, 7, policy)).lagging());
    }
    lagging
}

fn main() {
    if std::env::args().any(|a| a == "--visit") {
        // 10,000 listeners spread over a 512 kB queue, a tenth of them behind its tail, every
        // fifth with a deadline not yet due; the feed live.
        let listeners: Vec<ListenerView> = (0..LISTENERS as u64)
            .map(|i| ListenerView {
                pos: i * 53 % 520_000,
                pending: i % 7 == 0,
                deadline_s: if i % 5 == 0 { 30 } else { 0 },
            })
            .collect();
        let mount = MountView {
            tail: 8_000,
            head: 520_000,
            ended_at: None,
            successor: false,
        };
        let n = throng_visit_tick(&listeners, mount, Instant::now());
        println!("one visit pass: {LISTENERS} listeners, {n} lagging");
        return;
    }
    let snapshot = common::snapshot(64);
    let icy = common::icy();
    let mut kinds = Vec::with_capacity(64);
    if std::env::args().any(|a| a == "--tick") {
        let mut cursors = common::listeners(LISTENERS, &snapshot, 10);
        let bytes = throng_fanout_tick(&mut cursors, &snapshot, &icy, &mut kinds);
        // Every listener gets one second of audio; ICY listeners get two metadata blocks on top.
        assert!(bytes as u64 > LISTENERS as u64 * common::BYTES_PER_SEC);
        println!("one tick: {LISTENERS} listeners, {bytes} bytes");
        return;
    }
    let mut best = f64::MAX;
    for _ in 0..20 {
        let mut cursors = common::listeners(LISTENERS, &snapshot, 10);
        let t = Instant::now();
        std::hint::black_box(throng_fanout_tick(
            &mut cursors,
            &snapshot,
            &icy,
            &mut kinds,
        ));
        best = best.min(t.elapsed().as_nanos() as f64 / LISTENERS as f64);
    }
    println!("fanout_tick: {best:.0} ns per listener (best of 20 ticks over {LISTENERS})");
}
