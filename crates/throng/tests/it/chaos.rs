//! Chaos tests of real `throng serve` processes on loopback, each bounded in time: an origin
//! killed with SIGKILL under two relaying edges (their listeners fall back to a file mount
//! without a disconnect, the edges reconnect with backoff to a new origin on the same port and
//! the listeners come back to the relayed stream, frame chain unbroken); a source that stalls
//! in the middle of a frame (closed after source-timeout, its listeners moved to the fallback
//! or closed after whole frames, another mount untouched); relay upstreams that answer a web
//! page or close in the middle of their response head (clear log line, retries with growing
//! delays, no crash, other mounts go on); and an access log on a full disk (`/dev/full`: one
//! error line, everything else served). What listeners receive is checked frame by frame:
//! every MP3 frame is the origin's (the demo file) or the fallback's (a tone), in order.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::{asset, basic, fresh_state_dir, get, wait_until, Ffmpeg, Serve};

const PW: &str = "chaos-source-pw";

/// `throng serve --listen LISTEN --config CONFIG` with a fresh state directory.
fn serve(listen: &str, config: &Path) -> Serve {
    let state = fresh_state_dir();
    Serve::spawn(
        [
            OsStr::new("--listen"),
            OsStr::new(listen),
            OsStr::new("--config"),
            config.as_os_str(),
        ],
        &[("THRONG_STATE_DIR", state.as_os_str())],
    )
}

/// Writes `dir/name`: `extra` (top-level keys first), then the passwords and the access log
/// off unless `extra` sets it.
fn config(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let path = dir.join(name);
    let logging = if extra.contains("[logging]") {
        String::new()
    } else {
        "[logging]\naccess-log = \"\"\n".to_owned()
    };
    std::fs::write(
        &path,
        format!(
            "{extra}\n[authentication]\nsource-password = \"{PW}\"\n\
             admin-password = \"chaos-admin-pw\"\n{logging}"
        ),
    )
    .unwrap();
    path
}

/// A 20 s stereo 44.1 kHz 64 kbit/s MP3 tone (the demo file's format, other frames), made by
/// ffmpeg: the fallback, so a listener's bytes tell which mount they came from.
fn tone(dir: &Path) -> PathBuf {
    let path = dir.join("tone.mp3");
    let ok = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-f", "lavfi", "-i"])
        .arg("sine=frequency=523:duration=20")
        .args([
            "-ac",
            "2",
            "-ar",
            "44100",
            "-b:a",
            "64k",
            "-c:a",
            "libmp3lame",
        ])
        .args(["-write_xing", "0", "-id3v2_version", "0", "-y"])
        .arg(&path)
        .stdout(Stdio::null())
        .status()
        .expect("ffmpeg is installed by scripts/install-deps.sh")
        .success();
    assert!(ok, "ffmpeg could not make the tone");
    path
}

/// Whether the status document of `addr` lists `mount`.
fn lists(addr: SocketAddr, mount: &str) -> bool {
    let (status, body) = get(addr, "/status-json.xsl", "");
    status == 200 && body.contains(&format!("{mount}\""))
}

/// Waits up to `limit` for a standard-error line after the first `skip` holding every one of
/// `needles`; returns it.
fn wait_for_line(s: &Serve, skip: usize, needles: &[&str], limit: Duration) -> String {
    let mut found = None;
    wait_until(limit, || {
        found = s
            .stderr()
            .into_iter()
            .skip(skip)
            .find(|l| needles.iter().all(|n| l.contains(n)));
        found.is_some()
    });
    found.unwrap_or_else(|| panic!("no line with {needles:?} in {:#?}", s.stderr()))
}

/// A listener reading on its own thread and keeping every byte after the response head.
struct Tap {
    stop: Arc<AtomicBool>,
    got: Arc<Mutex<Vec<u8>>>,
    thread: JoinHandle<End>,
}

/// How a [`Tap`]'s connection ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// Still open when the test stopped reading.
    Open,
    /// The server closed it (end of file).
    Eof,
    /// A read error (reset).
    Error,
}

