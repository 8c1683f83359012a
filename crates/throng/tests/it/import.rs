//! Migrating from Icecast: `throng serve --icecast-config icecast.xml` runs on an Icecast
//! configuration as it is (ffmpeg pushes a source with the XML's password and ffmpeg plays it
//! back; unsupported elements are warned about; logs land where `<logging>` says), and
//! `throng import-icecast` prints TOML that reads back to the same configuration.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use throng_server::config::icecast_xml;
use throng_server::Config;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("throng-it-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../server/tests/data")
        .join(name)
}

/// `throng serve --icecast-config xml`; returns the process, its address and the stderr lines
/// up to "serving on".
fn serve_icecast(xml: &Path) -> (Proc, SocketAddr, Vec<String>) {
    let (child, addr, lines) =
        crate::support::spawn_serve([std::ffi::OsStr::new("--icecast-config"), xml.as_os_str()]);
    (Proc(child), addr, lines)
}

/// Sends a raw request and returns the response head (up to the blank line).
fn request_head(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[test]
fn icecast_config_runs_a_source_and_listeners() {
    let dir = TempDir::new("import-serve");
    let xml = dir.0.join("icecast.xml");
    std::fs::write(
        &xml,
        r#"<icecast>
    <hostname>127.0.0.1</hostname>
    <authentication>
        <source-password>xml-source-pw</source-password>
        <admin-password>xml-admin-pw</admin-password>
    </authentication>
    <listen-socket>
        <port>0</port>
        <bind-address>127.0.0.1</bind-address>
    </listen-socket>
    <mount type="normal">
        <mount-name>/live.mp3</mount-name>
        <stream-name>Imported Show</stream-name>
    </mount>
    <paths><logdir>logs</logdir><webroot>web</webroot></paths>
    <logging>
        <accesslog>access.log</accesslog>
        <errorlog>error.log</errorlog>
        <loglevel>4</loglevel>
        <playlistlog>playlist.log</playlistlog>
    </logging>
    <security><changeowner><user>nobody</user><group>nogroup</group></changeowner></security>
</icecast>
"#,
    )
    .unwrap();
    std::fs::create_dir(dir.0.join("logs")).unwrap();
    // The webroot must exist, as every directory a configuration names (`check-config`).
    std::fs::create_dir(dir.0.join("web")).unwrap();
    let (mut server, addr, lines) = serve_icecast(&xml);
    let startup = lines.concat();
    assert!(
        startup.contains("warning") && startup.contains("icecast/security/changeowner"),
        "{startup}"
    );
    assert!(
        !startup.contains("generated"),
        "both passwords come from the XML: {startup}"
    );

    // The XML's source password is the one that counts ("source:wrong" in base64).
    let refused = request_head(
        addr,
        "SOURCE /live.mp3 HTTP/1.0\r\nAuthorization: Basic c291cmNlOndyb25n\r\n\
         Content-Type: audio/mpeg\r\n\r\n",
    );
    assert!(refused.starts_with("HTTP/1.0 401"), "{refused}");

    let asset = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/demo.mp3");
    let _source = Proc(
        Command::new("ffmpeg")
            .args(["-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i"])
            .arg(&asset)
            .args(["-c", "copy", "-content_type", "audio/mpeg", "-f", "mp3"])
            .arg(format!("icecast://source:xml-source-pw@{addr}/live.mp3"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ffmpeg is installed by scripts/install-deps.sh"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let head = loop {
        let head = request_head(addr, "GET /live.mp3 HTTP/1.0\r\n\r\n");
        if head.contains(" 200 ") || Instant::now() > deadline {
            break head;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(head.contains(" 200 "), "listener refused: {head}");
    assert!(
        head.to_ascii_lowercase()
            .replace("icy-name: ", "icy-name:")
            .contains("icy-name:imported show"),
        "the mount's <stream-name> overrides the source's: {head}"
    );
    let out = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-t", "2", "-i"])
        .arg(format!("http://{addr}/live.mp3"))
        .args(["-f", "null", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "decode: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "throng did not exit on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "SIGTERM is a clean shutdown: {status}");
    let access = std::fs::read_to_string(dir.0.join("logs/access.log")).unwrap_or_default();
    assert!(
        access.contains("\"GET /live.mp3 HTTP/1."),
        "access log: {access:?}"
    );
    let errors = std::fs::read_to_string(dir.0.join("logs/error.log")).unwrap_or_default();
    assert!(
        errors.contains("icecast/security/changeowner") && errors.contains("DEBUG"),
        "error log at loglevel 4: {errors:?}"
    );
}

#[test]
fn import_icecast_prints_toml_that_reads_back_the_same() {
    for name in ["icecast-full.xml", "debian-icecast.xml"] {
        let path = data(name);
        let out = Command::new(env!("CARGO_BIN_EXE_throng"))
            .arg("import-icecast")
            .arg(&path)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(out.status.success(), "{name}: {stderr}");
        let expected = icecast_xml::from_file(&path).unwrap();
        let printed = Config::from_toml(&stdout).unwrap_or_else(|e| panic!("{e}\n{stdout}"));
        assert_eq!(printed, expected.config, "{name}:\n{stdout}");
        assert!(!expected.unsupported.is_empty());
        for u in &expected.unsupported {
            assert!(
                stdout.contains(&format!("#   {u}\n")),
                "{name}: {u} in {stdout}"
            );
            // Only what warns is on standard error; accepted elements are comments only.
            assert_eq!(
                stderr.contains(&u.to_string()),
                u.warns(),
                "{name}: {u} in {stderr}"
            );
        }
    }
}

#[test]
fn a_broken_icecast_xml_is_a_clear_error() {
    let dir = TempDir::new("import-broken");
    let xml = dir.0.join("icecast.xml");
    std::fs::write(
        &xml,
        "<icecast><limits><clients>many</clients></limits></icecast>",
    )
    .unwrap();
    for args in [&["serve", "--icecast-config"][..], &["import-icecast"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_throng"))
            .args(args)
            .arg(&xml)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("icecast/limits/clients") && err.contains("many"),
            "{args:?}: {err}"
        );
    }
}
