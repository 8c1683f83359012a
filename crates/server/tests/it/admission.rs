//! Admission and request bodies under attack (issue 11, items 1 and 2): idle sockets cannot
//! fill `clients` (connections reading their head have their own budget and a per-address
//! cap), admin requests and source logins have a reserve above `clients`, refusals are `503`
//! with `Retry-After`, and an admin API body is read only once authorized, capped and within
//! `body-timeout`, so stalled bodies cost no memory. Clients come from several loopback
//! addresses (127.0.0.2, 127.0.0.3, …) by binding their socket before connecting.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use throng_proto::auth::basic_authorization;
use throng_proto::http::ResponseHead;

use crate::support::*;

fn admin_auth() -> String {
    basic_authorization("admin", ADMIN_PW)
}

#[test]
fn idle_sockets_from_one_address_lock_out_neither_listeners_nor_admin() {
    let srv = TestServer::start("[limits]\nclients = 100");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    // One host holds 99 sockets open and sends nothing (on 127.0.0.1, as the server listens).
    let idle: Vec<TcpStream> = (0..99)
        .map(|_| TcpStream::connect(srv.addr).unwrap())
        .collect();
    // The accept loop takes connections in order: everything below comes after the idle ones.
    let mut listeners = Vec::new();
    for i in 0..28u8 {
        let (s, head) = ask_from(
            2 + i,
            srv.addr,
            "GET /live.mp3 HTTP/1.0\r\nUser-Agent: it\r\n\r\n",
        );
        let status = head.map(|h| h.status);
        assert_eq!(status, Some(200), "listener {i} of 28");
        listeners.push(s);
    }
    let auth = admin_auth();
    for i in 0..5u8 {
        let (_, head) = ask_from(
            40 + i,
            srv.addr,
            &format!("GET /admin/stats HTTP/1.0\r\nAuthorization: {auth}\r\n\r\n"),
        );
        assert_eq!(head.map(|h| h.status), Some(200), "admin request {i} of 5");
    }
    drop((idle, listeners));
}

#[test]
fn at_the_limit_listeners_get_503_with_retry_after_but_admin_and_sources_get_in() {
    // clients = 3: the source and two listeners fill the listener share.
    let srv = TestServer::start("[limits]\nclients = 3\nreserved-clients = 4");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let _a = Listener::open(srv.addr, "/live.mp3", false);
    let _b = Listener::open(srv.addr, "/live.mp3", false);
    let (_, head) = ask_from(2, srv.addr, "GET /live.mp3 HTTP/1.0\r\n\r\n");
    let head = head.expect("a response to the listener over the limit");
    assert_eq!(head.status, 503);
    let retry = head.header("retry-after").expect("503 carries Retry-After");
    assert!(retry.parse::<u32>().is_ok_and(|s| s > 0), "{retry:?}");
    // The operator still gets in...
    let (_, head) = ask_from(
        3,
        srv.addr,
        &format!(
            "GET /admin/stats HTTP/1.0\r\nAuthorization: {}\r\n\r\n",
            admin_auth()
        ),
    );
    assert_eq!(
        head.map(|h| h.status),
        Some(200),
        "admin within the reserve"
    );
    // ...and so does an encoder on another mount.
    let _src2 = Source::start(srv.addr, "/second.mp3", "PUT", 1.0);
    srv.wait_mount("/second.mp3");
    // Listeners still do not.
    let (_, head) = ask_from(4, srv.addr, "GET /second.mp3 HTTP/1.0\r\n\r\n");
    assert_eq!(head.map(|h| h.status), Some(503));
}

#[test]
fn one_address_cannot_hold_every_connection_reading_its_head() {
    let srv = TestServer::start("[limits]\npending-clients = 40\npending-per-address = 8");
    // 30 idle sockets from one address: past half the budget, that address is capped.
    let mut idle: Vec<TcpStream> = (0..30).map(|_| connect_from(7, srv.addr)).collect();
    // A later connection is accepted after all of them: once it is answered, so are they.
    let (_, head) = ask_from(8, srv.addr, "GET /status-json.xsl HTTP/1.0\r\n\r\n");
    assert_eq!(head.map(|h| h.status), Some(200));
    let refused: Vec<ResponseHead> = idle
        .iter_mut()
        .filter_map(|s| read_head(s, Duration::from_millis(50)))
        .collect();
    assert_eq!(refused.len(), 10, "20 of 30 held, the rest refused");
    for head in &refused {
        assert_eq!(head.status, 503);
        assert!(
            head.header("retry-after").is_some(),
            "503 carries Retry-After"
        );
    }
    // Another address is still served.
    let (_, head) = ask_from(9, srv.addr, "GET /status-json.xsl HTTP/1.0\r\n\r\n");
    assert_eq!(head.map(|h| h.status), Some(200));
    drop(idle);
}

