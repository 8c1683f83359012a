//! The admin interface over real sockets: every Icecast 2.4.4 `/admin/*` command with and
//! without credentials (admin, the mount's source credentials, relay), checked on the real
//! effect (listeners disconnected, moved between live mounts, sources ended, fallbacks used),
//! and the admin JSON API under `/api/v1/`.
//!
//! Sources here push the demo MP3's frames with every byte after each 4-byte frame header set
//! to a per-source marker, so a listener can tell from the bytes it receives which mount they
//! come from.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};
use throng_proto::auth::basic_authorization;
use throng_proto::http::{parse_response_head, ResponseHead};
use throng_server::Config;

use crate::support::*;

const REALM: &str = "Basic realm=\"Icecast2 Server\"";
const RELAY_PW: &str = "test-relay-pw";
pub(crate) const ADMIN: (&str, &str) = ("admin", ADMIN_PW);

/// A test server whose config also sets a relay password and writes to listeners every 100 ms,
/// with `extra` TOML.
pub(crate) fn server(extra: &str) -> TestServer {
    // These tests send wrong credentials many times from one address on purpose, so the
    // failed-login throttle is off here (it is tested in `access.rs`).
    let toml = format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = 2\n[limits]\nwrite-interval-ms = 100\n{extra}\n[authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\nrelay-password = \"{RELAY_PW}\"\nmax-failed-logins = 0\n[logging]\naccess-log = \"\"\n"
    );
    TestServer::start_config(Config::from_toml(&toml).expect("test config"))
}

