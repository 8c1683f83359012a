//! The log files of a running `throng serve`, over real sockets: the access log holds no
//! credential sent in a query string (every kind of request that writes a line: listeners,
//! admin and status, `/admin.cgi`, sources, small error replies) and every line carries the
//! User-Agent and Referer the client sent; SIGUSR1 after a rename of both logs (what logrotate
//! does) sends new lines to new files at the configured paths.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{eventually, signal_and_wait, spawn_serve};

const AGENT: &str = "throng-it/1.0 (logs)";
const REFERER: &str = "http://referer.test/page";

/// A temporary directory with a configuration that logs to files in it.
pub struct Dir {
    pub path: PathBuf,
}

impl Dir {
    /// Creates the directory and its `throng.toml` (demo mount, fixed passwords, `access.log`
    /// and `error.log` in the directory).
    pub fn new(name: &str) -> Dir {
        let path = std::env::temp_dir().join(format!("throng-it-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        let d = Dir { path };
        std::fs::write(
            d.file("throng.toml"),
            format!(
                "demo = true\n[authentication]\nsource-password = \"srcpw\"\n\
                 admin-password = \"adminpw\"\n[logging]\naccess-log = {:?}\n\
                 error-log = {:?}\n",
                d.file("access.log").display().to_string(),
                d.file("error.log").display().to_string()
            ),
        )
        .unwrap();
        d
    }

    /// The path of `name` in the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The contents of file `name` (empty if missing).
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.file(name)).unwrap_or_default()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Starts `throng serve` on the directory's configuration, on an ephemeral port.
pub fn start(dir: &Dir) -> (std::process::Child, SocketAddr) {
    let config = dir.file("throng.toml");
    let (child, addr, _) = spawn_serve([
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
    ]);
    (child, addr)
}

/// Sends `head` (request line and extra headers, without the final blank line) with the
/// test's User-Agent and Referer; returns the status line of the answer. The server closes
/// these connections after answering (HTTP/1.0).
pub fn request(addr: SocketAddr, head: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{head}\r\nUser-Agent: {AGENT}\r\nReferer: {REFERER}\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().unwrap_or("").to_owned()
}

fn basic(user: &str, password: &str) -> String {
    // A tiny base64 for the test's fixed ASCII credentials.
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for c in b.chunks(3) {
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
    format!("Authorization: Basic {out}")
}

#[test]
fn access_log_redacts_credentials_and_keeps_each_clients_agent() {
    let dir = Dir::new("redact");
    let (mut child, addr) = start(&dir);
    let admin = basic("admin", "adminpw");
    let source = basic("source", "srcpw");
    let wrong = basic("source", "wrong");
    // (request head, expected status code, the request line's start as logged)
    let cases: Vec<(String, &str, &str)> = vec![
        (
            "GET /admin.cgi?mode=updinfo&pass=SECRET1&song=x HTTP/1.0".into(),
            "401",
            "GET /admin.cgi?mode=updinfo&pass=***&song=x",
        ),
        (
            "GET /admin/buildm3u?mount=/demo.mp3&username=u&password=SECRET2 HTTP/1.0".into(),
            "200",
            "GET /admin/buildm3u?mount=/demo.mp3&username=u&password=***",
        ),
        (
            // Every request here carries another site's Referer, so this state-changing
            // admin request is refused as cross-site (403); its line is redacted all the same.
            format!("GET /admin/metadata?mount=/demo.mp3&mode=updinfo&pass=SECRET3&song=x HTTP/1.0\r\n{admin}"),
            "403",
            "GET /admin/metadata?mount=/demo.mp3&mode=updinfo&pass=***&song=x",
        ),
        (
            "GET /admin/metadata?mount=/demo.mp3&mode=updinfo&pass=&song=x HTTP/1.0".into(),
            "401",
            "GET /admin/metadata?mount=/demo.mp3&mode=updinfo&pass=***&song=x",
        ),
        ("GET /status-json.xsl?token=SECRET4 HTTP/1.0".into(), "200", "GET /status-json.xsl?token=***"),
        ("GET /nosuch.mp3?key=SECRET5 HTTP/1.0".into(), "404", "GET /nosuch.mp3?key=***"),
        (
            format!("SOURCE /live.mp3?passwd=SECRET6 HTTP/1.0\r\n{wrong}"),
            "401",
            "SOURCE /live.mp3?passwd=***",
        ),
        (
            format!("PUT /live2.mp3?pwd=SECRET7 HTTP/1.0\r\n{source}"),
            "403",
            "PUT /live2.mp3?pwd=***",
        ),
        ("OPTIONS /demo.mp3?auth=SECRET8 HTTP/1.0".into(), "204", "OPTIONS /demo.mp3?auth=***"),
        ("BREW /pot?secret=SECRET9 HTTP/1.0".into(), "405", "BREW /pot?secret=***"),
    ];
    for (head, status, _) in &cases {
        let got = request(addr, head);
        assert!(got.contains(status), "{head:?}: answered {got:?}");
    }
    // A listener: its line is written by the fan-out shard when it leaves.
    let mut l = TcpStream::connect(addr).unwrap();
    write!(
        l,
        "GET /demo.mp3?api_key=SECRET10 HTTP/1.0\r\nUser-Agent: {AGENT}\r\nReferer: {REFERER}\r\n\r\n"
    )
    .unwrap();
    let mut buf = [0u8; 4096];
    assert!(l.read(&mut buf).unwrap() > 0);
    drop(l);
    assert!(signal_and_wait(&mut child, libc::SIGTERM).success());
    let log = dir.read("access.log");
    assert!(
        !log.contains("SECRET"),
        "a secret in the access log:\n{log}"
    );
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), cases.len() + 1, "one line per request:\n{log}");
    let tail = format!("\"{REFERER}\" \"{AGENT}\" ");
    for line in &lines {
        assert!(line.contains(&tail), "agent or referer missing: {line}");
    }
    for (_, status, logged) in &cases {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("\"{logged}")) && l.contains(&format!("\" {status} "))),
            "no line for {logged} {status}:\n{log}"
        );
    }
    assert!(
        log.contains("\"GET /demo.mp3?api_key=*** HTTP/1.0\" 200 "),
        "{log}"
    );
}

