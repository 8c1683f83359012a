//! Who may connect: trusted proxies (`paths.x-forwarded-for`), and the `paths.deny-ip`,
//! `paths.allow-ip` and `paths.deny-agents` files, applied by `connection.rs` to every request
//! right after its head is read, before any handler.
//!
//! - **Client address.** When the TCP peer is inside a trusted range, the client address is the
//!   right-most `X-Forwarded-For` entry that is not a trusted proxy
//!   (`throng_proto::forwarded`); it replaces the peer everywhere downstream (access log,
//!   `listclients`, these filters, a source's IP). Its port stays the peer's.
//! - **IP files** (Icecast 2.4.4 `connection.c:accept_ip_address`): one entry per line, `#`
//!   starts a comment. An entry is an address (`192.0.2.7`), a CIDR range (`192.0.2.0/24`,
//!   `2001:db8::/32`) or a glob on the address text (`192.168.1.*`, as Icecast-KH). A denied
//!   address is refused; with an allow file, only listed addresses are admitted (an empty allow
//!   file admits nobody, as 2.4.4).
//! - **Agent file** (Icecast-KH `deny-agents`): one glob per line (`*`, `?`, `[...]`), matched
//!   against the whole `User-Agent`, case-insensitively; `*bot*` matches any agent containing
//!   `bot`. Requests without `User-Agent` are not matched.
//! - **Reloading.** Each file is checked at most once per second and re-read when its
//!   modification time or size changed. A file that cannot be read keeps the previous contents
//!   (none at start: no filtering), with a warning, as Icecast 2.4.4 `recheck_ip_file`.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use throng_proto::http::RequestHead;

use crate::config::{parse_cidr, Paths};

/// Least time between two checks of a filter file for changes.
pub const RECHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Why a request is refused (each is answered `403 Forbidden` and logged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The client address is listed in the `deny-ip` file.
    #[error("address {0} is denied (deny-ip)")]
    DeniedIp(IpAddr),
    /// An `allow-ip` file is in force and does not list the client address.
    #[error("address {0} is not in allow-ip")]
    NotAllowed(IpAddr),
    /// The `User-Agent` matches a pattern of the `deny-agents` file.
    #[error("user agent {agent:?} is denied by pattern {pattern:?} (deny-agents)")]
    DeniedAgent {
        /// The request's `User-Agent`.
        agent: String,
        /// The matching pattern.
        pattern: String,
    },
}

