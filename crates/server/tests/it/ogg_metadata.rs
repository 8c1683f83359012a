//! Admin metadata updates on Ogg mounts: ffmpeg encodes Ogg/Opus or Ogg/Vorbis live into the
//! server; `/admin/metadata` puts the new title into the stream as a new chained logical stream.
//! A listener connected before the update and one connected after both get captures that ffmpeg
//! decodes without errors and whose last chain's comment header carries the new tags; ffprobe
//! shows them to the later listener; status JSON has them. Ogg FLAC keeps Icecast's refusal.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use throng_proto::auth::basic_authorization;
use throng_proto::ogg::{parse_page, Codec, PageParse, FLAG_BOS, FLAG_EOS};
use throng_proto::ogg_comments::CommentHeader;
use throng_proto::ogg_rechain::ChainStatus;

use crate::support::*;

/// Burst 0: a listener joins at the live edge, so its first headers are the current ones.
const CONFIG: &str = "[limits]\nburst-size = 0";

/// ffmpeg encoding a sine tone live (`-re`) with `codec` args into `mount` as Ogg.
fn ffmpeg_encoder(srv: &TestServer, mount: &str, rate: u32, codec: &[&str]) -> Proc {
    require("ffmpeg");
    let url = format!("icecast://source:{SOURCE_PW}@{}{mount}", srv.addr);
    let child = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-re", "-f", "lavfi", "-i"])
        .arg(format!("sine=frequency=440:sample_rate={rate}"))
        .args(["-ac", "2"])
        .args(codec)
        .args([
            "-content_type",
            "audio/ogg",
            "-ice_name",
            "ogg live",
            "-f",
            "ogg",
        ])
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ffmpeg");
    Proc(child)
}

/// Runs `cmd` for at most `secs`; returns (success, stdout, stderr).
fn run_bounded(cmd: &mut Command, secs: u64) -> (bool, String, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let end = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (o, e) = (o.join().unwrap(), e.join().unwrap());
    assert!(status.is_some(), "{cmd:?} took over {secs} s; stderr: {e}");
    (status.unwrap().success(), o, e)
}

fn admin_update(srv: &TestServer, query: &str) -> (u16, String) {
    let auth = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, body) = http_get(srv.addr, &format!("/admin/metadata?{query}"), &[&auth]);
    (head.status, String::from_utf8_lossy(&body).into_owned())
}

/// One logical stream's pages in a capture: serial, flags of its first and last page, its
/// header packets (as many as its codec has) and how many data pages follow them.
#[derive(Debug)]
struct Chain {
    serial: u32,
    headers: usize,
    first_flags: u8,
    last_flags: u8,
    packets: Vec<Vec<u8>>,
    data_pages: usize,
}

impl Chain {
    fn comments(&self) -> CommentHeader {
        CommentHeader::parse(&self.packets[1]).expect("comment header")
    }
}

/// Splits a capture into chains (a BOS page starts one); returns them and the length of the
/// capture up to its last complete page. Panics on anything that is not a valid page.
fn chains(capture: &[u8]) -> (Vec<Chain>, usize) {
    let mut out: Vec<Chain> = Vec::new();
    let mut pos = 0;
    let mut cur = Vec::new();
    while pos < capture.len() {
        let page = match parse_page(&capture[pos..]) {
            PageParse::Page(p) => p,
            PageParse::Incomplete => break,
            PageParse::Invalid => panic!("invalid page at byte {pos} of the capture"),
        };
        if page.flags & FLAG_BOS != 0 {
            let codec = page.first_packet().map_or(Codec::Unknown, Codec::identify);
            out.push(Chain {
                serial: page.serial,
                headers: codec.header_packets(),
                first_flags: page.flags,
                last_flags: page.flags,
                packets: Vec::new(),
                data_pages: 0,
            });
            cur.clear();
        }
        let chain = out.last_mut().expect("capture starts with a BOS page");
        assert_eq!(page.serial, chain.serial, "one logical stream per chain");
        chain.last_flags = page.flags;
        if chain.packets.len() >= chain.headers {
            chain.data_pages += 1;
        }
        let mut off = 0;
        for &l in page.segments {
            if chain.packets.len() < chain.headers {
                cur.extend_from_slice(&page.body[off..off + l as usize]);
                if l < 255 {
                    chain.packets.push(std::mem::take(&mut cur));
                }
            }
            off += l as usize;
        }
        pos += page.bytes.len();
    }
    (out, pos)
}

/// Appends what `l` receives to `capture` until `done(capture)` or `secs` pass.
fn read_until(l: &mut Listener, capture: &mut Vec<u8>, secs: u64, done: impl Fn(&[u8]) -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end && !done(capture) {
        capture.extend(l.read_for(Duration::from_millis(200)));
    }
}

