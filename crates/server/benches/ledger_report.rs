//! The audience ledger at scale (issue 23): writes N synthetic sessions (default 1,000,000)
//! through the ledger's own writer into a fresh SQLite file, as a server would send them (each
//! session's start, then its end), with a play log beside them, then prints the database size
//! per million sessions and how long the reports take over all of it:
//!
//! ```text
//! cargo bench -p throng-server --bench ledger_report -- 10000000 /tmp/ledger-10m.db
//! ```
//!
//! The sessions start in time order over 30 days on 3 mounts, from a pool of 300,000 listeners (addresses,
//! `hashed`), lengths 5 s to 2 h (most short), players from a list of real User-Agents; a title
//! changes every 3.5 minutes on each mount. `cargo bench` without arguments writes 20,000
//! sessions (a smoke run); N = 0 reports on the file an earlier run wrote.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Instant;

use throng_server::config::{AddressPolicy, LedgerDatabase};
use throng_server::ledger::db::Db;
use throng_server::ledger::message::{Msg, Play, SessionEnd, SessionStart, TitleSetter};
use throng_server::ledger::report::{self, Group, Range};
use throng_server::ledger::{schema, writer::Writer};

const DAY_MS: i64 = 86_400_000;
const AGENTS: [&str; 6] = [
    "VLC/3.0.20 LibVLC/3.0.20",
    "Lavf/60.16.100",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Version/17.0 Mobile/15E148 Safari/604.1",
    "Winamp/5.9",
    "foobar2000/2.1",
];
const MOUNTS: [&str; 3] = ["/live.mp3", "/live.aac", "/talk.mp3"];

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let n: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let path = args.get(1).cloned().unwrap_or_else(|| {
        std::env::temp_dir()
            .join("throng-ledger-bench.db")
            .display()
            .to_string()
    });
    // N = 0: report on the file as it is (written by an earlier run).
    let reuse = n == 0;
    if !reuse {
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{path}{ext}"));
        }
    }
    let database = LedgerDatabase::Sqlite(path.clone().into());
    let mut db = Db::open(&database).expect("open");
    schema::migrate(&mut db).expect("migrate");
    let writer = Writer::new(db, Arc::from("bench"), AddressPolicy::Hashed, None, 0, None);
    let (tx, rx) = channel();
    let thread = std::thread::spawn(move || writer.run(rx));

    let end_ms = 1_767_225_600_000i64; // 2026-01-01
    let span = 30 * DAY_MS;
    let start_ms = end_ms - span;
    let t0 = Instant::now();
    // The play log: a title every 3.5 minutes on each mount.
    let mut plays = 0u64;
    for (k, mount) in MOUNTS.iter().enumerate().filter(|_| !reuse) {
        let mut at = start_ms + k as i64 * 20_000;
        while at < end_ms {
            tx.send(Msg::Play(Play {
                mount: (*mount).into(),
                at_ms: at,
                title: format!("Artist {} - Song {}", plays % 500, plays % 2000),
                set_by: TitleSetter::Source,
                listeners: 0,
            }))
            .unwrap();
            plays += 1;
            at += 210_000;
        }
    }
    let mut rng = Rng(23);
    for id in 0..n as i64 {
        // Starts in time order, as a server sends them (spread evenly, with jitter).
        let started =
            start_ms + (id as i128 * span as i128 / n as i128) as i64 + rng.below(1_000) as i64;
        // Most sessions short, a long tail: 5 s .. 2 h.
        let secs = match rng.below(10) {
            0..=5 => 5 + rng.below(300),
            6..=8 => 300 + rng.below(1800),
            _ => 1800 + rng.below(5400),
        } as f64;
        let listener = rng.below(300_000) as u32;
        let ip = IpAddr::V4(Ipv4Addr::from(0x0A00_0000 | listener));
        let mount = MOUNTS[rng.below(3) as usize];
        tx.send(Msg::Start(
            id,
            started,
            SessionStart {
                mount: mount.into(),
                path: if rng.below(10) == 0 { "hls" } else { "icy" },
                relay: false,
                agent: Some(AGENTS[rng.below(AGENTS.len() as u64) as usize].into()),
                referer: None,
                user: None,
                ip,
            },
        ))
        .unwrap();
        tx.send(Msg::End(SessionEnd {
            id,
            mount: mount.into(),
            ended_ms: started + (secs * 1000.0) as i64,
            seconds: secs,
            bytes: (secs * 8000.0) as u64,
            reason: "client:hung-up",
        }))
        .unwrap();
        if id % 1_000_000 == 999_999 {
            eprintln!(
                "{} sessions queued, {:.0} s",
                id + 1,
                t0.elapsed().as_secs_f64()
            );
            // Keep the queue (memory) bounded: wait for the writer to catch up.
            let (ftx, frx) = channel();
            tx.send(Msg::Commit(ftx)).unwrap();
            frx.recv().unwrap();
        }
    }
    drop(tx);
    thread.join().unwrap();
    let write_s = t0.elapsed().as_secs_f64();
    let mut size = 0u64;
    for ext in ["", "-wal"] {
        size += std::fs::metadata(format!("{path}{ext}"))
            .map(|m| m.len())
            .unwrap_or(0);
    }
    let n = if reuse {
        let mut db = Db::open(&database).expect("open");
        let rows = db
            .query("SELECT COUNT(*) FROM sessions", &[])
            .expect("count");
        rows[0][0].int().max(1) as u64
    } else {
        println!(
            "sessions: {n}  plays: {plays}  written in {write_s:.1} s ({:.0} sessions/s)",
            n as f64 / write_s
        );
        n
    };
    println!(
        "database: {:.1} MiB, {:.1} MiB per million sessions",
        size as f64 / 1048576.0,
        size as f64 / 1048576.0 / (n as f64 / 1e6)
    );

    let mut db = Db::open(&database).expect("open");
    let all = Range {
        from_ms: start_ms,
        to_ms: end_ms + DAY_MS,
        mount: None,
    };
    let one_day = Range {
        from_ms: end_ms - DAY_MS,
        to_ms: end_ms,
        mount: Some("/live.mp3".into()),
    };
    for (name, range, group) in [
        (
            "listening, 30 days by day, all mounts",
            &all,
            Some(Group::Day),
        ),
        ("listening, 30 days by hour", &all, Some(Group::Hour)),
        ("listening, 30 days by country", &all, Some(Group::Country)),
        ("listening, 30 days by player", &all, Some(Group::Agent)),
        ("tracks, 1 day, one mount", &one_day, None),
    ] {
        // Best of three (the first run also warms the page cache).
        let mut best = f64::MAX;
        let mut rows = 0;
        let mut sessions = 0;
        for _ in 0..3 {
            let t = Instant::now();
            match group {
                Some(g) => {
                    let l = report::listening(&mut db, range, g).expect("report");
                    rows = l.rows.len();
                    sessions = l.total.sessions;
                }
                None => {
                    let tr = report::tracks(&mut db, range, end_ms).expect("report");
                    rows = tr.rows.len();
                    sessions = tr.rows.iter().map(|r| r.performances).sum();
                }
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{name}: {:.3} s ({rows} rows, {sessions} sessions/performances)",
            best
        );
    }
}