impl Tap {
    fn open(addr: SocketAddr, path: &str) -> Tap {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nUser-Agent: chaos-test\r\n\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte).expect("a response head");
            head.push(byte[0]);
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        assert!(text.starts_with("HTTP/1.0 200"), "{path}: {text}");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let got = Arc::new(Mutex::new(Vec::new()));
        let (st, g) = (stop.clone(), got.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            while !st.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => return End::Eof,
                    Ok(n) => g.lock().unwrap().extend_from_slice(&buf[..n]),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => return End::Error,
                }
            }
            End::Open
        });
        Tap { stop, got, thread }
    }

    fn len(&self) -> usize {
        self.got.lock().unwrap().len()
    }

    fn finish(self) -> (Vec<u8>, End) {
        self.stop.store(true, Ordering::Relaxed);
        let end = self.thread.join().unwrap();
        let body = std::mem::take(&mut *self.got.lock().unwrap());
        (body, end)
    }
}

/// MPEG-1 layer III frames from the start of `d`, whole ones only, in order.
fn frames(d: &[u8]) -> Vec<&[u8]> {
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

/// Where one received frame comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Src {
    /// Frame `i` of the demo file (what the sources push).
    Demo(usize),
    /// A frame of the fallback tone.
    Tone,
    /// Neither (an encoder's info frame).
    Other,
}

/// The frames of the demo file and of the tone, to tell received frames apart.
struct Catalog {
    demo: HashMap<Vec<u8>, usize>,
    demo_len: usize,
    tone: std::collections::HashSet<Vec<u8>>,
}

impl Catalog {
    fn new(tone: Option<&Path>) -> Catalog {
        let d = std::fs::read(asset("demo.mp3")).unwrap();
        let fs = frames(&d);
        let demo_len = fs.len();
        let demo = fs
            .into_iter()
            .enumerate()
            .map(|(i, f)| (f.to_vec(), i))
            .collect();
        let tone = tone.map_or_else(Default::default, |t| {
            let t = std::fs::read(t).unwrap();
            frames(&t).into_iter().map(<[u8]>::to_vec).collect()
        });
        Catalog {
            demo,
            demo_len,
            tone,
        }
    }

    /// Checks that `audio` is one unbroken chain of whole MP3 frames (no partial frame where a
    /// switch happened, at most a partial one at the very end), each the demo's or the tone's,
    /// demo frames in order within each stretch; returns the stretches as (kind, frame count),
    /// kind `true` for the demo.
    fn stretches(&self, audio: &[u8], what: &str) -> Vec<(bool, usize)> {
        let fs = frames(audio);
        let covered: usize = fs.iter().map(|f| f.len()).sum();
        assert!(
            audio.len() - covered < 1500,
            "{what}: the frame chain breaks at byte {covered} of {}",
            audio.len()
        );
        let from: Vec<Src> = fs
            .iter()
            .map(|f| match self.demo.get(*f) {
                Some(&i) => Src::Demo(i),
                None if self.tone.contains(*f) => Src::Tone,
                None => Src::Other,
            })
            .collect();
        let others = from.iter().filter(|f| **f == Src::Other).count();
        assert!(others <= 3, "{what}: {others} frames from neither source");
        let mut out: Vec<(bool, usize)> = Vec::new();
        let mut last_demo: Option<usize> = None;
        for f in from {
            let demo = match f {
                Src::Demo(i) => {
                    if let (Some(a), Some((true, _))) = (last_demo, out.last()) {
                        assert_eq!(
                            i,
                            (a + 1) % self.demo_len,
                            "{what}: demo frame {i} after demo frame {a}"
                        );
                    }
                    last_demo = Some(i);
                    true
                }
                Src::Tone => false,
                Src::Other => continue,
            };
            match out.last_mut() {
                Some((k, n)) if *k == demo => *n += 1,
                _ => {
                    // A new source (after a fallback, or a new origin) may start anywhere.
                    if demo {
                        last_demo = None;
                        if let Src::Demo(i) = f {
                            last_demo = Some(i);
                        }
                    }
                    out.push((demo, 1));
                }
            }
        }
        out
    }
}

