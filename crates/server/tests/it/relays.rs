//! Relays against the real Debian icecast2 (2.4.4) and between two Throng servers: Throng
//! relaying an icecast2 mount (audio decodes, the ICY title carries over), icecast2 relaying a
//! Throng mount, reconnecting after the upstream source comes back, on-demand relays
//! (connected only while listened to), master/slave through `/admin/streamlist.txt`, redirects,
//! `ICY 200 OK` upstreams, and listeners kept on a fallback during an upstream drop.
//!
//! Each icecast2 runs from a generated `icecast.xml` in its own temp dir on a free port, and is
//! killed when its guard is dropped (also when a test panics).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use throng_proto::auth::basic_authorization;
use throng_proto::http::{parse_response_head, ResponseHead};
use throng_proto::icy::{metadata_block, stream_title, IcyDemuxer, IcyPiece};
use throng_server::SourceKind;

use crate::support::*;

/// Relay password of every test icecast2 (user `relay`).
const RELAY_PW: &str = "test-relay-pw";

/// A running icecast2, killed and its directory removed on drop.
struct Icecast {
    addr: SocketAddr,
    dir: PathBuf,
    child: Child,
}

impl Drop for Icecast {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether `addr` answers a status request with 200 (icecast2 accepts connections a moment
/// before it serves them).
fn answers_http(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"GET /status.xsl HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out.starts_with(b"HTTP/1.0 200")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Icecast {
    /// Starts icecast2 with `extra` XML inside `<icecast>` (relays, master settings); source
    /// password [`SOURCE_PW`], admin `admin`/[`ADMIN_PW`], relay `relay`/[`RELAY_PW`].
    fn start(extra: &str) -> Icecast {
        require("icecast2");
        for attempt in 0..3 {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "throng-it-icecast-{}-{port}-{attempt}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            // icecast2 refuses to run as root: it binds, then switches to Debian's icecast2
            // user, who must be able to write the logs.
            let changeowner = if is_root() {
                "<changeowner><user>icecast2</user><group>icecast</group></changeowner>"
            } else {
                ""
            };
            let xml = format!(
                r#"<icecast>
  <location>test</location><admin>test@localhost</admin><hostname>127.0.0.1</hostname>
  <limits><clients>100</clients><sources>10</sources><queue-size>512000</queue-size>
    <client-timeout>30</client-timeout><header-timeout>15</header-timeout>
    <source-timeout>10</source-timeout><burst-on-connect>1</burst-on-connect>
    <burst-size>65536</burst-size></limits>
  <authentication><source-password>{SOURCE_PW}</source-password>
    <relay-password>{RELAY_PW}</relay-password><admin-user>admin</admin-user>
    <admin-password>{ADMIN_PW}</admin-password></authentication>
  <listen-socket><port>{port}</port><bind-address>127.0.0.1</bind-address></listen-socket>
  {extra}
  <fileserve>1</fileserve>
  <paths><basedir>/usr/share/icecast2</basedir><logdir>{dir}</logdir>
    <webroot>/usr/share/icecast2/web</webroot><adminroot>/usr/share/icecast2/admin</adminroot></paths>
  <logging><accesslog>access.log</accesslog><errorlog>error.log</errorlog><loglevel>4</loglevel></logging>
  <security><chroot>0</chroot>{changeowner}</security>
</icecast>
"#,
                dir = dir.display()
            );
            let conf = dir.join("icecast.xml");
            std::fs::write(&conf, xml).unwrap();
            for f in ["access.log", "error.log"] {
                std::fs::write(dir.join(f), "").unwrap();
            }
            if is_root() {
                // Debian's icecast2 user and group (uid/gid looked up by name).
                let ids = |flag: &str| {
                    let out = Command::new("id")
                        .args([flag, "icecast2"])
                        .output()
                        .unwrap();
                    String::from_utf8_lossy(&out.stdout)
                        .trim()
                        .parse::<u32>()
                        .unwrap()
                };
                let (uid, gid) = (ids("-u"), ids("-g"));
                for p in [dir.clone(), dir.join("access.log"), dir.join("error.log")] {
                    std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
                }
            }
            let child = Command::new("icecast2")
                .arg("-c")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn icecast2");
            let mut ic = Icecast {
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                dir,
                child,
            };
            let up = wait_until(Duration::from_secs(5), || {
                if matches!(ic.child.try_wait(), Ok(Some(_))) {
                    return true;
                }
                answers_http(ic.addr)
            });
            if up.is_ok() && matches!(ic.child.try_wait(), Ok(None)) {
                return ic;
            }
            // Port taken meanwhile (or a slow start): try another.
        }
        panic!("icecast2 did not start");
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The `<source mount=...>` element of `mount` in `/admin/stats` (the XML, since 2.4.4's
    /// status-json is invalid JSON in some states, xiph#43), if the mount is live.
    fn source(&self, mount: &str) -> Option<String> {
        let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
        let (head, body) = self.get("/admin/stats", &[&auth]);
        assert_eq!(head.status, 200);
        let xml = String::from_utf8_lossy(&body);
        let open = format!("<source mount=\"{mount}\">");
        let start = xml.find(&open)? + open.len();
        let len = xml[start..].find("</source>")?;
        Some(xml[start..start + len].to_owned())
    }

    /// Field `tag` of `mount` in `/admin/stats`.
    fn stat(&self, mount: &str, tag: &str) -> Option<String> {
        let src = self.source(mount)?;
        let open = format!("<{tag}>");
        let start = src.find(&open)? + open.len();
        let len = src[start..].find('<')?;
        Some(src[start..start + len].to_owned())
    }

    /// Listeners of `mount` as icecast2 counts them (None when the mount is not live).
    fn listeners(&self, mount: &str) -> Option<u64> {
        self.stat(mount, "listeners").and_then(|v| v.parse().ok())
    }

    fn wait_mount(&self, mount: &str) {
        wait_until(Duration::from_secs(15), || self.source(mount).is_some())
            .unwrap_or_else(|_| panic!("icecast2 mount {mount} never came up"));
    }

    /// Sets the title of `mount` through icecast2's admin API.
    fn set_title(&self, mount: &str, song: &str) {
        let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
        let path = format!(
            "/admin/metadata?mount={mount}&mode=updinfo&song={}",
            song.replace(' ', "%20")
        );
        let (head, body) = self.get(&path, &[&auth]);
        assert_eq!(head.status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// GET `path` from icecast2, asking again (up to 5 times) when it closes without a whole
    /// answer: a loaded box can keep an icecast2 admin request past the 5 s read timeout.
    fn get(&self, path: &str, headers: &[&str]) -> (ResponseHead, Vec<u8>) {
        let mut req = format!("GET {path} HTTP/1.0\r\nHost: test\r\n");
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        for _ in 0..4 {
            let out = exchange(self.addr, req.as_bytes());
            if let Ok(Some((head, len))) = parse_response_head(&out) {
                return (head, out[len..].to_vec());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        http_get(self.addr, path, headers)
    }
}

/// ffmpeg pushing the demo MP3 in a loop at real time to `mount` on `addr` (`icecast://`).
fn ffmpeg_source(addr: SocketAddr, mount: &str) -> Proc {
    require("ffmpeg");
    let child = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i"])
        .arg(asset("demo.mp3"))
        .args(["-c", "copy", "-content_type", "audio/mpeg"])
        .args([
            "-ice_name",
            "Origin Radio",
            "-ice_genre",
            "Test",
            "-f",
            "mp3",
        ])
        .arg(format!("icecast://source:{SOURCE_PW}@{addr}{mount}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ffmpeg");
    Proc(child)
}

/// Titles (in order) and the audio of an ICY listener's body.
fn demux(body: &[u8], metaint: usize) -> (Vec<String>, Vec<u8>) {
    let mut titles = Vec::new();
    let mut audio = Vec::new();
    IcyDemuxer::new(metaint)
        .feed(body, |p| match p {
            IcyPiece::Audio(a) => audio.extend_from_slice(a),
            IcyPiece::Metadata(m) => titles.extend(stream_title(&m)),
        })
        .unwrap();
    (titles, audio)
}

/// Asserts that a listener of `path` on `addr` gets clean MP3 (at least `frames` chained).
///
/// Reads until the chain is long enough or 10 s pass (a loaded CI box can stall a relay hop
/// for a second); a broken chain or an early close fails with what was received.
fn assert_audio(addr: SocketAddr, path: &str, frames: usize) {
    let mut l = Listener::open(addr, path, false);
    assert_eq!(l.head.status, 200, "{path}");
    let start = Instant::now();
    let mut body = std::mem::take(&mut l.first);
    let mut closed = false;
    let mut chunk = [0u8; 16384];
    l.stream
        .set_read_timeout(Some(Duration::from_millis(250)))
        .unwrap();
    while start.elapsed() < Duration::from_secs(10) {
        match l.stream.read(&mut chunk) {
            Ok(0) => closed = true,
            Ok(got) => body.extend_from_slice(&chunk[..got]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => closed = true,
        }
        let (starts, n) = mp3_chain(&body);
        let whole = body.len() - chained_len(&body);
        // Enough frames, or a break in the chain that more bytes cannot mend.
        if (starts && n >= frames) || !starts && body.len() >= 4 || whole > 2_000 || closed {
            break;
        }
    }
    let (starts, n) = mp3_chain(&body);
    assert!(
        starts && n >= frames,
        "{path}: {n} MP3 frames (start ok: {starts}) in {} bytes after {:?}, closed: {closed}",
        body.len(),
        start.elapsed()
    );
}

/// Bytes covered by the chain of whole MP3 frames at the start of `data`.
fn chained_len(data: &[u8]) -> usize {
    let mut pos = 0;
    while let Some(h) = throng_proto::mp3::parse_header(&data[pos..]) {
        if pos + h.frame_len > data.len() {
            break;
        }
        pos += h.frame_len;
    }
    pos
}

/// The Throng mount `name` once it is live and fed by a relay.
fn wait_relay(srv: &TestServer, name: &str) -> Arc<throng_server::Mount> {
    srv.wait_mount(name);
    let m = srv.ctx.registry.get(name).unwrap();
    assert_eq!(m.settings.kind, SourceKind::Relay);
    m
}

fn relay_toml(port: u16, mount: &str, local: &str, extra: &str) -> String {
    format!(
        "[[relay]]\nserver = \"127.0.0.1\"\nport = {port}\nmount = \"{mount}\"\nlocal-mount = \"{local}\"\n{extra}\n"
    )
}

#[test]
fn throng_relays_icecast2_with_decodable_audio_and_its_title() {
    let ic = Icecast::start("");
    let _ff = ffmpeg_source(ic.addr, "/origin.mp3");
    ic.wait_mount("/origin.mp3");
    ic.set_title("/origin.mp3", "Upstream Title");
    let srv = TestServer::start(&relay_toml(ic.addr.port(), "/origin.mp3", "/relay.mp3", ""));
    let mount = wait_relay(&srv, "/relay.mp3");
    // Icecast's stream headers became the local mount's description.
    assert_eq!(mount.settings.content_type, "audio/mpeg");
    assert_eq!(mount.description().info.name, "Origin Radio");
    assert_eq!(mount.description().info.genre, "Test");
    assert_eq!(srv.mount_status("/relay.mp3").unwrap()["source"], "relay");
    wait_until(Duration::from_secs(10), || {
        mount.title() == "Upstream Title"
    })
    .unwrap_or_else(|_| panic!("title never arrived: {:?}", mount.title()));
    // An ICY listener of the relay gets the upstream title and clean MP3 between blocks.
    let mut l = Listener::open(srv.addr, "/relay.mp3", true);
    assert_eq!(l.head.header("icy-name"), Some("Origin Radio"));
    let metaint: usize = l.head.header("icy-metaint").unwrap().parse().unwrap();
    let body = l.read_for(Duration::from_millis(1500));
    let (titles, audio) = demux(&body, metaint);
    assert_eq!(titles.first().map(String::as_str), Some("Upstream Title"));
    let (starts, frames) = mp3_chain(&audio);
    assert!(starts && frames > 50, "{frames} frames");
    // A real decoder joining the relayed mount decodes it without a single error.
    let errors = ffmpeg_decode(&srv.url("/relay.mp3"), 4);
    assert!(errors.is_empty(), "ffmpeg decode errors: {errors}");
    // icecast2 counts the relay as its one listener.
    assert_eq!(ic.listeners("/origin.mp3"), Some(1));
}

#[test]
fn icecast2_relays_a_throng_mount() {
    let srv = TestServer::start("");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, _) = http_get(
        srv.addr,
        "/admin/metadata?mount=/live.mp3&mode=updinfo&song=From%20Throng",
        &[&auth],
    );
    assert_eq!(head.status, 200);
    let ic = Icecast::start(&format!(
        "<relay><server>127.0.0.1</server><port>{}</port><mount>/live.mp3</mount>\
         <local-mount>/relayed.mp3</local-mount><on-demand>0</on-demand>\
         <relay-shoutcast-metadata>1</relay-shoutcast-metadata></relay>",
        srv.addr.port()
    ));
    ic.wait_mount("/relayed.mp3");
    // icecast2 read Throng's stream headers and in-band ICY title.
    wait_until(Duration::from_secs(10), || {
        ic.stat("/relayed.mp3", "title").as_deref() == Some("From Throng")
            && ic.stat("/relayed.mp3", "server_name").as_deref() == Some("Test Stream")
    })
    .unwrap_or_else(|_| panic!("icecast2 stats: {:?}", ic.source("/relayed.mp3")));
    let errors = ffmpeg_decode(&ic.url("/relayed.mp3"), 4);
    assert!(errors.is_empty(), "ffmpeg decode errors: {errors}");
    // Throng served icecast2's relay as an ordinary listener.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rows = rt.block_on(
        srv.ctx
            .fanout
            .list(Some("/live.mp3"), throng_server::Page::FIRST),
    );
    assert!(
        rows.iter().any(|r| r
            .agent
            .as_deref()
            .is_some_and(|a| a.starts_with("Icecast 2.4"))),
        "{rows:?}"
    );
}

#[test]
fn relay_reconnects_when_the_upstream_source_returns() {
    let ic = Icecast::start("");
    let src = Source::start(ic.addr, "/origin.mp3", "PUT", 1.0);
    ic.wait_mount("/origin.mp3");
    let srv = TestServer::start(&relay_toml(ic.addr.port(), "/origin.mp3", "/relay.mp3", ""));
    let first = wait_relay(&srv, "/relay.mp3");
    assert_audio(srv.addr, "/relay.mp3", 20);
    let mut l = Listener::open(srv.addr, "/relay.mp3", false);
    l.read_for(Duration::from_millis(300));
    // The upstream source goes away: icecast2 closes the relay, the local mount ends, and with
    // no fallback its listener is closed once it has drained the queue (as Icecast 2.4.4).
    src.stop();
    wait_until(Duration::from_secs(5), || {
        srv.ctx.registry.get("/relay.mp3").is_none()
    })
    .expect("local mount must end with its upstream");
    let t = Instant::now();
    l.read_for(Duration::from_secs(5));
    assert!(t.elapsed() < Duration::from_secs(4), "listener not closed");
    // Stay away past the first retry, so at least one attempt fails (404) before it returns.
    std::thread::sleep(Duration::from_millis(1500).saturating_sub(t.elapsed()));
    let _src = Source::start(ic.addr, "/origin.mp3", "PUT", 1.0);
    wait_until(Duration::from_secs(12), || {
        srv.ctx
            .registry
            .get("/relay.mp3")
            .is_some_and(|m| m.id != first.id)
    })
    .expect("relay must reconnect on its own");
    assert_audio(srv.addr, "/relay.mp3", 20);
}

#[test]
fn on_demand_relay_connects_only_while_listened_to() {
    let ic = Icecast::start("");
    let _src = Source::start(ic.addr, "/origin.mp3", "PUT", 1.0);
    ic.wait_mount("/origin.mp3");
    let srv = TestServer::start(&relay_toml(
        ic.addr.port(),
        "/origin.mp3",
        "/od.mp3",
        "on-demand = true",
    ));
    // Nobody listens: no upstream connection, no local mount.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(ic.listeners("/origin.mp3"), Some(0));
    assert!(srv.ctx.registry.get("/od.mp3").is_none());
    assert_eq!(srv.ctx.registry.on_demand_mounts(), ["/od.mp3"]);
    // The first listener starts it and gets audio at once.
    let mut l = Listener::open(srv.addr, "/od.mp3", false);
    assert_eq!(l.head.status, 200);
    let (starts, frames) = mp3_chain(&l.read_for(Duration::from_millis(1000)));
    assert!(starts && frames > 20, "{frames} frames");
    wait_until(Duration::from_secs(5), || {
        ic.listeners("/origin.mp3") == Some(1)
    })
    .expect("icecast2 must see the relay");
    // The last listener leaves: the relay lingers a few seconds, then disconnects.
    drop(l);
    let left = Instant::now();
    wait_until(Duration::from_secs(15), || {
        ic.listeners("/origin.mp3") == Some(0)
    })
    .expect("relay must disconnect from upstream");
    let after = left.elapsed();
    assert!(
        after >= Duration::from_secs(3),
        "disconnected after {after:?}, before the linger"
    );
    assert!(srv.ctx.registry.get("/od.mp3").is_none());
    // And the next listener starts it again.
    assert_audio(srv.addr, "/od.mp3", 20);
}

#[test]
fn on_demand_relay_starts_even_when_its_fallback_is_live() {
    // Icecast 2.4.4 `source_find_mount` stops at a reserved on-demand relay: a listener of it
    // starts the relay rather than being served its (live) fallback for good.
    let origin = TestServer::start("");
    let _src = Source::start(origin.addr, "/live.mp3", "PUT", 1.0);
    origin.wait_mount("/live.mp3");
    let slave = TestServer::start(&format!(
        "{}[[mount]]\nname = \"/od.mp3\"\nfallback-mount = \"/backup.mp3\"\n[[mount]]\nname = \"/backup.mp3\"\nfile = {:?}\n",
        relay_toml(origin.addr.port(), "/live.mp3", "/od.mp3", "on-demand = true"),
        asset("demo.mp3").display().to_string()
    ));
    slave.wait_mount("/backup.mp3");
    let mut l = Listener::open(slave.addr, "/od.mp3", false);
    assert_eq!(l.head.status, 200);
    // The relay connects on this request: on a loaded box its first audio may take a while.
    let mut body = Vec::new();
    let start = Instant::now();
    while mp3_chain(&body).1 <= 5 && start.elapsed() < Duration::from_secs(10) {
        body.extend(l.read_for(Duration::from_millis(250)));
    }
    assert!(mp3_chain(&body).1 > 5, "{} frames", mp3_chain(&body).1);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rows = rt.block_on(slave.ctx.fanout.list(None, throng_server::Page::FIRST));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].mount, "/od.mp3", "served by the fallback instead");
    assert_eq!(
        wait_relay(&slave, "/od.mp3")
            .listeners
            .load(Ordering::Relaxed),
        1
    );
}

#[test]
fn throng_slave_relays_the_mounts_of_an_icecast2_master() {
    let ic = Icecast::start("");
    let _a = Source::start(ic.addr, "/a.mp3", "PUT", 1.0);
    let _b = Source::start(ic.addr, "/b.mp3", "PUT", 1.0);
    ic.wait_mount("/a.mp3");
    ic.wait_mount("/b.mp3");
    let srv = TestServer::start(&format!(
        "[master]\nserver = \"127.0.0.1\"\nport = {}\nusername = \"relay\"\npassword = \"{RELAY_PW}\"\nupdate-interval = 1\n",
        ic.addr.port()
    ));
    wait_relay(&srv, "/a.mp3");
    let b = wait_relay(&srv, "/b.mp3");
    // Master relays ask for metadata: titles set on the master reach the slave.
    ic.set_title("/b.mp3", "Master Title");
    wait_until(Duration::from_secs(10), || b.title() == "Master Title")
        .unwrap_or_else(|_| panic!("title: {:?}", b.title()));
    assert_audio(srv.addr, "/a.mp3", 20);
    assert_eq!(ic.listeners("/a.mp3"), Some(1));
}

#[test]
fn a_wrong_master_password_relays_nothing() {
    let ic = Icecast::start("");
    let _a = Source::start(ic.addr, "/a.mp3", "PUT", 1.0);
    ic.wait_mount("/a.mp3");
    let srv = TestServer::start(&format!(
        "[master]\nserver = \"127.0.0.1\"\nport = {}\npassword = \"wrong\"\nupdate-interval = 1\n",
        ic.addr.port()
    ));
    // The slave keeps polling (every second) and icecast2 keeps refusing it.
    let refusals = || {
        std::fs::read_to_string(ic.dir.join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"GET /admin/streamlist.txt HTTP/1.0\" 401"))
            .count()
    };
    wait_until(Duration::from_secs(10), || refusals() >= 2).unwrap_or_else(|_| {
        panic!(
            "no refused stream-list polls in icecast2's access log: {:?}",
            std::fs::read_to_string(ic.dir.join("access.log"))
        )
    });
    assert!(srv.ctx.registry.list().is_empty());
    assert_eq!(ic.listeners("/a.mp3"), Some(0));
}

/// A tiny HTTP server: each connection's request head is recorded and handed, with the
/// socket, to `handler` on its own thread. Stops accepting on drop.
struct Mock {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Mock {
    fn start(handler: impl Fn(&str, TcpStream) + Send + Sync + 'static) -> Mock {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h2, s2) = (heads.clone(), stop.clone());
        let handler = Arc::new(handler);
        std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                let Ok((mut s, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                h2.lock().unwrap().push(head.clone());
                let handler = handler.clone();
                std::thread::spawn(move || handler(&head, s));
            }
        });
        Mock { addr, heads, stop }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn throng_relays_throng_and_listeners_ride_out_an_upstream_drop_on_the_fallback() {
    let origin = TestServer::start("");
    let src = Source::start(origin.addr, "/live.mp3", "PUT", 1.0);
    origin.wait_mount("/live.mp3");
    let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, _) = http_get(
        origin.addr,
        "/admin/metadata?mount=/live.mp3&mode=updinfo&song=Origin%20Song",
        &[&auth],
    );
    assert_eq!(head.status, 200);
    let backup = asset("demo.mp3");
    let slave = TestServer::start(&format!(
        "server-id = \"Throng slave\"\n{}[[mount]]\nname = \"/copy.mp3\"\nfallback-mount = \"/backup.mp3\"\nfallback-override = true\n[[mount]]\nname = \"/backup.mp3\"\nfile = {:?}\n",
        relay_toml(origin.addr.port(), "/live.mp3", "/copy.mp3", ""),
        backup.display().to_string()
    ));
    let copy = wait_relay(&slave, "/copy.mp3");
    assert_eq!(copy.description().info.name, "Test Stream");
    assert!(copy
        .description()
        .stream_headers
        .contains(&("icy-br".to_owned(), "64".to_owned())));
    wait_until(Duration::from_secs(5), || copy.title() == "Origin Song")
        .unwrap_or_else(|_| panic!("title: {:?}", copy.title()));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rows = rt.block_on(
        origin
            .ctx
            .fanout
            .list(Some("/live.mp3"), throng_server::Page::FIRST),
    );
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].agent.as_deref(), Some("Throng slave"));

    let mut l = Listener::open(slave.addr, "/copy.mp3", true);
    let metaint: usize = l.head.header("icy-metaint").unwrap().parse().unwrap();
    let mut body = l.read_for(Duration::from_millis(800));
    // The origin's source drops: the listener moves to the fallback and keeps receiving.
    src.stop();
    let on_fallback = |slave: &TestServer| {
        rt.block_on(slave.ctx.fanout.list(None, throng_server::Page::FIRST))
            .iter()
            .any(|r| r.mount == "/backup.mp3")
    };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(8) && !on_fallback(&slave) {
        body.extend(l.read_for(Duration::from_millis(200)));
    }
    assert!(on_fallback(&slave), "listener never moved to the fallback");
    let during = l.read_for(Duration::from_millis(1500));
    assert!(
        during.len() > 4000,
        "only {} bytes on the fallback",
        during.len()
    );
    body.extend(during);
    // The source returns: the relay reconnects and fallback-override brings the listener back.
    let _src = Source::start(origin.addr, "/live.mp3", "PUT", 1.0);
    let t = Instant::now();
    let back = |slave: &TestServer| {
        rt.block_on(slave.ctx.fanout.list(None, throng_server::Page::FIRST))
            .iter()
            .any(|r| r.mount == "/copy.mp3" && r.requested_mount == "/copy.mp3")
    };
    while t.elapsed() < Duration::from_secs(12) && !back(&slave) {
        body.extend(l.read_for(Duration::from_millis(200)));
    }
    assert!(back(&slave), "listener never came back to the relay");
    body.extend(l.read_for(Duration::from_millis(500)));
    // One unbroken ICY stream throughout: origin title, then the fallback file's.
    let (titles, audio) = demux(&body, metaint);
    assert_eq!(titles.first().map(String::as_str), Some("Origin Song"));
    assert!(titles.iter().any(|t| t == "demo"), "{titles:?}");
    assert!(mp3_chain(&audio).1 > 100);
}

#[test]
fn relay_sends_icecast_request_and_follows_a_redirect() {
    let origin = TestServer::start("");
    let _src = Source::start(origin.addr, "/live.mp3", "PUT", 1.0);
    origin.wait_mount("/live.mp3");
    let target = origin.url("/live.mp3");
    let mock = Mock::start(move |_, mut s| {
        let _ = write!(
            s,
            "HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n"
        );
    });
    let slave = TestServer::start(&format!(
        "server-id = \"Throng relay test\"\n{}",
        relay_toml(
            mock.addr.port(),
            "/start.mp3",
            "/r.mp3",
            "username = \"u\"\npassword = \"p w\""
        )
    ));
    wait_relay(&slave, "/r.mp3");
    let head = mock.heads().remove(0);
    let expected = format!(
        "GET /start.mp3 HTTP/1.0\r\nUser-Agent: Throng relay test\r\nHost: 127.0.0.1:{}\r\nIcy-MetaData: 1\r\nAuthorization: {}\r\n\r\n",
        mock.addr.port(),
        basic_authorization("u", "p w")
    );
    assert_eq!(head, expected);
    assert_audio(slave.addr, "/r.mp3", 20);
}

#[test]
fn relay_reads_an_icy_200_upstream_and_its_inline_titles() {
    // A SHOUTcast-style upstream: `ICY 200 OK`, metaint 8192, titles in-band.
    let mock = Mock::start(|_, mut s| {
        let _ = s.write_all(
            b"ICY 200 OK\r\nicy-name:Shout Mock\r\nicy-br:64\r\nicy-metaint:8192\r\ncontent-type:audio/mpeg\r\n\r\n",
        );
        let audio: Vec<u8> = demo_frames().iter().flat_map(|f| f.data.to_vec()).collect();
        let block = metadata_block("Mock Title", None);
        let mut sent = 0usize;
        let start = Instant::now();
        for (i, piece) in audio.chunks(8192).cycle().enumerate() {
            let mut out = piece.to_vec();
            out.extend_from_slice(if i == 0 { &block[..] } else { &[0u8][..] });
            if piece.len() < 8192 || s.write_all(&out).is_err() {
                // Keep exact 8192-byte intervals: a short last piece would shift them.
                if piece.len() < 8192 {
                    continue;
                }
                return;
            }
            sent += 8192;
            // Pace at 4× 64 kbit/s after a first burst of 64 KB.
            let due = Duration::from_secs_f64(sent.saturating_sub(65536) as f64 / 32000.0);
            if let Some(w) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(w);
            }
            if start.elapsed() > Duration::from_secs(30) {
                return;
            }
        }
    });
    let srv = TestServer::start(&relay_toml(mock.addr.port(), "/", "/shout.mp3", ""));
    let m = wait_relay(&srv, "/shout.mp3");
    assert_eq!(m.description().info.name, "Shout Mock");
    wait_until(Duration::from_secs(5), || m.title() == "Mock Title")
        .unwrap_or_else(|_| panic!("title: {:?}", m.title()));
    assert_audio(srv.addr, "/shout.mp3", 20);
}

#[test]
fn slave_stops_relays_whose_line_leaves_the_stream_list() {
    let origin = TestServer::start("");
    let _x = Source::start(origin.addr, "/x.mp3", "PUT", 1.0);
    let _y = Source::start(origin.addr, "/y.mp3", "PUT", 1.0);
    origin.wait_mount("/x.mp3");
    origin.wait_mount("/y.mp3");
    let list = Arc::new(Mutex::new(format!(
        "{}\r\n{}\r\n",
        origin.url("/x.mp3"),
        origin.url("/y.mp3")
    )));
    let list2 = list.clone();
    let want = basic_authorization("relay", "s3cret");
    let master = Mock::start(move |head, mut s| {
        let ok = head.starts_with("GET /admin/streamlist.txt HTTP/1.0\r\n")
            && head.contains(&format!("Authorization: {want}\r\n"));
        let body = list2.lock().unwrap().clone();
        let _ = if ok {
            write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n{body}"
            )
        } else {
            write!(s, "HTTP/1.0 401 Authentication Required\r\n\r\n")
        };
    });
    let slave = TestServer::start(&format!(
        "[master]\nserver = \"127.0.0.1\"\nport = {}\npassword = \"s3cret\"\nupdate-interval = 1\n",
        master.addr.port()
    ));
    wait_relay(&slave, "/x.mp3");
    wait_relay(&slave, "/y.mp3");
    // /y.mp3 leaves the list while its origin stays live: the slave stops relaying it.
    *list.lock().unwrap() = format!("{}\r\n", origin.url("/x.mp3"));
    wait_until(Duration::from_secs(5), || {
        slave.ctx.registry.get("/y.mp3").is_none()
    })
    .expect("relay of an unlisted stream must stop");
    assert!(origin.ctx.registry.get("/y.mp3").is_some());
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        slave.ctx.registry.get("/y.mp3").is_none(),
        "must stay stopped"
    );
    assert!(slave.ctx.registry.get("/x.mp3").is_some());
    let rt = tokio::runtime::Runtime::new().unwrap();
    assert!(rt
        .block_on(
            origin
                .ctx
                .fanout
                .list(Some("/y.mp3"), throng_server::Page::FIRST)
        )
        .is_empty());
    assert!(master.heads().len() >= 2, "the list is polled every second");
}

#[test]
fn an_on_demand_relay_in_a_fallback_chain_is_started_for_its_listeners() {
    let origin = TestServer::start("");
    let _src = Source::start(origin.addr, "/up.mp3", "PUT", 1.0);
    origin.wait_mount("/up.mp3");
    let edge = TestServer::start(&format!(
        "{}[[mount]]\nname = \"/live.mp3\"\nfallback-mount = \"/od.mp3\"\n",
        relay_toml(origin.addr.port(), "/up.mp3", "/od.mp3", "on-demand = true")
    ));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        edge.ctx.registry.get("/od.mp3").is_none(),
        "idle until needed"
    );
    // A listener of /live.mp3, which has no source: its fallback relay is started for it.
    let mut a = Listener::open(edge.addr, "/live.mp3", false);
    assert_eq!(a.head.status, 200);
    assert!(a.read_for(Duration::from_millis(1500)).len() > 4000);
    assert!(edge.mount_status("/od.mp3").is_some());
    drop(a);
    wait_until(Duration::from_secs(15), || {
        edge.ctx.registry.get("/od.mp3").is_none()
    })
    .expect("the relay stops once nobody listens");
    // Now /live.mp3 has a source; when it stops, its listener waits for the relay to start
    // and moves there instead of being closed.
    let live = Source::start(edge.addr, "/live.mp3", "SOURCE", 1.0);
    edge.wait_mount("/live.mp3");
    let mut b = Listener::open(edge.addr, "/live.mp3", false);
    b.read_for(Duration::from_millis(500));
    live.stop();
    let after = b.read_for(Duration::from_secs(4));
    assert!(
        after.len() > 16_000,
        "kept playing from the relay: {} bytes",
        after.len()
    );
    assert_eq!(edge.mount_status("/od.mp3").unwrap()["listeners"], 1);
}