/// A `PUT /api/v1/mounts/…/metadata` head announcing `len` body bytes, with `auth`.
fn api_put(mount: &str, auth: Option<&str>, len: usize) -> String {
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    format!(
        "PUT /api/v1/mounts/{mount}/metadata HTTP/1.1\r\nHost: t\r\n{auth}Content-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    )
}

#[test]
fn an_unauthorized_body_is_not_waited_for() {
    let srv = TestServer::start("");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    for auth in [None, Some(basic_authorization("admin", "wrong").as_str())] {
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.write_all(api_put("live.mp3", auth, 1_900_000).as_bytes())
            .unwrap();
        let head = read_head(&mut s, Duration::from_secs(5));
        assert_eq!(
            head.map(|h| h.status),
            Some(401),
            "answered without the body"
        );
    }
    // Authorized, but announcing more than an API body may be: 413 before reading it.
    let auth = admin_auth();
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(api_put("live.mp3", Some(&auth), 1_900_000).as_bytes())
        .unwrap();
    let head = read_head(&mut s, Duration::from_secs(5));
    assert_eq!(head.map(|h| h.status), Some(413));
}

#[test]
fn a_stalled_body_is_closed_after_body_timeout() {
    let srv = TestServer::start("[limits]\nbody-timeout = 1");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let mut s = TcpStream::connect(srv.addr).unwrap();
    let auth = admin_auth();
    s.write_all(api_put("live.mp3", Some(&auth), 100).as_bytes())
        .unwrap();
    s.write_all(b"{\"song\":").unwrap();
    let t = Instant::now();
    let head = read_head(&mut s, Duration::from_secs(10));
    assert_eq!(head.map(|h| h.status), Some(408));
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "after the timeout"
    );
    // And the connection is closed.
    let mut rest = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(s.read_to_end(&mut rest).is_ok(), "closed by the server");
}

/// Not a test of its own: the server process of the memory tests ([`ChildServer`]), run alone
/// in a child process so that its memory is the server's only.
#[test]
#[ignore = "run by the memory tests in a child process"]
fn rss_server() {
    serve_as_child();
}

#[test]
fn stalled_bodies_do_not_raise_memory() {
    let child = ChildServer::start("");
    let (pid, addr) = (child.pid, child.addr);
    // Warm up: one request of each kind, so that first-use allocations are in the baseline.
    let wrong = basic_authorization("admin", "wrong");
    let admin = admin_auth();
    let kinds = [None, Some(wrong.as_str()), Some(admin.as_str())];
    for auth in kinds {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(api_put("x", auth, 10).as_bytes()).unwrap();
        s.write_all(b"{\"song\":\"").unwrap();
        let _ = read_head(&mut s, Duration::from_secs(5));
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kib(pid);
    let fds_before = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    // 200 requests announcing a 1.9 MB body, sent but for its last byte, then stalled.
    const LEN: usize = 1_900_000;
    let body = vec![b'a'; LEN - 1];
    let mut conns: Vec<(TcpStream, usize)> = (0..200)
        .map(|i| {
            let mut s = connect_from(2 + (i % 50) as u8, addr);
            s.write_all(api_put("x", kinds[i % 3], LEN).as_bytes())
                .unwrap();
            s.set_nonblocking(true).unwrap();
            (s, 0)
        })
        .collect();
    // Push the bodies until the server takes no more (or has closed the connections).
    let mut idle_since = Instant::now();
    while idle_since.elapsed() < Duration::from_secs(2) {
        let mut progress = false;
        for (s, sent) in conns.iter_mut().filter(|(_, sent)| *sent < LEN - 1) {
            match s.write(&body[*sent..]) {
                Ok(n) if n > 0 => {
                    *sent += n;
                    progress = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                _ => *sent = LEN, // closed by the server
            }
        }
        if progress {
            idle_since = Instant::now();
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let right_after = rss_kib(pid);
    // Nothing is held: the server has closed every one of them (none waits for its body)...
    let fds = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    let closed = wait_until(Duration::from_secs(10), || fds(pid) < fds_before + 10);
    assert!(
        closed.is_ok(),
        "{} descriptors open, {fds_before} before",
        fds(pid)
    );
    // ...and once the server has given freed memory back (it does so every TRIM_INTERVAL,
    // 10 s), its RSS is where it was.
    std::thread::sleep(Duration::from_secs(11));
    let after = rss_kib(pid);
    let grown = after.saturating_sub(before);
    eprintln!(
        "server RSS {before} KiB before, {right_after} KiB right after 200 stalled bodies, {after} KiB once trimmed"
    );
    assert!(
        grown < 5 * 1024,
        "200 stalled 1.9 MB bodies raised the server's RSS by {grown} KiB ({before} → {after})"
    );
    drop(conns);
}

#[test]
fn a_trusted_proxy_is_not_capped_per_address() {
    let srv = TestServer::start(
        "[limits]\npending-clients = 40\npending-per-address = 8\n[paths]\nx-forwarded-for = [\"127.0.0.7\"]",
    );
    // The proxy's 30 connections still sending their heads are all held...
    let mut held: Vec<TcpStream> = (0..30).map(|_| connect_from(7, srv.addr)).collect();
    let (_, head) = ask_from(8, srv.addr, "GET /status-json.xsl HTTP/1.0\r\n\r\n");
    assert_eq!(head.map(|h| h.status), Some(200));
    let refused = held
        .iter_mut()
        .filter_map(|s| read_head(s, Duration::from_millis(50)))
        .count();
    assert_eq!(refused, 0, "no connection of the trusted proxy refused");
    // ...and a client address outside it is still capped.
    let mut other: Vec<TcpStream> = (0..9).map(|_| connect_from(9, srv.addr)).collect();
    let (_, head) = ask_from(10, srv.addr, "GET /status-json.xsl HTTP/1.0\r\n\r\n");
    assert_eq!(head.map(|h| h.status), Some(200));
    let refused = other
        .iter_mut()
        .filter_map(|s| read_head(s, Duration::from_millis(50)))
        .count();
    assert_eq!(refused, 1, "the 9th of 8");
    drop((held, other));
}
