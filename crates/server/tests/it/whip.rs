//! WHIP ingest (issue 25): a str0m WebRTC publisher POSTs an Opus offer to `/whip/<mount>`
//! with the source password, completes ICE-lite and DTLS over the server's WebRTC UDP port and
//! sends the test tone's Opus packets in real time; the mount is a live Ogg/Opus mount that
//! ffmpeg decodes from ICY with no error and that a WHEP viewer plays; `DELETE` ends it and its
//! listeners go to the fallback; a reconnect with a new POST keeps the mount and its listeners;
//! wrong credentials get 401.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use str0m::change::SdpAnswer;
use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid};
use str0m::{Candidate, Event, Rtc};
use throng_proto::auth::basic_authorization;
use throng_proto::ogg::{parse_page, PageParse};
use throng_proto::opus_rtp::{OpusDepacketizer, OpusPacket};

use crate::support::*;
use crate::whep::{client_turn, post, tone_mount, webrtc_config, Viewer};

/// The test tone's Opus packets (20 ms each), in order.
pub(crate) fn tone_packets() -> Vec<OpusPacket> {
    let file = std::fs::read(asset("test-tone.opus")).unwrap();
    let mut depack = OpusDepacketizer::new(0);
    let mut out = Vec::new();
    let mut at = 0;
    while let PageParse::Page(p) = parse_page(&file[at..]) {
        at += p.bytes.len();
        depack.push_page(&p, &mut out);
    }
    assert!(out.len() > 400, "10 s of packets");
    out
}

/// A WHIP publisher: a str0m `Rtc` sending one Opus track, on its own UDP socket.
pub(crate) struct Publisher {
    rtc: Rtc,
    socket: UdpSocket,
    mid: Mid,
    /// The resource (`Location`) of the 201.
    pub(crate) resource: String,
    pub(crate) connected: bool,
    /// Packets written so far.
    pub(crate) sent: usize,
}

impl Publisher {
    /// POSTs an Opus offer to `/whip<mount>` with `auth` (a whole `Authorization` header
    /// line); the publisher on 201, else the status and body.
    pub(crate) fn connect(
        addr: SocketAddr,
        mount: &str,
        auth: &str,
    ) -> Result<Publisher, (u16, String)> {
        let mut rtc = Rtc::builder()
            .clear_codecs()
            .enable_opus(true, false)
            .build(Instant::now());
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let c = Candidate::host(socket.local_addr().unwrap(), "udp").unwrap();
        rtc.add_local_candidate(c);
        let mut api = rtc.sdp_api();
        let mid = api.add_media(MediaKind::Audio, Direction::SendOnly, None, None, None);
        let (offer, pending) = api.apply().unwrap();
        let (status, head, answer) = post(
            addr,
            &format!("/whip{mount}"),
            &["Content-Type: application/sdp", auth],
            &offer.to_sdp_string(),
        );
        if status != 201 {
            return Err((status, answer));
        }
        let resource = head
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("location"))
            .map(|(_, v)| v.clone())
            .expect("Location");
        let answer = SdpAnswer::from_sdp_string(&answer).expect("SDP answer");
        rtc.sdp_api().accept_answer(pending, answer).unwrap();
        Ok(Publisher {
            rtc,
            socket,
            mid,
            resource,
            connected: false,
            sent: 0,
        })
    }

    /// Runs the publisher until `stop`, sending `packets` (looped) in real time once connected,
    /// with RTP timestamps from `ts0`.
    pub(crate) fn run(&mut self, packets: &[OpusPacket], ts0: u64, stop: &AtomicBool) {
        let mut buf = vec![0u8; 2000];
        let mut started: Option<Instant> = None;
        while !stop.load(Ordering::Relaxed) {
            if let Some(t0) = started {
                // Every packet whose time has come (20 ms each).
                while (self.sent as u128) * 20 <= t0.elapsed().as_millis() {
                    let p = &packets[self.sent % packets.len()];
                    let w = self.rtc.writer(self.mid).expect("writer");
                    let pt = w
                        .payload_params()
                        .find(|p| p.spec().codec == Codec::Opus)
                        .map(|p| p.pt())
                        .expect("Opus negotiated");
                    let ts = ts0 + self.sent as u64 * 960;
                    let time = MediaTime::new(ts, Frequency::FORTY_EIGHT_KHZ);
                    w.write(pt, Instant::now(), time, p.data.clone()).unwrap();
                    self.sent += 1;
                }
            }
            // Every 5 ms at least, to write the packets due.
            let end = Instant::now() + Duration::from_millis(5);
            let connected = &mut self.connected;
            client_turn(&mut self.rtc, &self.socket, &mut buf, end, |e| {
                if matches!(e, Event::Connected) {
                    *connected = true;
                    started.get_or_insert_with(Instant::now);
                }
            });
        }
    }
}

