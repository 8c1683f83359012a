//! Server sampling once per second: CPU (user and system separately), RSS, threads and open
//! file descriptors of a local process and its descendants (from `/proc`), or the standard
//! `process_*` series of a Prometheus `/metrics` URL for a remote server.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// What to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SampleTarget {
    /// A local process and all its descendants.
    Pid(u32),
    /// A Prometheus text-format URL (`http://host:port/metrics`).
    Metrics(String),
}

/// One second of server resource use. CPU is in percent of one core over the last second.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerSample {
    /// Second index since the run's start (the sample was taken at `second + 1`).
    pub second: u32,
    /// User-mode CPU (% of one core).
    pub cpu_user_pct: f64,
    /// Kernel-mode CPU (% of one core); 0 when the source does not split CPU time.
    pub cpu_sys_pct: f64,
    /// Resident memory (bytes).
    pub rss_bytes: u64,
    /// Threads (threads).
    pub threads: u64,
    /// Open file descriptors (fds).
    pub fds: u64,
    /// Processes sampled (the root and its descendants) (processes).
    pub processes: u64,
    /// Resident memory before the first listener started (bytes): the baseline that per-listener
    /// memory is measured against.
    #[serde(default)]
    pub rss_baseline_bytes: u64,
    /// HLS requests the server answered itself per second (`throng_hls_requests_total`, from a
    /// metrics URL): behind a cache, the origin's request rate (requests/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hls_requests_per_s: Option<f64>,
    /// HLS body bytes the server sent itself per second (`throng_hls_bytes_total`): behind a
    /// cache, the origin's bytes per second (bytes/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hls_bytes_per_s: Option<f64>,
}

/// Sampling errors.
#[derive(Debug, Error)]
pub enum SampleError {
    /// The process is gone or unreadable.
    #[error("process {0} not found in /proc")]
    NoProcess(u32),
    /// The metrics URL could not be fetched or parsed.
    #[error("metrics {url}: {why}")]
    Metrics {
        /// The URL.
        url: String,
        /// What went wrong.
        why: String,
    },
}

/// Cumulative counters read at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RawSample {
    /// User CPU (s).
    pub user_s: f64,
    /// System CPU (s).
    pub sys_s: f64,
    /// RSS (bytes).
    pub rss: u64,
    /// Threads.
    pub threads: u64,
    /// Open fds.
    pub fds: u64,
    /// Processes.
    pub processes: u64,
    /// Sum of `throng_hls_requests_total` (a metrics URL of Throng's only).
    pub hls_requests: Option<f64>,
    /// Sum of `throng_hls_bytes_total`.
    pub hls_bytes: Option<f64>,
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// Fields of `/proc/PID/stat` after the command name: (ppid, utime, stime, threads, rss pages).
pub fn parse_stat(stat: &str) -> Option<(u32, u64, u64, u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); field N is f[N - 3].
    Some((
        f.get(1)?.parse().ok()?,
        f.get(11)?.parse().ok()?,
        f.get(12)?.parse().ok()?,
        f.get(17)?.parse().ok()?,
        f.get(21)?.parse().ok()?,
    ))
}

/// `root` and all its descendants, from a scan of `/proc`.
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                if let Some((ppid, ..)) = parse_stat(&s) {
                    children.entry(ppid).or_default().push(pid);
                }
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c.iter().copied());
        }
        i += 1;
    }
    out
}

/// The open files of process `pid`: the size `stat(2)` gives `/proc/<pid>/fd` (Linux 6.2 and
/// later: the count, without listing the directory, which costs the sampler a
/// millisecond per 10,000 files every second), else the directory's entries counted.
pub fn open_fds(pid: u32) -> u64 {
    let dir = format!("/proc/{pid}/fd");
    match std::fs::metadata(&dir) {
        Ok(m) if m.len() > 0 => m.len(),
        _ => std::fs::read_dir(&dir)
            .map(|d| d.count() as u64)
            .unwrap_or(0),
    }
}