/// Decodes a capture (cut at its last complete page) with ffmpeg; returns its error output.
fn ffmpeg_decode_capture(capture: &[u8], name: &str) -> String {
    let (_, complete) = chains(capture);
    let path: PathBuf =
        std::env::temp_dir().join(format!("throng-it-ogg-{}-{name}.ogg", std::process::id()));
    std::fs::write(&path, &capture[..complete]).unwrap();
    let (ok, _, err) = run_bounded(
        Command::new("ffmpeg")
            .args(["-nostdin", "-v", "error", "-i"])
            .arg(&path)
            .args(["-f", "null", "-"]),
        20,
    );
    let _ = std::fs::remove_file(&path);
    assert!(ok, "ffmpeg failed on {name}: {err}");
    err
}

/// The stream tags ffprobe reports for `url`, keys lower-cased.
fn ffprobe_tags(url: &str) -> serde_json::Map<String, serde_json::Value> {
    require("ffprobe");
    let (ok, out, err) = run_bounded(
        Command::new("ffprobe")
            .args(["-v", "error", "-show_entries", "stream_tags", "-of", "json"])
            .arg(url),
        15,
    );
    assert!(ok, "ffprobe failed: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("ffprobe JSON");
    v["streams"][0]["tags"]
        .as_object()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.to_lowercase(), v))
        .collect()
}

/// Whether the capture's last chain has `title` and at least two data pages.
fn has_new_chain(capture: &[u8], title: &str) -> bool {
    let (cs, _) = chains(capture);
    cs.last().is_some_and(|c| {
        c.packets.len() >= 2
            && c.data_pages >= 2
            && CommentHeader::parse(&c.packets[1])
                .is_ok_and(|h| h.get("title").as_deref() == Some(title))
    })
}

/// The whole scenario for one codec: returns nothing, panics on any failure.
fn update_reaches_listeners(
    mount: &str,
    codec_name: &'static str,
    rate: u32,
    codec: &[&str],
    query: &str,
    title: &str,
    artist: Option<&str>,
) {
    let srv = TestServer::start(CONFIG);
    let _ff = ffmpeg_encoder(&srv, mount, rate, codec);
    srv.wait_mount(mount);
    let m = srv.ctx.registry.get(mount).unwrap();
    wait_until(Duration::from_secs(10), || {
        m.ogg_tags.status() == ChainStatus::Retaggable(codec_name)
    })
    .unwrap_or_else(|_| panic!("{codec_name} headers never seen: {:?}", m.ogg_tags.status()));
    let status = srv.json("/status-json.xsl");
    assert_eq!(status["icestats"]["source"]["title"], "Source Title");
    assert_eq!(status["icestats"]["source"]["artist"], "Source Artist");

    // Listener A joins before the update and plays at least one data page of the old chain.
    let mut a = Listener::open(srv.addr, mount, false);
    assert_eq!(a.head.header("Content-Type"), Some("audio/ogg"));
    let mut cap_a = Vec::new();
    read_until(&mut a, &mut cap_a, 10, |c| {
        chains(c).0.first().is_some_and(|ch| ch.data_pages >= 1)
    });

    let (code, xml) = admin_update(&srv, query);
    assert_eq!(code, 200, "{xml}");
    assert!(
        xml.contains("<message>Metadata update successful</message><return>1</return>"),
        "{xml}"
    );
    let status = srv.json("/status-json.xsl");
    assert_eq!(status["icestats"]["source"]["title"], title);
    assert_eq!(
        status["icestats"]["source"]
            .get("artist")
            .and_then(|v| v.as_str()),
        artist
    );

    read_until(&mut a, &mut cap_a, 10, |c| has_new_chain(c, title));
    let (ca, _) = chains(&cap_a);
    assert_eq!(
        ca.len(),
        2,
        "A: the old chain, then exactly one new one: {ca:?}"
    );
    assert_ne!(ca[0].serial, ca[1].serial, "new serial number");
    assert!(ca[0].last_flags & FLAG_EOS != 0, "old chain ends with EOS");
    assert!(ca[1].first_flags & FLAG_BOS != 0);
    assert_eq!(
        ca[0].packets[0], ca[1].packets[0],
        "identification header kept"
    );
    if codec_name == "Vorbis" {
        assert_eq!(ca[0].packets[2], ca[1].packets[2], "setup header kept");
    }
    let old = ca[0].comments();
    let new = ca[1].comments();
    assert_eq!(old.get("title").as_deref(), Some("Source Title"));
    assert_eq!(new.get("title").as_deref(), Some(title));
    assert_eq!(new.get("artist").as_deref(), artist);
    assert_eq!(
        new.get("encoder"),
        old.get("encoder"),
        "other comments kept"
    );
    assert!(new.get("encoder").is_some());
    let errors = ffmpeg_decode_capture(&cap_a, &format!("{codec_name}-before"));
    assert!(
        errors.is_empty(),
        "A's capture decodes with errors: {errors}"
    );

    // Once the new headers are published, listener B joins: they are its first headers.
    wait_until(Duration::from_secs(5), || {
        m.queue.load().ogg_headers.as_ref().is_some_and(|h| {
            let (cs, _) = chains(h);
            cs.first().is_some_and(|c| {
                CommentHeader::parse(&c.packets[1])
                    .is_ok_and(|h| h.get("title").as_deref() == Some(title))
            })
        })
    })
    .expect("the new header set is the mount's current one");
    let mut b = Listener::open(srv.addr, mount, false);
    let mut cap_b = Vec::new();
    read_until(&mut b, &mut cap_b, 10, |c| {
        chains(c).0.first().is_some_and(|ch| ch.data_pages >= 2)
    });
    let (cb, _) = chains(&cap_b);
    assert_eq!(cb.len(), 1, "B: one chain");
    assert_eq!(cb[0].serial, ca[1].serial, "B gets A's new chain");
    assert_eq!(cb[0].comments(), new);
    let errors = ffmpeg_decode_capture(&cap_b, &format!("{codec_name}-after"));
    assert!(
        errors.is_empty(),
        "B's capture decodes with errors: {errors}"
    );
    let tags = ffprobe_tags(&srv.url(mount));
    assert_eq!(tags.get("title").and_then(|v| v.as_str()), Some(title));
    assert_eq!(tags.get("artist").and_then(|v| v.as_str()), artist);
}

