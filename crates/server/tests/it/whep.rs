//! WHEP playback (issue 16): a str0m WebRTC client POSTs an SDP offer to `/whep/<mount>`,
//! completes ICE-lite and DTLS over the server's one UDP socket and receives the mount's Opus
//! packets in order at 48 kHz; `DELETE` frees the session; a title change (a new chained Ogg
//! stream) and a fallback switch keep the session playing with continuous timestamps.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use str0m::change::SdpAnswer;
use str0m::media::{Direction, MediaKind};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};
use throng_proto::auth::basic_authorization;
use throng_proto::http::parse_response_head;

use crate::support::*;

/// A WebRTC viewer: a str0m `Rtc` receiving audio only, on its own UDP socket.
pub(crate) struct Viewer {
    rtc: Rtc,
    socket: UdpSocket,
    /// WHEP resource path (the `Location` of the 201).
    pub(crate) resource: String,
    /// RTP timestamps (48 kHz) and arrival times of the packets received so far.
    pub(crate) packets: Vec<(u64, Instant)>,
    /// The payload size of each packet in `packets`, in bytes.
    pub(crate) sizes: Vec<usize>,
    /// The play time of each packet in `packets`, 48 kHz samples (from its TOC byte, RFC 6716
    /// §3.1; 0 when unreadable).
    pub(crate) samples: Vec<u32>,
    pub(crate) connected: bool,
    /// The UDP port of the server's ICE candidate in the answer (its engine's port).
    engine_port: Option<u16>,
}

/// POSTs `body` with `headers` to `path`; returns the status, the headers and the body.
pub(crate) fn post(
    addr: SocketAddr,
    path: &str,
    headers: &[&str],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    let out = exchange(addr, req.as_bytes());
    let (head, len) = parse_response_head(&out).unwrap().unwrap();
    let body = String::from_utf8_lossy(&out[len..]).into_owned();
    (head.status, head.headers, body)
}

impl Viewer {
    /// An offer for one receive-only Opus audio track.
    pub(crate) fn offer() -> (Rtc, UdpSocket, String, str0m::change::SdpPendingOffer) {
        let mut rtc = Rtc::builder()
            .clear_codecs()
            .enable_opus(true, false)
            .build(Instant::now());
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let c = Candidate::host(socket.local_addr().unwrap(), "udp").unwrap();
        rtc.add_local_candidate(c);
        let mut api = rtc.sdp_api();
        api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
        let (offer, pending) = api.apply().unwrap();
        (rtc, socket, offer.to_sdp_string(), pending)
    }

