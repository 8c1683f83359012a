//! Per-second statistics a worker reports, failure reasons, and log-scale histograms.
//!
//! A [`WorkerTick`] is one JSON line on a worker process's stdout (or one channel message from
//! an in-process worker thread). Counters named `*_total` are cumulative since the worker
//! started; the others cover the one-second interval that ended at `second + 1`.

pub mod listener_counts;

use crate::stats::listener_counts::ListenerCounts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;

/// Buckets per decade of a [`LogHist`].
pub const BUCKETS_PER_DECADE: f64 = 10.0;
/// Lower bound of bucket 0 of a [`LogHist`] (µs).
pub const HIST_MIN_US: f64 = 10.0;
/// Number of buckets of a [`LogHist`] (10 µs to 1,000 s).
pub const HIST_BUCKETS: usize = 80;

/// A histogram of durations in log-spaced buckets (10 per decade from 10 µs), stored sparsely.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogHist {
    /// `(bucket, count)` pairs, bucket ascending.
    pub buckets: Vec<(u16, u64)>,
}

/// Bucket index of a duration in µs.
pub fn bucket_of(us: u64) -> u16 {
    if (us as f64) < HIST_MIN_US {
        return 0;
    }
    let i = ((us as f64 / HIST_MIN_US).log10() * BUCKETS_PER_DECADE).floor() as usize;
    i.min(HIST_BUCKETS - 1) as u16
}

/// Lower bound of bucket `i` (µs).
pub fn bucket_lower_us(i: u16) -> f64 {
    HIST_MIN_US * 10f64.powf(i as f64 / BUCKETS_PER_DECADE)
}

impl LogHist {
    /// Builds a sparse histogram from dense counts.
    pub fn from_dense(dense: &[u64]) -> LogHist {
        LogHist {
            buckets: dense
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| (i as u16, c))
                .collect(),
        }
    }

    /// Adds another histogram into this one.
    pub fn merge(&mut self, other: &LogHist) {
        let mut dense = self.dense();
        for &(i, c) in &other.buckets {
            dense[i as usize] += c;
        }
        *self = LogHist::from_dense(&dense);
    }

    /// Dense counts, [`HIST_BUCKETS`] long.
    pub fn dense(&self) -> Vec<u64> {
        let mut d = vec![0u64; HIST_BUCKETS];
        for &(i, c) in &self.buckets {
            d[(i as usize).min(HIST_BUCKETS - 1)] += c;
        }
        d
    }

    /// Whether it holds no sample.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.1).sum()
    }

    /// The `q` quantile (0 to 1) in ms, as the upper bound of the bucket holding it
    /// (`None` when empty).
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for &(i, c) in &self.buckets {
            seen += c;
            if seen >= rank {
                return Some(bucket_lower_us(i + 1) / 1000.0);
            }
        }
        None
    }
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
    /// ICY metadata blocks were misframed.
    IcyFraming,
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
            FailReason::IcyFraming => "icy-framing".into(),
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

/// Run phase a tick belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Listeners are being started.
    #[default]
    Ramp,
    /// Every listener was started.
    Hold,
    /// The last tick, after all listeners were closed.
    Done,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the bench's own listeners did on one mount, in the audience ledger's units (issue 23):
/// sessions (connections the server answered 200 and streamed) and their listening time, from
/// each connection's start to its close, so a run can be compared with `throng report
/// listening` over the same minutes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct GroundTruth {
    /// Sessions (sessions).
    pub sessions: u64,
    /// Listening time summed over the sessions (seconds).
    pub listening_seconds: f64,
}

impl GroundTruth {
    /// Adds `other`'s sessions and seconds.
    pub fn add(&mut self, other: &GroundTruth) {
        self.sessions += other.sessions;
        self.listening_seconds += other.listening_seconds;
    }
}

/// One worker's statistics for one second.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkerTick {
    /// Worker index (0-based).
    pub worker: u32,
    /// Second index since the run's common start (this tick covers `[second, second + 1)`).
    pub second: u32,
    /// Phase at the end of the second.
    pub phase: Phase,
    /// Listener states at the end of the second, traffic during it and failures so far (in JSON,
    /// inline: its fields are top-level fields of the tick).
    #[serde(flatten)]
    pub counts: ListenerCounts,
    /// Time to first audio byte of the connections whose first byte came this second.
    pub ttfb: LogHist,
    /// TLS handshakes completed this second (`https://` listeners), from the connect.
    #[serde(default, skip_serializing_if = "LogHist::is_empty")]
    pub handshakes: LogHist,
    /// Longest gap between reads seen this second, ongoing gaps included (ms).
    pub max_gap_ms: u32,
    /// ICY metadata blocks seen, cumulative (blocks).
    pub icy_blocks_total: u64,
    /// Audio frames or Ogg pages decoded on sampled listeners, cumulative (frames).
    pub frames_total: u64,
    /// Bytes skipped as garbage by the frame checker on sampled listeners, cumulative (bytes).
    pub garbage_bytes_total: u64,
    /// Worker CPU time in user mode, cumulative (µs).
    pub cpu_user_us: u64,
    /// Worker CPU time in kernel mode, cumulative (µs).
    pub cpu_sys_us: u64,
    /// HLS players only: requests sent, cumulative (requests).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests_total: u64,
    /// Only on the last tick: each listener's longest gap between reads over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_gaps: Option<LogHist>,
    /// Only on the last tick: the worker's sessions and listening time per mount (the URL's
    /// path).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ground_truth: BTreeMap<String, GroundTruth>,
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
    fn hist_quantiles() {
        let mut d = vec![0u64; HIST_BUCKETS];
        for us in [100u64, 1000, 1000, 1000, 50_000] {
            d[bucket_of(us) as usize] += 1;
        }
        let h = LogHist::from_dense(&d);
        assert_eq!(h.count(), 5);
        let p50 = h.quantile_ms(0.5).unwrap();
        assert!((1.0..1.3).contains(&p50), "{p50}");
        let max = h.quantile_ms(1.0).unwrap();
        assert!((50.0..65.0).contains(&max), "{max}");
        let mut h2 = h.clone();
        h2.merge(&h);
        assert_eq!(h2.count(), 10);
    }

    #[test]
    fn tick_json_keeps_the_counters_inline() {
        let json = serde_json::to_string(&WorkerTick::default()).unwrap();
        assert_eq!(
            json,
            r#"{"worker":0,"second":0,"phase":"ramp","started":0,"connecting":0,"streaming":0,"#
                .to_owned()
                + r#""stalled":0,"starved":0,"starved_total":0,"failed":0,"connects":0,"bytes":0,"#
                + r#""expected_bytes":0,"burst_bytes":0,"burst_expected_bytes":0,"failures_total":{},"ttfb":{"buckets":[]},"max_gap_ms":0,"#
                + r#""icy_blocks_total":0,"frames_total":0,"garbage_bytes_total":0,"#
                + r#""cpu_user_us":0,"cpu_sys_us":0}"#
        );
        assert_eq!(
            serde_json::from_str::<WorkerTick>(&json).unwrap(),
            WorkerTick::default()
        );
    }

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
}
