//! `throng report` never reports from nowhere (issue 38, item 2): a state directory, database
//! path or file that holds no audience ledger exits 2 with "no audience ledger at …" and
//! creates nothing; the Icecast personality (`icecast -c`) keeps its ledger in
//! `THRONG_STATE_DIR`, where `throng report` finds it and names it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::support::fresh_state_dir;

fn report(args: &[&str], extra: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_throng"))
        .arg("report")
        .args(args)
        .arg(extra)
        .env_remove("THRONG_STATE_DIR")
        .output()
        .unwrap()
}

#[test]
fn a_report_of_no_ledger_exits_2_and_creates_nothing() {
    let dir = fresh_state_dir();
    // A mistyped state directory.
    let wrong = dir.join("wrong");
    let out = report(&["listening", "--state-dir"], &wrong);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let expected = format!(
        "no audience ledger at sqlite://{}",
        wrong.join("ledger.db").display()
    );
    assert!(err.contains(&expected), "{err}");
    assert!(out.stdout.is_empty(), "no totals printed");
    assert!(!wrong.exists(), "the directory was created");
    // A mistyped --database, for the royalty file.
    let typo = dir.join("sub/ledgr.db");
    let out = report(
        &["soundexchange", "--database"],
        Path::new(&format!("sqlite://{}", typo.display())),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no header-only file");
    assert!(!typo.exists() && !dir.join("sub").exists());
    // A file that is no ledger is left as it was.
    let empty = dir.join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let out = report(
        &["sessions", "--database"],
        Path::new(&format!("sqlite://{}", empty.display())),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
}

#[test]
fn icecast_c_keeps_its_ledger_in_throng_state_dir_where_report_reads_it() {
    let dir = fresh_state_dir();
    let (state, home) = (dir.join("state"), dir.join("home"));
    std::fs::create_dir_all(&home).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let xml = dir.join("icecast.xml");
    std::fs::write(
        &xml,
        format!(
            "<icecast>\n  <authentication>\n    <source-password>src-9f2k</source-password>\n    \
             <admin-password>adm-7q1z</admin-password>\n  </authentication>\n  \
             <listen-socket>\n    <port>{port}</port>\n    <bind-address>127.0.0.1</bind-address>\n  \
             </listen-socket>\n  <paths>\n    <logdir>{}</logdir>\n  </paths>\n</icecast>\n",
            dir.display()
        ),
    )
    .unwrap();
    let bin = dir.join("icecast");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_throng"), &bin).unwrap();
    let mut child = Command::new(&bin)
        .arg("-c")
        .arg(&xml)
        .env("THRONG_STATE_DIR", &state)
        .env("HOME", &home)
        .env_remove("XDG_STATE_HOME")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let serving = loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("serving on") => break true,
            Some(Ok(l)) => seen.push(l),
            _ => break false,
        }
    };
    // Keep draining standard error so the server never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    assert!(serving, "icecast -c exited: {seen:?}");
    let ledger = state.join("ledger.db");
    let found = crate::support::eventually(|| ledger.is_file());
    let out = report(&["sessions", "--from", "0", "--state-dir"], &state);
    let _ = child.kill();
    let _ = child.wait();
    assert!(found, "no ledger in THRONG_STATE_DIR: {seen:?}");
    assert!(
        !home.join(".local/state/throng/ledger.db").exists(),
        "the ledger went to the home directory"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("report from sqlite://{}", ledger.display())),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("id,server,mount"));
}
