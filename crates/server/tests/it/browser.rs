//! Browser listeners and status documents (issue 13, items 4 and 5): one
//! `Access-Control-Allow-Origin` whatever an imported icecast.xml adds, CORS preflight and
//! exposed `icy-*` headers, Safari's `Range: bytes=0-1` probe, `.m3u`/`.xspf` playlists as
//! Icecast 2.4.4 serves them, and status documents that agree with each other (bitrate,
//! Ogg `artist` and `subtype`, the source's `user_agent`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use throng_proto::auth::basic_authorization;
use throng_proto::http::{parse_response_head, ResponseHead};

use crate::support::*;

fn count(head: &ResponseHead, name: &str) -> usize {
    head.headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .count()
}

/// A server from an imported icecast.xml whose `<http-headers>` set
/// `Access-Control-Allow-Origin` (as Debian's stock file does), globally and on a mount.
fn icecast_xml_server() -> TestServer {
    let xml = format!(
        r#"<icecast>
  <hostname>localhost</hostname>
  <authentication>
    <source-password>{SOURCE_PW}</source-password>
    <admin-user>admin</admin-user>
    <admin-password>{ADMIN_PW}</admin-password>
  </authentication>
  <listen-socket><port>0</port><bind-address>127.0.0.1</bind-address></listen-socket>
  <http-headers>
    <header name="Access-Control-Allow-Origin" value="*" />
    <header name="X-Station" value="test" />
  </http-headers>
  <mount type="normal">
    <mount-name>/other.mp3</mount-name>
    <http-headers>
      <header name="access-control-allow-origin" value="https://player.example" />
    </http-headers>
  </mount>
</icecast>"#
    );
    let dir = std::env::temp_dir();
    let mut config = throng_server::config::icecast_xml::parse(&xml, &dir)
        .expect("icecast.xml imports")
        .config;
    config.logging.access_log = String::new();
    TestServer::start_config(config)
}

#[test]
fn imported_http_headers_leave_one_allow_origin() {
    let srv = icecast_xml_server();
    let _a = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    let _b = Source::start(srv.addr, "/other.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    srv.wait_mount("/other.mp3");
    for icy in [false, true] {
        let l = Listener::open(srv.addr, "/live.mp3", icy);
        assert_eq!(count(&l.head, "Access-Control-Allow-Origin"), 1, "{icy}");
        assert_eq!(l.head.header("Access-Control-Allow-Origin"), Some("*"));
        assert_eq!(
            l.head.header("X-Station"),
            Some("test"),
            "others still sent"
        );
    }
    let out = exchange(srv.addr, b"HEAD /live.mp3 HTTP/1.1\r\nHost: x\r\n\r\n");
    let (head, _) = parse_response_head(&out).unwrap().unwrap();
    assert_eq!(count(&head, "Access-Control-Allow-Origin"), 1);
    // The mount's own value replaces the global one and the built-in one.
    let l = Listener::open(srv.addr, "/other.mp3", true);
    assert_eq!(count(&l.head, "Access-Control-Allow-Origin"), 1);
    assert_eq!(
        l.head.header("Access-Control-Allow-Origin"),
        Some("https://player.example")
    );
    for (name, _) in &l.head.headers {
        assert_eq!(count(&l.head, name), 1, "{name} written twice");
    }
}

#[test]
fn preflight_allows_icy_metadata_and_replies_expose_every_icy_header() {
    let srv = TestServer::start("");
    let _src = Source::start_with(
        srv.addr,
        "/live.mp3",
        "PUT",
        1.0,
        &[
            "ice-genre: Jazz",
            "ice-url: http://radio.example",
            "ice-description: Live",
            "ice-public: 1",
            "ice-audio-info: ice-samplerate=44100;ice-channels=2",
        ],
    );
    srv.wait_mount("/live.mp3");
    let out = exchange(
        srv.addr,
        b"OPTIONS /live.mp3 HTTP/1.1\r\nHost: x\r\nOrigin: http://other.example\r\nAccess-Control-Request-Method: GET\r\nAccess-Control-Request-Headers: icy-metadata\r\n\r\n",
    );
    let (head, _) = parse_response_head(&out).unwrap().unwrap();
    assert!((200..300).contains(&head.status));
    assert_eq!(count(&head, "Access-Control-Allow-Origin"), 1);
    let allowed = head
        .header("Access-Control-Allow-Headers")
        .unwrap()
        .to_ascii_lowercase();
    assert!(allowed.split(',').any(|h| h.trim() == "icy-metadata"));
    let l = Listener::open(srv.addr, "/live.mp3", true);
    let exposed: Vec<String> = l
        .head
        .header("Access-Control-Expose-Headers")
        .unwrap()
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .collect();
    let stream_headers: Vec<&str> = l
        .head
        .headers
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| {
            let k = k.to_ascii_lowercase();
            k.starts_with("icy-") || k.starts_with("ice-")
        })
        .collect();
    assert!(stream_headers.len() >= 7, "{stream_headers:?}");
    for k in stream_headers {
        assert!(
            exposed.contains(&k.to_ascii_lowercase()),
            "{k} not in Access-Control-Expose-Headers {exposed:?}"
        );
    }
}

