//! `throng serve --tls-listen --tls-cert --tls-key` as an operator runs it: HTTPS with the
//! given files, a renewed certificate (new serial, same files) presented after SIGHUP while a
//! listener connected before keeps receiving, a broken certificate file refused with a log line
//! and the old certificate kept, and `check-config` naming a certificate that does not load.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use libc::SIGHUP;

use crate::support::*;

/// Writes a certificate for `localhost` with serial `serial` to `dir/cert.pem`, `dir/key.pem`.
fn write_cert(dir: &Path, serial: u64) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.serial_number = Some(rcgen::SerialNumber::from(serial));
    let cert = params.self_signed(&key).unwrap();
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (c, k)
}

/// The serial `openssl s_client` is served on `port` (`serial=01`).
fn served_serial(port: u16) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{port} -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -serial"
        ))
        .output()
        .expect("run openssl");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A child process killed on drop, even when the test panics.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Size of `path` (0 when missing).
fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[test]
fn sighup_renews_the_certificate_for_new_handshakes_and_keeps_listeners() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = write_cert(dir.path(), 1);
    let toml = dir.path().join("throng.toml");
    std::fs::write(
        &toml,
        "workers = 1\ndemo = true\n[authentication]\nsource-password = \"s3cret\"\nadmin-password = \"adm1n\"\n[logging]\naccess-log = \"\"\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let serve = Serve::spawn(
        [
            "-c".as_ref(),
            toml.as_os_str(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--tls-listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            key.as_os_str(),
        ],
        &[("THRONG_STATE_DIR", state.as_os_str())],
    );
    let line = serve.wait_line(0, "serving on https://");
    let port: u16 = line
        .trim()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(served_serial(port), "serial=01");
    // A listener over HTTPS, on the demo mount.
    let out = dir.path().join("heard.mp3");
    let _curl = Killed(
        Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(&cert)
            .arg("--resolve")
            .arg(format!("localhost:{port}:127.0.0.1"))
            .arg(format!("https://localhost:{port}/demo.mp3"))
            .arg("-o")
            .arg(&out)
            .stdout(Stdio::null())
            .spawn()
            .expect("run curl"),
    );
    assert!(wait_until(Duration::from_secs(10), || size(&out) > 16_000));
    // Renewal: the same files with a new certificate.
    let old_cert = std::fs::read(&cert).unwrap();
    write_cert(dir.path(), 2);
    let outcome = serve.signal_and_wait(SIGHUP, "TLS certificates");
    assert!(outcome.contains("reloaded"), "{outcome}");
    assert_eq!(served_serial(port), "serial=02");
    let at = size(&out);
    assert!(
        wait_until(Duration::from_secs(10), || size(&out) > at + 16_000),
        "the listener connected before the renewal stopped receiving"
    );
    // A broken certificate file: refused, logged, the renewed certificate stays.
    std::fs::write(&cert, "not a certificate").unwrap();
    let outcome = serve.signal_and_wait(SIGHUP, "configuration reload");
    assert!(
        outcome.contains("refused") && outcome.contains("cert.pem"),
        "{outcome}"
    );
    assert_eq!(served_serial(port), "serial=02");
    // check-config says the same of a file naming it.
    std::fs::write(
        dir.path().join("check.toml"),
        format!(
            "[tls]\nlisten = [\"127.0.0.1:0\"]\n[[tls.certificate]]\ncert = {:?}\nkey = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        ),
    )
    .unwrap();
    let check = Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["check-config", "-c"])
        .arg(dir.path().join("check.toml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{text}");
    assert!(
        text.contains("tls.certificate") && text.contains("cert.pem"),
        "{text}"
    );
    std::fs::write(&cert, old_cert).unwrap();
}

#[test]
fn bench_listens_over_https_and_reports_handshakes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (cert, key) = write_cert(dir.path(), 7);
    let state = dir.path().join("state");
    let serve = Serve::spawn(
        [
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--source-password".as_ref(),
            "pw".as_ref(),
            "--tls-listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            key.as_os_str(),
        ],
        &[("THRONG_STATE_DIR", state.as_os_str())],
    );
    let line = serve.wait_line(0, "serving on https://");
    let url = format!(
        "{}demo.mp3",
        line.trim().strip_prefix("throng: serving on ").unwrap()
    )
    .replace("127.0.0.1", "localhost");
    let run = |extra: &[&std::ffi::OsStr], out: &str| {
        Command::new(env!("CARGO_BIN_EXE_throng"))
            .args([
                "bench",
                "run",
                &url,
                "-n",
                "4",
                "--hold",
                "3s",
                "--workers",
                "0",
            ])
            .args([
                "--bitrate-kbps",
                "64",
                "--no-progress",
                "--bind-range",
                "none",
            ])
            .args(extra)
            .arg("--out")
            .arg(dir.path().join(out))
            .output()
            .expect("run throng bench")
    };
    let ok = run(&["--ca".as_ref(), cert.as_os_str()], "ca");
    let text = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let json = std::fs::read_to_string(dir.path().join("ca/report.json")).unwrap();
    let report = throng_bench::report::parse_run(&json).expect("report.json parses");
    assert_eq!(report.summary.tls_handshakes, 4, "{:?}", report.summary);
    assert!(report
        .summary
        .tls_handshake_p50_ms
        .is_some_and(|ms| ms > 0.0));
    assert!(text.contains("TLS handshake p50 (ms)"), "{text}");
    let insecure = run(&["--insecure".as_ref()], "insecure");
    assert_eq!(insecure.status.code(), Some(0));
    // Without the CA, the self-signed certificate is refused: no listener streams.
    let refused = run(&[], "refused");
    assert_eq!(refused.status.code(), Some(1));
}

