//! The deploy files under `deploy/` against the real tools: `systemd-analyze verify` accepts the
//! unit, the man pages render with `man -l` and `groff` without a warning and match what the
//! binary generates now (as do the shell completions), logrotate runs the snippet against a
//! running server, and `throng serve` speaks sd_notify as a `Type=notify` unit needs: `READY=1`
//! once its port serves, `STOPPING=1` at SIGTERM. The tools come from scripts/install-deps.sh
//! (systemd, man-db, groff-base, logrotate).

use std::io::{Read, Write};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::logs::{request, start, Dir};
use crate::support::{eventually, signal_and_wait, spawn_serve_cmd};

/// `deploy/` in the source tree.
fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (installed by scripts/install-deps.sh)"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn systemd_unit_verifies() {
    let unit = std::fs::read_to_string(deploy_dir().join("throng.service")).unwrap();
    for line in [
        "Type=notify",
        "NotifyAccess=all",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "ExecStart=/usr/bin/throng serve --config /etc/throng/throng.toml",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
        "DynamicUser=yes",
        "LogsDirectory=throng",
    ] {
        assert!(unit.lines().any(|l| l == line), "{line} missing");
    }
    // verify needs the binary to exist: the same unit, started from the built binary.
    let dir = Dir::new("unit");
    let copy = dir.file("throng.service");
    std::fs::write(
        &copy,
        unit.replace(
            "ExecStart=/usr/bin/throng",
            &format!("ExecStart={}", env!("CARGO_BIN_EXE_throng")),
        ),
    )
    .unwrap();
    // --man=no: the man pages named in Documentation= are not installed on a build machine.
    let out = run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The man pages committed under `deploy/man`, by file name.
fn committed_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(deploy_dir().join("man"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pages.sort();
    pages
}

#[test]
fn man_pages_render_without_warnings() {
    let pages = committed_pages();
    assert!(pages.len() >= 4, "{pages:?}");
    for page in &pages {
        let out = run(Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l"])
            .arg(page)
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .env("LC_ALL", "C.UTF-8"));
        let shown = text(&out.stdout);
        assert!(
            out.status.success(),
            "man -l {}: {}",
            page.display(),
            text(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "man -l {} warns: {}",
            page.display(),
            text(&out.stderr)
        );
        assert!(
            shown.contains("NAME") && shown.contains("throng"),
            "{shown}"
        );
        let out = run(Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(page));
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "groff {}: {}",
            page.display(),
            text(&out.stderr)
        );
    }
    let serve = std::fs::read_to_string(deploy_dir().join("man/throng-serve.1")).unwrap();
    assert!(
        serve.contains("SIGUSR1"),
        "throng-serve(1) tells about the signals"
    );
}

#[test]
fn generated_files_are_up_to_date() {
    let dir = Dir::new("generate");
    let out_dir = dir.file("man");
    let out = run(Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["manpage", "--out"])
        .arg(&out_dir));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut fresh: Vec<PathBuf> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    fresh.sort();
    let names = |v: &[PathBuf]| -> Vec<String> {
        v.iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    let stale = "stale: run deploy/generate.sh and commit deploy/";
    assert_eq!(names(&fresh), names(&committed_pages()), "{stale}");
    for page in &fresh {
        let committed = deploy_dir().join("man").join(page.file_name().unwrap());
        assert!(
            std::fs::read(page).unwrap() == std::fs::read(&committed).unwrap(),
            "{} {stale}",
            committed.display()
        );
    }
    for (shell, file) in [
        ("bash", "throng.bash"),
        ("zsh", "_throng"),
        ("fish", "throng.fish"),
    ] {
        let out = run(Command::new(env!("CARGO_BIN_EXE_throng")).args(["completions", shell]));
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
        let committed = std::fs::read(deploy_dir().join("completions").join(file)).unwrap();
        assert!(out.stdout == committed, "completions/{file} {stale}");
    }
}

#[test]
fn sd_notify_ready_once_serving_and_stopping_at_sigterm() {
    let dir = Dir::new("notify");
    let socket_path = dir.file("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_throng"));
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env("NOTIFY_SOCKET", &socket_path);
    let (mut child, addr, _) = spawn_serve_cmd(cmd);
    let mut buf = [0u8; 512];
    let mut recv = || {
        let n = socket.recv(&mut buf).expect("a notification within 10 s");
        text(&buf[..n])
    };
    assert_eq!(recv(), "READY=1\n");
    // Ready means serving: the port answers a request at once.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /status-json.xsl HTTP/1.0\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer:?}"
    );
    assert!(signal_and_wait(&mut child, libc::SIGTERM).success());
    assert_eq!(recv(), "STOPPING=1\n");
}

