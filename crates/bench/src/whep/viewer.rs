//! The WHEP viewer engine of `throng bench run --whep URL -n N`: WebRTC (WHEP,
//! draft-ietf-wish-whep) viewers with their own str0m clients, one UDP socket each, driven by
//! one `mio` loop per thread of a worker process ([`run_worker`]; the parent side is
//! [`crate::run::whep`]). Each viewer POSTs an SDP offer to a WHEP endpoint
//! (`http://host:port/whep/<mount>`, on a connector thread so blocking requests never hold up
//! the viewers playing), completes ICE and DTLS, and must then receive the Opus packets of the
//! mount in order at their pace (50 per second for 20 ms frames: the RTP timestamp advances 960
//! at 48 kHz per packet; each packet's duration is read from its Opus TOC byte, so 40 or 60 ms
//! frames are judged by theirs). A viewer is degraded when, in a 5 s window, more than 1 % of
//! the packets its timestamps say were sent are missing, or a gap between two packets exceeds
//! 200 ms. Payloads
//! that carry a latency stamp ([`crate::whep::latency`]) give the viewer's mouth-to-ear latency;
//! with a burst schedule in its spec (`--latency-bursts`), the onsets of the tone bursts in the
//! payload sizes do instead ([`crate::whep::bursts`]).
//! A viewer is only woken when its socket is readable or its own str0m timer is due (its
//! socket then read with one `recvmmsg`, [`crate::net::udp_batch`]), and its client negotiates no
//! TWCC feedback, shares its thread's DTLS certificate and runs in str0m's RTP mode: each SRTP
//! packet is decrypted and checked by the viewer's own client and handed over as it arrives,
//! without the jitter buffer and depacketizer a player would need (the order check sees the
//! packets in their arrival order).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};
use str0m::change::SdpAnswer;
use str0m::media::{Direction, MediaKind};
use str0m::net::{Protocol, Receive};
use str0m::rtp::Extension;
use str0m::{Candidate, Event, Input, Output, Rtc, RtcConfig};

use crate::events::subscriber::unix_us;
use crate::net::udp_batch::{bind_shared, send_from, RecvBatch};
use crate::whep::bursts::{BurstMeter, BurstSchedule};
use crate::whep::latency::{read_stamp, LatencyHist};
use throng_proto::opus_rtp::opus_packet_samples;

/// RTP timestamp step of one 20 ms Opus packet at 48 kHz: the step assumed for a packet whose
/// TOC byte does not say its duration.
pub const TS_STEP: u64 = 960;

/// Window over which loss and gaps are judged.
pub const WINDOW: Duration = Duration::from_secs(5);

/// Loss share over a window above which a viewer is degraded (issue 16: 1 %).
pub const MAX_LOSS: f64 = 0.01;

/// Gap between two packets above which a viewer is degraded (issue 16: 200 ms).
pub const MAX_GAP: Duration = Duration::from_millis(200);

/// Connector threads per driving thread (each POSTs its share of the offers in turn).
pub const CONNECTORS: u32 = 4;

/// Shortest time between two event-loop wake-ups of a driving thread (it delays a packet's
/// processing, and so its measured latency, by at most this).
pub const MIN_LOOP: Duration = Duration::from_millis(5);

/// Datagrams one `recvmmsg` of a viewer's socket takes at most (a viewer gets one every
/// 20 ms: more than a few waiting means the thread fell behind).
pub const RECV_BATCH: usize = 4;

/// A viewer still setting up this long after its POST is closed as failed.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(15);

/// The flags of a WHEP run (a comparison scenario's `[whep]` table takes `whep_threads`).
#[derive(Debug, Clone, Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WhepArgs {
    /// The URLs are WHEP endpoints (`http://host:port/whep/<mount>`): load them with WebRTC
    /// viewers (str0m clients) instead of HTTP listeners. Viewers are spread over `--workers`
    /// processes (default: one per CPU); against a loopback server each viewer has its own
    /// 127.100.x.y address on its thread's one shared socket, else its own socket over the
    /// `--bind-range` source addresses.
    #[arg(long)]
    #[serde(skip)]
    pub whep: bool,
    /// With `--whep`: threads per worker process driving its viewers (each with its own
    /// connector thread for the POSTs).
    #[arg(long, default_value_t = 1)]
    pub whep_threads: usize,
    /// Push a latency probe as the live source of this Ogg/Opus mount (`http://host:port/mount`,
    /// with `--source-user`, `--source-password`, `--source-method`): one 20 ms Opus packet
    /// per Ogg page, each stamped with its send time, so viewers of the mount's WHEP endpoint
    /// (`--whep`) and `--latency-icy` ICY listeners of the mount report mouth-to-ear latency.
    /// Without `--whep` the run's listeners load the mount and the ICY probes measure. With
    /// `--latency-bursts` the mount is an MP3 one fed with tone bursts instead.
    #[arg(long, value_name = "URL")]
    #[serde(skip)]
    pub latency_source: Option<String>,
    /// With `--latency-source`: ICY listeners of the probe mount measuring the same latency
    /// (not with `--latency-bursts`).
    #[arg(long, default_value_t = 4)]
    #[serde(skip)]
    pub latency_icy: u32,
    /// With `--latency-source` naming an MP3 mount: push this MP3 file of tone bursts (a burst
    /// at the start of every whole second of its media, silence between; looped) in real time
    /// instead of stamped Opus. The server transcodes the mount to Opus for its WHEP viewers,
    /// who hear each burst begin as a large Opus packet after small ones; the delay from the
    /// source writing the burst's MP3 frame to that packet's arrival is the latency (an upper
    /// bound: it includes the MP3 encoder's delay). ICY latency is not measured then.
    #[arg(long, value_name = "FILE.mp3", requires = "latency_source")]
    #[serde(skip)]
    pub latency_bursts: Option<std::path::PathBuf>,
}

