//! Status documents: Icecast 2.4.4's `/status-json.xsl` quirks, `/api/v1/status`, `/metrics`.

use crate::support::*;

#[test]
fn status_json_source_is_absent_object_then_array() {
    let srv = TestServer::start("[[mount]]\nname = \"/hidden.mp3\"\nhidden = true");
    let s = srv.json("/status-json.xsl");
    assert!(s["icestats"].get("source").is_none());
    assert!(s["icestats"]["server_start_iso8601"].is_string());
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    srv.wait_mount("/a.mp3");
    let s = srv.json("/status-json.xsl");
    let src = &s["icestats"]["source"];
    assert!(src.is_object(), "one source is an object: {src}");
    assert_eq!(
        src["listenurl"],
        format!("http://localhost:{}/a.mp3", srv.addr.port())
    );
    assert_eq!(src["bitrate"], 64, "numeric text becomes a number");
    assert_eq!(src["server_name"], "Test Stream");
    assert!(src.get("dummy").is_some());
    let _b = Source::start(srv.addr, "/b.mp3", "PUT", 1.0);
    let _h = Source::start(srv.addr, "/hidden.mp3", "PUT", 1.0);
    srv.wait_mount("/b.mp3");
    srv.wait_mount("/hidden.mp3");
    let s = srv.json("/status-json.xsl");
    let arr = s["icestats"]["source"]
        .as_array()
        .expect("two sources are an array");
    assert_eq!(arr.len(), 2, "hidden mount left out");
    let v1 = srv.json("/api/v1/status");
    assert_eq!(v1["mounts"].as_array().unwrap().len(), 2);
}

#[test]
fn status_documents_are_icecast_typed_and_readable_by_any_page() {
    let srv = TestServer::start("");
    for path in ["/status-json.xsl", "/api/v1/status"] {
        let (head, _) = http_get(srv.addr, path, &[]);
        assert_eq!(head.status, 200, "{path}");
        // As Icecast 2.4.4 sends status-json.xsl; web players read it cross-origin.
        assert_eq!(
            head.header("content-type"),
            Some("application/json; charset=UTF-8"),
            "{path}"
        );
        assert_eq!(
            head.header("access-control-allow-origin"),
            Some("*"),
            "{path}"
        );
        assert_eq!(head.header("cache-control"), Some("no-cache"), "{path}");
    }
}

#[test]
fn api_v1_mounts_is_always_an_array() {
    let srv = TestServer::start("");
    assert_eq!(srv.json("/api/v1/status")["mounts"], serde_json::json!([]));
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    srv.wait_mount("/a.mp3");
    let v1 = srv.json("/api/v1/status");
    let m = &v1["mounts"][0];
    assert_eq!(m["mount"], "/a.mp3");
    assert_eq!(m["bitrate_kbps"], 64);
    assert_eq!(m["format"], "mp3");
}

#[test]
fn metrics_count_listeners_and_sources() {
    let srv = TestServer::start("");
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    srv.wait_mount("/a.mp3");
    let _l = Listener::open(srv.addr, "/a.mp3", false);
    crate::support::wait_until(std::time::Duration::from_secs(3), || {
        let (_, body) = http_get(srv.addr, "/metrics", &[]);
        let text = String::from_utf8_lossy(&body);
        text.contains("throng_listeners{mount=\"/a.mp3\"} 1")
            && text.contains("throng_sources 1")
            && text.contains("throng_source_bytes_received_total{mount=\"/a.mp3\"}")
            && text.contains("throng_bytes_sent_total{mount=\"/a.mp3\"}")
    })
    .expect("metrics");
}

/// `/api/v1/status` carries `[station]` and, per mount, its last titles newest first with
/// their times and the cover art a title update's image URL gave (issue 27).
#[test]
fn api_v1_status_has_the_station_and_each_mounts_titles() {
    let srv = TestServer::start(
        "[station]\nname = \"Radio Test\"\nlogo = \"/static/logo.png\"\nurl = \"https://radio.example/\"\n",
    );
    let _s = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    srv.wait_mount("/a.mp3");
    let before = chrono::Utc::now().timestamp();
    for q in [
        "song=One",
        "song=Two&url=https%3A%2F%2Fimg.example%2Fcover.jpg",
        "song=Three&url=https%3A%2F%2Fradio.example%2F",
    ] {
        let (head, _) = http_get(
            srv.addr,
            &format!("/admin/metadata?mount=/a.mp3&mode=updinfo&{q}"),
            &[&admin_header()],
        );
        assert_eq!(head.status, 200);
    }
    let s = srv.json("/api/v1/status");
    assert_eq!(
        s["station"],
        serde_json::json!({"name": "Radio Test", "description": "", "logo": "/static/logo.png", "url": "https://radio.example/"})
    );
    let m = srv.mount_status("/a.mp3").unwrap();
    let h = m["history"].as_array().unwrap();
    let titles: Vec<&str> = h.iter().map(|e| e["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["Three", "Two", "One"]);
    assert!(h.iter().all(|e| e["at_unix"].as_i64().unwrap() >= before));
    assert_eq!(h[1]["artwork"], "https://img.example/cover.jpg");
    assert!(h[0]["artwork"].is_null(), "a page URL is not cover art");
    assert!(m["artwork"].is_null(), "the current title has none");
}
