//! The WHEP viewer engine: WebRTC (WHEP, RFC 9725) viewers with their own str0m clients,
//! driven by one `mio` loop per thread of a worker ([`run_worker`]), each viewer's packets
//! judged as they arrive ([`crate::whep::track`]).
//!
//! A worker runs one [`Slice`] of a WHEP group: its viewers start and stop as the group's
//! stages ask (viewer `id` of the group is on while the target is above it, on URL
//! `urls[id % n]`), spread over `threads` driving threads by their local index (`local %
//! threads`). Each viewer POSTs an SDP offer to its WHEP endpoint (`http://host:port/whep/
//! <mount>`) on one of its thread's [`CONNECTORS`] connector threads, so a slow answer never
//! holds up the viewers playing; then completes ICE and DTLS and must receive the Opus packets
//! of the mount in order at their pace. The client negotiates no TWCC feedback, shares its
//! connector's DTLS certificate and runs in str0m's RTP mode: each SRTP packet is decrypted and
//! handed over as it arrives, without the jitter buffer and depacketizer a player would need,
//! so the order check sees the packets in their arrival order. A viewer is only woken when its
//! socket is readable or its own str0m timer is due, at most every [`MIN_LOOP`]; against a
//! loopback server a thread's viewers share one socket (each its own 127.100.x.y address,
//! [`shared_viewer_ip`]) read with one `recvmmsg` for many, else each has its own socket over
//! the `--bind-range` addresses. Packets are judged by their datagrams' kernel arrival times,
//! not by when a busy thread read them.
//!
//! Viewers leave as the bench chooses (a ramp-down takes the last ones off, a session of a
//! random length ends and rejoins, the run ends) or after a failure (reconnecting after
//! `reconnect-after` if the group says so); each session the server made is ended with a
//! `DELETE` of its resource (RFC 9725 §4.2) rather than left to its ICE consent running out,
//! and a viewer's next connection on a shared socket comes from a new address.
//!
//! Once a second of the run's clock the worker's main thread asks every driving thread for
//! its tick (a [`mio::Waker`] each): the thread judges its viewers (the rules, setup timeouts,
//! reconnects), and hands over its running [`Snapshot`] and that second's histograms; the main
//! thread sums them, adds the worker's CPU and memory and the mode's own figures
//! ([`crate::whep::extra`]), and reports the [`GroupTick`]. The last tick (the stages' end, or
//! `stop`) disconnects every viewer and adds their sessions.
//!
//! What a viewer measures: its setup time (POST to first packet, the `ttfb` histogram), every
//! gap between two packets (`gap`), its longest gap at its end (`longest_gap`), mouth-to-ear
//! latency on the run's clock (`m2e`: the probe's stamps, [`crate::verify::stamp`], or with a
//! burst schedule the tone-burst onsets, [`crate::whep::bursts`]), media time from the packets'
//! own durations and the packets lost (RFC 3550 §A.3). Failures are counted by reason:
//! `whep-http-NNN` (the POST not answered 201), `whep-refused`, `whep-timeout`, `whep-reset`
//! (and the other connection reasons of [`FailReason`], prefixed `whep-`), `whep-bad-answer`
//! (no HTTP answer), `whep-bad-sdp` (an answer str0m cannot take), `whep-setup-timeout` (no
//! ICE and DTLS within [`SETUP_TIMEOUT`]), `whep-ice` (ICE disconnected during the set-up),
//! `whep-no-media` (connected, no packet within [`SETUP_TIMEOUT`]), `whep-rtc` (str0m gave up
//! on the connection), `whep-no-local-address` (no address to offer as the viewer's ICE
//! candidate).

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};
use serde::{Deserialize, Serialize};
use str0m::change::SdpAnswer;
use str0m::media::{Direction, MediaKind};
use str0m::net::{Protocol, Receive};
use str0m::rtp::{Extension, RtpPacket};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc, RtcConfig};

use crate::icy::engine::{mount_of, session_length_us};
use crate::net::connect::{binds_apply, is_loopback_v4, parse_bind_range};
use crate::net::udp_batch::{bind_shared, send_from, stamp_arrivals, RecvBatch};
use crate::observe::rusage;
use crate::profile::slice::{sleep_until_unix_ms, unix_us, Judge, RunClock, Slice};
use crate::stats::{Caught, FailReason, GroundTruth, GroupTick, Rule, Snapshot};
use crate::verify::stamp::read_stamp;
use crate::whep::bursts::{BurstMeter, BurstSchedule};
use crate::whep::extra;
use crate::whep::track::{packet_samples, PacketTrack};

/// Gap between two packets above which a viewer is starved (`starved: gap`): the default
/// `max-gap` of WHEP groups (issue 16: 200 ms, a WebRTC player's jitter buffer).
pub const MAX_GAP: Duration = Duration::from_millis(200);

/// Connector threads per driving thread (each POSTs offers from the thread's queue in turn).
pub const CONNECTORS: u32 = 4;

/// Shortest time between two event-loop wake-ups of a driving thread (it delays a packet's
/// processing by at most this, never its measured arrival: that is the kernel's).
pub const MIN_LOOP: Duration = Duration::from_millis(5);

/// Datagrams one `recvmmsg` of a viewer's own socket takes at most (a viewer gets one every 20
/// to 60 ms: more than a few waiting means the thread fell behind).
pub const RECV_BATCH: usize = 4;

/// A viewer still setting up this long after its POST began fails (`whep-setup-timeout`,
/// `whep-ice` or `whep-no-media`).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(15);

/// Receive buffer of a thread's shared socket (bytes; the kernel caps it at `rmem_max`).
pub const SHARED_BUFFER: usize = 8 << 20;

/// Datagrams one `recvmmsg` of a shared socket takes at most.
pub const SHARED_BATCH: usize = 64;

/// Largest answer to a POST read (bytes): an SDP answer is a few KiB.
pub const MAX_ANSWER: u64 = 64 * 1024;

/// How long a worker waits at its end for the `DELETE`s of its last viewers' sessions.
pub const DELETE_WAIT: Duration = Duration::from_secs(2);

/// The poll token of a thread's shared socket (viewers' own sockets use their slot index).
const SHARED: Token = Token(usize::MAX);
/// The poll token of a thread's waker (a tick asked for, a connector's answer).
const WAKE: Token = Token(usize::MAX - 1);

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

/// What one WHEP engine (a worker) runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WhepSpec {
    /// The group's slice this engine runs.
    pub slice: Slice,
    /// Driving threads (at least 1; no more are started than the engine has viewers).
    pub threads: u32,
    /// With `--latency-bursts`: when the probe source writes each tone burst (on the run's
    /// clock), for the viewers' onsets to be matched against.
    #[serde(default)]
    pub bursts: Option<BurstSchedule>,
}

/// The kernel arrival time `t` of a datagram as µs since the engine's epoch and µs since the
/// Unix epoch (this host's clock), given both clocks read once after it was read (`clocks`:
/// µs since the engine's epoch, and the wall clock): as long before the first reading as `t` is
/// before the second (now when `t` is ahead of it).
pub fn arrival_us(t: SystemTime, clocks: (u64, SystemTime)) -> (u64, u64) {
    let (mono_us, wall) = clocks;
    let ago = wall.duration_since(t).unwrap_or(Duration::ZERO);
    let at = mono_us.saturating_sub(ago.as_micros() as u64);
    let unix = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    (at, unix)
}