impl Default for WhepArgs {
    /// The command line's defaults.
    fn default() -> WhepArgs {
        WhepArgs {
            whep: false,
            whep_threads: 1,
            latency_source: None,
            latency_icy: 4,
            latency_bursts: None,
        }
    }
}

/// What one viewer saw, judged as it goes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PacketTrack {
    /// Packets received.
    pub packets: u64,
    /// Packets whose timestamp did not follow the previous one (backwards or repeated).
    pub out_of_order: u64,
    /// Windows judged degraded.
    pub degraded_windows: u64,
    /// Windows with over 1 % loss.
    pub loss_windows: u64,
    /// Windows with a gap over [`MAX_GAP`].
    pub gap_windows: u64,
    /// Longest gap between two packets (ms).
    pub max_gap_ms: u64,
    /// Whether the viewer was silent at the end of the run.
    pub silent_at_end: bool,
    /// Windows judged.
    pub windows: u64,
    last: Option<(u64, Instant)>,
    window_start: Option<(Instant, u64)>,
    window_packets: u64,
    window_max_gap: Duration,
    /// The latest packet's duration (48 kHz samples): the timestamp step between packets.
    step: u64,
}

impl PacketTrack {
    /// Takes a packet with 48 kHz RTP timestamp `ts` (extended) and a play time of `samples`
    /// (48 kHz; from its Opus TOC byte, so 20, 40 or 60 ms packets are all judged right)
    /// arriving at `at`.
    pub fn packet(&mut self, ts: u64, samples: u64, at: Instant) {
        self.packets += 1;
        self.step = samples.max(1);
        if let Some((last_ts, last_at)) = self.last {
            if ts <= last_ts {
                self.out_of_order += 1;
            }
            self.window_max_gap = self
                .window_max_gap
                .max(at.saturating_duration_since(last_at));
        }
        self.last = Some((ts.max(self.last.map_or(0, |l| l.0)), at));
        let (start, first_ts) = *self.window_start.get_or_insert((at, ts));
        self.window_packets += 1;
        if at.saturating_duration_since(start) >= WINDOW {
            let expected = ts.saturating_sub(first_ts) / self.step.max(1) + 1;
            let lost = expected.saturating_sub(self.window_packets);
            let loss = lost as f64 / expected.max(1) as f64;
            self.windows += 1;
            self.loss_windows += u64::from(loss > MAX_LOSS);
            self.gap_windows += u64::from(self.window_max_gap > MAX_GAP);
            self.max_gap_ms = self.max_gap_ms.max(self.window_max_gap.as_millis() as u64);
            if loss > MAX_LOSS || self.window_max_gap > MAX_GAP {
                self.degraded_windows += 1;
            }
            // This packet opens the next window too (its expected count includes both ends).
            self.window_start = Some((at, ts));
            self.window_packets = 1;
            self.window_max_gap = Duration::ZERO;
        }
    }

    /// Closes the run at `now`: a viewer silent since its last packet for over
    /// [`MAX_GAP`] counts that as a degraded window.
    pub fn finish(&mut self, now: Instant) {
        let silent = self
            .last
            .is_none_or(|(_, at)| now.saturating_duration_since(at) > MAX_GAP);
        if silent {
            self.silent_at_end = true;
            self.windows += 1;
            self.degraded_windows += 1;
        }
    }

    /// Whether the viewer was degraded at any time.
    pub fn degraded(&self) -> bool {
        self.degraded_windows > 0 || self.out_of_order > 0
    }
}

/// What one worker runs: its share of the viewers (global ids `worker`, `worker + workers`,
/// ...), all workers starting their second 0 at `start_unix_ms`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WhepSpec {
    /// Worker index (0-based).
    pub worker: u32,
    /// Number of workers.
    pub workers: u32,
    /// WHEP endpoint URLs; viewers are spread round-robin over them.
    pub urls: Vec<String>,
    /// Viewers in the whole run.
    pub total: u32,
    /// New viewers per second, whole run.
    pub ramp: f64,
    /// Hold after the ramp (s).
    pub hold_s: f64,
    /// Source addresses for loopback targets (`FIRST-LAST` or `none`).
    pub bind_range: String,
    /// Common start time of all workers (ms since the Unix epoch).
    pub start_unix_ms: u64,
    /// Driving threads in this worker.
    pub threads: u32,
    /// With `--latency-bursts`: when the parent's burst source writes each burst, for the
    /// viewers' onsets to be matched against.
    #[serde(default)]
    pub bursts: Option<BurstSchedule>,
}

