//! `throng bench run --whep URL -n N`: WebRTC (WHEP, draft-ietf-wish-whep) viewers with their
//! own str0m clients, one UDP socket each. Each viewer POSTs an SDP offer to a WHEP endpoint
//! (`http://host:port/whep/<mount>`), completes ICE and DTLS, and must then receive the Opus
//! packets of the mount in order at 50 per second (20 ms frames: the RTP timestamp advances 960
//! at 48 kHz per packet). A viewer is degraded when, in a 5 s window, more than 1 % of the
//! packets its timestamps say were sent are missing, or a gap between two packets exceeds
//! 200 ms. The report gives viewers connected, degraded, setup time (POST to first packet)
//! p50/p99, packets and the client CPU per viewer-second; the server's CPU comes from
//! `/proc/<pid>/stat` with `--pid`. This first version runs every viewer in this process on a
//! few threads (no worker processes, no HTML report).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use clap::Args;
use str0m::change::SdpAnswer;
use str0m::media::{Direction, MediaKind};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};

/// RTP timestamp step of one 20 ms Opus packet at 48 kHz.
pub const TS_STEP: u64 = 960;

/// Window over which loss and gaps are judged.
pub const WINDOW: Duration = Duration::from_secs(5);

/// Loss share over a window above which a viewer is degraded (issue 16: 1 %).
pub const MAX_LOSS: f64 = 0.01;

/// Gap between two packets above which a viewer is degraded (issue 16: 200 ms).
pub const MAX_GAP: Duration = Duration::from_millis(200);

/// The flags of a WHEP run.
#[derive(Debug, Clone, Args)]
pub struct WhepArgs {
    /// The URLs are WHEP endpoints (`http://host:port/whep/<mount>`): load them with WebRTC
    /// viewers (str0m clients) instead of HTTP listeners.
    #[arg(long)]
    pub whep: bool,
    /// With `--whep`: client threads driving the viewers.
    #[arg(long, default_value_t = 2)]
    pub whep_threads: usize,
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
    /// Windows judged.
    pub windows: u64,
    last: Option<(u64, Instant)>,
    window_start: Option<(Instant, u64)>,
    window_packets: u64,
    window_max_gap: Duration,
}

impl PacketTrack {
    /// Takes a packet with 48 kHz RTP timestamp `ts` (extended) arriving at `at`.
    pub fn packet(&mut self, ts: u64, at: Instant) {
        self.packets += 1;
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
            let expected = ts.saturating_sub(first_ts) / TS_STEP + 1;
            let lost = expected.saturating_sub(self.window_packets);
            let loss = lost as f64 / expected.max(1) as f64;
            self.windows += 1;
            if loss > MAX_LOSS || self.window_max_gap > MAX_GAP {
                self.degraded_windows += 1;
            }
            self.window_start = Some((at, ts));
            self.window_packets = 0;
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
            self.windows += 1;
            self.degraded_windows += 1;
        }
    }

    /// Whether the viewer was degraded at any time.
    pub fn degraded(&self) -> bool {
        self.degraded_windows > 0 || self.out_of_order > 0
    }
}

/// One WebRTC viewer.
struct Viewer {
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    started: Instant,
    first_packet: Option<Duration>,
    track: PacketTrack,
    failed: bool,
}

/// POSTs an SDP offer to `url`'s endpoint; returns the SDP answer. Errors: the connection,
/// a status other than 201, an unreadable answer.
fn post_offer(addr: &str, path: &str, offer: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{offer}",
        offer.len()
    )?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let (head, len) = throng_proto::http::parse_response_head(&out)?
        .ok_or_else(|| anyhow::anyhow!("incomplete answer"))?;
    anyhow::ensure!(head.status == 201, "POST {path}: status {}", head.status);
    Ok(String::from_utf8(out[len..].to_vec())?)
}

impl Viewer {
    fn connect(addr: &str, path: &str, bind: std::net::IpAddr) -> anyhow::Result<Viewer> {
        let started = Instant::now();
        let mut rtc = Rtc::builder()
            .clear_codecs()
            .enable_opus(true, false)
            .build(started);
        let socket = UdpSocket::bind((bind, 0))?;
        socket.set_nonblocking(true)?;
        let local = socket.local_addr()?;
        rtc.add_local_candidate(Candidate::host(local, "udp")?);
        let mut api = rtc.sdp_api();
        api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
        let (offer, pending) = api.apply().ok_or_else(|| anyhow::anyhow!("no offer"))?;
        let answer = post_offer(addr, path, &offer.to_sdp_string())?;
        rtc.sdp_api()
            .accept_answer(pending, SdpAnswer::from_sdp_string(&answer)?)?;
        Ok(Viewer {
            rtc,
            socket,
            local,
            started,
            first_packet: None,
            track: PacketTrack::default(),
            failed: false,
        })
    }

