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
//! Each failure logs, at WARN, `authentication failed ip=<address>
//! kind="<source|admin|listener|metrics>" user="<user>" mount="<mount>"` (the address first,
//! user and mount quoted and escaped, so a crafted user name cannot forge the `ip=` that a
//! fail2ban filter reads: see docs/operators.md); the failure that starts a block also logs
//! `login throttled ip=<address> kind=".." seconds=N`. The time source is a parameter, so the
//! rules are unit-tested on a made-up clock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Most addresses tracked at once; when full, expired entries are dropped first, and a new
/// address is not tracked while none has expired (memory stays bounded).
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

#[derive(Debug, Clone, Copy)]
struct Entry {
    window_start: Instant,
    failures: u32,
    blocked_until: Option<Instant>,
}

impl Entry {
    fn expired(&self, now: Instant, rule: &Rule) -> bool {
        self.blocked_until.is_none_or(|t| t <= now) && now >= self.window_start + rule.window
    }
}

/// Failed logins per address (shared by every kind of login, kept across reloads).
#[derive(Debug, Default)]
pub struct Throttle {
    entries: parking_lot::Mutex<HashMap<IpAddr, Entry>>,
}

impl Throttle {
    /// A throttle with no failures recorded.
    pub fn new() -> Throttle {
        Throttle::default()
    }

    /// `Err(wait)` when `ip` is blocked at `now`, `wait` being the time left (at least 1 s,
    /// for `Retry-After`).
    pub fn check(&self, ip: IpAddr, now: Instant, rule: &Rule) -> Result<(), Duration> {
        if rule.max_failures == 0 {
            return Ok(());
        }
        let entries = self.entries.lock();
        match entries.get(&ip).and_then(|e| e.blocked_until) {
            Some(until) if until > now => Err((until - now).max(Duration::from_secs(1))),
            _ => Ok(()),
        }
    }

    /// Records a failed login from `ip` at `now`; returns true when this failure starts a
    /// block.
    pub fn failed(&self, ip: IpAddr, now: Instant, rule: &Rule) -> bool {
        if rule.max_failures == 0 {
            return false;
        }
        let mut entries = self.entries.lock();
        if entries.len() >= MAX_TRACKED && !entries.contains_key(&ip) {
            entries.retain(|_, e| !e.expired(now, rule));
            if entries.len() >= MAX_TRACKED {
                return false;
            }
        }
        let e = entries.entry(ip).or_insert(Entry {
            window_start: now,
            failures: 0,
            blocked_until: None,
        });
        if e.blocked_until.is_some_and(|t| t > now) {
            return false;
        }
        if now >= e.window_start + rule.window || e.blocked_until.is_some() {
            e.window_start = now;
            e.failures = 0;
            e.blocked_until = None;
        }
        e.failures += 1;
        if e.failures >= rule.max_failures {
            e.blocked_until = Some(now + rule.block);
            e.failures = 0;
            return true;
        }
        false
    }

    /// Addresses tracked now.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.entries.lock().len()
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

    const RULE: Rule = Rule {
        max_failures: 3,
        window: Duration::from_secs(60),
        block: Duration::from_secs(300),
    };

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, n])
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
    fn memory_is_bounded_and_expired_entries_make_room() {
        let t = Throttle::new();
        let t0 = Instant::now();
        for i in 0..MAX_TRACKED as u32 {
            t.failed(IpAddr::from(i.to_be_bytes()), t0, &RULE);
        }
        assert_eq!(t.tracked(), MAX_TRACKED);
        let newcomer = IpAddr::from([10, 255, 255, 255]);
        t.failed(newcomer, t0 + Duration::from_secs(1), &RULE);
        assert_eq!(t.tracked(), MAX_TRACKED, "full: not tracked");
        t.failed(newcomer, t0 + Duration::from_secs(61), &RULE);
        assert_eq!(t.tracked(), 1, "expired entries dropped");
    }
}
