//! Per-address throttling of failed logins (sources, admin requests, listener authentication),
//! and the one log line each failure writes for fail2ban.
//!
//! An address that fails `max-failed-logins` times within `failed-login-window` seconds is
//! blocked for `failed-login-block` seconds: every request from it that carries credentials is
//! answered **429 Too Many Requests** with `Retry-After`, right or wrong credentials alike (or
//! the block would still tell a guesser which password is right). Requests without credentials
//! (status pages, libshout's unauthenticated poke, a browser's first request) are not counted
//! and not blocked, so they keep their usual answers. Icecast 2.4.4 has no such throttle; its
//! clients treat a 429 as any other refusal: libshout reports `SHOUTERR_NOCONNECT` and the
//! encoder retries on its own schedule, ffmpeg exits with "429 Too Many Requests", players
//! show an error.
//!
//! "Address" is the key of [`crate::net::clients::address_key`]: an IPv4 address (/32, also
//! when mapped into IPv6) or an IPv6 /64, since one host usually holds a whole /64 and could
//! otherwise guess from a fresh address each time (issue 42).
//!
//! The table is bounded ([`MAX_TRACKED`] keys) and never fails open for an address it is
//! blocking: blocked keys and keys still counting failures are kept apart, and room for a new
//! key is made by dropping, in this order, a block that has ended (the oldest block first),
//! then the key that counts failures and failed least recently (LRU, `hashlink`'s linked hash
//! map). A blocked key is never dropped before its block ends: when every tracked key is
//! blocked, a new key is simply not tracked until a block ends. So a flood of fresh addresses
//! can push out only keys that have not reached the limit, least recent first; an attacker
//! that keeps failing stays at the recent end and reaches its block. Every look-up, insertion
//! and eviction is O(1) (no scan of the table per failure).
//!
//! Each failure logs, at WARN, `authentication failed ip=<address>
//! kind="<source|admin|listener|metrics>" user="<user>" mount="<mount>"` (the address first,
//! user and mount quoted and escaped, so a crafted user name cannot forge the `ip=` that a
//! fail2ban filter reads: see docs/operators.md); the failure that starts a block also logs
//! `login throttled ip=<address> kind=".." seconds=N`. The time source is a parameter, so the
//! rules are unit-tested on a made-up clock.

use std::collections::hash_map::RandomState;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use hashlink::LinkedHashMap;

use crate::net::clients::address_key;

/// Most keys (IPv4 addresses, IPv6 /64s) tracked at once, blocked and counting together
/// (about 64 bytes each, so a few MiB at most). When full, a new key takes the place of an
/// ended block, else of the least recently failing key that is not blocked; while every
/// tracked key is blocked, a new key is not tracked.
pub const MAX_TRACKED: usize = 65_536;

/// What is being logged into (the `kind=` of the log line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginKind {
    /// A source client (`SOURCE`/`PUT`).
    Source,
    /// An admin command or API request (admin, relay or mount source credentials).
    Admin,
    /// A listener of a mount with authentication.
    Listener,
    /// `/metrics` with `metrics-password`.
    Metrics,
}

impl LoginKind {
    /// The `kind=` value.
    pub fn as_str(self) -> &'static str {
        match self {
            LoginKind::Source => "source",
            LoginKind::Admin => "admin",
            LoginKind::Listener => "listener",
            LoginKind::Metrics => "metrics",
        }
    }
}

/// The throttle's settings (`[authentication]` `max-failed-logins`, `failed-login-window`,
/// `failed-login-block`, read by [`crate::config::Config::login_throttle`]).
pub use crate::config::LoginThrottle as Rule;

/// A key that is counting failures (not blocked).
#[derive(Debug, Clone, Copy)]
struct Counting {
    window_start: Instant,
    failures: u32,
}

/// The tracked keys. SipHash with a random key (`RandomState`): the keys are chosen by
/// whoever sends requests, so the hasher must resist collisions made on purpose.
#[derive(Debug, Default)]
struct Table {
    /// Keys counting failures, least recently failing first.
    counting: LinkedHashMap<IpAddr, Counting, RandomState>,
    /// Blocked keys with the end of their block, in the order their blocks started (so, under
    /// one `failed-login-block`, the order they end).
    blocked: LinkedHashMap<IpAddr, Instant, RandomState>,
}

