//! WebRTC (WHEP) viewers (`throng bench run --whep URL`): str0m clients that set up over WHEP
//! and track RTP packets ([`viewer`]), and mouth-to-ear latency: the stamped Opus packets
//! ([`latency`]), or for an MP3 mount tone bursts ([`bursts`]) heard from Opus packet sizes
//! ([`onset`]), and the sources and ICY listeners that measure it ([`probe`]).

pub mod bursts;
pub mod latency;
pub mod onset;
pub mod probe;
pub mod viewer;

/// The outcome of a WHEP run: `whep` in `report.json`, and the whole of `report-whep.json`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WhepSummary {
    /// Viewers asked for.
    pub viewers: u32,
    /// Worker processes (0: in-process).
    pub workers: u32,
    /// Viewers whose POST got a 201 and that received media.
    pub receiving: u32,
    /// Viewers that failed to set up or received nothing.
    pub failed: u32,
    /// Viewers degraded at least once (loss over 1 % or a gap over 200 ms in a 5 s window,
    /// or packets out of order).
    pub degraded: u32,
    /// Degraded viewers by cause (a viewer may have several): `loss` (a window over 1 %),
    /// `gap` (over 200 ms), `order` (packets out of order), `silent` (no packet at the end).
    pub degraded_by: std::collections::BTreeMap<String, u32>,
    /// Longest gap of the degraded viewers, median and largest (ms).
    pub degraded_gap_p50_max_ms: Option<(u64, u64)>,
    /// Setup time, POST to first packet, median (ms).
    pub setup_p50_ms: f64,
    /// Setup time, 99th percentile (ms).
    pub setup_p99_ms: f64,
    /// Packets received per viewer per second over the hold (each viewer from the hold start
    /// or its first packet; expected 50 with 20 ms packets).
    pub packets_per_viewer_second: f64,
    /// Mouth-to-ear latency (source write to viewer receipt) over every stamped packet of
    /// every viewer, median (ms); `None` without `--latency-source`. With `--latency-bursts`,
    /// over every tone burst every viewer heard: the onset packet's arrival less the time the
    /// source wrote the MP3 frame holding the burst's start (an upper bound, see
    /// [`bursts`]).
    pub latency_p50_ms: Option<f64>,
    /// Mouth-to-ear latency, 99th percentile (ms).
    pub latency_p99_ms: Option<f64>,
    /// Mouth-to-ear latency, largest (ms).
    pub latency_max_ms: Option<f64>,
    /// Stamped packets (with `--latency-bursts`: burst onsets) the latency figures are made of.
    pub latency_samples: u64,
    /// Whether the latency figures come from MP3 tone bursts (`--latency-bursts`) rather than
    /// stamped Opus packets.
    #[serde(default)]
    pub latency_bursts: bool,
    /// With `--latency-bursts`: the largest lateness of the source's burst-frame writes against
    /// its schedule (ms; the delays may be over by as much).
    #[serde(default)]
    pub latency_source_late_max_ms: Option<f64>,
    /// The same latency for the ICY listeners of the probe mount, median (ms); `None` with
    /// `--latency-bursts` (an ICY listener would have to decode the MP3 to hear a burst).
    pub icy_latency_p50_ms: Option<f64>,
    /// ICY latency, 99th percentile (ms).
    pub icy_latency_p99_ms: Option<f64>,
    /// ICY latency, largest (ms).
    pub icy_latency_max_ms: Option<f64>,
    /// Stamped packets the ICY figures are made of.
    pub icy_latency_samples: u64,
    /// CPU time of the bench's viewer engines (all workers) per viewer-second of the run (µs).
    pub client_cpu_us_per_viewer_second: f64,
    /// CPU time of the viewer engines over the hold only (set-up done) per viewer-second of
    /// the hold, by the viewers receiving (µs).
    pub client_hold_cpu_us_per_viewer_second: f64,
    /// Share of the hold the bench's driving threads spent working rather than waiting
    /// (0 to 1): near 1, the bench itself is the bottleneck and its gaps and latency are its
    /// own.
    pub client_busy_share: f64,
    /// Resident memory of the workers at the end of the hold per viewer (bytes).
    pub client_rss_per_viewer: f64,
    /// Per viewer-second of the run: datagrams received, str0m timers handled, and the
    /// workers' event-loop wake-ups (the bench's own work, for profiling).
    pub client_datagrams_timers_wakeups_per_viewer_second: (f64, f64, f64),
    /// CPU time of the server (`--pid`) per viewer-second over the run (µs).
    pub server_cpu_us_per_viewer_second: Option<f64>,
    /// The server's resident memory growth from before the run to the end of the hold, per
    /// receiving viewer (bytes).
    pub server_rss_per_viewer: Option<f64>,
    /// Run errors (a worker that failed, the probe source, the first viewer errors).
    pub errors: Vec<String>,
}

