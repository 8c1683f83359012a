//! Binary upgrade in place (SIGUSR2) of a real `throng serve` process: an ffmpeg source and 20
//! listeners (half with ICY metadata) stay connected while the new process takes over; every
//! listener's stream goes on frame after frame with none missing or repeated, and decodes with
//! no ffmpeg error; the new process owns the listen socket and accepts new listeners. A new
//! binary that cannot start (its configuration broke meanwhile) leaves the old one serving.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SOURCE_PW: &str = "upgrade-source-pw";

/// A `throng serve` whose standard error is collected line by line (the old process and the
/// new one it starts share it).
struct Serve {
    child: Child,
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    fn start(config: &std::path::Path) -> Serve {
        Serve::start_with_env(config, &[])
    }

    fn start_with_env(config: &std::path::Path, env: &[(&str, &std::path::Path)]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_throng"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn throng");
        let mut reader = BufReader::new(child.stderr.take().unwrap());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let addr = loop {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).unwrap() > 0, "throng exited");
            if let Some(rest) = line.trim().strip_prefix("throng: serving on http://") {
                break rest.trim_end_matches('/').parse().unwrap();
            }
        };
        let collected = lines.clone();
        std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { break };
                collected.lock().unwrap().push(line);
            }
        });
        Serve { child, addr, lines }
    }

    /// Sends SIGUSR2 and waits for the old process to report the take-over; returns the new
    /// process's pid and a guard that kills it.
    fn upgrade(&self) -> (i32, Pid) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGUSR2) };
        let line = self.wait_line("the new process took over", Duration::from_secs(30));
        let pid: i32 = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("pid="))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {line:?}"));
        (pid, Pid(pid))
    }

    /// Waits until a collected line contains `needle`; returns it.
    fn wait_line(&self, needle: &str, within: Duration) -> String {
        let start = Instant::now();
        while start.elapsed() < within {
            if let Some(l) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
            {
                return l.clone();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no line with {needle:?}: {:#?}", self.lines.lock().unwrap());
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kills a process by pid when dropped (the new server, which is not our child).
struct Pid(i32);

impl Drop for Pid {
    fn drop(&mut self) {
        // SAFETY: kill(2) on a process this test started (through the upgrade).
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

struct Ffmpeg(Child);

impl Drop for Ffmpeg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn demo_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/demo.mp3")
}

fn ffmpeg_source(addr: SocketAddr) -> Ffmpeg {
    Ffmpeg(
        Command::new("ffmpeg")
            .args([
                "-nostdin",
                "-loglevel",
                "error",
                "-re",
                "-stream_loop",
                "-1",
                "-i",
            ])
            .arg(demo_path())
            .args(["-c", "copy", "-content_type", "audio/mpeg", "-f", "mp3"])
            .arg(format!("icecast://source:{SOURCE_PW}@{addr}/live.mp3"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ffmpeg is installed by scripts/install-deps.sh"),
    )
}

/// A listener reading on a thread until told to stop; returns (bytes after the head, whether
/// the server closed it).
struct Reader {
    stop: Arc<std::sync::atomic::AtomicBool>,
    got: Arc<Mutex<Vec<u8>>>,
    /// When each read returned bytes.
    arrivals: Arc<Mutex<Vec<Instant>>>,
    thread: JoinHandle<bool>,
    metaint: Option<usize>,
}

impl Reader {
    fn open(addr: SocketAddr, icy: bool) -> Reader {
        Reader::open_path(addr, "/live.mp3", icy)
    }

    fn open_path(addr: SocketAddr, path: &str, icy: bool) -> Reader {
        let mut s = TcpStream::connect(addr).unwrap();
        let icy_line = if icy { "Icy-MetaData: 1\r\n" } else { "" };
        write!(
            s,
            "GET {path} HTTP/1.0\r\nUser-Agent: upgrade-test\r\n{icy_line}\r\n"
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        // The head.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_string();
        assert!(head.starts_with("HTTP/1.0 200"), "{head}");
        let metaint = head.lines().find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("icy-metaint:")
                .map(|v| v.trim().parse().unwrap())
        });
        assert_eq!(metaint.is_some(), icy);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let got = Arc::new(Mutex::new(Vec::new()));
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let (stop2, got2, arrivals2) = (stop.clone(), got.clone(), arrivals.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => return true,
                    Ok(n) => {
                        got2.lock().unwrap().extend_from_slice(&buf[..n]);
                        arrivals2.lock().unwrap().push(Instant::now());
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => return true,
                }
            }
            false
        });
        Reader {
            stop,
            got,
            arrivals,
            thread,
            metaint,
        }
    }

    /// The longest time without bytes between `from` and `to` (the edges count as arrivals).
    fn longest_gap(&self, from: Instant, to: Instant) -> Duration {
        let mut times: Vec<Instant> = self
            .arrivals
            .lock()
            .unwrap()
            .iter()
            .copied()
            .filter(|t| *t > from && *t < to)
            .collect();
        times.insert(0, from);
        times.push(to);
        times
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.got.lock().unwrap().len()
    }

    /// Stops reading; the audio (ICY blocks removed) and whether the server closed it.
    fn finish(self) -> (Vec<u8>, bool) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let closed = self.thread.join().unwrap();
        let body = std::mem::take(&mut *self.got.lock().unwrap());
        let audio = match self.metaint {
            Some(m) => strip_icy(&body, m),
            None => body,
        };
        (audio, closed)
    }
}

fn strip_icy(d: &[u8], metaint: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < d.len() {
        let n = metaint.min(d.len() - i);
        out.extend_from_slice(&d[i..i + n]);
        i += n;
        if i >= d.len() {
            break;
        }
        i += 1 + d[i] as usize * 16;
    }
    out
}

/// MPEG-1 layer III frames at the start of `d`, whole ones only.
fn mp3_frames(d: &[u8]) -> Vec<&[u8]> {
    const BR: [usize; 15] = [
        0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
    ];
    const SR: [usize; 3] = [44100, 48000, 32000];
    let mut out = Vec::new();
    let mut i = 0;
    while i + 4 <= d.len() && d[i] == 0xFF && d[i + 1] & 0xE0 == 0xE0 {
        let (b, s) = (
            BR[(d[i + 2] >> 4) as usize],
            SR[((d[i + 2] >> 2) & 3) as usize],
        );
        let n = 144_000 * b / s + ((d[i + 2] >> 1) & 1) as usize;
        if n == 0 || i + n > d.len() {
            break;
        }
        out.push(&d[i..i + n]);
        i += n;
    }
    out
}

/// Checks that `audio` is the demo file's frames in order, looped, from wherever it starts:
/// no frame missing, none repeated, none altered. Returns the frame count.
fn assert_unbroken(audio: &[u8], what: &str) -> usize {
    let demo = std::fs::read(demo_path()).unwrap();
    let demo_frames = mp3_frames(&demo);
    let index: std::collections::HashMap<&[u8], usize> = demo_frames
        .iter()
        .enumerate()
        .map(|(i, f)| (*f, i))
        .collect();
    let frames = mp3_frames(audio);
    let covered: usize = frames.iter().map(|f| f.len()).sum();
    assert!(
        audio.len() - covered < 2000,
        "{what}: the frame chain breaks at byte {covered} of {}",
        audio.len()
    );
    let ks: Vec<Option<usize>> = frames.iter().map(|f| index.get(f).copied()).collect();
    for (i, pair) in ks.windows(2).enumerate() {
        if let [Some(a), Some(b)] = pair {
            assert_eq!(
                *b,
                (a + 1) % demo_frames.len(),
                "{what}: frame {} is demo frame {b}, after demo frame {a}",
                i + 1
            );
        }
    }
    assert!(
        ks.iter().filter(|k| k.is_none()).count() <= 1,
        "{what}: frames that are not the source's"
    );
    frames.len()
}

/// Whether process `pid` holds the socket listening on `port` (via /proc).
fn owns_listen_port(pid: i32, port: u16) -> bool {
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let inodes: Vec<String> = tcp
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = u16::from_str_radix(f[1].rsplit(':').next()?, 16).ok()?;
            (local_port == port && f[3] == "0A").then(|| f[9].to_string())
        })
        .collect();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|t| {
            inodes
                .iter()
                .any(|i| t.to_string_lossy() == format!("socket:[{i}]"))
        })
}

