//! Fallback chains and mount limits: listeners move to a fallback mount (or a webroot file)
//! when the source stops and come back with `fallback-override`, without being disconnected
//! and on frame boundaries (checked by ffmpeg decoding across 20 switches); `fallback-when-full`,
//! max-listener-duration, intros and configured response headers.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_proto::format::Format;
use throng_proto::framer::Framer;
use throng_proto::icy::{IcyDemuxer, IcyPiece};

use crate::support::*;

/// A config with a live mount falling back to an always-on file mount.
fn fallback_config(dir: &std::path::Path, live_extra: &str) -> String {
    let file = dir.join("fallback.mp3");
    std::fs::copy(asset("demo.mp3"), &file).unwrap();
    format!(
        "[[mount]]\nname = \"/fallback.mp3\"\nfile = {file:?}\n\
         [[mount]]\nname = \"/live.mp3\"\nfallback-mount = \"/fallback.mp3\"\n{live_extra}\n"
    )
}

fn listeners_on(srv: &TestServer, mount: &str) -> u64 {
    srv.mount_status(mount)
        .and_then(|m| m["listeners"].as_u64())
        .unwrap_or(0)
}

/// A server playing the test tone on `/a.opus` (with `intro`, if any) and `/b.opus`, with
/// 4 kB listener send buffers.
fn two_tone_mounts(dir: &std::path::Path, intro: Option<&std::path::Path>) -> TestServer {
    let (a, b) = (dir.join("a.opus"), dir.join("b.opus"));
    std::fs::copy(asset("test-tone.opus"), &a).unwrap();
    std::fs::copy(asset("test-tone.opus"), &b).unwrap();
    let intro = intro.map_or(String::new(), |i| format!("intro = {i:?}\n"));
    let srv = TestServer::start(&format!(
        "[limits]\nlistener-sndbuf = 4096\n\
         [[mount]]\nname = \"/a.opus\"\nfile = {a:?}\n{intro}\
         [[mount]]\nname = \"/b.opus\"\nfile = {b:?}\n"
    ));
    srv.wait_mount("/a.opus");
    srv.wait_mount("/b.opus");
    srv
}

/// A listener of `/a.opus` with a 4 kB receive buffer that has not read anything yet.
fn small_buffer_listener(srv: &TestServer) -> std::net::TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&srv.addr.into()).unwrap();
    let mut s: std::net::TcpStream = sock.into();
    std::io::Write::write_all(&mut s, b"GET /a.opus HTTP/1.0\r\n\r\n").unwrap();
    s
}

/// The admin `Authorization` header line.
fn admin_auth() -> String {
    format!(
        "Authorization: {}",
        throng_proto::auth::basic_authorization("admin", ADMIN_PW)
    )
}

/// Whether a fan-out shard lists a listener of `/a.opus` (`listclients`): it may be counted on
/// the mount a moment before, and a move requested in between finds nobody to move.
fn listed_on_a(srv: &TestServer, auth: &str) -> bool {
    let (_, body) = http_get(srv.addr, "/admin/listclients?mount=/a.opus", &[auth]);
    String::from_utf8_lossy(&body).contains("<listener")
}

