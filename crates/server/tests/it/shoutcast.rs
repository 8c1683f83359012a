//! SHOUTcast v1 sources on the port after the HTTP port (`shoutcast-mount`): the password line,
//! `OK2`, `icy-*` headers, a wrong password, the Icecast-KH `/mount:password` form, libshout's
//! `shout --proto icy` (poke, then a one-write login), and `/admin.cgi?mode=updinfo` metadata
//! updates on either port.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use throng_proto::auth::basic_authorization;
use throng_proto::icy::{stream_title, IcyDemuxer, IcyPiece};

use crate::support::*;

const OK2: &[u8] = b"OK2\r\nicy-caps:11\r\n\r\n";

/// The SHOUTcast source address of `srv` (HTTP port + 1).
fn sc_addr(srv: &TestServer) -> SocketAddr {
    SocketAddr::new(srv.addr.ip(), srv.addr.port() + 1)
}

/// A SHOUTcast v1 source: logs in with `login` (the password line and header block, sent as
/// given), expects `OK2`, then pushes the demo MP3 at real time on a thread.
fn icy_source(addr: SocketAddr, login: &[u8], headers: &[u8]) -> Source {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(login).unwrap();
    let mut reply = [0u8; 20];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, OK2);
    s.write_all(headers).unwrap();
    Source::stream_on(s, 1.0)
}

/// Reads an ICY listener (metaint `metaint`) until a block carries `want` or `within` passes;
/// returns every title seen and the audio bytes.
fn titles_until(l: &mut Listener, metaint: usize, want: &str, within: Duration) -> Vec<String> {
    let end = Instant::now() + within;
    let mut demux = IcyDemuxer::new(metaint);
    let mut titles = Vec::new();
    while Instant::now() < end && !titles.iter().any(|t| t == want) {
        let bytes = l.read_for(Duration::from_millis(250));
        demux
            .feed(&bytes, |p| {
                if let IcyPiece::Metadata(m) = p {
                    if let Some(t) = stream_title(&m) {
                        titles.push(t);
                    }
                }
            })
            .unwrap();
    }
    titles
}

