//! Shared test plumbing: an in-process server on an ephemeral port, a paced MP3 source client,
//! raw HTTP helpers and peer-tool checks.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};
use throng_proto::auth::basic_authorization;
use throng_proto::format::Format;
use throng_proto::framer::{Framer, Unit};
use throng_proto::http::{parse_response_head, ResponseHead};
use throng_server::ServerCtx;
use throng_server::{Config, Server};

/// Source password used by every test server.
pub const SOURCE_PW: &str = "test-source-pw";
/// Admin password used by every test server.
pub const ADMIN_PW: &str = "test-admin-pw";

/// Path of a file in the repo's `assets/`.
pub fn asset(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../assets")
        .join(name)
}

/// A server running on its own thread and runtime, stopped on drop.
pub struct TestServer {
    pub addr: SocketAddr,
    /// The HTTPS sockets (`[tls] listen`, then `auto`), if any.
    pub tls_addrs: Vec<SocketAddr>,
    pub ctx: Arc<ServerCtx>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server with `extra` TOML appended to a test base config (no demo, no access
    /// log, fixed passwords, 127.0.0.1 on an ephemeral port).
    pub fn start(extra: &str) -> TestServer {
        Self::start_at(0, extra)
    }

    /// As [`TestServer::start`], on 127.0.0.1:`port` (0: an ephemeral one), e.g. to restart a
    /// server where its clients reconnect.
    pub fn start_at(port: u16, extra: &str) -> TestServer {
        let toml = format!(
            "listen = [\"127.0.0.1:{port}\"]\nworkers = 2\n{extra}\n[authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n[logging]\naccess-log = \"\"\n"
        );
        let config = Config::from_toml(&toml).expect("test config");
        Self::start_config(config)
    }

    /// Starts a server with `config` (listen address and passwords as given).
    pub fn start_config(config: Config) -> TestServer {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let server = Server::bind(config).await.expect("bind");
                tx.send((server.local_addrs()[0], server.tls_addrs(), server.ctx()))
                    .unwrap();
                server
                    .run(async {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let (addr, tls_addrs, ctx) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("server start");
        TestServer {
            addr,
            tls_addrs,
            ctx,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// `http://addr` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Parsed JSON of a GET on `path`.
    pub fn json(&self, path: &str) -> serde_json::Value {
        let (head, body) = http_get(self.addr, path, &[]);
        assert_eq!(head.status, 200, "GET {path}");
        serde_json::from_slice(&body).expect("valid JSON")
    }

    /// The `/api/v1/status` entry of mount `name`, if live.
    pub fn mount_status(&self, name: &str) -> Option<serde_json::Value> {
        self.json("/api/v1/status")["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mount"] == name)
            .cloned()
    }

    /// Waits until mount `name` is live.
    pub fn wait_mount(&self, name: &str) {
        wait_until(Duration::from_secs(30), || {
            self.ctx.registry.get(name).is_some()
        })
        .unwrap_or_else(|_| panic!("mount {name} never came up"));
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Polls `cond` every 20 ms until true or `timeout`.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> Result<(), ()> {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if cond() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if cond() {
        Ok(())
    } else {
        Err(())
    }
}

/// Sends `raw` and reads until the server closes (at most 5 s).
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// Status code of the response to `raw`.
pub fn status_of(addr: SocketAddr, raw: &[u8]) -> u16 {
    let out = exchange(addr, raw);
    parse_response_head(&out)
        .unwrap_or_else(|e| panic!("bad response {e}: {:?}", String::from_utf8_lossy(&out)))
        .unwrap_or_else(|| panic!("incomplete response: {:?}", String::from_utf8_lossy(&out)))
        .0
        .status
}

/// The `Authorization` header line of the test server's admin (`admin` / [`ADMIN_PW`]).
pub fn admin_header() -> String {
    format!("Authorization: {}", basic_authorization("admin", ADMIN_PW))
}

/// GET `path` with extra header lines; returns the head and the body (read to close).
pub fn http_get(addr: SocketAddr, path: &str, headers: &[&str]) -> (ResponseHead, Vec<u8>) {
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: test\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    let out = exchange(addr, req.as_bytes());
    let (head, len) = parse_response_head(&out).unwrap().unwrap();
    (head, out[len..].to_vec())
}

/// An open listener connection after its response head.
pub struct Listener {
    pub stream: TcpStream,
    pub head: ResponseHead,
    /// Body bytes that came with the head.
    pub first: Vec<u8>,
}

impl Listener {
    /// Connects to `path` (optionally asking for ICY metadata) and reads the response head.
    pub fn open(addr: SocketAddr, path: &str, icy: bool) -> Listener {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let icy = if icy { "Icy-MetaData: 1\r\n" } else { "" };
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: test\r\nUser-Agent: it\r\n{icy}\r\n"
        )
        .unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            // A read with a timeout (SO_RCVTIMEO) fails with EINTR when a signal arrives, even
            // under SA_RESTART (signal(7)): the SIGCHLD of another test's hook program is no end.
            let n = match s.read(&mut chunk) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                n => n.expect("response head"),
            };
            assert!(
                n > 0,
                "closed before head: {:?}",
                String::from_utf8_lossy(&buf)
            );
            buf.extend_from_slice(&chunk[..n]);
            if let Some((head, len)) = parse_response_head(&buf).unwrap() {
                return Listener {
                    stream: s,
                    head,
                    first: buf[len..].to_vec(),
                };
            }
        }
    }

    /// Reads body bytes for `d` (the bytes that came with the head first).
    pub fn read_for(&mut self, d: Duration) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.first);
        let end = Instant::now() + d;
        let mut chunk = [0u8; 16384];
        while Instant::now() < end {
            self.stream
                .set_read_timeout(Some((end - Instant::now()).max(Duration::from_millis(1))))
                .unwrap();
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                // EINTR (a signal, such as a hook program's SIGCHLD): read on.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        out
    }
}

/// MP3 frames of the demo file.
pub fn demo_frames() -> Vec<Unit> {
    let data = std::fs::read(asset("demo.mp3")).unwrap();
    let mut f = Framer::new(Format::Mp3);
    f.push(&data);
    f.finish();
    std::iter::from_fn(|| f.next_unit())
        .map(|r| r.unwrap())
        .collect()
}

/// A source client pushing the demo MP3 in a loop, paced at `speed` × real time, on a thread.
pub struct Source {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Source {
    /// Starts pushing to `mount` with `method` (`PUT` or `SOURCE`); panics unless the server
    /// answers `HTTP/1.0 200 OK`.
    pub fn start(addr: SocketAddr, mount: &str, method: &str, speed: f64) -> Source {
        Self::start_with(addr, mount, method, speed, &[])
    }

    /// As [`Source::start`], with extra header lines.
    pub fn start_with(
        addr: SocketAddr,
        mount: &str,
        method: &str,
        speed: f64,
        headers: &[&str],
    ) -> Source {
        let mut req = format!(
            "{method} {mount} HTTP/1.1\r\nAuthorization: {}\r\nContent-Type: audio/mpeg\r\nice-name: Test Stream\r\nice-bitrate: 64\r\n",
            basic_authorization("source", SOURCE_PW)
        );
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        // As an encoder does, retry a server that closes before answering (an icecast2 just
        // started on a loaded box does); any answer other than 200 fails the test.
        let mut attempt = 0;
        let s = loop {
            attempt += 1;
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            let mut reply = [0u8; 19];
            match s.read_exact(&mut reply) {
                Ok(()) => {
                    assert_eq!(&reply, b"HTTP/1.0 200 OK\r\n\r\n");
                    break s;
                }
                Err(e) if attempt < 5 => {
                    eprintln!("source {mount}: no answer ({e}), retrying");
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => panic!("source {mount}: no answer after {attempt} attempts: {e}"),
            }
        };
        Self::stream_on(s, speed)
    }

    /// Pushes the demo MP3 in a loop on an already accepted source connection `s`, paced at
    /// `speed` × real time, on a thread.
    pub fn stream_on(mut s: TcpStream, speed: f64) -> Source {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let frames = demo_frames();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut media_us = 0u64;
            'outer: loop {
                for f in &frames {
                    if stop2.load(Ordering::Relaxed) || s.write_all(&f.data).is_err() {
                        break 'outer;
                    }
                    media_us += f.duration_us;
                    let due = start + Duration::from_micros((media_us as f64 / speed) as u64);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                }
            }
        });
        Source {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops pushing and closes the connection.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A child process (a third-party peer) killed on drop, even when a test panics.
pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Decodes `secs` seconds of `url` with ffmpeg; returns its error output (empty when clean).
/// Panics if ffmpeg fails.
pub fn ffmpeg_decode(url: &str, secs: u32) -> String {
    require("ffmpeg");
    let out = std::process::Command::new("ffmpeg")
        .args([
            "-nostdin",
            "-v",
            "error",
            "-t",
            &secs.to_string(),
            "-i",
            url,
        ])
        .args(["-f", "null", "-"])
        .output()
        .expect("run ffmpeg");
    assert!(
        out.status.success(),
        "ffmpeg failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Panics with an install hint unless `tool` is on PATH.
pub fn require(tool: &str) {
    let found = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{tool} is not installed: run scripts/install-deps.sh (or scripts/test.sh)"
    );
}

/// Counts MP3 frames from the start of `data` that chain correctly (each header valid and
/// followed by the next), and whether `data` starts on a frame header.
pub fn mp3_chain(data: &[u8]) -> (bool, usize) {
    let starts = throng_proto::mp3::parse_header(data).is_some();
    let mut pos = 0;
    let mut n = 0;
    while let Some(h) = throng_proto::mp3::parse_header(&data[pos..]) {
        if pos + h.frame_len > data.len() {
            break;
        }
        pos += h.frame_len;
        n += 1;
    }
    (starts, n)
}

/// A server with the test passwords, `extra` configuration, and its access log written to
/// `log`.
pub fn logged_server(log: &std::path::Path, extra: &str) -> TestServer {
    let toml = format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = 2\n{extra}\n[authentication]\n\
         source-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n\
         [logging]\naccess-log = {log:?}\n"
    );
    TestServer::start_config(throng_server::Config::from_toml(&toml).expect("test config"))
}

/// The ids `listclients` lists on `mount` (every path: ICY listeners, HLS sessions, WHEP
/// viewers).
pub fn listener_ids(srv: &TestServer, mount: &str) -> Vec<u64> {
    let (_, body) = http_get(
        srv.addr,
        &format!("/admin/listclients?mount={mount}"),
        &[&admin_header()],
    );
    String::from_utf8_lossy(&body)
        .split("<ID>")
        .skip(1)
        .filter_map(|r| r.split('<').next()?.parse().ok())
        .collect()
}

/// `killclient` on every listener `listclients` lists on `mount` (every path); each must be
/// found (`<return>1</return>`).
pub fn kill_every_listener(srv: &TestServer, mount: &str) {
    for id in listener_ids(srv, mount) {
        let (_, body) = http_get(
            srv.addr,
            &format!("/admin/killclient?mount={mount}&id={id}"),
            &[&admin_header()],
        );
        assert!(
            String::from_utf8_lossy(&body).contains("<return>1</return>"),
            "killclient {id}: {}",
            String::from_utf8_lossy(&body)
        );
    }
}

/// Waits until the access log at `log` has exactly `n` lines ending with ` <suffix>` (an end
/// reason's key); panics with the log's text otherwise.
pub fn wait_log_lines_ending(log: &std::path::Path, suffix: &str, n: usize) {
    let tail = format!(" {suffix}");
    wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.ends_with(&tail))
            .count()
            == n
    })
    .unwrap_or_else(|_| panic!("{}", std::fs::read_to_string(log).unwrap_or_default()));
}

/// A one-thread HTTP endpoint on the loopback that keeps each request body and answers 200
/// with the extra header lines `reply(body)` gives (each ending in `\r\n`): a URL-auth server,
/// a hook's URL, a YP directory. Returns its address and the bodies so far.
pub fn capture_endpoint(
    reply: impl Fn(&str) -> String + Send + 'static,
) -> (SocketAddr, Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::BufRead as _;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = bodies.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { break };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut r = std::io::BufReader::new(s);
            let mut len = 0;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; len];
            let _ = r.read_exact(&mut body);
            let body = String::from_utf8_lossy(&body).into_owned();
            let extra = reply(&body);
            seen.lock().unwrap().push(body);
            let _ = r.get_mut().write_all(
                format!("HTTP/1.1 200 OK\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            );
        }
    });
    (addr, bodies)
}