#[test]
fn hundred_listeners_survive_twenty_source_disconnects() {
    require("ffmpeg");
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&fallback_config(dir.path(), "fallback-override = true"));
    srv.wait_mount("/fallback.mp3");
    let mut source = Some(Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0));
    srv.wait_mount("/live.mp3");
    std::thread::sleep(Duration::from_millis(500));

    // 100 listeners reading continuously; each records its bytes and whether it was closed.
    let stop = Arc::new(AtomicBool::new(false));
    let addr = srv.addr;
    let readers: Vec<_> = (0..100)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut l = Listener::open(addr, "/live.mp3", i % 2 == 0);
                let mut total = l.first.len();
                let mut buf = [0u8; 16384];
                l.stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                while !stop.load(Ordering::Relaxed) {
                    match l.stream.read(&mut buf) {
                        Ok(0) => return (total, true),
                        Ok(n) => total += n,
                        Err(_) => return (total, true),
                    }
                }
                (total, false)
            })
        })
        .collect();
    // A real decoder listens across every switch.
    let mut decoder = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-i", &srv.url("/live.mp3")])
        .args(["-f", "null", "-"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ffmpeg");
    std::thread::sleep(Duration::from_secs(1));
    let started = Instant::now();
    for cycle in 0..20 {
        source.take().unwrap().stop();
        let left = Instant::now();
        wait_until(Duration::from_secs(5), || {
            srv.mount_status("/live.mp3").is_none() && listeners_on(&srv, "/fallback.mp3") >= 101
        })
        .unwrap_or_else(|_| {
            panic!(
                "cycle {cycle}: source still listed or listeners not on the fallback ({})",
                listeners_on(&srv, "/fallback.mp3")
            )
        });
        // Play the fallback for a while before the source returns.
        std::thread::sleep(Duration::from_millis(600).saturating_sub(left.elapsed()));
        source = Some(Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0));
        std::thread::sleep(Duration::from_millis(900));
    }
    // After the last return every listener is back on the live mount.
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/live.mp3") >= 101 && listeners_on(&srv, "/fallback.mp3") == 0
    })
    .unwrap_or_else(|_| {
        panic!(
            "listeners did not come back: live {}, fallback {}",
            listeners_on(&srv, "/live.mp3"),
            listeners_on(&srv, "/fallback.mp3")
        )
    });
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for (i, r) in readers.into_iter().enumerate() {
        let (bytes, closed) = r.join().unwrap();
        assert!(!closed, "listener {i} was disconnected");
        // 64 kbit/s = 8000 B/s, at least 80 % of it over the switching period.
        assert!(
            bytes as f64 >= 0.8 * 8000.0 * elapsed,
            "listener {i} got only {bytes} bytes in {elapsed:.1} s"
        );
    }
    assert!(
        decoder.try_wait().unwrap().is_none(),
        "ffmpeg stopped listening"
    );
    let _ = decoder.kill();
    let out = decoder.wait_with_output().unwrap();
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(errors.trim().is_empty(), "ffmpeg decode errors: {errors}");
}

#[test]
fn without_override_listeners_stay_on_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&fallback_config(dir.path(), ""));
    srv.wait_mount("/fallback.mp3");
    let source = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    srv.wait_mount("/live.mp3");
    let mut l = Listener::open(srv.addr, "/live.mp3", false);
    assert!(!l.read_for(Duration::from_millis(500)).is_empty());
    source.stop();
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/fallback.mp3") == 1
    })
    .expect("listener moved to the fallback");
    let _back = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    srv.wait_mount("/live.mp3");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(listeners_on(&srv, "/fallback.mp3"), 1);
    assert_eq!(listeners_on(&srv, "/live.mp3"), 0);
    let more = l.read_for(Duration::from_millis(1500));
    assert!(more.len() > 4000, "still playing the fallback");
}

#[test]
fn a_listener_of_a_mount_that_is_down_gets_its_fallback_then_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&fallback_config(dir.path(), "fallback-override = true"));
    srv.wait_mount("/fallback.mp3");
    let mut l = Listener::open(srv.addr, "/live.mp3", false);
    assert_eq!(l.head.status, 200);
    assert_eq!(listeners_on(&srv, "/fallback.mp3"), 1);
    let first = l.read_for(Duration::from_millis(300));
    assert!(mp3_chain(&first).0, "starts on a frame");
    let _source = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    wait_until(Duration::from_secs(5), || {
        listeners_on(&srv, "/live.mp3") == 1
    })
    .expect("listener brought to the live mount");
    assert_eq!(listeners_on(&srv, "/fallback.mp3"), 0);
    // A mount with no source and no fallback is still a 404.
    let (head, _) = http_get(srv.addr, "/other.mp3", &[]);
    assert_eq!(head.status, 404);
}