fn get(addr: SocketAddr, target: &str, headers: &[&str]) -> (u16, String) {
    let (head, body) = http_get(addr, target, headers);
    (head.status, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn ok2_login_feeds_the_shoutcast_mount_with_icy_headers() {
    let srv = TestServer::start("shoutcast-mount = \"/sc.mp3\"");
    let _src = icy_source(
        sc_addr(&srv),
        format!("{SOURCE_PW}\r\n").as_bytes(),
        b"icy-name:SC Test\r\nicy-genre:Rock\r\nicy-br:64\r\nicy-pub:1\r\ncontent-type:audio/mpeg\r\n\r\n",
    );
    srv.wait_mount("/sc.mp3");
    let status = srv.mount_status("/sc.mp3").unwrap();
    assert_eq!(status["name"], "SC Test", "{status}");
    let mut l = Listener::open(srv.addr, "/sc.mp3", false);
    assert_eq!(l.head.header("Content-Type"), Some("audio/mpeg"));
    assert_eq!(l.head.header("icy-name"), Some("SC Test"));
    assert_eq!(l.head.header("icy-genre"), Some("Rock"));
    let (starts, frames) = mp3_chain(&l.read_for(Duration::from_millis(1500)));
    assert!(
        starts && frames > 20,
        "listener gets clean MP3 ({frames} frames)"
    );
}

#[test]
fn wrong_password_and_poke_get_invalid_password_and_a_close() {
    let srv = TestServer::start("shoutcast-mount = \"/sc.mp3\"");
    for login in [
        &b"wrong\r\nicy-name:x\r\n\r\n"[..],
        b"!POKE\nicy-name:libshout server poke request\n\n",
    ] {
        let out = exchange(sc_addr(&srv), login);
        assert_eq!(out, b"invalid password\r\n");
    }
    // An empty password never matches, even if a mount had none configured.
    assert_eq!(exchange(sc_addr(&srv), b"\r\n"), b"invalid password\r\n");
    assert!(srv.ctx.registry.get("/sc.mp3").is_none());
    // A password line that never ends is cut at the head size limit, not buffered forever.
    let out = exchange(sc_addr(&srv), &[b'x'; 8192]);
    assert!(out.is_empty());
}

#[test]
fn mount_named_in_the_password_line_and_login_in_one_write() {
    let srv = TestServer::start(
        "shoutcast-mount = \"/sc.mp3\"\n[[mount]]\nname = \"/dj.mp3\"\npassword = \"dj-pw\"",
    );
    // libshout style: password line, headers and the first audio in a single write, `\n` ends.
    let mut first = b"/dj.mp3:dj-pw\nicy-name:DJ\nicy-br:64\n\n".to_vec();
    first.extend(demo_frames().iter().take(20).flat_map(|f| f.data.to_vec()));
    let mut s = TcpStream::connect(sc_addr(&srv)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&first).unwrap();
    let mut reply = [0u8; 20];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, OK2);
    srv.wait_mount("/dj.mp3");
    assert_eq!(srv.mount_status("/dj.mp3").unwrap()["name"], "DJ");
    assert!(srv.ctx.registry.get("/sc.mp3").is_none());
    // The global source password is not the mount's.
    assert_eq!(
        exchange(sc_addr(&srv), format!("/dj.mp3:{SOURCE_PW}\n\n").as_bytes()),
        b"invalid password\r\n"
    );
    // A second source for a live mount is answered OK2 (as Icecast 2.4.4) but then closed.
    let mut again = TcpStream::connect(sc_addr(&srv)).unwrap();
    again
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    again
        .write_all(b"/dj.mp3:dj-pw\nicy-name:Other\n\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = again.read_to_end(&mut out);
    assert_eq!(out, OK2);
    assert_eq!(srv.mount_status("/dj.mp3").unwrap()["name"], "DJ");
}

#[test]
fn admin_cgi_updates_the_title_with_pass_or_credentials() {
    let srv = TestServer::start("shoutcast-mount = \"/sc.mp3\"\n[limits]\nmetaint = 4000");
    let _src = icy_source(
        sc_addr(&srv),
        format!("{SOURCE_PW}\n").as_bytes(),
        b"icy-name:SC\n\n",
    );
    srv.wait_mount("/sc.mp3");
    let mut l = Listener::open(srv.addr, "/sc.mp3", true);
    assert_eq!(l.head.header("icy-metaint"), Some("4000"));

    let (status, body) = get(
        srv.addr,
        &format!("/admin.cgi?mode=updinfo&pass={SOURCE_PW}&song=Caf%E9%20Song"),
        &["User-Agent: SAM (Mozilla compatible)"],
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Metadata update successful"), "{body}");
    assert_eq!(
        srv.ctx.registry.get("/sc.mp3").unwrap().title(),
        "Café Song"
    );
    let titles = titles_until(&mut l, 4000, "Café Song", Duration::from_secs(8));
    assert!(titles.iter().any(|t| t == "Café Song"), "{titles:?}");

    // Basic auth (admin) and an explicit mount= work; errors as Icecast 2.4.4.
    let admin = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (status, _) = get(
        srv.addr,
        "/admin.cgi?mode=updinfo&mount=/sc.mp3&song=By%20Admin",
        &[&admin],
    );
    assert_eq!(status, 200);
    assert_eq!(srv.ctx.registry.get("/sc.mp3").unwrap().title(), "By Admin");
    // libshout in ICY mode sends artist and title, no song.
    let (status, _) = get(
        srv.addr,
        &format!("/admin.cgi?mode=updinfo&pass={SOURCE_PW}&charset=UTF%2d8&artist=A&title=T"),
        &[],
    );
    assert_eq!(status, 200);
    assert_eq!(srv.ctx.registry.get("/sc.mp3").unwrap().title(), "A - T");
    let cases = [
        (
            "/admin.cgi?mode=updinfo&song=x",
            400,
            "missing pass parameter",
        ),
        (
            "/admin.cgi?mode=updinfo&pass=nope&song=x",
            401,
            "authenticate",
        ),
        (
            &*format!("/admin.cgi?mode=updinfo&pass={SOURCE_PW}&mount=/none.mp3&song=x"),
            400,
            "Source does not exist",
        ),
        (
            &*format!("/admin.cgi?mode=bogus&pass={SOURCE_PW}&song=x"),
            400,
            "No such action",
        ),
        (
            &*format!("/admin.cgi?mode=updinfo&pass={SOURCE_PW}"),
            400,
            "Missing parameter",
        ),
    ];
    for (target, want, text) in cases {
        let (status, body) = get(srv.addr, target, &[]);
        assert_eq!(
            (status, body.contains(text)),
            (want, true),
            "{target}: {body}"
        );
    }
    assert_eq!(srv.ctx.registry.get("/sc.mp3").unwrap().title(), "A - T");
}

#[test]
fn admin_cgi_is_also_served_on_the_shoutcast_port() {
    let srv = TestServer::start("shoutcast-mount = \"/sc.mp3\"");
    let _src = icy_source(
        sc_addr(&srv),
        format!("{SOURCE_PW}\r\n").as_bytes(),
        b"\r\n",
    );
    srv.wait_mount("/sc.mp3");
    let (status, body) = get(
        sc_addr(&srv),
        &format!("/admin.cgi?mode=updinfo&pass={SOURCE_PW}&song=On%20Port%2B1"),
        &[],
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        srv.ctx.registry.get("/sc.mp3").unwrap().title(),
        "On Port+1"
    );
}

#[test]
fn libshout_icy_protocol_pokes_then_streams() {
    require("shout");
    let srv = TestServer::start("shoutcast-mount = \"/shout-icy.mp3\"");
    let mp3 = std::fs::read(asset("demo.mp3")).unwrap();
    let mut child = Command::new("shout")
        // libshout-tools wants the usage before the format, and the format before ICY.
        .args(["--usage", "audio", "--format", "mp3", "--proto", "icy"])
        .args(["--host", "127.0.0.1"])
        .args([
            "--port",
            &srv.addr.port().to_string(),
            "--mount",
            "/ignored",
        ])
        .args(["--pass", SOURCE_PW, "--station-name", "Shout ICY"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shout");
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for _ in 0..2 {
            if stdin.write_all(&mp3).is_err() {
                break;
            }
        }
    });
    let _proc = Proc(child);
    srv.wait_mount("/shout-icy.mp3");
    assert_eq!(
        srv.mount_status("/shout-icy.mp3").unwrap()["name"],
        "Shout ICY"
    );
    let mut l = Listener::open(srv.addr, "/shout-icy.mp3", false);
    let (starts, frames) = mp3_chain(&l.read_for(Duration::from_millis(1500)));
    assert!(
        starts && frames > 20,
        "listener gets clean MP3 ({frames} frames)"
    );
    drop(l);
    drop(_proc);
    let _ = feeder.join();
}

#[test]
fn latin1_title_on_an_iso8859_1_mount_reaches_listeners_and_status_json_as_utf8() {
    let srv = TestServer::start(
        "shoutcast-mount = \"/sc.mp3\"\n[[mount]]\nname = \"/sc.mp3\"\ncharset = \"ISO8859-1\"\n\
         [limits]\nmetaint = 4000",
    );
    let _src = icy_source(
        sc_addr(&srv),
        format!("{SOURCE_PW}\r\n").as_bytes(),
        b"icy-name:SC\r\n\r\n",
    );
    srv.wait_mount("/sc.mp3");
    let mut l = Listener::open(srv.addr, "/sc.mp3", true);
    // "Bjørk - Café Señor" in ISO-8859-1, as a SHOUTcast v1 encoder sends it.
    let (status, body) = get(
        srv.addr,
        &format!("/admin.cgi?mode=updinfo&pass={SOURCE_PW}&song=Bj%F8rk%20-%20Caf%E9%20Se%F1or"),
        &[],
    );
    assert_eq!(status, 200, "{body}");
    let want = "Bjørk - Café Señor";
    let titles = titles_until(&mut l, 4000, want, Duration::from_secs(8));
    assert!(titles.iter().any(|t| t == want), "{titles:?}");
    let (head, body) = http_get(srv.addr, "/status-json.xsl", &[]);
    assert_eq!(head.status, 200);
    let text = std::str::from_utf8(&body).expect("status-json.xsl is UTF-8");
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(v["icestats"]["source"]["title"], want, "{v}");
}