    /// Negotiates with `POST path` (extra `headers`); panics unless 201.
    pub(crate) fn connect(addr: SocketAddr, path: &str, headers: &[&str]) -> Viewer {
        let (mut rtc, socket, offer, pending) = Self::offer();
        let mut h = vec!["Content-Type: application/sdp"];
        h.extend_from_slice(headers);
        let (status, head, answer) = post(addr, path, &h, &offer);
        assert_eq!(status, 201, "POST {path}: {answer}");
        let header = |n: &str| {
            head.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(header("content-type").as_deref(), Some("application/sdp"));
        let resource = header("location").expect("Location");
        // `a=candidate:<foundation> <component> udp <priority> <ip> <port> typ host`.
        let engine_port = answer
            .lines()
            .find_map(|l| l.strip_prefix("a=candidate:"))
            .and_then(|c| c.split_whitespace().nth(5))
            .and_then(|p| p.parse().ok());
        let answer = SdpAnswer::from_sdp_string(&answer).expect("SDP answer");
        rtc.sdp_api().accept_answer(pending, answer).unwrap();
        Viewer {
            rtc,
            socket,
            resource,
            packets: Vec::new(),
            sizes: Vec::new(),
            samples: Vec::new(),
            connected: false,
            engine_port,
        }
    }

    /// Runs the client for `d`, collecting media.
    pub(crate) fn run_for(&mut self, d: Duration) {
        let end = Instant::now() + d;
        let mut buf = vec![0u8; 2000];
        while Instant::now() < end {
            let (connected, packets, sizes, samples) = (
                &mut self.connected,
                &mut self.packets,
                &mut self.sizes,
                &mut self.samples,
            );
            client_turn(&mut self.rtc, &self.socket, &mut buf, end, |e| match e {
                Event::Connected => *connected = true,
                Event::MediaData(m) => {
                    packets.push((m.time.numer(), Instant::now()));
                    sizes.push(m.data.len());
                    samples.push(throng_proto::opus_rtp::opus_packet_samples(&m.data).unwrap_or(0));
                }
                _ => {}
            });
        }
    }

    /// The longest time between two packets' arrivals from packet `from` on.
    fn longest_gap_since(&self, from: usize) -> Duration {
        self.packets[from.min(self.packets.len())..]
            .windows(2)
            .map(|w| w[1].1.duration_since(w[0].1))
            .max()
            .unwrap_or_default()
    }

    /// Packets received since index `from`: count, and whether each timestamp follows the
    /// previous by that packet's play time (960 at 48 kHz for a 20 ms packet).
    pub(crate) fn check_in_order(&self, from: usize) -> (usize, bool) {
        let from = from.min(self.packets.len());
        let p = &self.packets[from..];
        let ordered = p
            .windows(2)
            .zip(&self.samples[from..])
            .all(|(w, n)| *n > 0 && w[1].0.wrapping_sub(w[0].0) == u64::from(*n));
        (p.len(), ordered)
    }

    /// The play time of the packets received since index `from`, in ms.
    pub(crate) fn played_ms_since(&self, from: usize) -> u64 {
        let n: u64 = self.samples[from.min(self.samples.len())..]
            .iter()
            .map(|n| u64::from(*n))
            .sum();
        n / 48
    }
}

/// One turn of a str0m client on `socket`: sends what `rtc` has to send, hands its events to
/// `on_event`, then waits (until its next timeout, at most until `end`) for one datagram and
/// feeds it in. `buf` is the read buffer. Shared by the WHEP viewer and the WHIP publisher
/// (`whip.rs`).
pub(crate) fn client_turn(
    rtc: &mut Rtc,
    socket: &UdpSocket,
    buf: &mut [u8],
    end: Instant,
    mut on_event: impl FnMut(Event),
) {
    let timeout = loop {
        match rtc.poll_output().expect("client rtc") {
            Output::Timeout(t) => break t,
            Output::Transmit(t) => {
                let _ = socket.send_to(&t.contents, t.destination);
            }
            Output::Event(e) => on_event(e),
        }
    };
    let wait = timeout
        .min(end)
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    socket.set_read_timeout(Some(wait)).unwrap();
    let input = match socket.recv_from(buf) {
        Ok((n, source)) => Input::Receive(
            Instant::now(),
            Receive {
                proto: Protocol::Udp,
                source,
                destination: socket.local_addr().unwrap(),
                contents: buf[..n].try_into().unwrap(),
            },
        ),
        Err(_) => Input::Timeout(Instant::now()),
    };
    rtc.handle_input(input).unwrap();
}

/// A `[webrtc]` table on a free loopback UDP port whose next port is free too (the test
/// servers run two shards, so two engines: port and port + 1).
pub(crate) fn webrtc_config() -> String {
    loop {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = a.local_addr().unwrap().port();
        if port < u16::MAX && UdpSocket::bind(("127.0.0.1", port + 1)).is_ok() {
            return format!("[webrtc]\nudp-listen = \"127.0.0.1:{port}\"\n");
        }
    }
}

/// A test server with WebRTC on ([`webrtc_config`]) and the Ogg/Opus tone file mount
/// `/tone.opus` playing; the directory holding the tone file is returned with it (keep it).
pub(crate) fn tone_server() -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&format!(
        "{}{}",
        webrtc_config(),
        tone_mount(dir.path(), "/tone.opus")
    ));
    srv.wait_mount("/tone.opus");
    (srv, dir)
}

/// A `[[mount]]` playing a copy of the test tone (Ogg/Opus) in `dir` as `name`.
pub(crate) fn tone_mount(dir: &std::path::Path, name: &str) -> String {
    let file = dir.join(format!(
        "{}.opus",
        name.trim_start_matches('/').replace('.', "_")
    ));
    std::fs::copy(asset("test-tone.opus"), &file).unwrap();
    format!("[[mount]]\nname = \"{name}\"\nfile = {file:?}\n")
}

/// ffmpeg pushing the looped test tone (Ogg/Opus) to `mount` in real time, as a source client.
fn opus_source(srv: &TestServer, mount: &str) -> Proc {
    Proc(
        Command::new("ffmpeg")
            .args(["-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i"])
            .arg(asset("test-tone.opus"))
            .args(["-c", "copy", "-content_type", "audio/ogg", "-f", "ogg"])
            .arg(format!("icecast://source:{SOURCE_PW}@{}{mount}", srv.addr))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ffmpeg"),
    )
}

fn listeners_on(srv: &TestServer, mount: &str) -> u64 {
    srv.mount_status(mount)
        .map_or(0, |m| m["listeners"].as_u64().unwrap())
}

#[test]
fn a_whep_viewer_receives_opus_in_order_and_delete_frees_it() {
    let (srv, _dir) = tone_server();
    let status = srv.mount_status("/tone.opus").unwrap();
    assert_eq!(
        status["whep_url"].as_str(),
        Some(format!("http://localhost:{}/whep/tone.opus", srv.addr.port()).as_str()),
        "{status}"
    );
    let mut v = Viewer::connect(srv.addr, "/whep/tone.opus", &[]);
    assert!(v.resource.starts_with("/whep/tone.opus/"), "{}", v.resource);
    v.run_for(Duration::from_secs(4));
    assert!(v.connected, "ICE and DTLS completed");
    assert_eq!(listeners_on(&srv, "/tone.opus"), 1);
    // Skip the first second (the join burst), then count two seconds of packets.
    let mark = v.packets.len();
    v.run_for(Duration::from_secs(3));
    let (n, ordered) = v.check_in_order(mark);
    assert!(ordered, "timestamps advance 960 per packet");
    assert!((100..=200).contains(&n), "~150 packets in 3 s, got {n}");

    let req = format!("DELETE {} HTTP/1.1\r\nHost: test\r\n\r\n", v.resource);
    assert_eq!(status_of(srv.addr, req.as_bytes()), 200);
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/tone.opus") == 0
    })
    .expect("DELETE frees the listener slot");
    assert_eq!(srv.ctx.whep.as_ref().unwrap().sessions(), 0);
    // The resource is gone.
    assert_eq!(status_of(srv.addr, req.as_bytes()), 404);
}