/// The body of a `Transfer-Encoding: chunked` message (RFC 9112 section 7.1) whose chunks are
/// `raw`; panics on a malformed or incomplete one (a streamed answer cut short).
pub fn dechunk(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = raw;
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let line = std::str::from_utf8(&rest[..eol]).unwrap();
        let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16)
            .unwrap_or_else(|_| panic!("chunk size {line:?}"));
        rest = &rest[eol + 2..];
        if size == 0 {
            return out;
        }
        assert!(rest.len() >= size + 2, "a chunk cut short");
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// A TCP connection to `addr` from the loopback address 127.0.0.`last`.
pub fn connect_from(last: u8, addr: SocketAddr) -> TcpStream {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let from = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, last), 0);
    s.bind(&from.into()).unwrap();
    s.connect(&addr.into()).unwrap();
    s.into()
}

/// Reads a response head from `s` (waiting at most `wait`); `None` when the connection closes
/// or the wait ends first.
pub fn read_head(s: &mut TcpStream, wait: Duration) -> Option<ResponseHead> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            // EINTR (a signal, such as a hook program's SIGCHLD): read on.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if let Ok(Some((head, _))) = parse_response_head(&buf) {
            return Some(head);
        }
    }
}

/// Sends `raw` from 127.0.0.`last` and reads the response head.
pub fn ask_from(last: u8, addr: SocketAddr, raw: &str) -> (TcpStream, Option<ResponseHead>) {
    let mut s = connect_from(last, addr);
    s.write_all(raw.as_bytes()).unwrap();
    let head = read_head(&mut s, Duration::from_secs(10));
    (s, head)
}