/// The loopback address of connection `conn` (0, 1, ...) of viewer `id` of a group of `peak`
/// viewers when its thread shares one socket: from 127.100.0.1 on, one address per viewer and
/// a new one for each of its connections (so the server tells the viewers apart as it tells
/// hosts apart, and never takes a reconnected viewer for its old session): `id + peak × lane`,
/// the lanes taken in turn as far as 127.255.255.254 allows.
pub fn shared_viewer_ip(id: u32, conn: u32, peak: u32) -> Ipv4Addr {
    let peak = peak.max(id + 1);
    let lanes = (SHARED_SPAN / peak).max(1);
    let offset = (conn % lanes) * peak + id % SHARED_SPAN;
    Ipv4Addr::from(u32::from(SHARED_BASE) + offset % SHARED_SPAN)
}

/// The first address of [`shared_viewer_ip`].
const SHARED_BASE: Ipv4Addr = Ipv4Addr::new(127, 100, 0, 1);

/// Addresses from [`SHARED_BASE`] to 127.255.255.254.
const SHARED_SPAN: u32 = 0x7fff_fffe - 0x7f64_0001 + 1;

/// The viewer id of a shared-socket address of a group of `peak` viewers
/// ([`shared_viewer_ip`] backwards, whatever the connection).
fn shared_viewer_id(ip: Ipv4Addr, peak: u32) -> Option<u32> {
    let offset = u32::from(ip).checked_sub(u32::from(SHARED_BASE))?;
    (offset < SHARED_SPAN).then(|| offset % peak.max(1))
}

/// Where a viewer connects.
#[derive(Debug, Clone)]
struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
    loopback: bool,
    /// The local address this host sends from to reach it (a viewer's ICE host candidate
    /// must be a real address, not 0.0.0.0), when no bind range applies.
    source: Option<IpAddr>,
}

/// The local address the kernel would send from to `to` (a route look-up: a UDP socket
/// connected, nothing sent); `None` when there is no route.
fn source_for(to: SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = match to {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(to).ok()?;
    s.local_addr()
        .ok()
        .map(|a| a.ip())
        .filter(|ip| !ip.is_unspecified())
}

/// How a viewer's datagrams travel.
enum Link {
    /// Its own socket, registered on its thread's poll.
    Own(UdpSocket),
    /// Its thread's shared socket (a loopback target, [`bind_shared`]), from the viewer's own
    /// address.
    Shared(RawFd),
}

/// One WebRTC viewer's connection (boxed in its slot: str0m's state is large).
struct Viewer {
    rtc: Rtc,
    link: Link,
    local: SocketAddr,
    /// When its POST began (µs since the engine's epoch).
    post_us: u64,
    /// The same on the run's clock (µs since the Unix epoch): audio stamped or written before
    /// it is buffered audio, not delivery.
    post_run_us: u64,
    /// Its session's resource on the server (the `Location` path), for the `DELETE` that ends
    /// it.
    resource: Option<String>,
    /// Its URL (index into the targets).
    target: u16,
    /// Its str0m timer.
    next: Instant,
    /// ICE and DTLS are up (str0m's `Connected`).
    connected: bool,
    /// ICE reported `Disconnected` during the set-up.
    ice_down: bool,
    /// Its packets, judged.
    track: PacketTrack,
    /// When the datagram being handled reached the host: µs since the engine's epoch and since
    /// the Unix epoch (this host's clock), if the kernel said.
    arrival: Option<(u64, u64)>,
    /// With a burst schedule: this viewer's onset meter.
    bursts: Option<BurstMeter>,
    /// A failure found while handling its input or output.
    failed: Option<&'static str>,
}

/// The failure key of an I/O error of a POST (`whep-refused`, `whep-timeout`, ...).
fn io_key(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => "whep-timeout".into(),
        _ => format!("whep-{}", FailReason::from_io(e).key()),
    }
}

/// POSTs an SDP offer to `t`; returns the SDP answer and the session's resource (the path of
/// its `Location`, for the `DELETE` that ends it). Errors: the failure key (a connection error,
/// a status other than 201, an answer that is no HTTP response or no text).
fn post_offer(
    t: &Target,
    offer: &str,
    timeout: Duration,
) -> Result<(String, Option<String>), String> {
    let mut s = TcpStream::connect_timeout(&t.addr, timeout).map_err(|e| io_key(&e))?;
    s.set_read_timeout(Some(timeout)).map_err(|e| io_key(&e))?;
    s.set_write_timeout(Some(timeout)).map_err(|e| io_key(&e))?;
    let _ = s.set_nodelay(true);
    write!(
        s,
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{offer}",
        t.path,
        t.host,
        offer.len()
    )
    .map_err(|e| io_key(&e))?;
    let mut out = Vec::new();
    // A server may answer and close before reading the whole offer (a 404 at once): its reset
    // can end the read after the answer came, which then counts.
    let read = s.take(MAX_ANSWER).read_to_end(&mut out);
    let (head, len) = match (throng_proto::http::parse_response_head(&out), read) {
        (Ok(Some(h)), _) => h,
        (_, Err(e)) => return Err(io_key(&e)),
        _ => return Err("whep-bad-answer".into()),
    };
    if head.status != 201 {
        return Err(format!("whep-http-{}", head.status));
    }
    let resource = head.header("location").and_then(resource_path);
    let answer = String::from_utf8(out[len..].to_vec()).map_err(|_| "whep-bad-sdp")?;
    Ok((answer, resource))
}

/// The path of a WHEP session's `Location` (absolute, or a path on the endpoint's server);
/// `None` for anything else.
fn resource_path(location: &str) -> Option<String> {
    let l = location.trim();
    let path = match l.split_once("://") {
        Some((_, rest)) => &rest[rest.find('/')?..],
        None => l,
    };
    (path.starts_with('/') && !path.contains([' ', '\r', '\n'])).then(|| path.to_owned())
}

/// Ends a WHEP session: `DELETE` on its resource `path` of `t` (RFC 9725 §4.2), so the server
/// lets it go at once rather than when its ICE consent runs out. Best effort: errors are
/// ignored.
fn delete_session(t: &Target, path: &str, timeout: Duration) {
    let Ok(mut s) = TcpStream::connect_timeout(&t.addr, timeout) else {
        return;
    };
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    let _ = s.set_nodelay(true);
    if write!(
        s,
        "DELETE {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        t.host
    )
    .is_ok()
    {
        let mut sink = [0u8; 512];
        // The answer's head, then the server closes.
        let _ = s.read(&mut sink);
    }
}

