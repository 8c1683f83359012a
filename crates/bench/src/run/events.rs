//! `throng bench run --events URL -n N`: loads a server's now-playing event stream
//! (`/api/v1/events`). N subscribers connect at the ramp rate (spread over worker processes of
//! at most `max_per_worker` sockets and over the bind range's source addresses, as listeners
//! are); once every one has its snapshot the server's RSS is read, then `--changes` title
//! updates are made through the admin metadata command of `--trigger-url` (Icecast's
//! `/admin/metadata?mode=updinfo`, so an origin feeding relay edges can be the target), each
//! title carrying its trigger time. The report gives subscribers connected and ready, the
//! delivery latency of every (subscriber, change) pair (p50/p99/max), missed receipts, and the
//! server's RSS growth per subscriber; the verdict needs every subscriber ready, none missed,
//! p99 within `--max-latency` and, when the server is sampled, the memory within
//! `--max-rss-per-subscriber`. Reports and exit codes are those of every run ([`crate::run`](mod@crate::run)).

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::events::subscriber::{bench_title, unix_us, EventsSpec, EventsSummary, EventsTick};
use crate::observe::sampler::SampleTarget;
use crate::report::summary::RunReport;
use crate::run::plan::Plan;
use crate::run::worker::{Tick, WorkerMsg, WorkerSet, WorkerSpec};
use crate::stats::{bucket_of, LogHist, HIST_BUCKETS};

fn rss_of(sample: &Option<SampleTarget>) -> Option<u64> {
    match sample {
        Some(SampleTarget::Pid(p)) => crate::observe::sampler::read_proc(*p).ok().map(|r| r.rss),
        Some(SampleTarget::Metrics(u)) => {
            crate::observe::sampler::http_get(u, Duration::from_secs(2))
                .ok()
                .map(|t| crate::observe::sampler::parse_metrics(&t).rss)
        }
        None => None,
    }
}