#[test]
fn a_full_mount_sends_new_listeners_to_its_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&fallback_config(
        dir.path(),
        "max-listeners = 1\nfallback-when-full = true",
    ));
    srv.wait_mount("/fallback.mp3");
    let _source = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    srv.wait_mount("/live.mp3");
    let _a = Listener::open(srv.addr, "/live.mp3", false);
    let b = Listener::open(srv.addr, "/live.mp3", false);
    assert_eq!(b.head.status, 200);
    assert_eq!(listeners_on(&srv, "/live.mp3"), 1);
    assert_eq!(listeners_on(&srv, "/fallback.mp3"), 1);
}

#[test]
fn a_full_mount_without_fallback_when_full_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&fallback_config(dir.path(), "max-listeners = 1"));
    let _source = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    srv.wait_mount("/live.mp3");
    let _a = Listener::open(srv.addr, "/live.mp3", false);
    let (head, body) = http_get(srv.addr, "/live.mp3", &[]);
    assert_eq!(head.status, 403);
    assert!(String::from_utf8_lossy(&body).contains("max listeners"));
}

#[test]
fn a_webroot_file_fallback_plays_when_the_source_stops() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(asset("demo.mp3"), dir.path().join("silence.mp3")).unwrap();
    let srv = TestServer::start(&format!(
        "[paths]\nwebroot = {:?}\n[[mount]]\nname = \"/live.mp3\"\nfallback-mount = \"/silence.mp3\"\n",
        dir.path()
    ));
    srv.wait_mount("/silence.mp3");
    // Fallback files are not listed publicly, as Icecast's fallback file is not a mount.
    assert!(srv.mount_status("/silence.mp3").is_none());
    let source = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    srv.wait_mount("/live.mp3");
    let mut l = Listener::open(srv.addr, "/live.mp3", false);
    l.read_for(Duration::from_millis(300));
    source.stop();
    // The listener keeps receiving audio, now from the file, in real time.
    std::thread::sleep(Duration::from_millis(1500));
    let after = l.read_for(Duration::from_secs(3));
    assert!(
        after.len() > 12_000,
        "got {} bytes from the file",
        after.len()
    );
}

#[test]
fn an_ogg_mount_never_falls_back_to_mp3() {
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&fallback_config(dir.path(), ""));
    srv.wait_mount("/fallback.mp3");
    let ctx = srv.ctx.clone();
    // An MP3 fallback for an Ogg mount is refused: formats must match, as Icecast moves
    // clients only between mounts of one format.
    let m = ctx.registry.get("/fallback.mp3").unwrap();
    assert_eq!(m.settings.format, Format::Mp3);
    assert!(ctx
        .registry
        .follow_fallbacks("/live.mp3", Some(Format::Ogg))
        .is_none());
    assert!(ctx
        .registry
        .follow_fallbacks("/live.mp3", Some(Format::Mp3))
        .is_some());
}

#[test]
fn max_listener_duration_disconnects() {
    let srv = TestServer::start("[[mount]]\nname = \"/live.mp3\"\nmax-listener-duration = 2\n");
    let _source = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    srv.wait_mount("/live.mp3");
    let mut l = Listener::open(srv.addr, "/live.mp3", false);
    let t = Instant::now();
    let got = l.read_for(Duration::from_secs(6));
    let took = t.elapsed();
    assert!(!got.is_empty());
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_millis(5500),
        "closed after {took:?}"
    );
}

/// The first `n` frames of the demo as a file.
fn intro_file(dir: &std::path::Path, n: usize) -> (std::path::PathBuf, Vec<u8>) {
    let data = std::fs::read(asset("demo.mp3")).unwrap();
    let mut f = Framer::new(Format::Mp3);
    f.push(&data);
    let mut intro = Vec::new();
    for _ in 0..n {
        intro.extend_from_slice(&f.next_unit().unwrap().unwrap().data);
    }
    let path = dir.join("intro.mp3");
    std::fs::write(&path, &intro).unwrap();
    (path, intro)
}