/// A publisher running on its own thread until dropped.
pub(crate) struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Publisher>>,
    /// The resource of its session.
    pub(crate) resource: String,
}

impl Running {
    /// Starts `p` sending the test tone from RTP timestamp `ts0`.
    pub(crate) fn start(mut p: Publisher, ts0: u64) -> Running {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let resource = p.resource.clone();
        let packets = tone_packets();
        let thread = std::thread::spawn(move || {
            p.run(&packets, ts0, &flag);
            p
        });
        Running {
            stop,
            thread: Some(thread),
            resource,
        }
    }

    /// Stops sending (the session is left to time out); the publisher.
    pub(crate) fn stop(mut self) -> Publisher {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The bearer header of the test source password.
pub(crate) fn bearer() -> String {
    format!("Authorization: Bearer {SOURCE_PW}")
}

fn listeners_on(srv: &TestServer, mount: &str) -> u64 {
    srv.mount_status(mount)
        .map_or(0, |m| m["listeners"].as_u64().unwrap())
}

/// A server with WebRTC on, `/fallback.opus` (the looped tone) and `/live.opus` falling back to
/// it; `limits` goes first (a `[limits]` table or nothing).
fn server(dir: &std::path::Path, limits: &str) -> TestServer {
    let srv = TestServer::start(&format!(
        "{limits}\n{}{}[[mount]]\nname = \"/live.opus\"\nfallback-mount = \"/fallback.opus\"\n",
        webrtc_config(),
        tone_mount(dir, "/fallback.opus"),
    ));
    srv.wait_mount("/fallback.opus");
    srv
}

/// The published `/live.opus` plays on every path: ffmpeg decodes 3 s of it from ICY with no
/// error, a WHEP viewer receives at least 100 packets in 4 s (`who` publishes, for the
/// message); returns an ICY listener on it that has read its first second (headers first).
fn plays_on_icy_and_whep(srv: &TestServer, who: &str) -> Listener {
    let errors = ffmpeg_decode(&srv.url("/live.opus"), 3);
    assert!(errors.is_empty(), "ffmpeg: {errors}");
    let mut v = Viewer::connect(srv.addr, "/whep/live.opus", &[]);
    v.run_for(Duration::from_secs(4));
    assert!(
        v.packets.len() >= 100,
        "a WHEP viewer receives {who}'s publish: {} packets in 4 s",
        v.packets.len()
    );
    let mut l = Listener::open(srv.addr, "/live.opus", false);
    l.first = l.read_for(Duration::from_secs(1));
    assert!(
        l.first.windows(8).any(|w| w == b"OpusHead"),
        "headers first"
    );
    l
}

#[test]
fn a_whip_publish_is_a_live_ogg_mount_for_icy_and_whep_and_delete_sends_listeners_to_the_fallback()
{
    require("ffmpeg");
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), "");
    let p = Publisher::connect(srv.addr, "/live.opus", &bearer()).expect("201");
    assert!(p.resource.starts_with("/whip/live.opus/"), "{}", p.resource);
    let running = Running::start(p, 1_000_000);
    srv.wait_mount("/live.opus");
    let status = srv.mount_status("/live.opus").unwrap();
    assert_eq!(
        status["content_type"].as_str(),
        Some("audio/ogg"),
        "{status}"
    );
    // ICY (ffmpeg) and WHEP; then DELETE: the ICY listener goes on with the fallback's stream.
    let mut l = plays_on_icy_and_whep(&srv, "the str0m publisher");
    l.first.clear();
    let old = running.resource.clone();
    // Knowing the resource URL is not enough: a DELETE needs the publish's credentials.
    let bare = format!("DELETE {old} HTTP/1.1\r\nHost: test\r\n\r\n");
    assert_eq!(status_of(srv.addr, bare.as_bytes()), 401);
    assert!(srv.mount_status("/live.opus").is_some(), "still live");
    let req = format!(
        "DELETE {old} HTTP/1.1\r\nHost: test\r\n{}\r\n\r\n",
        bearer()
    );
    assert_eq!(status_of(srv.addr, req.as_bytes()), 200);
    wait_until(Duration::from_secs(5), || {
        srv.mount_status("/live.opus").is_none()
    })
    .expect("DELETE ends the mount");
    let after = l.read_for(Duration::from_secs(2));
    assert!(
        after.windows(8).any(|w| w == b"OpusHead"),
        "the fallback's stream follows"
    );
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/fallback.opus") >= 2
    })
    .expect("the ICY listener and the WHEP viewer are on the fallback");
    assert_eq!(status_of(srv.addr, req.as_bytes()), 404, "gone");
    drop(running);
}