/// A reply: status, head, body as text.
pub(crate) struct Reply {
    pub(crate) head: ResponseHead,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn status(&self) -> u16 {
        self.head.status
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    pub(crate) fn xml(&self) -> Node {
        assert_eq!(
            self.header("content-type"),
            Some("text/xml; charset=utf-8"),
            "{}",
            self.body
        );
        parse_xml(&self.body)
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends `method path` with optional Basic credentials and body; reads the reply to close.
pub(crate) fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    auth: Option<(&str, &str)>,
    body: &str,
) -> Reply {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    if let Some((u, p)) = auth {
        req.push_str(&format!("Authorization: {}\r\n", basic_authorization(u, p)));
    }
    if !body.is_empty() {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let out = exchange(addr, req.as_bytes());
    let (head, len) = parse_response_head(&out)
        .unwrap()
        .unwrap_or_else(|| panic!("no reply to {method} {path}"));
    let body = if head
        .header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        dechunk(&out[len..])
    } else {
        out[len..].to_vec()
    };
    Reply {
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

pub(crate) fn get(srv: &TestServer, path: &str, auth: Option<(&str, &str)>) -> Reply {
    call(srv.addr, "GET", path, auth, "")
}

/// An XML element as parsed by quick-xml.
#[derive(Debug, Default, Clone)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) attrs: Vec<(String, String)>,
    pub(crate) text: String,
    pub(crate) children: Vec<Node>,
}

impl Node {
    pub(crate) fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    pub(crate) fn all(&self, name: &str) -> Vec<&Node> {
        self.children.iter().filter(|c| c.name == name).collect()
    }

    pub(crate) fn text_of(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.as_str())
    }

    pub(crate) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `<source mount="…">` child for `mount`.
    pub(crate) fn source(&self, mount: &str) -> Option<&Node> {
        self.all("source")
            .into_iter()
            .find(|s| s.attr("mount") == Some(mount))
    }
}

fn node_of(e: &BytesStart) -> Node {
    Node {
        name: e.name().as_ref().to_owned(),
        attrs: e
            .attributes()
            .map(|a| {
                let a = a.unwrap();
                (
                    a.key.as_ref().to_owned(),
                    a.normalized_value(XmlVersion::Explicit1_0)
                        .unwrap()
                        .into_owned(),
                )
            })
            .collect(),
        ..Node::default()
    }
}

/// Parses a whole document (panics if it is not well-formed) and returns its root element.
pub(crate) fn parse_xml(doc: &str) -> Node {
    let mut r = Reader::from_str(doc);
    let mut stack = vec![Node::default()];
    loop {
        match r.read_event().unwrap_or_else(|e| panic!("{e}: {doc}")) {
            Event::Start(e) => stack.push(node_of(&e)),
            Event::Empty(e) => stack.last_mut().unwrap().children.push(node_of(&e)),
            Event::End(_) => {
                let n = stack.pop().unwrap();
                stack.last_mut().unwrap().children.push(n);
            }
            Event::Text(t) => stack.last_mut().unwrap().text += &t.xml10_content(),
            Event::GeneralRef(r) => {
                let raw = format!("&{};", &*r);
                let s = quick_xml::escape::unescape(&raw).unwrap();
                stack.last_mut().unwrap().text += &s;
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(stack.len(), 1, "unbalanced document: {doc}");
    let mut top = stack.pop().unwrap().children;
    assert_eq!(top.len(), 1, "one root element: {doc}");
    top.pop().unwrap()
}

/// `<iceresponse>`'s message and return value.
fn ice_response(r: &Reply) -> (String, String) {
    assert_eq!(r.status(), 200, "{}", r.body);
    let x = r.xml();
    assert_eq!(x.name, "iceresponse");
    (
        x.text_of("message").unwrap().to_owned(),
        x.text_of("return").unwrap().to_owned(),
    )
}

/// Icecast 2.4.4's 400 page with `message`.
pub(crate) fn assert_400(r: &Reply, message: &str) {
    assert_eq!(r.status(), 400, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        r.body,
        format!(
            "<html><head><title>Error 400</title></head><body><b>400 - {message}</b></body></html>\r\n"
        )
    );
}

/// Icecast 2.4.4's 401.
pub(crate) fn assert_401(r: &Reply, what: &str) {
    assert_eq!(r.status(), 401, "{what}: {}", r.body);
    assert_eq!(r.header("www-authenticate"), Some(REALM), "{what}");
}

/// A source client pushing the demo MP3's frames, payload bytes set to `marker`, paced at
/// `speed` × real time; records when the server ends its connection.
struct MarkedSource {
    stop: Arc<AtomicBool>,
    closed: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MarkedSource {
    fn start(addr: SocketAddr, mount: &str, marker: u8) -> MarkedSource {
        Self::start_as(addr, mount, marker, ("source", SOURCE_PW))
    }

    fn start_as(addr: SocketAddr, mount: &str, marker: u8, creds: (&str, &str)) -> MarkedSource {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "PUT {mount} HTTP/1.1\r\nAuthorization: {}\r\nContent-Type: audio/mpeg\r\nice-name: Marker {marker}\r\nUser-Agent: marked-source\r\n\r\n",
            basic_authorization(creds.0, creds.1)
        )
        .unwrap();
        let mut reply = [0u8; 19];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"HTTP/1.0 200 OK\r\n\r\n", "source on {mount}");
        let frames: Vec<(Vec<u8>, u64)> = demo_frames()
            .into_iter()
            .map(|f| {
                let mut d = f.data.to_vec();
                d[4..].fill(marker);
                (d, f.duration_us)
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(AtomicBool::new(false));
        let (stop2, closed2) = (stop.clone(), closed.clone());
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut media_us = 0u64;
            'outer: loop {
                for (data, dur) in &frames {
                    if stop2.load(Ordering::Relaxed) {
                        break 'outer;
                    }
                    if s.write_all(data).is_err() {
                        closed2.store(true, Ordering::Relaxed);
                        break 'outer;
                    }
                    media_us += dur;
                    let due = start + Duration::from_micros(media_us / 2);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                }
            }
        });
        MarkedSource {
            stop,
            closed,
            thread: Some(thread),
        }
    }

    /// Waits until the server has closed this source's connection.
    fn wait_closed(&self, within: Duration) -> bool {
        wait_until(within, || self.closed.load(Ordering::Relaxed)).is_ok()
    }
}

impl Drop for MarkedSource {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An open listener connection with a given User-Agent, past its response head.
struct Player {
    stream: TcpStream,
    pending: Vec<u8>,
}

impl Player {
    fn open(addr: SocketAddr, path: &str, agent: &str) -> Player {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.0\r\nHost: test\r\nUser-Agent: {agent}\r\n\r\n"
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = s.read(&mut chunk).expect("response head");
            assert!(n > 0, "closed before head");
            buf.extend_from_slice(&chunk[..n]);
            if let Some((head, len)) = parse_response_head(&buf).unwrap() {
                assert_eq!(head.status, 200);
                return Player {
                    stream: s,
                    pending: buf[len..].to_vec(),
                };
            }
        }
    }

    /// Reads for `d`; returns the bytes and whether the server closed the connection.
    fn read_for(&mut self, d: Duration) -> (Vec<u8>, bool) {
        let mut out = std::mem::take(&mut self.pending);
        let end = Instant::now() + d;
        let mut chunk = [0u8; 16384];
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            match self.stream.read(&mut chunk) {
                Ok(0) => return (out, true),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (out, true),
                Err(_) => break,
            }
        }
        (out, false)
    }
}

/// The marker of each MP3 frame in `data` in order, and how many bytes were not frames.
fn markers(data: &[u8]) -> (Vec<u8>, usize) {
    let mut pos = 0;
    let mut out = Vec::new();
    let mut skipped = 0;
    while pos + 4 <= data.len() {
        match throng_proto::mp3::parse_header(&data[pos..]) {
            Some(h) if pos + h.frame_len <= data.len() => {
                out.push(data[pos + h.frame_len - 1]);
                pos += h.frame_len;
            }
            Some(_) => break,
            None => {
                pos += 1;
                skipped += 1;
            }
        }
    }
    (out, skipped)
}

/// The id `listclients` shows for the listener of `mount` with User-Agent `agent`.
fn listener_id(srv: &TestServer, mount: &str, agent: &str) -> String {
    let mut id = None;
    wait_until(Duration::from_secs(5), || {
        let r = get(
            srv,
            &format!("/admin/listclients?mount={mount}"),
            Some(ADMIN),
        );
        let x = r.xml();
        id = x.source(mount).and_then(|s| {
            s.all("listener")
                .into_iter()
                .find(|l| l.text_of("UserAgent") == Some(agent))
                .and_then(|l| l.text_of("ID").map(str::to_owned))
        });
        id.is_some()
    })
    .unwrap_or_else(|_| panic!("listener {agent} never listed on {mount}"));
    id.unwrap()
}

#[test]
fn every_command_refuses_missing_or_wrong_credentials() {
    let srv = server("");
    let _a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    let _b = MarkedSource::start(srv.addr, "/b.mp3", 0xB2);
    srv.wait_mount("/a.mp3");
    srv.wait_mount("/b.mp3");
    let commands = [
        "/admin/",
        "/admin/stats",
        "/admin/stats.xml",
        "/admin/stats.xsl",
        "/admin/stats?mount=/a.mp3",
        "/admin/listmounts",
        "/admin/listmounts.xsl",
        "/admin/streamlist",
        "/admin/streamlist.txt",
        "/admin/listclients?mount=/a.mp3",
        "/admin/listclients.xsl?mount=/a.mp3",
        "/admin/killclient?mount=/a.mp3&id=1",
        "/admin/killsource?mount=/a.mp3",
        "/admin/moveclients?mount=/a.mp3&destination=/b.mp3",
        "/admin/fallbacks?mount=/a.mp3&fallback=/b.mp3",
        "/admin/metadata?mount=/a.mp3&mode=updinfo&song=x",
        "/admin/updatemetadata?mount=/a.mp3",
    ];
    for path in commands {
        let r = get(&srv, path, None);
        assert_401(&r, path);
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        assert_eq!(r.body, "You need to authenticate\r\n", "{path}");
        assert_401(&get(&srv, path, Some(("admin", "wrong"))), path);
        assert_401(&get(&srv, path, Some(("source", ADMIN_PW))), path);
    }
    // Global commands do not take source credentials; streamlist.txt takes the relay's.
    for path in ["/admin/stats", "/admin/listmounts", "/admin/streamlist"] {
        assert_401(&get(&srv, path, Some(("source", SOURCE_PW))), path);
        assert_401(&get(&srv, path, Some(("relay", RELAY_PW))), path);
    }
    // Nothing was done: the source still feeds /a.mp3 and has no fallback.
    let x = get(&srv, "/admin/listmounts", Some(ADMIN)).xml();
    assert_eq!(x.source("/a.mp3").unwrap().text_of("fallback"), Some(""));
    // An unknown command is refused before credentials are looked at, as Icecast does.
    assert_400(&get(&srv, "/admin/nope", None), "Unrecognised command");
    assert_400(
        &get(&srv, "/admin/stats.json", Some(ADMIN)),
        "Unrecognised command",
    );
}

#[test]
fn stats_and_listmounts_show_real_values_hidden_mounts_included() {
    let srv = server(
        "[[mount]]\nname = \"/hidden.mp3\"\nhidden = true\n[[mount]]\nname = \"/a.mp3\"\nmax-listeners = 5\nfallback-mount = \"/hidden.mp3\"",
    );
    let _a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    let _h = MarkedSource::start(srv.addr, "/hidden.mp3", 0xC3);
    srv.wait_mount("/a.mp3");
    srv.wait_mount("/hidden.mp3");
    let _p = Player::open(srv.addr, "/a.mp3", "stats-agent");
    listener_id(&srv, "/a.mp3", "stats-agent");

    for path in ["/admin/stats", "/admin/stats.xml"] {
        let x = get(&srv, path, Some(ADMIN)).xml();
        assert_eq!(x.name, "icestats");
        assert_eq!(
            x.text_of("server_id"),
            Some(srv.ctx.config().server_id.as_str())
        );
        assert_eq!(x.text_of("sources"), Some("2"));
        assert_eq!(x.text_of("listeners"), Some("1"));
        let a = x.source("/a.mp3").expect("/a.mp3 in stats");
        assert_eq!(a.text_of("listeners"), Some("1"));
        assert_eq!(a.text_of("listener_peak"), Some("1"));
        assert_eq!(a.text_of("max_listeners"), Some("5"));
        assert_eq!(a.text_of("server_name"), Some("Marker 161"));
        assert_eq!(a.text_of("server_type"), Some("audio/mpeg"));
        assert_eq!(a.text_of("source_ip"), Some("127.0.0.1"));
        assert_eq!(
            a.text_of("listenurl"),
            Some(format!("http://localhost:{}/a.mp3", srv.addr.port()).as_str())
        );
        let names: Vec<&str> = a.children.iter().map(|c| c.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "stats sorted by name as Icecast's tree");
        let hidden = x
            .source("/hidden.mp3")
            .expect("hidden mounts are in admin stats");
        assert_eq!(hidden.text_of("server_name"), Some("Marker 195"));
    }
    // One mount: the global stats and only that source.
    let x = get(&srv, "/admin/stats?mount=/hidden.mp3", Some(ADMIN)).xml();
    assert!(x.child("server_id").is_some());
    assert_eq!(x.all("source").len(), 1);
    assert!(x.source("/hidden.mp3").is_some());

    let x = get(&srv, "/admin/listmounts", Some(ADMIN)).xml();
    let a = x.source("/a.mp3").unwrap();
    assert_eq!(a.text_of("fallback"), Some("/hidden.mp3"));
    assert_eq!(a.text_of("listeners"), Some("1"));
    assert_eq!(a.text_of("content-type"), Some("audio/mpeg"));
    assert!(a.text_of("Connected").unwrap().parse::<u64>().is_ok());
    let h = x
        .source("/hidden.mp3")
        .expect("listmounts shows hidden mounts");
    assert_eq!(h.text_of("listeners"), Some("0"));
    // `streamlist` (XML) is listmounts.
    let s = get(&srv, "/admin/streamlist", Some(ADMIN)).xml();
    assert_eq!(s.all("source").len(), 2);

    // The `.xsl` variants render the same data as HTML.
    let r = get(&srv, "/admin/stats.xsl", Some(ADMIN));
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(
        r.body.contains("<h2>source mount=/a.mp3</h2>"),
        "{}",
        r.body
    );
    assert!(r
        .body
        .contains("<tr><th>server_name</th><td>Marker 161</td></tr>"));
    let r = get(&srv, "/admin/?mount=/hidden.mp3", Some(ADMIN));
    assert!(r.body.contains("<h2>source mount=/hidden.mp3</h2>"));
    // `/admin/` itself is the admin web UI (`web_ui.rs`): it lists hidden mounts too.
    let r = get(&srv, "/admin/", Some(ADMIN));
    assert!(r.body.contains(">/hidden.mp3</a>"), "{}", r.body);
    let r = get(&srv, "/admin/listmounts.xsl", Some(ADMIN));
    assert!(
        r.body
            .contains("<tr><th>fallback</th><td>/hidden.mp3</td></tr>"),
        "{}",
        r.body
    );
}

#[test]
fn listclients_shows_the_listener_and_killclient_disconnects_it() {
    let srv = server("");
    let _a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    srv.wait_mount("/a.mp3");
    let mut victim = Player::open(srv.addr, "/a.mp3", "victim-player/2.0");
    let mut other = Player::open(srv.addr, "/a.mp3", "other-player/1.0");
    let id = listener_id(&srv, "/a.mp3", "victim-player/2.0");

    let x = get(&srv, "/admin/listclients?mount=/a.mp3", Some(ADMIN)).xml();
    let s = x.source("/a.mp3").unwrap();
    assert_eq!(s.text_of("Listeners"), Some("2"));
    let l = s
        .all("listener")
        .into_iter()
        .find(|l| l.text_of("ID") == Some(id.as_str()))
        .unwrap();
    assert_eq!(l.text_of("IP"), Some("127.0.0.1"));
    assert_eq!(l.text_of("UserAgent"), Some("victim-player/2.0"));
    assert!(l.text_of("Connected").unwrap().parse::<u64>().is_ok());
    let html = get(&srv, "/admin/listclients.xsl?mount=/a.mp3", Some(ADMIN)).body;
    assert!(html.contains("<td>victim-player/2.0</td>"), "{html}");

    // Not on this mount's listener list: not found, nobody disconnected.
    let (msg, ret) = ice_response(&get(
        &srv,
        "/admin/killclient?mount=/a.mp3&id=999999",
        Some(ADMIN),
    ));
    assert_eq!(
        (msg.as_str(), ret.as_str()),
        ("Client 999999 not found", "0")
    );

    let (msg, ret) = ice_response(&get(
        &srv,
        &format!("/admin/killclient?mount=/a.mp3&id={id}"),
        Some(ADMIN),
    ));
    assert_eq!(msg, format!("Client {id} removed"));
    assert_eq!(ret, "1");
    let (_, closed) = victim.read_for(Duration::from_secs(5));
    assert!(closed, "the killed listener's socket must see EOF");
    let (bytes, closed) = other.read_for(Duration::from_millis(500));
    assert!(
        !closed && !bytes.is_empty(),
        "the other listener keeps playing"
    );

    let (msg, ret) = ice_response(&get(
        &srv,
        &format!("/admin/killclient?mount=/a.mp3&id={id}"),
        Some(ADMIN),
    ));
    assert_eq!(
        (msg, ret),
        (format!("Client {id} not found"), "0".to_owned())
    );
    assert_400(
        &get(&srv, "/admin/killclient?mount=/a.mp3", Some(ADMIN)),
        "Missing parameter",
    );
    assert_400(
        &get(&srv, "/admin/listclients?mount=/none.mp3", Some(ADMIN)),
        "Source does not exist",
    );
    // A mount command without `mount` is a general request Icecast does not know.
    assert_400(
        &get(&srv, "/admin/killclient", Some(ADMIN)),
        "Unknown admin request",
    );
}

#[test]
fn moveclients_moves_a_live_listener_to_the_other_source() {
    let srv = server("");
    let _a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    let _b = MarkedSource::start(srv.addr, "/b.mp3", 0xB2);
    srv.wait_mount("/a.mp3");
    srv.wait_mount("/b.mp3");
    let mut p = Player::open(srv.addr, "/a.mp3", "moving-player");
    let id = listener_id(&srv, "/a.mp3", "moving-player");
    let (before, _) = p.read_for(Duration::from_millis(800));
    let (m, _) = markers(&before);
    assert!(
        m.len() > 10 && m.iter().all(|&x| x == 0xA1),
        "from /a.mp3 first: {} bytes, markers {m:x?}",
        before.len()
    );

    // Without destination: the choices, this mount left out.
    let x = get(&srv, "/admin/moveclients?mount=/a.mp3", Some(ADMIN)).xml();
    assert_eq!(x.text_of("current_source"), Some("/a.mp3"));
    assert!(x.source("/a.mp3").is_none() && x.source("/b.mp3").is_some());

    let (msg, ret) = ice_response(&get(
        &srv,
        "/admin/moveclients?mount=/a.mp3&destination=/b.mp3",
        Some(ADMIN),
    ));
    assert_eq!(
        (msg.as_str(), ret.as_str()),
        ("Clients moved from /a.mp3 to /b.mp3", "1")
    );
    let (after, closed) = p.read_for(Duration::from_secs(2));
    assert!(!closed, "a moved listener stays connected");
    let mut all = before;
    all.extend_from_slice(&after);
    let (m, skipped) = markers(&all);
    assert_eq!(skipped, 0, "the move happens at a frame boundary");
    let switch = m
        .iter()
        .position(|&x| x == 0xB2)
        .expect("bytes from /b.mp3");
    assert!(m[..switch].iter().all(|&x| x == 0xA1));
    assert!(
        m[switch..].iter().all(|&x| x == 0xB2),
        "only /b.mp3 after the move"
    );
    assert!(m.len() - switch > 20, "keeps receiving /b.mp3");
    // listclients agrees.
    assert_eq!(listener_id(&srv, "/b.mp3", "moving-player"), id);
    let x = get(&srv, "/admin/listclients?mount=/a.mp3", Some(ADMIN)).xml();
    assert!(x.source("/a.mp3").unwrap().all("listener").is_empty());

    assert_400(
        &get(
            &srv,
            "/admin/moveclients?mount=/b.mp3&destination=/none.mp3",
            Some(ADMIN),
        ),
        "No such destination",
    );
    assert_400(
        &get(
            &srv,
            "/admin/moveclients?mount=/b.mp3&destination=/b.mp3",
            Some(ADMIN),
        ),
        "supplied mountpoints are identical",
    );
}

#[test]
fn moveclients_refuses_a_destination_of_another_format() {
    let srv = server("");
    let _a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    let mut aac = TcpStream::connect(srv.addr).unwrap();
    write!(
        aac,
        "PUT /tone.aac HTTP/1.1\r\nAuthorization: {}\r\nContent-Type: audio/aac\r\n\r\n",
        basic_authorization("source", SOURCE_PW)
    )
    .unwrap();
    let mut reply = [0u8; 19];
    aac.read_exact(&mut reply).unwrap();
    aac.write_all(&std::fs::read(asset("test-tone.aac")).unwrap()[..32768])
        .unwrap();
    srv.wait_mount("/a.mp3");
    srv.wait_mount("/tone.aac");
    let mut p = Player::open(srv.addr, "/a.mp3", "mp3-player");
    listener_id(&srv, "/a.mp3", "mp3-player");
    let (msg, ret) = ice_response(&get(
        &srv,
        "/admin/moveclients?mount=/a.mp3&destination=/tone.aac",
        Some(ADMIN),
    ));
    assert_eq!(ret, "0");
    assert!(msg.contains("different stream formats"), "{msg}");
    let (bytes, closed) = p.read_for(Duration::from_millis(800));
    let (m, _) = markers(&bytes);
    assert!(!closed && m.iter().all(|&x| x == 0xA1) && !m.is_empty());
}

#[test]
fn killsource_ends_the_source_connection() {
    let srv = server("");
    let a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    srv.wait_mount("/a.mp3");
    let mut p = Player::open(srv.addr, "/a.mp3", "p");
    let (msg, ret) = ice_response(&get(&srv, "/admin/killsource?mount=/a.mp3", Some(ADMIN)));
    assert_eq!((msg.as_str(), ret.as_str()), ("Source Removed", "1"));
    assert!(
        a.wait_closed(Duration::from_secs(5)),
        "source connection closed"
    );
    wait_until(Duration::from_secs(5), || {
        srv.ctx.registry.get("/a.mp3").is_none()
    })
    .expect("mount gone");
    let x = get(&srv, "/admin/listmounts", Some(ADMIN)).xml();
    assert!(x.source("/a.mp3").is_none());
    let (_, closed) = p.read_for(Duration::from_secs(8));
    assert!(closed, "without a fallback its listener is closed");
    assert_400(
        &get(&srv, "/admin/killsource?mount=/a.mp3", Some(ADMIN)),
        "Source does not exist",
    );

    // A source that went silent is stopped as promptly, long before source-timeout (10 s).
    let mut silent = TcpStream::connect(srv.addr).unwrap();
    write!(
        silent,
        "SOURCE /silent.mp3 HTTP/1.0\r\nAuthorization: {}\r\nContent-Type: audio/mpeg\r\n\r\n",
        basic_authorization("source", SOURCE_PW)
    )
    .unwrap();
    let mut reply = [0u8; 19];
    silent.read_exact(&mut reply).unwrap();
    silent.set_nodelay(true).unwrap();
    let audio: Vec<u8> = demo_frames()
        .iter()
        .take(50)
        .flat_map(|f| f.data.to_vec())
        .collect();
    silent.write_all(&audio).unwrap();
    srv.wait_mount("/silent.mp3");
    let mount = srv.ctx.registry.get("/silent.mp3").unwrap();
    wait_until(Duration::from_secs(5), || {
        mount.source_bytes.load(Ordering::Relaxed) == audio.len() as u64
    })
    .expect("all audio read: the source is now silent");
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let (msg, _) = ice_response(&get(
        &srv,
        "/admin/killsource?mount=/silent.mp3",
        Some(ADMIN),
    ));
    assert_eq!(msg, "Source Removed");
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut sink = [0u8; 64];
    let ended = match silent.read(&mut sink) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    assert!(
        ended && asked.elapsed() < Duration::from_secs(3),
        "silent source closed promptly"
    );
}

#[test]
fn fallbacks_changes_where_listeners_go_when_the_source_ends() {
    // Configured fallback /c.mp3; the admin call makes it /b.mp3.
    let srv = server("[[mount]]\nname = \"/a.mp3\"\nfallback-mount = \"/c.mp3\"");
    let a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    let _b = MarkedSource::start(srv.addr, "/b.mp3", 0xB2);
    let _c = MarkedSource::start(srv.addr, "/c.mp3", 0xC3);
    for m in ["/a.mp3", "/b.mp3", "/c.mp3"] {
        srv.wait_mount(m);
    }
    let mut p = Player::open(srv.addr, "/a.mp3", "fallback-player");
    listener_id(&srv, "/a.mp3", "fallback-player");
    let x = get(&srv, "/admin/listmounts", Some(ADMIN)).xml();
    assert_eq!(
        x.source("/a.mp3").unwrap().text_of("fallback"),
        Some("/c.mp3")
    );

    let r = get(
        &srv,
        "/admin/fallbacks?mount=/a.mp3&fallback=/b.mp3",
        Some(ADMIN),
    );
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        r.body,
        "<html><head><title>Admin request successful</title></head><body><p>Fallback configured</p></body></html>"
    );
    let x = get(&srv, "/admin/listmounts", Some(ADMIN)).xml();
    assert_eq!(
        x.source("/a.mp3").unwrap().text_of("fallback"),
        Some("/b.mp3")
    );
    assert_400(
        &get(&srv, "/admin/fallbacks?mount=/a.mp3", Some(ADMIN)),
        "Missing parameter",
    );

    let (before, _) = p.read_for(Duration::from_millis(500));
    drop(a); // the source leaves
    let (after, closed) = p.read_for(Duration::from_secs(3));
    assert!(!closed, "the listener stays, on the fallback");
    let mut all = before;
    all.extend_from_slice(&after);
    let (m, _) = markers(&all);
    assert!(m.contains(&0xB2), "moved to the admin-set fallback /b.mp3");
    assert!(!m.contains(&0xC3), "not to the configured /c.mp3");
    assert_eq!(*m.last().unwrap(), 0xB2);
    listener_id(&srv, "/b.mp3", "fallback-player");
}

#[test]
fn streamlist_txt_lists_public_mounts_for_the_relay_user() {
    let srv = server("[[mount]]\nname = \"/hidden.mp3\"\nhidden = true");
    let _a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    let _b = MarkedSource::start(srv.addr, "/b.mp3", 0xB2);
    let _h = MarkedSource::start(srv.addr, "/hidden.mp3", 0xC3);
    for m in ["/a.mp3", "/b.mp3", "/hidden.mp3"] {
        srv.wait_mount(m);
    }
    for creds in [("relay", RELAY_PW), ADMIN] {
        let r = get(&srv, "/admin/streamlist.txt", Some(creds));
        assert_eq!(r.status(), 200, "{creds:?}");
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        assert_eq!(r.body, "/a.mp3\r\n/b.mp3\r\n", "hidden mount left out");
    }
    for creds in [None, Some(("relay", "wrong")), Some(("source", SOURCE_PW))] {
        assert_401(&get(&srv, "/admin/streamlist.txt", creds), "streamlist.txt");
    }
}

#[test]
fn a_mounts_source_credentials_open_only_that_mounts_commands() {
    let srv = server("[[mount]]\nname = \"/own.mp3\"\nusername = \"dj\"\npassword = \"dj-pw\"");
    let own = MarkedSource::start_as(srv.addr, "/own.mp3", 0xD4, ("dj", "dj-pw"));
    let _a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    srv.wait_mount("/own.mp3");
    srv.wait_mount("/a.mp3");
    let _p = Player::open(srv.addr, "/own.mp3", "dj-fan");
    let dj = Some(("dj", "dj-pw"));

    let x = get(&srv, "/admin/listclients?mount=/own.mp3", dj).xml();
    assert_eq!(
        x.source("/own.mp3").unwrap().text_of("Listeners"),
        Some("1")
    );
    let x = get(&srv, "/admin/stats?mount=/own.mp3", dj).xml();
    assert!(x.source("/own.mp3").is_some());
    // The global source password is not this mount's; dj's is not /a.mp3's.
    assert_401(
        &get(
            &srv,
            "/admin/listclients?mount=/own.mp3",
            Some(("source", SOURCE_PW)),
        ),
        "global source password on /own.mp3",
    );
    assert_401(
        &get(&srv, "/admin/listclients?mount=/a.mp3", dj),
        "dj on /a.mp3",
    );
    assert_401(&get(&srv, "/admin/listmounts", dj), "dj on listmounts");
    assert_401(&get(&srv, "/admin/stats", dj), "dj on stats");
    // /a.mp3's own (global) source credentials work on /a.mp3.
    let r = get(
        &srv,
        "/admin/listclients?mount=/a.mp3",
        Some(("source", SOURCE_PW)),
    );
    assert_eq!(r.status(), 200);
    let (msg, _) = ice_response(&get(&srv, "/admin/killsource?mount=/own.mp3", dj));
    assert_eq!(msg, "Source Removed");
    assert!(own.wait_closed(Duration::from_secs(5)));
}

#[test]
fn metadata_updatemetadata_and_buildm3u_answer_as_icecast() {
    let srv = server("");
    let _a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    srv.wait_mount("/a.mp3");
    assert_400(
        &get(&srv, "/admin/metadata?mount=/a.mp3&song=x", Some(ADMIN)),
        "Missing parameter",
    );
    let (msg, ret) = ice_response(&get(
        &srv,
        "/admin/metadata?mount=/a.mp3&mode=other",
        Some(ADMIN),
    ));
    assert_eq!((msg.as_str(), ret.as_str()), ("No such action", "0"));
    // `charset` says how to read the bytes: UTF-8 bytes declared Latin-1 stay two characters.
    let q = "/admin/metadata?mount=/a.mp3&mode=updinfo&song=Caf%C3%A9&charset=ISO-8859-1";
    let (msg, ret) = ice_response(&get(&srv, q, Some(ADMIN)));
    assert_eq!(
        (msg.as_str(), ret.as_str()),
        ("Metadata update successful", "1")
    );
    assert_eq!(srv.ctx.registry.get("/a.mp3").unwrap().title(), "CafÃ©");
    let q = "/admin/metadata?mount=/a.mp3&mode=updinfo&artist=Ann%20%26%20Bo&title=%3CLive%3E";
    ice_response(&get(&srv, q, Some(ADMIN)));
    // Escaped in the XML, whole again once parsed.
    let r = get(&srv, "/admin/stats?mount=/a.mp3", Some(ADMIN));
    assert!(
        r.body
            .contains("<title>Ann &amp; Bo - &lt;Live&gt;</title>"),
        "{}",
        r.body
    );
    assert_eq!(
        r.xml().source("/a.mp3").unwrap().text_of("title"),
        Some("Ann & Bo - <Live>")
    );
    let html = get(
        &srv,
        "/admin/metadata.xsl?mount=/a.mp3&mode=updinfo&song=S",
        Some(ADMIN),
    );
    assert!(html
        .body
        .contains("<p class=\"ok\">Metadata update successful</p>"));

    let x = get(&srv, "/admin/updatemetadata?mount=/a.mp3", Some(ADMIN));
    assert_eq!(
        x.body,
        "<?xml version=\"1.0\"?>\n<icestats><source mount=\"/a.mp3\"/></icestats>\n"
    );

    // buildm3u needs no credentials, only user and password to embed.
    let r = get(
        &srv,
        "/admin/buildm3u?mount=/a.mp3&username=ann&password=p%40ss",
        None,
    );
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("audio/x-mpegurl"));
    assert_eq!(
        r.body,
        format!("http://ann:p%40ss@localhost:{}/a.mp3\r\n", srv.addr.port())
    );
    assert_400(
        &get(&srv, "/admin/buildm3u?mount=/a.mp3&username=ann", None),
        "Missing parameter",
    );
}

