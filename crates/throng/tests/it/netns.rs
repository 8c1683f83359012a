//! A network "lab" for tests that need several hosts on one machine: each host is a Linux
//! network namespace (`ip netns`) with its own addresses, joined to the others by a veth pair
//! into a bridge, so a server, bench agents and a controller can run as if on separate machines
//! (own addresses, own port ranges, a link that can be cut) while every packet stays inside the
//! lab.
//!
//! # Layout
//!
//! A lab of hosts `a`, `b`, ... is, for a test process of pid P making its N-th lab:
//!
//! - a *switch* namespace `throng-lab-P-N-sw-10.X.Y` holding the bridge `br0` (no address: it
//!   only forwards) and one port `hI` per host (I = the host's index);
//! - per host, a namespace `throng-lab-P-N-h-<host>` holding `lo` (up, so 127.0.0.1 works
//!   inside) and `eth0`, the veth whose peer is `hI` in the switch. `eth0` carries the host's
//!   primary address 10.X.Y.(I+1)/24 and, with [`Lab::with_addresses`], `k` extra ones,
//!   10.X.Y.(100+I*k) to 10.X.Y.(100+I*k+k-1), usable as local source addresses.
//!
//! The veths are created directly in the lab's namespaces (`ip -n <host> link add eth0 type
//! veth peer name hI netns <switch>`): nothing is ever added to, or changed in, the root
//! namespace (no address, route, interface or sysctl). So the root namespace cannot reach a lab
//! address (its packets to 10.X.Y.Z would follow its own default route out of the machine:
//! never send any); to talk to a lab from the test process itself, make the socket inside a
//! host's namespace with [`Lab::in_ns`] or [`Lab::connect`] (a socket belongs to the namespace
//! of the thread that created it and can then be used from any thread).
//!
//! # Uniqueness and cleanup
//!
//! Names carry the pid and a process-wide counter, so parallel tests in one binary and two test
//! binaries at once never share a namespace. The /24 is chosen from a hash of pid and counter,
//! skipping every 10.X.Y in use by another lab (read from the switch namespaces' names, and
//! from this process's own table); labs are isolated from each other anyway, the distinct
//! subnets only make traces and `ip netns list` unambiguous. [`Drop`] kills any process still
//! inside the lab's namespaces (by pid, from `ip netns pids`) and deletes the namespaces, which
//! deletes the veths and the bridge with them; it also runs while a panicking test unwinds.
//! Creating a lab first deletes the `throng-lab-` namespaces of processes that are gone (pid no
//! longer alive, or this process's own pid reused from a dead one, recognised because this
//! process never made that lab), killing what still runs inside them.
//!
//! # Observations on this machine (Debian 12, kernel 6.x)
//!
//! - A new namespace gets the kernel's defaults, not the root namespace's settings:
//!   `ip_local_port_range` 32768-60999 (28,232 ephemeral ports per source address and
//!   destination), `somaxconn` 4096, `tcp_max_syn_backlog` 2048, `tcp_tw_reuse` 2, `rp_filter`
//!   0. None had to be changed for the lab to work; a test that needs other values may set them
//!   inside a host (`lab.run(host, &["sysctl", "-w", ...])`), never in the root namespace.
//! - The bridge has STP off, so a port forwards as soon as it is up (no 15 s forwarding delay),
//!   and the first packet to a host only waits for ARP (well under a millisecond). MTU is 1500
//!   on the veths (65536 on `lo`); the veths do GSO/GRO, so bulk TCP is not limited by it.
//! - [`Lab::link_down`] sets the switch-side port `hI` down: the host's `eth0` stays
//!   administratively up but loses carrier (`NO-CARRIER`, its route marked `linkdown`, still
//!   used), so the host's processes get no local error, as for a pulled cable: a connect from
//!   or to it gets no answer (with no ARP entry cached, a connect from it fails with "No route
//!   to host" after ~3 s of ARP retries; otherwise SYNs are retransmitted for minutes), and
//!   established connections stall until TCP gives up. Bound every wait with a timeout.
//! - `ip netns exec` execs the program (the child's pid is the program's, so `Child::kill`
//!   reaches it) after unsharing the mount namespace and remounting /sys for the namespace.
//!
//! # Shifted clocks (libfaketime)
//!
//! [`Lab::command_with_clock_offset`] runs a program with its wall clock shifted by a fixed
//! offset while time keeps running, through Debian's `faketime` package (libfaketime 0.9.10),
//! as:
//!
//! ```text
//! ip netns exec <ns> env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 \
//!     FAKETIME=+0.250 FAKETIME_DONT_FAKE_MONOTONIC=1 <program> <args>...
//! ```
//!
//! Measured with a Rust program comparing `SystemTime::now()` with a raw `clock_gettime`
//! system call (which libfaketime cannot intercept), inside a namespace: CLOCK_REALTIME is
//! +0.250 s (to the microsecond, and it advances at the real rate), CLOCK_MONOTONIC is
//! untouched, `thread::sleep`, `Condvar::wait_timeout` and `recv_timeout` last as asked.
//! Findings:
//!
//! - `FAKETIME_DONT_FAKE_MONOTONIC=1` is required for Rust programs. Without it libfaketime
//!   also "fakes" CLOCK_MONOTONIC and, for a `+` offset, makes it read like the shifted wall
//!   clock (about 1.8e9 s instead of the uptime). Rust's std computes futex deadlines as
//!   absolute CLOCK_MONOTONIC times from that value while the kernel uses the real monotonic
//!   clock, so every `Condvar::wait_timeout`, `park_timeout` or `recv_timeout` waits for
//!   decades: the program hangs (seen: the measuring program never returned from a 100 ms
//!   `wait_timeout`). The `faketime` wrapper's equivalent switch is `--exclude-monotonic`.
//! - `FAKETIME` is a relative offset in seconds with a `+` or `-` sign and a fraction written
//!   with a dot (`+0.250`, `-0.250`, `+0.001` all work to the microsecond); libfaketime parses
//!   it with `atof` in the C locale, so `+0,25` silently means +0. No `@` (that would start
//!   the clock at an absolute date), no `x`/`i` modifier (those change its rate or freeze it).
//! - The `faketime` wrapper (`faketime --exclude-monotonic -f +0.250 prog`) gives the same
//!   clocks but forks: the child `Command` is the wrapper, so killing it leaves the program
//!   running (re-parented to init), and it leaves `/dev/shm/faketime_shm_<pid>` and
//!   `sem.faketime_sem_<pid>` behind when killed. Setting the variables with `env` after `ip
//!   netns exec` keeps the program's pid the child's pid, and preloads nothing into `ip`.
//! - Only dynamically linked programs calling the C library's time functions are shifted
//!   (Rust's std on glibc, `date`, Python); a static or Go binary reading the vDSO is not. The
//!   offset is inherited by the program's children (the variables are in its environment).
//!   File timestamps from `stat` were not shifted.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Every lab namespace's name starts with this, then `<pid>-<counter>-`.
const PREFIX: &str = "throng-lab-";
/// Where `ip netns` keeps its namespace files.
const NETNS_DIR: &str = "/run/netns";
/// First address of the extra (source) addresses: 10.X.Y.100 and up.
const EXTRA_BASE: u16 = 100;