impl WhepSpec {
    /// Viewers of this worker.
    pub fn count(&self) -> u32 {
        let w = self.workers.max(1);
        if self.worker >= self.total {
            0
        } else {
            (self.total - self.worker).div_ceil(w)
        }
    }

    /// Seconds from the start to the end of the ramp.
    pub fn ramp_secs(&self) -> f64 {
        f64::from(self.total) / self.ramp.max(0.001)
    }
}

/// What a worker reports once a second (counts so far) and at the end (with `result`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WhepTick {
    /// Worker index.
    pub worker: u32,
    /// Viewers whose POST was answered with `201`.
    pub answered: u32,
    /// Viewers that received media.
    pub receiving: u32,
    /// Viewers that failed so far.
    pub failed: u32,
    /// The worker's results, on its last tick only.
    pub result: Option<WhepResult>,
}

/// The results of one worker, merged by the parent.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WhepResult {
    /// Viewers of this worker.
    pub viewers: u32,
    /// Viewers that received media and did not fail.
    pub receiving: u32,
    /// Viewers that failed to set up, failed later or received nothing.
    pub failed: u32,
    /// Receiving viewers degraded at least once.
    pub degraded: u32,
    /// Degraded viewers with a window of over 1 % loss.
    pub degraded_loss: u32,
    /// Degraded viewers with a gap over 200 ms.
    pub degraded_gap: u32,
    /// Degraded viewers with packets out of order.
    pub degraded_order: u32,
    /// Degraded viewers silent at the end of the run.
    pub degraded_silent: u32,
    /// Longest gap of each degraded viewer (ms), for the report's gap distribution.
    pub degraded_max_gaps_ms: Vec<u64>,
    /// Setup time (POST to first packet) of every receiving viewer (ms).
    pub setups_ms: Vec<f64>,
    /// Packets received over the hold by the viewers receiving when it began.
    pub hold_packets: u64,
    /// Viewer-seconds of the hold over which `hold_packets` were counted (each viewer from
    /// the hold start or its first packet, whichever is later).
    pub hold_viewer_secs: f64,
    /// Mouth-to-ear latency of every stamped packet (sealed).
    pub latency: LatencyHist,
    /// CPU time of the worker process over the run (µs; the in-process engine: the process).
    pub cpu_us: u64,
    /// CPU time of the worker process over the hold only (µs).
    pub hold_cpu_us: u64,
    /// Resident memory of the worker process at the end of the hold (bytes).
    pub rss_bytes: u64,
    /// Datagrams received (all viewers).
    pub datagrams: u64,
    /// Viewer timers handled (str0m timeouts that came due).
    pub timer_wakeups: u64,
    /// Event-loop wake-ups (`epoll_wait` returns).
    pub loop_wakeups: u64,
    /// Time the driving threads spent working (not waiting in `epoll_wait` or the 2 ms
    /// pause) over the hold (µs, summed over threads).
    pub hold_busy_us: u64,
    /// Length of the hold as seen by the driving threads (µs, summed over threads).
    pub hold_us: u64,
    /// The first few errors.
    pub errors: Vec<String>,
    /// All errors.
    pub error_count: u32,
}

/// Shared counters of a worker's threads.
#[derive(Default)]
struct Counters {
    answered: std::sync::atomic::AtomicU32,
    receiving: std::sync::atomic::AtomicU32,
    failed: std::sync::atomic::AtomicU32,
}

/// The kernel arrival time `t` of a datagram as a monotonic instant and µs since the Unix
/// epoch, given both clocks read once (`clocks`) after it was read: as long before the
/// monotonic reading as `t` is before the wall-clock one (now when `t` is ahead of it).
pub fn arrival_instant(t: SystemTime, clocks: (Instant, SystemTime)) -> (Instant, u64) {
    let (mono, wall) = clocks;
    let ago = wall.duration_since(t).unwrap_or(Duration::ZERO);
    let at = mono.checked_sub(ago).unwrap_or(mono);
    let unix = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    (at, unix)
}

/// How a viewer's datagrams travel.
enum Link {
    /// Its own socket, registered on its thread's poll.
    Own(UdpSocket),
    /// Its thread's shared socket (a loopback target: [`crate::net::udp_batch::bind_shared`]),
    /// from the viewer's own address.
    Shared(RawFd),
}

/// The loopback address of viewer `id` when its thread shares one socket: 127.100.0.1 on,
/// one address each (so the server tells the viewers apart as it tells hosts apart).
pub fn shared_viewer_ip(id: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 100, 0, 1)) + (id & 0x00ff_ffff))
}

/// Receive buffer of a thread's shared socket (bytes; the kernel caps it at `rmem_max`).
pub const SHARED_BUFFER: usize = 8 << 20;

/// Datagrams one `recvmmsg` of a shared socket takes at most.
pub const SHARED_BATCH: usize = 64;

/// The poll token of a thread's shared socket (viewers' own sockets use their index).
const SHARED: Token = Token(usize::MAX);

