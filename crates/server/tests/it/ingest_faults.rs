//! Bad input at ingest (issue 11, item 6), over real sockets: an Ogg source whose first page is
//! corrupt is refused with a log line saying why (it used to be relayed without its BOS page,
//! undecodable for listeners); random bytes announced as Ogg are diagnosed as not audio of any
//! known format (they used to be called MP3); a NUL in an admin title never reaches the ICY
//! block. The server's log lines are captured by a process-wide tracing subscriber.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use throng_proto::auth::basic_authorization;
use throng_proto::icy::{stream_title, IcyDemuxer, IcyPiece};

use crate::support::*;

/// Everything the server logged in this test process (capped at 16 MiB).
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() < 16 << 20 {
            log.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber once per process.
fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let sub = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(|| LogWriter)
            .finish();
        let _ = tracing::subscriber::set_global_default(sub);
    });
}

/// The captured log lines that mention `needle`.
fn log_lines_with(needle: &str) -> Vec<String> {
    let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    String::from_utf8_lossy(&log)
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

/// Opens a source on `mount` announcing `content_type` and reads the `200 OK`.
fn open_source(srv: &TestServer, mount: &str, content_type: &str) -> TcpStream {
    let mut s = TcpStream::connect(srv.addr).unwrap();
    write!(
        s,
        "PUT {mount} HTTP/1.1\r\nAuthorization: {}\r\nContent-Type: {content_type}\r\n\r\n",
        basic_authorization("source", SOURCE_PW)
    )
    .unwrap();
    let mut reply = [0u8; 19];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"HTTP/1.0 200 OK\r\n\r\n");
    s
}

/// Whether the server closed `s` (EOF or reset) within `d`, writing nothing more.
fn closed_within(s: &mut TcpStream, d: Duration) -> bool {
    s.set_read_timeout(Some(d)).unwrap();
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn an_ogg_source_whose_first_page_is_corrupt_is_refused_with_a_log_line() {
    capture_logs();
    let srv = TestServer::start("");
    let mut ogg = std::fs::read(asset("test-tone.opus")).unwrap();
    assert_eq!(&ogg[..4], b"OggS");
    ogg[22] ^= 0x5A; // the first (BOS) page's CRC
    let mut s = open_source(&srv, "/corrupt-bos.ogg", "audio/ogg");
    srv.wait_mount("/corrupt-bos.ogg");
    s.write_all(&ogg).unwrap();
    // The source is not held open waiting for more: it is refused now.
    assert!(
        closed_within(&mut s, Duration::from_secs(5)),
        "the source without a BOS page was kept"
    );
    wait_until(Duration::from_secs(5), || {
        srv.ctx.registry.get("/corrupt-bos.ogg").is_none()
    })
    .expect("the mount goes away");
    let lines = log_lines_with("/corrupt-bos.ogg");
    assert!(
        lines.iter().any(|l| l.contains("no valid BOS")),
        "no log line names the missing BOS page: {lines:#?}"
    );
}

#[test]
fn random_bytes_announced_as_ogg_are_not_called_mp3() {
    capture_logs();
    let srv = TestServer::start("");
    let mut s = open_source(&srv, "/random.ogg", "audio/ogg");
    srv.wait_mount("/random.ogg");
    // Pseudo-random bytes (xorshift), in reads of 4 KiB as an encoder would send them.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let junk: Vec<u8> = (0..96 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    for c in junk.chunks(4096) {
        if s.write_all(c).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    wait_until(Duration::from_secs(5), || {
        srv.ctx.registry.get("/random.ogg").is_none()
    })
    .expect("garbage source must be closed");
    let mut lines = Vec::new();
    let _ = wait_until(Duration::from_secs(5), || {
        lines = log_lines_with("/random.ogg");
        lines.iter().any(|l| l.contains("source ended"))
    });
    let ended: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("source ended"))
        .collect();
    assert_eq!(ended.len(), 1, "{lines:#?}");
    assert!(
        ended[0].contains("not audio of any known format"),
        "{}",
        ended[0]
    );
    assert!(!ended[0].contains("MP3"), "{}", ended[0]);
}

#[test]
fn a_nul_in_an_admin_title_never_reaches_the_icy_block() {
    let srv = TestServer::start("[limits]\nmetaint = 4000");
    let _src = Source::start(srv.addr, "/nul.mp3", "PUT", 8.0);
    srv.wait_mount("/nul.mp3");
    let mut l = Listener::open(srv.addr, "/nul.mp3", true);
    assert_eq!(l.head.header("icy-metaint"), Some("4000"));
    let mut body = l.read_for(Duration::from_millis(1000));
    let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, _) = http_get(
        srv.addr,
        "/admin/metadata?mount=/nul.mp3&mode=updinfo&song=Before%00After%0D%0AX",
        &[auth.as_str()],
    );
    assert_eq!(head.status, 200);
    body.extend(l.read_for(Duration::from_millis(2500)));
    let mut blocks = Vec::new();
    IcyDemuxer::new(4000)
        .feed(&body, |p| {
            if let IcyPiece::Metadata(m) = p {
                if !m.is_empty() {
                    blocks.push(m);
                }
            }
        })
        .unwrap();
    let last = blocks.last().expect("a metadata block");
    assert_eq!(stream_title(last).as_deref(), Some("BeforeAfter  X"));
    assert!(
        !last.iter().any(|&b| b < 0x20),
        "control bytes in the block: {last:?}"
    );
    let status = srv.mount_status("/nul.mp3").unwrap();
    assert_eq!(status["title"], "BeforeAfter  X", "{status}");
}
