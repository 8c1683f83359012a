//! Browser tests in headless Chromium (driven over the DevTools protocol by `cdp.rs`): the
//! station page plays the demo mount (the `<audio>` element's `currentTime` advances) and shows
//! a new title pushed by the event stream without a reload; a mount started after the page
//! loaded gets its card and its HLS link; the admin web UI updates metadata,
//! keeps its listener count live and kicks a listener (on a confirming second press) through
//! its forms; `icecast-metadata-player` (npm, installed by
//! `scripts/install-web-deps.sh`) in a page served from another origin plays an MP3 mount and
//! an Ogg/Opus mount and reports their ICY and Ogg titles. No page may log a console error.
//!
//! Without Chromium (or the npm package) a test prints why and passes, unless
//! `THRONG_REQUIRE_BROWSER` is set (`scripts/test.sh` sets it): then it fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use throng_proto::auth::basic_authorization;

use crate::cdp::{browser_or_skip as browser, browser_required, Browser};
use crate::support::*;

fn assert_no_console_errors(b: &Browser, tab: &crate::cdp::Tab, page: &str) {
    let errors = b.console_errors(tab);
    assert!(errors.is_empty(), "console errors on {page}: {errors:#?}");
}

/// Whether the server answers `/api/v1/events` (the event stream of the fan-out engine) with
/// something else than 404: read only the status line, as the stream does not end.
fn has_event_stream(addr: SocketAddr) -> bool {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /api/v1/events HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let mut line = String::new();
    let _ = BufReader::new(s).read_line(&mut line);
    !line.contains(" 404 ")
}

/// Sets the title of `mount` through Icecast's admin `metadata` command.
fn admin_title(srv: &TestServer, mount: &str, song: &str) {
    let path = format!(
        "/admin/metadata?mount={mount}&mode=updinfo&song={}",
        song.replace(' ', "+")
    );
    let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, body) = http_get(srv.addr, &path, &[&auth]);
    assert_eq!(head.status, 200, "{}", String::from_utf8_lossy(&body));
}

/// The station page on the demo mount: a card with title, format and playlist links; its
/// player plays (currentTime advances).
#[test]
fn station_page_plays_the_demo_mount() {
    let Some(b) = browser() else { return };
    let srv = TestServer::start("demo = true");
    srv.wait_mount("/demo.mp3");
    // An MP3 mount is served as HLS too (on by default) once its packager runs: the card then
    // links the playlist.
    wait_until(Duration::from_secs(15), || {
        srv.mount_status("/demo.mp3")
            .is_some_and(|m| m.get("hls_url").is_some())
    })
    .expect("hls_url in the status");
    admin_title(&srv, "/demo.mp3", "Demo Tone");
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    let card = "document.querySelector('.card[data-mount=\"/demo.mp3\"]')";
    b.wait_js(&tab, card, Duration::from_secs(10))
        .expect("a card for the demo mount");
    let facts = b
        .eval(
            &tab,
            &format!(
                "(() => {{ const c = {card}; return {{
                    title: c.querySelector('.now-title').textContent,
                    live: c.querySelector('.now-title').getAttribute('aria-live'),
                    format: c.querySelector('.format').textContent,
                    bitrate: c.querySelector('.bitrate').textContent,
                    m3u: c.querySelector('.m3u').getAttribute('href'),
                    xspf: c.querySelector('.xspf').getAttribute('href'),
                    hls: c.querySelector('.hls').hidden,
                    hls_href: c.querySelector('.hls').getAttribute('href'),
                    label: c.querySelector('.audio').getAttribute('aria-label'),
                    station: document.getElementById('station-name').textContent,
                }}; }})()"
            ),
        )
        .unwrap();
    assert_eq!(facts["title"], "Demo Tone", "{facts}");
    assert_eq!(facts["live"], "polite");
    assert_eq!(facts["format"], "MP3");
    assert!(
        facts["bitrate"].as_str().unwrap().ends_with("kbit/s"),
        "{facts}"
    );
    assert_eq!(facts["m3u"], "/demo.mp3.m3u");
    assert_eq!(facts["xspf"], "/demo.mp3.xspf");
    assert_eq!(facts["hls"], false, "{facts}");
    assert!(
        facts["hls_href"]
            .as_str()
            .unwrap()
            .ends_with("/hls/demo.mp3/index.m3u8"),
        "{facts}"
    );
    assert!(facts["label"].as_str().unwrap().starts_with("Player of"));
    // No `[station] name`: the heading is the host the visitor typed, not `server-id`.
    assert_eq!(facts["station"], "127.0.0.1");

    // The page's own Play button; audio time must advance.
    b.eval(&tab, &format!("{card}.querySelector('.play').click()"))
        .unwrap();
    let audio = format!("{card}.querySelector('.audio')");
    let t1 = b
        .wait_js(&tab, &format!("{audio}.currentTime > 0.5 && {audio}.currentTime"), Duration::from_secs(20))
        .unwrap_or_else(|e| {
            let state = b.eval(&tab, &format!("[{audio}.readyState, {audio}.networkState, String({audio}.error && {audio}.error.message), {audio}.currentTime]"));
            panic!("the demo mount does not play: {e}; audio state {state:?}")
        })
        .as_f64()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t2 = b
        .eval(&tab, &format!("{audio}.currentTime"))
        .unwrap()
        .as_f64()
        .unwrap();
    assert!(t2 > t1 + 0.5, "currentTime went from {t1} to {t2} in 1.5 s");
    let pressed = b
        .eval(
            &tab,
            &format!("{card}.querySelector('.play').getAttribute('aria-pressed')"),
        )
        .unwrap();
    assert_eq!(pressed, "true");
    // Before the event stream exists the page falls back to polling, and Chromium logs the
    // 404 of its one attempt; with the stream, no console error at all.
    let events = has_event_stream(srv.addr);
    let errors: Vec<String> = b
        .console_errors(&tab)
        .into_iter()
        .filter(|e| events || !e.contains("/api/v1/events"))
        .collect();
    assert!(errors.is_empty(), "console errors on /: {errors:#?}");
}