/// One WebRTC viewer.
struct Viewer {
    rtc: Rtc,
    link: Link,
    local: SocketAddr,
    started: Instant,
    started_unix: u64,
    next: Instant,
    first_packet: Option<Duration>,
    track: PacketTrack,
    /// Packets before the viewer's hold began, and when it began (the hold start, or the
    /// first packet of a viewer that started receiving later).
    hold_base: Option<(u64, Instant)>,
    failed: bool,
    /// When the datagram being handled reached the host (monotonic, and µs since the Unix
    /// epoch), if the kernel said.
    arrival: Option<(Instant, u64)>,
    /// With `--latency-bursts`: the run's burst schedule and this viewer's onset meter.
    bursts: Option<(Arc<BurstSchedule>, BurstMeter)>,
}

/// POSTs an SDP offer to `path` on `addr`; returns the SDP answer. Errors: the connection,
/// a status other than 201, an unreadable answer.
fn post_offer(addr: SocketAddr, host: &str, path: &str, offer: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.set_nodelay(true)?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{offer}",
        offer.len()
    )?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let (head, len) = throng_proto::http::parse_response_head(&out)?
        .ok_or_else(|| anyhow::anyhow!("incomplete answer"))?;
    anyhow::ensure!(head.status == 201, "POST {path}: status {}", head.status);
    Ok(String::from_utf8(out[len..].to_vec())?)
}

/// Where a viewer connects.
#[derive(Clone)]
struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
    loopback: bool,
}

impl Viewer {
    /// The client configuration of a thread's viewers: RTP mode (packets as received, no
    /// depacketizing buffer); Opus only; of the RTP header
    /// extensions only the MID (RFC 8843), so no transport-wide congestion control feedback
    /// (TWCC, sent every 50 ms by a receiver that negotiates it) nor audio levels; one DTLS
    /// certificate shared by the viewers instead of a key pair generated per viewer.
    fn config() -> RtcConfig {
        let mut c = Rtc::builder()
            .set_rtp_mode(true)
            .clear_codecs()
            .enable_opus(true, false)
            .clear_extension_map()
            .set_extension(4, Extension::RtpMid);
        if let Some(cert) = str0m::crypto::from_feature_flags()
            .dtls_provider
            .generate_certificate()
        {
            c = c.set_dtls_cert(cert);
        }
        c
    }

    /// Sets up a viewer of `t` from address `bind`: on its own socket, or on the thread's
    /// `shared` socket (its descriptor and port) as `bind`:port.
    /// With `bursts`, the viewer measures latency from tone-burst onsets.
    fn connect(
        config: &RtcConfig,
        t: &Target,
        bind: Ipv4Addr,
        shared: Option<(RawFd, u16)>,
        bursts: Option<Arc<BurstSchedule>>,
    ) -> anyhow::Result<Viewer> {
        let started = Instant::now();
        let started_unix = unix_us();
        let mut rtc = config.clone().build(started);
        let (link, local) = match shared {
            Some((fd, port)) => (Link::Shared(fd), SocketAddr::from((bind, port))),
            None => {
                let std_socket = std::net::UdpSocket::bind((bind, 0))?;
                std_socket.set_nonblocking(true)?;
                let local = std_socket.local_addr()?;
                (Link::Own(UdpSocket::from_std(std_socket)), local)
            }
        };
        rtc.add_local_candidate(Candidate::host(local, "udp")?);
        let mut api = rtc.sdp_api();
        api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
        let (offer, pending) = api.apply().ok_or_else(|| anyhow::anyhow!("no offer"))?;
        let answer = post_offer(t.addr, &t.host, &t.path, &offer.to_sdp_string())?;
        rtc.sdp_api()
            .accept_answer(pending, SdpAnswer::from_sdp_string(&answer)?)?;
        Ok(Viewer {
            rtc,
            link,
            local,
            started,
            started_unix,
            next: started,
            first_packet: None,
            track: PacketTrack::default(),
            hold_base: None,
            failed: false,
            arrival: None,
            bursts: bursts.map(|b| (b, BurstMeter::new(started_unix))),
        })
    }