#[test]
fn a_reconnect_within_source_timeout_keeps_the_mount_and_its_listeners() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), "[limits]\nsource-timeout = 4\n");
    let basic = format!(
        "Authorization: {}",
        basic_authorization("source", SOURCE_PW)
    );
    let first = Running::start(
        Publisher::connect(srv.addr, "/live.opus", &basic).expect("201"),
        5_000,
    );
    srv.wait_mount("/live.opus");
    let mut l = Listener::open(srv.addr, "/live.opus", false);
    let start = l.read_for(Duration::from_secs(2));
    assert!(start.len() > 2_000, "audio flows: {} bytes", start.len());
    // While it is on the air, a second offer with the password never takes the mount (issue
    // 42: it would replace a connected publish with a session that may never connect).
    assert_eq!(
        Publisher::connect(srv.addr, "/live.opus", &bearer())
            .err()
            .map(|e| e.0),
        Some(409)
    );
    // The network drops: the first publisher goes quiet for a second, then a new POST.
    let old = first.resource.clone();
    let first = first.stop();
    assert!(first.connected && first.sent > 50, "{} sent", first.sent);
    // Quiet for longer than `ON_AIR` (750 ms): the publish is no longer on the air, so the
    // new offer takes it over (a second offer while it sends would get 409).
    let quiet = l.read_for(Duration::from_millis(1500));
    let second = Running::start(
        Publisher::connect(srv.addr, "/live.opus", &bearer()).expect("a reconnect is 201"),
        987_654_321,
    );
    assert_ne!(second.resource, old);
    let later = l.read_for(Duration::from_secs(3));
    assert!(
        later.len() > 2_000,
        "audio flows again: {} bytes",
        later.len()
    );
    let all: Vec<u8> = [quiet, later].concat();
    assert!(
        !all.windows(8).any(|w| w == b"OpusHead"),
        "one Ogg stream: no new header pages, no fallback"
    );
    assert_eq!(listeners_on(&srv, "/fallback.opus"), 0, "no fallback flap");
    assert_eq!(listeners_on(&srv, "/live.opus"), 1);
    // The old resource no longer ends anything.
    let req = format!("DELETE {old} HTTP/1.1\r\nHost: test\r\n{basic}\r\n\r\n");
    assert_eq!(status_of(srv.addr, req.as_bytes()), 404);
    assert!(srv.mount_status("/live.opus").is_some());
    // The publisher vanishes for good: after source-timeout the listener is on the fallback.
    drop(second.stop());
    wait_until(Duration::from_secs(10), || {
        listeners_on(&srv, "/fallback.opus") == 1
    })
    .expect("source-timeout ends the publish");
    assert!(srv.mount_status("/live.opus").is_none());
}

#[test]
fn wrong_credentials_no_opus_and_a_taken_mount_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), "");
    let wrong = Publisher::connect(srv.addr, "/live.opus", "Authorization: Bearer nope");
    assert_eq!(wrong.err().map(|e| e.0), Some(401));
    let basic = format!("Authorization: {}", basic_authorization("source", "nope"));
    assert_eq!(
        Publisher::connect(srv.addr, "/live.opus", &basic)
            .err()
            .map(|e| e.0),
        Some(401)
    );
    assert_eq!(
        Publisher::connect(srv.addr, "/live.opus", "X-None: 1")
            .err()
            .map(|e| e.0),
        Some(401)
    );
    assert!(srv.mount_status("/live.opus").is_none());
    // An offer without Opus: 400 with a reason.
    let pcmu =
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\n\
                c=IN IP4 0.0.0.0\r\na=rtpmap:0 PCMU/8000\r\na=sendonly\r\na=mid:0\r\n";
    let (status, _, body) = post(
        srv.addr,
        "/whip/live.opus",
        &["Content-Type: application/sdp", &bearer()],
        pcmu,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Opus"), "{body}");
    // A recvonly offer would make a silent live mount: 400 (issue 42).
    let mut rtc = Rtc::builder()
        .clear_codecs()
        .enable_opus(true, false)
        .build(Instant::now());
    let c = Candidate::host("127.0.0.1:9".parse().unwrap(), "udp").unwrap();
    rtc.add_local_candidate(c);
    let mut api = rtc.sdp_api();
    api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
    let (recvonly, _) = api.apply().unwrap();
    let (status, _, body) = post(
        srv.addr,
        "/whip/live.opus",
        &["Content-Type: application/sdp", &bearer()],
        &recvonly.to_sdp_string(),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("recvonly"), "{body}");
    assert!(srv.mount_status("/live.opus").is_none());
    // A mount fed by another source: 403.
    assert_eq!(
        Publisher::connect(srv.addr, "/fallback.opus", &bearer())
            .err()
            .map(|e| e.0),
        Some(403)
    );
    // Preflight.
    let req = "OPTIONS /whip/live.opus HTTP/1.1\r\nHost: test\r\nOrigin: http://x\r\n\r\n";
    let out = String::from_utf8_lossy(&exchange(srv.addr, req.as_bytes())).into_owned();
    assert!(out.starts_with("HTTP/1.0 204"), "{out}");
    assert!(out.contains("Accept-Post: application/sdp"), "{out}");
}

