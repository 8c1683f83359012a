//! The audience ledger survives `kill -9` (issue 23): a session that closed more than a second
//! before the crash is in the database; a session open at the crash is closed at the next
//! start, at the server's last sign of life, with the end reason `shutdown:crashed`. Read back
//! with `throng report sessions`, as an operator would, with no server running.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::{fresh_state_dir, spawn_serve_cmd, CountingListener};

fn serve(state: &Path) -> (std::process::Child, std::net::SocketAddr) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_throng"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state);
    let (child, addr, _) = spawn_serve_cmd(cmd);
    (child, addr)
}

/// The rows of `throng report sessions` (header left out), split on commas (no field of these
/// sessions holds one).
fn sessions(state: &Path) -> Vec<Vec<String>> {
    let (header, rows) = crate::support::report_sessions(state);
    assert_eq!(header[..4], ["id", "server", "mount", "path"]);
    rows
}

#[test]
fn kill_9_loses_no_closed_session_and_open_ones_are_closed_at_the_next_start() {
    let state = fresh_state_dir();
    let (mut server, addr) = serve(&state);
    // A session that closes, then a session open at the crash.
    let closed = CountingListener::open(addr, "/demo.mp3");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(closed.received() > 10_000);
    drop(closed);
    let open = CountingListener::open(addr, "/demo.mp3");
    // Over a second for the closed session and the open one's start to be committed.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(open.received() > 10_000);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(server.id() as i32, libc::SIGKILL) };
    let _ = server.wait();
    drop(open);

    let rows = sessions(&state);
    assert_eq!(rows.len(), 2, "{rows:?}");
    // Columns: id,server,mount,path,relay,started,ended,seconds,bytes,user_agent,referer,user,
    // end_reason,address,country.
    assert_eq!(rows[0][12], "client:hung-up", "{rows:?}");
    let secs: f64 = rows[0][7].parse().unwrap();
    assert!((1.0..=2.5).contains(&secs), "{secs}");
    assert_eq!(rows[1][6], "", "open at the crash: no end yet: {rows:?}");

    // The next start closes it.
    let (mut again, _) = serve(&state);
    let rows = sessions(&state);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1][12], "shutdown:crashed", "{rows:?}");
    let secs: f64 = rows[1][7].parse().unwrap();
    // It ended at the last sign of life, within a second of the crash (it lived ~2.5 s).
    assert!((1.5..=3.5).contains(&secs), "{secs}");
    assert_eq!(rows[1][8], "", "bytes unknown after a crash");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(again.id() as i32, libc::SIGTERM) };
    let _ = again.wait();
}
