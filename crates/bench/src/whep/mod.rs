//! WebRTC (WHEP) viewers (`throng bench run --whep URL`): str0m clients that set up over WHEP
//! and receive RTP packets ([`viewer`]), each viewer's packets judged by sequence, timestamps,
//! gaps, loss and media rate ([`track`]), and mouth-to-ear latency: the stamped Opus packets
//! ([`latency`]), or for an MP3 mount tone bursts ([`bursts`]) heard from Opus packet sizes
//! ([`onset`]), and the sources and ICY listeners that measure it ([`probe`]). The report's
//! WebRTC figures ([`WhepSummary`], `report-whep.json`) are made from the WHEP groups of a run
//! report (`crate::report::modes::whep`), the engines' own profiling figures among them ([`extra`]).

pub mod bursts;
pub mod latency;
pub mod onset;
pub mod probe;
pub mod track;
pub mod viewer;

use std::collections::BTreeMap;

/// Names of the WHEP engine's own figures in a snapshot's `extra` ([`crate::stats::Snapshot`]):
/// running totals of each worker, merged by addition over threads, workers and hosts (so the
/// report's group summary has the run's). The engine's profiling figures, and what the rules
/// do not say on their own.
pub mod extra {
    /// Datagrams the viewers received (datagrams).
    pub const DATAGRAMS: &str = "whep.datagrams";
    /// str0m timers handled: a viewer's timeout that came due (wake-ups).
    pub const TIMER_WAKEUPS: &str = "whep.timer_wakeups";
    /// Event-loop wake-ups of the driving threads (`epoll_wait` returns) (wake-ups).
    pub const LOOP_WAKEUPS: &str = "whep.loop_wakeups";
    /// Time the driving threads spent working, not waiting (in `epoll_wait` or the pause of
    /// [`super::viewer::MIN_LOOP`]), over the hold seconds (µs, summed over threads).
    pub const HOLD_BUSY_US: &str = "whep.hold_busy_us";
    /// The hold seconds as the driving threads lived them (µs, summed over threads): the
    /// busy share's denominator.
    pub const HOLD_US: &str = "whep.hold_us";
    /// CPU of the workers over the hold seconds (µs).
    pub const HOLD_CPU_US: &str = "whep.hold_cpu_us";
    /// Time the viewers spent receiving over the hold seconds (µs): the hold CPU's denominator.
    pub const HOLD_LISTEN_US: &str = "whep.hold_listen_us";
    /// Resident memory of the workers at their latest tick (bytes; at the last one, before
    /// their viewers are disconnected). In-process, the whole bench's.
    pub const RSS_BYTES: &str = "whep.rss_bytes";
    /// Viewers that had no packet for over the max gap when the run ended (viewers).
    pub const SILENT_AT_END: &str = "whep.silent_at_end";
    /// Packets whose sequence number or timestamp went back or repeated (packets).
    pub const OUT_OF_ORDER: &str = "whep.out_of_order";
    /// Packets whose RTP timestamp did not advance by the previous packet's duration (packets;
    /// counted, not judged: a sender may leave silences out).
    pub const TS_JUMPS: &str = "whep.ts_jumps";
    /// ICE disconnections of viewers receiving (events; counted, not judged: a silence is the
    /// gap rule's).
    pub const ICE_DISCONNECTS: &str = "whep.ice_disconnects";
    /// Workers timing tone bursts (workers): the latency figures are burst onsets.
    pub const BURST_WORKERS: &str = "whep.burst_workers";
}