impl Table {
    fn len(&self) -> usize {
        self.counting.len() + self.blocked.len()
    }

    /// Makes room for one more key (see the module comment); false when every tracked key is
    /// blocked (the new key is then not tracked).
    fn make_room(&mut self, now: Instant) -> bool {
        if self.len() < MAX_TRACKED {
            return true;
        }
        if self.blocked.front().is_some_and(|(_, &until)| until <= now) {
            self.blocked.pop_front();
            return true;
        }
        self.counting.pop_front().is_some()
    }
}

/// Failed logins per key (shared by every kind of login, kept across reloads).
#[derive(Debug, Default)]
pub struct Throttle {
    table: parking_lot::Mutex<Table>,
}

impl Throttle {
    /// A throttle with no failures recorded.
    pub fn new() -> Throttle {
        Throttle::default()
    }

    /// `Err(wait)` when `ip`'s key (its IPv4 address or IPv6 /64) is blocked at `now`, `wait`
    /// being the time left (at least 1 s, for `Retry-After`).
    pub fn check(&self, ip: IpAddr, now: Instant, rule: &Rule) -> Result<(), Duration> {
        if rule.max_failures == 0 {
            return Ok(());
        }
        let table = self.table.lock();
        match table.blocked.get(&address_key(ip)) {
            Some(&until) if until > now => Err((until - now).max(Duration::from_secs(1))),
            _ => Ok(()),
        }
    }

    /// Records a failed login from `ip` (counted under its key) at `now`; returns true when
    /// this failure starts a block. Failures while blocked neither extend nor restart the
    /// block.
    pub fn failed(&self, ip: IpAddr, now: Instant, rule: &Rule) -> bool {
        if rule.max_failures == 0 {
            return false;
        }
        let key = address_key(ip);
        let mut table = self.table.lock();
        match table.blocked.get(&key) {
            Some(&until) if until > now => return false,
            // The block has ended: counting starts again from zero.
            Some(_) => {
                table.blocked.remove(&key);
            }
            None => {}
        }
        let failures = match table.counting.to_back(&key) {
            Some(e) => {
                if now >= e.window_start + rule.window {
                    e.window_start = now;
                    e.failures = 0;
                }
                e.failures += 1;
                e.failures
            }
            None => {
                if !table.make_room(now) {
                    return false;
                }
                table.counting.insert(
                    key,
                    Counting {
                        window_start: now,
                        failures: 1,
                    },
                );
                1
            }
        };
        if failures >= rule.max_failures {
            table.counting.remove(&key);
            table.blocked.insert(key, now + rule.block);
            return true;
        }
        false
    }

    /// Keys tracked now (blocked and counting).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.table.lock().len()
    }
}

/// Logs a failed login in the fail2ban-matchable format (see the module comment).
pub fn log_failure(ip: IpAddr, kind: LoginKind, user: Option<&str>, mount: Option<&str>) {
    tracing::warn!(
        ip = %ip,
        kind = kind.as_str(),
        user = ?user.unwrap_or(""),
        mount = ?mount.unwrap_or(""),
        "authentication failed"
    );
}