#[test]
fn whep_options_answers_cors_and_accept_post() {
    let srv = TestServer::start(&webrtc_config());
    let out = exchange(
        srv.addr,
        b"OPTIONS /whep/any.opus HTTP/1.1\r\nHost: test\r\nOrigin: http://x\r\n\r\n",
    );
    let (head, _) = parse_response_head(&out).unwrap().unwrap();
    assert_eq!(head.status, 204);
    assert_eq!(head.header("accept-post"), Some("application/sdp"));
    assert_eq!(head.header("access-control-allow-origin"), Some("*"));
    assert!(head
        .header("access-control-allow-methods")
        .is_some_and(|m| m.contains("POST") && m.contains("DELETE")));
}

#[test]
fn whep_post_is_a_listener_request_auth_max_listeners_and_bad_offers() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    // fred: Icecast's md5("secret").
    std::fs::write(&users, "fred:5ebe2294ecd0e0f08eab7690d2a6ee69\n").unwrap();
    let srv = TestServer::start(&format!(
        "{}{}max-listeners = 1\n{}authentication = {{ type = \"htpasswd\", filename = {:?} }}\n",
        webrtc_config(),
        tone_mount(dir.path(), "/tone.opus"),
        tone_mount(dir.path(), "/auth.opus"),
        users.display().to_string()
    ));
    srv.wait_mount("/tone.opus");
    srv.wait_mount("/auth.opus");
    let (_, _, offer, _) = Viewer::offer();
    let sdp = ["Content-Type: application/sdp"];
    // Not SDP, no such mount.
    assert_eq!(
        post(
            srv.addr,
            "/whep/tone.opus",
            &["Content-Type: text/plain"],
            &offer
        )
        .0,
        415
    );
    assert_eq!(post(srv.addr, "/whep/none.opus", &sdp, &offer).0, 404);
    assert_eq!(post(srv.addr, "/whep/tone.opus", &sdp, "v=garbage").0, 400);
    // Listener authentication on the POST.
    assert_eq!(post(srv.addr, "/whep/auth.opus", &sdp, &offer).0, 401);
    let auth = format!("Authorization: {}", basic_authorization("fred", "secret"));
    let _authed = Viewer::connect(srv.addr, "/whep/auth.opus", &[&auth]);
    // A refused POST is answered from its head: the server neither reads nor waits for a
    // body it announced (16,000 bytes, never sent), and an offer over the cap (16 KiB, as
    // for `/api/v1/`) is refused before a byte of it is read.
    let t0 = Instant::now();
    let head = "POST /whep/auth.opus HTTP/1.1\r\nHost: test\r\nContent-Type: application/sdp\r\nContent-Length: 16000\r\n\r\n";
    assert_eq!(status_of(srv.addr, head.as_bytes()), 401);
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "answered without the body"
    );
    let big = "POST /whep/tone.opus HTTP/1.1\r\nHost: test\r\nContent-Type: application/sdp\r\nContent-Length: 10000000\r\n\r\n";
    assert_eq!(status_of(srv.addr, big.as_bytes()), 413);
    // max-listeners = 1 holds for WHEP viewers.
    let _first = Viewer::connect(srv.addr, "/whep/tone.opus", &[]);
    assert_eq!(post(srv.addr, "/whep/tone.opus", &sdp, &offer).0, 403);
}

#[test]
fn a_whep_session_survives_a_title_change_and_a_fallback_switch() {
    require("ffmpeg");
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&format!(
        "{}{}[[mount]]\nname = \"/live.opus\"\nfallback-mount = \"/fallback.opus\"\n",
        webrtc_config(),
        tone_mount(dir.path(), "/fallback.opus"),
    ));
    srv.wait_mount("/fallback.opus");
    let source = opus_source(&srv, "/live.opus");
    srv.wait_mount("/live.opus");
    // ffmpeg's Ogg muxer sends pages about once a second: let a few arrive.
    std::thread::sleep(Duration::from_secs(2));
    let mut v = Viewer::connect(srv.addr, "/whep/live.opus", &[]);
    v.run_for(Duration::from_secs(3));
    assert!(v.connected);
    assert_eq!(listeners_on(&srv, "/live.opus"), 1);
    let mark = v.packets.len();
    assert!(mark > 0, "media before the title change");

    // A title change starts a new chained Ogg stream (new serial, new header pages).
    let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, _) = http_get(
        srv.addr,
        "/admin/metadata?mount=/live.opus&mode=updinfo&song=New%20Title",
        &[&auth],
    );
    assert_eq!(head.status, 200);
    v.run_for(Duration::from_secs(4));
    let (n, ordered) = v.check_in_order(mark);
    assert!(n >= 100, "packets keep coming after the title change: {n}");
    assert!(ordered, "timestamps continue across the new chain");

    // The source goes: the session moves to the fallback and keeps playing.
    let mark = v.packets.len();
    drop(source);
    v.run_for(Duration::from_secs(5));
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/fallback.opus") == 1
    })
    .expect("the viewer counts on the fallback");
    let mark2 = v.packets.len();
    v.run_for(Duration::from_secs(2));
    let (n, ordered) = v.check_in_order(mark);
    assert!(ordered, "timestamps continue across the fallback switch");
    assert!(
        v.packets.len() - mark2 >= 60,
        "fallback audio flows: {} packets in 2 s ({n} since the switch)",
        v.packets.len() - mark2
    );
}