/// Whether the range `net/len` contains `ip` (both canonical: IPv4-mapped IPv6 counts as
/// IPv4). Addresses of the other family never match.
pub fn cidr_contains((net, len): (IpAddr, u8), ip: IpAddr) -> bool {
    match (net.to_canonical(), ip.to_canonical()) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// One entry of an IP file.
#[derive(Debug, Clone)]
enum IpEntry {
    /// An address or CIDR range.
    Range(IpAddr, u8),
    /// A glob on the address's text form.
    Glob(glob::Pattern),
}

/// The parsed contents of a `deny-ip` or `allow-ip` file.
#[derive(Debug, Clone, Default)]
pub struct IpList {
    entries: Vec<IpEntry>,
}

/// Splits a filter file into its entries: trimmed lines, `#` comments and blank lines removed.
fn entries(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
}

impl IpList {
    /// Parses a file's text; returns the list and the lines that are neither an address, a
    /// CIDR range nor a glob (skipped).
    pub fn parse(text: &str) -> (IpList, Vec<String>) {
        let mut list = IpList::default();
        let mut bad = Vec::new();
        for e in entries(text) {
            if let Some((ip, len)) = parse_cidr(e) {
                list.entries.push(IpEntry::Range(ip.to_canonical(), len));
            } else if let Some(p) = e
                .contains(['*', '?', '['])
                .then(|| glob::Pattern::new(e).ok())
                .flatten()
            {
                list.entries.push(IpEntry::Glob(p));
            } else {
                bad.push(e.to_owned());
            }
        }
        (list, bad)
    }

    /// Whether `ip` is listed.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let text = ip.to_string();
        self.entries.iter().any(|e| match e {
            IpEntry::Range(net, len) => cidr_contains((*net, *len), ip),
            IpEntry::Glob(p) => p.matches(&text),
        })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The parsed contents of a `deny-agents` file.
#[derive(Debug, Clone, Default)]
pub struct AgentList {
    patterns: Vec<glob::Pattern>,
}

impl AgentList {
    /// Parses a file's text; returns the list and the lines that are not valid globs (skipped).
    pub fn parse(text: &str) -> (AgentList, Vec<String>) {
        let mut list = AgentList::default();
        let mut bad = Vec::new();
        for e in entries(text) {
            match glob::Pattern::new(e) {
                Ok(p) => list.patterns.push(p),
                Err(_) => bad.push(e.to_owned()),
            }
        }
        (list, bad)
    }

    /// The first pattern matching the whole `agent`, ignoring case.
    pub fn matching(&self, agent: &str) -> Option<&str> {
        let opts = glob::MatchOptions {
            case_sensitive: false,
            require_literal_separator: false,
            require_literal_leading_dot: false,
        };
        self.patterns
            .iter()
            .find(|p| p.matches_with(agent, opts))
            .map(|p| p.as_str())
    }

    /// Number of patterns.
    pub fn len(&self) -> usize {
        self.patterns.len()
    }
}

/// What a watched file looked like when last read.
#[derive(Debug, Default)]
struct WatchState {
    checked: Option<Instant>,
    /// Modification time and size of the contents in force.
    stamp: Option<(SystemTime, u64)>,
    /// The last check failed (warned once until it succeeds again).
    failing: bool,
}

/// A filter file re-read when it changes (checked at most every [`RECHECK_INTERVAL`]).
struct Watched<T> {
    path: PathBuf,
    /// `deny-ip`, `allow-ip` or `deny-agents`, for log lines.
    what: &'static str,
    parse: fn(&str) -> (T, Vec<String>),
    count: fn(&T) -> usize,
    current: ArcSwapOption<T>,
    state: Mutex<WatchState>,
}

impl<T> std::fmt::Debug for Watched<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("what", &self.what)
            .field("path", &self.path)
            .finish()
    }
}

impl<T> Watched<T> {
    fn new(
        path: &Path,
        what: &'static str,
        parse: fn(&str) -> (T, Vec<String>),
        count: fn(&T) -> usize,
    ) -> Watched<T> {
        let w = Watched {
            path: path.to_owned(),
            what,
            parse,
            count,
            current: ArcSwapOption::empty(),
            state: Mutex::new(WatchState::default()),
        };
        w.refresh(&mut w.state.lock(), Instant::now());
        w
    }

    /// The contents in force, after re-reading the file if it is due for a check and changed.
    /// Never waits: while another task re-reads the file, the previous contents are used.
    fn get(&self) -> Option<Arc<T>> {
        if let Some(mut st) = self.state.try_lock() {
            let now = Instant::now();
            if st
                .checked
                .is_none_or(|t| now.duration_since(t) >= RECHECK_INTERVAL)
            {
                self.refresh(&mut st, now);
            }
        }
        self.current.load_full()
    }

    fn refresh(&self, st: &mut WatchState, now: Instant) {
        st.checked = Some(now);
        let read = std::fs::metadata(&self.path).and_then(|m| {
            let stamp = (m.modified()?, m.len());
            if st.stamp == Some(stamp) && !st.failing {
                return Ok(None);
            }
            Ok(Some((stamp, std::fs::read_to_string(&self.path)?)))
        });
        match read {
            Ok(None) => {}
            Ok(Some((stamp, text))) => {
                let (value, bad) = (self.parse)(&text);
                for line in &bad {
                    tracing::warn!(file = %self.path.display(), "{}: ignoring invalid entry {line:?}", self.what);
                }
                tracing::info!(
                    file = %self.path.display(),
                    entries = (self.count)(&value),
                    "{} loaded",
                    self.what
                );
                self.current.store(Some(Arc::new(value)));
                st.stamp = Some(stamp);
                st.failing = false;
            }
            Err(e) => {
                if !st.failing {
                    let kept = if self.current.load().is_some() {
                        "keeping the previous contents"
                    } else {
                        "not filtering"
                    };
                    tracing::warn!(file = %self.path.display(), "{}: cannot read: {e}; {kept}", self.what);
                }
                st.failing = true;
            }
        }
    }
}

