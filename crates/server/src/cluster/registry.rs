//! The origin's registry of edges: the last report of each (keyed by its public URL, its
//! name), when it came, and how many listeners were sent there since. An edge's name is bound
//! to the address its first report came from: a report naming it from another address is
//! refused while the edge is registered, so one edge cannot overwrite another's entry; and a
//! report must be newer than the edge's last (`sign.rs`), so none can be replayed. Edges silent longer than `edge-timeout`
//! are dropped whenever the registry is read. Also the report an edge sends, and the
//! per-edge series of `/metrics`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::cluster::decide::{self, EdgeLoad};

/// What an edge reports (`POST /api/v1/cluster/edges`, JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeReport {
    /// The edge's base URL as listeners reach it (`http://edge1.example.com:8000`).
    pub url: String,
    /// Listeners it has room for in all (listeners).
    pub capacity: u64,
    /// Listeners it serves now (listeners).
    pub listeners: u64,
    /// Its live mounts and their listeners.
    #[serde(default)]
    pub mounts: BTreeMap<String, u64>,
    /// When the edge made the report (Unix milliseconds); inside the signature.
    pub time: u64,
    /// The edge drains (`cluster/drain.rs`): the origin sends it no listener. Left out of
    /// the JSON when false, so an edge that does not drain reports as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draining: bool,
}

/// Most mounts one report may list; most edges the registry keeps (reports from more are
/// refused), so a holder of the secret cannot grow the origin's memory without bound.
pub const MAX_MOUNTS: usize = 1000;
/// See [`MAX_MOUNTS`].
pub const MAX_EDGES: usize = 1000;
/// Most `throng_cluster_edge_mount_listeners` series one edge gets in `/metrics` (its mounts
/// with the most listeners; the full list stays in `/api/v1/cluster`), so that the public
/// `/metrics` stays small however many mounts the edges carry (300 edges × 1,000 mounts made it
/// 25.7 MB).
pub const MOUNT_SERIES_PER_EDGE: usize = 16;

/// Why a report was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// The URL is not an absolute `http://` or `https://` URL safe to redirect to
    /// ([`decide::valid_edge_url`]: a host, no user info, query, fragment, control characters
    /// or spaces).
    #[error("the edge URL must be an absolute http:// or https:// URL with a host and no control characters, spaces, user info, query or fragment")]
    BadUrl,
    /// A capacity or listener count over [`decide::MAX_EDGE_LISTENERS`].
    #[error("capacity and listener counts must be at most 2^40")]
    BadCounts,
    /// More than [`MAX_MOUNTS`] mounts, or a mount name not starting with `/`, longer than 1,024
    /// bytes or holding a control character.
    #[error("at most {MAX_MOUNTS} mounts, each starting with / (at most 1024 bytes, no control characters)")]
    BadMounts,
    /// The registry holds [`MAX_EDGES`] other edges.
    #[error("the registry is full ({MAX_EDGES} edges)")]
    Full,
    /// The edge URL is registered by another address (the one its first report came from).
    #[error("this edge URL is registered from another address")]
    Taken,
    /// The report's time is too old, too far ahead, or not newer than the edge's last.
    #[error("{0}")]
    Stale(#[from] crate::cluster::sign::StaleReport),
}

#[derive(Debug, Clone)]
struct Edge {
    report: EdgeReport,
    /// The address its first report came from (an IPv4 address or an IPv6 /64).
    bound: IpAddr,
    last: Instant,
    last_wall: SystemTime,
    first_wall: SystemTime,
    reports: u64,
    sent: u64,
    redirected: u64,
}

/// One edge as shown in `/api/v1/cluster`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EdgeStatus {
    /// Its base URL.
    pub url: String,
    /// Listeners it advertises room for.
    pub capacity: u64,
    /// Listeners at its last report.
    pub listeners: u64,
    /// Room left, counting listeners sent since its last report.
    pub room: u64,
    /// Live mounts and their listeners at its last report.
    pub mounts: BTreeMap<String, u64>,
    /// Seconds since its last report.
    pub last_report_secs: f64,
    /// Its last report, Unix seconds.
    pub last_report_unix: u64,
    /// Its first report, Unix seconds.
    pub first_report_unix: u64,
    /// Reports received.
    pub reports: u64,
    /// Listeners redirected to it in all.
    pub redirected: u64,
    /// It drains (its last report said so): no listener is sent there, its room is 0.
    pub draining: bool,
    /// `healthy`: its last report is younger than half of `edge-timeout`; `late`: older (it
    /// is dropped once older than `edge-timeout`).
    pub health: &'static str,
}