/// `user:password` in Base64, for a Basic `Authorization` header.
fn base64_basic(user: &str, password: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for c in input.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn write_config(dir: &std::path::Path) -> std::path::PathBuf {
    write_config_with(dir, "throng.toml", false, "")
}

/// As [`write_config`], with the demo mount (a looped file) on.
fn write_demo_config(dir: &std::path::Path) -> std::path::PathBuf {
    write_config_with(dir, "throng.toml", true, "")
}

fn write_config_with(
    dir: &std::path::Path,
    name: &str,
    demo: bool,
    extra: &str,
) -> std::path::PathBuf {
    let cfg = dir.join(name);
    std::fs::write(
        &cfg,
        format!(
            "demo = {demo}\n[authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"upgrade-admin-pw\"\n[logging]\naccess-log = {:?}\n{extra}",
            dir.join(format!("{name}.access.log")).display().to_string()
        ),
    )
    .unwrap();
    cfg
}

fn wait_live(addr: SocketAddr) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.write_all(b"GET /status-json.xsl HTTP/1.0\r\n\r\n");
            let mut body = String::new();
            let _ = s.read_to_string(&mut body);
            if body.contains("/live.mp3") {
                // A second of audio in the queue, so listeners start with a burst.
                std::thread::sleep(Duration::from_secs(1));
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the ffmpeg source never went live");
}

#[test]
fn sigusr2_upgrade_keeps_listeners_and_the_source_without_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_demo_config(dir.path());
    let mut old = Serve::start(&cfg);
    let addr = old.addr;
    let mut source = ffmpeg_source(addr);
    wait_live(addr);
    let readers: Vec<Reader> = (0..20).map(|i| Reader::open(addr, i % 2 == 0)).collect();
    // The demo mount, a looped file, continues too.
    let demo: Vec<Reader> = (0..2)
        .map(|i| Reader::open_path(addr, "/demo.mp3", i == 0))
        .collect();
    std::thread::sleep(Duration::from_secs(2));

    let (new_pid, _new) = old.upgrade();
    let status = {
        let start = Instant::now();
        loop {
            if let Some(s) = old.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the old process did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert!(status.success(), "old process: {status}");
    assert_ne!(new_pid, old.child.id() as i32);
    assert!(
        owns_listen_port(new_pid, addr.port()),
        "the new process holds the listen socket"
    );

    // The new process accepts, and every listener goes on receiving from the same source.
    let sizes: Vec<usize> = readers.iter().map(Reader::len).collect();
    let late = Reader::open(addr, false);
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        source.0.try_wait().unwrap().is_none(),
        "ffmpeg kept pushing"
    );
    for (r, before) in readers.iter().zip(&sizes) {
        assert!(
            r.len() > before + 8_000,
            "a listener got {} bytes in 3 s after the upgrade",
            r.len() - before
        );
    }
    let (late_audio, _) = late.finish();
    assert!(mp3_frames(&late_audio).len() > 50);

    for (i, r) in readers.into_iter().enumerate() {
        let (audio, closed) = r.finish();
        assert!(!closed, "listener {i} was disconnected");
        let n = assert_unbroken(&audio, &format!("listener {i}"));
        assert!(n > 200, "listener {i}: {n} frames");
        if i == 1 {
            let errors = decode_errors(dir.path(), "capture.mp3", &audio);
            assert!(
                errors.is_empty(),
                "decode errors across the upgrade: {errors}"
            );
        }
    }
    for (i, r) in demo.into_iter().enumerate() {
        let (audio, closed) = r.finish();
        assert!(!closed, "demo listener {i} was disconnected");
        let n = assert_unbroken(&audio, &format!("demo listener {i}"));
        assert!(n > 200, "demo listener {i}: {n} frames");
    }
    // Stats carried over: the listeners are counted by the new process.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /status-json.xsl HTTP/1.0\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(
        body.contains("\"listener_peak\":21") || body.contains("\"listener_peak\":20"),
        "{body}"
    );
    // Server-wide stats too: the source connection count.
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /admin/stats HTTP/1.0\r\nAuthorization: Basic {}\r\n\r\n",
        base64_basic("admin", "upgrade-admin-pw")
    )
    .unwrap();
    let mut stats = String::new();
    s.read_to_string(&mut stats).unwrap();
    assert!(
        stats.contains("<source_client_connections>1</source_client_connections>"),
        "{stats}"
    );
}