/// The access filters of a server (see the module documentation).
#[derive(Debug, Default)]
pub struct Filters {
    trusted: Vec<(IpAddr, u8)>,
    /// `paths.proxy-protocol-from`: peers whose PROXY protocol header is believed.
    proxy_protocol: Vec<(IpAddr, u8)>,
    deny_ip: Option<Watched<IpList>>,
    allow_ip: Option<Watched<IpList>>,
    deny_agents: Option<Watched<AgentList>>,
}

impl Filters {
    /// Filters from `[paths]`; the files are read now (a missing file is logged and filters
    /// nothing until it appears). Entries of `x-forwarded-for` that are not addresses or CIDR
    /// ranges are skipped (the configuration validation already rejects them).
    pub fn new(paths: &Paths) -> Filters {
        Filters {
            trusted: paths
                .x_forwarded_for
                .iter()
                .filter_map(|c| parse_cidr(c))
                .collect(),
            proxy_protocol: paths
                .proxy_protocol_from
                .iter()
                .filter_map(|c| parse_cidr(c))
                .collect(),
            deny_ip: paths
                .deny_ip
                .as_deref()
                .map(|p| Watched::new(p, "deny-ip", IpList::parse, IpList::len)),
            allow_ip: paths
                .allow_ip
                .as_deref()
                .map(|p| Watched::new(p, "allow-ip", IpList::parse, IpList::len)),
            deny_agents: paths
                .deny_agents
                .as_deref()
                .map(|p| Watched::new(p, "deny-agents", AgentList::parse, AgentList::len)),
        }
    }

    /// Whether a connection from `ip` may start with a PROXY protocol header
    /// (`paths.proxy-protocol-from`).
    pub fn accepts_proxy_protocol(&self, ip: IpAddr) -> bool {
        self.proxy_protocol.iter().any(|&r| cidr_contains(r, ip))
    }