    /// Reads every waiting datagram into the client (one `recvmmsg` per [`RecvBatch`] of
    /// them), taking the client's output after each (in RTP mode str0m holds one received
    /// packet until the next `poll_output`); returns how many, and whether the viewer got its
    /// first packet.
    fn receive(&mut self, batch: &mut RecvBatch, latency: &mut LatencyHist) -> (u64, bool) {
        let fd = match &self.link {
            Link::Own(s) => s.as_raw_fd(),
            Link::Shared(_) => return (0, false),
        };
        let mut got = 0;
        let mut first = false;
        loop {
            let n = match batch.recv(fd) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return (got, first),
            };
            got += n as u64;
            let clocks = (Instant::now(), SystemTime::now());
            for i in 0..n {
                let (data, source) = batch.get(i);
                let at = batch.arrival(i).map(|t| arrival_instant(t, clocks));
                first |= self.input(data, source, at, latency);
            }
            if n < batch.capacity() {
                return (got, first);
            }
        }
    }

    /// Hands one datagram from `source`, which reached the host at `at` (kernel time: `None`
    /// when not known, then now), to the client and takes its output; returns whether the
    /// viewer got its first packet.
    fn input(
        &mut self,
        data: &[u8],
        source: SocketAddr,
        at: Option<(Instant, u64)>,
        latency: &mut LatencyHist,
    ) -> bool {
        self.arrival = at;
        let Ok(contents) = data.try_into() else {
            return false;
        };
        let input = Input::Receive(
            Instant::now(),
            Receive {
                proto: Protocol::Udp,
                source,
                destination: self.local,
                contents,
            },
        );
        if self.rtc.handle_input(input).is_err() {
            self.failed = true;
        }
        self.pump(latency)
    }

    /// Takes the client's output until its next timeout; returns whether the viewer got its
    /// first packet.
    fn pump(&mut self, latency: &mut LatencyHist) -> bool {
        let mut first = false;
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.next = t;
                    return first;
                }
                Ok(Output::Transmit(t)) => match &self.link {
                    Link::Own(s) => {
                        let _ = s.send_to(&t.contents, t.destination);
                    }
                    Link::Shared(fd) => {
                        if let (IpAddr::V4(from), SocketAddr::V4(to)) =
                            (self.local.ip(), t.destination)
                        {
                            let _ = send_from(*fd, &t.contents, from, to);
                        }
                    }
                },
                Ok(Output::Event(Event::RtpPacket(p))) => {
                    first |= self.packet(p.time.numer(), &p.payload, latency);
                }
                Ok(Output::Event(_)) => {}
                Err(_) => {
                    self.failed = true;
                    self.next = Instant::now() + Duration::from_millis(50);
                    return first;
                }
            }
        }
    }

    fn packet(&mut self, ts: u64, payload: &[u8], latency: &mut LatencyHist) -> bool {
        // When the datagram carrying it reached the host (its gap and latency are judged by
        // that, not by when a busy thread read it).
        let (now, now_unix_us) = self.arrival.unwrap_or_else(|| (Instant::now(), unix_us()));
        let first = self.first_packet.is_none();
        if first {
            self.first_packet = Some(now.saturating_duration_since(self.started));
        }
        let samples = opus_packet_samples(payload).map_or(TS_STEP, u64::from);
        self.track.packet(ts, samples, now);
        if let Some((schedule, meter)) = &mut self.bursts {
            if let Some((onset, burst)) = meter.packet(schedule, payload.len(), now_unix_us) {
                latency.record(onset, burst);
            }
        } else if let Some(stamp) = read_stamp(payload) {
            // Only audio sent after the viewer asked for it: older audio is buffering.
            if stamp >= self.started_unix {
                latency.record(now_unix_us, stamp);
            }
        }
        first
    }
}

/// What one driving thread ends with.
#[derive(Default)]
struct ThreadResult {
    result: WhepResult,
}

fn note(r: &mut WhepResult, e: String) {
    r.error_count += 1;
    if r.errors.len() < 5 {
        r.errors.push(e);
    }
}

