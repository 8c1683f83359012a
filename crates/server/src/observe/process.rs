//! The process metrics every Prometheus client exports under the same names
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
//! `process_open_fds`, `process_max_fds`, `process_threads`, `process_start_time_seconds`),
//! read from `/proc/self` at each scrape, so dashboards show the server's CPU and memory
//! without a node exporter. On a system without `/proc` the series are left out.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The collector of the process metrics (registered once in `Metrics::new`).
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// What `/proc/self/stat` says, in the units of the metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcStat {
    /// User plus system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Threads.
    pub threads: i64,
    /// Start time, seconds after boot.
    pub start_after_boot_seconds: f64,
    /// Virtual memory size, bytes.
    pub virtual_bytes: i64,
    /// Resident set size, pages.
    pub resident_pages: i64,
}

/// Parses the text of `/proc/<pid>/stat` (proc(5)) with `ticks` clock ticks per second:
/// fields after the parenthesised command name (which may hold spaces and parentheses).
pub fn parse_stat(text: &str, ticks: f64) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): field n is f[n - 3].
    let num = |n: usize| f.get(n - 3)?.parse::<i64>().ok();
    let ticks = ticks.max(1.0);
    Some(ProcStat {
        cpu_seconds: (num(14)? + num(15)?) as f64 / ticks,
        threads: num(20)?,
        start_after_boot_seconds: num(22)? as f64 / ticks,
        virtual_bytes: num(23)?,
        resident_pages: num(24)?,
    })
}

fn boot_time() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<f64>().ok())
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(value);
    g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // SAFETY: sysconf has no memory effects; it reads a constant of the system.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let Some(stat) = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|t| parse_stat(&t, ticks as f64))
        else {
            return Ok(());
        };
        let cpu = ConstCounter::new(stat.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let rss = (stat.resident_pages * page.max(1)) as f64;
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            rss,
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            stat.virtual_bytes as f64,
        )?;
        gauge(
            &mut encoder,
            "process_threads",
            "Number of OS threads in the process",
            stat.threads as f64,
        )?;
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            let open = dir.count() as f64;
            gauge(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors",
                open,
            )?;
        }
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable rlimit for the call.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors",
                lim.rlim_cur as f64,
            )?;
        }
        if let Some(boot) = boot_time() {
            gauge(
                &mut encoder,
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch in seconds",
                boot + stat.start_after_boot_seconds,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_the_command_name() {
        let line = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 12345 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(line, 100.0).unwrap();
        assert_eq!(s.cpu_seconds, 3.0);
        assert_eq!(s.threads, 7);
        assert_eq!(s.start_after_boot_seconds, 123.45);
        assert_eq!(s.virtual_bytes, 104_857_600);
        assert_eq!(s.resident_pages, 2560);
        assert_eq!(parse_stat("garbage", 100.0), None);
    }

    #[test]
    fn this_process_has_a_stat() {
        let t = std::fs::read_to_string("/proc/self/stat").unwrap();
        let s = parse_stat(&t, 100.0).unwrap();
        assert!(s.threads >= 1 && s.resident_pages > 0);
    }
}
