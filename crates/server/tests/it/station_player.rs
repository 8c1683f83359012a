//! The station page's player in headless Chromium (issue 27): it keeps playing (the `<audio>`
//! element's time advancing) through a source drop onto a fallback and the source's return,
//! plays again by itself within 10 s of a server restart, fills the Media Session with the
//! station and the current title, plays the HLS choice through the vendored hls.js, shows the
//! `[station]` identity, history and embed page, and neither the station page nor the admin
//! pages overflow a 390 px wide phone screen. `screenshots_for_docs` (ignored; run it by name)
//! writes the README's screenshots to `docs/img/`.
//!
//! Without Chromium a test prints why and passes, unless `THRONG_REQUIRE_BROWSER` is set.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use throng_proto::auth::basic_authorization;

use crate::cdp::{browser_or_skip as browser, Browser, Tab};
use crate::support::*;

fn card(mount: &str) -> String {
    format!("document.querySelector('.card[data-mount=\"{mount}\"]')")
}

/// The `currentTime` of the card's `<audio>` element (`None` without the card).
fn audio_time(b: &Browser, tab: &Tab, mount: &str) -> Option<f64> {
    let c = card(mount);
    b.eval(
        tab,
        &format!("{c} && {c}.querySelector('.audio').currentTime"),
    )
    .ok()
    .and_then(|v| v.as_f64())
}

/// Waits (10 s at most) for the card of `mount` in `tab`.
fn wait_card(b: &Browser, tab: &Tab, mount: &str) {
    b.wait_js(tab, &format!("!!{}", card(mount)), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("no card for {mount}: {e}"));
}

/// A new tab with a 390 px phone's viewport on the station page of `srv`, once the demo
/// mount's card is there.
fn phone_tab(b: &Browser, srv: &TestServer) -> Tab {
    let tab = b.new_tab();
    phone(b, &tab);
    b.navigate(&tab, &srv.url("/"));
    wait_card(b, &tab, "/demo.mp3");
    tab
}

