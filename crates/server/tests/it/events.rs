//! `/api/v1/events`, the now-playing event stream, over real sockets: the snapshot on connect
//! and its fields, title, listeners (coalesced), mount start and stop events, hidden mounts,
//! the `?mount=` filter, `Last-Event-ID` resume, heartbeats, a stalled subscriber dropped
//! without harming another, the headers and CORS, and a relay edge re-emitting its origin's
//! titles.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;
use throng_proto::auth::basic_authorization;
use throng_proto::http::{parse_response_head, ResponseHead};
use throng_proto::sse::{Event, Item, Parser};

use crate::support::{http_get, status_of, wait_until, Source, TestServer, ADMIN_PW};

/// An open event-stream subscriber.
struct Sub {
    stream: TcpStream,
    head: ResponseHead,
    parser: Parser,
    items: std::collections::VecDeque<Item>,
    raw: Vec<u8>,
    closed: bool,
}

impl Sub {
    fn open(addr: SocketAddr, target: &str, headers: &[&str]) -> Sub {
        let mut s = TcpStream::connect(addr).unwrap();
        let mut req =
            format!("GET {target} HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n");
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = s.read(&mut chunk).expect("response head");
            assert!(
                n > 0,
                "closed before head: {:?}",
                String::from_utf8_lossy(&buf)
            );
            buf.extend_from_slice(&chunk[..n]);
            if let Some((head, len)) = parse_response_head(&buf).unwrap() {
                let mut sub = Sub {
                    stream: s,
                    head,
                    parser: Parser::new(),
                    items: Default::default(),
                    raw: Vec::new(),
                    closed: false,
                };
                let rest = buf[len..].to_vec();
                sub.feed(&rest);
                return sub;
            }
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.raw.extend_from_slice(bytes);
        let items = &mut self.items;
        self.parser.push(bytes, |i| items.push_back(i));
    }

    /// The next item, waiting at most `d`.
    fn next_item(&mut self, d: Duration) -> Option<Item> {
        let end = Instant::now() + d;
        loop {
            if let Some(i) = self.items.pop_front() {
                return Some(i);
            }
            let now = Instant::now();
            if now >= end || self.closed {
                return None;
            }
            self.stream.set_read_timeout(Some(end - now)).unwrap();
            let mut chunk = [0u8; 16384];
            match self.stream.read(&mut chunk) {
                Ok(0) => self.closed = true,
                Ok(n) => self.feed(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => self.closed = true,
            }
        }
    }

    /// The next event, skipping comments and `retry:`, waiting at most `d`.
    fn next_event(&mut self, d: Duration) -> Option<Event> {
        let end = Instant::now() + d;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.next_item(left)? {
                Item::Event(e) => return Some(e),
                _ => continue,
            }
        }
    }

    /// The first event for which `pred` holds within `d` (others are skipped).
    fn wait_event(
        &mut self,
        d: Duration,
        pred: impl Fn(&Event, &Value) -> bool,
    ) -> Option<(Event, Value)> {
        let end = Instant::now() + d;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let e = self.next_event(left)?;
            let v: Value = serde_json::from_str(&e.data).expect("data is JSON");
            if pred(&e, &v) {
                return Some((e, v));
            }
        }
    }

    /// Every event arriving within `d`.
    fn events_for(&mut self, d: Duration) -> Vec<(Event, Value)> {
        let end = Instant::now() + d;
        let mut out = Vec::new();
        while let Some(e) = self.next_event(end.saturating_duration_since(Instant::now())) {
            let v = serde_json::from_str(&e.data).expect("data is JSON");
            out.push((e, v));
        }
        out
    }
}

fn set_title(addr: SocketAddr, mount: &str, song: &str) {
    let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, _) = http_get(
        addr,
        &format!("/admin/metadata?mount={mount}&mode=updinfo&song={song}"),
        &[&auth],
    );
    assert_eq!(head.status, 200);
}

const SECS: Duration = Duration::from_secs(5);

/// Waits until mount `name` is live and its start was published as an event (from then on
/// each title change is a `title` event of its own).
fn wait_published(srv: &TestServer, name: &str) {
    srv.wait_mount(name);
    wait_until(SECS, || srv.ctx.events.has_events_of(name))
        .unwrap_or_else(|_| panic!("{name}: no event"));
}