/// The number of the next lab this process makes.
static NEXT_LAB: AtomicU32 = AtomicU32::new(0);

/// This process's live labs: their tag (`<pid>-<counter>`) and subnet (X, Y).
static LIVE: Mutex<Vec<(String, (u8, u8))>> = Mutex::new(Vec::new());

/// One host of a lab.
struct Host {
    name: String,
    ns: String,
    /// Its port on the bridge, in the switch namespace.
    port: String,
    addrs: Vec<Ipv4Addr>,
}

/// A set of hosts (network namespaces) joined by a bridge, removed on drop. See the module
/// documentation.
pub struct Lab {
    tag: String,
    subnet: (u8, u8),
    switch: String,
    hosts: Vec<Host>,
}

impl Lab {
    /// A lab with one namespace per name in `hosts` (ASCII letters, digits, `_` or `-`, each
    /// at most 32 long, no duplicates), each with its primary address only. Panics if `ip` is
    /// missing, if not root, or if a step fails (whatever was made is removed again).
    pub fn new(hosts: &[&str]) -> Lab {
        Lab::with_addresses(hosts, 0)
    }

    /// As [`Lab::new`], each host also having `extra_per_host` extra addresses (10.X.Y.100 and
    /// up, host by host in order) it can bind as local source addresses.
    pub fn with_addresses(hosts: &[&str], extra_per_host: u8) -> Lab {
        preflight();
        assert!(
            !hosts.is_empty() && hosts.len() <= 99,
            "a lab has 1 to 99 hosts, not {}",
            hosts.len()
        );
        let mut seen = HashSet::new();
        for h in hosts {
            assert!(
                !h.is_empty()
                    && h.len() <= 32
                    && h.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "host name {h:?}: use 1 to 32 ASCII letters, digits, `_` or `-`"
            );
            assert!(seen.insert(*h), "host {h:?} named twice");
        }
        let k = u16::from(extra_per_host);
        assert!(
            EXTRA_BASE + hosts.len() as u16 * k <= 255,
            "{} hosts x {extra_per_host} extra addresses do not fit in 10.X.Y.100-254",
            hosts.len()
        );

        let pid = std::process::id();
        let (tag, subnet) = {
            let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
            let tag = format!("{pid}-{}", NEXT_LAB.fetch_add(1, Ordering::Relaxed));
            remove_stale(pid, &live);
            let subnet = pick_subnet(pid, &tag, &live);
            live.push((tag.clone(), subnet));
            (tag, subnet)
        };
        let (x, y) = subnet;
        let mut lab = Lab {
            switch: format!("{PREFIX}{tag}-sw-10.{x}.{y}"),
            tag,
            subnet,
            hosts: Vec::new(),
        };
        // From here on, a panic drops `lab`, which removes every namespace of its tag.
        ip(&["netns", "add", &lab.switch]);
        ip_batch(
            &lab.switch,
            "link set lo up\nlink add br0 type bridge\nlink set br0 up\n",
        );
        for (i, name) in hosts.iter().enumerate() {
            let ns = format!("{PREFIX}{}-h-{name}", lab.tag);
            let port = format!("h{i}");
            let mut addrs = vec![Ipv4Addr::new(10, x, y, i as u8 + 1)];
            let first = EXTRA_BASE + i as u16 * k;
            addrs.extend((first..first + k).map(|z| Ipv4Addr::new(10, x, y, z as u8)));
            ip(&["netns", "add", &ns]);
            lab.hosts.push(Host {
                name: name.to_string(),
                ns: ns.clone(),
                port: port.clone(),
                addrs: addrs.clone(),
            });
            let mut script = format!(
                "link set lo up\nlink add eth0 type veth peer name {port} netns {}\n",
                lab.switch
            );
            for a in &addrs {
                script.push_str(&format!("address add {a}/24 dev eth0\n"));
            }
            script.push_str("link set eth0 up\n");
            ip_batch(&ns, &script);
            ip_batch(&lab.switch, &format!("link set {port} master br0 up\n"));
        }
        lab
    }