/// The kinds of `stretches`, in order.
fn kinds(stretches: &[(bool, usize)]) -> Vec<&'static str> {
    stretches
        .iter()
        .map(|(demo, _)| if *demo { "relayed" } else { "fallback" })
        .collect()
}

#[test]
fn an_origin_killed_under_two_edges_comes_back_and_their_listeners_never_drop() {
    let dir = tempfile::tempdir().unwrap();
    let tone = tone(dir.path());
    let catalog = Catalog::new(Some(&tone));
    let origin_cfg = config(dir.path(), "origin.toml", "");
    let origin = serve("127.0.0.1:0", &origin_cfg);
    let port = origin.addr.port();
    let source = Ffmpeg::start(origin.addr, "/live.mp3", PW);
    assert!(wait_until(Duration::from_secs(15), || lists(
        origin.addr,
        "/live.mp3"
    )));

    let edge_cfg = config(
        dir.path(),
        "edge.toml",
        &format!(
            "[[relay]]\nserver = \"127.0.0.1\"\nport = {port}\nmount = \"/live.mp3\"\n\
             [[mount]]\nname = \"/fallback.mp3\"\nfile = {:?}\n\
             [[mount]]\nname = \"/live.mp3\"\nfallback-mount = \"/fallback.mp3\"\n\
             fallback-override = true\n",
            tone.display().to_string()
        ),
    );
    let edges = [
        serve("127.0.0.1:0", &edge_cfg),
        serve("127.0.0.1:0", &edge_cfg),
    ];
    for e in &edges {
        assert!(wait_until(Duration::from_secs(15), || lists(
            e.addr,
            "/live.mp3"
        )));
    }
    std::thread::sleep(Duration::from_secs(1));
    let taps: Vec<(usize, Tap)> = edges
        .iter()
        .enumerate()
        .flat_map(|(i, e)| {
            [
                (i, Tap::open(e.addr, "/live.mp3")),
                (i, Tap::open(e.addr, "/live.mp3")),
            ]
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));

    // SIGKILL: no goodbye to the relays, the source or anyone.
    let skip: Vec<usize> = edges.iter().map(|e| e.stderr().len()).collect();
    let mut origin = origin.into_child();
    origin.kill().unwrap();
    origin.wait().unwrap();
    drop(source);
    for (e, &skip) in edges.iter().zip(&skip) {
        wait_for_line(
            e,
            skip,
            &["relay down", "/live.mp3"],
            Duration::from_secs(10),
        );
    }
    // The listeners hear the fallback meanwhile.
    let before: Vec<usize> = taps.iter().map(|(_, t)| t.len()).collect();
    std::thread::sleep(Duration::from_secs(3));
    for ((_, t), b) in taps.iter().zip(&before) {
        assert!(
            t.len() > b + 8_000,
            "a listener got {} bytes in 3 s of fallback",
            t.len() - b
        );
    }

    // A new origin on the same port; the edges find it again (backoff) and their listeners
    // go back to the relayed stream.
    let origin = serve(&format!("127.0.0.1:{port}"), &origin_cfg);
    let _source = Ffmpeg::start(origin.addr, "/live.mp3", PW);
    for (e, &skip) in edges.iter().zip(&skip) {
        wait_for_line(
            e,
            skip,
            &["relay connected", "/live.mp3"],
            Duration::from_secs(40),
        );
        // While the port was closed: a refused attempt, then a longer wait (backoff).
        let lines = e.stderr();
        assert!(
            lines.iter().skip(skip).any(|l| l.contains("relay down")
                && l.contains("cannot connect")
                && l.contains("reconnecting in 2 s")),
            "no retry with backoff: {lines:#?}"
        );
    }
    std::thread::sleep(Duration::from_secs(3));
    for e in &edges {
        let (_, body) = get(e.addr, "/status-json.xsl", "");
        assert!(body.contains("/live.mp3\""), "{body}");
    }
    for (n, (i, t)) in taps.into_iter().enumerate() {
        let (audio, end) = t.finish();
        let what = format!("edge {i} listener {n}");
        assert_eq!(end, End::Open, "{what} was disconnected");
        let s = catalog.stretches(&audio, &what);
        assert_eq!(
            kinds(&s),
            ["relayed", "fallback", "relayed"],
            "{what}: {s:?}"
        );
        assert!(s[1].1 > 50 && s[2].1 > 50, "{what}: {s:?}");
    }
}

