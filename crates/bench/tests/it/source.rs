//! `--source`: a file pushed with PUT, paced in real time by frame durations.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;
use throng_bench::source::{Source, SourceConfig, SourceMethod};
use throng_bench::testserver::{TestServer, TestServerConfig};

fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../assets/demo.mp3")
}

#[test]
fn source_is_paced_in_real_time() {
    let srv =
        TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    for method in [SourceMethod::Put, SourceMethod::Source] {
        let before = srv.stats().source_bytes.load(Ordering::Relaxed);
        let src = Source::start(&SourceConfig {
            file: demo(),
            url: format!("http://{}/live.mp3", srv.addr()),
            user: "source".into(),
            password: "hackme".into(),
            method,
            content_type: None,
            speed: 1.0,
        })
        .expect("source accepted");
        std::thread::sleep(Duration::from_secs(3));
        let stats = src.stop();
        let sent = stats.bytes.load(Ordering::Relaxed);
        let audio_s = stats.audio_us.load(Ordering::Relaxed) as f64 / 1e6;
        std::thread::sleep(Duration::from_millis(200));
        let got = srv.stats().source_bytes.load(Ordering::Relaxed) - before;
        // demo.mp3 is 64 kbit/s: about 8,000 bytes per second of play time.
        assert!(
            (2.8..3.4).contains(&audio_s),
            "{method:?}: {audio_s} s of audio in 3 s"
        );
        assert!(
            (20_000..30_000).contains(&sent),
            "{method:?}: {sent} bytes in 3 s"
        );
        assert_eq!(got, sent, "{method:?}: server received what was sent");
    }
}