/// The admin metadata request that sets `title` on the mount of `trigger` (`http://host:port/mount`).
fn set_title(trigger: &str, user: &str, password: &str, title: &str) -> anyhow::Result<()> {
    let u = crate::net::url::HttpUrl::parse(trigger)?;
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let req = format!(
        "GET /admin/metadata?mount={}&mode=updinfo&song={} HTTP/1.0\r\nHost: {}\r\nAuthorization: {}\r\nUser-Agent: throng-bench\r\n\r\n",
        enc(&u.path),
        enc(title),
        u.host_header(),
        throng_proto::auth::basic_authorization(user, password)
    );
    let mut s = std::net::TcpStream::connect_timeout(&u.addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(req.as_bytes())?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let head = String::from_utf8_lossy(&out);
    let status = head.split_whitespace().nth(1).unwrap_or("");
    anyhow::ensure!(
        status == "200",
        "title change on {trigger}: {}",
        head.lines().next().unwrap_or("no answer")
    );
    Ok(())
}

/// The default trigger: the `?mount=` of `url` on its server.
fn default_trigger(url: &str) -> Option<String> {
    let (base, query) = url.split_once('?')?;
    let mount = throng_proto::http::parse_query(query)
        .into_iter()
        .find(|(k, _)| k == "mount")?
        .1;
    let origin = base.split_once("/api/").map_or(base, |(o, _)| o);
    Some(format!("{origin}{mount}"))
}

/// Workers' ticks merged.
#[derive(Default)]
struct Totals {
    last: Vec<EventsTick>,
    ready_hist: Vec<u64>,
    lat_hist: Vec<u64>,
    lat_all_us: Vec<u64>,
}

impl Totals {
    fn add(&mut self, t: EventsTick) {
        if self.ready_hist.is_empty() {
            self.ready_hist = vec![0; HIST_BUCKETS];
            self.lat_hist = vec![0; HIST_BUCKETS];
        }
        for &us in &t.ready_us {
            self.ready_hist[bucket_of(us) as usize] += 1;
        }
        for &us in &t.latencies_us {
            self.lat_hist[bucket_of(us) as usize] += 1;
            self.lat_all_us.push(us);
        }
        let w = t.worker as usize;
        if self.last.len() <= w {
            self.last.resize(w + 1, EventsTick::default());
        }
        self.last[w] = t;
    }
    /// Takes one worker message: a tick is added, a worker's error is shown on stderr (as a
    /// worker process's own stderr was before; missing receipts fail the run).
    fn take(&mut self, m: WorkerMsg) {
        match m {
            WorkerMsg::Tick(Tick::Events(t)) => self.add(t),
            WorkerMsg::Exited {
                worker,
                error: Some(e),
            } => eprintln!("events worker {worker}: {e}"),
            _ => {}
        }
    }
    fn sum(&self, f: impl Fn(&EventsTick) -> u64) -> u64 {
        self.last.iter().map(f).sum()
    }
}

/// Runs one events plan to the end and returns its report.
///
/// Errors: bad arguments, workers that cannot start, a title change the server refuses.
pub fn execute(plan: &Plan) -> anyhow::Result<RunReport> {
    let p = &plan.profile;
    p.validate()?;
    let a = &plan.events;
    anyhow::ensure!(!plan.urls.is_empty(), "no event-stream URL given");
    anyhow::ensure!((1..=64).contains(&a.changes), "--changes: 1 to 64");
    let trigger = a
        .trigger_url
        .clone()
        .or_else(|| default_trigger(&plan.urls[0]))
        .ok_or_else(|| anyhow::anyhow!("--trigger-url is needed (the URL has no ?mount=)"))?;
    let password = a
        .admin_password
        .clone()
        .or_else(|| std::env::var("THRONG_ADMIN_PASSWORD").ok())
        .ok_or_else(|| anyhow::anyhow!("--admin-password (or THRONG_ADMIN_PASSWORD) is needed"))?;
    let server = crate::observe::meta::server_header(&trigger, Duration::from_secs(2));
    let start_unix_ms = unix_us() / 1000;
    let meta = crate::observe::meta::RunMeta::collect(start_unix_ms, server);
    let rss_before = rss_of(&plan.sample);

    let nproc = p.effective_workers();
    let nspecs = nproc.max(1);
    let specs = (0..nspecs)
        .map(|w| {
            WorkerSpec::Events(EventsSpec {
                worker: w,
                workers: nspecs,
                urls: plan.urls.clone(),
                total: p.listeners,
                ramp: p.ramp,
                bind_range: p.bind_range.clone(),
                connect_timeout_s: p.connect_timeout.0,
            })
        })
        .collect();
    let launcher = if nproc > 0 {
        Some(plan.launcher()?)
    } else {
        None
    };
    let (tx, rx) = mpsc::channel::<WorkerMsg>();
    let mut workers = WorkerSet::start(specs, launcher.as_ref(), tx)?;
    let mut totals = Totals::default();
    let mut errors = Vec::new();
    let drain = |totals: &mut Totals, d: Duration| {
        let end = Instant::now() + d;
        while let Ok(m) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            totals.take(m);
            if Instant::now() >= end {
                break;
            }
        }
    };
    // Ramp until every subscriber is ready or failed.
    let n = p.listeners as u64;
    let ramp_deadline =
        Instant::now() + Duration::from_secs_f64(p.ramp_secs() + p.connect_timeout.0 + 30.0);
    loop {
        drain(&mut totals, Duration::from_millis(500));
        let (ready, failed) = (
            totals.sum(|t| t.ready as u64),
            totals.sum(|t| t.failed as u64),
        );
        if ready + failed >= n || Instant::now() > ramp_deadline {
            break;
        }
    }
    let ready = totals.sum(|t| t.ready as u64);
    if ready < n {
        errors.push(format!(
            "{} of {n} subscribers never got their snapshot",
            n - ready
        ));
    }
    // Let the server settle, then read its memory with every subscriber in.
    drain(&mut totals, Duration::from_secs(2));
    let rss_ready = rss_of(&plan.sample);
    for k in 0..a.changes {
        if let Err(e) = set_title(
            &trigger,
            &a.admin_user,
            &password,
            &bench_title(k, unix_us()),
        ) {
            errors.push(e.to_string());
            break;
        }
        drain(&mut totals, Duration::from_secs_f64(a.change_interval.0));
    }
    // Wait for the last receipts (at most 5 × the latency bound).
    let want = ready * a.changes as u64;
    let end = Instant::now() + Duration::from_secs_f64((a.max_latency.0 * 5.0).max(2.0));
    while totals.sum(|t| t.received) < want && Instant::now() < end {
        drain(&mut totals, Duration::from_millis(250));
    }
    workers.stop();
    drain(&mut totals, Duration::from_millis(500));
    workers.join(Duration::from_secs(5));
    while let Ok(m) = rx.try_recv() {
        totals.take(m);
    }

    let received = totals.sum(|t| t.received);
    totals.lat_all_us.sort_unstable();
    let lat = &totals.lat_all_us;
    let q = |f: f64| -> Option<f64> {
        (!lat.is_empty()).then(|| {
            let rank = ((f * lat.len() as f64).ceil() as usize).clamp(1, lat.len());
            lat[rank - 1] as f64 / 1000.0
        })
    };
    let snap = LogHist::from_dense(&totals.ready_hist);
    // The sampled server is the first URL's: it holds its round-robin share of subscribers.
    let on_sampled = ready.div_ceil(plan.urls.len() as u64);
    let per_sub = match (rss_before, rss_ready) {
        (Some(b), Some(r)) if on_sampled > 0 => Some((r as f64 - b as f64) / on_sampled as f64),
        _ => None,
    };
    let ev = EventsSummary {
        subscribers: p.listeners,
        ready: ready as u32,
        connected_at_end: totals.sum(|t| t.connected as u64) as u32,
        changes: a.changes,
        received,
        missed: want.saturating_sub(received),
        latency_p50_ms: q(0.5),
        latency_p99_ms: q(0.99),
        latency_max_ms: q(1.0),
        snapshot_p99_ms: snap.quantile_ms(0.99),
        server_rss_before: rss_before,
        server_rss_ready: rss_ready,
        server_rss_per_subscriber: per_sub,
    };
    let mut failures = std::collections::BTreeMap::new();
    for t in &totals.last {
        for (k, v) in &t.failures {
            *failures.entry(k.clone()).or_insert(0) += v;
        }
    }
    // Memory is judged only on a sample large enough not to be page-size noise.
    let memory = crate::report::verdict::memory_judged(on_sampled, per_sub);
    let reasons = crate::report::verdict::events_reasons(
        &ev,
        &failures,
        a.max_latency.0 * 1000.0,
        a.max_rss_per_subscriber,
        memory,
    );
    let pass = errors.is_empty() && reasons.is_empty();
    let mut report = RunReport {
        name: plan.name.clone(),
        meta,
        urls: plan.urls.clone(),
        profile: Some(p.clone()),
        start_unix_ms,
        workers: nproc,
        ttfb: snap,
        events: Some(ev),
        errors,
        mode: crate::mode::Mode::Events,
        ..RunReport::default()
    };
    let s = &mut report.summary;
    s.listeners = p.listeners;
    s.peak_streaming = ready as u32;
    s.final_streaming = report.events.as_ref().map_or(0, |e| e.connected_at_end);
    s.failures_total = failures.values().sum();
    s.failures = failures;
    s.connects = ready;
    s.ttfb_p50_ms = report.ttfb.quantile_ms(0.5);
    s.ttfb_p99_ms = report.ttfb.quantile_ms(0.99);
    s.server_rss_max = rss_ready;
    s.server_rss_per_listener = per_sub;
    s.pass = pass;
    s.fail_reasons = reasons;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_trigger_is_the_filtered_mount_on_its_server() {
        assert_eq!(
            default_trigger("http://127.0.0.1:8000/api/v1/events?mount=/live.mp3").as_deref(),
            Some("http://127.0.0.1:8000/live.mp3")
        );
        assert_eq!(default_trigger("http://h/api/v1/events"), None);
    }
}