#[test]
fn an_upgrade_whose_new_process_cannot_start_leaves_the_old_one_serving() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    let mut old = Serve::start(&cfg);
    let addr = old.addr;
    let _source = ffmpeg_source(addr);
    wait_live(addr);
    let reader = Reader::open(addr, true);
    // The new process reads the configuration again: break it.
    std::fs::write(&cfg, "listen = [\"127.0.0.1:0\"\n").unwrap();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(old.child.id() as i32, libc::SIGUSR2) };
    let line = old.wait_line("upgrade failed", Duration::from_secs(30));
    assert!(line.contains("still serving"), "{line}");
    let before = reader.len();
    std::thread::sleep(Duration::from_secs(2));
    assert!(reader.len() > before + 8_000, "the listener kept receiving");
    assert!(
        old.child.try_wait().unwrap().is_none(),
        "the old process still runs"
    );
    // It still accepts.
    let late = Reader::open(addr, false);
    std::thread::sleep(Duration::from_millis(500));
    assert!(late.len() > 0);
    let (audio, closed) = reader.finish();
    assert!(!closed);
    assert_unbroken(&audio, "the listener");
}

#[test]
fn an_upgraded_edge_keeps_its_relay_connection_and_listeners() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Serve::start(&write_config_with(dir.path(), "origin.toml", false, ""));
    let _source = ffmpeg_source(origin.addr);
    wait_live(origin.addr);
    let relay = format!(
        "[[relay]]\nserver = \"127.0.0.1\"\nport = {}\nmount = \"/live.mp3\"\n",
        origin.addr.port()
    );
    let edge = Serve::start(&write_config_with(dir.path(), "edge.toml", false, &relay));
    wait_live(edge.addr);
    let readers: Vec<Reader> = (0..4)
        .map(|i| Reader::open(edge.addr, i % 2 == 0))
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let (_, _new) = edge.upgrade();
    edge.wait_line(
        "relay adopted from the old process",
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_secs(3));
    // One connection to the origin throughout: the relay did not reconnect (the origin logs
    // a listener's access-log line when its connection closes).
    let origin_log =
        std::fs::read_to_string(dir.path().join("origin.toml.access.log")).unwrap_or_default();
    assert!(
        !origin_log.contains("GET /live.mp3"),
        "the relay's first connection to the origin closed: {origin_log}"
    );
    for (i, r) in readers.into_iter().enumerate() {
        let (audio, closed) = r.finish();
        assert!(!closed, "edge listener {i} was disconnected");
        let n = assert_unbroken(&audio, &format!("edge listener {i}"));
        assert!(n > 150, "edge listener {i}: {n} frames");
    }
}