/// A title set by the admin reaches the open page through `/api/v1/events` within 2 s.
#[test]
fn station_page_shows_a_new_title_within_2_s_without_reload() {
    let Some(b) = browser() else { return };
    let srv = TestServer::start("demo = true");
    srv.wait_mount("/demo.mp3");
    admin_title(&srv, "/demo.mp3", "Before");
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    let title = "document.querySelector('.card[data-mount=\"/demo.mp3\"] .now-title')";
    b.wait_js(
        &tab,
        &format!("{title} && {title}.textContent === 'Before'"),
        Duration::from_secs(10),
    )
    .unwrap();
    // Mark the document: a reload would lose the mark.
    b.eval(&tab, "window.__same_document = true").unwrap();
    // Give the event stream a moment to connect, as a visitor would have.
    std::thread::sleep(Duration::from_millis(500));
    admin_title(&srv, "/demo.mp3", "Pushed Title");
    let sent = Instant::now();
    b.wait_js(
        &tab,
        &format!("{title}.textContent === 'Pushed Title'"),
        Duration::from_secs(2),
    )
    .unwrap_or_else(|e| panic!("no new title within 2 s: {e}"));
    eprintln!("title shown {:?} after the admin update", sent.elapsed());
    // The page's own player joins: the count it shows follows (events are coalesced to one
    // per mount per second).
    let card = "document.querySelector('.card[data-mount=\"/demo.mp3\"]')";
    b.eval(&tab, &format!("{card}.querySelector('.play').click()"))
        .unwrap();
    b.wait_js(
        &tab,
        &format!("{card}.querySelector('.listeners').textContent === '1'"),
        Duration::from_secs(5),
    )
    .unwrap_or_else(|e| panic!("listener count not pushed: {e}"));
    assert_eq!(
        b.eval(&tab, "window.__same_document === true").unwrap(),
        true
    );
    assert_no_console_errors(&b, &tab, "/");
}