/// Headless Chromium negotiates WHEP with the server from a page of its origin
/// (`RTCPeerConnection` + `fetch` POST of the offer) and receives audio: `getStats()` shows
/// inbound-rtp audio packets rising and none lost on loopback; `DELETE` frees the session.
#[test]
fn chromium_plays_a_mount_over_whep() {
    let Some(path) = crate::cdp::chromium_or_skip() else {
        return;
    };
    let (srv, _dir) = tone_server();
    let b = crate::cdp::Browser::launch(&path);
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    let status = b
        .eval(
            &tab,
            r#"(async () => {
                const pc = new RTCPeerConnection();
                pc.addTransceiver('audio', { direction: 'recvonly' });
                await pc.setLocalDescription(await pc.createOffer());
                const r = await fetch('/whep/tone.opus', {
                    method: 'POST',
                    headers: { 'Content-Type': 'application/sdp' },
                    body: pc.localDescription.sdp,
                });
                window.whepResource = r.headers.get('Location');
                await pc.setRemoteDescription({ type: 'answer', sdp: await r.text() });
                window.pc = pc;
                return r.status;
            })()"#,
        )
        .unwrap();
    assert_eq!(status, 201);
    let stats = &crate::cdp::inbound_audio_stats("window.pc");
    let first = b
        .wait_js(
            &tab,
            &format!("{stats}.then(o => o && o.received > 0 ? o : null)"),
            Duration::from_secs(15),
        )
        .expect("Chromium receives audio over WHEP");
    std::thread::sleep(Duration::from_secs(3));
    let later = b.eval(&tab, stats).unwrap();
    let (r0, r1) = (
        first["received"].as_u64().unwrap(),
        later["received"].as_u64().unwrap(),
    );
    assert!(r1 >= r0 + 100, "packets keep rising: {first} then {later}");
    assert_eq!(later["lost"].as_i64(), Some(0), "{later}");
    assert_eq!(listeners_on(&srv, "/tone.opus"), 1);
    let deleted = b
        .eval(
            &tab,
            "fetch(window.whepResource, { method: 'DELETE' }).then(r => r.status)",
        )
        .unwrap();
    assert_eq!(deleted, 200);
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/tone.opus") == 0
    })
    .expect("DELETE frees the session");
}

/// A station page playing a mount over WHEP in headless Chromium.
pub(crate) struct StationWhep {
    pub(crate) b: crate::cdp::Browser,
    pub(crate) tab: crate::cdp::Tab,
    /// The JS expression of the mount card's "Low latency" button.
    pub(crate) button: String,
    /// The inbound-rtp audio stats (`received`, `lost`) when the first packets came, and
    /// `hold` later.
    pub(crate) first: serde_json::Value,
    pub(crate) later: serde_json::Value,
}

/// Opens `srv`'s station page in the Chromium at `path`, presses the "Low latency" button of
/// `mount`'s card (it must be shown) and samples the peer connection's inbound-rtp audio stats
/// when packets arrive and `hold` later.
pub(crate) fn play_from_station_page(
    srv: &TestServer,
    path: &std::path::Path,
    mount: &str,
    hold: Duration,
) -> StationWhep {
    let b = crate::cdp::Browser::launch(path);
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    let button = format!("document.querySelector('[data-mount=\"{mount}\"] .rtc')");
    b.wait_js(
        &tab,
        &format!("{button} && !{button}.hidden"),
        Duration::from_secs(10),
    )
    .expect("a low-latency button on the mount's card");
    b.eval(&tab, &format!("{button}.click()")).unwrap();
    let stats = &crate::cdp::inbound_audio_stats("window.throngWhep && window.throngWhep.pc");
    let first = b
        .wait_js(
            &tab,
            &format!("{stats}.then(o => o && o.received > 0 ? o : null)"),
            Duration::from_secs(15),
        )
        .expect("the station page's player receives audio over WHEP");
    std::thread::sleep(hold);
    let later = b.eval(&tab, stats).unwrap();
    StationWhep {
        b,
        tab,
        button,
        first,
        later,
    }
}