#[test]
fn opus_song_update_reaches_listeners_before_and_after() {
    update_reaches_listeners(
        "/live.opus",
        "Opus",
        48_000,
        &[
            "-c:a",
            "libopus",
            "-b:a",
            "48k",
            "-metadata",
            "title=Source Title",
            "-metadata",
            "artist=Source Artist",
        ],
        "mount=/live.opus&mode=updinfo&song=Artist%20-%20Title",
        "Artist - Title",
        None,
    );
}

#[test]
fn vorbis_artist_title_update_reaches_listeners_before_and_after() {
    update_reaches_listeners(
        "/live.ogg",
        "Vorbis",
        44_100,
        &[
            "-c:a",
            "libvorbis",
            "-q:a",
            "1",
            "-metadata",
            "title=Source Title",
            "-metadata",
            "artist=Source Artist",
        ],
        "mount=/live.ogg&mode=updinfo&artist=Caf%C3%A9%20Band&title=Vorbis%20Song",
        "Vorbis Song",
        Some("Café Band"),
    );
}

#[test]
fn ogg_flac_still_refuses_metadata_updates() {
    let srv = TestServer::start(CONFIG);
    let _ff = ffmpeg_encoder(&srv, "/live.flac.ogg", 44_100, &["-c:a", "flac"]);
    srv.wait_mount("/live.flac.ogg");
    let m = srv.ctx.registry.get("/live.flac.ogg").unwrap();
    wait_until(Duration::from_secs(10), || {
        m.ogg_tags.status() != ChainStatus::Unknown
    })
    .expect("FLAC headers seen");
    assert_eq!(
        m.ogg_tags.status(),
        ChainStatus::NotRetaggable("FLAC".into())
    );
    let mut l = Listener::open(srv.addr, "/live.flac.ogg", false);
    let mut cap = Vec::new();
    read_until(&mut l, &mut cap, 10, |c| {
        chains(c).0.first().is_some_and(|ch| ch.data_pages >= 1)
    });
    let (code, xml) = admin_update(&srv, "mount=/live.flac.ogg&mode=updinfo&song=Not%20Applied");
    assert_eq!(code, 200);
    assert!(
        xml.contains("<message>Mountpoint will not accept URL updates</message><return>1</return>"),
        "{xml}"
    );
    cap.extend(l.read_for(Duration::from_millis(2500)));
    let (cs, _) = chains(&cap);
    assert_eq!(cs.len(), 1, "the FLAC stream is left alone");
    assert!(cs[0].data_pages >= 2);
    assert!(!cap
        .windows(b"Not Applied".len())
        .any(|w| w == b"Not Applied"));
    let status = srv.json("/status-json.xsl");
    assert!(status["icestats"]["source"].get("title").is_none());
    let errors = ffmpeg_decode_capture(&cap, "flac");
    assert!(
        errors.is_empty(),
        "FLAC capture decodes with errors: {errors}"
    );
}