    /// Reads waiting datagrams and drives the client; returns its next timeout.
    fn drive(&mut self, buf: &mut [u8]) -> Instant {
        while let Ok((n, source)) = self.socket.recv_from(buf) {
            let Ok(contents) = buf[..n].try_into() else {
                continue;
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
        }
        if self
            .rtc
            .handle_input(Input::Timeout(Instant::now()))
            .is_err()
        {
            self.failed = true;
        }
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => return t,
                Ok(Output::Transmit(t)) => {
                    let _ = self.socket.send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(Event::MediaData(m))) => {
                    let now = Instant::now();
                    self.first_packet
                        .get_or_insert(now.saturating_duration_since(self.started));
                    self.track.packet(m.time.numer(), now);
                }
                Ok(Output::Event(_)) => {}
                Err(_) => {
                    self.failed = true;
                    return Instant::now() + Duration::from_millis(50);
                }
            }
        }
    }
}

/// The result of a WHEP run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WhepReport {
    /// Viewers asked for.
    pub viewers: u32,
    /// Viewers whose POST got a 201 and that received media.
    pub receiving: u32,
    /// Viewers that failed to set up or received nothing.
    pub failed: u32,
    /// Viewers degraded at least once (loss over 1 % or a gap over 200 ms in a 5 s window,
    /// or packets out of order).
    pub degraded: u32,
    /// Setup time, POST to first packet, median (ms).
    pub setup_p50_ms: f64,
    /// Setup time, 99th percentile (ms).
    pub setup_p99_ms: f64,
    /// Packets received per viewer per second over the hold (expected 50).
    pub packets_per_viewer_second: f64,
    /// CPU time of this client process per viewer-second (µs).
    pub client_cpu_us_per_viewer_second: f64,
    /// CPU time of the server (`--pid`) per viewer-second over the hold (µs).
    pub server_cpu_us_per_viewer_second: Option<f64>,
}