/// Drives the viewers of one thread (worker-local indices `thread`, `thread + threads`, ...).
#[allow(clippy::too_many_arguments)]
fn drive_thread(
    spec: &WhepSpec,
    thread: u32,
    targets: &[Target],
    binds: &[Ipv4Addr],
    start: Instant,
    counters: &Counters,
    stop: &AtomicBool,
) -> anyhow::Result<ThreadResult> {
    let threads = spec.threads.max(1);
    let ramp = spec.ramp.max(0.001);
    let hold_start = start + Duration::from_secs_f64(spec.ramp_secs());
    let end = hold_start + Duration::from_secs_f64(spec.hold_s);
    let mut out = ThreadResult::default();
    let (tx, rx) = std::sync::mpsc::channel::<Result<Viewer, String>>();
    let count = spec.count();
    let (worker, workers) = (spec.worker, spec.workers.max(1));
    let mut poll = Poll::new()?;
    // Loopback targets: one socket for the thread's viewers, each its own address.
    let shared_socket = if targets.iter().all(|t| t.loopback && t.addr.is_ipv4()) {
        let mut s = UdpSocket::from_std(bind_shared(SHARED_BUFFER)?);
        poll.registry()
            .register(&mut s, SHARED, Interest::READABLE)?;
        Some(s)
    } else {
        None
    };
    let shared = match &shared_socket {
        Some(s) => Some((s.as_raw_fd(), s.local_addr()?.port())),
        None => None,
    };
    // CONNECTORS threads POST this thread's offers (global ids in ramp order), so one slow
    // answer does not hold up the ramp.
    let bursts = spec.bursts.clone().map(Arc::new);
    let connectors: Vec<_> = (0..CONNECTORS)
        .map(|c| {
            let (targets, binds, tx) = (targets.to_vec(), binds.to_vec(), tx.clone());
            let bursts = bursts.clone();
            std::thread::spawn(move || {
                let config = Viewer::config();
                let mut local = thread + threads * c;
                while local < count && Instant::now() < end {
                    let id = worker + local * workers;
                    let due = start + Duration::from_secs_f64(f64::from(id) / ramp);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let t = &targets[id as usize % targets.len()];
                    let bind = if shared.is_some() {
                        shared_viewer_ip(id)
                    } else if t.loopback && !binds.is_empty() {
                        binds[(id / workers) as usize % binds.len()]
                    } else {
                        Ipv4Addr::UNSPECIFIED
                    };
                    let v = Viewer::connect(&config, t, bind, shared, bursts.clone())
                        .map_err(|e| format!("whep viewer {id}: {e}"));
                    if tx.send(v).is_err() {
                        break;
                    }
                    local += threads * CONNECTORS;
                }
            })
        })
        .collect();
    drop(tx);
    let mut events = Events::with_capacity(1024);
    let mut viewers: Vec<Viewer> = Vec::new();
    // Shared socket: viewer index by its address.
    let mut by_ip: HashMap<Ipv4Addr, usize> = HashMap::new();
    let mut batch = RecvBatch::new(RECV_BATCH);
    let mut shared_batch = RecvBatch::new(SHARED_BATCH);
    // Per viewer, its next str0m timer (`never` once it failed): the loop's scans read this
    // compact list rather than every (large) `Viewer`.
    let mut nexts: Vec<Instant> = Vec::new();
    let never = end + Duration::from_secs(86_400);
    let mut hold_taken = false;
    let mut connector_done = false;
    let mut last_poll = Instant::now();
    let mut busy_from = Instant::now();
    loop {
        let now = Instant::now();
        if now >= end || stop.load(Ordering::Relaxed) {
            break;
        }
        loop {
            match rx.try_recv() {
                Ok(Ok(mut v)) => {
                    let token = Token(viewers.len());
                    match &mut v.link {
                        Link::Own(s) => poll.registry().register(s, token, Interest::READABLE)?,
                        Link::Shared(_) => {
                            if let IpAddr::V4(ip) = v.local.ip() {
                                by_ip.insert(ip, token.0);
                            }
                        }
                    }
                    counters.answered.fetch_add(1, Ordering::Relaxed);
                    nexts.push(v.next);
                    viewers.push(v);
                }
                Ok(Err(e)) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    out.result.failed += 1;
                    note(&mut out.result, e);
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    connector_done = true;
                    break;
                }
            }
        }
        if !hold_taken && now >= hold_start {
            hold_taken = true;
            for v in viewers.iter_mut().filter(|v| v.first_packet.is_some()) {
                v.hold_base = Some((v.track.packets, now));
            }
        }
        // Sleep until the earliest viewer timer (or new viewers may be waiting: at most 5 ms).
        let mut wake = now + Duration::from_millis(if connector_done { 20 } else { 5 });
        if let Some(&t) = nexts.iter().min() {
            wake = wake.min(t);
        }
        // Wake at most every MIN_LOOP: packets to many viewers arrive together every 20 ms,
        // so one wake-up serves a batch of sockets instead of one each.
        if let Some(rest) = (last_poll + MIN_LOOP).checked_duration_since(now) {
            std::thread::sleep(rest);
        }
        let now = Instant::now();
        if now >= hold_start {
            out.result.hold_busy_us += now.saturating_duration_since(busy_from).as_micros() as u64;
        }
        last_poll = now;
        poll.poll(&mut events, Some(wake.saturating_duration_since(now)))?;
        busy_from = Instant::now();
        out.result.loop_wakeups += 1;
        let mut shared_ready = false;
        for ev in events.iter() {
            if ev.token() == SHARED {
                shared_ready = true;
                continue;
            }
            let v = &mut viewers[ev.token().0];
            if v.failed {
                continue;
            }
            let (got, first) = v.receive(&mut batch, &mut out.result.latency);
            out.result.datagrams += got;
            nexts[ev.token().0] = if v.failed { never } else { v.next };
            if first {
                counters.receiving.fetch_add(1, Ordering::Relaxed);
                if hold_taken {
                    v.hold_base = Some((v.track.packets, Instant::now()));
                }
            }
        }
        // The shared socket: read it empty (its poll is edge-triggered), each datagram to the
        // viewer its destination address names.
        while shared_ready {
            let Some(s) = &shared_socket else { break };
            let n = match shared_batch.recv(s.as_raw_fd()) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            out.result.datagrams += n as u64;
            let clocks = (Instant::now(), SystemTime::now());
            for i in 0..n {
                let Some(&k) = shared_batch.dest(i).and_then(|ip| by_ip.get(&ip)) else {
                    continue;
                };
                let v = &mut viewers[k];
                if v.failed {
                    continue;
                }
                let (data, source) = shared_batch.get(i);
                let at = shared_batch.arrival(i).map(|t| arrival_instant(t, clocks));
                let first = v.input(data, source, at, &mut out.result.latency);
                nexts[k] = if v.failed { never } else { v.next };
                if first {
                    counters.receiving.fetch_add(1, Ordering::Relaxed);
                    if hold_taken {
                        v.hold_base = Some((v.track.packets, Instant::now()));
                    }
                }
            }
            shared_ready = n == shared_batch.capacity();
        }
        let now = Instant::now();
        for (k, next) in nexts.iter_mut().enumerate() {
            if *next > now {
                continue;
            }
            let v = &mut viewers[k];
            if v.failed {
                *next = never;
                continue;
            }
            if v.first_packet.is_none() && now.saturating_duration_since(v.started) > SETUP_TIMEOUT
            {
                v.failed = true;
                *next = never;
                if let Link::Own(s) = &mut v.link {
                    let _ = poll.registry().deregister(s);
                }
                continue;
            }
            out.result.timer_wakeups += 1;
            if v.rtc.handle_input(Input::Timeout(now)).is_err() {
                v.failed = true;
            }
            let first = v.pump(&mut out.result.latency);
            *next = if v.failed { never } else { v.next };
            if first {
                counters.receiving.fetch_add(1, Ordering::Relaxed);
                if hold_taken {
                    v.hold_base = Some((v.track.packets, now));
                }
            }
        }
    }
    out.result.hold_us = Instant::now()
        .saturating_duration_since(hold_start)
        .as_micros() as u64;
    drop(rx);
    for c in connectors {
        let _ = c.join();
    }
    let now = Instant::now();
    let r = &mut out.result;
    for v in viewers.iter_mut() {
        match v.first_packet {
            Some(d) if !v.failed => {
                v.track.finish(now);
                r.receiving += 1;
                r.setups_ms.push(d.as_secs_f64() * 1000.0);
                let t = &v.track;
                if t.degraded() {
                    r.degraded += 1;
                    r.degraded_loss += u32::from(t.loss_windows > 0);
                    r.degraded_gap += u32::from(t.gap_windows > 0);
                    r.degraded_order += u32::from(t.out_of_order > 0);
                    r.degraded_silent += u32::from(t.silent_at_end);
                    r.degraded_max_gaps_ms.push(t.max_gap_ms);
                }
                if let Some((base, from)) = v.hold_base {
                    r.hold_viewer_secs += now.saturating_duration_since(from).as_secs_f64();
                    r.hold_packets += v.track.packets - base;
                }
            }
            _ => {
                r.failed += 1;
                if v.first_packet.is_none() {
                    note(r, "a viewer set up but never got media".into());
                }
            }
        }
        v.rtc.disconnect();
    }
    Ok(out)
}