/// A source client that pushes the demo's frames at real time for `secs`, then half a frame,
/// then nothing; returns how long after the stall the server closed the connection (`None`:
/// not within 20 s).
fn stalling_source(addr: SocketAddr, mount: &str, secs: u64) -> JoinHandle<Option<Duration>> {
    let mount = mount.to_owned();
    std::thread::spawn(move || {
        let demo = std::fs::read(asset("demo.mp3")).unwrap();
        let fs: Vec<Vec<u8>> = frames(&demo).into_iter().map(<[u8]>::to_vec).collect();
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "SOURCE {mount} HTTP/1.0\r\n{}Content-Type: audio/mpeg\r\n\r\n",
            basic("source", PW)
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut answer = [0u8; 64];
        let n = s.read(&mut answer).unwrap();
        assert!(
            answer[..n].starts_with(b"HTTP/1.0 200"),
            "{:?}",
            String::from_utf8_lossy(&answer[..n])
        );
        let start = Instant::now();
        let mut i = 0;
        while start.elapsed() < Duration::from_secs(secs) {
            s.write_all(&fs[i % fs.len()]).unwrap();
            i += 1;
            // 1152 samples at 44.1 kHz: 26 ms a frame.
            std::thread::sleep(Duration::from_millis(26));
        }
        let next = &fs[i % fs.len()];
        s.write_all(&next[..next.len() / 2]).unwrap();
        let stalled = Instant::now();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(0) => Some(stalled.elapsed()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Some(stalled.elapsed()),
            _ => None,
        }
    })
}