    fn host(&self, host: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == host)
            .unwrap_or_else(|| panic!("no host {host:?} in this lab"))
    }

    /// The host's primary address (10.X.Y.(index+1)).
    pub fn addr(&self, host: &str) -> Ipv4Addr {
        self.host(host).addrs[0]
    }

    /// All the host's addresses: the primary one first, then the extra ones.
    pub fn addrs(&self, host: &str) -> Vec<Ipv4Addr> {
        self.host(host).addrs.clone()
    }

    /// The name of the host's network namespace (for `ip netns exec`, `ip -n`).
    pub fn ns(&self, host: &str) -> &str {
        &self.host(host).ns
    }

    /// The name of the switch namespace, which holds the bridge `br0` and the hosts' ports.
    pub fn switch_ns(&self) -> &str {
        &self.switch
    }

    /// The lab's subnet, 10.X.Y.0 (a /24).
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet.0, self.subnet.1, 0)
    }

    /// `ip netns exec <ns> <program>`: the caller adds arguments, environment and standard
    /// streams, and spawns it. The child's pid is the program's.
    pub fn command(&self, host: &str, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.ns(host)]).arg(program);
        cmd
    }

    /// As [`Lab::command`], with the program's wall clock (CLOCK_REALTIME) shifted by
    /// `offset_ms` (positive: ahead) while it keeps running at the real rate, and
    /// CLOCK_MONOTONIC left alone; through libfaketime, as the module documentation describes.
    /// Panics if libfaketime is not installed (`apt-get install faketime`,
    /// scripts/install-deps.sh) or if `program` contains `=` (it would be taken for a variable
    /// by `env`).
    pub fn command_with_clock_offset(
        &self,
        host: &str,
        program: impl AsRef<OsStr>,
        offset_ms: i64,
    ) -> Command {
        let program = program.as_ref();
        assert!(
            !program.to_string_lossy().contains('='),
            "program {program:?} contains `=`"
        );
        let mut cmd = self.command(host, "env");
        cmd.arg(format!("LD_PRELOAD={}", libfaketime()))
            .arg(format!("FAKETIME={}", faketime_offset(offset_ms)))
            .arg("FAKETIME_DONT_FAKE_MONOTONIC=1")
            .arg(program);
        cmd
    }

    /// Runs `argv` in the host's namespace to its end (standard input empty) and returns its
    /// status and output; for short commands (`curl`, `ip`, `date`, `sysctl`). Panics if it
    /// cannot be started.
    pub fn run(&self, host: &str, argv: &[&str]) -> Output {
        let (program, args) = argv.split_first().expect("a program to run");
        self.command(host, program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("ip netns exec {} {argv:?}: {e}", self.ns(host)))
    }

    /// Runs `f` on a new thread that has entered the host's network namespace, and returns
    /// its result (a panic in `f` is passed on). Sockets made by `f` belong to the namespace
    /// and can be used from any thread afterwards: this is how the test process itself (in the
    /// root namespace) listens on or connects to lab addresses.
    pub fn in_ns<T: Send>(&self, host: &str, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("{NETNS_DIR}/{}", self.ns(host));
        let file = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        std::thread::scope(|s| {
            let worker = s.spawn(move || {
                // SAFETY: setns(2) with an open descriptor of a network-namespace file; it
                // changes the network namespace of this thread only, which ends with `f`.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns {path}: {}", io::Error::last_os_error());
                f()
            });
            worker
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// A TCP connection to `to` made from inside `host` (within `timeout`).
    pub fn connect(&self, host: &str, to: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        self.in_ns(host, || TcpStream::connect_timeout(&to, timeout))
    }

    /// A TCP listener on `addr` inside `host` (port 0: any free port).
    pub fn listen(&self, host: &str, addr: SocketAddr) -> io::Result<TcpListener> {
        self.in_ns(host, || TcpListener::bind(addr))
    }

    /// Whether a TCP connection from `host` to `to` succeeds within `timeout`: tries every
    /// 100 ms, each attempt bounded to 1 s (and to what is left of `timeout`).
    pub fn wait_tcp(&self, host: &str, to: SocketAddr, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            if self
                .connect(host, to, left.min(Duration::from_secs(1)))
                .is_ok()
            {
                return true;
            }
            std::thread::sleep(
                Duration::from_millis(100).min(deadline.saturating_duration_since(Instant::now())),
            );
        }
    }

    /// Cuts the host off the network: its port on the bridge goes down, its own `eth0` stays
    /// up without carrier, its processes keep running and get no local error; packets to and
    /// from it are lost.
    pub fn link_down(&self, host: &str) {
        ip_batch(
            &self.switch,
            &format!("link set {} down\n", self.host(host).port),
        );
    }

    /// Puts the host back on the network after [`Lab::link_down`].
    pub fn link_up(&self, host: &str) {
        ip_batch(
            &self.switch,
            &format!("link set {} up\n", self.host(host).port),
        );
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Every namespace of this tag, including ones a failed constructor left half made.
        remove_lab(&self.tag);
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(t, _)| *t != self.tag);
    }
}