#[test]
fn snapshot_headers_cors_and_title_events_leave_hidden_mounts_out() {
    let srv = TestServer::start("[[mount]]\nname = \"/hidden.mp3\"\nhidden = true\n");
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    let _h = Source::start(srv.addr, "/hidden.mp3", "PUT", 1.0);
    wait_published(&srv, "/a.mp3");
    srv.wait_mount("/hidden.mp3");
    set_title(srv.addr, "/a.mp3", "Artist%20-%20First");
    wait_until(SECS, || {
        srv.ctx.registry.get("/a.mp3").unwrap().title() == "Artist - First"
    })
    .unwrap();

    let mut sub = Sub::open(
        srv.addr,
        "/api/v1/events",
        &["Origin: http://other.example"],
    );
    let h = &sub.head;
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-type"), Some("text/event-stream"));
    assert_eq!(h.header("cache-control"), Some("no-cache"));
    assert_eq!(h.header("x-accel-buffering"), Some("no"));
    assert_eq!(h.header("access-control-allow-origin"), Some("*"));
    let acao = h
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("access-control-allow-origin"))
        .count();
    assert_eq!(acao, 1);
    assert!(h.header("content-length").is_none());
    // The body opens with the reconnection delay.
    assert_eq!(sub.next_item(SECS), Some(Item::Retry(3000)));
    assert!(sub.raw.starts_with(b"retry: 3000\n"));

    let snap = sub.next_event(SECS).expect("snapshot");
    assert_eq!(snap.event, "mount");
    let id: u64 = snap.id.as_deref().unwrap().parse().unwrap();
    assert!(id > 0);
    let v: Value = serde_json::from_str(&snap.data).unwrap();
    assert_eq!(v["mount"], "/a.mp3");
    assert_eq!(v["name"], "Test Stream");
    assert_eq!(v["title"], "Artist - First");
    assert_eq!(v["artist"], Value::Null);
    assert_eq!(v["listeners"], 0);
    assert_eq!(v["bitrate"], 64);
    assert_eq!(v["content_type"], "audio/mpeg");
    assert_eq!(
        v["listenurl"],
        format!("http://localhost:{}/a.mp3", srv.addr.port())
    );
    for k in ["description", "genre"] {
        assert!(v.get(k).is_some(), "{k}");
    }
    assert!(!snap.data.contains('\n'));

    // A title change on the hidden mount shows nothing; one on the public mount an event.
    set_title(srv.addr, "/hidden.mp3", "Secret");
    set_title(srv.addr, "/a.mp3", "Artist%20-%20Second");
    let (e, v) = sub
        .wait_event(SECS, |e, _| e.event == "title")
        .unwrap_or_else(|| panic!("no title event: {}", String::from_utf8_lossy(&sub.raw)));
    assert!(
        v["at_unix"].as_i64().is_some_and(|t| t > 1_700_000_000),
        "{v}"
    );
    let mut v = v;
    v.as_object_mut().unwrap().remove("at_unix");
    assert_eq!(
        v,
        serde_json::json!({"mount": "/a.mp3", "title": "Artist - Second", "artist": null, "artwork": null})
    );
    let id2: u64 = e.id.as_deref().unwrap().parse().unwrap();
    assert!(id2 > id);
    for (_, v) in sub.events_for(Duration::from_millis(500)) {
        assert_ne!(v["mount"], "/hidden.mp3");
    }
    assert!(!String::from_utf8_lossy(&sub.raw).contains("hidden"));

    // Preflight and a state-changing method: the stream is public and read-only.
    let pre = crate::support::exchange(
        srv.addr,
        b"OPTIONS /api/v1/events HTTP/1.1\r\nHost: t\r\nOrigin: http://o\r\nAccess-Control-Request-Method: GET\r\n\r\n",
    );
    let (ph, _) = parse_response_head(&pre).unwrap().unwrap();
    assert_eq!(ph.status, 204);
    assert_eq!(ph.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        status_of(
            srv.addr,
            b"POST /api/v1/events HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"
        ),
        405
    );
    // HEAD: the head alone.
    let out =
        crate::support::exchange(srv.addr, b"HEAD /api/v1/events HTTP/1.1\r\nHost: t\r\n\r\n");
    let (hh, len) = parse_response_head(&out).unwrap().unwrap();
    assert_eq!(hh.status, 200);
    assert_eq!(out.len(), len);
    // Counted in /metrics.
    let (_, body) = http_get(srv.addr, "/metrics", &[]);
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("throng_event_subscribers 1"), "{text}");
    assert!(text.contains("throng_events_sent_total"), "{text}");
    assert!(
        text.contains("throng_event_subscribers_dropped_total 0"),
        "{text}"
    );
}

