//! The fan-out under a stalled reader: 200 listeners keep receiving at the stream's rate while
//! one that never reads is dropped once it lags more than queue-size.

use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

use crate::support::*;

/// Demo stream rate: 64 kbit/s = 8000 bytes/s.
const DEMO_BYTES_PER_SEC: f64 = 8000.0;

#[test]
fn stalled_listener_is_dropped_while_200_keep_up() {
    // 4× real time = 32 KB/s; queue-size 100 kB so the stalled reader overflows in seconds.
    let speed = 4.0;
    let srv = TestServer::start(
        "[limits]\nqueue-size = 100000\nburst-size = 16000\nlistener-sndbuf = 16384",
    );
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", speed);
    srv.wait_mount("/live.mp3");
    let mount = srv.ctx.registry.get("/live.mp3").unwrap();

    // The stalled listener: tiny receive buffer, sends its request, never reads.
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&srv.addr.into()).unwrap();
    let mut stalled: TcpStream = sock.into();
    std::io::Write::write_all(&mut stalled, b"GET /live.mp3 HTTP/1.0\r\n\r\n").unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let window = Duration::from_secs(6);
    let addr = srv.addr;
    let received: Vec<usize> = rt.block_on(async move {
        let mut tasks = Vec::new();
        for _ in 0..200 {
            tasks.push(tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                s.write_all(b"GET /live.mp3 HTTP/1.0\r\n\r\n")
                    .await
                    .unwrap();
                let mut buf = vec![0u8; 65536];
                // Skip the head and burst for 1 s, then count a window.
                let warm = Instant::now() + Duration::from_secs(1);
                while Instant::now() < warm {
                    let _ = tokio::time::timeout_at(warm.into(), s.read(&mut buf)).await;
                }
                let end = Instant::now() + window;
                let mut n = 0usize;
                while Instant::now() < end {
                    match tokio::time::timeout_at(end.into(), s.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => break,
                        Ok(Ok(k)) => n += k,
                        Err(_) => break,
                    }
                }
                n
            }));
        }
        let mut v = Vec::new();
        for t in tasks {
            v.push(t.await.unwrap());
        }
        v
    });
    // Every reader got at least 80 % of the stream over the window, less one write interval.
    let expected = DEMO_BYTES_PER_SEC * speed * (window.as_secs_f64() - 1.0);
    let worst = *received.iter().min().unwrap();
    assert!(
        worst as f64 >= 0.8 * expected,
        "slowest of 200 got {worst} bytes, expected ≥ {:.0}",
        0.8 * expected
    );
    // The stalled one was dropped for lagging more than queue-size.
    wait_until(Duration::from_secs(10), || {
        mount.slow_listeners.load(Ordering::Relaxed) == 1
    })
    .expect("stalled listener must be dropped");
    stalled
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut sink = Vec::new();
    let _ = stalled.read_to_end(&mut sink); // drains what the kernel held, then EOF/reset
    assert!(
        sink.len() < 100_000 + 200_000,
        "stalled listener got {} bytes",
        sink.len()
    );
    assert_eq!(srv.mount_status("/live.mp3").unwrap()["slow_listeners"], 1);
}

#[test]
fn a_listener_that_stopped_reading_is_closed_after_its_source_ends() {
    let srv = TestServer::start("[limits]\nlistener-sndbuf = 16384");
    let src = Source::start(srv.addr, "/live.mp3", "PUT", 4.0);
    srv.wait_mount("/live.mp3");
    let mount = srv.ctx.registry.get("/live.mp3").unwrap();
    // A paused player: connected, socket buffers full, never reading again.
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&srv.addr.into()).unwrap();
    let mut paused: TcpStream = sock.into();
    std::io::Write::write_all(&mut paused, b"GET /live.mp3 HTTP/1.0\r\n\r\n").unwrap();
    wait_until(Duration::from_secs(3), || {
        mount.listeners.load(Ordering::Relaxed) == 1
    })
    .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    src.stop();
    // It cannot drain what is left, so it is closed after the grace period instead of holding
    // its slot and the ended mount's queue forever.
    let grace = throng_server::ENDED_GRACE;
    wait_until(grace + Duration::from_secs(5), || {
        mount.listeners.load(Ordering::Relaxed) == 0
    })
    .expect("paused listener of an ended mount must be closed");
}

#[test]
fn a_burst_over_queue_size_within_one_write_interval_keeps_every_reading_listener() {
    // A source pushing 100× real time (800 KB/s: an encoder flushing a backlog, a relay
    // catching up) for 3 s, against the default queue-size (512 kB) and write interval (1 s):
    // more than queue-size arrives between two regular visits of a listener.
    let srv = TestServer::start("");
    let fast = Source::start(srv.addr, "/burst.mp3", "PUT", 100.0);
    srv.wait_mount("/burst.mp3");
    let burst = srv.ctx.registry.get("/burst.mp3").unwrap();
    let mut readers: Vec<Listener> = (0..10)
        .map(|i| Listener::open(srv.addr, "/burst.mp3", i % 2 == 0))
        .collect();
    // Every reader reads at full speed for 4 s.
    let start = Instant::now();
    let mut got = vec![0usize; readers.len()];
    while start.elapsed() < Duration::from_secs(4) {
        for (r, n) in readers.iter_mut().zip(got.iter_mut()) {
            *n += r.read_for(Duration::from_millis(5)).len();
        }
    }
    drop(fast);
    let produced = burst.queue.load().head;
    assert!(
        produced > 2_000_000,
        "the source pushed {produced} bytes in 4 s: not a burst"
    );
    assert_eq!(
        burst.slow_listeners.load(Ordering::Relaxed),
        0,
        "listeners reading at full speed were dropped as too slow"
    );
    for (i, n) in got.iter().enumerate() {
        assert!(
            *n as u64 > produced * 8 / 10,
            "reader {i} got {n} of {produced} bytes"
        );
    }
}