/// The client configuration of a connector's viewers: RTP mode (packets as received, no
/// depacketizing buffer); Opus only; of the RTP header extensions only the MID (RFC 8843), so
/// no transport-wide congestion control feedback (TWCC, sent every 50 ms by a receiver that
/// negotiates it) nor audio levels; one DTLS certificate shared by the viewers instead of a key
/// pair generated per viewer.
fn rtc_config() -> RtcConfig {
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

/// What a connector needs to set up a viewer.
struct Setup {
    targets: Vec<Target>,
    /// The thread's shared socket: its descriptor and port.
    shared: Option<(RawFd, u16)>,
    /// The engine's epoch.
    epoch: Instant,
    clock: Arc<RunClock>,
    bursts: bool,
    /// The POST's connect and read timeout.
    timeout: Duration,
    /// Each slot's connection generation, as its driving thread last set it: a queued POST
    /// for an older one (the viewer was closed meanwhile) is skipped.
    gens: Arc<[AtomicU32]>,
    /// `DELETE`s queued and not yet sent (the worker waits a little for them at its end).
    deletes: Arc<AtomicUsize>,
}

/// A connector's work.
enum Job {
    /// Set up slot `slot`'s viewer (connection generation `gen`) of URL `target`, from local
    /// address `bind`.
    Post {
        slot: usize,
        gen: u32,
        target: u16,
        bind: IpAddr,
    },
    /// End the session of resource `path` on URL `target`.
    Delete { target: u16, path: String },
}

/// A connector's answer to a [`Job`]: the viewer, or its failure key.
struct Done {
    slot: usize,
    gen: u32,
    viewer: Result<Box<Viewer>, String>,
}

/// Sets up a viewer of URL `target` from address `bind`: its own socket, or the thread's
/// shared one as `bind`:port; POSTs the offer and takes the answer. Errors: the failure key.
fn set_up(config: &RtcConfig, s: &Setup, target: u16, bind: IpAddr) -> Result<Box<Viewer>, String> {
    let started = Instant::now();
    let post_us = started.saturating_duration_since(s.epoch).as_micros() as u64;
    let post_run_us = s.clock.now_us();
    let mut rtc = config.clone().build(started);
    let (link, local) = match s.shared {
        Some((fd, port)) => (Link::Shared(fd), SocketAddr::from((bind, port))),
        None => {
            let std_socket = std::net::UdpSocket::bind((bind, 0)).map_err(|e| io_key(&e))?;
            std_socket.set_nonblocking(true).map_err(|e| io_key(&e))?;
            // Its datagrams' kernel arrival times, as the shared sockets have them (without,
            // the time they are read).
            let _ = stamp_arrivals(std_socket.as_raw_fd());
            let local = std_socket.local_addr().map_err(|e| io_key(&e))?;
            (Link::Own(UdpSocket::from_std(std_socket)), local)
        }
    };
    let candidate =
        Candidate::host(local, "udp").map_err(|_| "whep-no-local-address".to_owned())?;
    rtc.add_local_candidate(candidate);
    let mut api = rtc.sdp_api();
    api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
    let (offer, pending) = api.apply().ok_or_else(|| "whep-rtc".to_owned())?;
    let t = s
        .targets
        .get(usize::from(target))
        .ok_or_else(|| "whep-rtc".to_owned())?;
    let (answer, resource) = post_offer(t, &offer.to_sdp_string(), s.timeout)?;
    // A session the server made but that cannot be used is ended at once.
    let refuse = |key: &str| {
        if let Some(path) = &resource {
            delete_session(t, path, s.timeout);
        }
        key.to_owned()
    };
    let answer = SdpAnswer::from_sdp_string(&answer).map_err(|_| refuse("whep-bad-sdp"))?;
    rtc.sdp_api()
        .accept_answer(pending, answer)
        .map_err(|_| refuse("whep-bad-sdp"))?;
    Ok(Box::new(Viewer {
        rtc,
        link,
        local,
        post_us,
        post_run_us,
        resource,
        target,
        next: started,
        connected: false,
        ice_down: false,
        track: PacketTrack::default(),
        arrival: None,
        bursts: s.bursts.then(|| BurstMeter::new(post_run_us)),
        failed: None,
    }))
}

/// A connector thread: POSTs the jobs of its driving thread's queue until the queue closes;
/// each answer goes back with a wake-up. `cpu` gets the thread's CPU time after each job (µs).
fn connector(
    setup: Arc<Setup>,
    jobs: Arc<Mutex<Receiver<Job>>>,
    done: Sender<Done>,
    waker: Arc<Waker>,
    cpu: Arc<AtomicU64>,
) {
    let config = rtc_config();
    loop {
        let job = {
            let rx = jobs.lock().unwrap_or_else(|p| p.into_inner());
            rx.recv()
        };
        let Ok(job) = job else { return };
        match job {
            Job::Post {
                slot,
                gen,
                target,
                bind,
            } => {
                let current = setup.gens.get(slot).map(|g| g.load(Ordering::Acquire));
                if current != Some(gen) {
                    // Closed while queued: nothing to set up.
                    continue;
                }
                let viewer = set_up(&config, &setup, target, bind);
                let t = rusage::thread();
                cpu.store(t.user_us + t.sys_us, Ordering::Relaxed);
                if done.send(Done { slot, gen, viewer }).is_err() {
                    return;
                }
                let _ = waker.wake();
            }
            Job::Delete { target, path } => {
                if let Some(t) = setup.targets.get(usize::from(target)) {
                    delete_session(t, &path, setup.timeout);
                }
                setup.deletes.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not on (before its start, after a ramp-down, or between sessions).
    Idle,
    /// Its offer is queued or being POSTed.
    Posting,
    /// Answered: ICE, DTLS and the first packet to come.
    Setup,
    /// Receiving.
    Streaming,
    /// Failed: waiting to reconnect, or down for good.
    Failed,
}

/// One viewer of a thread: a few dozen bytes, and its connection when it has one.
struct Slot {
    /// The group's viewer number.
    id: u32,
    /// Its URL (index into the targets).
    target: u16,
    state: State,
    /// Connection generation: a connector's answer for an older one is dropped.
    gen: u32,
    /// Connections started (for its next shared-socket address).
    conns: u32,
    caught: Caught,
    viewer: Option<Box<Viewer>>,
    /// When a failed viewer reconnects (µs since the epoch).
    retry_at_us: u64,
    /// With session lengths: when the current session leaves (µs since the epoch).
    leave_at_us: Option<u64>,
    /// When its streaming time was last counted (µs since the epoch).
    counted_us: u64,
    /// Its first tick of media is behind it (its media counts as steady from then).
    ticked: bool,
}

/// A driving thread's counters of the mode's own figures.
#[derive(Debug, Default)]
struct Counters {
    datagrams: u64,
    timer_wakeups: u64,
    loop_wakeups: u64,
    hold_busy_us: u64,
    hold_us: u64,
    hold_listen_us: u64,
    silent_at_end: u64,
    out_of_order: u64,
    ts_jumps: u64,
    ice_disconnects: u64,
}

/// What a driving thread's viewers share: running totals, the rules, clocks.
struct Ctx<'a> {
    spec: &'a WhepSpec,
    judge: Judge,
    clock: Arc<RunClock>,
    epoch: Instant,
    /// The second in progress (since the run's start).
    second: u32,
    /// Whether it is a hold second.
    hold: bool,
    snap: Snapshot,
    counters: Counters,
    /// Sessions ended per URL: count, listening time (µs).
    sessions: Vec<(u64, u64)>,
    bursts: Option<&'a BurstSchedule>,
    /// The connectors' queue.
    jobs: Sender<Job>,
    /// `DELETE`s queued and not yet sent.
    deletes: Arc<AtomicUsize>,
}

impl Ctx<'_> {
    /// Queues the `DELETE` of viewer `v`'s session, if the server made one.
    fn end_session(&self, v: &mut Viewer) {
        if let Some(path) = v.resource.take() {
            self.deletes.fetch_add(1, Ordering::AcqRel);
            let job = Job::Delete {
                target: v.target,
                path,
            };
            if self.jobs.send(job).is_err() {
                self.deletes.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// µs since the engine's epoch.
    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }
}

/// A tick answer of a driving thread.
struct Answer {
    snap: Snapshot,
    /// The thread's CPU time so far (µs).
    cpu_us: u64,
}

/// What the main thread and the driving threads share.
#[derive(Default)]
struct Shared {
    /// The tick asked for: `(second + 1) << 1 | last`; 0 before the first.
    req: AtomicU64,
    /// End at once, without a last tick (the reporter went away, or a thread failed).
    abort: AtomicBool,
}

/// One driving thread: its viewers (local indices `t`, `t + threads`, ...), its poll, its
/// connectors' queue.
struct Driver<'a> {
    /// This thread's index.
    t: usize,
    threads: usize,
    /// The engine's viewer numbers, ascending (the stages' order).
    ids: &'a [u32],
    slots: Vec<Slot>,
    /// Each slot's next str0m timer (`never` without a connection): the loop's scans read this
    /// compact list rather than every (large) viewer.
    nexts: Vec<Instant>,
    /// Slots on: the first `on` of `slots`.
    on: usize,
    /// Most slots ever on.
    started: usize,
    poll: Poll,
    shared: Option<UdpSocket>,
    batch: RecvBatch,
    shared_batch: RecvBatch,
    done: Receiver<Done>,
    /// Each slot's connection generation, for the connectors (see [`Setup::gens`]).
    gens: Arc<[AtomicU32]>,
    /// The group's peak (for the shared-socket addresses).
    peak: u32,
    binds: &'a [Ipv4Addr],
    targets: &'a [Target],
    ctx: Ctx<'a>,
    never: Instant,
}

/// Slot `slot`'s packet `p`: judged, counted, its latency taken.
fn on_packet(slot: &mut Slot, v: &mut Viewer, p: &RtpPacket, ctx: &mut Ctx) {
    // When the datagram carrying it reached the host (its gaps and latency are judged by
    // that, not by when a busy thread read it).
    let (at_us, at_unix_us) = v.arrival.unwrap_or_else(|| (ctx.now_us(), unix_us()));
    let snap = &mut ctx.snap;
    if slot.state == State::Setup {
        slot.state = State::Streaming;
        snap.ttfb.record_us(at_us.saturating_sub(v.post_us));
        slot.counted_us = at_us;
        slot.ticked = false;
        if let Some((lo, hi)) = ctx.spec.slice.behaviour.session_range_us() {
            let seed = at_us ^ (u64::from(slot.id) << 32);
            slot.leave_at_us = Some(at_us + session_length_us(lo, hi, seed));
        }
    }
    let samples = packet_samples(&p.payload);
    let seen = v
        .track
        .packet(*p.seq_no, p.time.numer(), samples, at_us, &ctx.judge);
    snap.units += 1;
    snap.bytes += p.payload.len() as u64;
    snap.media_us += seen.media_us;
    if slot.ticked {
        snap.steady_media_us += seen.media_us;
    }
    if let Some(g) = seen.gap_us {
        snap.gap.record_us(g);
    }
    if seen.over_gap {
        slot.caught.catch(Rule::Gap, snap, ctx.second);
    }
    if seen.corrupt {
        ctx.counters.out_of_order += 1;
        slot.caught.catch(Rule::Corrupt, snap, ctx.second);
    }
    ctx.counters.ts_jumps += u64::from(seen.ts_jump);
    let arrived_run_us = ctx.clock.to_run_us(at_unix_us);
    if let (Some(schedule), Some(meter)) = (ctx.bursts, v.bursts.as_mut()) {
        if let Some((onset, burst)) = meter.packet(schedule, p.payload.len(), arrived_run_us) {
            snap.m2e.record_us(onset.saturating_sub(burst));
        }
    } else if let Some(stamp) = read_stamp(&p.payload) {
        // Only audio sent after the viewer asked for it: older audio is buffering.
        if stamp >= v.post_run_us {
            if let Some(lat) = arrived_run_us.checked_sub(stamp) {
                snap.m2e.record_us(lat);
            }
        }
    }
}

/// Takes viewer `v`'s output until its next timeout: datagrams sent, packets judged, its
/// connection events noted.
fn pump(slot: &mut Slot, v: &mut Viewer, ctx: &mut Ctx) {
    loop {
        match v.rtc.poll_output() {
            Ok(Output::Timeout(t)) => {
                v.next = t;
                return;
            }
            Ok(Output::Transmit(t)) => match &v.link {
                Link::Own(s) => {
                    let _ = s.send_to(&t.contents, t.destination);
                }
                Link::Shared(fd) => {
                    if let (IpAddr::V4(from), SocketAddr::V4(to)) = (v.local.ip(), t.destination) {
                        let _ = send_from(*fd, &t.contents, from, to);
                    }
                }
            },
            Ok(Output::Event(Event::RtpPacket(p))) => on_packet(slot, v, &p, ctx),
            Ok(Output::Event(Event::Connected)) => v.connected = true,
            Ok(Output::Event(Event::IceConnectionStateChange(
                IceConnectionState::Disconnected,
            ))) => {
                if slot.state == State::Streaming {
                    ctx.counters.ice_disconnects += 1;
                } else {
                    v.ice_down = true;
                }
            }
            Ok(Output::Event(_)) => {}
            Err(_) => {
                v.failed = Some("whep-rtc");
                v.next = Instant::now() + Duration::from_millis(50);
                return;
            }
        }
    }
}

/// Hands one datagram from `source`, which reached the host at `at` (µs since the engine's
/// epoch and since the Unix epoch; `None`: not known, now), to viewer `v` and takes its output.
fn input(
    slot: &mut Slot,
    v: &mut Viewer,
    data: &[u8],
    source: SocketAddr,
    at: Option<(u64, u64)>,
    ctx: &mut Ctx,
) {
    v.arrival = at;
    let Ok(contents) = data.try_into() else {
        return;
    };
    let input = Input::Receive(
        Instant::now(),
        Receive {
            proto: Protocol::Udp,
            source,
            destination: v.local,
            contents,
        },
    );
    if v.rtc.handle_input(input).is_err() {
        v.failed = Some("whep-rtc");
    }
    pump(slot, v, ctx);
    v.arrival = None;
}

/// Reads every datagram waiting on viewer `v`'s own socket into its client (one `recvmmsg`
/// per [`RecvBatch`] of them).
fn receive(slot: &mut Slot, v: &mut Viewer, batch: &mut RecvBatch, ctx: &mut Ctx) {
    let fd = match &v.link {
        Link::Own(s) => s.as_raw_fd(),
        Link::Shared(_) => return,
    };
    loop {
        let n = match batch.recv(fd) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        ctx.counters.datagrams += n as u64;
        let clocks = (ctx.now_us(), SystemTime::now());
        for i in 0..n {
            let (data, source) = batch.get(i);
            let at = batch.arrival(i).map(|t| arrival_us(t, clocks));
            input(slot, v, data, source, at, ctx);
            if v.failed.is_some() {
                return;
            }
        }
        if n < batch.capacity() {
            return;
        }
    }
}

/// Counts slot `s`'s streaming time up to `now` into the listening totals.
fn count_time(s: &mut Slot, ctx: &mut Ctx, now: u64) {
    if s.state == State::Streaming {
        let dt = now.saturating_sub(s.counted_us);
        ctx.snap.listen_us += dt;
        if s.ticked {
            ctx.snap.steady_listen_us += dt;
        }
        if ctx.hold {
            ctx.counters.hold_listen_us += dt;
        }
    }
    s.counted_us = now;
}

/// Closes slot `s` by the bench's choice (ramp-down, a session's end, the run's end) or after
/// a failure: a streaming session's listening time is counted for its URL, its longest gap
/// recorded, its client disconnected.
fn close(s: &mut Slot, ctx: &mut Ctx, now: u64) {
    count_time(s, ctx, now);
    if let Some(mut v) = s.viewer.take() {
        if s.state == State::Streaming {
            let gt = &mut ctx.sessions[usize::from(s.target)];
            gt.0 += 1;
            gt.1 += now.saturating_sub(v.post_us);
            ctx.snap.longest_gap.record_us(v.track.longest_gap_us(now));
            ctx.snap.lost_units += v.track.take_lost();
        }
        v.rtc.disconnect();
        ctx.end_session(&mut v);
    }
    s.gen = s.gen.wrapping_add(1);
    s.leave_at_us = None;
    s.state = State::Idle;
}

/// Fails slot `s` for `key`: counted, closed, and due to reconnect if the group does.
fn fail(s: &mut Slot, ctx: &mut Ctx, key: &str, now: u64) {
    *ctx.snap.failures.entry(key.to_owned()).or_insert(0) += 1;
    close(s, ctx, now);
    s.caught.fail(&mut ctx.snap);
    s.state = State::Failed;
    if let Some(d) = ctx.spec.slice.behaviour.reconnect_after {
        s.retry_at_us = now + (d.0 * 1e6) as u64;
    }
}

impl<'a> Driver<'a> {
    /// The number of this thread's viewers on when the engine wants `want` on (those whose
    /// local index is below it).
    fn local_on(&self, want: usize) -> usize {
        if want > self.t {
            (want - self.t - 1) / self.threads + 1
        } else {
            0
        }
        .min(self.slots.len())
    }

    /// Starts (or restarts) slot `i`'s connection: its offer queued for the connectors.
    fn connect(&mut self, i: usize, now: u64) {
        let ctx = &mut self.ctx;
        ctx.snap.connects += 1;
        let s = &mut self.slots[i];
        s.gen = s.gen.wrapping_add(1);
        self.gens[i].store(s.gen, Ordering::Release);
        s.state = State::Posting;
        s.counted_us = now;
        let t = &self.targets[usize::from(s.target)];
        let bind = if self.shared.is_some() {
            IpAddr::V4(shared_viewer_ip(s.id, s.conns, self.peak))
        } else if binds_apply(&t.addr, self.binds) {
            IpAddr::V4(self.binds[s.id as usize % self.binds.len()])
        } else {
            t.source.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        };
        s.conns = s.conns.wrapping_add(1);
        let job = Job::Post {
            slot: i,
            gen: s.gen,
            target: s.target,
            bind,
        };
        if ctx.jobs.send(job).is_err() {
            fail(s, ctx, "whep-connector", now);
        }
    }

    /// Installs the connectors' answers (a viewer answered, or its failure).
    fn take_done(&mut self, now: u64) {
        loop {
            let d = match self.done.try_recv() {
                Ok(d) => d,
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => return,
            };
            let Some(s) = self.slots.get_mut(d.slot) else {
                continue;
            };
            if s.gen != d.gen || s.state != State::Posting {
                // Closed meanwhile (a ramp-down): the answer is dropped, its session ended.
                if let Ok(mut v) = d.viewer {
                    v.rtc.disconnect();
                    self.ctx.end_session(&mut v);
                }
                continue;
            }
            match d.viewer {
                Ok(mut v) => {
                    if let Link::Own(sock) = &mut v.link {
                        if let Err(e) =
                            self.poll
                                .registry()
                                .register(sock, Token(d.slot), Interest::READABLE)
                        {
                            let key = format!("whep-{}", FailReason::from_io(&e).key());
                            v.rtc.disconnect();
                            self.ctx.end_session(&mut v);
                            fail(s, &mut self.ctx, &key, now);
                            continue;
                        }
                    }
                    self.nexts[d.slot] = v.next;
                    s.viewer = Some(v);
                    s.state = State::Setup;
                }
                Err(key) => {
                    fail(s, &mut self.ctx, &key, now);
                    self.nexts[d.slot] = self.never;
                }
            }
        }
    }

    /// Closes slot `i` (see [`close`]).
    fn close(&mut self, i: usize, now: u64) {
        close(&mut self.slots[i], &mut self.ctx, now);
        self.gens[i].store(self.slots[i].gen, Ordering::Release);
        self.nexts[i] = self.never;
    }

    /// Fails slot `i` (see [`fail`]).
    fn fail(&mut self, i: usize, key: &str, now: u64) {
        fail(&mut self.slots[i], &mut self.ctx, key, now);
        self.gens[i].store(self.slots[i].gen, Ordering::Release);
        self.nexts[i] = self.never;
    }

    /// Runs slot `i`'s due str0m timer.
    fn timer(&mut self, i: usize, now: Instant, now_us: u64) {
        let s = &mut self.slots[i];
        let Some(mut v) = s.viewer.take() else {
            self.nexts[i] = self.never;
            return;
        };
        self.ctx.counters.timer_wakeups += 1;
        if v.rtc.handle_input(Input::Timeout(now)).is_err() {
            v.failed = Some("whep-rtc");
        }
        pump(s, &mut v, &mut self.ctx);
        self.nexts[i] = v.next;
        let failed = v.failed;
        s.viewer = Some(v);
        if let Some(key) = failed {
            self.fail(i, key, now_us);
        }
    }

    /// Reads the shared socket empty (its poll is edge-triggered), each datagram to the viewer
    /// its destination address names.
    fn read_shared(&mut self) {
        loop {
            let Some(sock) = &self.shared else { return };
            let n = match self.shared_batch.recv(sock.as_raw_fd()) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            self.ctx.counters.datagrams += n as u64;
            let clocks = (self.ctx.now_us(), SystemTime::now());
            for k in 0..n {
                let Some(dest) = self.shared_batch.dest(k) else {
                    continue;
                };
                let Some(id) = shared_viewer_id(dest, self.peak) else {
                    continue;
                };
                let Ok(i) = self.slots.binary_search_by_key(&id, |s| s.id) else {
                    continue;
                };
                let s = &mut self.slots[i];
                // A datagram for an older connection of the viewer (its session not gone yet
                // on the server) is dropped.
                if s.viewer
                    .as_ref()
                    .is_none_or(|v| v.local.ip() != IpAddr::V4(dest))
                {
                    continue;
                }
                let Some(mut v) = s.viewer.take() else {
                    continue;
                };
                let (data, source) = self.shared_batch.get(k);
                let at = self.shared_batch.arrival(k).map(|t| arrival_us(t, clocks));
                input(s, &mut v, data, source, at, &mut self.ctx);
                self.nexts[i] = v.next;
                let failed = v.failed;
                s.viewer = Some(v);
                if let Some(key) = failed {
                    let now = self.ctx.now_us();
                    self.fail(i, key, now);
                }
            }
            if n < self.shared_batch.capacity() {
                return;
            }
        }
    }

    /// The thread's tick at `now` (the second `ctx.second` ends): every viewer judged, the
    /// states counted; with `last`, every viewer closed and the sessions added. Returns the
    /// running snapshot with this second's histograms (which are then cleared here).
    fn tick(&mut self, now: u64, last: bool) -> Snapshot {
        let second = self.ctx.second;
        let judge = self.ctx.judge;
        let (mut connecting, mut streaming, mut starved, mut down) = (0, 0, 0, 0);
        let reconnect = self.ctx.spec.slice.behaviour.reconnect_after.is_some();
        let setup_timeout = SETUP_TIMEOUT.as_micros() as u64;
        for i in 0..self.on {
            count_time(&mut self.slots[i], &mut self.ctx, now);
            let s = &mut self.slots[i];
            match s.state {
                State::Posting => connecting += 1,
                State::Setup => {
                    let (waited, key) = match &s.viewer {
                        Some(v) if v.ice_down => (now.saturating_sub(v.post_us), "whep-ice"),
                        Some(v) if v.connected => (now.saturating_sub(v.post_us), "whep-no-media"),
                        Some(v) => (now.saturating_sub(v.post_us), "whep-setup-timeout"),
                        None => (0, ""),
                    };
                    if waited > setup_timeout {
                        self.fail(i, key, now);
                        down += 1;
                    } else {
                        connecting += 1;
                    }
                }
                State::Streaming => {
                    streaming += 1;
                    let Some(v) = s.viewer.as_mut() else { continue };
                    let seen = v.track.tick(now, &judge);
                    s.ticked = !seen.burst;
                    let snap = &mut self.ctx.snap;
                    snap.lost_units += seen.lost_new;
                    if seen.rate {
                        s.caught.catch(Rule::Rate, snap, second);
                    }
                    if seen.gap {
                        s.caught.catch(Rule::Gap, snap, second);
                    }
                    if seen.loss {
                        s.caught.catch(Rule::Loss, snap, second);
                    }
                    if seen.rate || seen.gap || seen.loss {
                        starved += 1;
                    }
                }
                State::Failed => {
                    if reconnect && !last && now >= s.retry_at_us {
                        self.connect(i, now);
                        connecting += 1;
                    } else {
                        down += 1;
                    }
                }
                State::Idle => {}
            }
        }
        let want = self.on;
        if last {
            self.finish(now);
        }
        let c = &self.ctx.counters;
        let figures = [
            (extra::DATAGRAMS, c.datagrams),
            (extra::TIMER_WAKEUPS, c.timer_wakeups),
            (extra::LOOP_WAKEUPS, c.loop_wakeups),
            (extra::HOLD_BUSY_US, c.hold_busy_us),
            (extra::HOLD_US, c.hold_us),
            (extra::HOLD_LISTEN_US, c.hold_listen_us),
            (extra::SILENT_AT_END, c.silent_at_end),
            (extra::OUT_OF_ORDER, c.out_of_order),
            (extra::TS_JUMPS, c.ts_jumps),
            (extra::ICE_DISCONNECTS, c.ice_disconnects),
        ];
        let snap = &mut self.ctx.snap;
        for (k, v) in figures {
            match snap.extra.get_mut(k) {
                Some(x) => *x = v as f64,
                None if v > 0 => {
                    snap.extra.insert(k.to_owned(), v as f64);
                }
                None => {}
            }
        }
        snap.want = want as u32;
        snap.started = self.started as u32;
        snap.connecting = connecting;
        snap.streaming = streaming;
        snap.stalled = 0;
        snap.starved = starved;
        snap.down = down;
        let out = snap.clone();
        snap.clear_hists();
        out
    }

    /// Closes every viewer at the end of the run (a viewer silent at the end is `starved:
    /// gap`) and adds the sessions per mount.
    fn finish(&mut self, now: u64) {
        let judge = self.ctx.judge;
        let second = self.ctx.second;
        for i in 0..self.slots.len() {
            let s = &mut self.slots[i];
            if s.state == State::Streaming {
                if let Some(v) = &s.viewer {
                    if v.track.silent_at(now, &judge) {
                        self.ctx.counters.silent_at_end += 1;
                        s.caught.catch(Rule::Gap, &mut self.ctx.snap, second);
                    }
                }
            }
            if s.state != State::Idle {
                self.close(i, now);
            }
        }
        self.on = 0;
        for (k, &(sessions, us)) in self.ctx.sessions.iter().enumerate() {
            if sessions == 0 {
                continue;
            }
            let mount = mount_of(&self.ctx.spec.slice.urls[k]);
            self.ctx
                .snap
                .ground_truth
                .entry(mount)
                .or_default()
                .add(&GroundTruth {
                    sessions,
                    listening_seconds: us as f64 / 1e6,
                });
        }
        self.ctx.sessions.iter_mut().for_each(|s| *s = (0, 0));
    }

    /// Drives the thread's viewers, answering each tick the main thread asks for, until the
    /// last.
    ///
    /// Errors: the poll failed.
    fn run(mut self, shared: &Shared, answers: Sender<Answer>) -> anyhow::Result<()> {
        let spec: &'a WhepSpec = self.ctx.spec;
        let slice = &spec.slice;
        let sessions = slice.behaviour.session_range_us().is_some();
        let mut events = Events::with_capacity(1024);
        let mut answered = 0u64;
        let mut last_poll = Instant::now();
        let mut busy_from = Instant::now();
        let mut next_leave_scan = 0u64;
        let mut hold_second = None;
        loop {
            if shared.abort.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now_us = self.ctx.now_us();
            let sec = (now_us / 1_000_000) as u32;
            if hold_second != Some(sec) {
                hold_second = Some(sec);
                self.ctx.hold = slice.schedule.is_hold_second(sec);
            }
            // The tick the main thread asked for.
            let req = shared.req.load(Ordering::Acquire);
            if req >> 1 > answered {
                answered = req >> 1;
                let last = req & 1 == 1;
                self.ctx.second = (answered - 1) as u32;
                let snap = self.tick(now_us, last);
                let cpu = rusage::thread();
                let sent = answers.send(Answer {
                    snap,
                    cpu_us: cpu.user_us + cpu.sys_us,
                });
                self.ctx.second = answered as u32;
                if last || sent.is_err() {
                    return Ok(());
                }
            }
            self.take_done(now_us);
            // The stages: start the viewers due, stop those ramped down.
            let t_s = now_us as f64 / 1e6;
            let want = self.local_on(slice.on_at(self.ids, t_s));
            while self.on < want {
                let i = self.on;
                self.on += 1;
                self.started = self.started.max(self.on);
                self.connect(i, now_us);
            }
            while self.on > want {
                self.on -= 1;
                let i = self.on;
                self.close(i, now_us);
            }
            // Sessions of a random length: those due leave and rejoin at once (every 100 ms).
            if sessions && now_us >= next_leave_scan {
                next_leave_scan = now_us + 100_000;
                for i in 0..self.on {
                    if self.slots[i].leave_at_us.is_some_and(|t| now_us >= t) {
                        self.close(i, now_us);
                        self.connect(i, now_us);
                    }
                }
            }
            // Sleep until the earliest viewer timer, the next viewer due, at most 50 ms.
            let now = Instant::now();
            let mut wake = now + Duration::from_millis(50);
            if slice.schedule.target_at(t_s) != slice.schedule.target_at(t_s + 0.02) {
                wake = now + Duration::from_millis(2);
            }
            for &t in &self.nexts[..self.on] {
                wake = wake.min(t);
            }
            // The work since the last wake-up is done: what follows is waiting (the pause,
            // then `epoll_wait`).
            if self.ctx.hold {
                self.ctx.counters.hold_busy_us +=
                    now.saturating_duration_since(busy_from).as_micros() as u64;
            }
            // At most one wake-up every MIN_LOOP: packets to many viewers arrive together,
            // so one wake-up serves a batch of sockets instead of one each.
            if let Some(rest) = (last_poll + MIN_LOOP).checked_duration_since(now) {
                std::thread::sleep(rest);
            }
            let now = Instant::now();
            if self.ctx.hold {
                self.ctx.counters.hold_us +=
                    now.saturating_duration_since(last_poll).as_micros() as u64;
            }
            last_poll = now;
            match self
                .poll
                .poll(&mut events, Some(wake.saturating_duration_since(now)))
            {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(anyhow::anyhow!("WHEP viewer poll: {e}")),
            }
            busy_from = Instant::now();
            self.ctx.counters.loop_wakeups += 1;
            let mut shared_ready = false;
            for ev in events.iter() {
                match ev.token() {
                    SHARED => shared_ready = true,
                    WAKE => {}
                    Token(i) => {
                        let Some(s) = self.slots.get_mut(i) else {
                            continue;
                        };
                        let Some(mut v) = s.viewer.take() else {
                            continue;
                        };
                        receive(s, &mut v, &mut self.batch, &mut self.ctx);
                        self.nexts[i] = v.next;
                        let failed = v.failed;
                        s.viewer = Some(v);
                        if let Some(key) = failed {
                            let now = self.ctx.now_us();
                            self.fail(i, key, now);
                        }
                    }
                }
            }
            if shared_ready {
                self.read_shared();
            }
            let now = Instant::now();
            let now_us = self.ctx.now_us();
            for i in 0..self.on {
                if self.nexts[i] <= now {
                    self.timer(i, now, now_us);
                }
            }
        }
    }
}

/// The worker's CPU time so far (µs): its process's, or for an in-process engine its own
/// threads' (the main thread's, `threads_us` of the driving threads, the connectors').
fn worker_cpu_us(thread_cpu: bool, threads_us: u64, connectors: &[Arc<AtomicU64>]) -> u64 {
    if thread_cpu {
        let me = rusage::thread();
        me.user_us
            + me.sys_us
            + threads_us
            + connectors
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .sum::<u64>()
    } else {
        let p = rusage::process();
        p.user_us + p.sys_us
    }
}

/// This process's resident memory (bytes), from `/proc/self/statm`; 0 when unreadable.
fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    s.split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
        .map_or(0, |p| p * page)
}

/// Runs one worker's viewers (its slice of a WHEP group) to the stages' end, calling `report`
/// at every whole second of the run's clock and once more at the end with `done` (see the
/// module comment). Returns early when `stop` is set (after a last tick) or `report` returns
/// false.
///
/// Errors: a URL that is not `http://`, no URL, a bad bind range, no poller or shared
/// socket, a driving thread that failed.
pub fn run_worker(
    spec: &WhepSpec,
    clock: Arc<RunClock>,
    stop: &AtomicBool,
    mut report: impl FnMut(&GroupTick) -> bool,
) -> anyhow::Result<()> {
    let slice = &spec.slice;
    let targets: Vec<Target> = slice
        .urls
        .iter()
        .map(|u| {
            let url = crate::net::url::HttpUrl::parse(u)?;
            anyhow::ensure!(!url.tls, "{u}: the WHEP bench speaks plain http://");
            Ok(Target {
                addr: url.addr,
                host: url.host_header(),
                loopback: is_loopback_v4(&url.addr),
                source: source_for(url.addr),
                path: url.path,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(!targets.is_empty(), "no WHEP URL");
    anyhow::ensure!(
        targets.len() <= usize::from(u16::MAX),
        "too many WHEP URLs (at most {})",
        u16::MAX
    );
    let binds = parse_bind_range(&slice.bind_range)?;
    // The crypto backend of the build's str0m feature, aws-lc-rs (a no-op when one is
    // installed already).
    str0m::crypto::from_feature_flags().install_process_default();
    let ids = slice.ids();
    let threads = (spec.threads.max(1) as usize).min(ids.len().max(1));
    let shared_sockets = targets.iter().all(|t| t.loopback && t.addr.is_ipv4());
    // Second 0 of every engine of every host is the same instant.
    sleep_until_unix_ms(slice.start_unix_ms, &|| stop.load(Ordering::Relaxed));
    let epoch = Instant::now();
    let never = epoch + Duration::from_secs(365 * 86_400);
    let timeout = Duration::from_millis(u64::from(slice.judge.connect_timeout_ms.max(100)));
    let mut drivers = Vec::new();
    let mut wakers = Vec::new();
    let mut connector_cpu = Vec::new();
    let deletes = Arc::new(AtomicUsize::new(0));
    let peak = slice.schedule.peak();
    for t in 0..threads {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let shared = if shared_sockets {
            let mut s = UdpSocket::from_std(bind_shared(SHARED_BUFFER)?);
            poll.registry()
                .register(&mut s, SHARED, Interest::READABLE)?;
            Some(s)
        } else {
            None
        };
        let shared_fd = match &shared {
            Some(s) => Some((s.as_raw_fd(), s.local_addr()?.port())),
            None => None,
        };
        let n = (t..ids.len()).step_by(threads).count();
        let gens: Arc<[AtomicU32]> = (0..n).map(|_| AtomicU32::new(0)).collect();
        let setup = Arc::new(Setup {
            targets: targets.clone(),
            shared: shared_fd,
            epoch,
            clock: clock.clone(),
            bursts: spec.bursts.is_some(),
            timeout,
            gens: gens.clone(),
            deletes: deletes.clone(),
        });
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        for c in 0..CONNECTORS {
            let cpu = Arc::new(AtomicU64::new(0));
            connector_cpu.push(cpu.clone());
            let (setup, jobs, done, waker) = (
                setup.clone(),
                jobs_rx.clone(),
                done_tx.clone(),
                waker.clone(),
            );
            // Detached: one blocked in a POST must not hold up the worker's end (it ends when
            // its queue closes, within the POST's timeout).
            std::thread::Builder::new()
                .name(format!("viewer-post-{t}-{c}"))
                .spawn(move || connector(setup, jobs, done, waker, cpu))?;
        }
        let slots: Vec<Slot> = (t..ids.len())
            .step_by(threads)
            .map(|k| {
                let id = ids[k];
                Slot {
                    id,
                    target: (id as usize % targets.len()) as u16,
                    state: State::Idle,
                    gen: 0,
                    conns: 0,
                    caught: Caught::default(),
                    viewer: None,
                    retry_at_us: 0,
                    leave_at_us: None,
                    counted_us: 0,
                    ticked: false,
                }
            })
            .collect();
        drivers.push(Driver {
            t,
            threads,
            ids: &ids,
            nexts: vec![never; n],
            slots,
            on: 0,
            started: 0,
            poll,
            shared,
            batch: RecvBatch::new(RECV_BATCH),
            shared_batch: RecvBatch::new(SHARED_BATCH),
            done: done_rx,
            gens,
            peak,
            binds: &binds,
            targets: &targets,
            ctx: Ctx {
                spec,
                judge: slice.judge,
                clock: clock.clone(),
                epoch,
                second: 0,
                hold: false,
                snap: Snapshot::default(),
                counters: Counters::default(),
                sessions: vec![(0, 0); targets.len()],
                bursts: spec.bursts.as_ref(),
                jobs: jobs_tx,
                deletes: deletes.clone(),
            },
            never,
        });
        wakers.push(waker);
    }
    let shared = Shared::default();
    let end_s = slice.end_s();
    std::thread::scope(|s| {
        let (atx, arx) = mpsc::channel::<Answer>();
        let wake_all = || {
            for w in &wakers {
                let _ = w.wake();
            }
        };
        let mut handles = Vec::new();
        for (t, d) in drivers.into_iter().enumerate() {
            let (shared, atx) = (&shared, atx.clone());
            match std::thread::Builder::new()
                .name(format!("viewer-{t}"))
                .spawn_scoped(s, move || d.run(shared, atx))
            {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The threads started end at once (the scope waits for them).
                    shared.abort.store(true, Ordering::Relaxed);
                    wake_all();
                    return Err(anyhow::anyhow!("starting a WHEP viewer thread: {e}"));
                }
            }
        }
        drop(atx);
        let mut cpu_prev = worker_cpu_us(slice.thread_cpu, 0, &connector_cpu);
        let mut hold_cpu = 0u64;
        let mut second = 0u32;
        let outcome: anyhow::Result<()> = loop {
            let due = epoch + Duration::from_secs(u64::from(second) + 1);
            loop {
                let now = Instant::now();
                if now >= due {
                    break;
                }
                std::thread::sleep((due - now).min(Duration::from_millis(50)));
            }
            let last = f64::from(second + 1) + 0.5 >= end_s || stop.load(Ordering::Relaxed);
            shared.req.store(
                ((u64::from(second) + 1) << 1) | u64::from(last),
                Ordering::Release,
            );
            wake_all();
            let mut merged = Snapshot::default();
            let mut threads_cpu = 0u64;
            let mut got = 0;
            let mut lost = false;
            while got < threads {
                match arx.recv_timeout(Duration::from_millis(100)) {
                    Ok(a) => {
                        merged.merge(&a.snap);
                        threads_cpu += a.cpu_us;
                        got += 1;
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        if handles.iter().any(|h| h.is_finished()) {
                            lost = true;
                            break;
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        lost = true;
                        break;
                    }
                }
            }
            if lost {
                break Err(anyhow::anyhow!(
                    "a WHEP viewer thread ended before the run did"
                ));
            }
            let cpu = worker_cpu_us(slice.thread_cpu, threads_cpu, &connector_cpu);
            if slice.schedule.is_hold_second(second) {
                hold_cpu += cpu.saturating_sub(cpu_prev);
            }
            cpu_prev = cpu;
            merged.cpu_us = cpu;
            merged
                .extra
                .insert(extra::RSS_BYTES.to_owned(), rss_bytes() as f64);
            if hold_cpu > 0 {
                merged
                    .extra
                    .insert(extra::HOLD_CPU_US.to_owned(), hold_cpu as f64);
            }
            if spec.bursts.is_some() {
                merged.extra.insert(extra::BURST_WORKERS.to_owned(), 1.0);
            }
            let tick = GroupTick {
                group: slice.group,
                second,
                done: last,
                snap: merged,
            };
            if !report(&tick) || last {
                break Ok(());
            }
            second += 1;
        };
        shared.abort.store(true, Ordering::Relaxed);
        wake_all();
        // The last viewers' sessions end on the server at once, not when their consent runs
        // out (a little wait, best effort).
        let deadline = Instant::now() + DELETE_WAIT;
        while deletes.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut first_err = outcome.err();
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("a WHEP viewer thread panicked")));
            if let (Err(e), None) = (r, first_err.as_ref()) {
                first_err = Some(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_arrival_time_maps_to_the_engine_time_as_long_ago() {
        let wall = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let t = wall - Duration::from_millis(30);
        let (at, unix) = arrival_us(t, (5_000_000, wall));
        assert_eq!(at, 4_970_000);
        assert_eq!(unix, 1_699_999_999_970_000);
        // A stamp ahead of the wall clock (a clock step) counts as now.
        let (at, _) = arrival_us(wall + Duration::from_secs(1), (5_000_000, wall));
        assert_eq!(at, 5_000_000);
    }

    #[test]
    fn shared_addresses_name_their_viewers() {
        assert_eq!(shared_viewer_ip(0, 0, 1000), Ipv4Addr::new(127, 100, 0, 1));
        assert_eq!(
            shared_viewer_ip(300, 0, 1000),
            Ipv4Addr::new(127, 100, 1, 45)
        );
        // A viewer's next connection comes from a new address, which names it all the same.
        let again = shared_viewer_ip(300, 1, 1000);
        assert_eq!(again, Ipv4Addr::new(127, 100, 5, 21));
        for (id, conn, peak) in [
            (12_345, 0, 20_000),
            (12_345, 7, 20_000),
            (0, 3, 1),
            (999, 50_000, 1000),
        ] {
            let ip = shared_viewer_ip(id, conn, peak);
            assert!(ip.octets()[0] == 127 && ip >= SHARED_BASE, "{ip}");
            assert_eq!(shared_viewer_id(ip, peak), Some(id), "{id} {conn} {peak}");
        }
        assert_eq!(shared_viewer_id(Ipv4Addr::new(127, 0, 0, 1), 10), None);
        assert_eq!(
            resource_path("/whep/a.opus/3-abc").as_deref(),
            Some("/whep/a.opus/3-abc")
        );
        assert_eq!(
            resource_path("http://h:8000/whep/a/1").as_deref(),
            Some("/whep/a/1")
        );
        assert_eq!(resource_path("nonsense"), None);
    }

    #[test]
    fn post_errors_are_failure_keys() {
        let e = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(io_key(&e), "whep-refused");
        let e = std::io::Error::from(std::io::ErrorKind::WouldBlock);
        assert_eq!(io_key(&e), "whep-timeout");
    }

    /// A one-shot HTTP server on loopback answering `answer`; its target.
    fn answering(answer: &'static [u8]) -> Target {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            if let Ok((mut c, _)) = l.accept() {
                // The whole request (its head and its Content-Length of body), then the answer.
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = c.read(&mut buf) {
                    req.extend_from_slice(&buf[..n]);
                    if let Ok(Some((h, len))) = throng_proto::http::parse_request_head(&req) {
                        let body = h
                            .header("content-length")
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if req.len() >= len + body {
                            break;
                        }
                    }
                }
                let _ = c.write_all(answer);
            }
        });
        Target {
            addr,
            host: addr.to_string(),
            path: "/whep/x.opus".into(),
            loopback: true,
            source: None,
        }
    }

    #[test]
    fn a_bad_answer_fails_with_its_reason_not_a_panic() {
        let t = Duration::from_secs(5);
        let nf = answering(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(post_offer(&nf, "v=0", t), Err("whep-http-404".into()));
        let junk = answering(b"\x00\x01garbage, not HTTP\r\n\r\n");
        assert_eq!(post_offer(&junk, "v=0", t), Err("whep-bad-answer".into()));
        // A 201 whose body is no SDP: str0m refuses it.
        let config = rtc_config();
        let setup = Setup {
            targets: vec![answering(
                b"HTTP/1.1 201 Created\r\nContent-Length: 9\r\n\r\nnot sdp\r\n",
            )],
            shared: None,
            epoch: Instant::now(),
            clock: Arc::new(RunClock::new(0)),
            bursts: false,
            timeout: t,
            gens: Arc::new([]),
            deletes: Arc::new(AtomicUsize::new(0)),
        };
        let got = set_up(&config, &setup, 0, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(got.err(), Some("whep-bad-sdp".into()));
        // Nothing listening.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let gone = Target {
            addr,
            host: addr.to_string(),
            path: "/".into(),
            loopback: true,
            source: None,
        };
        assert_eq!(post_offer(&gone, "v=0", t), Err("whep-refused".into()));
    }

    #[test]
    fn a_worker_without_a_server_reports_every_second_and_fails_its_viewers() {
        // Nothing listens on the URL's port: every viewer fails at once, with its reason;
        // the worker still ticks every second to the end.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let spec = WhepSpec {
            slice: Slice {
                urls: vec![format!("http://127.0.0.1:{port}/whep/none.opus")],
                schedule: crate::profile::stages::Schedule::ramp_hold(3, 100.0, 2.0),
                start_unix_ms: unix_us() / 1000,
                bind_range: "none".into(),
                judge: Judge {
                    max_gap_ms: 200,
                    ..Judge::default()
                },
                ..Slice::default()
            },
            threads: 2,
            bursts: None,
        };
        let mut ticks = Vec::new();
        run_worker(
            &spec,
            Arc::new(RunClock::new(0)),
            &AtomicBool::new(false),
            |t| {
                ticks.push(t.clone());
                true
            },
        )
        .unwrap();
        let seconds: Vec<u32> = ticks.iter().map(|t| t.second).collect();
        assert_eq!(seconds, vec![0, 1]);
        let last = ticks.last().unwrap();
        assert!(last.done && !ticks[0].done);
        assert_eq!(last.snap.failures.get("whep-refused"), Some(&3));
        assert_eq!((last.snap.failed_listeners, last.snap.started), (3, 3));
        assert_eq!(last.snap.want, 3);
        assert_eq!(last.snap.down, 3);
        assert!(last.snap.cpu_us > 0);
    }
}