#[test]
fn the_intro_plays_before_the_stream_and_counts_in_the_icy_interval() {
    let dir = tempfile::tempdir().unwrap();
    // About 25 KB: longer than one 16000-byte metadata interval.
    let (path, intro) = intro_file(dir.path(), 120);
    assert!(intro.len() > 16_000);
    let srv = TestServer::start(&format!(
        "[[mount]]\nname = \"/live.mp3\"\nintro = {path:?}\nhttp-headers = [{{ name = \"X-Mount\", value = \"live\" }}]\n\
         [[http-headers]]\nname = \"X-Station\"\nvalue = \"Throng FM\"\n"
    ));
    let _source = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    srv.wait_mount("/live.mp3");
    srv.ctx.registry.get("/live.mp3").unwrap().set_title(
        "Intro test",
        None,
        throng_server::ledger::TitleSetter::Admin,
    );
    // Without ICY: the intro bytes come first, then the stream, on a frame boundary.
    let mut plain = Listener::open(srv.addr, "/live.mp3", false);
    assert_eq!(plain.head.header("X-Station"), Some("Throng FM"));
    assert_eq!(plain.head.header("X-Mount"), Some("live"));
    let body = plain.read_for(Duration::from_millis(800));
    assert!(body.len() > intro.len());
    assert_eq!(&body[..intro.len()], &intro[..]);
    assert!(
        mp3_chain(&body[intro.len()..]).0,
        "stream starts on a frame"
    );
    // With ICY: blocks every 16000 bytes through the intro and on into the stream.
    let mut icy = Listener::open(srv.addr, "/live.mp3", true);
    assert_eq!(icy.head.header("icy-metaint"), Some("16000"));
    let body = icy.read_for(Duration::from_millis(800));
    let mut demux = IcyDemuxer::new(16000);
    let mut audio = Vec::new();
    let mut titles = Vec::new();
    demux
        .feed(&body, |piece| match piece {
            IcyPiece::Audio(a) => audio.extend_from_slice(a),
            IcyPiece::Metadata(m) if !m.is_empty() => {
                titles.push(String::from_utf8_lossy(&m).into_owned())
            }
            IcyPiece::Metadata(_) => {}
        })
        .expect("valid ICY stream");
    assert_eq!(&audio[..intro.len()], &intro[..]);
    assert!(
        titles.first().is_some_and(|t| t.contains("Intro test")),
        "first block carries the title: {titles:?}"
    );
}