/// Reads cumulative counters of `root` and its descendants.
pub fn read_proc(root: u32) -> Result<RawSample, SampleError> {
    let tck = clk_tck();
    let page = page_size();
    let mut r = RawSample::default();
    let mut found = false;
    for pid in process_tree(root) {
        let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, ut, st, th, rss)) = parse_stat(&s) else {
            continue;
        };
        found |= pid == root;
        r.user_s += ut as f64 / tck;
        r.sys_s += st as f64 / tck;
        r.threads += th;
        r.rss += rss * page;
        r.processes += 1;
        r.fds += open_fds(pid);
    }
    if found {
        Ok(r)
    } else {
        Err(SampleError::NoProcess(root))
    }
}

/// Parses the `process_*` series of a Prometheus text exposition.
pub fn parse_metrics(text: &str) -> RawSample {
    let mut r = RawSample::default();
    let mut total = None;
    let mut user = None;
    let mut sys = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(name), Some(val)) = (it.next(), it.next()) else {
            continue;
        };
        let name = name.split('{').next().unwrap_or(name);
        let Ok(v) = val.parse::<f64>() else { continue };
        match name {
            "process_cpu_seconds_total" => total = Some(v),
            "process_cpu_user_seconds_total" => user = Some(v),
            "process_cpu_system_seconds_total" => sys = Some(v),
            "process_resident_memory_bytes" => r.rss = v as u64,
            "process_open_fds" => r.fds = v as u64,
            "process_threads" => r.threads = v as u64,
            "throng_hls_requests_total" => *r.hls_requests.get_or_insert(0.0) += v,
            "throng_hls_bytes_total" => *r.hls_bytes.get_or_insert(0.0) += v,
            _ => {}
        }
    }
    match (user, sys, total) {
        (Some(u), Some(s), _) => {
            r.user_s = u;
            r.sys_s = s;
        }
        (_, _, Some(t)) => r.user_s = t,
        _ => {}
    }
    r.processes = 1;
    r
}

/// Fetches a URL with a blocking HTTP/1.0 GET (body as text).
pub fn http_get(url: &str, timeout: Duration) -> Result<String, SampleError> {
    let err = |why: String| SampleError::Metrics {
        url: url.to_owned(),
        why,
    };
    let u = crate::net::url::HttpUrl::parse(url).map_err(|e| err(e.to_string()))?;
    let mut s = TcpStream::connect_timeout(&u.addr, timeout).map_err(|e| err(e.to_string()))?;
    s.set_read_timeout(Some(timeout)).ok();
    let req = format!(
        "GET {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: throng-bench\r\n\r\n",
        u.path,
        u.host_header()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| err(e.to_string()))?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).map_err(|e| err(e.to_string()))?;
    let text = String::from_utf8_lossy(&body).to_string();
    match text.split_once("\r\n\r\n") {
        Some((head, b)) if head.split_whitespace().nth(1) == Some("200") => Ok(b.to_owned()),
        Some((head, _)) => Err(err(head.lines().next().unwrap_or("").to_owned())),
        None => Err(err("no response head".into())),
    }
}

fn read(target: &SampleTarget) -> Result<RawSample, SampleError> {
    match target {
        SampleTarget::Pid(p) => read_proc(*p),
        SampleTarget::Metrics(u) => Ok(parse_metrics(&http_get(u, Duration::from_secs(2))?)),
    }
}

/// Turns two raw samples `dt_s` apart into a [`ServerSample`].
pub fn diff(second: u32, a: &RawSample, b: &RawSample, dt_s: f64) -> ServerSample {
    let dt = dt_s.max(1e-3);
    ServerSample {
        second,
        cpu_user_pct: ((b.user_s - a.user_s) / dt * 100.0).max(0.0),
        cpu_sys_pct: ((b.sys_s - a.sys_s) / dt * 100.0).max(0.0),
        rss_bytes: b.rss,
        threads: b.threads,
        fds: b.fds,
        processes: b.processes,
        rss_baseline_bytes: 0,
        hls_requests_per_s: rate(a.hls_requests, b.hls_requests, dt),
        hls_bytes_per_s: rate(a.hls_bytes, b.hls_bytes, dt),
    }
}

