//! The receive floor (docs/BENCHMARKS.md, issue 37): what it costs only to *receive* N ICY
//! listeners' streams on this box, with nothing verified, counted or judged: N sockets, one
//! request each, then one loop that reads every byte into one buffer and drops it, polling at
//! most every 20 ms as the bench's ICY engine does (`GATHER_US`). Its CPU per listener-second
//! over the hold, beside the server's over the same window (`/proc/<pid>/stat`), is the
//! lowest bench/server ratio any receiving load generator can reach here; the bench's own
//! ratio is read against it.
//!
//! ```sh
//! cargo run --release -p throng-bench --example read_floor -- \
//!     127.0.0.1:8790 /demo.mp3 18000 40 $(pgrep -f 'throng serve')
//! ```
//!
//! (An io_uring variant, multishot receive into a provided buffer ring, was measured at commit
//! b533106 and cost no less: docs/BENCHMARKS.md.)
//!
//! Prints one line: the floor's and the server's CPU per listener-second (µs), their ratio and
//! the bytes received per listener-second.

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Polls at most this often (µs), as the ICY engine does.
const GATHER_US: u64 = 20_000;
/// Seconds of reading before the measured hold (bursts and connects settle).
const WARMUP_S: u64 = 5;

fn cpu_self_us() -> u64 {
    // SAFETY: getrusage fills the zeroed struct for RUSAGE_SELF.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn cpu_pid_us(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("server pid");
    let rest = &stat[stat.rfind(')').expect("stat") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * 1_000_000 / hz
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 6 {
        eprintln!("usage: read_floor <addr> <path> <n> <hold_s> <server_pid>");
        std::process::exit(2);
    }
    let addr: SocketAddr = a[1].parse().expect("addr");
    let req = format!("GET {} HTTP/1.0\r\nHost: {}\r\n\r\n", a[2], a[1]);
    let n: usize = a[3].parse().expect("n");
    let hold_s: u64 = a[4].parse().expect("hold");
    let pid: u32 = a[5].parse().expect("pid");
    let mut poll = Poll::new().expect("poll");
    let mut socks = Vec::with_capacity(n);
    for i in 0..n {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(req.as_bytes()).expect("request");
        s.set_nonblocking(true).expect("nonblocking");
        let mut s = TcpStream::from_std(s);
        poll.registry()
            .register(&mut s, Token(i), Interest::READABLE)
            .expect("register");
        socks.push(s);
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut events = Events::with_capacity(4096);
    let start = Instant::now();
    let (mut bytes, mut measured_bytes) = (0u64, 0u64);
    let mut marks: Option<(u64, u64)> = None;
    let mut last_poll = Instant::now();
    loop {
        let el = start.elapsed().as_secs();
        if el >= WARMUP_S && marks.is_none() {
            marks = Some((cpu_self_us(), cpu_pid_us(pid)));
            measured_bytes = bytes;
        }
        if el >= WARMUP_S + hold_s {
            break;
        }
        let since = last_poll.elapsed();
        if since < Duration::from_micros(GATHER_US) {
            std::thread::sleep(Duration::from_micros(GATHER_US) - since);
        }
        last_poll = Instant::now();
        poll.poll(&mut events, Some(Duration::from_millis(100)))
            .expect("poll");
        for ev in events.iter() {
            let s = &mut socks[ev.token().0];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => {
                        bytes += k as u64;
                        if k < buf.len() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        }
    }
    let (self0, srv0) = marks.expect("held");
    let (self_us, srv_us) = (cpu_self_us() - self0, cpu_pid_us(pid) - srv0);
    let ls = (n as u64 * hold_s) as f64;
    let (f, s) = (self_us as f64 / ls, srv_us as f64 / ls);
    println!(
        "read floor: {n} listeners, {f:.2} µs, server {s:.2} µs per listener-second: \
         floor/server {:.3}; {:.0} bytes per listener-second",
        f / s,
        (bytes - measured_bytes) as f64 / ls
    );
}