/// Asserts that the card's audio time advances by at least 1 s within `within`.
fn assert_advancing(b: &Browser, tab: &Tab, mount: &str, within: Duration, when: &str) {
    let t0 = audio_time(b, tab, mount).unwrap_or_else(|| panic!("{when}: no card for {mount}"));
    let end = Instant::now() + within;
    loop {
        let t = audio_time(b, tab, mount).unwrap_or_else(|| panic!("{when}: the card went away"));
        if t > t0 + 1.0 {
            return;
        }
        if Instant::now() > end {
            let state = b.eval(tab, "JSON.stringify(window.throngPlayer && {state: throngPlayer.state, why: throngPlayer.why, delivery: throngPlayer.delivery})");
            panic!("{when}: audio time stuck at {t0} → {t} for {within:?}; player {state:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn set_title(srv: &TestServer, mount: &str, song: &str) {
    let path = format!(
        "/admin/metadata?mount={mount}&mode=updinfo&song={}",
        song.replace(' ', "+")
    );
    let (head, _) = http_get(srv.addr, &path, &[&admin_header()]);
    assert_eq!(head.status, 200);
}

/// Presses Play on the card of `mount` and waits until its audio time advances.
fn play(b: &Browser, tab: &Tab, mount: &str) {
    let c = card(mount);
    wait_card(b, tab, mount);
    b.eval(tab, &format!("{c}.querySelector('.play').click()"))
        .unwrap();
    b.wait_js(
        tab,
        &format!("{c}.querySelector('.audio').currentTime > 0.3"),
        Duration::from_secs(20),
    )
    .unwrap_or_else(|e| panic!("{mount} does not play: {e}"));
}

/// The page keeps playing through a source drop onto a fallback and the source's return (the
/// card stays, its button says Pause); the Media Session holds station and title.
#[test]
fn the_player_keeps_playing_through_a_fallback_and_the_sources_return() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fallback.mp3");
    std::fs::copy(asset("demo.mp3"), &file).unwrap();
    let srv = TestServer::start(&format!(
        "[[mount]]\nname = \"/fallback.mp3\"\nfile = {file:?}\n\
         [[mount]]\nname = \"/live.mp3\"\nfallback-mount = \"/fallback.mp3\"\nfallback-override = true\n\
         [station]\nname = \"Test FM\"\ndescription = \"Tones all day\"\n"
    ));
    srv.wait_mount("/fallback.mp3");
    let source = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    set_title(&srv, "/live.mp3", "First Song");
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    play(&b, &tab, "/live.mp3");
    let c = card("/live.mp3");
    // Station identity in the heading and title; the mount's path on its card.
    let facts = b
        .eval(
            &tab,
            &format!(
                "({{ h1: document.getElementById('station-name').textContent, title: document.title,
                   desc: document.getElementById('station-description').textContent,
                   path: {c}.querySelector('.mount-path').textContent }})"
            ),
        )
        .unwrap();
    assert_eq!(
        facts,
        json!({"h1": "Test FM", "title": "Test FM", "desc": "Tones all day", "path": "/live.mp3"})
    );
    // Media Session: station and current title, then a new title.
    b.wait_js(
        &tab,
        "navigator.mediaSession.metadata && navigator.mediaSession.metadata.title === 'First Song' && navigator.mediaSession.metadata.album === 'Test FM'",
        Duration::from_secs(5),
    )
    .expect("media session metadata with station and title");
    set_title(&srv, "/live.mp3", "Second Song");
    b.wait_js(
        &tab,
        "navigator.mediaSession.metadata.title === 'Second Song'",
        Duration::from_secs(5),
    )
    .expect("media session follows the title");
    // The history lists both titles, newest first.
    let history = b
        .eval(
            &tab,
            &format!(
                "Array.from({c}.querySelectorAll('.history li span')).map(s => s.textContent)"
            ),
        )
        .unwrap();
    assert_eq!(history, json!(["Second Song", "First Song"]));

    // A second visitor who is not playing.
    let idle = b.new_tab();
    b.navigate(&idle, &srv.url("/"));
    wait_card(&b, &idle, "/live.mp3");
    // The source drops: the server moves the page's connection to the fallback.
    source.stop();
    wait_until(Duration::from_secs(10), || {
        srv.ctx.registry.get("/live.mp3").is_none()
    })
    .expect("the live mount ends");
    std::thread::sleep(Duration::from_millis(1500));
    assert_advancing(
        &b,
        &tab,
        "/live.mp3",
        Duration::from_secs(5),
        "on the fallback",
    );
    let pressed = b
        .eval(
            &tab,
            &format!("{c}.querySelector('.play').getAttribute('aria-pressed')"),
        )
        .unwrap();
    assert_eq!(pressed, "true", "the button still says Pause");
    // The idle visitor's card stays too (the fallback answers its URL), marked off air.
    b.wait_js(
        &idle,
        &format!("!!{c} && {c}.classList.contains('ended')"),
        Duration::from_secs(5),
    )
    .expect("the idle card is kept, off air");
    assert_eq!(
        b.eval(
            &idle,
            &format!("{c}.querySelector('.play-state').textContent")
        )
        .unwrap(),
        "Off air: its fallback plays meanwhile"
    );
    // The source comes back: still playing, the card live again.
    let _back = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    b.wait_js(
        &tab,
        &format!("!{c}.classList.contains('ended')"),
        Duration::from_secs(5),
    )
    .expect("the card is live again");
    std::thread::sleep(Duration::from_millis(1000));
    assert_advancing(
        &b,
        &tab,
        "/live.mp3",
        Duration::from_secs(5),
        "after the return",
    );
    let live = srv.ctx.registry.get("/live.mp3").unwrap();
    wait_until(Duration::from_secs(5), || {
        live.listeners.load(Ordering::Relaxed) == 1
    })
    .expect("the page's listener is back on the live mount (fallback-override)");
}

/// A server restart: the page says "Reconnecting…" and plays again within 10 s without a
/// click.
#[test]
fn the_player_plays_again_within_10_s_of_a_server_restart() {
    let Some(b) = browser() else { return };
    let srv = TestServer::start("demo = true");
    let port = srv.addr.port();
    srv.wait_mount("/demo.mp3");
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    play(&b, &tab, "/demo.mp3");
    drop(srv);
    let c = card("/demo.mp3");
    b.wait_js(
        &tab,
        &format!("{c}.querySelector('.play-state').textContent === 'Reconnecting…'"),
        Duration::from_secs(15),
    )
    .expect("the page says it is reconnecting");
    assert_eq!(
        b.eval(
            &tab,
            &format!("{c}.querySelector('.play').getAttribute('aria-pressed')")
        )
        .unwrap(),
        "true",
        "reconnecting is not stopped"
    );
    let srv = TestServer::start_at(port, "demo = true");
    let restarted = Instant::now();
    srv.wait_mount("/demo.mp3");
    b.wait_js(
        &tab,
        &format!("!!{c} && {c}.dataset.state === 'playing'"),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("not playing 10 s after the restart: {e}"));
    assert!(restarted.elapsed() < Duration::from_secs(10));
    assert_advancing(
        &b,
        &tab,
        "/demo.mp3",
        Duration::from_secs(5),
        "after the restart",
    );
}