/// The station page's "Low latency" button plays a mount with a `whep_url` over WebRTC in
/// headless Chromium: its peer connection receives audio (`getStats`: inbound packets rising,
/// none lost on loopback), and pressing it again DELETEs the session.
#[test]
fn the_station_page_low_latency_button_plays_over_whep() {
    let Some(path) = crate::cdp::chromium_or_skip() else {
        return;
    };
    let (srv, _dir) = tone_server();
    let StationWhep {
        b,
        tab,
        button,
        first,
        later,
    } = play_from_station_page(&srv, &path, "/tone.opus", Duration::from_secs(3));
    let (r0, r1) = (
        first["received"].as_u64().unwrap(),
        later["received"].as_u64().unwrap(),
    );
    assert!(r1 >= r0 + 100, "packets keep rising: {first} then {later}");
    assert_eq!(later["lost"].as_i64(), Some(0), "{later}");
    assert_eq!(listeners_on(&srv, "/tone.opus"), 1);
    assert_eq!(
        b.eval(&tab, &format!("{button}.getAttribute('aria-pressed')"))
            .unwrap(),
        "true"
    );
    // Pressed again: the session is DELETEd.
    b.eval(&tab, &format!("{button}.click()")).unwrap();
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/tone.opus") == 0
    })
    .expect("stopping the low-latency player frees the session");
    assert_eq!(srv.ctx.whep.as_ref().unwrap().sessions(), 0);
}

/// A viewer's address changes mid-session (a NAT rebinding, a phone moving networks): its
/// client goes on from a new socket on another loopback address, the old one closed. The
/// server's engine seals the media itself and sends it where the session's selected ICE pair
/// leads (`fanout/whep/engine.rs`), so once the client's checks nominate the new address the
/// packets must follow it there.
#[test]
fn a_viewer_whose_address_changes_gets_its_audio_at_the_new_one() {
    let (srv, _dir) = tone_server();
    let mut v = Viewer::connect(srv.addr, "/whep/tone.opus", &[]);
    v.run_for(Duration::from_secs(3));
    assert!(v.connected);
    assert!(
        v.packets.len() > 50,
        "{} packets before the move",
        v.packets.len()
    );
    let old = v.socket.local_addr().unwrap();
    v.socket = UdpSocket::bind("127.0.0.2:0").unwrap();
    let before = v.packets.len();
    // Within 20 s the packets come to the new address, and keep coming.
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end && v.packets.len() < before + 100 {
        v.run_for(Duration::from_millis(500));
    }
    assert!(
        v.packets.len() >= before + 100,
        "{} packets at the new address (was {old})",
        v.packets.len() - before
    );
    let at = v.packets.len();
    v.run_for(Duration::from_secs(2));
    let (n, _) = v.check_in_order(at);
    assert!(n >= 80, "{n} packets in 2 s at the new address");
    assert_eq!(listeners_on(&srv, "/tone.opus"), 1, "the same session");
}

/// The value of `throng_whep_degraded_viewers` for `mount` in `/metrics`.
fn degraded_on(srv: &TestServer, mount: &str) -> Option<u64> {
    let (_, body) = http_get(srv.addr, "/metrics", &[]);
    let line = format!("throng_whep_degraded_viewers{{mount=\"{mount}\"}} ");
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(&line).and_then(|v| v.trim().parse().ok()))
}

#[test]
fn a_viewer_without_receiver_reports_counts_as_degraded() {
    let (srv, _dir) = tone_server();
    let mut v = Viewer::connect(srv.addr, "/whep/tone.opus", &[]);
    v.run_for(Duration::from_secs(4));
    assert!(v.connected);
    // Reporting, on loopback: healthy.
    v.run_for(Duration::from_secs(3));
    assert_eq!(degraded_on(&srv, "/tone.opus"), Some(0));
    // The viewer stops sending RTCP (its client is no longer driven): degraded after 5 s.
    wait_until(Duration::from_secs(10), || {
        degraded_on(&srv, "/tone.opus") == Some(1)
    })
    .expect("a silent viewer is counted as degraded");
    // It reports again: healthy again.
    v.run_for(Duration::from_secs(3));
    assert_eq!(degraded_on(&srv, "/tone.opus"), Some(0));
}

#[test]
fn whep_viewers_are_listed_and_killable_as_listeners() {
    let (srv, _dir) = tone_server();
    let mut v = Viewer::connect(srv.addr, "/whep/tone.opus", &["User-Agent: whep-test"]);
    v.run_for(Duration::from_secs(2));
    assert!(v.connected);
    let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, body) = http_get(srv.addr, "/admin/listclients?mount=/tone.opus", &[&auth]);
    assert_eq!(head.status, 200);
    let xml = String::from_utf8_lossy(&body).into_owned();
    assert!(xml.contains("<UserAgent>whep-test</UserAgent>"), "{xml}");
    let id: u64 = xml
        .split("<ID>")
        .nth(1)
        .and_then(|r| r.split('<').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a listener id in {xml}"));
    assert_eq!(srv.json("/api/v1/status")["server"]["listeners"], 1);
    let (head, body) = http_get(
        srv.addr,
        &format!("/admin/killclient?mount=/tone.opus&id={id}"),
        &[&auth],
    );
    assert_eq!(head.status, 200);
    assert!(
        String::from_utf8_lossy(&body).contains("<return>1</return>"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/tone.opus") == 0
    })
    .expect("killclient ends the WHEP session");
    assert_eq!(srv.ctx.whep.as_ref().unwrap().sessions(), 0);
}

