//! Shared plumbing of the binary's tests: starting `throng serve` with arguments (or a prepared
//! command) and waiting for its "serving on" line, signalling it, and polling for a condition.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

/// Runs `throng serve <args>`; returns the child, the address from its
/// `throng: serving on http://ADDR/` line, and the standard-error lines up to that one.
/// Standard error keeps being drained afterwards, so the server never blocks on a full pipe.
pub fn spawn_serve<I, S>(args: I) -> (Child, SocketAddr, Vec<String>)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_throng"));
    cmd.arg("serve").args(args);
    spawn_serve_cmd(cmd)
}

/// As [`spawn_serve`], for a command the caller prepared (`throng serve ...` with its own
/// environment, e.g. `NOTIFY_SOCKET`).
pub fn spawn_serve_cmd(mut cmd: Command) -> (Child, SocketAddr, Vec<String>) {
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
