//! HTTPS (issue 12) with real clients: curl (`--cacert`) and ffmpeg listen over TLS and decode
//! cleanly, status and metrics answer over TLS, an `auto` socket serves both, `openssl
//! s_client` sees the certificate the SNI name picks, ffmpeg pushes a source with `-tls 1`, and
//! renewed certificates are presented to new handshakes while a listener connected before
//! keeps receiving. Certificates are made here with rcgen.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use throng_server::Config;

use crate::support::{
    asset, ffmpeg_decode, make_cert, mp3_chain, require, wait_until, Proc, Source, TestServer,
    SOURCE_PW,
};

/// A server with plain HTTP, one TLS socket and one `auto` socket, serving `certs` (the first
/// the default).
fn tls_server(certs: &[(PathBuf, PathBuf)]) -> TestServer {
    let mut tls = String::from("[tls]\nlisten = [\"127.0.0.1:0\"]\nauto = [\"127.0.0.1:0\"]\n");
    for (c, k) in certs {
        tls.push_str(&format!(
            "[[tls.certificate]]\ncert = {:?}\nkey = {:?}\n",
            c.display().to_string(),
            k.display().to_string()
        ));
    }
    let toml = format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = 2\n[authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{}\"\n[logging]\naccess-log = \"\"\n{tls}",
        crate::support::ADMIN_PW
    );
    TestServer::start_config(Config::from_toml(&toml).expect("test config"))
}

/// Runs curl against `https://localhost:<port><path>` trusting `ca`; returns (exit code, body).
fn curl(addr: SocketAddr, ca: &Path, path: &str, max_secs: u32) -> (i32, Vec<u8>) {
    require("curl");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", &max_secs.to_string(), "--cacert"])
        .arg(ca)
        .arg("--resolve")
        .arg(format!("localhost:{}:127.0.0.1", addr.port()))
        .arg(format!("https://localhost:{}{path}", addr.port()))
        .output()
        .expect("run curl");
    (out.status.code().unwrap_or(-1), out.stdout)
}

/// The serial number `openssl s_client` sees when asking `addr` for `name` (SNI), as
/// `openssl x509 -serial` prints it (`serial=02`).
fn served_serial(addr: SocketAddr, name: &str) -> String {
    require("openssl");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{} -servername {name} </dev/null 2>/dev/null | openssl x509 -noout -serial",
            addr.port()
        ))
        .output()
        .expect("run openssl");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A listener over TLS made with rustls, trusting `ca`, reading on a thread; counts bytes.
struct TlsListener {
    received: Arc<std::sync::atomic::AtomicU64>,
    head: Arc<parking_lot::Mutex<Vec<u8>>>,
}

impl TlsListener {
    fn open(addr: SocketAddr, ca: &Path, path: &str) -> TlsListener {
        let mut roots = rustls::RootCertStore::empty();
        let pem = std::fs::read(ca).unwrap();
        for c in rustls_pemfile_certs(&pem) {
            roots.add(c).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let sock = TcpStream::connect(addr).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, sock);
        write!(tls, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
        tls.flush().unwrap();
        let received = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let head = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (r, h) = (received.clone(), head.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 16384];
            loop {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut h = h.lock();
                        if h.len() < 65536 {
                            h.extend_from_slice(&buf[..n]);
                        }
                        r.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        });
        TlsListener { received, head }
    }

    fn received(&self) -> u64 {
        self.received.load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn rustls_pemfile_certs(pem: &[u8]) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

#[test]
fn curl_and_ffmpeg_listen_over_https_and_status_answers_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let cert = make_cert(dir.path(), "localhost", &["localhost"], 1);
    let srv = tls_server(std::slice::from_ref(&cert));
    let (tls, auto) = (srv.tls_addrs[0], srv.tls_addrs[1]);
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    // curl (curl exits 28 when --max-time ends a stream that is still going).
    let (code, body) = curl(tls, &cert.0, "/live.mp3", 3);
    assert_eq!(code, 28, "curl should stream until its time limit");
    let (starts, frames) = mp3_chain(&body);
    assert!(
        starts && frames > 20,
        "{frames} MP3 frames from curl over TLS"
    );
    // ffmpeg decodes with no error.
    let errors = ffmpeg_decode(&format!("https://127.0.0.1:{}/live.mp3", tls.port()), 3);
    assert!(errors.is_empty(), "ffmpeg decode errors over TLS: {errors}");
    // Status and metrics over TLS; plain HTTP and TLS on the auto socket.
    let (code, body) = curl(tls, &cert.0, "/status-json.xsl", 5);
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(json["icestats"]["source"].is_object() || json["icestats"]["source"].is_array());
    let (code, body) = curl(auto, &cert.0, "/metrics", 5);
    assert_eq!(code, 0);
    assert!(
        String::from_utf8_lossy(&body).contains("throng"),
        "metrics over TLS"
    );
    // The event stream over TLS: the snapshot, then a title change made meanwhile, both
    // sealed by the event shard.
    let admin = srv.addr;
    let update = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let (head, _) = crate::support::http_get(
            admin,
            "/admin/metadata?mount=/live.mp3&mode=updinfo&song=Sealed%20Title",
            &[&crate::support::admin_header()],
        );
        assert_eq!(head.status, 200);
    });
    let (code, body) = curl(tls, &cert.0, "/api/v1/events", 4);
    update.join().unwrap();
    let events = String::from_utf8_lossy(&body);
    assert_eq!(code, 28, "the event stream stays open over TLS: {events}");
    assert!(
        events.contains("event: mount") && events.contains("\"/live.mp3\""),
        "snapshot over TLS: {events}"
    );
    assert!(
        events.contains("event: title") && events.contains("Sealed Title"),
        "title event over TLS: {events}"
    );
    let (head, _) = crate::support::http_get(auto, "/status-json.xsl", &[]);
    assert_eq!(head.status, 200, "plain HTTP on the auto socket");
    // A request that is not TLS on the TLS-only socket gets no HTTP answer.
    let mut s = TcpStream::connect(tls).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /status-json.xsl HTTP/1.0\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(
        !buf.starts_with(b"HTTP/"),
        "plain HTTP answered on the TLS socket"
    );
}