/// The HLS choice plays in Chromium (through `/static/vendor/hls.min.js`).
#[test]
fn the_hls_choice_plays_in_chromium() {
    let Some(b) = browser() else { return };
    let srv = TestServer::start("demo = true\n[hls]\nsegment-seconds = 1\n");
    srv.wait_mount("/demo.mp3");
    wait_until(Duration::from_secs(15), || {
        srv.mount_status("/demo.mp3")
            .is_some_and(|m| m["hls_url"].is_string())
    })
    .expect("hls_url in the status");
    let (head, body) = http_get(srv.addr, "/static/vendor/hls.min.js", &[]);
    assert_eq!(head.status, 200);
    assert!(body.len() > 100_000);
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    let c = card("/demo.mp3");
    b.wait_js(
        &tab,
        &format!("{c} && !{c}.querySelector('.hls-mode').hidden"),
        Duration::from_secs(10),
    )
    .expect("an HLS button");
    b.eval(&tab, &format!("{c}.querySelector('.hls-mode').click()"))
        .unwrap();
    b.wait_js(
        &tab,
        &format!("{c}.querySelector('.audio').currentTime > 1"),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| {
        let p = b.eval(&tab, "JSON.stringify(window.throngPlayer && {state: throngPlayer.state, why: throngPlayer.why, delivery: throngPlayer.delivery})");
        panic!("HLS does not play: {e}; {p:?}")
    });
    assert_eq!(
        b.eval(&tab, "window.throngPlayer.delivery").unwrap(),
        "hls.js"
    );
    assert_eq!(
        b.eval(&tab, "!!window.Hls && window.Hls.version").unwrap(),
        "1.6.19"
    );
    assert_advancing(&b, &tab, "/demo.mp3", Duration::from_secs(5), "over HLS");
    let s = b
        .eval(
            &tab,
            &format!("{c}.querySelector('.play-state').textContent"),
        )
        .unwrap();
    assert_eq!(s, "Playing over HLS");
}

/// Sets `tab`'s viewport to a 390 × 844 phone.
fn phone(b: &Browser, tab: &Tab) {
    b.call(
        Some(&tab.session),
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": true }),
    )
    .expect("setDeviceMetricsOverride");
}

/// How far the page is wider than its viewport, in CSS pixels (0: no horizontal overflow),
/// with the widest offending elements for the failure message.
fn overflow(b: &Browser, tab: &Tab) -> serde_json::Value {
    b.eval(
        tab,
        "(() => { const w = document.documentElement.clientWidth;
           const wide = Array.from(document.querySelectorAll('body *'))
             .filter(e => e.getBoundingClientRect().right > w + 1)
             .slice(0, 5).map(e => e.tagName + '.' + e.className);
           return { over: document.documentElement.scrollWidth - w, wide }; })()",
    )
    .unwrap()
}

/// At 390 px wide neither the station page nor the admin pages (overview, a mount with a
/// listener's Kick button, a mount with a long name) scroll sideways, and the Kick button is
/// on screen.
#[test]
fn no_page_overflows_a_390_px_phone() {
    let Some(b) = browser() else { return };
    let srv =
        TestServer::start("demo = true\n[station]\nname = \"A Station With A Rather Long Name\"\n");
    srv.wait_mount("/demo.mp3");
    let _s = Source::start_with(
        srv.addr,
        "/a-rather-long-mount-name-for-a-phone.mp3",
        "PUT",
        1.0,
        &["ice-name: A long stream name that has to wrap somewhere"],
    );
    srv.wait_mount("/a-rather-long-mount-name-for-a-phone.mp3");
    let _l = Listener::open(srv.addr, "/demo.mp3", false);
    set_title(
        &srv,
        "/demo.mp3",
        "An Artist With A Long Name - A Title That Goes On And On",
    );
    let tab = phone_tab(&b, &srv);
    let o = overflow(&b, &tab);
    assert_eq!(o["over"], 0, "station page: {o}");

    b.set_headers(
        &tab,
        json!({ "Authorization": basic_authorization("admin", ADMIN_PW) }),
    );
    for path in [
        "/admin/".to_owned(),
        "/admin/ui/mount?mount=/demo.mp3".to_owned(),
        "/admin/ui/mount?mount=/a-rather-long-mount-name-for-a-phone.mp3".to_owned(),
    ] {
        b.navigate(&tab, &srv.url(&path));
        std::thread::sleep(Duration::from_millis(300));
        let o = overflow(&b, &tab);
        assert_eq!(o["over"], 0, "{path}: {o}");
    }
    b.navigate(&tab, &srv.url("/admin/ui/mount?mount=/demo.mp3"));
    let kick = b
        .eval(
            &tab,
            "(() => { const r = document.querySelector('[data-kick]').getBoundingClientRect();
                      return r.left >= 0 && r.right <= document.documentElement.clientWidth; })()",
        )
        .unwrap();
    assert_eq!(kick, true, "the Kick button is on screen");
}