#[test]
fn a_source_stalled_mid_frame_is_closed_and_its_listeners_fall_back_or_end_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let tone = tone(dir.path());
    let catalog = Catalog::new(Some(&tone));
    let cfg = config(
        dir.path(),
        "throng.toml",
        &format!(
            "[limits]\nsource-timeout = 2\n\
             [[mount]]\nname = \"/fallback.mp3\"\nfile = {:?}\n\
             [[mount]]\nname = \"/stall.mp3\"\nfallback-mount = \"/fallback.mp3\"\n",
            tone.display().to_string()
        ),
    );
    let server = serve("127.0.0.1:0", &cfg);
    let addr = server.addr;
    let _other = Ffmpeg::start(addr, "/other.mp3", PW);
    let stall = stalling_source(addr, "/stall.mp3", 6);
    let stall2 = stalling_source(addr, "/nofallback.mp3", 6);
    assert!(wait_until(Duration::from_secs(15), || {
        ["/stall.mp3", "/nofallback.mp3", "/other.mp3"]
            .iter()
            .all(|m| lists(addr, m))
    }));
    let fell_back = [Tap::open(addr, "/stall.mp3"), Tap::open(addr, "/stall.mp3")];
    let ended = Tap::open(addr, "/nofallback.mp3");
    let other = Tap::open(addr, "/other.mp3");

    // Both stall about 6 s in; source-timeout is 2 s.
    for (what, s) in [("/stall.mp3", stall), ("/nofallback.mp3", stall2)] {
        let closed_after = s.join().unwrap();
        let after =
            closed_after.unwrap_or_else(|| panic!("{what}: the stalled source was never closed"));
        assert!(
            after >= Duration::from_millis(1500),
            "{what}: closed {after:?} after the stall, before source-timeout"
        );
    }
    wait_for_line(
        &server,
        0,
        &["source ended", "mount=/stall.mp3", "source-timeout"],
        Duration::from_secs(5),
    );
    wait_for_line(
        &server,
        0,
        &["source ended", "mount=/nofallback.mp3", "source-timeout"],
        Duration::from_secs(5),
    );
    let before = other.len();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        other.len() > before + 8_000,
        "the other mount's listener kept receiving"
    );

    for (n, t) in fell_back.into_iter().enumerate() {
        let (audio, end) = t.finish();
        let what = format!("/stall.mp3 listener {n}");
        assert_eq!(end, End::Open, "{what} was disconnected");
        let s = catalog.stretches(&audio, &what);
        assert_eq!(kinds(&s), ["relayed", "fallback"], "{what}: {s:?}");
        assert!(s[1].1 > 40, "{what}: {s:?}");
    }
    let (audio, end) = ended.finish();
    assert_eq!(
        end,
        End::Eof,
        "the listener of the mount without a fallback is closed cleanly"
    );
    let whole: usize = frames(&audio).iter().map(|f| f.len()).sum();
    assert_eq!(
        whole,
        audio.len(),
        "only whole frames reach the listener, never the half one"
    );
    assert!(catalog.stretches(&audio, "/nofallback.mp3")[0].1 > 40);
    let (audio, end) = other.finish();
    assert_eq!(
        end,
        End::Open,
        "the other mount's listener was disconnected"
    );
    let s = catalog.stretches(&audio, "/other.mp3");
    assert_eq!(kinds(&s), ["relayed"], "the other mount: {s:?}");
}

/// How a fake upstream answers a relay.
#[derive(Clone, Copy)]
enum Answer {
    /// `200 OK` with `Content-Type: text/html` and a web page, connection kept open.
    Html,
    /// Half a response head, then the connection closes.
    CutHead,
}

/// A fake upstream on loopback answering every connection with `answer`; the times of the
/// connections are recorded. Stops when dropped.
struct FakeUpstream {
    port: u16,
    hits: Arc<Mutex<Vec<Instant>>>,
    stop: Arc<AtomicBool>,
}