/// A recording HTTP callback server: the bodies POSTed to it, in order; every request is
/// accepted (`icecast-auth-user: 1`, Icecast's URL-auth "yes").
pub struct Recorder {
    pub addr: SocketAddr,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Recorder {
    pub fn start() -> Recorder {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let b = bodies.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read the head, then Content-Length bytes of body.
                let body = loop {
                    let Ok(n) = conn.read(&mut chunk) else {
                        break None;
                    };
                    if n == 0 {
                        break None;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse().ok())?
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            break Some(body.to_owned());
                        }
                    }
                };
                if let Some(body) = body {
                    b.lock().unwrap().push(body);
                }
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nicecast-auth-user: 1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            }
        });
        Recorder { addr, bodies }
    }

    pub fn with_action(&self, action: &str) -> Vec<String> {
        let key = format!("action={action}&");
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b.starts_with(&key))
            .cloned()
            .collect()
    }
}

/// The end of a WHEP session is the end of a listener: URL auth's `listener_remove` goes
/// then (not when the offer is answered) with the session's duration, and the access log
/// gets the session's line (its POST, `201`, its duration) when it ends.
#[test]
fn a_whep_session_end_sends_listener_remove_and_an_access_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let cb = Recorder::start();
    let toml = format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = 2\n{}{}[mount.authentication]\ntype = \"url\"\nlistener-add = \"http://{}/add\"\nlistener-remove = \"http://{}/remove\"\n[authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n[logging]\naccess-log = {:?}\n",
        webrtc_config(),
        tone_mount(dir.path(), "/tone.opus"),
        cb.addr,
        cb.addr,
        log.display().to_string(),
    );
    let srv = TestServer::start_config(throng_server::Config::from_toml(&toml).expect("config"));
    srv.wait_mount("/tone.opus");
    let auth = format!("Authorization: {}", basic_authorization("fred", "pw"));
    let mut v = Viewer::connect(
        srv.addr,
        "/whep/tone.opus",
        &[&auth, "User-Agent: whep-log-test"],
    );
    v.run_for(Duration::from_millis(2500));
    assert!(v.connected);
    assert_eq!(cb.with_action("listener_add").len(), 1);
    // The callback names the mount, not the WHEP endpoint's path (issue 38).
    let add = cb.with_action("listener_add").remove(0);
    assert!(add.contains("&mount=%2ftone%2eopus&"), "{add}");
    assert!(
        cb.with_action("listener_remove").is_empty(),
        "no listener_remove while the session plays: {:?}",
        cb.with_action("listener_remove")
    );
    let req = format!("DELETE {} HTTP/1.1\r\nHost: test\r\n\r\n", v.resource);
    assert_eq!(status_of(srv.addr, req.as_bytes()), 200);
    wait_until(Duration::from_secs(10), || {
        !cb.with_action("listener_remove").is_empty()
    })
    .expect("listener_remove when the session ends");
    let rm = cb.with_action("listener_remove").remove(0);
    let duration: u64 = rm
        .split('&')
        .find_map(|kv| kv.strip_prefix("duration="))
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("a duration in {rm}"));
    assert!((2..30).contains(&duration), "duration {duration} in {rm}");
    let mut line = None;
    wait_until(Duration::from_secs(5), || {
        line = std::fs::read_to_string(&log).ok().and_then(|t| {
            t.lines()
                .find(|l| l.contains("\"POST /whep/tone.opus HTTP/1.1\" 201"))
                .map(str::to_owned)
        });
        line.is_some()
    })
    .expect("the session's access-log line");
    let line = line.unwrap();
    assert!(line.contains("fred"), "{line}");
    assert!(line.contains("\"whep-log-test\""), "{line}");
    let mut fields = line.rsplit(' ');
    assert_eq!(fields.next(), Some("client:hung-up"), "DELETE: {line}");
    let secs: u64 = fields.next().unwrap().parse().unwrap();
    assert!(secs >= 2, "{line}");

    // A session still playing when the server shuts down is logged too.
    let mut v = Viewer::connect(
        srv.addr,
        "/whep/tone.opus",
        &[&auth, "User-Agent: whep-at-shutdown"],
    );
    v.run_for(Duration::from_secs(1));
    assert!(v.connected);
    drop(srv);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("201") && l.contains("\"whep-at-shutdown\"")),
        "the session closed by the shutdown is in the access log:\n{text}"
    );
}

/// Sessions spread over the engines (one per fan-out shard, `workers = 2` here): two viewers
/// get answers naming the two engines' ports (`udp-listen` port and port + 1), both play, and
/// a DELETE reaches the right engine.
#[test]
fn viewers_spread_over_the_engines_and_their_ports() {
    let (srv, _dir) = tone_server();
    let whep = srv.ctx.whep.as_ref().unwrap();
    let ports: Vec<u16> = whep.local_addrs().iter().map(|a| a.port()).collect();
    assert_eq!(ports.len(), 2, "one engine per shard");
    assert_eq!(ports[1], ports[0] + 1, "consecutive ports: {ports:?}");
    let mut a = Viewer::connect(srv.addr, "/whep/tone.opus", &[]);
    let mut b = Viewer::connect(srv.addr, "/whep/tone.opus", &[]);
    let mut got: Vec<u16> = [a.engine_port, b.engine_port]
        .into_iter()
        .map(|p| p.expect("a candidate port"))
        .collect();
    got.sort_unstable();
    assert_eq!(
        got, ports,
        "the least-loaded engine takes the second viewer"
    );
    for _ in 0..3 {
        a.run_for(Duration::from_millis(500));
        b.run_for(Duration::from_millis(500));
    }
    assert!(a.connected && b.connected);
    assert!(!a.packets.is_empty() && !b.packets.is_empty());
    assert_eq!(listeners_on(&srv, "/tone.opus"), 2);
    let req = format!("DELETE {} HTTP/1.1\r\nHost: test\r\n\r\n", b.resource);
    assert_eq!(status_of(srv.addr, req.as_bytes()), 200);
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/tone.opus") == 1
    })
    .expect("the DELETE ends the second engine's session");
    assert_eq!(whep.sessions(), 1);
}

