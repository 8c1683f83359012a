//! The figures of a group or of a whole run, as reports, thresholds and live series read them:
//! its [`Summary`] (totals, the listeners up at the end, percentiles, hold averages, the server's
//! and the bench's CPU and memory) and its exact histograms ([`Hists`]).

use crate::stats::{Hist, Rules, Snapshot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The histograms of a group or of the run (kept whole in `report.json`, base64 HdrHistogram
/// V2, so reports can be merged again exactly).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hists {
    /// Time to first byte.
    pub ttfb: Hist,
    /// TLS handshakes.
    pub handshake: Hist,
    /// Gaps between arrivals.
    pub gap: Hist,
    /// Each session's longest gap.
    pub longest_gap: Hist,
    /// Mouth-to-ear latency.
    pub m2e: Hist,
    /// Event delivery latency.
    pub event_latency: Hist,
    /// Stalled listeners: connect to the server's close.
    pub stalled_drop: Hist,
}

impl Hists {
    /// Adds a second's histograms.
    pub fn add_snapshot(&mut self, s: &Snapshot) {
        self.ttfb.merge(&s.ttfb);
        self.handshake.merge(&s.handshake);
        self.gap.merge(&s.gap);
        self.longest_gap.merge(&s.longest_gap);
        self.m2e.merge(&s.m2e);
        self.event_latency.merge(&s.event_latency);
        self.stalled_drop.merge(&s.stalled_drop);
    }

    /// Adds another set.
    pub fn merge(&mut self, o: &Hists) {
        self.ttfb.merge(&o.ttfb);
        self.handshake.merge(&o.handshake);
        self.gap.merge(&o.gap);
        self.longest_gap.merge(&o.longest_gap);
        self.m2e.merge(&o.m2e);
        self.event_latency.merge(&o.event_latency);
        self.stalled_drop.merge(&o.stalled_drop);
    }
}

/// The outcome of a group, or of the whole run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Most listeners the stages ask for at once (listeners).
    pub listeners: u32,
    /// Listeners started at least once (listeners).
    pub started: u32,
    /// Stalled on purpose, most at once (listeners).
    pub stalled: u32,
    /// Most listeners streaming at once (listeners).
    pub peak_streaming: u32,
    /// Listeners streaming in the last second the stages wanted any (listeners).
    pub final_streaming: u32,
    /// Listeners connecting in that second (listeners).
    pub final_connecting: u32,
    /// Listeners the stages wanted in that second (listeners).
    pub want_at_end: u32,
    /// Of those, neither streaming, connecting nor stalled (listeners).
    pub down_at_end: u32,
    /// Listeners starved at least once by any rule (listeners).
    pub starved: u32,
    /// Listeners `starved: rate` (listeners).
    pub starved_rate: u32,
    /// Listeners `starved: gap` (listeners).
    pub starved_gap: u32,
    /// Listeners `starved: loss` (listeners).
    pub starved_loss: u32,
    /// Listeners `corrupt` (listeners).
    pub corrupt: u32,
    /// Listeners with a failed connection (listeners).
    pub failed_listeners: u32,
    /// Listeners starved, corrupt or failed at least once (listeners).
    pub troubled: u32,
    /// Each rule's count and first second.
    pub rules: Rules,
    /// Failures by reason (connections).
    pub failures: BTreeMap<String, u64>,
    /// All failures (connections).
    pub failures_total: u64,
    /// Connection attempts (connections).
    pub connects: u64,
    /// Media time delivered, all listeners (s).
    pub media_seconds: f64,
    /// Wall time listeners spent streaming (s).
    pub listening_seconds: f64,
    /// Steady media time over steady listening time, connect bursts left out (1 = real time).
    pub media_rate: Option<f64>,
    /// The same, under its older name (`delivered / expected`).
    pub delivered_ratio: Option<f64>,
    /// The stream's bitrate as delivered: bytes over media time (kbit/s).
    pub bitrate_kbps_measured: Option<f64>,
    /// TLS handshakes completed (connections).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_handshakes: u64,
    /// TLS handshake time, median (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_p50_ms: Option<f64>,
    /// TLS handshake time, 99th percentile (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_p99_ms: Option<f64>,
    /// TTFB median (ms).
    pub ttfb_p50_ms: Option<f64>,
    /// TTFB 90th percentile (ms).
    pub ttfb_p90_ms: Option<f64>,
    /// TTFB 99th percentile (ms).
    pub ttfb_p99_ms: Option<f64>,
    /// Largest TTFB (ms).
    pub ttfb_max_ms: Option<f64>,
    /// Gaps between arrivals, 99th percentile (ms).
    pub gap_p99_ms: Option<f64>,
    /// 99th percentile of each session's longest gap (ms).
    pub longest_gap_p99_ms: Option<f64>,
    /// Largest gap of any session (ms).
    pub longest_gap_max_ms: Option<f64>,
    /// Mouth-to-ear latency, median (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m2e_p50_ms: Option<f64>,
    /// Mouth-to-ear latency, 99th percentile (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m2e_p99_ms: Option<f64>,
    /// Mouth-to-ear latency, largest (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m2e_max_ms: Option<f64>,
    /// Event delivery latency, median (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_latency_p50_ms: Option<f64>,
    /// Event delivery latency, 99th percentile (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_latency_p99_ms: Option<f64>,
    /// Event delivery latency, largest (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_latency_max_ms: Option<f64>,
    /// Mean delivered bandwidth during the hold (Mbit/s).
    pub delivered_mbps: f64,
    /// The bench's engines' CPU during the hold (% of one core).
    pub bench_cpu_pct: f64,
    /// The bench's CPU per 1,000 connected listeners during the hold (% of one core).
    pub bench_cpu_pct_per_1000: Option<f64>,
    /// The bench's CPU per listener-second during the hold (µs).
    pub bench_cpu_us_per_listener_second: Option<f64>,
    /// The whole bench's CPU over the run (s).
    pub bench_cpu_total_s: f64,
    /// Server user CPU during the hold (% of one core, mean).
    pub server_cpu_user_pct: Option<f64>,
    /// Server system CPU during the hold (% of one core, mean).
    pub server_cpu_sys_pct: Option<f64>,
    /// Server CPU per 1,000 listeners during the hold (% of one core).
    pub server_cpu_pct_per_1000: Option<f64>,
    /// Server CPU per listener-second during the hold (µs).
    pub server_cpu_us_per_listener_second: Option<f64>,
    /// Largest server RSS (bytes).
    pub server_rss_max: Option<u64>,
    /// Resident memory added per listener: (RSS max − RSS before the first listener) ÷ peak
    /// connected listeners (bytes per listener).
    pub server_rss_per_listener: Option<f64>,
    /// Largest server fd count (fds).
    pub server_fds_max: Option<u64>,
    /// Largest server thread count (threads).
    pub server_threads_max: Option<u64>,
    /// ICY metadata blocks checked (blocks).
    pub icy_blocks: u64,
    /// Media units checked: frames, pages, segments, packets, events.
    pub frames_checked: u64,
    /// Bytes skipped while looking for frame sync (bytes).
    pub garbage_bytes: u64,
    /// Sessions whose format could not be verified (sessions).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unverified: u64,
    /// HLS players: requests per second over the run (requests/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_s: Option<f64>,
    /// HLS requests the server answered itself per second over the hold (requests/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_requests_per_s: Option<f64>,
    /// HLS body bytes the server sent itself per second over the hold (bytes/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_bytes_per_s: Option<f64>,
    /// Event subscribers: title-change receipts (receipts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub receipts: u64,
    /// Event subscribers: title changes missed (receipts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missed: u64,
    /// WebRTC viewers: RTP packets lost (packets).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_units: u64,
    /// Media units checked (for the share of lost ones).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub units: u64,
    /// Stalled listeners the server closed (listeners).
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub stalled_dropped: u32,
    /// Stalled listeners: connect to the server's close, median (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled_drop_p50_ms: Option<f64>,
    /// Stalled listeners: connect to the server's close, largest (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled_drop_max_ms: Option<f64>,
    /// Bytes the stalled listeners held unread, at most over the run (bytes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stalled_held_bytes_max: u64,
    /// Hold seconds the hold averages are taken over (s).
    pub hold_seconds: u32,
    /// The mode's own running totals (see [`Snapshot::extra`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
    /// Every threshold held and the run had no error.
    pub pass: bool,
    /// Why it failed, in words (`report::verdict`); empty for a PASS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_reasons: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero32(n: &u32) -> bool {
    *n == 0
}