/// Runs `n` viewers spread over `urls`, started at `ramp` per second, held for `hold`; writes
/// `report-whep.json` in `out`. Errors: a URL that does not parse, the output directory.
pub fn run(
    urls: &[String],
    n: u32,
    ramp: f64,
    hold: Duration,
    threads: usize,
    server_pid: Option<u32>,
    out: &Path,
) -> anyhow::Result<WhepReport> {
    let targets: Vec<(String, String)> = urls
        .iter()
        .map(|u| {
            let rest = u
                .strip_prefix("http://")
                .ok_or_else(|| anyhow::anyhow!("{u}: http:// URL expected"))?;
            let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            Ok((
                host.to_owned(),
                if path.is_empty() {
                    "/".into()
                } else {
                    path.into()
                },
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    // The pure-Rust crypto backend (a no-op when one is installed already).
    str0m::crypto::from_feature_flags().install_process_default();
    let threads = threads.clamp(1, 64);
    let cpu0 = crate::rusage::process();
    let start = Instant::now();
    let hold_start = start + Duration::from_secs_f64(f64::from(n) / ramp.max(1.0));
    let end = hold_start + hold;
    let mut handles = Vec::new();
    for t in 0..threads {
        let targets = targets.clone();
        handles.push(std::thread::spawn(move || {
            let mut viewers: Vec<Viewer> = Vec::new();
            let mut failed = 0u32;
            let mut buf = vec![0u8; 2000];
            let mut hold_packets: Option<Vec<u64>> = None;
            // This thread's share of the ramp is set up (POST, answer) on a connector thread,
            // so the blocking requests never hold up the viewers already playing.
            let (tx, rx) = std::sync::mpsc::channel::<Result<Viewer, String>>();
            let connector = std::thread::spawn(move || {
                let mut next = t as u32;
                while next < n && Instant::now() < end {
                    let due = start + Duration::from_secs_f64(f64::from(next) / ramp.max(1.0));
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let (addr, path) = &targets[next as usize % targets.len()];
                    let bind = std::net::IpAddr::from([127, 0, 0, 1 + (next / 10_000) as u8]);
                    let v = Viewer::connect(addr, path, bind)
                        .map_err(|e| format!("whep viewer {next}: {e}"));
                    if tx.send(v).is_err() {
                        break;
                    }
                    next += threads as u32;
                }
            });
            while Instant::now() < end {
                for v in rx.try_iter() {
                    match v {
                        Ok(v) => viewers.push(v),
                        Err(e) => {
                            failed += 1;
                            eprintln!("{e}");
                        }
                    }
                }
                if hold_packets.is_none() && Instant::now() >= hold_start {
                    hold_packets = Some(viewers.iter().map(|v| v.track.packets).collect());
                }
                for v in viewers.iter_mut() {
                    v.drive(&mut buf);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = connector.join();
            let now = Instant::now();
            for v in viewers.iter_mut() {
                v.track.finish(now);
            }
            let held: u64 = match &hold_packets {
                Some(p) => viewers
                    .iter()
                    .zip(p)
                    .map(|(v, p0)| v.track.packets - p0)
                    .sum(),
                None => 0,
            };
            (viewers, failed, held)
        }));
    }
    let server0 = server_pid.and_then(proc_cpu_us);
    let mut setups = Vec::new();
    let (mut receiving, mut failed, mut degraded, mut held) = (0u32, 0u32, 0u32, 0u64);
    let mut results = Vec::new();
    for h in handles {
        results.push(
            h.join()
                .map_err(|_| anyhow::anyhow!("viewer thread panicked"))?,
        );
    }
    let server1 = server_pid.and_then(proc_cpu_us);
    let cpu1 = crate::rusage::process();
    for (viewers, f, h) in results {
        failed += f;
        held += h;
        for v in viewers {
            match v.first_packet {
                Some(d) if !v.failed => {
                    receiving += 1;
                    setups.push(d.as_secs_f64() * 1000.0);
                    degraded += u32::from(v.track.degraded());
                }
                _ => failed += 1,
            }
        }
    }
    setups.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        setups
            .get(((setups.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };
    let viewer_secs = f64::from(receiving.max(1)) * hold.as_secs_f64().max(1e-3);
    let run_viewer_secs = f64::from(n.max(1)) * start.elapsed().as_secs_f64();
    let client_cpu = (cpu1.user_us + cpu1.sys_us).saturating_sub(cpu0.user_us + cpu0.sys_us) as f64;
    let report = WhepReport {
        viewers: n,
        receiving,
        failed,
        degraded,
        setup_p50_ms: pct(0.5),
        setup_p99_ms: pct(0.99),
        packets_per_viewer_second: held as f64 / viewer_secs,
        client_cpu_us_per_viewer_second: client_cpu / run_viewer_secs,
        server_cpu_us_per_viewer_second: match (server0, server1) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / run_viewer_secs),
            _ => None,
        },
    };
    std::fs::create_dir_all(out)?;
    std::fs::write(
        out.join("report-whep.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(report)
}

/// User plus system CPU time of process `pid` in µs, from `/proc/<pid>/stat` (fields 14 and
/// 15, in clock ticks of 1/100 s on Linux).
fn proc_cpu_us(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks * 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_packets_are_healthy() {
        let t0 = Instant::now();
        let mut t = PacketTrack::default();
        for i in 0..600u64 {
            t.packet(1000 + i * TS_STEP, t0 + Duration::from_millis(i * 20));
        }
        t.finish(t0 + Duration::from_millis(599 * 20 + 10));
        assert_eq!(t.packets, 600);
        assert!(t.windows >= 2);
        assert!(!t.degraded(), "{t:?}");
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
            t.packet(i * TS_STEP, t0 + Duration::from_millis(i * 20));
        }
        assert!(t.degraded_windows > 0, "{t:?}");
    }

    #[test]
    fn a_gap_over_200_ms_degrades_and_reordering_counts() {
        let t0 = Instant::now();
        let mut t = PacketTrack::default();
        for i in 0..300u64 {
            let late = if i >= 100 { 250 } else { 0 };
            t.packet(i * TS_STEP, t0 + Duration::from_millis(i * 20 + late));
        }
        assert!(t.degraded_windows > 0, "{t:?}");
        let mut r = PacketTrack::default();
        r.packet(2 * TS_STEP, t0);
        r.packet(TS_STEP, t0);
        assert_eq!(r.out_of_order, 1);
        assert!(r.degraded());
    }

    #[test]
    fn a_viewer_that_went_silent_is_degraded() {
        let t0 = Instant::now();
        let mut t = PacketTrack::default();
        t.packet(0, t0);
        t.finish(t0 + Duration::from_secs(1));
        assert!(t.degraded());
    }
}
