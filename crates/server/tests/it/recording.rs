//! Recording a mount (`[[mount]] dump-file`, Icecast `<dump-file>`): a 60 s recording decodes
//! without an error and holds byte for byte what a listener received over the same time; the
//! strftime pattern names the file; SIGUSR1 (the `ReopenLogs` command) starts a new file; a
//! dump file on a full disk (`/dev/full`) is logged and never disturbs the listeners.

use std::path::{Path, PathBuf};
use std::time::Duration;

use throng_server::Control;

use crate::support::*;

/// The files in `dir`, sorted by name.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Where `needle` starts in `hay`, if it is there.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn a_60_s_recording_decodes_cleanly_and_holds_what_a_listener_got() {
    let dir = tempfile::tempdir().unwrap();
    let pattern = dir.path().join("rec-%Y%m%d-%H%M%S.mp3");
    let srv = TestServer::start(&format!(
        "[[mount]]\nname = \"/rec.mp3\"\ndump-file = \"{}\"\n\
         [[mount]]\nname = \"/full.mp3\"\ndump-file = \"/dev/full\"\n",
        pattern.display()
    ));
    let src = Source::start(srv.addr, "/rec.mp3", "SOURCE", 1.0);
    let full_src = Source::start(srv.addr, "/full.mp3", "SOURCE", 1.0);
    srv.wait_mount("/rec.mp3");
    srv.wait_mount("/full.mp3");
    wait_until(Duration::from_secs(5), || files_in(dir.path()).len() == 1)
        .expect("the dump file is opened when the source goes live");
    let name = files_in(dir.path())[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("rec-20")
            && name.ends_with(".mp3")
            && name.len() == "rec-20261127-030405.mp3".len(),
        "strftime pattern expanded: {name}"
    );

    // A listener and the recording over the same 60 s; a listener of the mount whose dump
    // file is on a full disk keeps getting audio all along.
    let mut l = Listener::open(srv.addr, "/rec.mp3", false);
    let mut on_full = Listener::open(srv.addr, "/full.mp3", false);
    let mut got = Vec::new();
    let mut full_got = 0usize;
    for _ in 0..60 {
        got.extend(l.read_for(Duration::from_millis(500)));
        full_got += on_full.read_for(Duration::from_millis(500)).len();
    }
    assert!(
        full_got > 50 * 8000,
        "the /dev/full mount's listener got {full_got} bytes"
    );
    src.stop();
    full_src.stop();
    let file = files_in(dir.path())[0].clone();
    wait_until(Duration::from_secs(5), || {
        srv.ctx.registry.get("/rec.mp3").is_none()
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let rec = std::fs::read(&file).unwrap();

    // 64 kbit/s for about 60 s; decodes with no error.
    assert!(rec.len() > 55 * 8000, "{} bytes recorded", rec.len());
    let errors = ffmpeg_decode(file.to_str().unwrap(), 120);
    assert!(errors.is_empty(), "ffmpeg: {errors}");
    let (starts, frames) = mp3_chain(&rec);
    assert!(
        starts && frames > 2000,
        "{frames} chained frames from the first byte"
    );

    // What the listener got (after its response head) is in the recording, byte for byte:
    // the recording starts at the live edge when the mount went live, the listener at its
    // burst point, so they overlap from the recording's first byte to the listener's last.
    let probe = &rec[..4096];
    let at = find(&got, probe).expect("the recording's start is in the listener's bytes");
    let overlap = (got.len() - at).min(rec.len());
    assert!(overlap > 50 * 8000, "overlap {overlap}");
    assert!(
        got[at..at + overlap] == rec[..overlap],
        "the overlap differs"
    );
}

#[test]
fn reopen_starts_a_new_dump_file_and_a_size_limit_closes_it() {
    let dir = tempfile::tempdir().unwrap();
    // The pattern has a counter only SIGUSR1 can change: seconds.
    let pattern = dir.path().join("part-%H%M%S.mp3");
    let srv = TestServer::start(&format!(
        "[[mount]]\nname = \"/parts.mp3\"\ndump-file = \"{}\"\ndump-file-size-limit = 40000\n",
        pattern.display()
    ));
    let _src = Source::start(srv.addr, "/parts.mp3", "SOURCE", 1.0);
    srv.wait_mount("/parts.mp3");
    wait_until(Duration::from_secs(5), || files_in(dir.path()).len() == 1).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    srv.ctx.control.send(Control::ReopenLogs);
    wait_until(Duration::from_secs(5), || files_in(dir.path()).len() == 2)
        .expect("SIGUSR1 opens a new file");
    // 64 kbit/s: 40,000 bytes in 5 s; past the limit the file is closed and stays so.
    std::thread::sleep(Duration::from_secs(8));
    let second = files_in(dir.path())[1].clone();
    let size = std::fs::metadata(&second).unwrap().len();
    assert!(
        (40_000..60_000).contains(&size),
        "closed just past the limit: {size} bytes"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        std::fs::metadata(&second).unwrap().len(),
        size,
        "no more writes"
    );
    let errors = ffmpeg_decode(second.to_str().unwrap(), 30);
    assert!(errors.is_empty(), "ffmpeg: {errors}");
}

/// Issue 42: the dump-file limits are the mount's, not one source's: a source that reconnects
/// again and again appends to the same file, counted on, and past the size limit nothing more
/// is written until a reload or SIGUSR1 (20 reconnects wrote 25.5 times the limit before).
#[test]
fn a_reconnecting_source_never_writes_past_the_mounts_dump_file_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let pattern = dir.path().join("rec-%H%M%S.mp3");
    let srv = TestServer::start(&format!(
        "[[mount]]\nname = \"/rec.mp3\"\ndump-file = \"{}\"\ndump-file-size-limit = 20000\n",
        pattern.display()
    ));
    // Six sources one after the other, each 1.5 s (about 12,000 bytes at 64 kbit/s).
    for _ in 0..6 {
        let src = Source::start(srv.addr, "/rec.mp3", "SOURCE", 1.0);
        srv.wait_mount("/rec.mp3");
        std::thread::sleep(Duration::from_millis(1500));
        src.stop();
        wait_until(Duration::from_secs(5), || {
            srv.mount_status("/rec.mp3").is_none()
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(500));
    }
    let files = files_in(dir.path());
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert_eq!(files.len(), 1, "one file for the mount: {files:?}");
    // The limit closes the file just past it (at most a second of audio more).
    assert!(
        (20_000..30_000).contains(&total),
        "{total} bytes recorded for a 20,000-byte limit over 6 sources"
    );
}
