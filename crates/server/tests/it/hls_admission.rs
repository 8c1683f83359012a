//! HLS sessions are real listeners before they count (issue 28, part 3), against a server in
//! a child process whose memory is measured: 10,000 playlist requests without a segment from
//! one address (127.0.0.2, each with a 6 KB User-Agent) add under 10 MiB and leave
//! `max-listeners` room for a real HLS player and an ICY listener from other addresses; and on
//! a cache's keep-alive connection each request counts for its own client.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use throng_proto::hls::playlist::parse;

use crate::support::*;

/// GET `path` from 127.0.0.`last` (HTTP/1.0, connection closed): status and body.
fn get_from(last: u8, addr: SocketAddr, path: &str, extra: &str) -> (u16, Vec<u8>) {
    let mut s = connect_from(last, addr);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!("GET {path} HTTP/1.0\r\nHost: t\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let (head, len) = throng_proto::http::parse_response_head(&buf)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no response to {path}: {buf:?}"));
    (head.status, buf[len..].to_vec())
}

/// `/api/v1/status` of the server at `addr`: the `listeners` of mount `name`.
fn listeners(addr: SocketAddr, name: &str) -> u64 {
    let (head, body) = http_get(addr, "/api/v1/status", &[]);
    assert_eq!(head.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    v["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mount"] == name)
        .and_then(|m| m["listeners"].as_u64())
        .expect("the mount in the status")
}

/// An HLS player from 127.0.0.`last`: multivariant playlist, media playlist, its newest
/// segment; the statuses of the three.
fn play_once(last: u8, addr: SocketAddr) -> [u16; 3] {
    let (a, master) = get_from(last, addr, "/hls/demo.mp3/index.m3u8", "");
    let variant = parse(std::str::from_utf8(&master).unwrap())
        .and_then(|p| p.variant)
        .unwrap_or_default();
    let (b, media) = get_from(last, addr, &format!("/hls/demo.mp3/{variant}"), "");
    let uri = parse(std::str::from_utf8(&media).unwrap_or(""))
        .and_then(|p| p.segments.last().map(|s| s.1.clone()))
        .unwrap_or_default();
    let dir = variant.strip_suffix("index.m3u8").unwrap_or("");
    let (c, seg) = get_from(last, addr, &format!("/hls/demo.mp3/{dir}{uri}"), "");
    assert!(c != 200 || seg.len() > 1000, "a segment's audio");
    [a, b, c]
}