/// The registry (see the module documentation).
#[derive(Debug, Default)]
pub struct Cluster {
    edges: Mutex<BTreeMap<String, Edge>>,
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Cluster {
    /// Records a report received from `from` at `now` (`now_ms`: the wall clock, Unix
    /// milliseconds); returns whether the edge is new.
    ///
    /// Errors: [`ReportError`].
    pub fn report(
        &self,
        r: EdgeReport,
        from: IpAddr,
        now: Instant,
        now_ms: u64,
    ) -> Result<bool, ReportError> {
        if !decide::valid_edge_url(&r.url) {
            return Err(ReportError::BadUrl);
        }
        let too_many = |n: u64| n > decide::MAX_EDGE_LISTENERS;
        if too_many(r.capacity) || too_many(r.listeners) || r.mounts.values().any(|&n| too_many(n))
        {
            return Err(ReportError::BadCounts);
        }
        if r.mounts.len() > MAX_MOUNTS
            || r.mounts
                .keys()
                .any(|m| !m.starts_with('/') || m.len() > 1024 || m.chars().any(char::is_control))
        {
            return Err(ReportError::BadMounts);
        }
        let from = crate::net::clients::address_key(from);
        let mut edges = self.edges.lock();
        let wall = SystemTime::now();
        if let Some(e) = edges.get_mut(&r.url) {
            if e.bound != from {
                return Err(ReportError::Taken);
            }
            crate::cluster::sign::fresh(r.time, now_ms, Some(e.report.time))?;
            e.report = r;
            e.last = now;
            e.last_wall = wall;
            e.reports += 1;
            e.sent = 0;
            return Ok(false);
        }
        crate::cluster::sign::fresh(r.time, now_ms, None)?;
        if edges.len() >= MAX_EDGES {
            return Err(ReportError::Full);
        }
        edges.insert(
            r.url.clone(),
            Edge {
                report: r,
                bound: from,
                last: now,
                last_wall: wall,
                first_wall: wall,
                reports: 1,
                sent: 0,
                redirected: 0,
            },
        );
        Ok(true)
    }

    /// Drops the edges silent longer than `timeout` at `now`; returns their URLs.
    pub fn prune(&self, now: Instant, timeout: Duration) -> Vec<String> {
        let mut gone = Vec::new();
        self.edges.lock().retain(|url, e| {
            let keep = !decide::expired(e.last, now, timeout);
            if !keep {
                gone.push(url.clone());
            }
            keep
        });
        for url in &gone {
            tracing::warn!(edge = %url, "edge dropped: no report within edge-timeout");
        }
        gone
    }

    /// The edge a listener of `mount` is sent to at `now` ([`decide::pick`] over the edges
    /// still alive), counted as sent to it; `None` when no edge carries the mount with room.
    pub fn pick(&self, mount: &str, now: Instant, timeout: Duration) -> Option<String> {
        self.prune(now, timeout);
        let mut edges = self.edges.lock();
        let loads: Vec<EdgeLoad> = edges
            .values()
            .map(|e| EdgeLoad {
                // A draining edge has no room.
                capacity: if e.report.draining {
                    0
                } else {
                    e.report.capacity
                },
                listeners: e.report.listeners,
                sent: e.sent,
                carries: e.report.mounts.contains_key(mount),
            })
            .collect();
        let i = decide::pick(&loads)?;
        let e = edges.values_mut().nth(i)?;
        e.sent += 1;
        e.redirected += 1;
        Some(e.report.url.clone())
    }

    /// The edges alive at `now`, by URL.
    pub fn snapshot(&self, now: Instant, timeout: Duration) -> Vec<EdgeStatus> {
        self.prune(now, timeout);
        self.edges
            .lock()
            .values()
            .map(|e| {
                let age = now.saturating_duration_since(e.last);
                EdgeStatus {
                    url: e.report.url.clone(),
                    capacity: e.report.capacity,
                    listeners: e.report.listeners,
                    room: decide::room(&EdgeLoad {
                        capacity: if e.report.draining {
                            0
                        } else {
                            e.report.capacity
                        },
                        listeners: e.report.listeners,
                        sent: e.sent,
                        carries: true,
                    }),
                    mounts: e.report.mounts.clone(),
                    last_report_secs: age.as_secs_f64(),
                    last_report_unix: unix(e.last_wall),
                    first_report_unix: unix(e.first_wall),
                    reports: e.reports,
                    redirected: e.redirected,
                    draining: e.report.draining,
                    health: if age * 2 <= timeout {
                        "healthy"
                    } else {
                        "late"
                    },
                }
            })
            .collect()
    }
}

/// A Prometheus label value, escaped as the text format wants (`\`, `"`, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The per-edge series of `/metrics` in the OpenMetrics text format, inserted before the
/// `# EOF` line of `text` (appended when there is none): `throng_cluster_edges`, and per edge
/// `throng_cluster_edge_listeners`, `_capacity`, `_last_report_seconds` (age),
/// `_redirected` (listeners sent there in all), `throng_cluster_edge_mount_listeners` for the
/// edge's [`MOUNT_SERIES_PER_EDGE`] mounts with the most listeners (ties by name).
pub fn append_metrics(text: &mut String, edges: &[EdgeStatus]) {
    use std::fmt::Write;
    let mut m = String::new();
    let _ = writeln!(m, "# TYPE throng_cluster_edges gauge");
    let _ = writeln!(
        m,
        "# HELP throng_cluster_edges Edges that reported within edge-timeout."
    );
    let _ = writeln!(m, "throng_cluster_edges {}", edges.len());
    type Series = (&'static str, &'static str, fn(&EdgeStatus) -> String);
    let series: [Series; 4] = [
        (
            "listeners",
            "Listeners of the edge at its last report.",
            |e| e.listeners.to_string(),
        ),
        ("capacity", "Listeners the edge advertises room for.", |e| {
            e.capacity.to_string()
        }),
        (
            "last_report_seconds",
            "Seconds since the edge's last report.",
            |e| format!("{:.3}", e.last_report_secs),
        ),
        (
            "redirected",
            "Listeners the origin redirected to the edge.",
            |e| e.redirected.to_string(),
        ),
    ];
    for (name, help, value) in series {
        let _ = writeln!(m, "# TYPE throng_cluster_edge_{name} gauge");
        let _ = writeln!(m, "# HELP throng_cluster_edge_{name} {help}");
        for e in edges {
            let _ = writeln!(
                m,
                "throng_cluster_edge_{name}{{edge=\"{}\"}} {}",
                label(&e.url),
                value(e)
            );
        }
    }
    let _ = writeln!(m, "# TYPE throng_cluster_edge_mount_listeners gauge");
    let _ = writeln!(m, "# HELP throng_cluster_edge_mount_listeners Listeners of a mount on the edge at its last report.");
    for e in edges {
        let mut busiest: Vec<(&String, &u64)> = e.mounts.iter().collect();
        busiest.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        for (mount, n) in busiest.into_iter().take(MOUNT_SERIES_PER_EDGE) {
            let _ = writeln!(
                m,
                "throng_cluster_edge_mount_listeners{{edge=\"{}\",mount=\"{}\"}} {n}",
                label(&e.url),
                label(mount)
            );
        }
    }
    match text.rfind("# EOF") {
        Some(i) => text.insert_str(i, &m),
        None => text.push_str(&m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(url: &str, listeners: u64, mounts: &[(&str, u64)]) -> EdgeReport {
        EdgeReport {
            url: url.into(),
            capacity: 100,
            listeners,
            mounts: mounts.iter().map(|(m, n)| ((*m).into(), *n)).collect(),
            time: 0,
            draining: false,
        }
    }

    /// An edge's address in these tests.
    const EDGE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));

    /// Sends `r` from [`EDGE`] at `now`, with a time newer than any before (the origin's
    /// clock agreeing).
    fn send(c: &Cluster, mut r: EdgeReport, now: Instant) -> Result<bool, ReportError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        r.time = 1_800_000_000_000 + NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let time = r.time;
        c.report(r, EDGE, now, time)
    }