#[test]
fn a_sigusr2_upgrade_hands_the_https_socket_and_tls_listeners_over() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = write_cert(dir.path(), 3);
    let toml = dir.path().join("throng.toml");
    std::fs::write(
        &toml,
        format!(
            "demo = true\n[authentication]\nsource-password = \"s3cret\"\nadmin-password = \"adm1n\"\n[logging]\naccess-log = \"\"\n[tls]\nlisten = [\"127.0.0.1:0\"]\n[[tls.certificate]]\ncert = {:?}\nkey = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        ),
    )
    .unwrap();
    let state = dir.path().join("state");
    let serve = Serve::spawn(
        [
            "-c".as_ref(),
            toml.as_os_str(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
        ],
        &[("THRONG_STATE_DIR", state.as_os_str())],
    );
    let line = serve.wait_line(0, "serving on https://");
    let port: u16 = line
        .trim()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(served_serial(port), "serial=03");
    // A listener over TLS connected before the upgrade.
    let heard = dir.path().join("heard.mp3");
    let mut before = Killed(
        Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(&cert)
            .arg("--resolve")
            .arg(format!("localhost:{port}:127.0.0.1"))
            .arg(format!("https://localhost:{port}/demo.mp3"))
            .arg("-o")
            .arg(&heard)
            .stderr(Stdio::null())
            .spawn()
            .expect("run curl"),
    );
    assert!(wait_until(Duration::from_secs(10), || size(&heard) > 16_000));
    let took = serve.signal_and_wait(libc::SIGUSR2, "the new process took over");
    let pid: i32 = took
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {took:?}"));
    struct KillPid(i32);
    impl Drop for KillPid {
        fn drop(&mut self) {
            // SAFETY: kill(2) on the server this test started (through the upgrade).
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
    let _new = KillPid(pid);
    // The new process answers TLS on the same port, with the certificate it loaded.
    assert!(wait_until(Duration::from_secs(10), || served_serial(port)
        == "serial=03"));
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "2", "--cacert"])
        .arg(&cert)
        .arg("--resolve")
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg(format!("https://localhost:{port}/demo.mp3"))
        .output()
        .expect("run curl");
    assert!(
        out.stdout.len() > 8000,
        "{} bytes over TLS after the upgrade",
        out.stdout.len()
    );
    // The listener connected before goes on: the new process seals its records from the
    // carried keys (a wrong record would end curl with a TLS error).
    let at = size(&heard);
    assert!(
        wait_until(Duration::from_secs(10), || size(&heard) > at + 16_000),
        "the TLS listener connected before the upgrade stopped receiving"
    );
    assert!(before.0.try_wait().unwrap().is_none(), "curl ended");
}
