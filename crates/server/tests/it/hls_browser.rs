//! hls.js (vendored from npm by `scripts/install-deps.sh`) in headless Chromium (apt) plays a
//! Throng mount over HLS: the page, served by a small server of the test, attaches hls.js to an
//! `<audio>` element and posts what it sees twice a second: the ID3 metadata events
//! (`FRAG_PARSING_METADATA`), the title cues hls.js adds to its metadata text track, the
//! playback position and any fatal error.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use throng_proto::auth::basic_authorization;

use crate::support::*;

fn hls_js() -> std::path::PathBuf {
    let vendor =
        std::env::var("THRONG_VENDOR").unwrap_or_else(|_| "/usr/local/share/throng-vendor".into());
    let p = std::path::Path::new(&vendor).join("node_modules/hls.js/dist/hls.min.js");
    assert!(
        p.exists(),
        "{} missing: run scripts/install-deps.sh",
        p.display()
    );
    p
}

const PAGE: &str = r#"<!doctype html><meta charset="utf-8"><audio id="a"></audio>
<script src="/hls.min.js"></script><script>
const r = { id3: 0, titles: [], t: 0, fatal: null, supported: Hls.isSupported() };
const a = document.getElementById("a");
a.muted = true;
const hls = new Hls();
hls.on(Hls.Events.FRAG_PARSING_METADATA, (e, d) => { r.id3 += d.samples.length; });
hls.on(Hls.Events.ERROR, (e, d) => { if (d.fatal) r.fatal = d.details; });
hls.on(Hls.Events.MANIFEST_PARSED, () => { a.play().catch((e) => { r.play = String(e); }); });
hls.loadSource("HLS_URL");
hls.attachMedia(a);
setInterval(() => {
  r.t = a.currentTime;
  for (const track of a.textTracks) {
    for (const cue of Array.from(track.cues || [])) {
      const v = cue.value || {};
      if (v.key === "TIT2" && !r.titles.includes(v.data)) r.titles.push(v.data);
    }
  }
  fetch("/result", { method: "POST", body: JSON.stringify(r) });
}, 500);
</script>"#;

/// Serves the page and hls.js, and keeps the last result the page posted.
fn page_server(hls_url: String) -> (u16, Arc<Mutex<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let result = Arc::new(Mutex::new(String::new()));
    let keep = result.clone();
    let js = std::fs::read(hls_js()).unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            if r.read_line(&mut line).is_err() {
                continue;
            }
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let (ctype, body): (&str, Vec<u8>) = if line.starts_with("GET /hls.min.js") {
                ("application/javascript", js.clone())
            } else if line.starts_with("POST /result") {
                let mut b = vec![0; len];
                let _ = r.read_exact(&mut b);
                *keep.lock().unwrap() = String::from_utf8_lossy(&b).into_owned();
                ("text/plain", Vec::new())
            } else {
                ("text/html", PAGE.replace("HLS_URL", &hls_url).into_bytes())
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    (port, result)
}

#[test]
fn hls_js_in_chromium_plays_and_fires_id3_metadata() {
    require("chromium");
    let srv = TestServer::start("[hls]\nsegment-seconds = 2\n");
    let _source = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    srv.wait_mount("/live.mp3");
    let admin = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, _) = http_get(
        srv.addr,
        "/admin/metadata?mount=/live.mp3&mode=updinfo&song=Artist%20-%20Browser%20Song",
        &[&admin],
    );
    assert_eq!(head.status, 200);
    wait_until(Duration::from_secs(20), || {
        srv.ctx
            .hls
            .output("/live.mp3")
            .is_some_and(|o| o.window.load().segments.len() >= 3)
    })
    .expect("three segments");
    let (port, result) = page_server(srv.url("/hls/live.mp3/index.m3u8"));
    let profile = tempfile::tempdir().unwrap();
    let _chromium = Proc(
        Command::new("chromium")
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--mute-audio",
                "--autoplay-policy=no-user-gesture-required",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("http://127.0.0.1:{port}/"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromium"),
    );
    let mut last = serde_json::Value::Null;
    let ok = wait_until(Duration::from_secs(60), || {
        let text = result.lock().unwrap().clone();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            last = v;
        }
        last["id3"].as_u64().unwrap_or(0) > 0
            && last["t"].as_f64().unwrap_or(0.0) > 3.0
            && last["titles"]
                .as_array()
                .is_some_and(|t| t.iter().any(|x| x == "Browser Song"))
    });
    assert!(ok.is_ok(), "hls.js did not play with ID3 metadata: {last}");
    assert!(last["fatal"].is_null(), "{last}");
    // The player is a listener.
    let n = srv.mount_status("/live.mp3").unwrap()["listeners"]
        .as_u64()
        .unwrap();
    assert!(n >= 1, "{n} listeners");
}