#[test]
fn an_ogg_opus_listener_moves_to_an_ogg_fallback_with_new_header_pages() {
    require("ffmpeg");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fallback.opus");
    std::fs::copy(asset("test-tone.opus"), &file).unwrap();
    let srv = TestServer::start(&format!(
        "[[mount]]\nname = \"/fallback.opus\"\nfile = {file:?}\n\
         [[mount]]\nname = \"/live.opus\"\nfallback-mount = \"/fallback.opus\"\n"
    ));
    srv.wait_mount("/fallback.opus");
    let mut source = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i"])
        .arg(asset("test-tone.opus"))
        .args(["-c", "copy", "-content_type", "audio/ogg", "-f", "ogg"])
        .arg(format!(
            "icecast://source:{SOURCE_PW}@{}/live.opus",
            srv.addr
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ffmpeg");
    srv.wait_mount("/live.opus");
    // ffmpeg's Ogg muxer sends pages about once a second: let a few arrive.
    std::thread::sleep(Duration::from_secs(3));
    let mut l = Listener::open(srv.addr, "/live.opus", false);
    let before = l.read_for(Duration::from_secs(2));
    assert_eq!(
        before.windows(8).filter(|w| w == b"OpusHead").count(),
        1,
        "{} bytes: {:?}",
        before.len(),
        String::from_utf8_lossy(&before[..before.len().min(200)])
    );
    let _ = source.kill();
    let _ = source.wait();
    let after = l.read_for(Duration::from_secs(3));
    // The fallback stream starts with its own header pages (a chained Ogg stream), on a page.
    let at = after
        .windows(8)
        .position(|w| w == b"OpusHead")
        .expect("the fallback's OpusHead");
    assert_eq!(&after[at - 28..at - 24], b"OggS", "OpusHead opens a page");
    assert!(after.len() - at > 4000, "fallback audio follows");
    assert_eq!(listeners_on(&srv, "/fallback.opus"), 1);
}

#[test]
fn a_listener_moved_while_its_ogg_intro_is_still_queued_gets_it_whole() {
    // A move replaces what the listener is owed before the stream with the new mount's header
    // pages, so it must wait until the response head and intro have gone out: otherwise the
    // intro is cut inside a page and the Ogg stream is broken.
    let dir = tempfile::tempdir().unwrap();
    let tone = std::fs::read(asset("test-tone.opus")).unwrap();
    let intro = dir.path().join("intro.opus");
    // Two tones (122 kB): far more than the listener's socket buffers hold, so it is still
    // queued when the move comes, yet it drains in seconds under a loaded suite (six tones
    // did not always drain within the window).
    std::fs::write(&intro, tone.repeat(2)).unwrap();
    let srv = two_tone_mounts(dir.path(), Some(&intro));
    // A listener with a small receive buffer that does not read yet: the intro stays queued.
    let mut s = small_buffer_listener(&srv);
    let auth = admin_auth();
    wait_until(Duration::from_secs(5), || listed_on_a(&srv, &auth))
        .expect("the listener is on /a.opus");
    let (head, _) = http_get(
        srv.addr,
        "/admin/moveclients?mount=/a.opus&destination=/b.opus",
        &[&auth],
    );
    assert_eq!(head.status, 200);
    // Read everything until the listener has been on /b.opus for a while.
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut body = Vec::new();
    let mut chunk = [0u8; 65536];
    // Generous: under the full suite's load the intro's 4 KB writes come slowly (the loop ends
    // 2 s after the move anyway).
    let end = Instant::now() + Duration::from_secs(40);
    let mut moved_at = None;
    let mut checked = Instant::now();
    while Instant::now() < end
        && moved_at.is_none_or(|t: Instant| t.elapsed() < Duration::from_secs(2))
    {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
        if moved_at.is_none() && checked.elapsed() > Duration::from_millis(250) {
            checked = Instant::now();
            if listeners_on(&srv, "/b.opus") == 1 {
                moved_at = Some(Instant::now());
            }
        }
    }
    assert!(moved_at.is_some(), "the listener was never moved");
    let start = body.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut at = start;
    let mut pages = 0;
    while at < body.len() {
        match throng_proto::ogg::parse_page(&body[at..]) {
            throng_proto::ogg::PageParse::Page(p) => {
                at += p.bytes.len();
                pages += 1;
            }
            throng_proto::ogg::PageParse::Incomplete => break,
            throng_proto::ogg::PageParse::Invalid => {
                panic!("broken Ogg page at byte {} after {pages} pages", at - start)
            }
        }
    }
    assert!(
        at - start > tone.len() * 2,
        "only {} bytes of pages",
        at - start
    );
}

#[test]
fn a_listener_behind_the_live_edge_is_moved_at_the_next_page_boundary() {
    // A listener reading slower than the stream never reaches the live edge, and its writes are
    // cut wherever its small socket buffers fill: a waiting move ends its next write on a page
    // boundary (`decide::move_write_cap`) instead of waiting for one to come by chance.
    let dir = tempfile::tempdir().unwrap();
    let srv = two_tone_mounts(dir.path(), None);
    let mut s = small_buffer_listener(&srv);
    let auth = admin_auth();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut body = Vec::new();
    // About 5 kB/s against the tone's 6 kB/s: the burst it joined with keeps it behind.
    let mut paced_read = |body: &mut Vec<u8>| {
        let mut chunk = [0u8; 500];
        if let Ok(n) = s.read(&mut chunk) {
            body.extend_from_slice(&chunk[..n]);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let listed = Instant::now() + Duration::from_secs(10);
    while Instant::now() < listed {
        paced_read(&mut body);
        if listed_on_a(&srv, &auth) {
            break;
        }
    }
    // Reading on for 3 s: the listener is in the shard and stays behind the live edge.
    let behind = Instant::now() + Duration::from_secs(3);
    while Instant::now() < behind {
        paced_read(&mut body);
    }
    let (head, _) = http_get(
        srv.addr,
        "/admin/moveclients?mount=/a.opus&destination=/b.opus",
        &[&auth],
    );
    assert_eq!(head.status, 200);
    let end = Instant::now() + Duration::from_secs(20);
    let mut moved = false;
    let mut checked = Instant::now();
    while Instant::now() < end && !moved {
        paced_read(&mut body);
        if checked.elapsed() > Duration::from_millis(300) {
            checked = Instant::now();
            moved = listeners_on(&srv, "/b.opus") == 1;
        }
    }
    assert!(
        moved,
        "the listener was not moved while it stayed behind the live edge"
    );
    // Everything read is whole Ogg pages: the move happened on a boundary.
    let start = body.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut at = start;
    while at < body.len() {
        match throng_proto::ogg::parse_page(&body[at..]) {
            throng_proto::ogg::PageParse::Page(p) => at += p.bytes.len(),
            throng_proto::ogg::PageParse::Incomplete => break,
            throng_proto::ogg::PageParse::Invalid => {
                panic!("broken Ogg page at byte {}", at - start)
            }
        }
    }
}

#[test]
fn fallback_override_never_moves_listeners_to_another_format() {
    // Icecast 2.4.4 `source_move_clients` moves nobody between formats: MP3 listeners waiting on
    // an MP3 fallback stay there when the mount they asked for comes back carrying Ogg.
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&fallback_config(dir.path(), "fallback-override = true"));
    srv.wait_mount("/fallback.mp3");
    let mut l = Listener::open(srv.addr, "/live.mp3", false);
    assert_eq!(l.head.header("Content-Type"), Some("audio/mpeg"));
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    std::io::Write::write_all(
        &mut s,
        format!(
            "PUT /live.mp3 HTTP/1.1\r\nAuthorization: {}\r\nContent-Type: audio/ogg\r\n\r\n",
            throng_proto::auth::basic_authorization("source", SOURCE_PW)
        )
        .as_bytes(),
    )
    .unwrap();
    let mut reply = [0u8; 19];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"HTTP/1.0 200 OK\r\n\r\n");
    std::io::Write::write_all(&mut s, &std::fs::read(asset("test-tone.opus")).unwrap()).unwrap();
    srv.wait_mount("/live.mp3");
    let live = srv.ctx.registry.get("/live.mp3").unwrap();
    assert_eq!(live.settings.format, Format::Ogg);
    wait_until(Duration::from_secs(5), || live.queue.load().head > 0).unwrap();
    let body = l.read_for(Duration::from_secs(3));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rows = rt.block_on(srv.ctx.fanout.list(None, throng_server::Page::FIRST));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].mount, "/fallback.mp3", "moved to an Ogg stream");
    assert!(
        !body.windows(4).any(|w| w == b"OggS"),
        "Ogg pages sent to an MP3 player"
    );
}

