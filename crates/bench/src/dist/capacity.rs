//! What an agent can hold, told before any load starts: its open-file limit (per process, after
//! raising the soft limit to the hard one), how many worker processes it may run, its local
//! source addresses and ephemeral ports, its cores, and its own CPU per listener-second from a
//! short self-test (ICY listeners of an in-process test server on loopback). The controller
//! splits every group by capacity (the agents' weights) and refuses, before any listener starts,
//! a plan an agent cannot hold, naming the agent and the shortfall.

use crate::mode::Mode;
use crate::profile::segment::ExecutionSegment;
use crate::profile::slice::{Judge, RunClock, Slice};
use crate::profile::stages::Schedule;
use crate::run::local::HostShare;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Files a worker process keeps for itself (its pipes, poller, libraries) (files).
pub const FD_RESERVE: u64 = 100;

/// Sockets one worker process opens at most (the default `max-per-worker`).
pub const PER_WORKER: u64 = 15_000;

/// Share of the agent's cores the plan may use (the rest for its own work and the kernel).
pub const CPU_SHARE: f64 = 0.8;

/// How much a listener of each mode costs the bench, in ICY listeners (for the CPU part of a
/// capacity; measured in docs/BENCHMARKS.md): WebRTC viewers decrypt SRTP and run ICE and DTLS.
pub fn mode_weight(mode: Mode) -> f64 {
    match mode {
        Mode::Icy | Mode::Hls => 1.0,
        Mode::Events => 0.5,
        Mode::Whep => 10.0,
    }
}

/// An agent's capacity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// The agent's host name.
    pub host: String,
    /// Its bench version.
    pub version: String,
    /// Its cores.
    pub cores: u32,
    /// Its open-file limit per process (files).
    pub fd_limit: u64,
    /// Worker processes it may run per group.
    pub max_workers: u32,
    /// Local source addresses of its `--bind-range` (0: none, the kernel's choice).
    pub bind_addresses: u32,
    /// Ephemeral ports per source address (`/proc/sys/net/ipv4/ip_local_port_range`).
    pub local_ports: u32,
    /// Its CPU per ICY listener-second, from the self-test (µs); `None` when not measured.
    pub cpu_us_per_listener_second: Option<f64>,
    /// Listeners it can hold: the least of its files, ports and CPU (listeners).
    pub listeners: u32,
    /// What bounds it (`open files`, `local ports`, `CPU`).
    pub limited_by: String,
}

/// Raises this process's soft open-file limit to its hard limit; returns the soft limit then
/// (files).
pub fn raise_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 1024;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                r.rlim_cur = r.rlim_max;
            }
        }
    }
    r.rlim_cur
}

/// Ephemeral ports per source address.
fn local_ports() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|x| x.parse::<u32>().ok());
            let (a, b) = (it.next()??, it.next()??);
            Some(b.saturating_sub(a) + 1)
        })
        .unwrap_or(28_232)
}

/// The bench's CPU per ICY listener-second on this host (µs): 300 listeners of a 64 kbit/s
/// in-process test server on loopback for 3 s, the engine's thread CPU over their listening
/// time. `None` when the test could not run.
pub fn self_test() -> Option<f64> {
    let srv = crate::testserver::TestServer::start(
        "127.0.0.1:0".parse().ok()?,
        crate::testserver::TestServerConfig::default(),
    )
    .ok()?;
    let n = 300;
    let slice = Slice {
        urls: vec![format!("http://{}/self-test.mp3", srv.addr())],
        schedule: Schedule::ramp_hold(n, 3000.0, 3.0),
        judge: Judge::default(),
        start_unix_ms: crate::profile::slice::unix_us() / 1000,
        thread_cpu: true,
        bind_range: "none".into(),
        ..Slice::default()
    };
    let engine = crate::icy::engine::Engine::new(
        crate::icy::engine::IcySpec {
            slice,
            ..Default::default()
        },
        Arc::new(RunClock::new(0)),
    )
    .ok()?;
    let mut last = None;
    engine
        .run(&AtomicBool::new(false), |t| {
            last = Some(t.snap.clone());
            true
        })
        .ok()?;
    let s = last?;
    let listen_s = s.listen_us as f64 / 1e6;
    (listen_s > 100.0).then(|| s.cpu_us as f64 / listen_s)
}

/// The capacity of this host with `max_workers` worker processes and `bind_range`'s
/// addresses (the self-test's figure given, or `None`).
pub fn measure(max_workers: u32, bind_range: &str, cpu: Option<f64>) -> Capacity {
    let fd_limit = raise_nofile();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get() as u32);
    let bind_addresses = crate::net::connect::parse_bind_range(bind_range)
        .map(|v| v.len() as u32)
        .unwrap_or(0);
    let ports = local_ports();
    let per_process = fd_limit.saturating_sub(FD_RESERVE).min(PER_WORKER);
    let by_files = per_process * u64::from(max_workers.max(1));
    let by_ports = u64::from(ports) * u64::from(bind_addresses.max(1));
    let by_cpu = cpu
        .filter(|c| *c > 0.0)
        .map(|c| (f64::from(cores) * 1e6 * CPU_SHARE / c) as u64);
    let mut limits = vec![(by_files, "open files"), (by_ports, "local ports")];
    if let Some(c) = by_cpu {
        limits.push((c, "CPU"));
    }
    let (listeners, limited_by) = limits
        .into_iter()
        .min_by_key(|l| l.0)
        .unwrap_or((0, "unknown"));
    Capacity {
        host: crate::observe::meta::host_name(),
        version: env!("CARGO_PKG_VERSION").into(),
        cores,
        fd_limit,
        max_workers,
        bind_addresses,
        local_ports: ports,
        cpu_us_per_listener_second: cpu,
        listeners: listeners.min(u64::from(u32::MAX)) as u32,
        limited_by: limited_by.into(),
    }
}

