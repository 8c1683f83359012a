//! Shared plumbing of the binary's tests: starting `throng serve` with arguments (or a prepared
//! command) and waiting for its "serving on" line, keeping its later standard-error lines for
//! inspection, signalling it, polling for a condition, and small raw-socket clients (HTTP with
//! Basic auth, a listener that counts bytes, a source login).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fresh, empty state directory for one server, under Cargo's temporary directory for
/// integration tests (generated passwords never touch the home directory of whoever runs the
/// tests).
pub fn fresh_state_dir() -> PathBuf {
    tempfile::Builder::new()
        .prefix("throng-state-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir")
        .keep()
}

/// Runs `throng serve <args>` with a fresh state directory; returns the child, the address
/// from its `throng: serving on http://ADDR/` line, and the standard-error lines up to that
/// one. Standard error keeps being drained afterwards, so the server never blocks on a full
/// pipe.
pub fn spawn_serve<I, S>(args: I) -> (Child, SocketAddr, Vec<String>)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let s = Serve::spawn(args, &[("THRONG_STATE_DIR", fresh_state_dir().as_os_str())]);
    let lines = s.lines.lock().unwrap().clone();
    (s.into_child(), lines.0, lines.1)
}

/// As [`spawn_serve`], for a command the caller prepared (`throng serve ...` with its own
/// environment, e.g. `NOTIFY_SOCKET`).
pub fn spawn_serve_cmd(mut cmd: Command) -> (Child, SocketAddr, Vec<String>) {
    cmd.env("THRONG_STATE_DIR", fresh_state_dir());
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn throng");
    let mut reader = BufReader::new(child.stderr.take().expect("piped stderr"));
    let mut lines = Vec::new();
    let addr = loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "throng exited: {lines:?}"
        );
        lines.push(line.clone());
        if let Some(rest) = line.trim().strip_prefix("throng: serving on http://") {
            break rest.trim_end_matches('/').parse().unwrap();
        }
    };
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = reader.read_to_string(&mut sink);
    });
    (child, addr, lines)
}

/// A running `throng serve` whose standard-error lines are all kept.
pub struct Serve {
    child: Option<Child>,
    /// The first "serving on" address.
    pub addr: SocketAddr,
    /// The address, then every standard-error line so far.
    lines: Arc<Mutex<(SocketAddr, Vec<String>)>>,
}