#[test]
fn sni_picks_the_certificate_and_a_renewal_reaches_new_handshakes_only() {
    let dir = tempfile::tempdir().unwrap();
    let a = make_cert(dir.path(), "a", &["localhost", "a.example"], 0x0a);
    let b = make_cert(dir.path(), "b", &["b.example"], 0x0b);
    let srv = tls_server(&[a.clone(), b]);
    let tls = srv.tls_addrs[0];
    assert_eq!(served_serial(tls, "b.example"), "serial=0B");
    assert_eq!(served_serial(tls, "a.example"), "serial=0A");
    assert_eq!(
        served_serial(tls, "other.example"),
        "serial=0A",
        "default: the first"
    );
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let before = TlsListener::open(tls, &a.0, "/live.mp3");
    wait_until(Duration::from_secs(10), || before.received() > 20_000).expect("listener data");
    assert!(before.head.lock().starts_with(b"HTTP/1.0 200 OK\r\n"));
    // Renewal: the same files, a new certificate (serial 0x0c).
    make_cert(dir.path(), "a", &["localhost", "a.example"], 0x0c);
    srv.ctx.tls.reload(&srv.ctx.config().tls).unwrap();
    assert_eq!(served_serial(tls, "a.example"), "serial=0C");
    assert_eq!(served_serial(tls, "b.example"), "serial=0B");
    // The listener connected before the renewal keeps receiving.
    let at = before.received();
    wait_until(Duration::from_secs(10), || before.received() > at + 16_000)
        .expect("the listener connected before the renewal stopped receiving");
    let head = before.head.lock();
    let body = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let (starts, frames) = mp3_chain(&head[body..]);
    assert!(starts && frames > 10, "MP3 over sealed records");
}

#[test]
fn ffmpeg_pushes_a_source_with_tls() {
    require("ffmpeg");
    let dir = tempfile::tempdir().unwrap();
    let cert = make_cert(dir.path(), "localhost", &["localhost"], 1);
    let srv = tls_server(std::slice::from_ref(&cert));
    let tls = srv.tls_addrs[0];
    let _ffmpeg = Proc(
        Command::new("ffmpeg")
            .args(["-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i"])
            .arg(asset("demo.mp3"))
            .args([
                "-c",
                "copy",
                "-f",
                "mp3",
                "-content_type",
                "audio/mpeg",
                "-tls",
                "1",
            ])
            .arg(format!(
                "icecast://source:{SOURCE_PW}@127.0.0.1:{}/pushed.mp3",
                tls.port()
            ))
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("run ffmpeg"),
    );
    srv.wait_mount("/pushed.mp3");
    let errors = ffmpeg_decode(&srv.url("/pushed.mp3"), 3);
    assert!(
        errors.is_empty(),
        "decode errors of a source pushed over TLS: {errors}"
    );
}

#[test]
fn a_relay_pulls_from_an_https_origin_verified_with_the_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let cert = make_cert(dir.path(), "localhost", &["localhost"], 1);
    let origin = tls_server(std::slice::from_ref(&cert));
    let _src = Source::start(origin.addr, "/live.mp3", "PUT", 1.0);
    origin.wait_mount("/live.mp3");
    let relay = TestServer::start(&format!(
        "[[relay]]\nserver = \"localhost\"\nport = {}\nmount = \"/live.mp3\"\nlocal-mount = \"/copy.mp3\"\ntls = true\n[tls]\nca-file = {:?}\n",
        origin.tls_addrs[0].port(),
        cert.0.display().to_string()
    ));
    relay.wait_mount("/copy.mp3");
    let errors = ffmpeg_decode(&relay.url("/copy.mp3"), 3);
    assert!(
        errors.is_empty(),
        "decode errors of a relay over TLS: {errors}"
    );
}