#[test]
fn listener_counts_are_coalesced_to_one_event_a_second() {
    let srv = TestServer::start("");
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    wait_published(&srv, "/a.mp3");
    let mut sub = Sub::open(srv.addr, "/api/v1/events", &[]);
    sub.wait_event(SECS, |e, _| e.event == "mount").unwrap();
    // Five listeners join within half a second: five changes.
    let mut ls = Vec::new();
    for _ in 0..5 {
        ls.push(crate::support::Listener::open(srv.addr, "/a.mp3", false));
        std::thread::sleep(Duration::from_millis(100));
    }
    let events: Vec<(Event, Value)> = sub
        .events_for(Duration::from_millis(2500))
        .into_iter()
        .filter(|(e, _)| e.event == "listeners")
        .collect();
    assert!(!events.is_empty(), "no listeners event");
    assert!(events.len() < 5, "not coalesced: {} events", events.len());
    let last = &events.last().unwrap().1;
    assert_eq!(
        last,
        &serde_json::json!({"mount": "/a.mp3", "listeners": 5})
    );
}

#[test]
fn mount_start_and_stop_events() {
    let srv = TestServer::start("");
    let mut sub = Sub::open(srv.addr, "/api/v1/events", &[]);
    // No mount: no snapshot event.
    assert_eq!(sub.next_item(SECS), Some(Item::Retry(3000)));
    assert!(sub.next_event(Duration::from_millis(300)).is_none());
    let src = Source::start(srv.addr, "/new.mp3", "PUT", 1.0);
    let (_, v) = sub
        .wait_event(SECS, |e, _| e.event == "mount")
        .expect("mount event");
    assert_eq!(v["mount"], "/new.mp3");
    assert_eq!(v["content_type"], "audio/mpeg");
    src.stop();
    let (_, v) = sub
        .wait_event(Duration::from_secs(15), |e, _| e.event == "mount_stop")
        .expect("mount_stop event");
    assert_eq!(v, serde_json::json!({"mount": "/new.mp3"}));
}

#[test]
fn the_mount_filter_and_its_404s() {
    let srv = TestServer::start("[[mount]]\nname = \"/hidden.mp3\"\nhidden = true\n");
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    let _b = Source::start(srv.addr, "/b.mp3", "PUT", 1.0);
    let _h = Source::start(srv.addr, "/hidden.mp3", "PUT", 1.0);
    for m in ["/a.mp3", "/b.mp3"] {
        wait_published(&srv, m);
    }
    srv.wait_mount("/hidden.mp3");
    let mut sub = Sub::open(srv.addr, "/api/v1/events?mount=/b.mp3", &[]);
    let snap = sub.next_event(SECS).unwrap();
    assert_eq!(snap.event, "mount");
    assert!(snap.data.contains("\"/b.mp3\""));
    set_title(srv.addr, "/a.mp3", "Not%20for%20b");
    set_title(srv.addr, "/b.mp3", "For%20b");
    let (_, v) = sub.wait_event(SECS, |e, _| e.event == "title").unwrap();
    assert_eq!(v["mount"], "/b.mp3");
    assert_eq!(v["title"], "For b");
    assert!(!String::from_utf8_lossy(&sub.raw).contains("/a.mp3"));

    for target in [
        "/api/v1/events?mount=/nothing.mp3",
        "/api/v1/events?mount=/hidden.mp3",
    ] {
        let (h, body) = http_get(srv.addr, target, &[]);
        assert_eq!(h.status, 404, "{target}");
        assert!(h
            .header("content-type")
            .unwrap()
            .starts_with("application/json"));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["ok"], false);
    }
}