#[test]
fn logrotate_snippet_rotates_and_the_server_reopens() {
    let dir = Dir::new("logrotate");
    let (mut child, addr) = start(&dir);
    assert!(request(addr, "GET /status-json.xsl?before HTTP/1.0").contains("200"));
    assert!(eventually(|| dir.read("access.log").contains("?before")));
    // The snippet as shipped, with the log directory and the service's main pid of this test.
    let snippet = std::fs::read_to_string(deploy_dir().join("logrotate/throng")).unwrap();
    let systemctl = "systemctl kill --kill-whom=main --signal=USR1 throng.service";
    assert!(snippet.contains(systemctl) && snippet.contains("/var/log/throng/*.log"));
    let conf = dir.file("logrotate.conf");
    std::fs::write(
        &conf,
        snippet
            .replace("/var/log/throng/", &format!("{}/", dir.path.display()))
            .replace(systemctl, &format!("kill -USR1 {}", child.id())),
    )
    .unwrap();
    let out = run(Command::new("logrotate")
        .args(["--force", "--verbose", "--state"])
        .arg(dir.file("logrotate.state"))
        .arg(&conf));
    assert!(out.status.success(), "logrotate: {}", text(&out.stderr));
    assert!(
        eventually(|| dir.read("error.log").contains("logs reopened")),
        "no new error log after logrotate: {}",
        text(&out.stderr)
    );
    assert!(request(addr, "GET /status-json.xsl?after HTTP/1.0").contains("200"));
    assert!(eventually(|| dir.read("access.log").contains("?after")));
    assert!(signal_and_wait(&mut child, libc::SIGTERM).success());
    let rotated = dir.read("access.log.1");
    assert!(
        rotated.contains("?before") && !rotated.contains("?after"),
        "{rotated}"
    );
    assert!(dir.read("error.log.1").contains("SIGUSR1 received"));
}

/// Docker is not available here: check what can be checked without it. Every file the build
/// stage copies into the image exists, the image runs as a user other than root, and the
/// default command serves on every address at the exposed port.
#[test]
fn dockerfile_copies_existing_files_and_runs_unprivileged() {
    let docker = std::fs::read_to_string(deploy_dir().join("Dockerfile")).unwrap();
    let root = deploy_dir().join("..");
    let mut named = 0;
    for word in docker.split_whitespace() {
        let word = word.trim_end_matches(['\\', ';']);
        if word.starts_with("deploy/") || word == "throng.example.toml" {
            let pattern = root.join(word);
            let dir = pattern.parent().unwrap();
            let name = pattern.file_name().unwrap().to_string_lossy().into_owned();
            let found = match name.strip_prefix('*') {
                Some(suffix) => std::fs::read_dir(dir)
                    .unwrap()
                    .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(suffix)),
                None => pattern.is_file(),
            };
            assert!(found, "the Dockerfile copies {word}, which does not exist");
            named += 1;
        }
    }
    assert!(named >= 3, "{named} files named");
    let user = docker
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER line");
    assert!(
        user.trim() != "root" && user.trim() != "0",
        "runs as {user}"
    );
    assert!(docker.lines().any(|l| l == "EXPOSE 8000"));
    assert!(docker
        .lines()
        .any(|l| l == r#"CMD ["serve", "--listen", "0.0.0.0:8000"]"#));
    // The default command parses as the binary's own command line.
    let out = run(Command::new(env!("CARGO_BIN_EXE_throng")).args([
        "serve",
        "--listen",
        "0.0.0.0:8000",
        "--help",
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
}