#[test]
fn under_systemd_the_new_process_reports_itself_as_the_main_process() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut old = Serve::start_with_env(
        &write_config(dir.path()),
        &[("NOTIFY_SOCKET", socket_path.as_path())],
    );
    let mut buf = [0u8; 512];
    let mut read = || {
        let n = notify.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).to_string()
    };
    assert!(read().contains("READY=1"));
    let (new_pid, _new) = old.upgrade();
    let mut seen = Vec::new();
    while !seen.iter().any(|m: &String| m.contains("READY=1")) {
        seen.push(read());
    }
    assert!(seen[0].contains(&format!("MAINPID={new_pid}")), "{seen:?}");
    assert!(!seen.iter().any(|m| m.contains("STOPPING=1")), "{seen:?}");
    assert!(old.child.wait().unwrap().success());
}

/// Decode errors ffmpeg reports for `audio` (empty: clean).
fn decode_errors(dir: &std::path::Path, name: &str, audio: &[u8]) -> String {
    let file = dir.join(name);
    std::fs::write(&file, audio).unwrap();
    let out = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-i"])
        .arg(&file)
        .args(["-f", "null", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ffmpeg failed on {name}");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn an_ogg_opus_source_and_its_listener_go_on_across_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let old = Serve::start(&write_config(dir.path()));
    let addr = old.addr;
    let tone = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/test-tone.opus");
    let _source = Ffmpeg(
        Command::new("ffmpeg")
            .args([
                "-nostdin",
                "-loglevel",
                "error",
                "-re",
                "-stream_loop",
                "-1",
                "-i",
            ])
            .arg(&tone)
            .args(["-c", "copy", "-content_type", "audio/ogg", "-f", "ogg"])
            .arg(format!("icecast://source:{SOURCE_PW}@{addr}/live.opus"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    let reader = loop {
        std::thread::sleep(Duration::from_millis(200));
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /status-json.xsl HTTP/1.0\r\n\r\n")
            .unwrap();
        let mut body = String::new();
        let _ = s.read_to_string(&mut body);
        if body.contains("/live.opus") {
            std::thread::sleep(Duration::from_secs(1));
            break Reader::open_path(addr, "/live.opus", false);
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the Ogg source never went live"
        );
    };
    std::thread::sleep(Duration::from_secs(2));
    let (_, _new) = old.upgrade();
    // A listener joining the new process gets the header pages first.
    let late = Reader::open_path(addr, "/live.opus", false);
    std::thread::sleep(Duration::from_secs(3));
    let (across, closed) = reader.finish();
    assert!(!closed);
    let (after, _) = late.finish();
    assert!(across.len() > 20_000 && after.len() > 5_000);
    let errors = decode_errors(dir.path(), "across.ogg", &across);
    assert!(
        errors.is_empty(),
        "decode errors across the upgrade: {errors}"
    );
    let errors = decode_errors(dir.path(), "after.ogg", &after);
    assert!(
        errors.is_empty(),
        "decode errors after the upgrade: {errors}"
    );
}

/// A server with WebRTC (WHEP) on upgrades too: the new process binds the same UDP ports while
/// the old one still holds them (its viewers are not carried over; the old engines stop at the
/// hand-over), takes over, and then owns the ports alone: a socket bound without
/// `SO_REUSEPORT` cannot take them.
#[test]
fn a_server_with_webrtc_upgrades_and_keeps_its_udp_ports() {
    let port = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config_with(
        dir.path(),
        "throng.toml",
        true,
        &format!("[webrtc]\nudp-listen = \"127.0.0.1:{port}\"\n"),
    );
    let old = Serve::start(&cfg);
    let addr = old.addr;
    let (_pid, _guard) = old.upgrade();
    // The new process serves, and its engine holds the port.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /status-json.xsl HTTP/1.0\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.0 200"), "{body}");
    assert!(
        std::net::UdpSocket::bind(("127.0.0.1", port)).is_err(),
        "the WebRTC port is free after the upgrade"
    );
}

#[test]
fn an_upgrade_with_500_idle_sockets_open_shows_no_listener_gap_over_1_5_s() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_demo_config(dir.path());
    let mut old = Serve::start(&cfg);
    let addr = old.addr;
    let _source = ffmpeg_source(addr);
    wait_live(addr);
    // A listener of a source client's mount and one of a looped file's (the demo).
    let readers = [
        ("/live.mp3", Reader::open(addr, false)),
        ("/demo.mp3", Reader::open_path(addr, "/demo.mp3", false)),
    ];
    // 500 sockets that connect and send nothing (still reading their head when the upgrade
    // starts).
    let idle: Vec<TcpStream> = (0..500)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    let (_new_pid, _new) = old.upgrade();
    let start = Instant::now();
    while old.child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the old process did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(3));
    let end = Instant::now();
    for (mount, reader) in readers {
        let gap = reader.longest_gap(t0, end);
        eprintln!(
            "{mount}: longest listener gap across the upgrade with 500 idle sockets: {gap:?}"
        );
        let (audio, closed) = reader.finish();
        assert!(!closed, "the listener of {mount} was disconnected");
        assert_unbroken(&audio, mount);
        assert!(
            gap <= Duration::from_millis(1500),
            "{mount}: a gap of {gap:?} across the upgrade"
        );
    }
    drop(idle);
}