/// Runs one worker's viewers until the end of the hold (or `stop`), calling `report` once a
/// second with the counts and once at the end with the [`WhepResult`].
///
/// Errors: a URL that is not `http://`, a bad bind range, no poller.
pub fn run_worker(
    spec: &WhepSpec,
    stop: &AtomicBool,
    mut report: impl FnMut(&WhepTick),
) -> anyhow::Result<()> {
    let targets: Vec<Target> = spec
        .urls
        .iter()
        .map(|u| {
            let url = crate::net::url::HttpUrl::parse(u)?;
            anyhow::ensure!(!url.tls, "{u}: the WHEP bench speaks plain http://");
            Ok(Target {
                addr: url.addr,
                host: url.host_header(),
                loopback: crate::net::connect::is_loopback_v4(&url.addr),
                path: url.path,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(!targets.is_empty(), "no WHEP URL");
    let binds = crate::net::connect::parse_bind_range(&spec.bind_range)?;
    // The crypto backend of the build's str0m feature, aws-lc-rs (a no-op when one is installed
    // already).
    str0m::crypto::from_feature_flags().install_process_default();
    crate::profile::sleep_until_unix_ms(spec.start_unix_ms);
    let start = Instant::now();
    let cpu0 = crate::observe::rusage::process();
    let counters = Counters::default();
    let hold_end = start + Duration::from_secs_f64(spec.ramp_secs() + spec.hold_s);
    let mut rss = 0u64;
    let hold_start = start + Duration::from_secs_f64(spec.ramp_secs());
    let mut hold_cpu0 = None;
    let mut hold_cpu = 0u64;
    let mut last_tick = Instant::now();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.threads.max(1))
            .map(|t| {
                let (targets, binds, counters) = (&targets, &binds, &counters);
                s.spawn(move || drive_thread(spec, t, targets, binds, start, counters, stop))
            })
            .collect();
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(Duration::from_millis(100));
            if hold_cpu0.is_none() && Instant::now() >= hold_start {
                hold_cpu0 = Some(crate::observe::rusage::process());
            }
            if Instant::now() + Duration::from_millis(300) >= hold_end && rss == 0 {
                rss = crate::observe::sampler::read_proc(std::process::id()).map_or(0, |r| r.rss);
                if let Some(c0) = hold_cpu0 {
                    let c1 = crate::observe::rusage::process();
                    hold_cpu = (c1.user_us + c1.sys_us).saturating_sub(c0.user_us + c0.sys_us);
                }
            }
            if last_tick.elapsed() >= Duration::from_secs(1) {
                last_tick = Instant::now();
                report(&WhepTick {
                    worker: spec.worker,
                    answered: counters.answered.load(Ordering::Relaxed),
                    receiving: counters.receiving.load(Ordering::Relaxed),
                    failed: counters.failed.load(Ordering::Relaxed),
                    result: None,
                });
            }
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("viewer thread panicked"))?
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    let cpu1 = crate::observe::rusage::process();
    let mut r = WhepResult {
        cpu_us: (cpu1.user_us + cpu1.sys_us).saturating_sub(cpu0.user_us + cpu0.sys_us),
        rss_bytes: rss,
        hold_cpu_us: hold_cpu,
        ..WhepResult::default()
    };
    for t in results {
        merge_result(&mut r, t.result);
    }
    r.viewers = spec.count();
    let never = r.viewers.saturating_sub(r.receiving + r.failed);
    if never > 0 {
        r.failed += never;
        note(
            &mut r,
            format!("{never} viewers never started (the set-ups fell behind the ramp)"),
        );
    }
    r.latency.seal();
    report(&WhepTick {
        worker: spec.worker,
        answered: counters.answered.load(Ordering::Relaxed),
        receiving: r.receiving,
        failed: r.failed,
        result: Some(r),
    });
    Ok(())
}

/// Adds worker (or thread) result `b` to `a` (counts, setups, latency, CPU, memory, errors).
pub fn merge_result(a: &mut WhepResult, mut b: WhepResult) {
    a.viewers += b.viewers;
    a.receiving += b.receiving;
    a.failed += b.failed;
    a.degraded += b.degraded;
    a.degraded_loss += b.degraded_loss;
    a.degraded_gap += b.degraded_gap;
    a.degraded_order += b.degraded_order;
    a.degraded_silent += b.degraded_silent;
    a.degraded_max_gaps_ms.append(&mut b.degraded_max_gaps_ms);
    a.setups_ms.append(&mut b.setups_ms);
    a.hold_packets += b.hold_packets;
    a.hold_viewer_secs += b.hold_viewer_secs;
    b.latency.seal();
    a.latency.merge(&b.latency);
    a.cpu_us += b.cpu_us;
    a.hold_cpu_us += b.hold_cpu_us;
    a.rss_bytes += b.rss_bytes;
    a.datagrams += b.datagrams;
    a.timer_wakeups += b.timer_wakeups;
    a.loop_wakeups += b.loop_wakeups;
    a.hold_busy_us += b.hold_busy_us;
    a.hold_us += b.hold_us;
    a.error_count += b.error_count;
    for e in b.errors {
        if a.errors.len() < 5 {
            a.errors.push(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_arrival_time_maps_to_the_instant_as_long_ago() {
        let mono = Instant::now();
        let wall = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let t = wall - Duration::from_millis(30);
        let (at, unix) = arrival_instant(t, (mono, wall));
        assert_eq!(mono.duration_since(at), Duration::from_millis(30));
        assert_eq!(unix, 1_699_999_999_970_000);
        // A stamp ahead of the wall clock (a clock step) counts as now.
        let (at, _) = arrival_instant(wall + Duration::from_secs(1), (mono, wall));
        assert_eq!(at, mono);
    }

    #[test]
    fn steady_packets_are_healthy() {
        let t0 = Instant::now();
        let mut t = PacketTrack::default();
        for i in 0..600u64 {
            t.packet(
                1000 + i * TS_STEP,
                TS_STEP,
                t0 + Duration::from_millis(i * 20),
            );
        }
        t.finish(t0 + Duration::from_millis(599 * 20 + 10));
        assert_eq!(t.packets, 600);
        assert!(t.windows >= 2);
        assert!(!t.degraded(), "{t:?}");
    }

    #[test]
    fn packets_of_40_and_60_ms_are_judged_by_their_own_duration() {
        let t0 = Instant::now();
        for ms in [40u64, 60] {
            let step = ms * 48;
            let mut t = PacketTrack::default();
            for i in 0..12_000 / ms {
                t.packet(i * step, step, t0 + Duration::from_millis(i * ms));
            }
            t.finish(t0 + Duration::from_millis(12_000 - ms + 10));
            assert!(t.windows >= 2 && !t.degraded(), "{ms} ms: {t:?}");
            // One packet in 20 missing: 5 % loss.
            let mut lossy = PacketTrack::default();
            for i in (0..12_000 / ms).filter(|i| i % 20 != 7) {
                lossy.packet(i * step, step, t0 + Duration::from_millis(i * ms));
            }
            assert!(lossy.loss_windows > 0, "{ms} ms: {lossy:?}");
        }
    }

    #[test]
    fn loss_over_one_percent_degrades() {
        let t0 = Instant::now();
        let mut t = PacketTrack::default();
        // 3 of every 100 packets missing (timestamps jump), no long gap.
        for i in 0..400u64 {
            if i % 100 < 3 {
                continue;
            }
            t.packet(i * TS_STEP, TS_STEP, t0 + Duration::from_millis(i * 20));
        }
        assert!(t.degraded_windows > 0, "{t:?}");
    }

    #[test]
    fn a_gap_over_200_ms_degrades_and_reordering_counts() {
        let t0 = Instant::now();
        let mut t = PacketTrack::default();
        for i in 0..300u64 {
            let late = if i >= 100 { 250 } else { 0 };
            t.packet(
                i * TS_STEP,
                TS_STEP,
                t0 + Duration::from_millis(i * 20 + late),
            );
        }
        assert!(t.degraded_windows > 0, "{t:?}");
        let mut r = PacketTrack::default();
        r.packet(2 * TS_STEP, TS_STEP, t0);
        r.packet(TS_STEP, TS_STEP, t0);
        assert_eq!(r.out_of_order, 1);
        assert!(r.degraded());
    }

    #[test]
    fn a_viewer_that_went_silent_is_degraded() {
        let t0 = Instant::now();
        let mut t = PacketTrack::default();
        t.packet(0, TS_STEP, t0);
        t.finish(t0 + Duration::from_secs(1));
        assert!(t.degraded());
    }
}
