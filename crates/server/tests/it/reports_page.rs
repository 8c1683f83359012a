//! The admin UI's audience reports page (`/admin/ui/reports`, issue 23) over real sockets and
//! in headless Chromium (`cdp.rs`): a server keeping a ledger in a temporary SQLite file gets
//! real listeners (TCP and curl, 20 s) on two mounts, one whose title changes through
//! `/admin/metadata`; once the ledger has committed their sessions, the page draws its charts
//! (a line for listeners, columns for listening hours, bars for tracks, countries, paths and
//! players), its totals are the API's (`/api/v1/reports/listening`) for the same range, its CSV
//! links answer, its form gives a shareable URL and keeps one mount's sessions, an empty range
//! says so instead of drawing axes, and nothing is wider than a 390 px phone. Without a ledger
//! the page says how to turn one on; a bad field is a 400 naming it.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::admin_api::{get, ADMIN};
use crate::cdp::{browser_or_skip, Browser, Tab};
use crate::support::*;

/// A server keeping its ledger in `dir/ledger.db`.
fn ledger_server(dir: &std::path::Path) -> TestServer {
    TestServer::start(&format!(
        "[ledger]\ndatabase = \"sqlite://{}\"\n",
        dir.join("ledger.db").display()
    ))
}

/// Sets the title of `mount` through Icecast's admin `metadata` command.
fn set_title(srv: &TestServer, mount: &str, artist: &str, title: &str) {
    let enc = |s: &str| s.replace(' ', "+");
    let path = format!(
        "/admin/metadata?mount={mount}&mode=updinfo&artist={}&title={}",
        enc(artist),
        enc(title)
    );
    let (head, body) = http_get(srv.addr, &path, &[&admin_header()]);
    assert_eq!(head.status, 200, "{}", String::from_utf8_lossy(&body));
}

