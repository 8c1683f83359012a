//! What the WHEP engines share (no I/O): the per-viewer health from receiver reports, the
//! real-time pacer, the viewer to add and the session created, session ids naming their
//! engine, and the degraded-viewers tally summed over engines. Pure, `now` passed in.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use str0m::rtp::rtcp::Rtcp;

use crate::audience::ListenerInfo;
use crate::mount::live::Mount;
use crate::mount::registry::Registry;
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::{Metrics, MountLabel};

/// How often an engine looks at the queues for new pages (and sends the packets due).
pub const MEDIA_TICK: Duration = Duration::from_millis(10);

/// A session whose peer never completes ICE and DTLS within this time is closed (a browser
/// connects within a second or two; an offer that never connects holds its state no longer).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A viewer whose receiver reports show more loss than this fraction is degraded (issue 16).
pub const DEGRADED_LOSS: f32 = 0.01;

/// A connected viewer that sent no new receiver report for this long is degraded.
pub const REPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the degraded-viewers gauges are recomputed (and time limits checked).
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(1);

/// What the server knows of a viewer's reception, from its RTCP receiver reports (RFC 3550
/// §6.4.2; the engine reads their report block on the viewer's stream with [`reception`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ViewerHealth {
    /// When ICE and DTLS completed (`None`: not yet).
    pub connected_at: Option<Instant>,
    /// Highest sequence number reported received, and when that report arrived.
    pub last_report: Option<(u64, Instant)>,
    /// Fraction of packets lost in the reports of the last stats interval (0 to 1).
    pub loss: f32,
    /// Round-trip time from the last report.
    pub rtt: Option<Duration>,
}

impl ViewerHealth {
    /// Takes a stats event's reception figures in, at `now`.
    pub fn update(
        &mut self,
        max_seq: Option<u64>,
        loss: Option<f32>,
        rtt: Option<Duration>,
        now: Instant,
    ) {
        if let Some(seq) = max_seq {
            if self.last_report.is_none_or(|(s, _)| s != seq) {
                self.last_report = Some((seq, now));
            }
        }
        if let Some(l) = loss {
            self.loss = l;
        }
        if rtt.is_some() {
            self.rtt = rtt;
        }
    }

    /// Whether the viewer is degraded at `now`: connected, and with over [`DEGRADED_LOSS`]
    /// loss or no new report for [`REPORT_TIMEOUT`] (counted from the connection when none
    /// came yet). A viewer still connecting is not counted.
    pub fn is_degraded(&self, now: Instant) -> bool {
        let Some(connected) = self.connected_at else {
            return false;
        };
        let last = self.last_report.map_or(connected, |(_, t)| t);
        self.loss > DEGRADED_LOSS || now.saturating_duration_since(last) > REPORT_TIMEOUT
    }
}

/// The reception report on stream `ssrc` in a viewer's RTCP packet, as [`ViewerHealth::update`]
/// takes it: the extended highest sequence number received and the fraction lost (RFC 3550
/// §6.4.1: eight bits, a fraction of 256). A receive-only browser sends its report blocks in
/// receiver reports, a peer that also sends in sender reports; `None` for other RTCP or no
/// block on `ssrc`.
pub fn reception(rtcp: &Rtcp, ssrc: u32) -> Option<(u64, f32)> {
    let reports = match rtcp {
        Rtcp::ReceiverReport(rr) => &rr.reports,
        Rtcp::SenderReport(sr) => &sr.reports,
        _ => return None,
    };
    reports
        .iter()
        .find(|r| *r.ssrc == ssrc)
        .map(|r| (u64::from(r.max_seq), f32::from(r.fraction_lost) / 256.0))
}

/// A packet later than this behind its schedule re-anchors the pacing at now.
pub const MAX_LATE: Duration = Duration::from_millis(200);

/// A packet due further ahead than this (a source running fast) re-anchors the pacing at now.
pub const MAX_AHEAD: Duration = Duration::from_secs(3);

/// Sends Opus packets in real time: the first packet is due at once, each next one when its
/// RTP timestamp (48 kHz) says, relative to that anchor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pacer {
    anchor: Option<(Instant, u64)>,
}

impl Pacer {
    /// When the packet with extended RTP timestamp `ts` is due, at `now`; re-anchors (due
    /// now) on the first packet, a timestamp before the anchor, a packet over [`MAX_LATE`]
    /// late or over [`MAX_AHEAD`] early.
    pub fn due(&mut self, ts: u64, now: Instant) -> Instant {
        if let Some((t0, ts0)) = self.anchor {
            if ts >= ts0 {
                let due = t0 + Duration::from_micros((ts - ts0) * 1_000_000 / 48_000);
                if due + MAX_LATE >= now && due <= now + MAX_AHEAD {
                    return due;
                }
            }
        }
        self.anchor = Some((now, ts));
        now
    }
}

