//! Shared plumbing of the binary's tests: starting `throng serve` with arguments and waiting
//! for its "serving on" line.

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_throng"))
        .arg("serve")
        .args(args)
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
