//! Connections that fail are counted by reason, and redirects are followed as players do.

use crate::util::{not_found_server, profile, run};
use std::io::{Read, Write};
use std::net::TcpListener;

fn closed_port_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}/stream")
}

#[test]
fn refused_connections_are_counted() {
    let r = run(vec![closed_port_url()], profile(150, 2.0));
    let s = &r.summary;
    assert_eq!(s.failures.get("refused"), Some(&150), "{:?}", s.failures);
    assert_eq!(s.failures_total, 150);
    assert_eq!(s.failed_listeners, 150);
    assert_eq!(s.peak_streaming, 0);
    assert!(!s.pass);
}

#[test]
fn failures_are_split_by_reason() {
    // Listeners alternate between a refusing port and a 404 server.
    let r = run(
        vec![closed_port_url(), not_found_server()],
        profile(100, 2.0),
    );
    let s = &r.summary;
    assert_eq!(s.failures.get("refused"), Some(&50), "{:?}", s.failures);
    assert_eq!(s.failures.get("http-404"), Some(&50), "{:?}", s.failures);
    assert_eq!(r.timeline.last().unwrap().total.down, 100);
    assert!(
        s.fail_reasons
            .iter()
            .any(|f| f.starts_with("100 connections failed")),
        "{:?}",
        s.fail_reasons
    );
}

/// A server answering every request with `302` to `location`; returns its URL.
fn redirector(location: String) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let reply = format!("HTTP/1.0 302 Found\r\nLocation: {location}\r\n\r\n");
            let _ = c.write_all(reply.as_bytes());
        }
    });
    format!("http://{addr}/stream")
}

#[test]
fn redirects_are_followed_as_players_do() {
    use throng_bench::testserver::{TestServer, TestServerConfig};
    let srv =
        TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    // Two hops (a director, then a second redirect) to a streaming server.
    let second = redirector(format!("http://{}/stream", srv.addr()));
    let r = run(vec![redirector(second)], profile(100, 4.0));
    let s = &r.summary;
    assert_eq!(s.failures_total, 0, "{:?}", s.failures);
    assert_eq!(s.final_streaming, 100);
    assert_eq!(s.starved, 0);
    // A redirect loop ends as a failure, not a hang.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let looping = redirector(format!("http://{addr}/never"));
    let lp = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let me = format!("http://{}/loop", l.local_addr().unwrap());
        let me2 = me.clone();
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                let mut buf = [0u8; 1024];
                let _ = c.read(&mut buf);
                let reply = format!("HTTP/1.0 302 Found\r\nLocation: {me2}\r\n\r\n");
                let _ = c.write_all(reply.as_bytes());
            }
        });
        me
    };
    let r = run(vec![lp], profile(10, 1.0));
    assert_eq!(
        r.summary.failures.get("bad-head"),
        Some(&10),
        "{:?}",
        r.summary.failures
    );
    let r = run(vec![looping], profile(10, 1.0));
    assert_eq!(
        r.summary.failures.get("refused"),
        Some(&10),
        "{:?}",
        r.summary.failures
    );
}
