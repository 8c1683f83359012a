//! Liquidsoap (2.1, `output.icecast`) and ezstream (1.0, libshout) as real source clients: over
//! HTTP, and over ICY (SHOUTcast v1) to the port after the HTTP port. Each time a listener
//! decodes the stream with ffmpeg without errors, and the peer's metadata (Liquidsoap track
//! titles, changing at track boundaries; ezstream's ID3 tags) reaches ICY listeners as
//! `StreamTitle`, sent to `/admin/metadata` or `/admin.cgi` by the peer itself.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use throng_proto::icy::{stream_title, IcyDemuxer, IcyPiece};

use crate::support::*;

/// ICY metadata interval of these tests' servers (bytes): a block every 0.5 s at 64 kbit/s.
const METAINT: usize = 4000;

/// How long a peer may take to start streaming (Liquidsoap 2.1 loads its libraries first).
const PEER_START: Duration = Duration::from_secs(20);

/// A child process killed on drop, with its output in a log file shown on failures.
struct Peer {
    child: Child,
    log: PathBuf,
}

impl Peer {
    fn spawn(mut cmd: Command, log: PathBuf) -> Peer {
        let out = File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn peer");
        Peer { child, log }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until mount `name` is live on `srv`.
    fn wait_mount(&self, srv: &TestServer, name: &str) {
        wait_until(PEER_START, || srv.ctx.registry.get(name).is_some()).unwrap_or_else(|_| {
            panic!(
                "mount {name} never came up; peer output:\n{}",
                self.output()
            )
        });
    }

    /// Waits until mount `name` has title `title`.
    fn wait_title(&self, srv: &TestServer, name: &str, title: &str) {
        wait_until(Duration::from_secs(10), || {
            srv.ctx
                .registry
                .get(name)
                .is_some_and(|m| m.title() == title)
        })
        .unwrap_or_else(|_| {
            let now = srv.ctx.registry.get(name).map(|m| m.title());
            panic!(
                "title {title:?} never set on {name} (now {now:?}); peer output:\n{}",
                self.output()
            )
        });
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("throng-it-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies the first `secs` seconds of the demo MP3 to `out` with ID3 tags `title`/`artist`.
fn tagged_clip(out: &Path, secs: u32, title: &str, artist: &str) {
    require("ffmpeg");
    let st = Command::new("ffmpeg")
        .args([
            "-nostdin",
            "-v",
            "error",
            "-y",
            "-t",
            &secs.to_string(),
            "-i",
        ])
        .arg(asset("demo.mp3"))
        .args(["-c", "copy", "-metadata"])
        .arg(format!("title={title}"))
        .arg("-metadata")
        .arg(format!("artist={artist}"))
        .arg(out)
        .status()
        .expect("run ffmpeg");
    assert!(st.success(), "ffmpeg could not write {}", out.display());
}

/// Reads an ICY listener of `mount` until every title of `want` was seen (or 12 s passed);
/// returns the titles seen.
fn icy_titles(srv: &TestServer, mount: &str, want: &[&str]) -> Vec<String> {
    let mut l = Listener::open(srv.addr, mount, true);
    assert_eq!(
        l.head.header("icy-metaint"),
        Some(METAINT.to_string().as_str())
    );
    let end = Instant::now() + Duration::from_secs(12);
    let mut demux = IcyDemuxer::new(METAINT);
    let mut titles: Vec<String> = Vec::new();
    while Instant::now() < end && !want.iter().all(|w| titles.iter().any(|t| t == w)) {
        let bytes = l.read_for(Duration::from_millis(250));
        demux
            .feed(&bytes, |p| {
                if let IcyPiece::Metadata(m) = p {
                    titles.extend(stream_title(&m));
                }
            })
            .unwrap();
    }
    titles
}

fn server(extra: &str) -> TestServer {
    TestServer::start(&format!("{extra}\n[limits]\nmetaint = {METAINT}"))
}

/// Starts Liquidsoap streaming 2 s clips that alternate between titles "One" and "Two" (artist
/// "Liq") as 64 kbit/s MP3, with `output.icecast` options `output` (host, port, password...).
fn liquidsoap(dir: &Scratch, output: &str) -> Peer {
    require("liquidsoap");
    let clip = dir.path("clip.mp3");
    tagged_clip(&clip, 2, "clip", "clip");
    let track = |title: &str| {
        format!(
            "single(\"annotate:title=\\\"{title}\\\",artist=\\\"Liq\\\":{}\")",
            clip.display()
        )
    };
    let script = format!(
        "settings.init.allow_root.set(true)\n\
         settings.log.stdout.set(true)\n\
         settings.log.file.set(false)\n\
         settings.log.level.set(3)\n\
         s = mksafe(rotate([{}, {}]))\n\
         output.icecast(%mp3(bitrate=64, samplerate=44100), host=\"127.0.0.1\", {output}, name=\"Liquidsoap Test\", s)\n",
        track("One"),
        track("Two"),
    );
    let path = dir.path("test.liq");
    std::fs::write(&path, script).unwrap();
    let mut cmd = Command::new("liquidsoap");
    cmd.arg(&path);
    Peer::spawn(cmd, dir.path("liquidsoap.log"))
}

#[test]
fn liquidsoap_streams_over_http_and_its_track_titles_reach_icy_listeners() {
    let dir = Scratch::new("liq-http");
    let srv = server("");
    let peer = liquidsoap(
        &dir,
        &format!(
            "port={}, password=\"{SOURCE_PW}\", mount=\"/liq.mp3\"",
            srv.addr.port()
        ),
    );
    peer.wait_mount(&srv, "/liq.mp3");
    assert_eq!(
        srv.mount_status("/liq.mp3").unwrap()["name"],
        "Liquidsoap Test"
    );
    let titles = icy_titles(&srv, "/liq.mp3", &["Liq - One", "Liq - Two"]);
    assert!(
        titles.iter().any(|t| t == "Liq - One") && titles.iter().any(|t| t == "Liq - Two"),
        "titles seen: {titles:?}; peer output:\n{}",
        peer.output()
    );
    let errors = ffmpeg_decode(&srv.url("/liq.mp3"), 3);
    assert!(errors.is_empty(), "ffmpeg decode errors: {errors}");
}

#[test]
fn liquidsoap_icy_protocol_feeds_the_shoutcast_mount() {
    let dir = Scratch::new("liq-icy");
    let srv = server("shoutcast-mount = \"/liq-icy.mp3\"");
    // cry connects to port + 1 for ICY, and sends metadata to `port` as `/admin.cgi`.
    let peer = liquidsoap(
        &dir,
        &format!(
            "port={}, password=\"{SOURCE_PW}\", protocol=\"icy\"",
            srv.addr.port()
        ),
    );
    peer.wait_mount(&srv, "/liq-icy.mp3");
    assert_eq!(
        srv.mount_status("/liq-icy.mp3").unwrap()["name"],
        "Liquidsoap Test"
    );
    let titles = icy_titles(&srv, "/liq-icy.mp3", &["Liq - One", "Liq - Two"]);
    assert!(
        titles.iter().any(|t| t == "Liq - One") && titles.iter().any(|t| t == "Liq - Two"),
        "titles seen: {titles:?}; peer output:\n{}",
        peer.output()
    );
    let errors = ffmpeg_decode(&srv.url("/liq-icy.mp3"), 3);
    assert!(errors.is_empty(), "ffmpeg decode errors: {errors}");
}

/// Starts ezstream streaming a tagged copy of the demo MP3 in a loop, with `protocol` (`HTTP`
/// or `ICY`) to `port` and `mount`.
fn ezstream(dir: &Scratch, protocol: &str, port: u16, mount: &str) -> Peer {
    require("ezstream");
    let file = dir.path("tagged.mp3");
    tagged_clip(&file, 16, "Ez Title", "Ez Artist");
    let config = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<ezstream>
  <servers>
    <server>
      <protocol>{protocol}</protocol>
      <hostname>127.0.0.1</hostname>
      <port>{port}</port>
      <password>{SOURCE_PW}</password>
      <tls>None</tls>
    </server>
  </servers>
  <streams>
    <stream>
      <mountpoint>{mount}</mountpoint>
      <format>MP3</format>
      <stream_name>Ezstream Test</stream_name>
      <stream_genre>Test</stream_genre>
    </stream>
  </streams>
  <intakes>
    <intake>
      <type>file</type>
      <filename>{}</filename>
    </intake>
  </intakes>
</ezstream>
"#,
        file.display()
    );
    let path = dir.path("ezstream.xml");
    std::fs::write(&path, config).unwrap();
    // ezstream refuses a configuration (it holds a password) that others may read.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut cmd = Command::new("ezstream");
    cmd.arg("-v").arg("-c").arg(&path);
    Peer::spawn(cmd, dir.path("ezstream.log"))
}

#[test]
fn ezstream_streams_over_http_and_its_id3_title_reaches_icy_listeners() {
    let dir = Scratch::new("ez-http");
    let srv = server("");
    let peer = ezstream(&dir, "HTTP", srv.addr.port(), "/ez.mp3");
    peer.wait_mount(&srv, "/ez.mp3");
    let status = srv.mount_status("/ez.mp3").unwrap();
    assert_eq!(
        (&status["name"], &status["genre"]),
        (&"Ezstream Test".into(), &"Test".into())
    );
    peer.wait_title(&srv, "/ez.mp3", "Ez Artist - Ez Title");
    let titles = icy_titles(&srv, "/ez.mp3", &["Ez Artist - Ez Title"]);
    assert!(
        titles.iter().any(|t| t == "Ez Artist - Ez Title"),
        "{titles:?}"
    );
    let errors = ffmpeg_decode(&srv.url("/ez.mp3"), 3);
    assert!(errors.is_empty(), "ffmpeg decode errors: {errors}");
}

#[test]
fn ezstream_icy_protocol_logs_in_on_the_shoutcast_port_and_updates_via_admin_cgi() {
    let dir = Scratch::new("ez-icy");
    let srv = server("shoutcast-mount = \"/ez-icy.mp3\"");
    // libshout adds 1 to the port for ICY, for the stream and for its `/admin.cgi` updates.
    let peer = ezstream(&dir, "ICY", srv.addr.port(), "/ignored");
    peer.wait_mount(&srv, "/ez-icy.mp3");
    assert_eq!(
        srv.mount_status("/ez-icy.mp3").unwrap()["name"],
        "Ezstream Test"
    );
    peer.wait_title(&srv, "/ez-icy.mp3", "Ez Artist - Ez Title");
    let titles = icy_titles(&srv, "/ez-icy.mp3", &["Ez Artist - Ez Title"]);
    assert!(
        titles.iter().any(|t| t == "Ez Artist - Ez Title"),
        "{titles:?}"
    );
    let errors = ffmpeg_decode(&srv.url("/ez-icy.mp3"), 3);
    assert!(errors.is_empty(), "ffmpeg decode errors: {errors}");
}