#[test]
fn json_api_lists_kills_moves_and_updates() {
    let srv = server("[[mount]]\nname = \"/hidden.mp3\"\nhidden = true");
    let a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    let _b = MarkedSource::start(srv.addr, "/b.mp3", 0xB2);
    let _h = MarkedSource::start(srv.addr, "/hidden.mp3", 0xC3);
    for m in ["/a.mp3", "/b.mp3", "/hidden.mp3"] {
        srv.wait_mount(m);
    }
    let mut victim = Player::open(srv.addr, "/a.mp3", "json-victim");
    let mut mover = Player::open(srv.addr, "/a.mp3", "json-mover");
    listener_id(&srv, "/a.mp3", "json-mover");
    let addr = srv.addr;

    for (method, path) in [
        ("GET", "/api/v1/stats"),
        ("GET", "/api/v1/mounts"),
        ("GET", "/api/v1/mounts/a.mp3"),
        ("GET", "/api/v1/mounts/a.mp3/listeners"),
        ("DELETE", "/api/v1/mounts/a.mp3/listeners/1"),
        ("DELETE", "/api/v1/mounts/a.mp3"),
        ("POST", "/api/v1/mounts/a.mp3/move"),
        ("PUT", "/api/v1/mounts/a.mp3/fallback"),
        ("PUT", "/api/v1/mounts/a.mp3/metadata"),
    ] {
        for creds in [None, Some(("admin", "wrong"))] {
            let r = call(addr, method, path, creds, "");
            assert_401(&r, path);
            assert_eq!(r.json()["ok"], false);
        }
    }

    let v = call(addr, "GET", "/api/v1/mounts", Some(ADMIN), "").json();
    let mounts = v["mounts"].as_array().unwrap();
    let names: Vec<&str> = mounts
        .iter()
        .map(|m| m["mount"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["/a.mp3", "/b.mp3", "/hidden.mp3"]);
    assert_eq!(mounts[0]["listeners"], 2);
    assert_eq!(mounts[0]["name"], "Marker 161");
    assert_eq!(mounts[2]["hidden"], true);

    let v = call(addr, "GET", "/api/v1/stats", Some(ADMIN), "").json();
    assert_eq!(v["global"]["sources"], "3");
    assert_eq!(v["mounts"][0]["mount"], "/a.mp3");
    assert_eq!(v["mounts"][0]["listeners"], "2");

    // The mount's source credentials open its endpoints, not the global ones.
    let src = Some(("source", SOURCE_PW));
    let v = call(addr, "GET", "/api/v1/mounts/a.mp3/listeners", src, "").json();
    assert_eq!(v["mount"], "/a.mp3");
    let rows = v["listeners"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let victim_row = rows
        .iter()
        .find(|r| r["user_agent"] == "json-victim")
        .unwrap();
    assert_eq!(victim_row["ip"], "127.0.0.1");
    let victim_id = victim_row["id"].as_u64().unwrap();
    assert_401(
        &call(addr, "GET", "/api/v1/mounts", src, ""),
        "source on /mounts",
    );

    let path = format!("/api/v1/mounts/a.mp3/listeners/{victim_id}");
    let r = call(addr, "DELETE", &path, Some(ADMIN), "");
    assert_eq!(r.status(), 200);
    assert_eq!(r.json()["message"], format!("Client {victim_id} removed"));
    assert!(
        victim.read_for(Duration::from_secs(5)).1,
        "killed listener sees EOF"
    );
    let r = call(addr, "DELETE", &path, Some(ADMIN), "");
    assert_eq!(r.status(), 404);
    assert_eq!(r.json()["ok"], false);

    let r = call(
        addr,
        "POST",
        "/api/v1/mounts/a.mp3/move",
        Some(ADMIN),
        r#"{"destination":"/b.mp3"}"#,
    );
    assert_eq!(r.status(), 200, "{}", r.body);
    let v = r.json();
    assert_eq!(
        (v["moved"].as_u64(), v["destination"].as_str()),
        (Some(1), Some("/b.mp3"))
    );
    let (bytes, closed) = mover.read_for(Duration::from_secs(2));
    assert!(!closed);
    assert_eq!(*markers(&bytes).0.last().unwrap(), 0xB2, "moved to /b.mp3");
    let r = call(
        addr,
        "POST",
        "/api/v1/mounts/a.mp3/move",
        Some(ADMIN),
        r#"{"destination":"/x.mp3"}"#,
    );
    assert_eq!(
        (r.status(), r.json()["message"].as_str()),
        (400, Some("No such destination"))
    );
    let r = call(
        addr,
        "POST",
        "/api/v1/mounts/a.mp3/move",
        Some(ADMIN),
        "[1]",
    );
    assert_eq!(r.status(), 400);

    let r = call(
        addr,
        "PUT",
        "/api/v1/mounts/a.mp3/fallback",
        Some(ADMIN),
        r#"{"fallback":"/b.mp3"}"#,
    );
    assert_eq!(r.json()["message"], "Fallback configured");
    let v = call(addr, "GET", "/api/v1/mounts/a.mp3", Some(ADMIN), "").json();
    assert_eq!(v["fallback"], "/b.mp3");

    let r = call(
        addr,
        "PUT",
        "/api/v1/mounts/a.mp3/metadata?artist=Ann&title=Song",
        src,
        "",
    );
    assert_eq!(r.json()["message"], "Metadata update successful");
    assert_eq!(srv.mount_status("/a.mp3").unwrap()["title"], "Ann - Song");
    assert_eq!(
        call(
            addr,
            "PUT",
            "/api/v1/mounts/a.mp3/metadata",
            Some(ADMIN),
            "{}"
        )
        .status(),
        400
    );
    assert_eq!(
        call(
            addr,
            "POST",
            "/api/v1/mounts/a.mp3/listeners",
            Some(ADMIN),
            ""
        )
        .status(),
        405
    );

    let r = call(addr, "DELETE", "/api/v1/mounts/a.mp3", Some(ADMIN), "");
    assert_eq!(r.json()["message"], "Source Removed");
    assert!(a.wait_closed(Duration::from_secs(5)));
    wait_until(Duration::from_secs(5), || {
        srv.ctx.registry.get("/a.mp3").is_none()
    })
    .unwrap();
    let r = call(addr, "GET", "/api/v1/mounts/a.mp3", Some(ADMIN), "");
    assert_eq!(
        (r.status(), r.json()["message"].as_str()),
        (404, Some("Source does not exist"))
    );
    // The public status documents still work beside the API.
    assert_eq!(
        srv.json("/api/v1/status")["mounts"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(srv.json("/status-json.xsl")["icestats"]["source"].is_object());
}

/// A real Icecast 2.4.4 (Debian `icecast2`) running as a relay slave of `master`, stopped and
/// its directory removed on drop.
struct IcecastSlave {
    child: std::process::Child,
    dir: std::path::PathBuf,
    port: u16,
}

impl IcecastSlave {
    fn start(master: SocketAddr) -> IcecastSlave {
        require("icecast2");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!(
            "throng-it-icecast-slave-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let root = std::process::Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        // icecast2 refuses to run as root: it drops to its own user after binding, and opens
        // its log there afterwards.
        let owner = if root {
            let ok = std::process::Command::new("chown")
                .args(["icecast2:icecast", dir.to_str().unwrap()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown of {} for icecast2", dir.display());
            "<changeowner><user>icecast2</user><group>icecast</group></changeowner>"
        } else {
            ""
        };
        let xml = format!(
            "<icecast><hostname>127.0.0.1</hostname><limits><sources>8</sources></limits>\
             <authentication><source-password>slave-pw</source-password>\
             <admin-password>slave-pw</admin-password></authentication>\
             <master-server>127.0.0.1</master-server><master-server-port>{mport}</master-server-port>\
             <master-update-interval>1</master-update-interval>\
             <master-username>relay</master-username><master-password>{RELAY_PW}</master-password>\
             <listen-socket><port>{port}</port><bind-address>127.0.0.1</bind-address></listen-socket>\
             <paths><basedir>/usr/share/icecast2</basedir><logdir>{dir}</logdir>\
             <webroot>/usr/share/icecast2/web</webroot><adminroot>/usr/share/icecast2/admin</adminroot></paths>\
             <logging><errorlog>error.log</errorlog><loglevel>3</loglevel></logging>\
             <security><chroot>0</chroot>{owner}</security></icecast>",
            mport = master.port(),
            dir = dir.display(),
        );
        let cfg = dir.join("icecast.xml");
        std::fs::write(&cfg, xml).unwrap();
        let child = std::process::Command::new("icecast2")
            .arg("-c")
            .arg(&cfg)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("icecast2 starts");
        IcecastSlave { child, dir, port }
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

impl Drop for IcecastSlave {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_real_icecast2_slave_relays_the_mounts_of_streamlist_txt() {
    let srv = server("[[mount]]\nname = \"/hidden.mp3\"\nhidden = true");
    let _a = MarkedSource::start(srv.addr, "/a.mp3", 0xA1);
    let _h = MarkedSource::start(srv.addr, "/hidden.mp3", 0xC3);
    srv.wait_mount("/a.mp3");
    srv.wait_mount("/hidden.mp3");
    let slave = IcecastSlave::start(srv.addr);
    // Icecast read /admin/streamlist.txt with the relay credentials and pulls /a.mp3 from us.
    let relay_listening = wait_until(Duration::from_secs(15), || {
        let x = get(&srv, "/admin/listclients?mount=/a.mp3", Some(ADMIN)).xml();
        x.source("/a.mp3").unwrap().all("listener").iter().any(|l| {
            l.text_of("UserAgent")
                .is_some_and(|a| a.starts_with("Icecast 2.4"))
        })
    });
    assert!(
        relay_listening.is_ok(),
        "icecast2 never relayed /a.mp3; its log:\n{}",
        slave.error_log()
    );
    // Its listeners get our stream, marker bytes intact.
    let mut p = Player::open(
        format!("127.0.0.1:{}", slave.port).parse().unwrap(),
        "/a.mp3",
        "via-icecast",
    );
    let (bytes, _) = p.read_for(Duration::from_millis(1500));
    let (m, _) = markers(&bytes);
    assert!(
        m.len() > 10 && m.iter().all(|&x| x == 0xA1),
        "relayed audio"
    );
    // The hidden mount was not in the list, so it is not relayed.
    let x = get(&srv, "/admin/listclients?mount=/hidden.mp3", Some(ADMIN)).xml();
    assert!(x.source("/hidden.mp3").unwrap().all("listener").is_empty());
}