impl Serve {
    /// Runs `throng serve <args>` with `envs` set, until its "serving on" line.
    pub fn spawn<I, S>(args: I, envs: &[(&str, &OsStr)]) -> Serve
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_throng"));
        cmd.arg("serve").args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        Serve::spawn_cmd(cmd)
    }

    /// Runs a command the caller prepared (e.g. the binary through an `icecast` symlink),
    /// until its "serving on" line; standard output is discarded, `THRONG_LOG` unset.
    pub fn spawn_cmd(mut cmd: Command) -> Serve {
        cmd.env_remove("THRONG_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn throng");
        let mut reader = BufReader::new(child.stderr.take().expect("piped stderr"));
        let mut lines = Vec::new();
        let addr: SocketAddr = loop {
            let mut line = String::new();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "throng exited: {lines:?}"
            );
            lines.push(line.clone());
            if let Some(rest) = line.trim().strip_prefix("throng: serving on http://") {
                break rest.trim_end_matches('/').parse().unwrap();
            }
        };
        let shared = Arc::new(Mutex::new((addr, lines)));
        let sink = shared.clone();
        std::thread::spawn(move || loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => sink.lock().unwrap().1.push(line),
            }
        });
        Serve {
            child: Some(child),
            addr,
            lines: shared,
        }
    }

    /// Every standard-error line so far.
    pub fn stderr(&self) -> Vec<String> {
        self.lines.lock().unwrap().1.clone()
    }

    /// Waits (up to 10 s) for a standard-error line after the first `skip` ones containing
    /// `needle`, and returns it.
    pub fn wait_line(&self, skip: usize, needle: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.stderr().iter().skip(skip).find(|l| l.contains(needle)) {
                return l.clone();
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no line with {needle:?} in {:?}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `sig` to the server and waits for the next standard-error line with `needle`.
    pub fn signal_and_wait(&self, sig: i32, needle: &str) -> String {
        let skip = self.stderr().len();
        let pid = self.child.as_ref().unwrap().id() as i32;
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid, sig) };
        self.wait_line(skip, needle)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Gives up ownership of the process (no kill on drop).
    pub fn into_child(mut self) -> Child {
        self.child.take().unwrap()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_none()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `Authorization: Basic` header line for `user:pass`.
pub fn basic(user: &str, pass: &str) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    format!("Authorization: Basic {b64}\r\n")
}

/// Sends `request` (a whole HTTP/1.0 request) and reads the answer to the end (at most 5 s):
/// the status code and the text.
pub fn request(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// `GET path` with extra header lines (each ending in `\r\n`).
pub fn get(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
    request(
        addr,
        &format!("GET {path} HTTP/1.0\r\nHost: x\r\n{headers}\r\n"),
    )
}

/// The status of a source login (`SOURCE mount` as `source:pass`, MP3); the connection is
/// closed right after the answer.
pub fn source_login(addr: SocketAddr, mount: &str, pass: &str) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!(
        "SOURCE {mount} HTTP/1.0\r\n{}Content-Type: audio/mpeg\r\n\r\n",
        basic("source", pass)
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Waits up to `limit` for `cond`.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A listener in its own thread counting the bytes it receives until stopped or closed.
pub struct CountingListener {
    /// Bytes received so far (response head included).
    pub bytes: Arc<AtomicU64>,
    /// Set when the server closed the connection (or it failed).
    pub closed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CountingListener {
    /// Connects to `path` and starts counting.
    pub fn open(addr: SocketAddr, path: &str) -> CountingListener {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let bytes = Arc::new(AtomicU64::new(0));
        let closed = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, c, st) = (bytes.clone(), closed.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 16384];
            while !st.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        b.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
            }
            if !st.load(Ordering::Relaxed) {
                c.store(true, Ordering::Relaxed);
            }
        });
        CountingListener {
            bytes,
            closed,
            stop,
            thread: Some(thread),
        }
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Whether the connection was closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
}

impl Drop for CountingListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits until the playlist of `mount` lists at least 3 segments.
pub fn wait_segments(addr: std::net::SocketAddr, mount: &str) {
    let ok = wait_until(Duration::from_secs(40), || {
        let (status, master) = get(addr, &format!("/hls{mount}/index.m3u8"), "");
        let Some(variant) = (status == 200)
            .then(|| master.lines().last().map(str::to_owned))
            .flatten()
        else {
            return false;
        };
        let (_, media) = get(addr, &format!("/hls{mount}/{variant}"), "");
        media.matches("#EXTINF").count() >= 3
    });
    assert!(ok, "{mount}: no 3 segments");
}

/// The repository's `assets/NAME`.
pub fn asset(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../assets")
        .join(name)
}

/// ffmpeg pushing `assets/demo.mp3` in a loop at real time to `mount` as `source:pass`; killed
/// when dropped.
pub struct Ffmpeg(Child);

impl Ffmpeg {
    /// Starts it.
    pub fn start(addr: SocketAddr, mount: &str, pass: &str) -> Ffmpeg {
        let child = Command::new("ffmpeg")
            .args(["-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i"])
            .arg(asset("demo.mp3"))
            .args(["-c", "copy", "-content_type", "audio/mpeg", "-f", "mp3"])
            .arg(format!("icecast://source:{pass}@{addr}{mount}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ffmpeg (is it installed?)");
        Ffmpeg(child)
    }
}

impl Drop for Ffmpeg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `sig` to `child` and waits (up to 10 s) for it to exit; returns its status.
pub fn signal_and_wait(child: &mut Child, sig: i32) -> std::process::ExitStatus {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, sig) };
    for _ in 0..200 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("throng did not exit within 10 s of signal {sig}");
}

/// Polls `check` every 50 ms for up to 10 s; true as soon as it holds.
pub fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if check() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// The header and rows of `throng report sessions --from 0` of the ledger in state directory
/// `state`, split on commas (no field of the tests' sessions holds one).
pub fn report_sessions(state: &std::path::Path) -> (Vec<String>, Vec<Vec<String>>) {
    let out = Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["report", "sessions", "--from", "0", "--state-dir"])
        .arg(state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "throng report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect();
    assert!(!rows.is_empty(), "no CSV header from throng report");
    let header = rows.remove(0);
    (header, rows)
}