/// Issue 22: `moveclients` moves an ICY listener and a WHEP viewer of one Ogg/Opus mount to
/// another together; the viewer's RTP timestamps continue with no gap over 200 ms; then
/// `killclient` ends each, both access-log lines ending with `operator:killed`.
#[test]
fn moveclients_moves_icy_listeners_and_whep_viewers_together() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let srv = logged_server(
        &log,
        &format!(
            "{}{}{}",
            webrtc_config(),
            tone_mount(dir.path(), "/a.opus"),
            tone_mount(dir.path(), "/b.opus"),
        ),
    );
    srv.wait_mount("/a.opus");
    srv.wait_mount("/b.opus");
    let mut icy = Listener::open(srv.addr, "/a.opus", false);
    let mut v = Viewer::connect(srv.addr, "/whep/a.opus", &[]);
    v.run_for(Duration::from_secs(2));
    assert!(v.connected);
    icy.read_for(Duration::from_millis(100));
    assert_eq!(listener_ids(&srv, "/a.opus").len(), 2);
    let mark = v.packets.len();
    assert!(mark > 0);

    let (head, body) = http_get(
        srv.addr,
        "/admin/moveclients?mount=/a.opus&destination=/b.opus",
        &[&admin_header()],
    );
    assert_eq!(head.status, 200, "{}", String::from_utf8_lossy(&body));
    v.run_for(Duration::from_secs(3));
    wait_until(Duration::from_secs(5), || {
        listener_ids(&srv, "/b.opus").len() == 2
    })
    .expect("both moved to /b.opus");
    assert!(listener_ids(&srv, "/a.opus").is_empty());
    let (n, ordered) = v.check_in_order(mark.saturating_sub(1));
    assert!(ordered, "RTP timestamps continue across the move");
    assert!(n >= 100, "media keeps flowing: {n} packets in 3 s");
    let gap = v.longest_gap_since(mark.saturating_sub(1));
    assert!(gap <= Duration::from_millis(200), "longest gap {gap:?}");
    let after = icy.read_for(Duration::from_secs(2));
    assert!(after.len() > 1000, "the ICY listener keeps receiving");

    kill_every_listener(&srv, "/b.opus");
    v.run_for(Duration::from_millis(500));
    wait_log_lines_ending(&log, "operator:killed", 2);
}

/// Issue 22: `max-listeners` is one count across ICY listeners and WHEP viewers: with 3, two
/// ICY listeners and one viewer fill the mount, and a fourth is refused on either path.
#[test]
fn max_listeners_counts_icy_listeners_and_whep_viewers_together() {
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&format!(
        "{}{}max-listeners = 3\n",
        webrtc_config(),
        tone_mount(dir.path(), "/tone.opus"),
    ));
    srv.wait_mount("/tone.opus");
    let _a = Listener::open(srv.addr, "/tone.opus", false);
    let _b = Listener::open(srv.addr, "/tone.opus", false);
    let _v = Viewer::connect(srv.addr, "/whep/tone.opus", &[]);
    let (_, _, offer, _) = Viewer::offer();
    let sdp = ["Content-Type: application/sdp"];
    assert_eq!(post(srv.addr, "/whep/tone.opus", &sdp, &offer).0, 403);
    let (head, _) = http_get(srv.addr, "/tone.opus", &[]);
    assert_eq!(head.status, 403, "a fourth by ICY");
}

/// Issue 22: a WHEP viewer follows `fallback-override` as an ICY listener does: on the
/// fallback while the source is gone, back on its mount when the source returns, with RTP
/// timestamps continuing and no gap over 200 ms at the return.
#[test]
fn a_whep_viewer_returns_from_the_fallback_with_fallback_override() {
    require("ffmpeg");
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&format!(
        "{}{}[[mount]]\nname = \"/live.opus\"\nfallback-mount = \"/fallback.opus\"\n\
         fallback-override = true\n",
        webrtc_config(),
        tone_mount(dir.path(), "/fallback.opus"),
    ));
    srv.wait_mount("/fallback.opus");
    let first = opus_source(&srv, "/live.opus");
    srv.wait_mount("/live.opus");
    std::thread::sleep(Duration::from_secs(2));
    let mut icy = Listener::open(srv.addr, "/live.opus", false);
    let mut v = Viewer::connect(srv.addr, "/whep/live.opus", &[]);
    v.run_for(Duration::from_secs(2));
    assert!(v.connected);
    icy.read_for(Duration::from_millis(100));
    assert_eq!(listener_ids(&srv, "/live.opus").len(), 2);

    drop(first);
    v.run_for(Duration::from_secs(4));
    wait_until(Duration::from_secs(10), || {
        v.run_for(Duration::from_millis(200));
        listener_ids(&srv, "/fallback.opus").len() == 2
    })
    .expect("both on the fallback");

    let mark = v.packets.len();
    let _second = opus_source(&srv, "/live.opus");
    wait_until(Duration::from_secs(15), || {
        v.run_for(Duration::from_millis(200));
        listener_ids(&srv, "/live.opus").len() == 2
    })
    .expect("both back on /live.opus (fallback-override)");
    v.run_for(Duration::from_secs(2));
    assert!(listener_ids(&srv, "/fallback.opus").is_empty());
    let (n, ordered) = v.check_in_order(mark.saturating_sub(1));
    assert!(ordered, "RTP timestamps continue across the return");
    assert!(n >= 100, "media keeps flowing: {n}");
    let gap = v.longest_gap_since(mark.saturating_sub(1));
    assert!(gap <= Duration::from_millis(200), "longest gap {gap:?}");
    assert!(icy.read_for(Duration::from_secs(1)).len() > 1000);
}