#[test]
fn fallback_when_full_walks_the_chain_past_full_mounts() {
    let dir = tempfile::tempdir().unwrap();
    let mid = dir.path().join("mid.mp3");
    std::fs::copy(asset("demo.mp3"), &mid).unwrap();
    let srv = TestServer::start(&format!(
        "[[mount]]\nname = \"/mid.mp3\"\nfile = {mid:?}\nmax-listeners = 1\nfallback-mount = \"/fallback.mp3\"\n{}",
        fallback_config(
            dir.path(),
            "max-listeners = 1\nfallback-when-full = true"
        )
        .replace("fallback-mount = \"/fallback.mp3\"\nmax", "fallback-mount = \"/mid.mp3\"\nmax")
    ));
    srv.wait_mount("/fallback.mp3");
    srv.wait_mount("/mid.mp3");
    let _source = Source::start(srv.addr, "/live.mp3", "SOURCE", 1.0);
    srv.wait_mount("/live.mp3");
    let _a = Listener::open(srv.addr, "/live.mp3", false);
    let _b = Listener::open(srv.addr, "/live.mp3", false);
    let c = Listener::open(srv.addr, "/live.mp3", false);
    assert_eq!(c.head.status, 200);
    assert_eq!(listeners_on(&srv, "/live.mp3"), 1);
    assert_eq!(listeners_on(&srv, "/mid.mp3"), 1);
    assert_eq!(listeners_on(&srv, "/fallback.mp3"), 1);
}