/// The admin UI: log in (Basic), open a mount, update its metadata and kick a listener with
/// the page's forms.
#[test]
fn admin_ui_updates_metadata_and_kicks_a_listener_through_its_forms() {
    let Some(b) = browser() else { return };
    let srv = TestServer::start("");
    let _s = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let mount = srv.ctx.registry.get("/live.mp3").unwrap();
    let mut victim = Listener::open(srv.addr, "/live.mp3", false);
    wait_until(Duration::from_secs(10), || {
        mount.listeners.load(Ordering::Relaxed) == 1
    })
    .expect("listener joined");

    let tab = b.new_tab();
    b.set_headers(
        &tab,
        json!({ "Authorization": basic_authorization("admin", ADMIN_PW) }),
    );
    b.navigate(&tab, &srv.url("/admin/"));
    let link = "document.querySelector('a[href^=\"/admin/ui/mount\"]')";
    b.wait_js(&tab, link, Duration::from_secs(10))
        .expect("a mount link");
    b.eval(&tab, &format!("{link}.click()")).unwrap();
    b.wait_js(
        &tab,
        "document.getElementById('meta-title')",
        Duration::from_secs(10),
    )
    .expect("the mount page");

    // Metadata through the form.
    b.eval(
        &tab,
        "document.getElementById('meta-artist').value = 'Browser Artist';
         document.getElementById('meta-title').value = 'Browser Title';
         document.getElementById('meta-submit').click()",
    )
    .unwrap();
    b.wait_js(
        &tab,
        "(document.querySelector('#flash.ok') || {}).textContent === 'Metadata update successful'",
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(mount.title(), "Browser Artist - Browser Title");
    let shown = b
        .eval(&tab, "document.getElementById('current-title').textContent")
        .unwrap();
    assert_eq!(shown, "Browser Artist - Browser Title");

    // The count shown follows the event stream: a second listener joins without a reload.
    let second = Listener::open(srv.addr, "/live.mp3", false);
    b.wait_js(
        &tab,
        "document.getElementById('listener-count').textContent === '2'",
        Duration::from_secs(5),
    )
    .expect("the listener count is kept live");
    drop(second);
    wait_until(Duration::from_secs(5), || {
        mount.listeners.load(Ordering::Relaxed) == 1
    })
    .unwrap();

    // Kick the listener through its row's button: the first press only asks.
    b.eval(&tab, "document.querySelector('[data-kick]').click()")
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        mount.listeners.load(Ordering::Relaxed),
        1,
        "kicked on the first press"
    );
    assert_eq!(
        b.eval(&tab, "document.querySelector('[data-kick]').textContent")
            .unwrap()
            .as_str()
            .map(|t| t.starts_with("Kick ") && t.ends_with('?')),
        Some(true)
    );
    b.eval(&tab, "document.querySelector('[data-kick]').click()")
        .unwrap();
    b.wait_js(
        &tab,
        "/^Client \\d+ removed$/.test((document.querySelector('#flash.ok') || {}).textContent)",
        Duration::from_secs(10),
    )
    .unwrap();
    victim
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut sink = Vec::new();
    let _ = victim.stream.read_to_end(&mut sink);
    wait_until(Duration::from_secs(5), || {
        mount.listeners.load(Ordering::Relaxed) == 0
    })
    .expect("the listener was kicked");
    let rows = b
        .eval(&tab, "document.querySelectorAll('[data-listener]').length")
        .unwrap();
    assert_eq!(rows, 0);
    assert_no_console_errors(&b, &tab, "/admin/ui/mount");
}

/// The build folder of the npm `icecast-metadata-player`, or `None` (after saying why).
fn metadata_player_build() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/web/node_modules/icecast-metadata-player/build");
    if dir.is_dir() {
        return Some(dir);
    }
    let why = "icecast-metadata-player is not installed: run scripts/install-web-deps.sh";
    assert!(!browser_required(), "{why} (THRONG_REQUIRE_BROWSER is set)");
    eprintln!("SKIPPED: {why}");
    None
}

/// A static HTTP server on another port (so another origin) serving `page` at `/` and the
/// files of `dir` under `/build/`; stops on drop.
struct OtherOrigin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl OtherOrigin {
    fn start(page: String, dir: PathBuf) -> OtherOrigin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => {
                        let page = page.clone();
                        let dir = dir.clone();
                        std::thread::spawn(move || serve_static(s, &page, &dir));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        OtherOrigin { addr, stop }
    }
}

impl Drop for OtherOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_static(s: TcpStream, page: &str, dir: &Path) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    if r.read_line(&mut line).is_err() {
        return;
    }
    loop {
        let mut h = String::new();
        match r.read_line(&mut h) {
            Ok(n) if n > 2 => continue,
            _ => break,
        }
    }
    let path = line
        .split(' ')
        .nth(1)
        .unwrap_or("/")
        .split('?')
        .next()
        .unwrap_or("/");
    let (status, ty, body): (&str, &str, Vec<u8>) = if path == "/" {
        (
            "200 OK",
            "text/html; charset=utf-8",
            page.as_bytes().to_vec(),
        )
    } else if let Some(name) = path
        .strip_prefix("/build/")
        .filter(|n| !n.contains('/') && !n.starts_with('.'))
    {
        match std::fs::read(dir.join(name)) {
            Ok(b) => {
                let ty = if name.ends_with(".js") {
                    "text/javascript"
                } else {
                    "application/json"
                };
                ("200 OK", ty, b)
            }
            Err(_) => ("404 Not Found", "text/plain", b"not found".to_vec()),
        }
    } else if path == "/favicon.ico" {
        ("204 No Content", "text/plain", Vec::new())
    } else {
        ("404 Not Found", "text/plain", b"not found".to_vec())
    };
    let mut s = r.into_inner();
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: {ty}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(&body);
}