/// The rate of a counter read as `a` then `b`, `dt` seconds apart (`None` unless both reads
/// have it; a counter that went back, a restarted server, gives 0).
fn rate(a: Option<f64>, b: Option<f64>, dt: f64) -> Option<f64> {
    Some(((b? - a?) / dt).max(0.0))
}

/// A sampling thread; samples at every whole second after the run's common start.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `target` at `start_unix_ms + k s` (k = 1, 2, ...), sending each sample.
    pub fn start(target: SampleTarget, start_unix_ms: u64, tx: Sender<ServerSample>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let now_unix = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            let base =
                Instant::now() + Duration::from_millis(start_unix_ms.saturating_sub(now_unix));
            let mut prev = read(&target).ok();
            let baseline = prev.as_ref().map_or(0, |p| p.rss);
            let mut prev_t = Instant::now();
            let mut second = 0u32;
            while !s2.load(Ordering::Relaxed) {
                let at = base + Duration::from_secs(second as u64 + 1);
                let now = Instant::now();
                if at > now {
                    std::thread::sleep((at - now).min(Duration::from_millis(200)));
                    continue;
                }
                let cur = read(&target).ok();
                let t = Instant::now();
                if let (Some(a), Some(b)) = (&prev, &cur) {
                    let mut sample = diff(second, a, b, (t - prev_t).as_secs_f64());
                    sample.rss_baseline_bytes = baseline;
                    if tx.send(sample).is_err() {
                        break;
                    }
                }
                prev = cur;
                prev_t = t;
                second += 1;
            }
        });
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_files_are_counted() {
        let files: Vec<std::fs::File> = (0..50)
            .map(|_| std::fs::File::open("/proc/self/stat").unwrap())
            .collect();
        // Other tests' threads open and close files meanwhile: at least these fifty and stdio.
        let n = open_fds(std::process::id());
        assert!(n >= 53, "{n}");
        drop(files);
    }

    #[test]
    fn reads_own_process() {
        let r = read_proc(std::process::id()).unwrap();
        assert!(r.rss > 0 && r.threads >= 1 && r.fds >= 3, "{r:?}");
        assert!(read_proc(u32::MAX - 1).is_err());
    }

    #[test]
    fn stat_with_spaces_in_name() {
        let s = "12 (a b) S 1 12 12 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 100 1000 300 0";
        assert_eq!(parse_stat(s), Some((1, 250, 50, 7, 300)));
    }

    #[test]
    fn metrics_text() {
        let r = parse_metrics(
            "# HELP x\nprocess_cpu_seconds_total 12.5\nprocess_resident_memory_bytes 1e6\nprocess_open_fds 42\n",
        );
        assert_eq!((r.user_s, r.rss, r.fds), (12.5, 1_000_000, 42));
        let s = diff(3, &RawSample::default(), &r, 10.0);
        assert_eq!(s.cpu_user_pct, 125.0);
        assert_eq!(s.hls_requests_per_s, None, "not a Throng with HLS");
    }

    #[test]
    fn origin_hls_rates_from_throngs_metrics() {
        let at = |req: u64, bytes: u64| {
            parse_metrics(&format!(
                "throng_hls_requests_total{{mount=\"/a\",kind=\"playlist\"}} {req}\n\
                 throng_hls_requests_total{{mount=\"/a\",kind=\"segment\"}} 10\n\
                 throng_hls_bytes_total{{mount=\"/a\",kind=\"segment\"}} {bytes}\n"
            ))
        };
        let (a, b) = (at(5, 1000), at(9, 5000));
        assert_eq!((b.hls_requests, b.hls_bytes), (Some(19.0), Some(5000.0)));
        let s = diff(1, &a, &b, 2.0);
        assert_eq!(
            (s.hls_requests_per_s, s.hls_bytes_per_s),
            (Some(2.0), Some(2000.0))
        );
        // A restarted server (counters back to 0): no negative rate.
        assert_eq!(diff(2, &b, &a, 1.0).hls_requests_per_s, Some(0.0));
    }
}
