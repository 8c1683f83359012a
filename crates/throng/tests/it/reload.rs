//! Configuration reload on a running `throng serve` (SIGHUP and admin `reloadconfig`), over
//! real sockets and processes: listeners and an ffmpeg source stay connected and keep receiving
//! across a reload, a changed source password takes effect for new logins, a broken file is
//! refused with the running configuration kept, and mounts, max-listeners and relays follow
//! the file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use libc::SIGHUP;

use crate::support::*;

/// A server on a TOML file in a temporary directory, which the tests rewrite.
struct Fixture {
    dir: tempfile::TempDir,
    serve: Serve,
}

const ADMIN: &str = "adm1n-pw";

/// The TOML of a test server: source password `source_pw`, admin password [`ADMIN`], no access
/// log, then `extra`.
fn toml(source_pw: &str, extra: &str) -> String {
    format!(
        "workers = 1\n[authentication]\nsource-password = \"{source_pw}\"\n\
         admin-password = \"{ADMIN}\"\n[logging]\naccess-log = \"\"\n{extra}"
    )
}

impl Fixture {
    fn start(text: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("throng.toml"), text).unwrap();
        let state = dir.path().join("state");
        let serve = Serve::spawn(
            [
                "-c".as_ref(),
                dir.path().join("throng.toml").as_os_str(),
                "--listen".as_ref(),
                "127.0.0.1:0".as_ref(),
            ],
            &[("THRONG_STATE_DIR", state.as_os_str())],
        );
        Fixture { dir, serve }
    }

    fn addr(&self) -> SocketAddr {
        self.serve.addr
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("throng.toml")
    }

    fn rewrite(&self, text: &str) {
        std::fs::write(self.path(), text).unwrap();
    }

    /// Sends SIGHUP and returns the reload's outcome line.
    fn hup(&self) -> String {
        self.serve.signal_and_wait(SIGHUP, "configuration reload")
    }

    fn wait_live(&self, mount: &str) {
        let addr = self.addr();
        assert!(
            wait_until(Duration::from_secs(10), || {
                get(addr, "/status-json.xsl", "").1.contains(mount)
            }),
            "{mount} never went live"
        );
    }
}

/// Opens `n` listeners on `mount` and waits until each has received some audio.
fn listeners(addr: SocketAddr, mount: &str, n: usize) -> Vec<CountingListener> {
    let ls: Vec<CountingListener> = (0..n)
        .map(|_| CountingListener::open(addr, mount))
        .collect();
    assert!(
        wait_until(Duration::from_secs(10), || ls
            .iter()
            .all(|l| l.received() > 8192)),
        "listeners did not all receive audio"
    );
    ls
}

/// Asserts that every listener is still connected and received more than `min` bytes within
/// `window` from now.
fn still_receiving(ls: &[CountingListener], window: Duration, min: u64) {
    let before: Vec<u64> = ls.iter().map(CountingListener::received).collect();
    std::thread::sleep(window);
    for (i, l) in ls.iter().enumerate() {
        assert!(!l.is_closed(), "listener {i} was disconnected");
        let got = l.received() - before[i];
        assert!(got > min, "listener {i} got only {got} bytes in {window:?}");
    }
}

#[test]
fn sighup_changes_the_source_password_without_dropping_listeners_or_the_source() {
    let f = Fixture::start(&toml("old-pw", ""));
    let _ff = Ffmpeg::start(f.addr(), "/live.mp3", "old-pw");
    f.wait_live("/live.mp3");
    let ls = listeners(f.addr(), "/live.mp3", 20);
    f.rewrite(&toml("new-pw", ""));
    let line = f.hup();
    assert!(line.contains("configuration reloaded"), "{line}");
    assert!(line.contains("authentication.source-password"), "{line}");
    assert!(!line.contains("new-pw"), "a password in the log: {line}");
    // 64 kbit/s is 8000 bytes/s: 3 s is 24000 bytes, at least half of it must arrive.
    still_receiving(&ls, Duration::from_secs(3), 12_000);
    assert_eq!(source_login(f.addr(), "/other.mp3", "old-pw"), 401);
    assert_eq!(source_login(f.addr(), "/other.mp3", "new-pw"), 200);
}