/// ffmpeg encoding a tone live into `mount` as Ogg/Opus with `title` and `artist` tags.
fn opus_source(srv: &TestServer, mount: &str, title: &str, artist: &str) -> Proc {
    require("ffmpeg");
    let url = format!("icecast://source:{SOURCE_PW}@{}{mount}", srv.addr);
    let child = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-re", "-f", "lavfi", "-i"])
        .arg("sine=frequency=440:sample_rate=48000")
        .args(["-ac", "2", "-c:a", "libopus", "-b:a", "64k"])
        .args(["-metadata", &format!("title={title}")])
        .args(["-metadata", &format!("artist={artist}")])
        .args([
            "-content_type",
            "audio/ogg",
            "-ice_name",
            "opus live",
            "-f",
            "ogg",
        ])
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ffmpeg");
    Proc(child)
}

/// The player page: an IcecastMetadataPlayer for `?url=` with metadata type `type` and
/// playback method `method`, playing into an `<audio>`, keeping what its callbacks report in
/// `window.reports`.
fn player_page(script: &str) -> String {
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>player</title>
<link rel="icon" href="data:,"><script src="/build/{script}"></script></head><body>
<audio id="a"></audio>
<script>
window.reports = {{ metadata: [], errors: [], warnings: [], play: false }};
const q = new URLSearchParams(location.search);
const player = new IcecastMetadataPlayer(q.get("url"), {{
  audioElement: document.getElementById("a"),
  metadataTypes: [q.get("type")],
  playbackMethod: q.get("method") || "mediasource",
  onMetadata: (m) => window.reports.metadata.push(m),
  onError: (e) => window.reports.errors.push(String(e && e.message || e)),
  onPlay: () => {{ window.reports.play = true; }},
  onWarn: (...w) => window.reports.warnings.push(w.map(String).join(" ")),
  onCodecUpdate: (c) => {{ window.reports.codec = c; }},
  onStreamStart: () => {{ window.reports.started = true; }},
  onStream: () => {{ window.reports.streamed = (window.reports.streamed || 0) + 1; }},
  onBuffer: (t) => {{ window.reports.buffer = t; }},
  onLoad: () => {{ window.reports.load = true; }},
}});
window.player = player;
player.play();
</script></body></html>"#
    )
}

/// icecast-metadata-player on another origin: CORS requests with `Icy-MetaData: 1` to an MP3
/// mount (ICY titles) and to an Ogg/Opus mount (Ogg comment titles).
#[test]
fn icecast_metadata_player_on_another_origin_reports_icy_and_ogg_titles() {
    let Some(dir) = metadata_player_build() else {
        return;
    };
    let Some(b) = browser() else { return };
    let script = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|n| n.starts_with("icecast-metadata-player-") && n.ends_with(".main.min.js"))
        .expect("the main bundle");
    let srv = TestServer::start("");
    let _mp3 = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    let _opus = opus_source(&srv, "/opus.ogg", "Ogg Test Title", "Ogg Artist");
    srv.wait_mount("/live.mp3");
    srv.wait_mount("/opus.ogg");
    admin_title(&srv, "/live.mp3", "ICY Test Title");
    let origin = OtherOrigin::start(player_page(&script), dir);
    assert_ne!(origin.addr.port(), srv.addr.port());

    // MP3 plays through MediaSource (the player's first choice); Ogg/Opus, which its
    // MediaSource path does not take, through the `<audio>` element (`html5`) with the player
    // reading the Ogg comments from its own CORS request. Its third way, `webaudio` (WASM
    // decoders in a Worker), decodes nothing in headless Chromium here, MP3 and Opus alike.
    for (mount, kind, check) in [
        (
            "/live.mp3",
            "icy",
            "window.reports.metadata.some(m => m.StreamTitle === 'ICY Test Title')",
        ),
        (
            "/opus.ogg",
            "ogg&method=html5",
            "window.reports.metadata.some(m => m.TITLE === 'Ogg Test Title' && m.ARTIST === 'Ogg Artist')",
        ),
    ] {
        let tab = b.new_tab();
        let url = format!(
            "http://{}/?type={kind}&url={}",
            origin.addr,
            srv.url(mount).replace(':', "%3A").replace('/', "%2F")
        );
        b.navigate(&tab, &url);
        b.wait_js(&tab, check, Duration::from_secs(20)).unwrap_or_else(|e| {
            let r = b.eval(&tab, "JSON.stringify(window.reports) + ' state ' + player.state + ' method ' + player.playbackMethod + ' audio ' + JSON.stringify([document.getElementById('a').paused, document.getElementById('a').readyState, document.getElementById('a').currentTime, String(document.getElementById('a').srcObject)])");
            panic!("{mount}: no {kind} title reported: {e}; reports {r:?}")
        });
        let t = b
            .wait_js(
                &tab,
                "document.getElementById('a').currentTime > 0.5 && document.getElementById('a').currentTime",
                Duration::from_secs(20),
            )
            .unwrap_or_else(|e| panic!("{mount} does not play in icecast-metadata-player: {e}"));
        assert!(t.as_f64().unwrap() > 0.5);
        let errors = b.eval(&tab, "window.reports.errors").unwrap();
        assert_eq!(errors, json!([]), "{mount}");
        // icecast-metadata-player 1.17 starts the audio element at once (for iOS Safari's
        // gesture rule, `IcecastMetadataPlayer.js` `[play]`) without handling the promise, then
        // gives it a MediaSource, which rejects that first `play()` with AbortError: the
        // library's own rejection, with any server. Every other console error fails the test.
        let errors: Vec<String> = b
            .console_errors(&tab)
            .into_iter()
            .filter(|e| !e.contains("The play() request was interrupted by a new load request"))
            .collect();
        assert!(errors.is_empty(), "console errors with {mount}: {errors:#?}");
    }
}