/// Sends `req` and reads the reply until the server closes, at most 5 s or 64 KiB (a server
/// that streams instead of closing fails the caller's checks rather than hanging it).
fn raw(srv: &TestServer, req: &str) -> (ResponseHead, Vec<u8>) {
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    while out.len() < 65_536 && std::time::Instant::now() < end {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    let (head, len) = parse_response_head(&out).unwrap().unwrap();
    (head, out[len..].to_vec())
}

#[test]
fn safari_range_probe_gets_two_bytes_and_is_no_listener() {
    let srv = TestServer::start("");
    // 20× real time: a full burst is there for the follow-up listener.
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 20.0);
    srv.wait_mount("/live.mp3");
    std::thread::sleep(Duration::from_millis(1000));
    let mount = srv.ctx.registry.get("/live.mp3").unwrap();
    let connects = || srv.json("/api/v1/status")["mounts"][0]["listener_peak"].clone();
    let (head, body) = raw(
        &srv,
        "GET /live.mp3 HTTP/1.1\r\nHost: test\r\nRange: bytes=0-1\r\nIcy-MetaData: 1\r\nUser-Agent: Safari\r\n\r\n",
    );
    assert_eq!(head.status, 206);
    assert_eq!(head.header("Content-Range"), Some("bytes 0-1/*"));
    assert_eq!(head.header("Content-Type"), Some("audio/mpeg"));
    assert_eq!(
        head.header("icy-metaint"),
        None,
        "2 bytes carry no metadata"
    );
    assert_eq!(body.len(), 2, "exactly 2 bytes");
    assert_eq!(body[0], 0xFF, "the stream's bytes: an MP3 frame sync");
    assert_eq!(mount.listeners.load(Ordering::Relaxed), 0);
    assert_eq!(connects(), 0, "the probe never counted as a listener");
    // The follow-up request gets the stream with ICY metadata as usual.
    let mut l = Listener::open(srv.addr, "/live.mp3", true);
    assert_eq!(l.head.status, 200);
    assert_eq!(l.head.header("icy-metaint"), Some("16000"));
    let data = l.read_for(Duration::from_millis(800));
    assert!(data.len() > 16_001, "{} bytes", data.len());
    assert_eq!(data[0], 0xFF);
    let len = data[16_000] as usize * 16;
    if len > 0 {
        assert!(data[16_001..].starts_with(b"StreamTitle='"));
    }
    assert_eq!(mount.listeners.load(Ordering::Relaxed), 1);
    // Any other range on a live stream is served as the stream, as before.
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /live.mp3 HTTP/1.1\r\nHost: test\r\nRange: bytes=0-\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    let (head, _) = parse_response_head(&buf[..n]).unwrap().unwrap();
    assert_eq!(head.status, 200);
}