#[test]
fn a_broken_file_is_refused_and_the_running_configuration_stays() {
    let f = Fixture::start(&toml("old-pw", ""));
    let _ff = Ffmpeg::start(f.addr(), "/live.mp3", "old-pw");
    f.wait_live("/live.mp3");
    let ls = listeners(f.addr(), "/live.mp3", 5);
    f.rewrite("[authentication]\nsource-password = \"new-pw\"\nlisten = [\n");
    let line = f.hup();
    assert!(line.contains("reload refused"), "{line}");
    assert!(line.contains("ERROR"), "{line}");
    assert!(
        line.contains(&f.path().display().to_string()),
        "the file is named: {line}"
    );
    still_receiving(&ls, Duration::from_secs(2), 8_000);
    assert_eq!(source_login(f.addr(), "/other.mp3", "new-pw"), 401);
    assert_eq!(source_login(f.addr(), "/other.mp3", "old-pw"), 200);
    // A file naming a missing file is refused the same way, naming the key.
    f.rewrite(&toml("new-pw", "[paths]\nwebroot = \"/nonexistent/www\"\n"));
    let line = f.hup();
    assert!(line.contains("paths.webroot"), "{line}");
    assert_eq!(source_login(f.addr(), "/third.mp3", "old-pw"), 200);
}

#[test]
fn a_reload_adds_a_file_mount_with_max_listeners_and_adds_then_removes_a_relay() {
    let f = Fixture::start(&toml("pw", ""));
    let demo = asset("demo.mp3");
    assert_eq!(get(f.addr(), "/file.mp3", "").0, 404);
    let file_mount = format!(
        "[[mount]]\nname = \"/file.mp3\"\nfile = \"{}\"\nmax-listeners = 1\n",
        demo.display()
    );
    f.rewrite(&toml("pw", &file_mount));
    let line = f.hup();
    assert!(line.contains("file mount /file.mp3 started"), "{line}");
    f.wait_live("/file.mp3");
    let first = listeners(f.addr(), "/file.mp3", 1);
    assert_eq!(get(f.addr(), "/file.mp3", "").0, 403, "max-listeners = 1");
    // Add a relay of this very server's file mount.
    let relay = format!(
        "[[relay]]\nserver = \"127.0.0.1\"\nport = {}\nmount = \"/file.mp3\"\n\
         local-mount = \"/relayed.mp3\"\n",
        f.addr().port()
    );
    // max-listeners 1 would keep the relay (a listener here) out: raise it in the same reload.
    f.rewrite(&toml(
        "pw",
        &format!(
            "[[mount]]\nname = \"/file.mp3\"\nfile = \"{}\"\nmax-listeners = 3\n{relay}",
            demo.display()
        ),
    ));
    let line = f.hup();
    assert!(line.contains("relay /relayed.mp3 started"), "{line}");
    assert!(line.contains("mount[/file.mp3].max-listeners"), "{line}");
    assert!(
        !line.contains("file mount /file.mp3"),
        "unchanged file mount untouched: {line}"
    );
    f.wait_live("/relayed.mp3");
    let relayed = listeners(f.addr(), "/relayed.mp3", 1);
    still_receiving(&first, Duration::from_secs(1), 2_000);
    // Remove the relay: its mount ends, the file mount stays.
    f.rewrite(&toml(
        "pw",
        &format!(
            "[[mount]]\nname = \"/file.mp3\"\nfile = \"{}\"\nmax-listeners = 3\n",
            demo.display()
        ),
    ));
    let line = f.hup();
    assert!(line.contains("relay /relayed.mp3 stopped"), "{line}");
    assert!(
        wait_until(Duration::from_secs(10), || relayed[0].is_closed()),
        "the relayed mount's listener is closed"
    );
    assert_eq!(get(f.addr(), "/relayed.mp3", "").0, 404);
    still_receiving(&first, Duration::from_secs(1), 2_000);
}