#[test]
fn last_event_id_replays_retained_events_else_the_snapshot() {
    let srv = TestServer::start("");
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    wait_published(&srv, "/a.mp3");
    let mut sub = Sub::open(srv.addr, "/api/v1/events", &[]);
    sub.wait_event(SECS, |e, _| e.event == "mount").unwrap();
    set_title(srv.addr, "/a.mp3", "One");
    let (one, _) = sub
        .wait_event(SECS, |e, v| e.event == "title" && v["title"] == "One")
        .unwrap();
    set_title(srv.addr, "/a.mp3", "Two");
    let (two, _) = sub
        .wait_event(SECS, |e, v| e.event == "title" && v["title"] == "Two")
        .unwrap();
    let one_id = one.id.unwrap();

    // Resuming after "One": only "Two" is replayed, no snapshot.
    for (target, header) in [
        (
            "/api/v1/events".to_owned(),
            format!("Last-Event-ID: {one_id}"),
        ),
        (
            format!("/api/v1/events?lastEventId={one_id}"),
            "X-None: 1".to_owned(),
        ),
    ] {
        let mut r = Sub::open(srv.addr, &target, &[&header]);
        let e = r.next_event(SECS).expect("replayed event");
        assert_eq!(e.event, "title", "{target}");
        assert_eq!(e.id, two.id);
        assert!(e.data.contains("\"Two\""));
    }
    // An id this process never had (or one older than its ring): the snapshot.
    let mut r = Sub::open(srv.addr, "/api/v1/events", &["Last-Event-ID: 12"]);
    let e = r.next_event(SECS).unwrap();
    assert_eq!(e.event, "mount");
    assert!(e.data.contains("\"Two\""));
}

#[test]
fn idle_subscribers_get_heartbeats() {
    let srv = TestServer::start("[events]\nheartbeat-ms = 200\n");
    let mut sub = Sub::open(srv.addr, "/api/v1/events", &[]);
    let mut beats = 0;
    let end = Instant::now() + Duration::from_secs(3);
    while beats < 2 && Instant::now() < end {
        if let Some(Item::Comment(c)) = sub.next_item(Duration::from_millis(500)) {
            assert_eq!(c, "heartbeat");
            beats += 1;
        }
    }
    assert_eq!(beats, 2);
    assert!(String::from_utf8_lossy(&sub.raw).contains("\n: heartbeat\n\n"));
}