#[test]
fn ten_thousand_playlists_without_segments_cost_little_and_leave_room_for_listeners() {
    let child = ChildServer::start(&format!(
        "[hls]\nsegment-seconds = 1\n\
         [[mount]]\nname = \"/demo.mp3\"\nfile = {:?}\nmax-listeners = 2\n",
        asset("demo.mp3")
    ));
    let addr = child.addr;
    // Packaged, with a segment; a warm-up of the flood's own requests (first-use allocations
    // in the baseline).
    wait_until(Duration::from_secs(30), || {
        let (s, body) = get_from(9, addr, "/hls/demo.mp3/index.m3u8", "");
        s == 200 && {
            let v = parse(std::str::from_utf8(&body).unwrap()).unwrap().variant;
            let media = get_from(9, addr, &format!("/hls/demo.mp3/{}", v.unwrap()), "").1;
            parse(std::str::from_utf8(&media).unwrap()).is_some_and(|p| !p.segments.is_empty())
        }
    })
    .expect("/demo.mp3 served as HLS");
    let agent = format!("User-Agent: {}\r\n", "A".repeat(6000));
    for _ in 0..100 {
        get_from(2, addr, "/hls/demo.mp3/index.m3u8", &agent);
    }
    std::thread::sleep(Duration::from_secs(4));
    let before = child.rss_kib();

    // The flood: 10,000 multivariant playlist requests from 127.0.0.2, four at a time.
    let flood: Vec<std::thread::JoinHandle<(u32, u32)>> = (0..4)
        .map(|_| {
            let agent = agent.clone();
            std::thread::spawn(move || {
                let (mut ok, mut refused) = (0, 0);
                for _ in 0..2_500 {
                    match get_from(2, addr, "/hls/demo.mp3/index.m3u8", &agent).0 {
                        200 => ok += 1,
                        503 => refused += 1,
                        s => panic!("status {s}"),
                    }
                }
                (ok, refused)
            })
        })
        .collect();
    let (ok, refused) = flood
        .into_iter()
        .map(|t| t.join().unwrap())
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let after = child.rss_kib();
    let grown = after.saturating_sub(before);
    eprintln!(
        "10,000 playlists: {ok} sessions opened, {refused} refused (503); server RSS {before} KiB \
         before, {after} KiB after (+{grown} KiB)"
    );
    assert_eq!(ok + refused, 10_000);
    assert!(refused > 9_000, "only {refused} refused");
    assert!(
        grown < 10 * 1024,
        "10,000 playlist requests raised the server's RSS by {grown} KiB"
    );
    // None of them is a listener: both slots are free.
    assert_eq!(listeners(addr, "/demo.mp3"), 0);

    // A real HLS player (another address) gets in and counts; so does an ICY listener.
    assert_eq!(play_once(3, addr), [200, 200, 200]);
    assert_eq!(listeners(addr, "/demo.mp3"), 1);
    let mut icy = connect_from(4, addr);
    icy.write_all(b"GET /demo.mp3 HTTP/1.0\r\nUser-Agent: it\r\n\r\n")
        .unwrap();
    let head = read_head(&mut icy, Duration::from_secs(10)).expect("an answer");
    assert_eq!(head.status, 200, "the ICY listener gets in");
    wait_until(Duration::from_secs(5), || listeners(addr, "/demo.mp3") == 2).expect("both counted");
    // The mount is full now: a third listener is refused, by HLS as by ICY.
    assert_eq!(play_once(5, addr)[0], 403);
    // The refusals are counted by reason.
    let (_, metrics) = http_get(addr, "/metrics", &[]);
    let metrics = String::from_utf8(metrics).unwrap();
    let refused_metric: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("throng_hls_sessions_refused_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(refused_metric >= f64::from(refused), "{metrics}");
    drop(icy);
}

/// Sends `GET path` on keep-alive connection `s` with `X-Forwarded-For: xff`; the status of
/// its answer (whose body, of `Content-Length`, is read).
fn keep_alive_get(s: &mut std::net::TcpStream, path: &str, xff: &str) -> u16 {
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: {xff}\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some((head, len))) = throng_proto::http::parse_response_head(&buf) {
            let body: usize = head
                .header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < len + body {
                let n = s.read(&mut chunk).unwrap();
                assert!(n > 0, "closed mid-body");
                buf.extend_from_slice(&chunk[..n]);
            }
            return head.status;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before an answer to {path}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A cache in front carries many players' requests on one keep-alive connection: each request
/// is its own client's (its `X-Forwarded-For`), for the bounds of new sessions as for the rest.
/// Before, every request on the connection counted as the first one's client (a cache's 500
/// players at 500/s were refused `503` by a few addresses' rate).
#[test]
fn each_request_on_a_caches_keep_alive_connection_is_its_own_clients() {
    let srv = TestServer::start(&format!(
        "[hls]\nsegment-seconds = 1\nnew-sessions-per-second = 1\n\
         [paths]\nx-forwarded-for = [\"127.0.0.1\"]\n\
         [[mount]]\nname = \"/demo.mp3\"\nfile = {:?}\n",
        asset("demo.mp3")
    ));
    wait_until(Duration::from_secs(30), || {
        srv.ctx.hls.window("/demo.mp3").is_some()
    })
    .expect("/demo.mp3 packaged");
    let mut cache = std::net::TcpStream::connect(srv.addr).unwrap();
    let path = "/hls/demo.mp3/index.m3u8";
    assert_eq!(keep_alive_get(&mut cache, path, "198.51.100.1"), 200);
    assert_eq!(
        keep_alive_get(&mut cache, path, "198.51.100.2"),
        200,
        "another player: its own new session"
    );
    assert_eq!(
        keep_alive_get(&mut cache, path, "198.51.100.1"),
        503,
        "the first player's second session within the second"
    );
}

/// Issue 42's probe 3: a multivariant and a media playlist and `Range: bytes=0-0` of a segment
/// made an HLS session a listener, so 49 sessions from one address filled `max-listeners` and
/// every newcomer got 403. Now a session becomes a listener once it has been sent a whole
/// segment's worth of media: ten one-byte fetchers take no slot, and a real player and an ICY
/// listener get in.
#[test]
fn one_byte_segment_fetches_never_fill_max_listeners() {
    let srv = TestServer::start("[[mount]]\nname = \"/live.mp3\"\nmax-listeners = 3\n");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    // A player's walk from 127.0.0.`last`; `range` for its segment request.
    let walk = |last: u8, range: &str| -> (u16, usize) {
        let (_, master) = get_from(last, srv.addr, "/hls/live.mp3/index.m3u8", "");
        let variant = parse(std::str::from_utf8(&master).unwrap())
            .and_then(|p| p.variant)
            .unwrap_or_default();
        let (_, media) = get_from(last, srv.addr, &format!("/hls/live.mp3/{variant}"), "");
        let uri = parse(std::str::from_utf8(&media).unwrap_or(""))
            .and_then(|p| p.segments.last().map(|s| s.1.clone()))
            .unwrap_or_default();
        let dir = variant.strip_suffix("index.m3u8").unwrap_or("");
        let (status, seg) = get_from(last, srv.addr, &format!("/hls/live.mp3/{dir}{uri}"), range);
        (status, seg.len())
    };
    wait_until(Duration::from_secs(30), || {
        walk(9, "Range: bytes=0-0\r\n").0 == 206
    })
    .expect("HLS segments are cut");
    for _ in 0..10 {
        assert_eq!(walk(2, "Range: bytes=0-0\r\n"), (206, 1));
    }
    assert_eq!(
        listeners(srv.addr, "/live.mp3"),
        0,
        "one-byte fetchers are not listeners"
    );
    let icy = Listener::open(srv.addr, "/live.mp3", false);
    assert_eq!(icy.head.status, 200);
    let (status, len) = walk(3, "");
    assert_eq!(status, 200);
    assert!(len > 1000);
    assert_eq!(
        listeners(srv.addr, "/live.mp3"),
        2,
        "the ICY listener and the real player"
    );
}