#[test]
fn admin_reloadconfig_needs_admin_credentials_and_reports_the_outcome() {
    let f = Fixture::start(&toml("old-pw", ""));
    let (status, _) = get(f.addr(), "/admin/reloadconfig", "");
    assert_eq!(status, 401);
    let (status, _) = get(f.addr(), "/admin/reloadconfig", &basic("admin", "wrong"));
    assert_eq!(status, 401);
    let (status, _) = get(f.addr(), "/admin/reloadconfig", &basic("source", "old-pw"));
    assert_eq!(status, 401, "source credentials are not enough");
    f.rewrite(&toml("new-pw", ""));
    let (status, body) = get(f.addr(), "/admin/reloadconfig", &basic("admin", ADMIN));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<return>1</return>"), "{body}");
    assert!(body.contains("authentication.source-password"), "{body}");
    assert_eq!(source_login(f.addr(), "/a.mp3", "new-pw"), 200);
    // A broken file: return 0, and the running configuration stays.
    f.rewrite("bogus-key = 1\n");
    let (status, body) = get(f.addr(), "/admin/reloadconfig", &basic("admin", ADMIN));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<return>0</return>"), "{body}");
    assert!(body.contains("bogus-key"), "{body}");
    // The JSON API: POST only.
    let auth = basic("admin", ADMIN);
    let (status, body) = request(
        f.addr(),
        &format!("POST /api/v1/reload HTTP/1.0\r\n{auth}Content-Length: 0\r\n\r\n"),
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("\"ok\":false"), "{body}");
    f.rewrite(&toml("new-pw", ""));
    let (status, body) = request(
        f.addr(),
        &format!("POST /api/v1/reload HTTP/1.0\r\n{auth}Content-Length: 0\r\n\r\n"),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"ok\":true"), "{body}");
    assert_eq!(get(f.addr(), "/api/v1/reload", &auth).0, 405);
    assert_eq!(
        request(
            f.addr(),
            "POST /api/v1/reload HTTP/1.0\r\nContent-Length: 0\r\n\r\n"
        )
        .0,
        401
    );
    assert_eq!(source_login(f.addr(), "/b.mp3", "new-pw"), 200);
}

#[test]
fn a_reload_applies_the_log_level() {
    let quiet = toml("pw", "").replace("[logging]\n", "[logging]\nlevel = \"warn\"\n");
    let f = Fixture::start(&quiet);
    // At `warn`, a reload's summary (an info line) is not logged; a refusal (error) is.
    f.rewrite("listen = [\n");
    f.hup();
    let skip = f.serve.stderr().len();
    f.rewrite(&toml("pw", "").replace("[logging]\n", "[logging]\nlevel = \"info\"\n"));
    let line = f.hup();
    assert!(
        line.contains("configuration reloaded: logging.level"),
        "{line}"
    );
    assert!(
        f.serve.stderr()[skip..]
            .iter()
            .all(|l| !l.contains("not applied")),
        "{:?}",
        f.serve.stderr()
    );
}

/// The icecast.xml of [`a_reload_reapplies_a_mounts_stream_name_to_its_live_source`]: source
/// password `pw`, logs in `dir`, and `/live.mp3` with `mount_extra` inside its `<mount>`.
fn icecast_xml(dir: &std::path::Path, mount_extra: &str) -> String {
    format!(
        "<icecast>\n  <authentication>\n    <source-password>pw</source-password>\n    \
         <admin-password>{ADMIN}</admin-password>\n  </authentication>\n  \
         <listen-socket><port>8000</port></listen-socket>\n  \
         <paths><logdir>{}</logdir></paths>\n  \
         <mount type=\"normal\"><mount-name>/live.mp3</mount-name>{mount_extra}</mount>\n\
         </icecast>\n",
        dir.display()
    )
}

