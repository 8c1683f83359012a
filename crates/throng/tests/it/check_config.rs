//! `throng check-config` and the checks `throng serve` shares with it (missing webroot, webroot
//! fallback file and htpasswd file, each named by its key), and generated passwords that
//! persist in the state file across starts without a configuration file.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::*;

fn throng(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(args)
        .env_remove("THRONG_LOG")
        .output()
        .expect("run throng")
}

fn check(file: &Path) -> (i32, String) {
    let out = throng(&["check-config".as_ref(), "-c".as_ref(), file.as_os_str()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text)
}

/// A configuration whose webroot, webroot fallback file and htpasswd file are all missing.
fn broken(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "[paths]\nwebroot = \"{d}/www\"\n\
         [[mount]]\nname = \"/live.mp3\"\nfallback-mount = \"/silence.mp3\"\n\
         authentication = {{ type = \"htpasswd\", filename = \"{d}/users\" }}\n"
    )
}

#[test]
fn check_config_names_each_missing_file_by_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    std::fs::write(&file, broken(dir.path())).unwrap();
    let (code, text) = check(&file);
    assert_eq!(code, 1, "{text}");
    let www = dir.path().join("www");
    assert!(
        text.contains(&format!(
            "paths.webroot: {}: no such directory",
            www.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("mount[/live.mp3].authentication.filename:")
            && text.contains("users: no such file"),
        "{text}"
    );
    // With the webroot there, the fallback file it lacks is the problem.
    std::fs::create_dir(&www).unwrap();
    let (code, text) = check(&file);
    assert_eq!(code, 1, "{text}");
    assert!(!text.contains("paths.webroot"), "{text}");
    assert!(
        text.contains(&format!(
            "mount[/live.mp3].fallback-mount: {}: no such file",
            www.join("silence.mp3").display()
        )),
        "{text}"
    );
    // Everything there: OK.
    std::fs::copy(asset("demo.mp3"), www.join("silence.mp3")).unwrap();
    std::fs::write(dir.path().join("users"), "").unwrap();
    let (code, text) = check(&file);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("configuration OK"), "{text}");
    // A syntax error is reported with the file and exit 1; no file at all is fine.
    std::fs::write(&file, "listen = [\n").unwrap();
    let (code, text) = check(&file);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(&file.display().to_string()), "{text}");
    let out = throng(&["check-config".as_ref()]);
    assert!(out.status.success());
}

#[test]
fn serve_refuses_to_start_on_missing_files_and_lists_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    std::fs::write(&file, broken(dir.path())).unwrap();
    let out = throng(&[
        "serve".as_ref(),
        "-c".as_ref(),
        file.as_os_str(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--state-dir".as_ref(),
        dir.path().join("state").as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("paths.webroot"), "{err}");
    assert!(
        err.contains("mount[/live.mp3].authentication.filename"),
        "{err}"
    );
    assert!(!err.contains("serving on"), "{err}");
}

#[test]
fn generated_passwords_persist_across_starts_in_a_0600_state_file() {
    use std::os::unix::fs::PermissionsExt as _;
    let state = tempfile::tempdir().unwrap();
    let env = [("THRONG_STATE_DIR", state.path().as_os_str())];
    let args = ["--listen", "127.0.0.1:0"];
    let first = Serve::spawn(args, &env);
    let lines = first.stderr().concat();
    let password = lines
        .lines()
        .find_map(|l| l.strip_prefix("throng: generated source password (user `source`): "))
        .unwrap_or_else(|| panic!("{lines}"))
        .trim()
        .to_owned();
    let file = state.path().join("passwords.toml");
    assert!(lines.contains(&file.display().to_string()), "{lines}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    drop(first);
    let mut second = Serve::spawn(args, &env);
    let lines = second.stderr().concat();
    assert!(!lines.contains("generated"), "{lines}");
    assert!(lines.contains(&file.display().to_string()), "{lines}");
    assert_eq!(source_login(second.addr, "/live.mp3", &password), 200);
    // A reload reads the same passwords back: none is generated, the old one still works.
    let line = second.signal_and_wait(libc::SIGHUP, "configuration reload");
    assert!(line.contains("no change"), "{line}");
    assert_eq!(source_login(second.addr, "/other.mp3", &password), 200);
    assert!(second.running());
}