#[test]
fn m3u_and_xspf_playlists_as_icecast_serves_them() {
    let srv = TestServer::start("[[mount]]\nname = \"/secret.mp3\"\nhidden = true");
    let _a = Source::start_with(srv.addr, "/live.mp3", "PUT", 1.0, &["ice-genre: Jazz"]);
    let _b = Source::start(srv.addr, "/secret.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    srv.wait_mount("/secret.mp3");
    let (head, _) = http_get(
        srv.addr,
        "/admin/metadata?mount=/live.mp3&mode=updinfo&song=Blue%20%26%20Green",
        &[&admin_header()],
    );
    assert_eq!(head.status, 200);

    let out = exchange(
        srv.addr,
        b"GET /live.mp3.m3u HTTP/1.0\r\nHost: radio.example:8000\r\n\r\n",
    );
    let (head, len) = parse_response_head(&out).unwrap().unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("Content-Type"), Some("audio/x-mpegurl"));
    assert_eq!(&out[len..], b"http://radio.example:8000/live.mp3\r\n");
    // As Icecast 2.4.4, the m3u is built for hidden mounts too (it names only the URL).
    let (head, body) = http_get(srv.addr, "/secret.mp3.m3u", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(body, b"http://test/secret.mp3\r\n");

    let (head, body) = http_get(srv.addr, "/live.mp3.xspf", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("Content-Type"), Some("application/xspf+xml"));
    let body = String::from_utf8(body).unwrap();
    assert!(body.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<playlist xmlns=\"http://xspf.org/ns/0/\" version=\"1\">"), "{body}");
    // The location uses the Host the visitor typed, as the .m3u does (not `hostname`).
    assert!(
        body.contains("<location>http://test/live.mp3</location>"),
        "{body}"
    );
    assert!(body.contains("<title>Blue &amp; Green</title>"), "{body}");
    assert!(body.contains("Stream Title: Test Stream\n"), "{body}");
    assert!(body.contains("Stream Genre: Jazz</annotation>"), "{body}");
    assert_eq!(body.matches("<track>").count(), 1);
    // Hidden (and absent) mounts: Icecast's stats have no source, so no track.
    for path in ["/secret.mp3.xspf", "/nothing.mp3.xspf"] {
        let (head, body) = http_get(srv.addr, path, &[]);
        assert_eq!(head.status, 200, "{path}");
        let body = String::from_utf8(body).unwrap();
        assert!(
            body.contains("<trackList>") && !body.contains("<track>"),
            "{body}"
        );
        assert!(!body.contains("secret"), "{body}");
    }
    // The mount itself is still the stream.
    let l = Listener::open(srv.addr, "/live.mp3", false);
    assert_eq!(l.head.header("Content-Type"), Some("audio/mpeg"));
}

/// The `<source mount="name">` element of `/admin/stats`, as text.
fn admin_stats_source(srv: &TestServer, name: &str) -> String {
    let (head, body) = http_get(srv.addr, "/admin/stats", &[&admin_header()]);
    assert_eq!(head.status, 200);
    let xml = String::from_utf8(body).unwrap();
    let start = xml
        .find(&format!("<source mount=\"{name}\">"))
        .unwrap_or_else(|| panic!("{name} in {xml}"));
    let end = start + xml[start..].find("</source>").unwrap();
    xml[start..end].to_owned()
}

fn leaf(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let i = xml.find(&open)? + open.len();
    let j = i + xml[i..].find(&format!("</{name}>"))?;
    Some(xml[i..j].to_owned())
}

fn icecast_source(srv: &TestServer, name: &str) -> serde_json::Value {
    let s = srv.json("/status-json.xsl")["icestats"]["source"].clone();
    let all = match s {
        serde_json::Value::Array(v) => v,
        one => vec![one],
    };
    all.into_iter()
        .find(|s| s["listenurl"].as_str().is_some_and(|u| u.ends_with(name)))
        .unwrap()
}