/// Icecast 2.4.4 re-applies a mount's settings to its running source at a reload
/// (`source_update_settings` → `source_apply_mount`): an edited `<stream-name>` shows in
/// status-json at once, and a removed one gives back what the source announced (issue 38).
#[test]
fn a_reload_reapplies_a_mounts_stream_name_to_its_live_source() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("icecast.xml");
    let write = |extra: &str| std::fs::write(&xml, icecast_xml(dir.path(), extra)).unwrap();
    write("<stream-name>Morning Show</stream-name>");
    let state = dir.path().join("state");
    let serve = Serve::spawn(
        [
            "--icecast-config".as_ref(),
            xml.as_os_str(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
        ],
        &[("THRONG_STATE_DIR", state.as_os_str())],
    );
    let addr = serve.addr;
    let _ff = Ffmpeg::start(addr, "/live.mp3", "pw");
    let name = || {
        let (_, text) = get(addr, "/status-json.xsl", "");
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        v["icestats"]["source"]["server_name"]
            .as_str()
            .map(str::to_owned)
    };
    assert!(
        wait_until(Duration::from_secs(10), || name().is_some()),
        "/live.mp3 never went live"
    );
    assert_eq!(name().as_deref(), Some("Morning Show"));
    // The outcome line goes to the file's error log (`<logdir>/error.log`), as Icecast's.
    let log = dir.path().join("error.log");
    let reloads = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("configuration reloaded")
            .count()
    };
    let hup = |n: usize| {
        // SAFETY: kill(2) on the server this test started.
        unsafe { libc::kill(serve.pid() as i32, SIGHUP) };
        assert!(
            wait_until(Duration::from_secs(10), || reloads() >= n),
            "no reload {n} in {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    };
    write("<stream-name>Evening Show</stream-name>");
    hup(1);
    assert_eq!(name().as_deref(), Some("Evening Show"), "after the reload");
    // A new listener is told the new name.
    let head = {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /live.mp3 HTTP/1.0\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
            buf.push(byte[0]);
        }
        String::from_utf8_lossy(&buf).into_owned()
    };
    assert!(
        head.to_ascii_lowercase().contains("icy-name:evening show"),
        "{head}"
    );
    write("");
    hup(2);
    let back = name();
    assert!(
        back.as_deref().is_some_and(|n| n != "Evening Show"),
        "the override stays after its removal: {back:?}"
    );
}

/// Issue 42: an icecast.xml nested a million deep aborted the parser (a stack overflow), so a
/// running server died on SIGHUP with such a file. Now the file is refused with a clear line
/// naming the nesting limit, and the server goes on serving its running configuration.
#[test]
fn a_reload_of_an_icecast_xml_nested_a_million_deep_is_refused_and_the_server_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("icecast.xml");
    std::fs::write(&xml, icecast_xml(dir.path(), "")).unwrap();
    let state = dir.path().join("state");
    let serve = Serve::spawn(
        [
            "--icecast-config".as_ref(),
            xml.as_os_str(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
        ],
        &[("THRONG_STATE_DIR", state.as_os_str())],
    );
    let addr = serve.addr;
    std::fs::write(&xml, format!("<icecast>{}", "<mount>".repeat(1_000_000))).unwrap();
    let log = dir.path().join("error.log");
    // SAFETY: kill(2) on the server this test started.
    unsafe { libc::kill(serve.pid() as i32, SIGHUP) };
    let refused = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("reload refused") && l.contains("nested deeper than 64"))
    };
    assert!(
        wait_until(Duration::from_secs(10), refused),
        "no refusal naming the nesting in {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let (status, _) = get(addr, "/status-json.xsl", "");
    assert_eq!(status, 200, "the server runs on");
}