impl FakeUpstream {
    fn start(answer: Answer) -> FakeUpstream {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, st) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !st.load(Ordering::Relaxed) {
                let Ok((mut s, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                h.lock().unwrap().push(Instant::now());
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                match answer {
                    Answer::Html => {
                        let _ = s.write_all(
                            b"HTTP/1.0 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                              Server: nginx\r\n\r\n<html><body><h1>502 Bad Gateway</h1></body></html>\n",
                        );
                        held.push(s);
                    }
                    Answer::CutHead => {
                        let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Ty");
                    }
                }
            }
        });
        FakeUpstream { port, hits, stop }
    }

    fn hits(&self) -> Vec<Instant> {
        self.hits.lock().unwrap().clone()
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn relay_upstreams_answering_a_web_page_or_half_a_head_are_retried_with_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(None);
    let html = FakeUpstream::start(Answer::Html);
    let cut = FakeUpstream::start(Answer::CutHead);
    let cfg = config(
        dir.path(),
        "edge.toml",
        &format!(
            "demo = true\n[limits]\nsource-timeout = 5\n\
             [[relay]]\nserver = \"127.0.0.1\"\nport = {}\nmount = \"/html.mp3\"\n\
             [[relay]]\nserver = \"127.0.0.1\"\nport = {}\nmount = \"/cut.mp3\"\n",
            html.port, cut.port
        ),
    );
    let edge = serve("127.0.0.1:0", &cfg);
    let demo = Tap::open(edge.addr, "/demo.mp3");
    let start = Instant::now();
    let mut web_page_served = false;
    while start.elapsed() < Duration::from_secs(9) {
        // The web page never reaches a listener as a stream.
        let (status, body) = get(edge.addr, "/html.mp3", "");
        web_page_served |= status == 200 || body.contains("Bad Gateway");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        !web_page_served,
        "the edge served the upstream's web page as /html.mp3"
    );
    for (what, up) in [("/html.mp3", &html), ("/cut.mp3", &cut)] {
        let hits = up.hits();
        // 1 s, 2 s, 4 s between attempts: 4 in 9 s; a hot loop would make hundreds.
        assert!(
            (3..=6).contains(&hits.len()),
            "{what}: {} attempts in 9 s",
            hits.len()
        );
        let gaps: Vec<Duration> = hits.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.iter().all(|g| *g >= Duration::from_millis(700)),
            "{what}: {gaps:?}"
        );
        assert!(
            gaps[1] > gaps[0] + Duration::from_millis(500),
            "{what}: delays do not grow: {gaps:?}"
        );
    }
    let line = wait_for_line(
        &edge,
        0,
        &["relay down", "mount=/html.mp3"],
        Duration::from_secs(1),
    );
    assert!(
        line.contains("text/html") && line.contains("not an audio stream"),
        "{line}"
    );
    let line = wait_for_line(
        &edge,
        0,
        &["relay down", "mount=/cut.mp3"],
        Duration::from_secs(1),
    );
    assert!(
        line.contains("closed the connection before answering"),
        "{line}"
    );
    let mut edge = edge;
    assert!(edge.running(), "the edge is still up");
    assert!(!edge.stderr().iter().any(|l| l.contains("panicked")));
    let (audio, end) = demo.finish();
    assert_eq!(end, End::Open, "the demo mount's listener was disconnected");
    let s = catalog.stretches(&audio, "/demo.mp3");
    assert_eq!(s.len(), 1, "the demo mount played on unbroken: {s:?}");
    assert!(s[0].1 > 250, "{s:?}");
}

#[test]
fn an_access_log_on_a_full_disk_is_reported_once_and_serving_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(None);
    let cfg = config(
        dir.path(),
        "throng.toml",
        "[logging]\naccess-log = \"/dev/full\"\n",
    );
    let mut server = serve("127.0.0.1:0", &cfg);
    let addr = server.addr;
    let _source = Ffmpeg::start(addr, "/live.mp3", PW);
    assert!(wait_until(Duration::from_secs(15), || lists(
        addr,
        "/live.mp3"
    )));
    let taps = [Tap::open(addr, "/live.mp3"), Tap::open(addr, "/live.mp3")];
    // Many finished requests, each an access-log line that cannot be written.
    for round in 0..3 {
        for _ in 0..30 {
            assert_eq!(get(addr, "/status-json.xsl", "").0, 200);
        }
        for _ in 0..5 {
            let t = Tap::open(addr, "/live.mp3");
            std::thread::sleep(Duration::from_millis(50));
            drop(t.finish());
        }
        std::thread::sleep(Duration::from_millis(500 + 500 * round));
    }
    let line = wait_for_line(
        &server,
        0,
        &["cannot write the access log"],
        Duration::from_secs(5),
    );
    assert!(line.contains("/dev/full"), "{line}");
    let reports = server
        .stderr()
        .iter()
        .filter(|l| l.contains("access log"))
        .count();
    assert_eq!(
        reports,
        1,
        "one report, not one per line: {:#?}",
        server.stderr()
    );
    assert!(server.running());
    // The source stayed connected: one "source connected", no "source ended".
    assert!(!server.stderr().iter().any(|l| l.contains("source ended")));
    assert!(lists(addr, "/live.mp3"));
    for (n, t) in taps.into_iter().enumerate() {
        let (audio, end) = t.finish();
        assert_eq!(end, End::Open, "listener {n} was disconnected");
        let s = catalog.stretches(&audio, &format!("listener {n}"));
        assert_eq!(s.len(), 1, "listener {n}: {s:?}");
        assert!(s[0].1 > 100, "listener {n}: {s:?}");
    }
}