    #[test]
    fn an_edge_is_bound_to_its_first_address_and_reports_are_not_replayed() {
        let c = Cluster::default();
        let now = Instant::now();
        let t = 1_800_000_000_000;
        let at = |time: u64| EdgeReport {
            time,
            ..report("http://a:1", 5, &[("/live", 5)])
        };
        let other: IpAddr = "198.51.100.7".parse().unwrap();
        assert_eq!(c.report(at(t), EDGE, now, t), Ok(true));
        // Another address cannot overwrite it...
        assert_eq!(
            c.report(at(t + 1), other, now, t + 1),
            Err(ReportError::Taken)
        );
        // ...nor can the report be replayed, or an old one sent.
        use crate::cluster::sign::StaleReport;
        assert_eq!(
            c.report(at(t), EDGE, now, t + 10),
            Err(ReportError::Stale(StaleReport::Replayed))
        );
        assert_eq!(
            c.report(at(t + 2), EDGE, now, t + 60_000),
            Err(ReportError::Stale(StaleReport::OutOfWindow))
        );
        assert_eq!(c.report(at(t + 3), EDGE, now, t + 3), Ok(false));
        // Once it expired, the URL may be registered from elsewhere.
        let later = now + Duration::from_secs(16);
        c.prune(later, Duration::from_secs(15));
        assert_eq!(c.report(at(t + 4), other, later, t + 4), Ok(true));
    }

