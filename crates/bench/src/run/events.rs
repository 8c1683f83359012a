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
//! `--max-rss-per-subscriber`. Reports and exit codes are those of listener runs.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use clap::Args;

use crate::events::subscriber::{bench_title, unix_us, EventsSpec, EventsSummary, EventsTick};
use crate::observe::sampler::SampleTarget;
use crate::profile::{Profile, Secs};
use crate::report::summary::RunReport;
use crate::run::worker::{serve_json_worker, spawn_json_worker, Launcher};
use crate::stats::{bucket_of, LogHist, HIST_BUCKETS};

/// The flags of an events run (with `--events`).
#[derive(Debug, Clone, Args)]
pub struct EventArgs {
    /// The URLs are event streams (`http://host:port/api/v1/events`): load them with SSE
    /// subscribers and measure the delivery of title changes instead of audio.
    #[arg(long)]
    pub events: bool,
    /// With `--events`: the mount whose title the run changes, `http://host:port/mount` (an
    /// origin, for subscribers on its relay edges). Default: the `?mount=` of the first URL, on
    /// its server.
    #[arg(long, value_name = "URL")]
    pub trigger_url: Option<String>,
    /// With `--events`: admin user for the title changes.
    #[arg(long, default_value = "admin")]
    pub admin_user: String,
    /// With `--events`: admin password for the title changes (or the `THRONG_ADMIN_PASSWORD`
    /// environment variable).
    #[arg(long)]
    pub admin_password: Option<String>,
    /// With `--events`: title changes to make once every subscriber is ready (1 to 64).
    #[arg(long, default_value_t = 5)]
    pub changes: u32,
    /// With `--events`: time between two title changes.
    #[arg(long, default_value = "2s")]
    pub change_interval: Secs,
    /// With `--events`: the verdict needs the p99 delivery latency within this.
    #[arg(long, default_value = "1s")]
    pub max_latency: Secs,
    /// With `--events`: the verdict needs the server's RSS growth per subscriber within this
    /// (bytes; checked when the server is sampled with `--pid`, `--pid-file` or `--pid-name`:
    /// the first URL's server, holding its round-robin share of the subscribers).
    #[arg(long, default_value_t = 1024.0)]
    pub max_rss_per_subscriber: f64,
}

/// Everything an events run needs.
#[derive(Debug, Clone)]
pub struct EventsPlan {
    /// Name of the run.
    pub name: String,
    /// Event-stream URLs.
    pub urls: Vec<String>,
    /// Subscriber count, ramp, bind range, connect timeout, workers.
    pub profile: Profile,
    /// The events flags.
    pub args: EventArgs,
    /// The local server process to read RSS from, if any.
    pub sample: Option<SampleTarget>,
    /// Worker process launcher (default: this executable).
    pub launcher: Option<Launcher>,
}

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
    fn sum(&self, f: impl Fn(&EventsTick) -> u64) -> u64 {
        self.last.iter().map(f).sum()
    }
}

/// Runs the engine of one worker process: its [`EventsSpec`] as one JSON line on stdin, one
/// [`EventsTick`] JSON line per tick on stdout; stops when stdin closes.
///
/// Errors: no spec on stdin, or the engine could not start.
pub fn worker_command() -> anyhow::Result<()> {
    serve_json_worker(|spec: EventsSpec, stop, mut out| {
        crate::events::subscriber::run(&spec, &stop, |t| out.send(&t))?;
        Ok(())
    })
}

/// Runs one events plan to the end and returns its report.
///
/// Errors: bad arguments, workers that cannot start, a title change the server refuses.
pub fn execute(plan: &EventsPlan) -> anyhow::Result<RunReport> {
    let p = &plan.profile;
    p.validate()?;
    let a = &plan.args;
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
    let (tx, rx) = mpsc::channel::<EventsTick>();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut children = Vec::new();
    for w in 0..nspecs {
        let spec = EventsSpec {
            worker: w,
            workers: nspecs,
            urls: plan.urls.clone(),
            total: p.listeners,
            ramp: p.ramp,
            bind_range: p.bind_range.clone(),
            connect_timeout_s: p.connect_timeout.0,
        };
        if nproc == 0 {
            let (tx, stop) = (tx.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                if let Err(e) = crate::events::subscriber::run(&spec, &stop, |t| {
                    let _ = tx.send(t);
                }) {
                    eprintln!("events worker: {e}");
                }
            }));
        } else {
            let l = match &plan.launcher {
                Some(l) => l.clone(),
                None => Launcher::current_exe()?,
            };
            let (child, stdin, reader) =
                spawn_json_worker(&l.program, "events-worker", &spec, tx.clone())?;
            threads.push(reader);
            children.push((child, Some(stdin)));
        }
    }
    drop(tx);
    let mut totals = Totals::default();
    let mut errors = Vec::new();
    let drain = |totals: &mut Totals, d: Duration| {
        let end = Instant::now() + d;
        while let Ok(t) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            totals.add(t);
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
    stop.store(true, Ordering::Relaxed);
    for (_, stdin) in &mut children {
        stdin.take();
    }
    drain(&mut totals, Duration::from_millis(500));
    for (mut c, _) in children {
        let _ = c.wait();
    }
    for t in threads {
        let _ = t.join();
    }
    while let Ok(t) = rx.try_recv() {
        totals.add(t);
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
    let pass = errors.is_empty()
        && ev.ready == ev.subscribers
        && ev.missed == 0
        && ev
            .latency_p99_ms
            .is_some_and(|p| p <= a.max_latency.0 * 1000.0)
        && per_sub.is_none_or(|m| m <= a.max_rss_per_subscriber);
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
    Ok(report)
}

/// Body of `throng bench run --events`: runs, writes the reports, returns the verdict.
///
/// Errors: as [`execute`], or the reports cannot be written.
pub fn command(plan: &EventsPlan, out: &Path) -> anyhow::Result<bool> {
    let report = execute(plan)?;
    let paths = crate::report::write_run(out, &report)?;
    println!("{}", crate::report::summary_table(&[&report]));
    println!("report: {}", paths.html.display());
    println!("json:   {}", paths.json.display());
    for e in &report.errors {
        eprintln!("error: {e}");
    }
    Ok(report.summary.pass)
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
