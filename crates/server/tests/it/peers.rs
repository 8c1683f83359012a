//! Real third-party clients: ffmpeg as a source (PUT via `icecast://`, MP3 and Ogg/Opus) and as
//! a decoder joining mid-stream, libshout's `shout` as a SOURCE client, curl as an ICY listener.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// ffmpeg pushing `file` in a loop at real time to `mount` with `content_type`.
fn ffmpeg_source(
    srv: &TestServer,
    file: &str,
    mount: &str,
    content_type: &str,
    muxer: &str,
) -> Proc {
    require("ffmpeg");
    let url = format!("icecast://source:{SOURCE_PW}@{}{mount}", srv.addr);
    let child = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i"])
        .arg(asset(file))
        .args([
            "-c",
            "copy",
            "-content_type",
            content_type,
            "-ice_name",
            "ffmpeg live",
            "-f",
            muxer,
        ])
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ffmpeg");
    Proc(child)
}

#[test]
fn ffmpeg_pushes_mp3_and_100_listeners_receive_it() {
    let srv = TestServer::start("");
    let _ff = ffmpeg_source(&srv, "demo.mp3", "/live.mp3", "audio/mpeg", "mp3");
    srv.wait_mount("/live.mp3");
    assert_eq!(
        srv.mount_status("/live.mp3").unwrap()["name"],
        "ffmpeg live"
    );
    std::thread::sleep(Duration::from_secs(2));
    // 100 concurrent listeners, each must receive the stream at its bitrate.
    let addr = srv.addr;
    let handles: Vec<_> = (0..100)
        .map(|_| {
            std::thread::spawn(move || {
                let mut l = Listener::open(addr, "/live.mp3", false);
                let first = l.read_for(Duration::from_millis(1000));
                let window = l.read_for(Duration::from_secs(5));
                (first, window.len())
            })
        })
        .collect();
    for h in handles {
        let (first, window) = h.join().unwrap();
        let (starts, frames) = mp3_chain(&first);
        assert!(starts && frames > 10, "listener must start on a frame");
        // 64 kbit/s = 8000 B/s; ≥ 80 % over the window less one write interval.
        assert!(
            window >= 25_600,
            "listener received only {window} bytes in 5 s"
        );
    }
    // And a real decoder joining mid-stream decodes cleanly.
    let errors = ffmpeg_decode(&srv.url("/live.mp3"), 5);
    assert!(errors.is_empty(), "ffmpeg decode errors: {errors}");
}

#[test]
fn ffmpeg_pushes_ogg_opus_and_a_mid_stream_join_decodes() {
    let srv = TestServer::start("");
    let _ff = ffmpeg_source(&srv, "test-tone.opus", "/live.opus", "audio/ogg", "ogg");
    srv.wait_mount("/live.opus");
    // Join well after the start: the burst begins on a page and the header pages are replayed.
    std::thread::sleep(Duration::from_secs(4));
    let mut l = Listener::open(srv.addr, "/live.opus", false);
    assert_eq!(l.head.header("Content-Type"), Some("audio/ogg"));
    let first = l.read_for(Duration::from_millis(500));
    assert!(first.starts_with(b"OggS"), "must start on a page");
    assert!(
        first.windows(8).any(|w| w == b"OpusHead"),
        "OpusHead replayed"
    );
    assert!(
        first.windows(8).any(|w| w == b"OpusTags"),
        "OpusTags replayed"
    );
    let errors = ffmpeg_decode(&srv.url("/live.opus"), 5);
    assert!(errors.is_empty(), "ffmpeg decode errors: {errors}");
}

#[test]
fn shout_pushes_via_source() {
    require("shout");
    let log = std::env::temp_dir().join(format!("throng-it-shout-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    // Access log to a file so the request line (method) can be checked.
    let mut config = throng_server::Config::from_toml(&format!(
        "listen = [\"127.0.0.1:0\"]\n[authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n[logging]\naccess-log = {:?}\n",
        log.display().to_string()
    ))
    .unwrap();
    config.workers = 1;
    let srv = TestServer::start_config(config);
    let mp3 = std::fs::read(asset("demo.mp3")).unwrap();
    let mut child = Command::new("shout")
        .args(["--usage", "audio", "--format", "mp3", "--host", "127.0.0.1"])
        .args([
            "--port",
            &srv.addr.port().to_string(),
            "--mount",
            "/shout.mp3",
        ])
        .args(["--pass", SOURCE_PW, "--station-name", "Shout Test"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shout");
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        for _ in 0..3 {
            if stdin.write_all(&mp3).is_err() {
                break;
            }
        }
    });
    let proc = Proc(child);
    srv.wait_mount("/shout.mp3");
    assert_eq!(
        srv.mount_status("/shout.mp3").unwrap()["name"],
        "Shout Test"
    );
    let errors = ffmpeg_decode(&srv.url("/shout.mp3"), 3);
    assert!(errors.is_empty(), "ffmpeg decode errors: {errors}");
    drop(proc);
    let _ = feeder.join();
    wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains("\"SOURCE /shout.mp3 HTTP/1.0\" 200"))
    })
    .unwrap_or_else(|_| {
        panic!(
            "no SOURCE line in access log: {:?}",
            std::fs::read_to_string(&log)
        )
    });
    let _ = std::fs::remove_file(&log);
}

#[test]
fn curl_sees_icy_metaint_and_the_new_title_at_the_right_offset() {
    require("curl");
    let srv = TestServer::start("");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    std::thread::sleep(Duration::from_secs(1));
    let status = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-u",
            &format!("admin:{ADMIN_PW}"),
        ])
        .arg(srv.url("/admin/metadata?mount=/live.mp3&mode=updinfo&song=Curl%20Title"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "200");
    let dir = std::env::temp_dir();
    let (head_file, body_file) = (
        dir.join(format!("throng-it-curl-h-{}", std::process::id())),
        dir.join(format!("throng-it-curl-b-{}", std::process::id())),
    );
    let t = Instant::now();
    let curl = Command::new("curl")
        .args(["-s", "--max-time", "5", "-H", "Icy-MetaData: 1", "-D"])
        .arg(&head_file)
        .arg("-o")
        .arg(&body_file)
        .arg(srv.url("/live.mp3"))
        .status()
        .unwrap();
    // Exit code 28: the stream was still running when --max-time ended it.
    assert_eq!(curl.code(), Some(28), "curl: {curl}");
    assert!(t.elapsed() < Duration::from_secs(10));
    let head = std::fs::read_to_string(&head_file).unwrap();
    let body = std::fs::read(&body_file).unwrap();
    let _ = (
        std::fs::remove_file(&head_file),
        std::fs::remove_file(&body_file),
    );
    assert!(head.contains("icy-metaint:16000\r\n"), "{head}");
    assert!(body.len() > 16_000 + 64, "body too short: {}", body.len());
    let len = body[16_000] as usize * 16;
    let block = &body[16_001..16_001 + len];
    assert!(
        block.starts_with(b"StreamTitle='Curl Title';"),
        "{:?}",
        String::from_utf8_lossy(block)
    );
    // The next metadata point carries no change: a single zero byte (5 s at 8000 B/s reach it).
    let next = 16_001 + len + 16_000;
    assert!(body.len() > next, "body too short: {}", body.len());
    assert_eq!(body[next], 0);
}
