//! `throng serve` as a newcomer runs it: embedded defaults (only the address moved to an
//! ephemeral port so tests never collide), a demo mount that plays at once and decodes cleanly,
//! generated passwords printed, and a clean exit on SIGTERM and SIGINT.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command};
use std::time::Duration;

struct Serve {
    child: Child,
    addr: SocketAddr,
    stderr_lines: Vec<String>,
}

impl Serve {
    fn start(extra: &[&str]) -> Serve {
        let mut args = vec!["--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let (child, addr, lines) = crate::support::spawn_serve(args);
        Serve {
            child,
            addr,
            stderr_lines: lines,
        }
    }

    fn signal(&mut self, sig: i32) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
        for _ in 0..100 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("throng did not exit within 5 s of signal {sig}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

use libc::{SIGINT, SIGTERM};

#[test]
fn embedded_defaults_play_the_demo_and_ffmpeg_decodes_it() {
    let mut s = Serve::start(&[]);
    let text = s.stderr_lines.concat();
    assert!(text.contains("generated source password"), "{text}");
    assert!(text.contains("generated admin password"), "{text}");
    assert!(!text.contains("hackme"));
    let out = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-t", "5", "-i"])
        .arg(format!("http://{}/demo.mp3", s.addr))
        .args(["-f", "null", "-"])
        .output()
        .expect("ffmpeg is installed by scripts/install-deps.sh");
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "decode errors: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(s.signal(SIGTERM).success(), "clean exit on SIGTERM");
}

#[test]
fn sigint_closes_listeners_and_exits_cleanly() {
    let dir = std::env::temp_dir();
    let (cfg, log) = (
        dir.join(format!("throng-it-sigint-{}.toml", std::process::id())),
        dir.join(format!("throng-it-sigint-{}.log", std::process::id())),
    );
    std::fs::write(
        &cfg,
        format!(
            "demo = true\n[logging]\naccess-log = {:?}\n",
            log.display().to_string()
        ),
    )
    .unwrap();
    let cfg_arg = cfg.display().to_string();
    let mut s = Serve::start(&[
        "--config",
        &cfg_arg,
        "--source-password",
        "pw-one",
        "--admin-password",
        "pw-two",
    ]);
    assert!(!s.stderr_lines.concat().contains("generated"));
    let mut l = TcpStream::connect(s.addr).unwrap();
    l.write_all(b"GET /demo.mp3 HTTP/1.0\r\n\r\n").unwrap();
    let mut buf = [0u8; 4096];
    assert!(l.read(&mut buf).unwrap() > 0);
    assert!(s.signal(SIGINT).success(), "clean exit on SIGINT");
    l.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    assert!(l.read_to_end(&mut rest).is_ok(), "listener closed cleanly");
    // The listener closed at shutdown is in the access log: it was flushed before exit.
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = (std::fs::remove_file(&cfg), std::fs::remove_file(&log));
    assert!(
        text.contains("\"GET /demo.mp3 HTTP/1.0\" 200"),
        "access log: {text:?}"
    );
}

#[test]
fn bad_config_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("throng-it-cfg-{}", std::process::id()));
    std::fs::write(&dir, "listen = [\"127.0.0.1:0\"]\nbogus-key = 1\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["serve", "--config"])
        .arg(&dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&dir);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bogus-key"), "{err}");
}

/// `(soft, hard)` "Max open files" of process `pid`, from /proc.
fn open_file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .to_owned();
    let f: Vec<&str> = line.split_whitespace().collect();
    (f[3].to_owned(), f[4].to_owned())
}

#[test]
fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
    // Started under a low soft limit (the usual `ulimit -n 1024`, here 256), as from a shell.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "ulimit -Sn 256 && exec \"$0\" serve \"$@\""])
        .arg(env!("CARGO_BIN_EXE_throng"))
        .args(["--listen", "127.0.0.1:0"])
        .env("THRONG_STATE_DIR", crate::support::fresh_state_dir());
    let (mut child, _addr, _lines) = crate::support::spawn_serve_cmd(cmd);
    let (soft, hard) = open_file_limits(child.id());
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(soft, hard, "soft limit {soft}, hard {hard}");
    assert_ne!(soft, "256");
}
