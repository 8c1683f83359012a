//! ICY metadata: `/admin/metadata` updates reach ICY listeners as a block at the metaint offset,
//! once per change; the call needs admin or that mount's source credentials.

use std::time::Duration;

use throng_proto::auth::basic_authorization;
use throng_proto::icy::{stream_title, IcyDemuxer, IcyPiece};

use crate::support::*;

fn update(srv: &TestServer, auth: Option<(&str, &str)>, query: &str) -> (u16, String) {
    let auth = auth
        .map(|(u, p)| format!("Authorization: {}", basic_authorization(u, p)))
        .unwrap_or_default();
    let headers: Vec<&str> = if auth.is_empty() {
        vec![]
    } else {
        vec![auth.as_str()]
    };
    let (head, body) = http_get(srv.addr, &format!("/admin/metadata?{query}"), &headers);
    (head.status, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn admin_update_reaches_icy_listeners_once_per_change() {
    let srv = TestServer::start("[limits]\nmetaint = 4000");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 8.0);
    srv.wait_mount("/live.mp3");
    let mut l = Listener::open(srv.addr, "/live.mp3", true);
    assert_eq!(l.head.header("icy-metaint"), Some("4000"));
    let mut body = l.read_for(Duration::from_millis(1500));
    let (status, xml) = update(
        &srv,
        Some(("admin", ADMIN_PW)),
        "mount=/live.mp3&mode=updinfo&song=New%20Song",
    );
    assert_eq!(status, 200);
    assert!(xml.contains("<message>Metadata update successful</message><return>1</return>"));
    body.extend(l.read_for(Duration::from_millis(2500)));
    let mut titles = Vec::new();
    let mut audio = Vec::new();
    IcyDemuxer::new(4000)
        .feed(&body, |p| match p {
            IcyPiece::Audio(a) => audio.extend_from_slice(a),
            IcyPiece::Metadata(m) => titles.push(stream_title(&m)),
        })
        .unwrap();
    // First block: the title before any update (empty), then zeros, then the new one, once.
    assert_eq!(titles[0].as_deref(), Some(""));
    let changes: Vec<&String> = titles.iter().flatten().filter(|t| !t.is_empty()).collect();
    assert_eq!(changes, ["New Song"], "titles seen: {titles:?}");
    let (starts, frames) = mp3_chain(&audio);
    assert!(
        starts && frames > 50,
        "audio between blocks must be clean MP3"
    );
}

#[test]
fn metadata_needs_admin_or_the_mounts_source_credentials() {
    let srv = TestServer::start("");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let q = "mount=/live.mp3&mode=updinfo&artist=A&title=B";
    assert_eq!(update(&srv, None, q).0, 401);
    assert_eq!(update(&srv, Some(("admin", "wrong")), q).0, 401);
    assert_eq!(update(&srv, Some(("source", SOURCE_PW)), q).0, 200);
    assert_eq!(srv.mount_status("/live.mp3").unwrap()["title"], "A - B");
    let (status, xml) = update(
        &srv,
        Some(("admin", ADMIN_PW)),
        "mount=/none.mp3&mode=updinfo&song=x",
    );
    assert_eq!(status, 400);
    assert!(xml.contains("Source does not exist"));
}

#[test]
fn latin1_titles_from_legacy_encoders_are_kept() {
    let srv = TestServer::start("");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let admin = Some(("admin", ADMIN_PW));
    let (status, _) = update(
        &srv,
        admin,
        "mount=/live.mp3&mode=updinfo&song=Caf%E9+Ol%E9",
    );
    assert_eq!(status, 200);
    assert_eq!(
        srv.mount_status("/live.mp3").unwrap()["title"],
        "Café Olé",
        "Latin-1"
    );
    update(&srv, admin, "mount=/live.mp3&mode=updinfo&song=Caf%C3%A9");
    assert_eq!(
        srv.mount_status("/live.mp3").unwrap()["title"],
        "Café",
        "UTF-8"
    );
}

#[test]
fn source_credentials_update_metadata_only_from_the_source_address() {
    use std::io::{Read, Write};
    let srv = TestServer::start("");
    // The source connects from 127.0.0.2; metadata calls below come from 127.0.0.1.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(
        &"127.0.0.2:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    sock.connect(&srv.addr.into()).unwrap();
    let mut s: std::net::TcpStream = sock.into();
    write!(
        s,
        "PUT /live.mp3 HTTP/1.1\r\nAuthorization: {}\r\nContent-Type: audio/mpeg\r\n\r\n",
        basic_authorization("source", SOURCE_PW)
    )
    .unwrap();
    let mut reply = [0u8; 19];
    s.read_exact(&mut reply).unwrap();
    srv.wait_mount("/live.mp3");
    let q = "mount=/live.mp3&mode=updinfo&song=x";
    assert_eq!(
        update(&srv, Some(("source", SOURCE_PW)), q).0,
        401,
        "other address"
    );
    assert_eq!(update(&srv, Some(("admin", ADMIN_PW)), q).0, 200);
}
