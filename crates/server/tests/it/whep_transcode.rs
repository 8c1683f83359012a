//! WHEP for MP3 and AAC mounts (issue 25): a str0m WebRTC client plays an MP3 and an AAC mount
//! over WHEP; the server transcodes each mount to Opus once, however many viewers it has, and
//! only while it has viewers (`throng_whep_transcoders`); the packets arrive in order, each
//! packet's timestamp following the last by its play time (60 ms by default, `[webrtc]
//! transcode-frame-ms`; 20 ms when configured so).

use std::time::Duration;

use crate::support::*;
use crate::whep::{play_from_station_page, webrtc_config, StationWhep, Viewer};

/// A `[[mount]]` playing a copy of the asset `asset` in `dir` as `name`, looped in real time.
fn file_mount(dir: &std::path::Path, name: &str, asset_name: &str) -> String {
    let file = dir.join(asset_name);
    std::fs::copy(asset(asset_name), &file).unwrap();
    format!("[[mount]]\nname = \"{name}\"\nfile = {file:?}\n")
}

/// Runs every viewer for `d` at once (each on a thread of its own), and gives them back.
fn run_all(viewers: Vec<Viewer>, d: Duration) -> Vec<Viewer> {
    let threads: Vec<_> = viewers
        .into_iter()
        .map(|mut v| {
            std::thread::spawn(move || {
                v.run_for(d);
                v
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn transcoders(srv: &TestServer) -> i64 {
    srv.ctx.metrics.whep_transcoders.get()
}

fn delete(srv: &TestServer, v: &Viewer) {
    let req = format!("DELETE {} HTTP/1.1\r\nHost: test\r\n\r\n", v.resource);
    assert_eq!(status_of(srv.addr, req.as_bytes()), 200);
}

#[test]
fn mp3_and_aac_mounts_play_over_whep_transcoded_once_per_mount_while_viewed() {
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&format!(
        "{}{}{}",
        webrtc_config(),
        file_mount(dir.path(), "/music.mp3", "demo.mp3"),
        file_mount(dir.path(), "/tone.aac", "test-tone.aac"),
    ));
    srv.wait_mount("/music.mp3");
    srv.wait_mount("/tone.aac");
    for m in ["/music.mp3", "/tone.aac"] {
        let status = srv.mount_status(m).unwrap();
        assert_eq!(
            status["whep_url"].as_str(),
            Some(format!("http://localhost:{}/whep{m}", srv.addr.port()).as_str()),
            "{status}"
        );
    }
    assert_eq!(transcoders(&srv), 0, "no viewer, no transcoder");
    let viewers = vec![
        Viewer::connect(srv.addr, "/whep/music.mp3", &[]),
        Viewer::connect(srv.addr, "/whep/music.mp3", &[]),
        Viewer::connect(srv.addr, "/whep/tone.aac", &[]),
    ];
    assert_eq!(transcoders(&srv), 2, "one per mount, not per viewer");
    // The first seconds: connecting, the decoder's and resampler's start.
    let viewers = run_all(viewers, Duration::from_secs(3));
    let marks: Vec<usize> = viewers.iter().map(|v| v.packets.len()).collect();
    let viewers = run_all(viewers, Duration::from_secs(3));
    for (i, v) in viewers.iter().enumerate() {
        assert!(v.connected, "viewer {i}: ICE and DTLS completed");
        let (n, ordered) = v.check_in_order(marks[i]);
        assert!(
            ordered,
            "viewer {i}: timestamps advance by each packet's time"
        );
        assert!(
            v.samples[marks[i]..].iter().all(|s| *s == 2880),
            "viewer {i}: 60 ms packets by default"
        );
        let ms = v.played_ms_since(marks[i]);
        assert!(
            (2000..=4000).contains(&ms),
            "viewer {i}: about 3 s of audio in 3 s, got {ms} ms in {n} packets"
        );
    }
    // Viewers leave: a mount's transcoder stops with its last viewer.
    delete(&srv, &viewers[0]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(transcoders(&srv), 2, "the second MP3 viewer still plays");
    delete(&srv, &viewers[1]);
    wait_until(Duration::from_secs(5), || transcoders(&srv) == 1)
        .expect("the MP3 mount's transcoder stops with its last viewer");
    delete(&srv, &viewers[2]);
    wait_until(Duration::from_secs(5), || transcoders(&srv) == 0)
        .expect("the AAC mount's transcoder stops too");
    // A new viewer starts it again.
    let mut v = Viewer::connect(srv.addr, "/whep/music.mp3", &[]);
    assert_eq!(transcoders(&srv), 1);
    v.run_for(Duration::from_secs(3));
    let (n, ordered) = v.check_in_order(v.packets.len().min(15));
    assert!(ordered && n > 15, "plays again: {n} packets");
}

/// The embedded defaults of `throng serve` (WebRTC on, on the HTTP port's number) with only the
/// address, passwords and access log of a test server.
fn embedded_defaults() -> throng_server::Config {
    let test = throng_server::Config::from_toml(&format!(
        "listen = [\"127.0.0.1:0\"]\n[authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n[logging]\naccess-log = \"\"\n"
    ))
    .unwrap();
    let mut c = throng_server::Config::embedded();
    c.listen = test.listen;
    c.authentication = test.authentication;
    c.logging = test.logging;
    c
}

/// Issue 25, Done when: with the embedded defaults, headless Chromium plays the demo MP3 mount
/// over WHEP from the station page's "Low latency" button (`getStats`, inbound-rtp), none lost
/// on loopback. The Done-when's "at least 200 Opus packets in 6 s" is 4 s of audio in 20 ms
/// packets: the defaults' packets are 60 ms (`[webrtc] transcode-frame-ms`), so with them the
/// test asks for the same audio (at least 67 packets and 4 s of decoded samples), then runs
/// again with `transcode-frame-ms = 20` and asks for the 200 packets as written.
#[test]
fn chromium_plays_the_demo_mp3_mount_over_whep_with_the_embedded_defaults() {
    let Some(path) = crate::cdp::chromium_or_skip() else {
        return;
    };
    for frame_ms in [None, Some(20u32)] {
        let mut config = embedded_defaults();
        config.webrtc.transcode_frame_ms = frame_ms;
        let srv = TestServer::start_config(config);
        srv.wait_mount("/demo.mp3");
        let whep = srv.ctx.whep.as_ref().expect("WebRTC on by default");
        assert_eq!(
            whep.local_addr().port(),
            srv.addr.port(),
            "UDP on the HTTP port's number"
        );
        let StationWhep {
            b,
            tab,
            button,
            first,
            later,
        } = play_from_station_page(&srv, &path, "/demo.mp3", Duration::from_secs(6));
        let get = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(0.0);
        let packets = get(&later, "received") - get(&first, "received");
        let decoded = get(&later, "samples") - get(&first, "samples");
        let concealed = get(&later, "concealed") - get(&first, "concealed");
        // 4 s of audio in 6 s, whatever the packet time: 200 packets of 20 ms.
        let want = match frame_ms {
            Some(20) => 200.0,
            _ => 67.0,
        };
        assert!(
            packets >= want,
            "{frame_ms:?} ms: at least {want} packets in 6 s: {first} then {later}"
        );
        assert!(
            decoded - concealed >= 4.0 * 48_000.0,
            "{frame_ms:?} ms: at least 4 s of audio decoded, not concealed: {first} then {later}"
        );
        assert_eq!(later["lost"].as_i64(), Some(0), "{later}");
        assert_eq!(transcoders(&srv), 1);
        b.eval(&tab, &format!("{button}.click()")).unwrap();
        wait_until(Duration::from_secs(5), || transcoders(&srv) == 0)
            .expect("stopping the player stops the demo's transcoder");
    }
}

/// Garbage in an MP3 source's stream (frames whose bodies are noise, and junk between frames)
/// never stops the transcoder, its viewer or the mount: what the decoder refuses is counted
/// (`throng_whep_transcode_skipped_total`) and replaced by silence, the viewer keeps getting
/// packets in order and in real time, the mount stays live.
#[test]
fn garbage_in_an_mp3_stream_never_stops_the_transcoder_or_its_viewers() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // 20 ms packets, as configured.
    let srv = TestServer::start(&format!("{}transcode-frame-ms = 20\n", webrtc_config()));
    let mut s = put_source(&srv, "/noisy.mp3");
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let frames = demo_frames();
    let feeder = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let mut media_us = 0u64;
        let mut noise = 0x1234_5678u32;
        let mut next = move || {
            noise ^= noise << 13;
            noise ^= noise >> 17;
            noise ^= noise << 5;
            noise as u8
        };
        'outer: for round in 0.. {
            for (i, f) in frames.iter().enumerate() {
                if stop2.load(Ordering::Relaxed) {
                    break 'outer;
                }
                let mut data = f.data.to_vec();
                if (i + round) % 4 == 0 {
                    // The frame header kept, its body noise.
                    data[4..].iter_mut().for_each(|b| *b = next());
                }
                if i % 7 == 0 {
                    // Junk between frames.
                    let junk: Vec<u8> = (0..300).map(|_| next()).collect();
                    if s.write_all(&junk).is_err() {
                        break 'outer;
                    }
                }
                if s.write_all(&data).is_err() {
                    break 'outer;
                }
                media_us += f.duration_us;
                let due = start + Duration::from_micros(media_us);
                if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
        }
    });
    srv.wait_mount("/noisy.mp3");
    let mut v = Viewer::connect(srv.addr, "/whep/noisy.mp3", &[]);
    v.run_for(Duration::from_secs(3));
    let mark = v.packets.len();
    v.run_for(Duration::from_secs(4));
    let (n, ordered) = v.check_in_order(mark);
    assert!(ordered, "timestamps advance 960 per packet");
    assert!(
        v.samples[mark..].iter().all(|s| *s == 960),
        "20 ms packets as configured"
    );
    assert!(n >= 150, "the viewer keeps playing: {n} packets in 4 s");
    assert!(
        srv.mount_status("/noisy.mp3").is_some(),
        "the mount is live"
    );
    assert_eq!(transcoders(&srv), 1);
    let skipped = srv.ctx.metrics.whep_transcode_skipped.get();
    assert!(skipped > 0, "the decoder met the garbage and went on");
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
}

/// A source connection `PUT` to `mount` (MP3), accepted.
fn put_source(srv: &TestServer, mount: &str) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    let req = format!(
        "PUT {mount} HTTP/1.1\r\nAuthorization: {}\r\nContent-Type: audio/mpeg\r\n\r\n",
        throng_proto::auth::basic_authorization("source", SOURCE_PW)
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut reply = [0u8; 19];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"HTTP/1.0 200 OK\r\n\r\n");
    s
}

/// Source to ear through the transcoder, measured with tone bursts: an MP3 source (made by
/// ffmpeg: 200 ms of 1 kHz tone at the start of every second, silence between) is pushed in
/// real time; a WHEP viewer of the mount sees each burst as the first large Opus packet after
/// small (silent) ones, and its arrival less the time the source wrote the MP3 frame where the
/// burst starts is the delay (an upper bound: the MP3 encoder's own delay, about 25 ms, is
/// counted too). The bound asserted is generous (a loaded test machine); the figures are printed
/// (docs/BENCHMARKS.md cites them).
#[test]
fn tone_bursts_reach_a_whep_viewer_of_an_mp3_mount_within_a_second() {
    use std::io::Write;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;
    let dir = tempfile::tempdir().unwrap();
    let mp3 = dir.path().join("bursts.mp3");
    let ok = std::process::Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg("aevalsrc='if(lt(mod(t,1),0.2),0.5*sin(2*PI*1000*t),0)':s=44100:c=stereo")
        .args(["-t", "20", "-c:a", "libmp3lame", "-b:a", "64k"])
        .arg(&mp3)
        .status()
        .expect("ffmpeg is installed by scripts/install-deps.sh");
    assert!(ok.success());
    let mut framer = throng_proto::framer::Framer::new(throng_proto::format::Format::Mp3);
    framer.push(&std::fs::read(&mp3).unwrap());
    framer.finish();
    let frames: Vec<_> = std::iter::from_fn(|| framer.next_unit())
        .map(|r| r.unwrap())
        .collect();
    let srv = TestServer::start(&webrtc_config());
    let mut s = put_source(&srv, "/bursts.mp3");
    // When each whole second of media (a burst's start) was written.
    let written: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let w2 = written.clone();
    let feeder = std::thread::spawn(move || {
        let start = Instant::now();
        let mut media_us = 0u64;
        for f in &frames {
            if media_us / 1_000_000 >= w2.lock().unwrap().len() as u64 {
                w2.lock().unwrap().push(Instant::now());
            }
            if s.write_all(&f.data).is_err() {
                return;
            }
            media_us += f.duration_us;
            let due = start + Duration::from_micros(media_us);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    });
    srv.wait_mount("/bursts.mp3");
    let mut v = Viewer::connect(srv.addr, "/whep/bursts.mp3", &[]);
    v.run_for(Duration::from_secs(10));
    let written = written.lock().unwrap().clone();
    // Onsets: a large packet after a small one (bytes per 20 ms, so any packet time is judged
    // alike), the first second of playing left out.
    let per_20ms = |i: usize| v.sizes[i] * 960 / (v.samples[i].max(1) as usize);
    let mut delays: Vec<Duration> = Vec::new();
    for i in 1..v.sizes.len() {
        if per_20ms(i) > 60 && per_20ms(i - 1) <= 60 {
            let at = v.packets[i].1;
            if let Some(w) = written.iter().rev().find(|w| **w <= at) {
                delays.push(at - *w);
            }
        }
    }
    let delays: Vec<Duration> = delays.into_iter().skip(1).collect();
    assert!(
        delays.len() >= 5,
        "bursts heard: {delays:?} (sizes {:?})",
        &v.sizes[..v.sizes.len().min(80)]
    );
    let mut sorted = delays.clone();
    sorted.sort();
    let p50 = sorted[sorted.len() / 2];
    let max = *sorted.last().unwrap();
    eprintln!(
        "MP3 source to WHEP viewer, tone onsets: {} bursts, p50 {} ms, max {} ms",
        sorted.len(),
        p50.as_millis(),
        max.as_millis()
    );
    assert!(
        max < Duration::from_millis(1000),
        "each burst within a second: {sorted:?}"
    );
    drop(feeder);
}
