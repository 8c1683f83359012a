//! What engines measure and how it merges: exact histograms ([`hist`]), the one mergeable
//! per-group summary ([`snapshot`]) and the tick an engine reports once a second
//! ([`GroupTick`]), failure reasons, and the wording of failure kinds.

pub mod hist;
pub mod merge;
pub mod snapshot;

pub use hist::{Hist, HistSummary};
pub use snapshot::{Caught, GroundTruth, Rule, RuleCount, Rules, Snapshot};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;

/// What an engine reports at the end of every second of the run's one clock: its group's
/// [`Snapshot`] (one JSON line on a worker process's stdout, or one channel message from an
/// in-process engine). The last tick of an engine has `done` set: its listeners are closed
/// and its sessions counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupTick {
    /// The group's index in the run's plan.
    pub group: u16,
    /// The second (since the run's common start) that just ended: the tick covers
    /// `[second, second + 1)`.
    pub second: u32,
    /// The engine's last tick.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
    /// The engine's share of the group at the end of the second.
    pub snap: Snapshot,
}

/// Why a listener's connection ended without the bench closing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailReason {
    /// Connection refused (nothing listening, or the backlog overflowed).
    Refused,
    /// Connection reset by the server.
    Reset,
    /// No connection or no response head within the connect timeout.
    Timeout,
    /// The server closed the connection before sending a complete response head.
    ClosedBeforeHead,
    /// The server closed the connection while streaming.
    ClosedWhileStreaming,
    /// The response head could not be parsed, or was too large.
    BadHead,
    /// A non-200 status (the code is reported separately as `http-NNN`).
    HttpStatus(u16),
    /// No local address or port left (`EADDRNOTAVAIL`, `EADDRINUSE`).
    NoLocalPort,
    /// Out of file descriptors (`EMFILE`, `ENFILE`).
    NoFd,
    /// Any other I/O error.
    Io,
}

impl FailReason {
    /// The key used in JSON reports (`refused`, `http-503`, ...).
    pub fn key(&self) -> String {
        match self {
            FailReason::Refused => "refused".into(),
            FailReason::Reset => "reset".into(),
            FailReason::Timeout => "timeout".into(),
            FailReason::ClosedBeforeHead => "closed-before-head".into(),
            FailReason::ClosedWhileStreaming => "closed-while-streaming".into(),
            FailReason::BadHead => "bad-head".into(),
            FailReason::HttpStatus(c) => format!("http-{c}"),
            FailReason::NoLocalPort => "no-local-port".into(),
            FailReason::NoFd => "no-fd".into(),
            FailReason::Io => "io".into(),
        }
    }

    /// Classifies an I/O error.
    pub fn from_io(e: &io::Error) -> FailReason {
        match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => FailReason::Refused,
            Some(libc::ECONNRESET) | Some(libc::EPIPE) => FailReason::Reset,
            Some(libc::ETIMEDOUT) => FailReason::Timeout,
            Some(libc::EADDRNOTAVAIL) | Some(libc::EADDRINUSE) => FailReason::NoLocalPort,
            Some(libc::EMFILE) | Some(libc::ENFILE) => FailReason::NoFd,
            _ => match e.kind() {
                io::ErrorKind::ConnectionRefused => FailReason::Refused,
                io::ErrorKind::ConnectionReset => FailReason::Reset,
                _ => FailReason::Io,
            },
        }
    }
}

/// How many failure kinds a reason names (the most frequent first).
pub const KINDS_SHOWN: usize = 3;

/// `http-404 ×150, refused ×3`: the [`KINDS_SHOWN`] most frequent failure kinds.
pub fn first_kinds(failures: &BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = failures.iter().filter(|(_, n)| **n > 0).collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut s: Vec<String> = v
        .iter()
        .take(KINDS_SHOWN)
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect();
    if v.len() > KINDS_SHOWN {
        s.push(format!("{} more kinds", v.len() - KINDS_SHOWN));
    }
    s.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons() {
        let e = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(FailReason::from_io(&e).key(), "refused");
        assert_eq!(FailReason::HttpStatus(404).key(), "http-404");
    }

    #[test]
    fn kinds_most_frequent_first() {
        let mut f = BTreeMap::new();
        f.insert("refused".to_owned(), 3);
        f.insert("http-404".to_owned(), 150);
        f.insert("reset".to_owned(), 1);
        f.insert("timeout".to_owned(), 2);
        assert_eq!(
            first_kinds(&f),
            "http-404 ×150, refused ×3, timeout ×2, 1 more kinds"
        );
        assert_eq!(first_kinds(&BTreeMap::new()), "");
    }

    #[test]
    fn ticks_travel_as_json_lines() {
        let mut t = GroupTick {
            group: 2,
            second: 7,
            ..GroupTick::default()
        };
        t.snap.streaming = 5;
        t.snap.ttfb.record_us(1234);
        let line = serde_json::to_string(&t).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<GroupTick>(&line).unwrap(), t);
    }
}