impl WhepSummary {
    /// The verdict: every viewer received, none degraded, no run error.
    pub fn pass(&self) -> bool {
        self.failed == 0
            && self.degraded == 0
            && self.receiving == self.viewers
            && self.errors.is_empty()
    }
}

/// The WebRTC figures of `report`'s WHEP groups (`report-whep.json`); `server_pid` is the
/// sampled server, if local.
pub fn summarize(
    report: &crate::report::summary::RunReport,
    server_pid: Option<u32>,
) -> WhepSummary {
    let _ = (report, server_pid);
    WhepSummary::default()
}

/// The text summary of a report (a few lines for the terminal).
pub fn summary_text(r: &WhepSummary) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
    let mut s = format!(
        "WHEP viewers: {} asked, {} receiving, {} failed, {} degraded {:?} ({} worker processes)\n\
         setup (POST to first packet): p50 {:.0} ms, p99 {:.0} ms\n\
         packets per viewer-second over the hold: {:.1} (expected 50 with 20 ms packets)\n\
         bench CPU per viewer-second: {:.1} us (hold only: {:.1} us), bench memory per viewer: {:.0} KiB, bench busy {:.0} % of the hold\n",
        r.viewers,
        r.receiving,
        r.failed,
        r.degraded,
        r.degraded_by,
        r.workers,
        r.setup_p50_ms,
        r.setup_p99_ms,
        r.packets_per_viewer_second,
        r.client_cpu_us_per_viewer_second,
        r.client_hold_cpu_us_per_viewer_second,
        r.client_rss_per_viewer / 1024.0,
        r.client_busy_share * 100.0,
    );
    if let Some(c) = r.server_cpu_us_per_viewer_second {
        s += &format!("server CPU per viewer-second: {c:.1} us");
        if let Some(m) = r.server_rss_per_viewer {
            s += &format!(", server memory per viewer: {:.1} KiB", m / 1024.0);
        }
        s += "\n";
    }
    if r.latency_bursts {
        s += &format!(
            "mouth-to-ear latency, WHEP (MP3 tone bursts, an upper bound): p50 {}, p99 {}, max {} ({} burst onsets; the source wrote up to {} late)\n",
            ms(r.latency_p50_ms),
            ms(r.latency_p99_ms),
            ms(r.latency_max_ms),
            r.latency_samples,
            ms(r.latency_source_late_max_ms),
        );
        s += "mouth-to-ear latency, ICY: not measured (an MP3 burst source: it would take decoding)\n";
    } else if r.latency_samples > 0 || r.icy_latency_samples > 0 {
        s += &format!(
            "mouth-to-ear latency, WHEP: p50 {}, p99 {}, max {} ({} packets)\n",
            ms(r.latency_p50_ms),
            ms(r.latency_p99_ms),
            ms(r.latency_max_ms),
            r.latency_samples
        );
        s += &format!(
            "mouth-to-ear latency, ICY:  p50 {}, p99 {}, max {} ({} packets)\n",
            ms(r.icy_latency_p50_ms),
            ms(r.icy_latency_p99_ms),
            ms(r.icy_latency_max_ms),
            r.icy_latency_samples
        );
    }
    s += &format!("verdict: {}", if r.pass() { "PASS" } else { "FAIL" });
    s
}