/// Why a WHEP session could not be created.
#[derive(Debug, thiserror::Error)]
pub enum WhepError {
    /// The SDP offer does not parse (RFC 8866) or str0m refuses it. The client is told only
    /// that; str0m's own message (which may hold internal values) goes to the log
    /// ([`WhepError::detail`]).
    #[error("bad SDP offer: it does not parse as SDP (RFC 8866) or cannot be answered")]
    BadOffer(String),
    /// The offer has no audio media section str0m can answer with Opus.
    #[error("the offer has no audio section accepting Opus")]
    NoAudio,
    /// The engine thread is gone (server shutting down).
    #[error("WebRTC engine stopped")]
    Stopped,
    /// The mount's audio cannot reach WebRTC: a format it does not play, or its transcoder
    /// (MP3 and AAC mounts, `transcode/`) could not start.
    #[error("{0}")]
    NoFeed(#[from] crate::transcode::TranscodeError),
}

impl WhepError {
    /// What the log says of the error: the client's message, and for a refused offer str0m's
    /// reason.
    pub fn detail(&self) -> String {
        match self {
            WhepError::BadOffer(why) => format!("{self} ({why})"),
            other => other.to_string(),
        }
    }
}

/// A viewer to add: the mount it plays and who it is.
#[derive(Debug)]
pub struct NewViewer {
    /// The mount served (the requested one or a live fallback); a listener slot is already
    /// taken on it (`Mount::try_add_listener`).
    pub mount: Arc<Mount>,
    /// The SDP offer (`application/sdp`).
    pub offer: String,
    /// Client address (of the HTTP request).
    pub peer: SocketAddr,
    /// The request as a listener: id, request line, agent, user, the mount asked for (fallbacks
    /// are followed from it), time limit and close hook (URL auth `listener_remove`).
    pub info: ListenerInfo,
    /// Its unit of the budget of sessions not connected yet, given back once its peer
    /// connects (`unconnected.rs`).
    pub unconnected: super::unconnected::UnconnectedUnit,
}

/// A created session: its unguessable resource id and the SDP answer.
#[derive(Debug, Clone)]
pub struct Created {
    /// Session id (the last segment of the WHEP resource URL); its first two hex digits are
    /// the engine's index.
    pub id: String,
    /// The SDP answer.
    pub answer: String,
}

/// A session id for engine `engine`: two hex digits of the engine index, then 30 random hex
/// digits (120 bits, unguessable).
pub fn session_id(engine: usize) -> String {
    let r: u128 = rand::random();
    format!("{:02x}{:030x}", engine & 0xff, r >> 8)
}

/// The degraded viewers of each mount as each engine last counted them, so the gauge
/// `throng_whep_degraded_viewers{mount}` is their sum (engines report once per
/// [`HEALTH_INTERVAL`], each only for its own sessions).
#[derive(Debug, Default)]
pub struct DegradedTally {
    counts: Mutex<HashMap<String, Vec<i64>>>,
}

impl DegradedTally {
    /// Records engine `engine`'s counts (`counts`: mount → degraded viewers; a mount it counted
    /// before and not now is 0) and returns the new sum of every mount it touched, to set on
    /// the gauge. Mounts whose sum is 0 on every engine are forgotten after being returned.
    pub fn report(
        &self,
        engine: usize,
        engines: usize,
        counts: &HashMap<String, i64>,
    ) -> Vec<(String, i64)> {
        let mut all = self.counts.lock();
        let mut out = Vec::new();
        for (name, per) in all.iter_mut() {
            if per.get(engine).is_some_and(|&n| n != 0) && !counts.contains_key(name) {
                per[engine] = 0;
                out.push((name.clone(), per.iter().sum()));
            }
        }
        for (name, &n) in counts {
            let per = all
                .entry(name.clone())
                .or_insert_with(|| vec![0; engines.max(engine + 1)]);
            per[engine] = n;
            out.push((name.clone(), per.iter().sum()));
        }
        all.retain(|_, per| per.iter().any(|&n| n != 0));
        out
    }
}

/// What every engine thread shares.
#[derive(Clone)]
pub struct EngineShared {
    /// Mounts (fallbacks of ended mounts).
    pub registry: Arc<Registry>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The access log: a line per session when it ends.
    pub access_log: AccessLog,
    /// The degraded-viewers sums.
    pub degraded: Arc<DegradedTally>,
    /// How many engines there are.
    pub engines: usize,
    /// The transcoders of the MP3 and AAC mounts with viewers (one per mount, over engines).
    pub transcoders: Arc<crate::transcode::Transcoders>,
    /// Sessions that are not viewers (WHIP publishers) on the engines' ports.
    pub divert: Arc<super::divert::Divert>,
}

/// The engine index a session id names ([`session_id`]); `None` for a malformed id.
pub fn engine_of(id: &str) -> Option<usize> {
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    usize::from_str_radix(&id[..2], 16).ok()
}

/// Sets `metrics`' degraded gauge from a tally report.
pub fn set_degraded(metrics: &Metrics, sums: &[(String, i64)]) {
    for (name, n) in sums {
        metrics
            .whep_degraded
            .get_or_create(&MountLabel::new(name))
            .set(*n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn pacer_spreads_a_page_of_packets_in_real_time() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        assert_eq!(p.due(1000, t0), t0);
        // A page of 50 packets arriving at once: due 20 ms apart.
        assert_eq!(p.due(1000 + 960, t0), t0 + Duration::from_millis(20));
        assert_eq!(p.due(1000 + 49 * 960, t0), t0 + Duration::from_millis(980));
        // The next page, 100 ms late: packets go at once but keep the schedule.
        let late = t0 + Duration::from_millis(1100);
        assert_eq!(
            p.due(1000 + 50 * 960, late),
            t0 + Duration::from_millis(1000)
        );
        // 300 ms late (a source switch, a stall): re-anchored.
        let later = t0 + Duration::from_millis(1340);
        assert_eq!(p.due(1000 + 51 * 960, later), later);
        // Far ahead (a source pushing too fast): re-anchored too.
        assert_eq!(p.due(1000 + 500 * 960, later), later);
    }

    #[test]
    fn health_needs_reports_and_low_loss() {
        let t0 = Instant::now();
        let mut h = ViewerHealth::default();
        // Still connecting: never degraded.
        assert!(!h.is_degraded(t0 + Duration::from_secs(60)));
        h.connected_at = Some(t0);
        assert!(!h.is_degraded(t0 + Duration::from_secs(5)));
        // No report at all 5 s after connecting.
        assert!(h.is_degraded(t0 + Duration::from_millis(5001)));
        h.update(
            Some(100),
            Some(0.0),
            Some(Duration::from_millis(2)),
            t0 + Duration::from_secs(4),
        );
        assert!(!h.is_degraded(t0 + Duration::from_secs(8)));
        // The same report again is not a new one.
        h.update(Some(100), None, None, t0 + Duration::from_secs(8));
        assert!(h.is_degraded(t0 + Duration::from_millis(9001)));
        h.update(Some(150), Some(0.02), None, t0 + Duration::from_secs(10));
        assert!(h.is_degraded(t0 + Duration::from_secs(10)), "2 % loss");
        h.update(Some(200), Some(0.005), None, t0 + Duration::from_secs(11));
        assert!(!h.is_degraded(t0 + Duration::from_secs(11)), "0.5 % loss");
        assert_eq!(h.rtt, Some(Duration::from_millis(2)));
    }

    #[test]
    fn the_report_block_on_the_viewers_stream_is_read() {
        use str0m::rtp::rtcp::{ReceiverReport, ReceptionReport, ReportList};
        let block = |ssrc: u32, max_seq: u32, fraction_lost: u8| ReceptionReport {
            ssrc: ssrc.into(),
            fraction_lost,
            packets_lost: 0,
            max_seq,
            jitter: 0,
            last_sr_time: 0,
            last_sr_delay: 0,
        };
        let rr = |b| {
            Rtcp::ReceiverReport(ReceiverReport {
                sender_ssrc: 1.into(),
                reports: ReportList::from(b),
            })
        };
        assert_eq!(
            reception(&rr(block(42, (1 << 16) | 5, 64)), 42),
            Some((65_541, 0.25))
        );
        let rr = rr(block(7, 1, 0));
        assert_eq!(reception(&rr, 7), Some((1, 0.0)));
        assert_eq!(reception(&rr, 8), None, "no block on that stream");
    }

    #[test]
    fn session_ids_name_their_engine() {
        for e in [0, 1, 7, 200] {
            let id = session_id(e);
            assert_eq!(id.len(), 32);
            assert_eq!(engine_of(&id), Some(e));
        }
        assert_ne!(session_id(0), session_id(0));
        assert_eq!(engine_of("zz"), None);
        assert_eq!(engine_of(&"g".repeat(32)), None);
    }

    #[test]
    fn the_degraded_gauge_is_the_sum_over_engines() {
        let t = DegradedTally::default();
        let m = |pairs: &[(&str, i64)]| -> HashMap<String, i64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let sorted = |mut v: Vec<(String, i64)>| {
            v.sort();
            v
        };
        assert_eq!(t.report(0, 2, &m(&[("/a", 2)])), vec![("/a".into(), 2)]);
        assert_eq!(t.report(1, 2, &m(&[("/a", 1)])), vec![("/a".into(), 3)]);
        // Engine 0's viewers on /a left: /a is what engine 1 counts.
        assert_eq!(
            sorted(t.report(0, 2, &m(&[("/b", 0)]))),
            vec![("/a".into(), 1), ("/b".into(), 0)]
        );
        assert_eq!(t.report(1, 2, &m(&[])), vec![("/a".into(), 0)]);
        // Nothing left: forgotten, nothing more to set.
        assert_eq!(t.report(1, 2, &m(&[])), vec![]);
        assert_eq!(t.report(0, 2, &m(&[])), vec![]);
    }
}