/// Renames `name` to `name.1` in `dir`, as logrotate does.
fn rotate(dir: &Path, name: &str) {
    std::fs::rename(dir.join(name), dir.join(format!("{name}.1"))).unwrap();
}

#[test]
fn sigusr1_reopens_both_logs_at_their_paths() {
    let dir = Dir::new("usr1");
    let (mut child, addr) = start(&dir);
    assert!(request(addr, "GET /status-json.xsl?before HTTP/1.0").contains("200"));
    assert!(eventually(|| dir.read("access.log").contains("?before")));
    assert!(dir.read("error.log").contains("listening on"));
    rotate(&dir.path, "access.log");
    rotate(&dir.path, "error.log");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
    assert!(
        eventually(|| dir.read("error.log").contains("logs reopened")),
        "no 'logs reopened' in a new error log; old one:\n{}",
        dir.read("error.log.1")
    );
    assert!(request(addr, "GET /status-json.xsl?after HTTP/1.0").contains("200"));
    assert!(
        eventually(|| dir.read("access.log").contains("?after")),
        "new access log: {:?}",
        dir.read("access.log")
    );
    assert!(signal_and_wait(&mut child, libc::SIGTERM).success());
    let (old_access, new_access) = (dir.read("access.log.1"), dir.read("access.log"));
    assert!(old_access.contains("?before") && !old_access.contains("?after"));
    assert!(!new_access.contains("?before"));
    let (old_error, new_error) = (dir.read("error.log.1"), dir.read("error.log"));
    assert!(old_error.contains("SIGUSR1 received"), "{old_error}");
    assert!(!old_error.contains("logs reopened"), "{old_error}");
    assert!(new_error.contains("shutting down"), "{new_error}");
    assert!(!new_error.contains("listening on"), "{new_error}");
}
