//! Load profiles: stalled readers, reconnect storm, churn.

use crate::util::{profile, run};
use throng_bench::profile::{ProfileKind, Secs};
use throng_bench::testserver::{TestServer, TestServerConfig};

fn server() -> TestServer {
    TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap()
}

#[test]
fn storm_with_stalled_readers() {
    let srv = server();
    let mut p = profile(200, 7.0);
    p.profile = ProfileKind::Storm;
    p.storm_at = Some(Secs(2.0));
    p.stalled_fraction = Some(0.25);
    let r = run(vec![format!("http://{}/stream", srv.addr())], p);
    let s = &r.summary;
    assert_eq!(s.stalled, 50);
    assert_eq!(s.connects, 400, "every listener connected twice");
    assert_eq!(s.failures_total, 0, "{:?}", s.failures);
    assert_eq!(s.starved, 0);
    assert_eq!(s.final_streaming, 150);
    let last = r.timeline.last().unwrap();
    assert_eq!((last.counts.streaming, last.counts.stalled), (150, 50));
    // The server saw both connections of every listener (and the bench's one request for its
    // `Server` header).
    assert_eq!(
        srv.stats()
            .accepted
            .load(std::sync::atomic::Ordering::Relaxed),
        400 + 1
    );
}

#[test]
fn churn_reconnects_at_its_rate() {
    let srv = server();
    let mut p = profile(100, 6.0);
    p.profile = ProfileKind::Churn;
    p.churn_rate = Some(20.0);
    let r = run(vec![format!("http://{}/stream", srv.addr())], p);
    let s = &r.summary;
    let churned = s.connects - 100;
    assert!(
        (90..=130).contains(&churned),
        "{churned} reconnects in 6 s at 20/s"
    );
    assert_eq!(s.failures_total, 0);
    assert_eq!(s.final_streaming + s.final_connecting, 100);
    assert_eq!(s.starved, 0);
    assert!(s.pass);
}
