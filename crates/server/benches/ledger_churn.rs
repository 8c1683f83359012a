//! The ledger's cost per session on a live server's pattern (issue 23: "at most 3 % more CPU
//! with the ledger on"): a population of open sessions with churn, in simulated time, sent to
//! the ledger's own writer thread as a server sends them (a start when a listener arrives, an
//! end when it leaves) and committed every second of simulated time, as the writer does
//! on its own clock. Prints the process CPU time (user + system, writer thread and WAL writes
//! included) per session, the figure the ledger adds to a server per session:
//!
//! ```text
//! cargo bench -p throng-server --bench ledger_churn -- [LISTENERS] [SIM_SECONDS] [DB]
//! ```
//!
//! Defaults: 6,000 listeners (one server of the on/off run in docs/BENCHMARKS.md), sessions
//! of 5–120 s, 600 simulated seconds (about 60,000 sessions), a fresh SQLite file in the
//! temporary directory, `hashed` addresses from a pool of 50,000.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Instant;

use throng_server::config::{AddressPolicy, LedgerDatabase};
use throng_server::ledger::db::Db;
use throng_server::ledger::message::{Msg, SessionEnd, SessionStart, COMMIT_EVERY};
use throng_server::ledger::{new_session_id, schema, writer::Writer};

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

/// Process CPU time (user + system), seconds.
fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let listeners: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(6_000);
    let sim_s: i64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(600);
    let path = args.get(2).cloned().unwrap_or_else(|| {
        std::env::temp_dir()
            .join("throng-ledger-churn.db")
            .display()
            .to_string()
    });
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{ext}"));
    }
    let mut db = Db::open(&LedgerDatabase::Sqlite(path.clone().into())).expect("open");
    schema::migrate(&mut db).expect("migrate");
    let writer = Writer::new(db, Arc::from("bench"), AddressPolicy::Hashed, None, 0, None);
    let (tx, rx) = channel();
    let thread = std::thread::spawn(move || writer.run(rx));

    let mut rng = Rng(23);
    let t_start = 1_767_225_600_000i64; // 2026-01-01
    let session = |rng: &mut Rng, now: i64| -> (i64, i64, SessionStart) {
        let secs = rng.between(5, 120) as i64;
        let ip = IpAddr::V4(Ipv4Addr::from(0x0A00_0000 | rng.between(0, 49_999) as u32));
        let start = SessionStart {
            mount: "/live.mp3".into(),
            path: "icy",
            relay: false,
            agent: Some("VLC/3.0.20 LibVLC/3.0.20".into()),
            referer: None,
            user: None,
            ip,
        };
        (new_session_id(now, true), now + secs * 1000, start)
    };
    // Open sessions: (end, id, start). The population starts staggered, as after a ramp.
    let mut open: Vec<(i64, i64, i64)> = Vec::new();
    let mut sent = 0u64;
    let cpu0 = cpu_seconds();
    let wall0 = Instant::now();
    let mut now = t_start;
    // The writer commits every `COMMIT_EVERY`; STEP_MS tries another cadence.
    let step: i64 = std::env::var("STEP_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(COMMIT_EVERY.as_millis() as i64);
    while now < t_start + sim_s * 1000 {
        // Ends due in this step.
        let mut i = 0;
        while i < open.len() {
            if open[i].0 <= now {
                let (end, id, started) = open.swap_remove(i);
                tx.send(Msg::End(SessionEnd {
                    id,
                    mount: "/live.mp3".into(),
                    ended_ms: end,
                    seconds: (end - started) as f64 / 1000.0,
                    bytes: ((end - started) * 8) as u64,
                    reason: "client:hung-up",
                }))
                .unwrap();
                sent += 1;
            } else {
                i += 1;
            }
        }
        // Arrivals keep the population at `listeners`.
        while (open.len() as u64) < listeners {
            let at = now - step + rng.between(0, step as u64 - 1) as i64;
            let (id, end, start) = session(&mut rng, at);
            let end = if now == t_start {
                // The initial population: ends spread over the first two minutes.
                at + rng.between(1_000, 120_000) as i64
            } else {
                end
            };
            tx.send(Msg::Start(id, at, start)).unwrap();
            open.push((end, id, at));
        }
        let (ftx, frx) = channel();
        tx.send(Msg::Commit(ftx)).unwrap();
        frx.recv().unwrap();
        now += step;
    }
    drop(tx);
    thread.join().unwrap();
    let cpu = cpu_seconds() - cpu0;
    let mut size = 0u64;
    for ext in ["", "-wal"] {
        size += std::fs::metadata(format!("{path}{ext}"))
            .map(|m| m.len())
            .unwrap_or(0);
    }
    println!(
        "{listeners} listeners, {sim_s} s simulated: {sent} sessions ended, CPU {cpu:.2} s \
         ({:.1} µs per session), wall {:.1} s, database {:.1} MiB",
        cpu / sent.max(1) as f64 * 1e6,
        wall0.elapsed().as_secs_f64(),
        size as f64 / 1048576.0
    );
}