/// Logs the start of a block of `ip` for `block`.
pub fn log_block(ip: IpAddr, kind: LoginKind, block: Duration) {
    tracing::warn!(
        ip = %ip,
        kind = kind.as_str(),
        seconds = block.as_secs(),
        "login throttled"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const RULE: Rule = Rule {
        max_failures: 3,
        window: Duration::from_secs(60),
        block: Duration::from_secs(300),
    };

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, n])
    }

    /// The `n`-th IPv4 address of 10.0.0.0/8.
    fn v4(n: u32) -> IpAddr {
        IpAddr::from((0x0a00_0000 | n).to_be_bytes())
    }

    #[test]
    fn blocks_after_n_failures_in_the_window_for_the_block_time() {
        let t = Throttle::new();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert!(!t.failed(ip(1), t0, &RULE));
        assert!(!t.failed(ip(1), t0 + s(10), &RULE));
        assert_eq!(t.check(ip(1), t0 + s(10), &RULE), Ok(()));
        assert!(t.failed(ip(1), t0 + s(20), &RULE), "third failure blocks");
        assert_eq!(t.check(ip(1), t0 + s(20), &RULE), Err(s(300)));
        assert_eq!(t.check(ip(1), t0 + s(319), &RULE), Err(s(1)));
        // Other addresses are not affected.
        assert_eq!(t.check(ip(2), t0 + s(20), &RULE), Ok(()));
        // Failures while blocked neither extend nor restart the block.
        assert!(!t.failed(ip(1), t0 + s(100), &RULE));
        assert_eq!(t.check(ip(1), t0 + s(100), &RULE), Err(s(220)));
        // After the block, the count starts again from zero.
        assert_eq!(t.check(ip(1), t0 + s(320), &RULE), Ok(()));
        assert!(!t.failed(ip(1), t0 + s(321), &RULE));
        assert!(!t.failed(ip(1), t0 + s(322), &RULE));
        assert!(t.failed(ip(1), t0 + s(323), &RULE));
    }

    #[test]
    fn failures_spread_beyond_the_window_never_block() {
        let t = Throttle::new();
        let t0 = Instant::now();
        for i in 0..20u64 {
            // Two failures per 61-second window.
            let at = t0 + Duration::from_secs(i * 61);
            assert!(!t.failed(ip(3), at, &RULE));
            assert!(!t.failed(ip(3), at + Duration::from_secs(1), &RULE));
            assert_eq!(t.check(ip(3), at + Duration::from_secs(2), &RULE), Ok(()));
        }
    }

    #[test]
    fn zero_turns_it_off() {
        let off = Rule {
            max_failures: 0,
            ..RULE
        };
        let t = Throttle::new();
        let t0 = Instant::now();
        for _ in 0..100 {
            assert!(!t.failed(ip(4), t0, &off));
        }
        assert_eq!(t.check(ip(4), t0, &off), Ok(()));
        assert_eq!(t.tracked(), 0);
    }

    #[test]
    fn ipv6_failures_count_per_64_and_ipv4_per_address() {
        let t = Throttle::new();
        let t0 = Instant::now();
        let host = |n: u16| IpAddr::from(Ipv6Addr::new(0x2001, 0xdb8, 0, 7, n, n, n, n));
        // Three addresses of one /64: one key, blocked by their third failure.
        assert!(!t.failed(host(1), t0, &RULE));
        assert!(!t.failed(host(2), t0, &RULE));
        assert!(t.failed(host(3), t0, &RULE));
        assert!(t.check(host(0xbeef), t0, &RULE).is_err(), "the whole /64");
        let next_64 = IpAddr::from(Ipv6Addr::new(0x2001, 0xdb8, 0, 8, 1, 1, 1, 1));
        assert_eq!(t.check(next_64, t0, &RULE), Ok(()));
        assert_eq!(t.tracked(), 1);
        // IPv4 addresses are keys of their own, also when mapped into IPv6.
        assert!(!t.failed(ip(5), t0, &RULE));
        assert!(!t.failed(ip(5), t0, &RULE));
        assert!(!t.failed(ip(6), t0, &RULE));
        let mapped = IpAddr::from(Ipv4Addr::new(192, 0, 2, 5).to_ipv6_mapped());
        assert!(t.failed(mapped, t0, &RULE), "::ffff:192.0.2.5 is 192.0.2.5");
        assert!(t.check(ip(5), t0, &RULE).is_err());
        assert_eq!(t.check(ip(6), t0, &RULE), Ok(()));
    }

    /// Issue 42's probe: 66,000 addresses fail once (more than the table holds), then a fresh
    /// attacker fails 40 times: it is blocked at its limit and stays blocked (the admin API
    /// then answers 429), however full the table was.
    #[test]
    fn a_flood_of_failing_addresses_does_not_open_the_throttle_for_a_fresh_attacker() {
        let rule = Rule {
            max_failures: 10,
            window: Duration::from_secs(60),
            block: Duration::from_secs(60),
        };
        let t = Throttle::new();
        let t0 = Instant::now();
        for n in 0..66_000 {
            assert!(!t.failed(v4(n), t0, &rule));
        }
        assert_eq!(t.tracked(), MAX_TRACKED, "bounded");
        let attacker = IpAddr::from([198, 51, 100, 7]);
        let mut blocked_at = None;
        for i in 1..=40u32 {
            let at = t0 + Duration::from_millis(u64::from(i) * 10);
            if t.check(attacker, at, &rule).is_err() {
                blocked_at.get_or_insert(i);
                continue; // answered 429: the credentials are not even tried
            }
            t.failed(attacker, at, &rule);
        }
        assert_eq!(
            blocked_at,
            Some(11),
            "blocked from the attempt after its 10th failure"
        );
        assert!(t
            .check(attacker, t0 + Duration::from_secs(1), &rule)
            .is_err());
        assert_eq!(t.tracked(), MAX_TRACKED);
    }

    /// A blocked key is never evicted by fresh keys, however many: they push out only keys
    /// that count failures, least recent first.
    #[test]
    fn fresh_keys_evict_the_least_recent_counting_key_and_never_a_blocked_one() {
        let t = Throttle::new();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        for _ in 0..3 {
            t.failed(ip(1), t0, &RULE);
        }
        assert!(t.check(ip(1), t0, &RULE).is_err());
        // ip(2) fails twice, then is the least recent key once the flood starts.
        t.failed(ip(2), t0, &RULE);
        t.failed(ip(2), t0, &RULE);
        for n in 0..200_000 {
            t.failed(v4(n), t0 + s(1), &RULE);
            assert!(t.tracked() <= MAX_TRACKED);
        }
        assert_eq!(
            t.check(ip(1), t0 + s(2), &RULE),
            Err(s(298)),
            "still blocked"
        );
        // ip(2) was evicted: its count starts again.
        assert!(!t.failed(ip(2), t0 + s(2), &RULE));
        assert!(!t.failed(ip(2), t0 + s(2), &RULE));
        assert!(t.failed(ip(2), t0 + s(2), &RULE));
        // A key that keeps failing is moved to the recent end each time, so 50,000 fresh keys
        // between its failures do not push it out: its third failure blocks it.
        let t = Throttle::new();
        let mut starts = Vec::new();
        for n in 0..200_000u32 {
            if n % 50_000 == 0 {
                starts.push(t.failed(ip(3), t0, &RULE));
            }
            t.failed(v4(n), t0, &RULE);
        }
        assert_eq!(starts, [false, false, true, false]);
        assert!(t.check(ip(3), t0, &RULE).is_err());
    }

    #[test]
    fn when_every_key_is_blocked_a_new_key_waits_for_a_block_to_end() {
        let t = Throttle::new();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        for n in 0..MAX_TRACKED as u32 {
            for _ in 0..3 {
                t.failed(v4(n), t0, &RULE);
            }
        }
        assert_eq!(t.tracked(), MAX_TRACKED);
        let newcomer = IpAddr::from([198, 51, 100, 9]);
        for _ in 0..3 {
            assert!(!t.failed(newcomer, t0 + s(1), &RULE), "not tracked");
        }
        assert_eq!(t.check(newcomer, t0 + s(1), &RULE), Ok(()));
        assert_eq!(t.tracked(), MAX_TRACKED);
        for n in [0, 1, MAX_TRACKED as u32 - 1] {
            assert!(t.check(v4(n), t0 + s(1), &RULE).is_err(), "none dropped");
        }
        // Once the blocks end, an ended block makes room.
        assert!(!t.failed(newcomer, t0 + s(300), &RULE));
        assert_eq!(t.tracked(), MAX_TRACKED);
        assert_eq!(t.check(v4(0), t0 + s(300), &RULE), Ok(()));
        assert!(!t.failed(newcomer, t0 + s(300), &RULE));
        assert!(t.failed(newcomer, t0 + s(300), &RULE));
    }
}
