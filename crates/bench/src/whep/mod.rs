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