/// The names of every network namespace `ip netns` knows (`ip netns list`, without the ids).
pub fn namespaces() -> Vec<String> {
    match std::fs::read_dir(NETNS_DIR) {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{NETNS_DIR}: {e}"),
    }
}

/// Panics with a clear message unless `ip` runs and this process is root.
fn preflight() {
    // SAFETY: geteuid(2) has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the network lab (crates/throng/tests/it/netns.rs) makes network namespaces: run the \
         tests as root"
    );
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("`ip -V` failed: {o:?}"),
        Err(e) => panic!(
            "the network lab needs iproute2's `ip` (apt-get install iproute2, \
             scripts/install-deps.sh): {e}"
        ),
    }
}

/// Runs `ip <args>`, panicking with its error output if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("ip {args:?}: {e}"));
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs the `ip` commands of `script` (one a line, without the `ip`) in namespace `ns`.
fn ip_batch(ns: &str, script: &str) {
    use std::io::Write as _;
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("ip -n {ns} -batch -: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "ip -n {ns} -batch - <<{script:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Kills what runs in each namespace whose name starts with `throng-lab-<tag>-`, and deletes
/// them (best effort: nothing here panics, it runs during unwinding).
fn remove_lab(tag: &str) {
    let prefix = format!("{PREFIX}{tag}-");
    let mut names: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    // Hosts first, the switch last (its name sorts after "-h-").
    names.sort();
    for name in &names {
        kill_inside(name);
    }
    for name in &names {
        let _ = Command::new("ip")
            .args(["netns", "delete", name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// SIGKILLs, by pid, every process in namespace `ns` (`ip netns pids`), and waits (up to
/// 2 s) for them to be gone from it.
fn kill_inside(ns: &str) {
    let pids = || -> Vec<i32> {
        Command::new("ip")
            .args(["netns", "pids", ns])
            .stderr(Stdio::null())
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let start = Instant::now();
    loop {
        let left = pids();
        if left.is_empty() || start.elapsed() > Duration::from_secs(2) {
            return;
        }
        for pid in left {
            // SAFETY: kill(2) of a process inside one of this lab's namespaces.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes the labs of dead processes: namespaces `throng-lab-<pid>-<n>-...` whose pid is not
/// alive, or is this process's own but whose tag is not among its live labs (a dead process
/// had the same pid). Called with `live` locked, so this process's labs being made are listed.
fn remove_stale(pid: u32, live: &[(String, (u8, u8))]) {
    let mut stale = HashSet::new();
    for name in namespaces() {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let mut parts = rest.splitn(3, '-');
        let (Some(p), Some(n)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(owner) = p.parse::<u32>() else {
            continue;
        };
        let tag = format!("{p}-{n}");
        let dead = if owner == pid {
            !live.iter().any(|(t, _)| *t == tag)
        } else {
            !std::path::Path::new(&format!("/proc/{owner}")).exists()
        };
        if dead {
            stale.insert(tag);
        }
    }
    for tag in stale {
        eprintln!("netns lab: removing the namespaces of a dead process's lab {PREFIX}{tag}-*");
        remove_lab(&tag);
    }
}

/// A subnet 10.X.Y for lab `tag` of process `pid`: from a hash of both, the first one neither
/// another lab's switch namespace (named `...-sw-10.X.Y`) nor a live lab of this process uses.
fn pick_subnet(pid: u32, tag: &str, live: &[(String, (u8, u8))]) -> (u8, u8) {
    let mut used: HashSet<(u8, u8)> = live.iter().map(|(_, s)| *s).collect();
    for name in namespaces() {
        if !name.starts_with(PREFIX) {
            continue;
        }
        let Some((_, net)) = name.rsplit_once("-sw-10.") else {
            continue;
        };
        if let Some((x, y)) = net.split_once('.') {
            if let (Ok(x), Ok(y)) = (x.parse(), y.parse()) {
                used.insert((x, y));
            }
        }
    }
    // FNV-1a of "pid/tag": neighbouring pids and counters land far apart.
    let mut h: u32 = 0x811c_9dc5;
    for b in format!("{pid}/{tag}").bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    // X in 1..=254, Y in 0..=255.
    const SPACE: u32 = 254 * 256;
    (0..SPACE)
        .map(|i| (h.wrapping_add(i)) % SPACE)
        .map(|v| ((v / 256 + 1) as u8, (v % 256) as u8))
        .find(|s| !used.contains(s))
        .expect("a free 10.X.Y.0/24")
}

/// The path of libfaketime.so.1 (Debian's `faketime` package, or a /usr/local build).
fn libfaketime() -> String {
    let candidates = [
        format!(
            "/usr/lib/{}-linux-gnu/faketime/libfaketime.so.1",
            std::env::consts::ARCH
        ),
        "/usr/lib/faketime/libfaketime.so.1".to_owned(),
        "/usr/local/lib/faketime/libfaketime.so.1".to_owned(),
    ];
    let found = candidates
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    found.unwrap_or_else(|| {
        panic!("libfaketime.so.1 not found: apt-get install faketime (scripts/install-deps.sh)")
    })
}

/// `FAKETIME`'s relative offset for `ms` milliseconds: `+0.250`, `-1.005` (sign, seconds, a
/// dot, three decimals).
fn faketime_offset(ms: i64) -> String {
    let sign = if ms < 0 { '-' } else { '+' };
    let abs = ms.unsigned_abs();
    format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
}

/// The wall clock as seconds since the epoch.
fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn faketime_offsets_are_written_with_a_dot() {
    assert_eq!(faketime_offset(250), "+0.250");
    assert_eq!(faketime_offset(0), "+0.000");
    assert_eq!(faketime_offset(-250), "-0.250");
    assert_eq!(faketime_offset(-1005), "-1.005");
    assert_eq!(faketime_offset(12_345), "+12.345");
}

#[test]
fn lab_hosts_reach_each_other_and_clean_up() {
    use crate::support::{fresh_state_dir, Serve};
    let started = Instant::now();
    let lab = Lab::with_addresses(&["a", "b", "c"], 3);
    let mine: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|h| lab.ns(h).to_owned())
        .chain([lab.switch_ns().to_owned()])
        .collect();
    let listed = namespaces();
    for ns in &mine {
        assert!(listed.contains(ns), "{ns} not in {listed:?}");
    }
    let net = lab.network().octets();
    assert_eq!(net[0], 10);
    assert_eq!(
        lab.addrs("b"),
        [2, 103, 104, 105]
            .map(|z| Ipv4Addr::new(10, net[1], net[2], z))
            .to_vec()
    );
    assert_eq!(lab.addr("b"), lab.addrs("b")[0]);
    // A second lab of the same process: its own names and subnet.
    let other = Lab::new(&["a"]);
    assert_ne!(other.network(), lab.network());
    assert_ne!(other.ns("a"), lab.ns("a"));
    assert_eq!(
        other.addrs("a"),
        [other.network().octets()]
            .map(|[_, x, y, _]| Ipv4Addr::new(10, x, y, 1))
            .to_vec()
    );
    let other_ns = other.ns("a").to_owned();
    drop(other);
    assert!(!namespaces().contains(&other_ns));

    // `lo` is up in a host: 127.0.0.1 works inside.
    let local = lab.listen("c", "127.0.0.1:0".parse().unwrap()).unwrap();
    let local_addr = local.local_addr().unwrap();
    assert!(lab.connect("c", local_addr, Duration::from_secs(5)).is_ok());
    drop(local);

    // A server in host a, on its lab address.
    let a = lab.addr("a");
    let mut cmd = lab.command("a", env!("CARGO_BIN_EXE_throng"));
    cmd.args(["serve", "--listen", &format!("{a}:0")])
        .env("THRONG_STATE_DIR", fresh_state_dir());
    let server = Serve::spawn_cmd(cmd);
    assert_eq!(server.addr.ip(), a);
    let url = format!("http://{}/status-json.xsl", server.addr);

    // Host b fetches it, from its primary and from an extra address.
    let out = lab.run("b", &["curl", "-sS", "--max-time", "10", &url]);
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && body.contains("icestats"), "{out:?}");
    let extra = lab.addrs("b")[2].to_string();
    let out = lab.run(
        "b",
        &[
            "curl",
            "-sS",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-w",
            "%{local_ip}",
            "--interface",
            &extra,
            &url,
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), extra);

    // Host c reaches a, not with its link down, and again once it is back up.
    assert!(lab.wait_tcp("c", server.addr, Duration::from_secs(10)));
    lab.link_down("c");
    let cut = Instant::now();
    assert!(
        !lab.wait_tcp("c", server.addr, Duration::from_secs(2)),
        "c reached a with its link down"
    );
    assert!(
        cut.elapsed() < Duration::from_secs(4),
        "{:?}",
        cut.elapsed()
    );
    lab.link_up("c");
    assert!(
        lab.wait_tcp("c", server.addr, Duration::from_secs(10)),
        "c cannot reach a once its link is up again"
    );

    // Clocks shifted by +250 ms in host c: `date`, then a Rust server (its runtime must not
    // hang on a faked monotonic clock) answering from the lab.
    let mut best: Option<(f64, f64)> = None; // (offset estimate, uncertainty)
    for _ in 0..5 {
        let before = now_s();
        let out = lab
            .command_with_clock_offset("c", "date", 250)
            .arg("+%s.%N")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let after = now_s();
        assert!(out.status.success(), "{out:?}");
        let shown: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        // The real time `date` read lies in [before, after].
        assert!(
            shown - before >= 0.2 && shown - after <= 0.3,
            "date in c shows {shown}, real time {before}..{after}"
        );
        let estimate = (shown - (before + after) / 2.0, (after - before) / 2.0);
        if best.is_none_or(|b| estimate.1 < b.1) {
            best = Some(estimate);
        }
        if estimate.1 < 0.02 {
            break;
        }
    }
    let (offset, uncertainty) = best.unwrap();
    eprintln!("netns lab: date in c is {offset:.4} s ahead (+/- {uncertainty:.4} s)");
    assert!(
        (offset - 0.25).abs() <= 0.05 + uncertainty,
        "clock offset {offset} (+/- {uncertainty}) s, wanted 0.25 s"
    );
    let c = lab.addr("c");
    let mut cmd = lab.command_with_clock_offset("c", env!("CARGO_BIN_EXE_throng"), 250);
    cmd.args(["serve", "--listen", &format!("{c}:0")])
        .env("THRONG_STATE_DIR", fresh_state_dir());
    let shifted = Serve::spawn_cmd(cmd);
    let out = lab.run(
        "b",
        &[
            "curl",
            "-sS",
            "--max-time",
            "10",
            &format!("http://{}/status-json.xsl", shifted.addr),
        ],
    );
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("icestats"),
        "{out:?}"
    );
    drop(shifted);
    drop(server);

    // Dropping the lab removes its namespaces.
    drop(lab);
    let listed = namespaces();
    for ns in &mine {
        assert!(!listed.contains(ns), "{ns} still there: {listed:?}");
    }
    eprintln!("netns lab: smoke test took {:?}", started.elapsed());
}