#[test]
fn a_stalled_subscriber_is_dropped_without_harming_another() {
    let srv = TestServer::start("[events]\nstall-timeout-ms = 300\nsndbuf = 4096\n");
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    wait_published(&srv, "/a.mp3");
    // The stalled one has a small receive buffer and never reads.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&srv.addr.into()).unwrap();
    let mut stalled: TcpStream = sock.into();
    stalled
        .write_all(b"GET /api/v1/events HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut healthy = Sub::open(srv.addr, "/api/v1/events", &[]);
    wait_until(SECS, || srv.ctx.metrics.event_subscribers.get() == 2).unwrap();
    let long = "x".repeat(3000);
    let mut n = 0;
    while srv.ctx.metrics.event_subscribers_dropped.get() == 0 && n < 200 {
        n += 1;
        set_title(srv.addr, "/a.mp3", &format!("{n}-{long}"));
        std::thread::sleep(Duration::from_millis(60));
        // The healthy subscriber keeps reading.
        while healthy.next_item(Duration::from_millis(1)).is_some() {}
    }
    assert_eq!(srv.ctx.metrics.event_subscribers_dropped.get(), 1);
    assert_eq!(srv.ctx.metrics.event_subscribers.get(), 1);
    // The healthy one still gets every change.
    set_title(srv.addr, "/a.mp3", "After");
    healthy
        .wait_event(SECS, |e, v| e.event == "title" && v["title"] == "After")
        .expect("the healthy subscriber got the next title");
    // The stalled one was closed: reading what was queued ends at end of stream.
    stalled.set_read_timeout(Some(SECS)).unwrap();
    let mut rest = Vec::new();
    let r = stalled.read_to_end(&mut rest);
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn a_relay_edge_re_emits_its_origin_titles() {
    let origin = TestServer::start("");
    let _src = Source::start(origin.addr, "/live.mp3", "PUT", 1.0);
    wait_published(&origin, "/live.mp3");
    let edge = TestServer::start(&format!(
        "[[relay]]\nserver = \"127.0.0.1\"\nport = {}\nmount = \"/live.mp3\"\nlocal-mount = \"/live.mp3\"\n",
        origin.addr.port()
    ));
    wait_published(&edge, "/live.mp3");
    let mut sub = Sub::open(edge.addr, "/api/v1/events?mount=/live.mp3", &[]);
    sub.wait_event(SECS, |e, _| e.event == "mount").unwrap();
    set_title(origin.addr, "/live.mp3", "From%20the%20origin");
    let (_, v) = sub
        .wait_event(Duration::from_secs(10), |e, v| {
            e.event == "title" && v["title"] == "From the origin"
        })
        .expect("the edge re-emits the origin's title");
    assert_eq!(v["mount"], "/live.mp3");
}

#[test]
fn a_subscriber_of_a_quiet_mount_gets_heartbeats_while_others_change() {
    let srv = TestServer::start("[events]\nheartbeat-ms = 200\n");
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    let _b = Source::start(srv.addr, "/b.mp3", "PUT", 1.0);
    wait_published(&srv, "/a.mp3");
    wait_published(&srv, "/b.mp3");
    let mut sub = Sub::open(srv.addr, "/api/v1/events?mount=/b.mp3", &[]);
    let addr = srv.addr;
    let busy = std::thread::spawn(move || {
        for i in 0..15 {
            set_title(addr, "/a.mp3", &format!("busy-{i}"));
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    // Two heartbeats while the other mount still changes (it does for at least 1.5 s).
    let mut beats = 0;
    let end = Instant::now() + Duration::from_millis(1300);
    while beats < 2 && Instant::now() < end {
        let left = end.saturating_duration_since(Instant::now());
        if let Some(Item::Comment(c)) = sub.next_item(left) {
            assert_eq!(c, "heartbeat");
            beats += 1;
        }
    }
    busy.join().unwrap();
    assert_eq!(beats, 2);
    assert!(!String::from_utf8_lossy(&sub.raw).contains("busy-"));
}

#[test]
fn a_server_shutting_down_closes_subscribers_without_stopping_its_mounts() {
    // As after a binary upgrade, where the mounts live on in the new process: subscribers
    // are closed (they reconnect) and are not told the mounts stopped.
    let srv = TestServer::start("");
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    wait_published(&srv, "/a.mp3");
    let mut sub = Sub::open(srv.addr, "/api/v1/events", &[]);
    sub.wait_event(SECS, |e, _| e.event == "mount").unwrap();
    drop(srv);
    while sub.next_item(SECS).is_some() {}
    assert!(sub.closed, "the subscriber was closed");
    assert!(!String::from_utf8_lossy(&sub.raw).contains("mount_stop"));
}

/// Issue 22: an event subscriber is an audience session like a listener: its access-log line
/// is written when it ends, with its bytes and duration, and ends with the shared end-reason
/// vocabulary (`client:hung-up` when it closes; `shutdown:shutdown` for one still connected
/// when the server stops), and `throng_session_ends_total{path="events"}` counts it.
#[test]
fn a_subscriber_is_logged_when_it_ends_with_its_end_reason() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let srv = crate::support::logged_server(&log, "");
    let sub = Sub::open(srv.addr, "/api/v1/events", &["User-Agent: ev-test"]);
    assert_eq!(sub.head.status, 200);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("/api/v1/events"),
        "not logged while connected"
    );
    drop(sub);
    let line = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .find(|l| l.contains("\"GET /api/v1/events HTTP/1.1\" 200"))
            .map(str::to_owned)
    };
    wait_until(Duration::from_secs(10), || line().is_some()).expect("logged when it ends");
    let line = line().unwrap();
    assert!(line.ends_with(" client:hung-up"), "{line}");
    assert!(line.contains("\"ev-test\""), "{line}");
    let (_, body) = http_get(srv.addr, "/metrics", &[&crate::support::admin_header()]);
    let metrics = String::from_utf8_lossy(&body);
    assert!(
        metrics.contains("throng_session_ends_total{path=\"events\",reason=\"client:hung-up\"} 1"),
        "{metrics}"
    );
    let _open = Sub::open(srv.addr, "/api/v1/events", &[]);
    drop(srv);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("/api/v1/events") && l.ends_with(" shutdown:shutdown")),
        "{text}"
    );
}