/// Headless Chromium with a generated input goes live from the Go-live page: its device list
/// and level meter work, its WHIP publish makes a live Ogg/Opus mount that ffmpeg decodes
/// from ICY with no error and a WHEP viewer receives, the page shows the mount's listeners,
/// Stop sends them to the fallback, and a wrong password is refused with 401.
#[test]
fn chromium_goes_live_from_the_go_live_page() {
    let Some(b) = crate::cdp::browser_or_skip() else {
        return;
    };
    require("ffmpeg");
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), "");
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/admin/ui/golive?mount=/live.opus"));
    // The generated input is listed and the meter moves.
    b.wait_js(
        &tab,
        "[...document.querySelectorAll('#gl-device option')].some(o => o.value !== '')",
        Duration::from_secs(10),
    )
    .expect("the input devices are listed");
    b.wait_js(
        &tab,
        "document.getElementById('gl-level').value > 0.01",
        Duration::from_secs(10),
    )
    .expect("the level meter shows the input");
    // A wrong password: 401, shown, nothing live.
    b.eval(
        &tab,
        "document.getElementById('gl-password').value = 'wrong'; \
         document.getElementById('gl-start').click()",
    )
    .unwrap();
    let refused = b
        .wait_js(
            &tab,
            "window.throngGoLive.state === 'error' ? window.throngGoLive.lastStatus : null",
            Duration::from_secs(10),
        )
        .expect("the refusal is shown");
    assert_eq!(refused, 401);
    let shown = b
        .eval(&tab, "document.getElementById('gl-state').textContent")
        .unwrap();
    assert!(shown.as_str().unwrap().contains("401"), "{shown}");
    assert!(srv.mount_status("/live.opus").is_none());
    // The right one: live.
    b.eval(
        &tab,
        &format!(
            "document.getElementById('gl-password').value = '{SOURCE_PW}'; \
             document.getElementById('gl-start').click()"
        ),
    )
    .unwrap();
    b.wait_js(
        &tab,
        "window.throngGoLive.state === 'live'",
        Duration::from_secs(15),
    )
    .expect("the page goes live");
    srv.wait_mount("/live.opus");
    let mut l = plays_on_icy_and_whep(&srv, "Chromium");
    l.first.clear();
    b.wait_js(
        &tab,
        "Number(document.getElementById('gl-listeners').textContent) >= 1",
        Duration::from_secs(6),
    )
    .expect("the page shows the mount's listeners");
    // Stop: DELETE, and the listeners are on the fallback.
    b.eval(&tab, "document.getElementById('gl-stop').click()")
        .unwrap();
    wait_until(Duration::from_secs(5), || {
        srv.mount_status("/live.opus").is_none()
    })
    .expect("Stop ends the mount");
    let after = l.read_for(Duration::from_secs(2));
    assert!(
        after.windows(8).any(|w| w == b"OpusHead"),
        "the fallback follows"
    );
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/fallback.opus") >= 1
    })
    .expect("the listener is on the fallback");
    assert_eq!(b.eval(&tab, "window.throngGoLive.state").unwrap(), "off");
    // The one expected: Chromium logs the refused POST's 401.
    let errors: Vec<String> = b
        .console_errors(&tab)
        .into_iter()
        .filter(|e| !(e.contains("status of 401") && e.contains("/whip/live.opus")))
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