/// A certificate for `names` with serial number `serial`, written as PEM files in `dir`
/// (`<stem>.crt`, `<stem>.key`).
pub fn make_cert(dir: &Path, stem: &str, names: &[&str], serial: u64) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    params.serial_number = Some(rcgen::SerialNumber::from(serial));
    let cert = params.self_signed(&key).unwrap();
    let crt = dir.join(format!("{stem}.crt"));
    let k = dir.join(format!("{stem}.key"));
    std::fs::write(&crt, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (crt, k)
}

/// Resident memory of process `pid` in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// Field `field` (`VmRSS`, `VmHWM`: the peak since start or since `5` was written to
/// `/proc/PID/clear_refs`) of `/proc/PID/status`, in KiB.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field}"))
}

/// Set in the environment of the child process a [`ChildServer`] runs: the extra TOML of its
/// configuration.
const RSS_CHILD: &str = "THRONG_IT_RSS_SERVER";

/// A test server run alone in a child process (this test binary, running the ignored test
/// `admission::rss_server`), so that its memory can be measured as the server's only; stopped
/// when dropped.
pub struct ChildServer {
    /// The child process (killed when dropped).
    _proc: Proc,
    /// Its process id.
    pub pid: u32,
    /// The server's HTTP address.
    pub addr: SocketAddr,
}

