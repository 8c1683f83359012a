//! Admission that holds storms and crowds (issue 28): clients behind a PROXY-protocol load
//! balancer count one by one, not as the balancer's one address. Clients come from several
//! loopback addresses (127.0.0.2, 127.0.0.3, …) by binding their socket before connecting.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use throng_proto::http::ResponseHead;

use crate::support::*;

/// The load balancer's loopback address (127.0.0.`BALANCER`).
const BALANCER: u8 = 5;

/// A connection through the balancer whose PROXY v1 header names client `client`.
fn through_balancer(addr: SocketAddr, client: [u8; 4], port: u16) -> TcpStream {
    let mut s = connect_from(BALANCER, addr);
    let [a, b, c, d] = client;
    let header = format!(
        "PROXY TCP4 {a}.{b}.{c}.{d} {} {port} {}\r\n",
        addr.ip(),
        addr.port()
    );
    s.write_all(header.as_bytes()).unwrap();
    s
}

/// Sends a status request on `s` and reads the answer's head.
fn status_on(mut s: TcpStream) -> Option<ResponseHead> {
    s.write_all(b"GET /status-json.xsl HTTP/1.0\r\n\r\n")
        .unwrap();
    read_head(&mut s, Duration::from_secs(10))
}

#[test]
fn a_balancer_with_2600_slow_clients_behind_it_still_admits_a_new_client() {
    let srv = TestServer::start(&format!(
        "[limits]\npending-clients = 4000\npending-per-address = 32\nheader-timeout = 60\n\
         [paths]\nproxy-protocol-from = [\"127.0.0.{BALANCER}\"]"
    ));
    // 2,600 clients behind the balancer, each sending its PROXY header and then nothing (a slow
    // mobile client): more than half of `pending-clients`, so the per-address cap is in force.
    let slow: Vec<TcpStream> = (0..2600u32)
        .map(|i| through_balancer(srv.addr, [10, 1, (i / 250) as u8, (i % 250) as u8], 40000))
        .collect();
    wait_until(Duration::from_secs(30), || {
        srv.ctx.clients.pending() >= 2600
    })
    .expect("the 2,600 slow clients reach the server");
    // A new client through the balancer is served...
    let head = status_on(through_balancer(srv.addr, [10, 2, 0, 1], 40001));
    assert_eq!(
        head.map(|h| h.status),
        Some(200),
        "a new client behind the balancer"
    );
    // ...and none of the slow ones was refused.
    let mut refused = 0;
    for s in slow.iter().step_by(50) {
        let mut s = s.try_clone().unwrap();
        if read_head(&mut s, Duration::from_millis(20)).is_some() {
            refused += 1;
        }
    }
    assert_eq!(refused, 0, "slow clients behind the balancer refused");
    // One client behind the balancer is still capped at `pending-per-address` of its own.
    let mut one: Vec<TcpStream> = (0..40)
        .map(|i| through_balancer(srv.addr, [10, 3, 0, 1], 41000 + i))
        .collect();
    let head = status_on(through_balancer(srv.addr, [10, 2, 0, 2], 40002));
    assert_eq!(head.map(|h| h.status), Some(200));
    let refused: Vec<u16> = one
        .iter_mut()
        .filter_map(|s| read_head(s, Duration::from_millis(50)).map(|h| h.status))
        .collect();
    assert_eq!(
        refused,
        vec![503; 8],
        "one client's 40 connections: 32 held"
    );
    drop((slow, one));
}

#[test]
fn a_proxy_header_has_its_own_short_deadline() {
    let srv = TestServer::start(&format!(
        "[limits]\nheader-timeout = 60\n[paths]\nproxy-protocol-from = [\"127.0.0.{BALANCER}\"]"
    ));
    // A connection from the balancer that sends nothing is closed well before header-timeout.
    let mut s = connect_from(BALANCER, srv.addr);
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let n = s.read(&mut [0u8; 64]).unwrap_or(0);
    let waited = start.elapsed();
    assert_eq!(n, 0, "closed without an answer");
    assert!(
        waited < Duration::from_secs(20),
        "closed after {waited:?} (header-timeout is 60 s)"
    );
    // A connection that sends its header and then its request at leisure is served.
    let mut s = through_balancer(srv.addr, [10, 4, 0, 1], 40000);
    std::thread::sleep(Duration::from_secs(4));
    s.write_all(b"GET /status-json.xsl HTTP/1.0\r\n\r\n")
        .unwrap();
    let head = read_head(&mut s, Duration::from_secs(10));
    assert_eq!(head.map(|h| h.status), Some(200));
}

/// Opens a connection from 127.0.0.`last`, sends `raw` and returns it with the status answered.
fn open_from(last: u8, addr: SocketAddr, raw: &str) -> (TcpStream, Option<u16>) {
    let (s, head) = ask_from(last, addr, raw);
    (s, head.map(|h| h.status))
}

#[test]
fn idle_keep_alive_connections_and_event_subscribers_make_room_for_listeners() {
    let srv = TestServer::start("[limits]\nclients = 50\n[hls]\nsegment-seconds = 1\n");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    wait_until(Duration::from_secs(10), || {
        srv.ctx.hls.output("/live.mp3").is_some()
    })
    .expect("/live.mp3 packaged for HLS");
    // One address opens 30 event subscribers and 30 keep-alive HLS connections, then sends
    // nothing more: 60 idle connections against `clients = 50`.
    let mut idle = Vec::new();
    for _ in 0..30 {
        idle.push(open_from(
            2,
            srv.addr,
            "GET /api/v1/events HTTP/1.1\r\nHost: t\r\n\r\n",
        ));
    }
    for _ in 0..30 {
        idle.push(open_from(
            2,
            srv.addr,
            "GET /hls/live.mp3/index.m3u8 HTTP/1.1\r\nHost: t\r\n\r\n",
        ));
    }
    let served = idle.iter().filter(|(_, s)| *s == Some(200)).count();
    assert!(
        served >= 32,
        "only {served} of 60 idle requests answered 200"
    );
    // Once half of `clients` is in use, the address holds at most 32 (`pending-per-address`)
    // idle connections.
    let held = srv.ctx.clients.idle();
    assert!(held <= 32, "{held} idle connections from one address");
    // New listeners from other addresses are all served: each takes the slot of the
    // connection idle longest.
    let mut listeners = Vec::new();
    for i in 0..30u8 {
        let (s, status) = open_from(
            10 + i,
            srv.addr,
            "GET /live.mp3 HTTP/1.0\r\nUser-Agent: it\r\n\r\n",
        );
        assert_eq!(status, Some(200), "listener {i} of 30");
        listeners.push(s);
    }
    assert!(
        srv.ctx.clients.open() <= 50,
        "{} open",
        srv.ctx.clients.open()
    );
    // Evicted subscribers are closed and counted as such.
    wait_until(Duration::from_secs(5), || {
        let (_, body) = http_get(srv.addr, "/metrics", &[]);
        let text = String::from_utf8_lossy(&body).into_owned();
        text.lines().any(|l| {
            l.starts_with("throng_session_ends_total{path=\"events\",reason=\"policy:evicted\"}")
                && !l.ends_with(" 0")
        })
    })
    .expect("evicted event subscribers counted in throng_session_ends_total");
    drop((idle, listeners));
}