/// Issue 28 (WHEP offers): an offer without Opus is refused (it used to get `201` and a
/// listener slot), two `Content-Length` headers are refused before any body is read, and a
/// parse error says what was wrong without internal values.
#[test]
fn offers_without_opus_ambiguous_lengths_and_garbage_are_refused_plainly() {
    let (srv, _dir) = tone_server();
    let (_, _, offer, _) = Viewer::offer();
    let sdp = ["Content-Type: application/sdp"];
    let pcmu = offer.replace("opus/48000/2", "PCMU/8000");
    assert_ne!(pcmu, offer);
    let (status, _, body) = post(srv.addr, "/whep/tone.opus", &sdp, &pcmu);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Opus"), "{body}");
    assert_eq!(listeners_on(&srv, "/tone.opus"), 0);

    let twice = format!(
        "POST /whep/tone.opus HTTP/1.1\r\nHost: test\r\nContent-Type: application/sdp\r\n\
         Content-Length: {n}\r\nContent-Length: {n}\r\n\r\n{offer}",
        n = offer.len()
    );
    assert_eq!(status_of(srv.addr, twice.as_bytes()), 400);

    let garbage =
        "v=0\r\no=- 0 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n\
                   a=rtpmap:111 opus/48000/2\r\na=setup:bogus\r\n";
    let (status, _, body) = post(srv.addr, "/whep/tone.opus", &sdp, garbage);
    assert_eq!(status, 400, "{body}");
    assert!(
        !body.contains("0x") && !body.contains("Pointer"),
        "no internal values: {body}"
    );
    assert_eq!(listeners_on(&srv, "/tone.opus"), 0);
    // A real offer still plays.
    let mut v = Viewer::connect(srv.addr, "/whep/tone.opus", &[]);
    v.run_for(Duration::from_secs(1));
    assert!(v.connected);
}

#[test]
fn offers_that_never_connect_are_capped_per_address_and_cost_little_memory() {
    let dir = tempfile::tempdir().unwrap();
    // The server alone in a child process, so that its memory is measured alone.
    let srv = ChildServer::start(&format!(
        "{}{}",
        webrtc_config(),
        tone_mount(dir.path(), "/tone.opus")
    ));
    let (_, _, offer, _) = Viewer::offer();
    let sdp = ["Content-Type: application/sdp"];
    wait_until(Duration::from_secs(10), || {
        let (_, body) = http_get(srv.addr, "/status-json.xsl", &[]);
        String::from_utf8_lossy(&body).contains("/tone.opus")
    })
    .expect("/tone.opus up");
    // Warm up: one offer, so that first-use allocations are in the baseline.
    assert_eq!(post(srv.addr, "/whep/tone.opus", &sdp, &offer).0, 201);
    std::thread::sleep(Duration::from_millis(500));
    let before = srv.rss_kib();
    // 2,000 offers from one address, none of which ever starts ICE.
    let t0 = Instant::now();
    let mut statuses = std::collections::BTreeMap::<u16, u32>::new();
    for _ in 0..2000 {
        *statuses
            .entry(post(srv.addr, "/whep/tone.opus", &sdp, &offer).0)
            .or_default() += 1;
    }
    let after = srv.rss_kib();
    let grown = after.saturating_sub(before);
    eprintln!(
        "2,000 offers without ICE in {:?}: {statuses:?}; server RSS {before} KiB → {after} KiB (+{grown} KiB)",
        t0.elapsed()
    );
    // At most `pending-per-address` (32) sessions wait for ICE from one address; the warm-up's
    // session is one of them until it times out.
    let created = statuses.get(&201).copied().unwrap_or(0);
    assert!(created <= 32, "{statuses:?}");
    assert_eq!(
        created + statuses.get(&503).copied().unwrap_or(0),
        2000,
        "{statuses:?}"
    );
    assert!(grown < 20 * 1024, "2,000 offers added {grown} KiB");
    // They time out within a few seconds (`CONNECT_TIMEOUT`), and the address may offer again.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(post(srv.addr, "/whep/tone.opus", &sdp, &offer).0, 201);
}