/// `/api/v1/reports/listening` with `query`, as JSON.
fn listening(srv: &TestServer, query: &str) -> Value {
    let r = get(
        srv,
        &format!("/api/v1/reports/listening?{query}"),
        Some(ADMIN),
    );
    assert_eq!(r.status(), 200, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

/// Five sessions: on `/live.mp3`, with two titles, three TCP listeners (player `it`) for 20 s
/// through both titles and a curl listener (player `curl`) for 8 s during the second; on
/// `/other.mp3`, another curl listener for 8 s. 76 listener-seconds in at most two clock
/// minutes, so the peak (the highest one-minute average) is 1. Returns once the ledger has
/// committed all five.
fn five_sessions(srv: &TestServer) {
    require("curl");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    let _other = Source::start(srv.addr, "/other.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    srv.wait_mount("/other.mp3");
    set_title(srv, "/live.mp3", "Artist One", "Song A");
    let readers: Vec<_> = (0..3)
        .map(|i| {
            let mut l = Listener::open(srv.addr, "/live.mp3", i == 0);
            std::thread::spawn(move || l.read_for(Duration::from_secs(20)).len())
        })
        .collect();
    std::thread::sleep(Duration::from_secs(10));
    set_title(srv, "/live.mp3", "Artist Two", "Song B");
    let curls: Vec<_> = ["/live.mp3", "/other.mp3"]
        .iter()
        .map(|m| {
            Command::new("curl")
                .args(["-s", "-o", "/dev/null", "--max-time", "8"])
                .arg(srv.url(m))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("curl")
        })
        .collect();
    for mut curl in curls {
        let status = curl.wait().unwrap();
        let mut err = String::new();
        let _ = curl.stderr.take().unwrap().read_to_string(&mut err);
        // 28: the --max-time we asked for.
        assert_eq!(status.code(), Some(28), "curl: {err}");
    }
    for r in readers {
        assert!(r.join().unwrap() > 100_000, "a listener got the stream");
    }
    wait_until(Duration::from_secs(15), || {
        listening(srv, "")["total"]["sessions"] == 5
    })
    .expect("the ledger committed five sessions");
}

#[test]
fn reports_page_needs_the_admin_and_explains_a_missing_ledger() {
    let srv = TestServer::start("");
    let r = get(&srv, "/admin/ui/reports", None);
    assert_eq!(r.status(), 401);
    assert!(r.header("www-authenticate").is_some());
    let r = get(&srv, "/admin/ui/reports", Some(ADMIN));
    assert_eq!(r.status(), 200);
    assert!(r.body.contains("No audience ledger"), "{}", r.body);
    assert!(r.body.contains("[ledger]\ndatabase = "), "{}", r.body);
    assert!(!r.body.contains("<svg"));
    // Every admin UI page links it.
    let r = get(&srv, "/admin/", Some(ADMIN));
    assert!(r.body.contains("href=\"/admin/ui/reports\""), "{}", r.body);

    let dir = tempfile::tempdir().unwrap();
    let srv = ledger_server(dir.path());
    for (query, field) in [
        ("from=yesterday", "`from`"),
        ("group=week", "`group`"),
        ("mount=live", "`mount`"),
        (
            "from=2026-01-10&to=2026-01-01",
            "`from` must be before `to`",
        ),
    ] {
        let r = get(&srv, &format!("/admin/ui/reports?{query}"), Some(ADMIN));
        assert_eq!(r.status(), 400, "{query}");
        let shown = r.body.replace("&#39;", "'").replace("&quot;", "\"");
        assert!(shown.contains(field), "{query}: {}", r.body);
        assert!(
            r.body.contains("id=\"report-form\""),
            "the form is shown again"
        );
    }
    let r = get(&srv, "/admin/ui/reports", Some(ADMIN));
    assert_eq!(r.status(), 200);
    assert_eq!(r.body.matches("No sessions in this range.").count(), 6);
}

/// Opens `url` in `tab` on a screen `width` CSS pixels wide (a phone's when `mobile`) and waits
/// for the reports page's totals.
fn open_at(b: &Browser, tab: &Tab, url: &str, width: u32, mobile: bool) {
    b.call(
        Some(&tab.session),
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": width, "height": 900, "deviceScaleFactor": if mobile { 2 } else { 1 }, "mobile": mobile }),
    )
    .unwrap();
    b.navigate(tab, url);
    b.wait_js(
        tab,
        "document.getElementById('report-totals')",
        Duration::from_secs(10),
    )
    .expect("the reports page");
}

/// The JavaScript counting the accent-filled, non-empty bars (`<rect>`) of the chart in
/// section `id`.
fn bars_in(id: &str) -> String {
    format!(
        "[...document.querySelectorAll('#{id} svg rect')].filter(r => r.getAttribute('fill') === '#4F46E5' \
         && +r.getAttribute('width') > 0 && +r.getAttribute('height') > 0).length"
    )
}

#[test]
fn reports_page_draws_the_ledgers_sessions_in_chromium() {
    let Some(b) = browser_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let srv = ledger_server(dir.path());
    five_sessions(&srv);

    let tab = b.new_tab();
    b.set_headers(
        &tab,
        json!({ "Authorization": throng_proto::auth::basic_authorization("admin", ADMIN_PW) }),
    );
    open_at(&b, &tab, &srv.url("/admin/ui/reports"), 1280, false);

    // Six charts, none empty, each scaled to its box.
    let charts = b
        .eval(&tab, "document.querySelectorAll('svg.chart').length")
        .unwrap();
    assert_eq!(charts, 6);
    assert_eq!(
        b.eval(&tab, "document.querySelectorAll('[data-empty]').length")
            .unwrap(),
        0
    );
    let widths = b
        .eval(
            &tab,
            "[...document.querySelectorAll('svg.chart')].map(s => Math.round(s.getBoundingClientRect().width))",
        )
        .unwrap();
    for w in widths.as_array().unwrap() {
        assert!(w.as_f64().unwrap() > 300.0, "{widths}");
    }
    // Listeners over time: a line through the hours, up to the hour with listeners.
    let line = b
        .eval(
            &tab,
            "(document.querySelector('#listeners svg polyline') || {getAttribute: () => ''}).getAttribute('points')",
        )
        .unwrap();
    let ys: std::collections::BTreeSet<&str> = line
        .as_str()
        .unwrap()
        .split_whitespace()
        .filter_map(|p| p.split(',').nth(1))
        .collect();
    assert!(ys.len() >= 2, "a flat line: {line}");
    // Listening hours today; both titles; one country (unknown), one path, two players.
    let count = |id: &str| b.eval(&tab, &bars_in(id)).unwrap().as_u64().unwrap();
    assert!(count("tlh") >= 1);
    assert_eq!(count("tracks"), 2);
    assert_eq!(count("countries"), 1);
    assert_eq!(count("paths"), 1);
    assert_eq!(count("players"), 2);
    let tracks = b
        .eval(&tab, "document.querySelector('#tracks svg').textContent")
        .unwrap();
    let tracks = tracks.as_str().unwrap();
    assert!(
        tracks.contains("Artist One - Song A") && tracks.contains("Artist Two - Song B"),
        "{tracks}"
    );
    let players = b
        .eval(&tab, "document.querySelector('#players svg').textContent")
        .unwrap();
    assert!(players.as_str().unwrap().contains("curl"), "{players}");

    // The totals are the API's for the page's range (read from its CSV links).
    let href = b
        .eval(
            &tab,
            "document.querySelector('[data-csv=\"sessions.csv\"]').getAttribute('href')",
        )
        .unwrap();
    let query = href.as_str().unwrap().split_once('?').unwrap().1.to_owned();
    assert!(query.contains("from=") && query.contains("to="), "{query}");
    let api = listening(&srv, &query)["total"].clone();
    assert_eq!(api["sessions"], 5, "{api}");
    assert_eq!(api["peak_listeners"], 1, "{api}");
    let shown = b
        .eval(
            &tab,
            "Object.fromEntries([...document.querySelectorAll('[data-total]')].map(d => [d.dataset.total, +d.dataset.value]))",
        )
        .unwrap();
    for key in [
        "sessions",
        "unique_listeners",
        "tlh_hours",
        "atsl_minutes",
        "peak_listeners",
    ] {
        let (page, api) = (shown[key].as_f64().unwrap(), api[key].as_f64().unwrap());
        assert!((page - api).abs() < 1e-9, "{key}: page {page}, API {api}");
    }
    assert!(api["tlh_hours"].as_f64().unwrap() > 0.0);
    // A CSV link downloads the sessions of that range.
    let csv = b
        .eval(
            &tab,
            "fetch(document.querySelector('[data-csv=\"sessions.csv\"]').href).then(async r => [r.status, await r.text()])",
        )
        .unwrap();
    assert_eq!(csv[0], 200, "{csv}");
    assert_eq!(
        csv[1].as_str().unwrap().matches("/live.mp3").count(),
        4,
        "{csv}"
    );

    // The form: a mount and a grouping give a shareable URL and the table by player.
    b.eval(
        &tab,
        "document.getElementById('report-mount').value = '/live.mp3';
         document.getElementById('report-group').value = 'agent';
         document.querySelector('#report-form button').click()",
    )
    .unwrap();
    b.wait_js(
        &tab,
        "location.search.includes('group=agent') && !!document.getElementById('report-table')",
        Duration::from_secs(10),
    )
    .unwrap();
    let search = b.eval(&tab, "location.search").unwrap();
    let search = search.as_str().unwrap();
    for part in ["from=", "to=", "mount=%2Flive.mp3"] {
        assert!(search.contains(part), "{search}");
    }
    let table = b
        .eval(
            &tab,
            "[...document.querySelectorAll('#report-table tbody th')].map(t => t.textContent)",
        )
        .unwrap();
    assert_eq!(
        table,
        json!(["it", "curl", "Total"]),
        "most listening first"
    );
    // Only that mount's sessions; both mounts offered.
    let sessions = b
        .eval(
            &tab,
            "document.querySelector('[data-total=\"sessions\"]').dataset.value",
        )
        .unwrap();
    assert_eq!(sessions, "4");
    let mounts = b
        .eval(
            &tab,
            "[...document.querySelectorAll('#report-mount option')].map(o => o.value)",
        )
        .unwrap();
    assert_eq!(mounts, json!(["", "/live.mp3", "/other.mp3"]));

    // A range without sessions: notes, no axes.
    let empty = srv.url("/admin/ui/reports?from=2020-01-01&to=2020-01-07");
    open_at(&b, &tab, &empty, 1280, false);
    assert_eq!(
        b.eval(&tab, "document.querySelectorAll('svg').length")
            .unwrap(),
        0
    );
    assert_eq!(
        b.eval(&tab, "document.querySelectorAll('[data-empty]').length")
            .unwrap(),
        7,
        "six charts and the table"
    );

    // A phone: nothing wider than 390 px.
    open_at(&b, &tab, &srv.url("/admin/ui/reports"), 390, true);
    let width = b
        .eval(&tab, "document.documentElement.scrollWidth")
        .unwrap();
    assert!(width.as_u64().unwrap() <= 390, "scrollWidth {width}");
    let errors = b.console_errors(&tab);
    assert!(errors.is_empty(), "console errors: {errors:#?}");
}