    /// Whether `ip` is a trusted proxy.
    pub fn is_trusted_proxy(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|&r| cidr_contains(r, ip))
    }

    /// The client address of a request with head `head` from TCP peer `peer`: the
    /// `X-Forwarded-For` client when `peer` is a trusted proxy, else `peer` (IPv4-mapped
    /// addresses shown as IPv4 in both cases). The port is always the peer's.
    pub fn client_addr(&self, peer: SocketAddr, head: &RequestHead) -> SocketAddr {
        if self.trusted.is_empty() {
            return peer;
        }
        let values = head
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("x-forwarded-for"))
            .map(|(_, v)| v.as_str());
        let ip =
            throng_proto::forwarded::client_ip(peer.ip(), values, |a| self.is_trusted_proxy(a));
        SocketAddr::new(ip, peer.port())
    }

    /// Checks a client address against `deny-ip` and `allow-ip`.
    ///
    /// Errors: [`Refusal::DeniedIp`], [`Refusal::NotAllowed`].
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Refusal> {
        let ip = ip.to_canonical();
        if let Some(deny) = self.deny_ip.as_ref().and_then(Watched::get) {
            if deny.contains(ip) {
                return Err(Refusal::DeniedIp(ip));
            }
        }
        if let Some(allow) = self.allow_ip.as_ref().and_then(Watched::get) {
            if !allow.contains(ip) {
                return Err(Refusal::NotAllowed(ip));
            }
        }
        Ok(())
    }

    /// Checks a request's `User-Agent` against `deny-agents`.
    ///
    /// Errors: [`Refusal::DeniedAgent`].
    pub fn check_agent(&self, agent: Option<&str>) -> Result<(), Refusal> {
        let (Some(agent), Some(list)) = (agent, self.deny_agents.as_ref().and_then(Watched::get))
        else {
            return Ok(());
        };
        match list.matching(agent) {
            Some(pattern) => Err(Refusal::DeniedAgent {
                agent: agent.to_owned(),
                pattern: pattern.to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// Both checks, for a request from client address `ip` with head `head`.
    ///
    /// Errors: see [`Refusal`].
    pub fn admit(&self, ip: IpAddr, head: &RequestHead) -> Result<(), Refusal> {
        self.check_ip(ip)?;
        self.check_agent(head.header("user-agent"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_ranges() {
        let r = parse_cidr("192.0.2.0/24").unwrap();
        assert!(cidr_contains(r, ip("192.0.2.200")));
        assert!(!cidr_contains(r, ip("192.0.3.1")));
        assert!(cidr_contains(r, ip("::ffff:192.0.2.1")));
        assert!(cidr_contains(
            parse_cidr("0.0.0.0/0").unwrap(),
            ip("8.8.8.8")
        ));
        assert!(!cidr_contains(parse_cidr("0.0.0.0/0").unwrap(), ip("::1")));
        let v6 = parse_cidr("2001:db8::/32").unwrap();
        assert!(cidr_contains(v6, ip("2001:db8:1::5")));
        assert!(!cidr_contains(v6, ip("2001:db9::5")));
        assert!(cidr_contains(parse_cidr("::1").unwrap(), ip("::1")));
    }

    #[test]
    fn ip_files_with_comments_ranges_globs_and_junk() {
        let (list, bad) = IpList::parse(
            "# office\n192.0.2.7\n  10.1.0.0/16  # lab\n\n192.168.1.*\nnot-an-ip\n2001:db8::/48\n",
        );
        assert_eq!(list.len(), 4);
        assert_eq!(bad, vec!["not-an-ip".to_owned()]);
        for yes in ["192.0.2.7", "10.1.200.3", "192.168.1.99", "2001:db8:0:1::1"] {
            assert!(list.contains(ip(yes)), "{yes}");
        }
        for no in ["192.0.2.8", "10.2.0.1", "192.168.2.1", "2001:db9::1"] {
            assert!(!list.contains(ip(no)), "{no}");
        }
    }

    #[test]
    fn agent_globs_match_whole_agent_ignoring_case() {
        let (list, bad) = AgentList::parse("*bot*\nWget/*\n# comment\n[oops\n");
        assert_eq!(list.len(), 2);
        assert_eq!(bad, vec!["[oops".to_owned()]);
        assert_eq!(
            list.matching("Mozilla/5.0 (compatible; Googlebot/2.1)"),
            Some("*bot*")
        );
        assert_eq!(list.matching("wget/1.21"), Some("Wget/*"));
        assert_eq!(list.matching("VLC/3.0.18 LibVLC/3.0.18"), None);
    }

    #[test]
    fn files_reload_when_changed_and_survive_removal() {
        let dir = std::env::temp_dir().join(format!("throng-filters-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let deny = dir.join("deny");
        std::fs::write(&deny, "192.0.2.1\n").unwrap();
        let f = Filters::new(&Paths {
            deny_ip: Some(deny.clone()),
            ..Paths::default()
        });
        assert_eq!(
            f.check_ip(ip("192.0.2.1")),
            Err(Refusal::DeniedIp(ip("192.0.2.1")))
        );
        assert!(f.check_ip(ip("192.0.2.2")).is_ok());
        std::fs::write(&deny, "192.0.2.2\n192.0.2.3\n").unwrap();
        // Not re-read before the interval has passed...
        assert!(f.check_ip(ip("192.0.2.1")).is_err());
        std::thread::sleep(RECHECK_INTERVAL + Duration::from_millis(50));
        // ... then it is.
        assert!(f.check_ip(ip("192.0.2.1")).is_ok());
        assert!(f.check_ip(ip("192.0.2.2")).is_err());
        std::fs::remove_file(&deny).unwrap();
        std::thread::sleep(RECHECK_INTERVAL + Duration::from_millis(50));
        assert!(f.check_ip(ip("192.0.2.2")).is_err(), "kept after removal");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn allow_file_admits_only_listed_and_missing_file_filters_nothing() {
        let dir = std::env::temp_dir().join(format!("throng-allow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let allow = dir.join("allow");
        std::fs::write(&allow, "127.0.0.0/8\n").unwrap();
        let f = Filters::new(&Paths {
            allow_ip: Some(allow.clone()),
            deny_ip: Some(dir.join("missing")),
            ..Paths::default()
        });
        assert!(f.check_ip(ip("127.0.0.5")).is_ok());
        assert_eq!(
            f.check_ip(ip("192.0.2.1")),
            Err(Refusal::NotAllowed(ip("192.0.2.1")))
        );
        let empty = dir.join("empty");
        std::fs::write(&empty, "# nobody\n").unwrap();
        let none = Filters::new(&Paths {
            allow_ip: Some(empty),
            ..Paths::default()
        });
        assert!(none.check_ip(ip("127.0.0.1")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