impl ChildServer {
    /// Starts a server with `extra` TOML (as [`TestServer::start`]) in a child process.
    pub fn start(extra: &str) -> ChildServer {
        use std::io::BufRead;
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "admission::rss_server",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(RSS_CHILD, extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = Proc(child);
        let pid = child.0.id();
        let mut lines = std::io::BufReader::new(child.0.stdout.take().unwrap()).lines();
        let addr: SocketAddr = lines
            .by_ref()
            .map_while(Result::ok)
            // libtest prints `test admission::rss_server ... ` before it on the same line.
            .find_map(|l| {
                l.split_once("ADDR ")
                    .map(|(_, a)| a.trim().parse().unwrap())
            })
            .expect("the server's address");
        ChildServer {
            _proc: child,
            pid,
            addr,
        }
    }

    /// Its resident memory now, in KiB.
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.pid)
    }
}

/// The body of the child's test: when run as a [`ChildServer`], starts the server, prints
/// `ADDR <address>` and serves until standard input closes; otherwise does nothing.
pub fn serve_as_child() {
    let Some(extra) = std::env::var_os(RSS_CHILD) else {
        return;
    };
    let srv = TestServer::start(&extra.to_string_lossy());
    println!("ADDR {}", srv.addr);
    std::io::stdout().flush().unwrap();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}