/// The outcome of a WHEP run: `whep` in `report.json`, and the whole of `report-whep.json`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WhepSummary {
    /// Viewers asked for (the most the stages want at once) (viewers).
    pub viewers: u32,
    /// Worker processes (0: in-process).
    pub workers: u32,
    /// Viewers receiving in the last second the stages wanted any (viewers).
    pub receiving: u32,
    /// Viewers with a failed connection: a POST not answered 201, no set-up, no media
    /// (viewers; by reason in the report's `failures`).
    pub failed: u32,
    /// Viewers starved, corrupt or failed at least once (viewers): a window of over 1 %
    /// loss, a gap over 200 ms, media under the minimum rate, packets out of order, silent at
    /// the end, or a failure.
    pub degraded: u32,
    /// Degraded viewers by cause (a viewer may have several): `loss` (a window of over 1 %
    /// loss), `gap` (over 200 ms between packets), `rate` (media under the minimum share of
    /// real time over a window), `order` (sequence numbers or timestamps that went back),
    /// `silent` (no packet at the end), `failed` (a failed connection).
    pub degraded_by: BTreeMap<String, u32>,
    /// With degraded viewers: every session's longest gap, median and largest (ms).
    pub degraded_gap_p50_max_ms: Option<(u64, u64)>,
    /// Setup time, POST to first packet, median (ms).
    pub setup_p50_ms: f64,
    /// Setup time, 99th percentile (ms).
    pub setup_p99_ms: f64,
    /// Packets received per viewer per second of receiving (packets/s; each viewer from its
    /// first packet).
    pub packets_per_viewer_second: f64,
    /// The packets per viewer-second real time takes at the packets' own durations
    /// (packets/s: 50 for 20 ms packets, 16.7 for 60 ms ones); `packets_per_viewer_second`
    /// should be this.
    #[serde(default)]
    pub expected_packets_per_viewer_second: f64,
    /// The packets' mean duration, from their Opus TOC bytes (ms).
    #[serde(default)]
    pub packet_ms: f64,
    /// Viewers the stages wanted at the end that were neither receiving nor setting up
    /// (viewers).
    #[serde(default)]
    pub down_at_end: u32,
    /// Mouth-to-ear latency (source write to viewer receipt, on the run's clock) over every
    /// stamped packet of every viewer, median (ms); `None` without `--latency-source`. With
    /// `--latency-bursts`, over every tone burst every viewer heard: the onset packet's arrival
    /// less the time the source wrote the MP3 frame holding the burst's start (an upper bound,
    /// see [`bursts`]).
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
    /// CPU time of the viewer engines over the hold seconds per second of receiving over them
    /// (µs).
    pub client_hold_cpu_us_per_viewer_second: f64,
    /// Share of the hold the bench's driving threads spent working rather than waiting
    /// (0 to 1): near 1, the bench itself is the bottleneck and its gaps and latency are its
    /// own.
    pub client_busy_share: f64,
    /// Resident memory of the workers at their end (viewers still connected) per viewer
    /// (bytes).
    pub client_rss_per_viewer: f64,
    /// Per viewer-second of the run: datagrams received, str0m timers handled, and the
    /// workers' event-loop wake-ups (the bench's own work, for profiling).
    pub client_datagrams_timers_wakeups_per_viewer_second: (f64, f64, f64),
    /// CPU time of the sampled server (`--pid`, or a metrics URL) per viewer-second over the
    /// run (µs).
    pub server_cpu_us_per_viewer_second: Option<f64>,
    /// The sampled server's resident memory growth from before the run to its largest, per
    /// receiving viewer (bytes).
    pub server_rss_per_viewer: Option<f64>,
    /// Run errors (a worker that failed, the probe source, the ICY probes).
    pub errors: Vec<String>,
}

impl WhepSummary {
    /// The verdict, as the run's default thresholds see the WHEP groups: no viewer starved,
    /// corrupt or failed (none degraded), every viewer the stages wanted at the end up, no run
    /// error.
    pub fn pass(&self) -> bool {
        self.failed == 0 && self.degraded == 0 && self.down_at_end == 0 && self.errors.is_empty()
    }
}

/// `60 ms`, or `mean 47.3 ms` for a duration that is no whole number of ms.
fn duration_text(ms: f64) -> String {
    if (ms - ms.round()).abs() < 0.05 {
        format!("{ms:.0} ms")
    } else {
        format!("mean {ms:.1} ms")
    }
}

/// The text summary of a report (a few lines for the terminal).
pub fn summary_text(r: &WhepSummary) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
    let packets = if r.packet_ms > 0.0 {
        format!(
            "{:.1} ({:.1} expected from their {} duration)",
            r.packets_per_viewer_second,
            r.expected_packets_per_viewer_second,
            duration_text(r.packet_ms)
        )
    } else {
        format!("{:.1} (no packet received)", r.packets_per_viewer_second)
    };
    let mut s = format!(
        "WHEP viewers: {} asked, {} receiving, {} failed, {} degraded {:?} ({} worker processes)\n\
         setup (POST to first packet): p50 {:.0} ms, p99 {:.0} ms\n\
         packets per viewer-second: {packets}\n\
         bench CPU per viewer-second: {:.1} us (hold only: {:.1} us), bench memory per viewer: {:.0} KiB, bench busy {:.0} % of the hold\n",
        r.viewers,
        r.receiving,
        r.failed,
        r.degraded,
        r.degraded_by,
        r.workers,
        r.setup_p50_ms,
        r.setup_p99_ms,
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
