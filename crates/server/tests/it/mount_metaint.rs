//! Per-mount ICY metadata interval (`[[mount]] mp3-metadata-interval`, Icecast
//! `<mp3-metadata-interval>`): a listener of that mount gets that `icy-metaint` and its blocks
//! at that spacing; other mounts keep `limits.metaint`.

use std::time::Duration;

use throng_proto::icy::{IcyDemuxer, IcyPiece};

use crate::support::*;

#[test]
fn a_mount_interval_overrides_the_global_one_for_its_listeners() {
    let srv = TestServer::start(
        "[[mount]]\nname = \"/own.mp3\"\nmp3-metadata-interval = 2000\n[limits]\nmetaint = 8000",
    );
    let _a = Source::start(srv.addr, "/own.mp3", "SOURCE", 1.0);
    let _b = Source::start(srv.addr, "/other.mp3", "SOURCE", 1.0);
    srv.wait_mount("/own.mp3");
    srv.wait_mount("/other.mp3");
    let mut own = Listener::open(srv.addr, "/own.mp3", true);
    assert_eq!(own.head.header("icy-metaint"), Some("2000"));
    let other = Listener::open(srv.addr, "/other.mp3", true);
    assert_eq!(other.head.header("icy-metaint"), Some("8000"));
    // The blocks really come every 2000 audio bytes: the demuxer at 2000 reads it cleanly.
    let bytes = own.read_for(Duration::from_secs(2));
    let mut demux = IcyDemuxer::new(2000);
    let mut blocks = 0;
    demux
        .feed(&bytes, |p| {
            if let IcyPiece::Metadata(_) = p {
                blocks += 1;
            }
        })
        .expect("well-formed ICY at 2000");
    assert!(
        blocks >= 4,
        "{blocks} metadata blocks in {} bytes",
        bytes.len()
    );
}