/// A mount name with a space, a quote, `>`, `?` and `#`: the page's links and player address
/// are percent-encoded, its label is text (no markup), and the player plays it.
#[test]
fn station_page_links_of_odd_mount_names_are_percent_encoded() {
    let Some(b) = browser() else { return };
    let srv = TestServer::start("");
    let _s = Source::start(srv.addr, "/my%20radio%22%3E%3F%23.mp3", "SOURCE", 1.0);
    srv.wait_mount("/my radio\">?#.mp3");
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    let card = "document.querySelector('.card')";
    b.wait_js(&tab, card, Duration::from_secs(10)).unwrap();
    let links = b
        .eval(
            &tab,
            &format!(
                "[...{card}.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))
                 .concat([{card}.querySelector('.audio').getAttribute('src'), {card}.dataset.mount,
                          document.querySelectorAll('.card b, .card script').length])"
            ),
        )
        .unwrap();
    assert_eq!(
        links,
        json!([
            "/my%20radio%22%3E%3F%23.mp3.m3u",
            "/my%20radio%22%3E%3F%23.mp3.xspf",
            // On the host the visitor used, whatever `hostname` says (issue 27).
            "/hls/my%20radio%22%3E%3F%23.mp3/index.m3u8",
            "/my%20radio%22%3E%3F%23.mp3",
            "/my%20radio%22%3E%3F%23.mp3",
            "/my radio\">?#.mp3",
            0
        ])
    );
    b.eval(&tab, &format!("{card}.querySelector('.play').click()"))
        .unwrap();
    b.wait_js(
        &tab,
        &format!("{card}.querySelector('.audio').currentTime > 0.5"),
        Duration::from_secs(20),
    )
    .expect("the odd mount plays");
}

/// A mount that starts after the page loaded gets its card from the event stream, and its HLS
/// link once the status document has it (the page reads it again a few seconds after a new
/// mount appears: events do not carry the HLS and WebRTC links).
#[test]
fn a_mount_started_after_the_page_loaded_gets_its_hls_link() {
    let Some(b) = browser() else { return };
    let srv = TestServer::start("[hls]\nsegment-seconds = 1\n");
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    b.wait_js(
        &tab,
        "document.readyState === 'complete'",
        Duration::from_secs(10),
    )
    .unwrap();
    // Let the page connect its event stream before the mount starts.
    std::thread::sleep(Duration::from_secs(1));
    let _s = Source::start(srv.addr, "/late.mp3", "SOURCE", 1.0);
    let card = "document.querySelector('.card[data-mount=\"/late.mp3\"]')";
    b.wait_js(&tab, card, Duration::from_secs(10))
        .expect("a card for the new mount");
    b.wait_js(
        &tab,
        &format!("!{card}.querySelector('.hls').hidden"),
        Duration::from_secs(20),
    )
    .expect("the new mount's HLS link");
    let href = b
        .eval(
            &tab,
            &format!("{card}.querySelector('.hls').getAttribute('href')"),
        )
        .unwrap();
    assert!(
        href.as_str().unwrap().ends_with("/hls/late.mp3/index.m3u8"),
        "{href}"
    );
}