/// What `share` asks of a host: listeners at the groups' peaks, and those weighted by their
/// mode's CPU cost (see [`mode_weight`]); the most any group puts on one worker process.
pub fn load_of(share: &HostShare) -> (u64, f64, u64) {
    let mut listeners = 0u64;
    let mut weighted = 0.0;
    let mut per_process = 0u64;
    for g in &share.groups {
        let n = g.segment.ids(g.plan.schedule.peak()).len() as u64;
        listeners += n;
        weighted += n as f64 * mode_weight(g.plan.mode);
        let workers =
            u64::from(crate::run::local::workers_for(&g.plan, n as u32, share.max_workers).max(1));
        per_process = per_process.max(n.div_ceil(workers));
    }
    (listeners, weighted, per_process)
}

/// Whether an agent of capacity `c` can hold `share`; the shortfall in words when not.
pub fn check(name: &str, c: &Capacity, share: &HostShare) -> Result<(), String> {
    let (listeners, weighted, per_process) = load_of(share);
    let per_file = c.fd_limit.saturating_sub(FD_RESERVE);
    if per_process > per_file {
        return Err(format!(
            "agent {name} ({}) can hold {} listeners per process (open-file limit {} less {FD_RESERVE}) × {} worker processes = {}; the plan gives it {listeners} ({per_process} per process)",
            c.host,
            per_file,
            c.fd_limit,
            c.max_workers,
            per_file * u64::from(c.max_workers.max(1)),
        ));
    }
    let ports = u64::from(c.local_ports) * u64::from(c.bind_addresses.max(1));
    if listeners > ports {
        return Err(format!(
            "agent {name} ({}) has {ports} local ports ({} per address × {} addresses); the plan gives it {listeners} listeners",
            c.host,
            c.local_ports,
            c.bind_addresses.max(1)
        ));
    }
    if let Some(cpu) = c.cpu_us_per_listener_second.filter(|v| *v > 0.0) {
        let can = f64::from(c.cores) * 1e6 * CPU_SHARE / cpu;
        if weighted > can {
            return Err(format!(
                "agent {name} ({}) can verify about {:.0} listeners in real time ({} cores at {cpu:.1} µs per listener-second, {:.0} % of them); the plan gives it the work of {weighted:.0}",
                c.host,
                can,
                c.cores,
                CPU_SHARE * 100.0
            ));
        }
    }
    Ok(())
}

/// The part of `share` an agent at `index` of `weights` holds (its segment of every group).
pub fn split(share: &HostShare, weights: &[u32], index: usize) -> HostShare {
    let mut out = share.clone();
    for g in &mut out.groups {
        g.segment = ExecutionSegment::whole().then(crate::profile::segment::Stripe {
            weights: weights.to_vec(),
            index: index as u32,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::local::GroupShare;
    use crate::scenario::plan::GroupPlan;

    fn share(n: u32) -> HostShare {
        let profile = crate::profile::Profile {
            listeners: n,
            ..Default::default()
        };
        HostShare {
            groups: vec![GroupShare {
                plan: GroupPlan::from_profile(
                    "icy",
                    Mode::Icy,
                    vec!["http://h/x".into()],
                    &profile,
                ),
                segment: ExecutionSegment::whole(),
            }],
            start_unix_ms: 0,
            clock_offset_us: 0,
            bursts: None,
            max_workers: Some(1),
        }
    }

    #[test]
    fn a_plan_over_the_open_file_limit_is_refused_naming_the_agent() {
        let c = Capacity {
            host: "load-b".into(),
            fd_limit: 1000,
            max_workers: 1,
            local_ports: 28_000,
            cores: 2,
            ..Capacity::default()
        };
        let whole = share(3000);
        let mine = split(&whole, &[1, 1, 1], 1);
        assert_eq!(load_of(&mine).0, 1000);
        let e = check("B", &c, &mine).unwrap_err();
        assert!(
            e.starts_with("agent B (load-b) can hold 900 listeners per process"),
            "{e}"
        );
        assert!(e.contains("the plan gives it 1000"), "{e}");
        assert!(check("B", &c, &split(&share(2000), &[1, 1, 1], 1)).is_ok());
        // CPU: 2 cores at 2 µs per listener-second verify 800,000.
        let c = Capacity {
            fd_limit: 1 << 20,
            cpu_us_per_listener_second: Some(2.0),
            ..c
        };
        assert!(check("B", &c, &mine).is_ok());
    }

    #[test]
    fn this_host_has_a_capacity() {
        let c = measure(4, "127.0.0.2-127.0.0.3", Some(3.0));
        assert!(c.fd_limit >= 1024 && c.cores >= 1);
        assert_eq!(c.bind_addresses, 2);
        assert!(c.listeners > 0, "{c:?}");
    }
}