    #[test]
    fn per_edge_mount_series_are_bounded() {
        // Issue 28's probe: 300 edges carrying 1,000 mounts each (25.7 MB of /metrics before).
        let c = Cluster::default();
        let now = Instant::now();
        let names: Vec<String> = (0..MAX_MOUNTS - 1)
            .map(|i| format!("/mount-{i:04}.mp3"))
            .collect();
        let mounts: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 1)).collect();
        for e in 0..300 {
            let mut r = report(
                &format!("http://edge-{e:03}.example.com:8000"),
                100,
                &mounts,
            );
            r.mounts.insert("/busy".into(), 50);
            send(&c, r, now).unwrap();
        }
        let mut text = String::new();
        append_metrics(&mut text, &c.snapshot(now, Duration::from_secs(15)));
        eprintln!("/metrics cluster series: {} bytes", text.len());
        let series = text
            .lines()
            .filter(|l| l.starts_with("throng_cluster_edge_mount_listeners{"))
            .count();
        assert_eq!(series, 300 * MOUNT_SERIES_PER_EDGE);
        assert!(text.len() < 1024 * 1024, "{} bytes", text.len());
        // The busiest mounts are the ones shown.
        assert!(text.contains("edge=\"http://edge-000.example.com:8000\",mount=\"/busy\"} 50"));
    }

    #[test]
    fn reports_that_could_split_a_redirect_or_overflow_a_sum_are_refused() {
        let c = Cluster::default();
        let now = Instant::now();
        let r = |url: &str| report(url, 1, &[("/a.mp3", 1)]);
        assert_eq!(
            send(&c, r("http://e1\r\nSet-Cookie: x=1"), now),
            Err(ReportError::BadUrl)
        );
        assert_eq!(send(&c, r("http://u:p@e1"), now), Err(ReportError::BadUrl));
        let mut big = r("http://e1:8000");
        big.capacity = u64::MAX;
        assert_eq!(send(&c, big, now), Err(ReportError::BadCounts));
        let mut odd = r("http://e1:8000");
        odd.mounts.insert("/x\ny".into(), 1);
        assert_eq!(send(&c, odd, now), Err(ReportError::BadMounts));
        assert_eq!(send(&c, r("http://e1:8000"), now), Ok(true));
        assert_eq!(c.snapshot(now, Duration::from_secs(30)).len(), 1);
    }

    #[test]
    fn edges_register_expire_and_are_picked() {
        let c = Cluster::default();
        let t0 = Instant::now();
        let timeout = Duration::from_secs(15);
        assert_eq!(
            send(&c, report("http://a:1", 90, &[("/live", 90)]), t0),
            Ok(true)
        );
        assert_eq!(
            send(&c, report("http://b:1", 10, &[("/live", 10)]), t0),
            Ok(true)
        );
        assert_eq!(
            send(&c, report("http://b:1", 20, &[("/live", 20)]), t0),
            Ok(false)
        );
        assert_eq!(c.pick("/live", t0, timeout).as_deref(), Some("http://b:1"));
        assert_eq!(c.pick("/other", t0, timeout), None);
        let s = c.snapshot(t0, timeout);
        assert_eq!(s.len(), 2);
        assert_eq!((s[1].room, s[1].redirected), (79, 1));
        // a keeps reporting, b goes silent.
        let later = t0 + Duration::from_secs(16);
        send(&c, report("http://a:1", 90, &[("/live", 90)]), later).unwrap();
        assert_eq!(c.prune(later, timeout), vec!["http://b:1".to_string()]);
        assert_eq!(
            c.pick("/live", later, timeout).as_deref(),
            Some("http://a:1")
        );
    }

    #[test]
    fn bad_reports_are_refused() {
        let c = Cluster::default();
        let now = Instant::now();
        assert_eq!(
            send(&c, report("edge:1", 0, &[]), now),
            Err(ReportError::BadUrl)
        );
        assert_eq!(
            send(&c, report("http://a:1", 0, &[("live", 1)]), now),
            Err(ReportError::BadMounts)
        );
    }

    #[test]
    fn metrics_go_before_eof_with_escaped_labels() {
        let c = Cluster::default();
        let now = Instant::now();
        send(&c, report("http://a:1", 3, &[("/x\"y", 3)]), now).unwrap();
        let mut text = "a 1\n# EOF\n".to_string();
        append_metrics(&mut text, &c.snapshot(now, Duration::from_secs(15)));
        assert!(text.ends_with("# EOF\n"));
        assert!(text.contains("throng_cluster_edges 1\n"));
        assert!(text.contains("throng_cluster_edge_listeners{edge=\"http://a:1\"} 3\n"));
        assert!(text.contains(
            "throng_cluster_edge_mount_listeners{edge=\"http://a:1\",mount=\"/x\\\"y\"} 3\n"
        ));
    }
}