/// `/?embed=<mount>` shows that mount's player alone; the card's embed snippet points there
/// on the address the visitor used.
#[test]
fn the_embed_page_shows_one_mounts_player() {
    let Some(b) = browser() else { return };
    let srv = TestServer::start("demo = true");
    srv.wait_mount("/demo.mp3");
    let _s = Source::start(srv.addr, "/other.mp3", "PUT", 1.0);
    srv.wait_mount("/other.mp3");
    let tab = b.new_tab();
    b.navigate(&tab, &srv.url("/"));
    let c = card("/demo.mp3");
    b.wait_js(&tab, &format!("!!{c}"), Duration::from_secs(10))
        .unwrap();
    let code = b
        .eval(&tab, &format!("{c}.querySelector('.embed-code').value"))
        .unwrap();
    let expected = format!("src=\"{}/?embed=%2Fdemo.mp3\"", srv.url(""));
    assert!(
        code.as_str().unwrap().starts_with("<iframe ")
            && code.as_str().unwrap().contains(&expected),
        "{code}"
    );
    b.navigate(&tab, &srv.url("/?embed=%2Fdemo.mp3"));
    b.wait_js(&tab, &format!("!!{c}"), Duration::from_secs(10))
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let seen = b
        .eval(
            &tab,
            "({ cards: document.querySelectorAll('.card').length,
                header: getComputedStyle(document.querySelector('.top')).display })",
        )
        .unwrap();
    assert_eq!(seen, json!({"cards": 1, "header": "none"}));
    play(&b, &tab, "/demo.mp3");
}

/// Writes `docs/img/station-desktop.png`, `docs/img/station-phone.png` and
/// `docs/img/admin-phone.png`: `cargo test -p throng-server --test it screenshots_for_docs --
/// --ignored`.
#[test]
#[ignore = "writes the documentation's screenshots; run it by name"]
fn screenshots_for_docs() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let opus = dir.path().join("tone.opus");
    std::fs::copy(asset("test-tone.opus"), &opus).unwrap();
    let srv = TestServer::start(&format!(
        "demo = true\n[[mount]]\nname = \"/night.opus\"\nfile = {opus:?}\n\
         [station]\nname = \"Radio Throng\"\ndescription = \"Live from the test bench, all day\"\n"
    ));
    srv.wait_mount("/demo.mp3");
    srv.wait_mount("/night.opus");
    for t in [
        "Nina Simone - Feeling Good",
        "Miles Davis - So What",
        "Throng - Demo Tone",
    ] {
        set_title(&srv, "/demo.mp3", t);
        std::thread::sleep(Duration::from_millis(1100));
    }
    set_title(&srv, "/night.opus", "Night Shift - Slow Waves");
    let _l: Vec<Listener> = (0..3)
        .map(|_| Listener::open(srv.addr, "/demo.mp3", false))
        .collect();
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img");
    std::fs::create_dir_all(&out).unwrap();
    let shot = |tab: &Tab, name: &str, full: bool| {
        std::thread::sleep(Duration::from_millis(1500));
        let r = b
            .call(
                Some(&tab.session),
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": full }),
            )
            .expect("captureScreenshot");
        use base64::Engine;
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(out.join(name), png).unwrap();
    };
    let tab = b.new_tab();
    b.call(
        Some(&tab.session),
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 1100, "height": 760, "deviceScaleFactor": 1, "mobile": false }),
    )
    .unwrap();
    b.navigate(&tab, &srv.url("/"));
    play(&b, &tab, "/demo.mp3");
    b.eval(
        &tab,
        &format!(
            "{}.querySelector('.history-box').open = true",
            card("/demo.mp3")
        ),
    )
    .unwrap();
    shot(&tab, "station-desktop.png", false);
    let tab = phone_tab(&b, &srv);
    shot(&tab, "station-phone.png", false);
    b.set_headers(
        &tab,
        json!({ "Authorization": basic_authorization("admin", ADMIN_PW) }),
    );
    b.navigate(&tab, &srv.url("/admin/ui/mount?mount=/demo.mp3"));
    shot(&tab, "admin-phone.png", false);
}