#[test]
fn mp3_bitrate_and_user_agent_agree_across_status_documents() {
    let srv = TestServer::start("");
    // An encoder that declares no bitrate: the frames carry it.
    let mut s = TcpStream::connect(srv.addr).unwrap();
    write!(
        s,
        "PUT /live.mp3 HTTP/1.1\r\nAuthorization: {}\r\nContent-Type: audio/mpeg\r\nUser-Agent: butt 0.1.40\r\n\r\n",
        basic_authorization("source", SOURCE_PW)
    )
    .unwrap();
    let mut ok = [0u8; 19];
    s.read_exact(&mut ok).unwrap();
    let _src = Source::stream_on(s, 1.0);
    srv.wait_mount("/live.mp3");
    wait_until(Duration::from_secs(5), || {
        !srv.mount_status("/live.mp3").unwrap()["bitrate_kbps"].is_null()
    })
    .expect("frames give a bitrate");
    let v1 = srv.mount_status("/live.mp3").unwrap()["bitrate_kbps"]
        .as_u64()
        .unwrap();
    let stats = admin_stats_source(&srv, "/live.mp3");
    assert_eq!(leaf(&stats, "bitrate"), Some(v1.to_string()), "{stats}");
    assert_eq!(icecast_source(&srv, "/live.mp3")["bitrate"], v1);
    assert_eq!(
        leaf(&stats, "user_agent").as_deref(),
        Some("butt 0.1.40"),
        "{stats}"
    );
    assert_eq!(leaf(&stats, "subtype"), None, "subtype is Ogg's only");
    // status-json hides user_agent, as Icecast 2.4.4.
    assert!(icecast_source(&srv, "/live.mp3")
        .get("user_agent")
        .is_none());
}

#[test]
fn ogg_artist_and_subtype_in_every_status_document() {
    let srv = TestServer::start("");
    let opus = std::fs::read(asset("test-tone.opus")).unwrap();
    let mut s = TcpStream::connect(srv.addr).unwrap();
    write!(
        s,
        "PUT /live.opus HTTP/1.1\r\nAuthorization: {}\r\nContent-Type: audio/ogg\r\nUser-Agent: ffmpeg-test\r\n\r\n",
        basic_authorization("source", SOURCE_PW)
    )
    .unwrap();
    let mut ok = [0u8; 19];
    s.read_exact(&mut ok).unwrap();
    // Half the file: the mount stays live (the source is quiet, within source-timeout).
    s.write_all(&opus[..opus.len() / 2]).unwrap();
    srv.wait_mount("/live.opus");
    // The source's own comment header can reach the feeder after the mount is listed and
    // replace an update made before it (the last title wins, as in Icecast): update until
    // the admin's title is the one that stays.
    wait_until(Duration::from_secs(10), || {
        let (head, body) = http_get(
            srv.addr,
            "/admin/metadata?mount=/live.opus&mode=updinfo&artist=The%20Band&title=The%20Song",
            &[&admin_header()],
        );
        assert_eq!(head.status, 200, "{}", String::from_utf8_lossy(&body));
        std::thread::sleep(Duration::from_millis(200));
        srv.mount_status("/live.opus").unwrap()["artist"] == "The Band"
    })
    .expect("artist set");
    let stats = admin_stats_source(&srv, "/live.opus");
    assert_eq!(
        leaf(&stats, "artist").as_deref(),
        Some("The Band"),
        "{stats}"
    );
    assert_eq!(leaf(&stats, "subtype").as_deref(), Some("Opus"), "{stats}");
    assert_eq!(
        leaf(&stats, "user_agent").as_deref(),
        Some("ffmpeg-test"),
        "{stats}"
    );
    let js = icecast_source(&srv, "/live.opus");
    assert_eq!(js["artist"], "The Band");
    assert_eq!(js["subtype"], "Opus");
    assert_eq!(srv.mount_status("/live.opus").unwrap()["subtype"], "Opus");
    drop(s);
}