/// Debian's Firefox ESR, if installed (`scripts/install-deps.sh` installs it).
fn firefox_path() -> Option<std::path::PathBuf> {
    ["/usr/bin/firefox-esr", "/usr/bin/firefox"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
}

/// Firefox smoke test of the Go-live page. Firefox has no DevTools pipe to drive it, so the
/// page drives itself: the webroot's `static/golive.js` (which replaces the embedded one) is
/// the embedded script plus a few lines that wait for the input to open and be listed, press
/// *Go live* with a wrong password and wait for the page to show the `401`, press it again with
/// the right one and, 3 s after the `201`, press *Stop*. Headless Firefox ESR runs
/// it with a fake input (`media.navigator.streams.fake`): the mount goes live at the `201` (its
/// ICY listener gets the stream's header pages) and ends at the `DELETE`, long before
/// `source-timeout`, and the listener goes to the fallback. The media itself cannot flow here:
/// Firefox gathers no loopback ICE candidate (whatever `media.peerconnection.ice.loopback`
/// says) and will not pair its LAN address with the server's loopback one, and the tests
/// serve on loopback only; nor can the level meter move: with no audio output device here
/// Firefox never starts an `AudioContext` (it stays `suspended`, whatever the autoplay
/// prefs). Chromium's test covers both.
#[test]
fn firefox_runs_the_go_live_page() {
    let Some(firefox) = firefox_path() else {
        assert!(
            !crate::cdp::browser_required(),
            "firefox-esr is not installed and THRONG_REQUIRE_BROWSER is set: run scripts/install-deps.sh"
        );
        eprintln!("SKIPPED: firefox-esr is not installed (scripts/install-deps.sh installs it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let webroot = dir.path().join("web");
    std::fs::create_dir_all(webroot.join("static")).unwrap();
    let driver = format!(
        "\n(function () {{\n\
           var $ = function (id) {{ return document.getElementById(id); }};\n\
           var step = 0, t0 = 0;\n\
           var t = setInterval(function () {{\n\
             var g = window.throngGoLive;\n\
             if (step === 0 && g.stream && $('gl-device').value !== '') {{\n\
               $('gl-password').value = 'wrong'; $('gl-start').click(); step = 1;\n\
             }} else if (step === 1 && g.state === 'error' && g.lastStatus === 401) {{\n\
               $('gl-password').value = '{SOURCE_PW}'; $('gl-start').click(); step = 2;\n\
             }} else if (step === 2 && g.resource) {{\n\
               step = 3; t0 = Date.now();\n\
             }} else if (step === 3 && Date.now() - t0 > 3000) {{\n\
               clearInterval(t); $('gl-stop').click();\n\
             }}\n\
           }}, 100);\n\
         }})();\n"
    );
    std::fs::write(
        webroot.join("static/golive.js"),
        format!("{}{driver}", include_str!("../../assets/web/golive.js")),
    )
    .unwrap();
    // A long source-timeout: only the page's DELETE can end the publish within the test.
    let srv = server(
        dir.path(),
        &format!(
            "[limits]\nsource-timeout = 60\n[paths]\nwebroot = {:?}\n",
            webroot.display().to_string()
        ),
    );
    let profile = tempfile::tempdir().unwrap();
    std::fs::write(
        profile.path().join("user.js"),
        "user_pref(\"media.navigator.streams.fake\", true);\n\
         user_pref(\"media.navigator.permission.disabled\", true);\n\
         user_pref(\"browser.shell.checkDefaultBrowser\", false);\n\
         user_pref(\"browser.startup.homepage_override.mstone\", \"ignore\");\n\
         user_pref(\"datareporting.policy.dataSubmissionEnabled\", false);\n\
         user_pref(\"toolkit.telemetry.reportingpolicy.firstRun\", false);\n\
         user_pref(\"app.update.enabled\", false);\n",
    )
    .unwrap();
    let _browser = Proc(
        std::process::Command::new(firefox)
            .args(["--headless", "--no-remote", "--profile"])
            .arg(profile.path())
            .arg(srv.url("/admin/ui/golive?mount=/live.opus"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start firefox"),
    );
    wait_until(Duration::from_secs(60), || {
        srv.mount_status("/live.opus").is_some()
    })
    .expect("Firefox's page lists the input, gets the 401, then publishes");
    let went_live = Instant::now();
    let mut l = Listener::open(srv.addr, "/live.opus", false);
    wait_until(Duration::from_secs(15), || {
        srv.mount_status("/live.opus").is_none()
    })
    .expect("the page's Stop DELETEs the publish");
    assert!(
        went_live.elapsed() < Duration::from_secs(30),
        "ended by the DELETE, not by source-timeout"
    );
    // The publish never sent audio (see above), so what the listener hears is the fallback.
    let heard = l.read_for(Duration::from_secs(3));
    assert!(
        heard.windows(8).any(|w| w == b"OpusHead"),
        "the fallback's stream"
    );
    assert!(heard.len() > 4_000, "{} bytes", heard.len());
    assert_eq!(listeners_on(&srv, "/fallback.opus"), 1);
}
