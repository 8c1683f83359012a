//! Admission of new HLS sessions (issue 28, part 3): a playlist request costs a client nothing
//! but opens a session, so a session is a *pending* one (no listener slot, not counted, not in
//! the audience ledger) until it fetches a segment, and pending sessions are bounded three
//! ways, decided here as pure functions of counts and (simulated) time:
//!
//! - per address (one IPv6 /64, `net::clients::address_key`): at most `[hls]
//!   pending-per-address` pending sessions ([`AddressState::admit`]);
//! - per address and second: a token bucket of `[hls] new-sessions-per-second` new sessions a
//!   second, holding as many (a burst of one second's worth);
//! - over the whole table: at most `[hls] max-sessions` sessions; at the bound a new session
//!   evicts the oldest pending one, and is refused when every session is listening
//!   ([`room`]).
//!
//! Listening sessions are not capped per address: a mobile carrier puts thousands of real
//! listeners behind one address; `max-listeners` bounds them as it bounds ICY listeners.

use std::time::Instant;

use crate::config::HlsConfig;

/// The bounds in force (`[hls]` keys, read at each admission: a reload applies at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// `max-sessions`: sessions in the table at once (at least 1).
    pub max_sessions: usize,
    /// `pending-per-address`: pending sessions of one address (at least 1).
    pub pending_per_address: u32,
    /// `new-sessions-per-second`: new sessions of one address a second (at least 1).
    pub new_per_second: u32,
}

impl SessionLimits {
    /// These bounds, each at least 1: `max_sessions` sessions, `pending_per_address` pending
    /// sessions of an address, `new_per_second` new sessions of an address a second.
    pub fn new(max_sessions: usize, pending_per_address: u32, new_per_second: u32) -> Self {
        SessionLimits {
            max_sessions: max_sessions.max(1),
            pending_per_address: pending_per_address.max(1),
            new_per_second: new_per_second.max(1),
        }
    }

    /// The bounds `[hls]` sets, each at least 1.
    pub fn of(hls: &HlsConfig) -> SessionLimits {
        SessionLimits::new(
            hls.max_sessions,
            hls.pending_per_address,
            hls.new_sessions_per_second,
        )
    }
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits::of(&HlsConfig::default())
    }
}

/// Why a new session is refused (answered `503` with `Retry-After`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionRefused {
    /// The address opened `new-sessions-per-second` sessions within the last second.
    #[error("too many new HLS sessions from this address")]
    Rate,
    /// The address holds `pending-per-address` sessions that have not fetched a segment.
    #[error("too many HLS sessions from this address that fetch no audio")]
    PerAddress,
    /// The table holds `max-sessions` sessions, all listening.
    #[error("too many HLS sessions")]
    Full,
}

impl SessionRefused {
    /// The `outcome` label of `throng_hls_sessions_refused_total`.
    pub fn key(self) -> &'static str {
        match self {
            SessionRefused::Rate => "rate",
            SessionRefused::PerAddress => "per-address",
            SessionRefused::Full => "full",
        }
    }
}

/// What one address has: its pending sessions (listener ids, oldest first; at most
/// `pending-per-address` of them) and its bucket of new sessions.
#[derive(Debug, Clone)]
pub struct AddressState {
    /// Its pending sessions' listener ids, oldest first.
    pub pending: Vec<u64>,
    /// New sessions it may open now (fractional: the bucket refills continuously).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

impl AddressState {
    /// A new address at `now` with a full bucket of `limits.new_per_second`.
    pub fn new(limits: &SessionLimits, now: Instant) -> AddressState {
        AddressState {
            pending: Vec::new(),
            tokens: f64::from(limits.new_per_second),
            at: now,
        }
    }

    /// Refills the bucket up to `now` (`new_per_second` a second, at most that many held).
    fn refill(&mut self, limits: &SessionLimits, now: Instant) {
        let rate = f64::from(limits.new_per_second);
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + secs * rate).min(rate);
        self.at = now;
    }

    /// Whether the address may open one more session at `now`; when it may, the session's
    /// token is taken from the bucket (the caller then records the session in `pending`). A
    /// refused attempt takes nothing.
    ///
    /// Errors: [`SessionRefused::PerAddress`] at the pending cap, [`SessionRefused::Rate`]
    /// with the bucket empty.
    pub fn admit(&mut self, limits: &SessionLimits, now: Instant) -> Result<(), SessionRefused> {
        self.refill(limits, now);
        if self.pending.len() >= limits.pending_per_address as usize {
            return Err(SessionRefused::PerAddress);
        }
        if self.tokens < 1.0 {
            return Err(SessionRefused::Rate);
        }
        self.tokens -= 1.0;
        Ok(())
    }

    /// Whether the state says nothing a new one would not (no pending session, a full bucket
    /// at `now`): it can be forgotten.
    pub fn is_idle(&mut self, limits: &SessionLimits, now: Instant) -> bool {
        self.refill(limits, now);
        self.pending.is_empty() && self.tokens >= f64::from(limits.new_per_second)
    }
}

/// Whether the table has room for one more session with `total` sessions in it, `pending` of
/// them pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// Under `max-sessions`.
    Free,
    /// At the bound: the oldest pending session goes to make room.
    EvictOldestPending,
}

/// The table's room for a new session (see [`Room`]).
///
/// Errors: [`SessionRefused::Full`] at the bound with no pending session to evict.
pub fn room(total: usize, pending: usize, limits: &SessionLimits) -> Result<Room, SessionRefused> {
    if total < limits.max_sessions {
        Ok(Room::Free)
    } else if pending > 0 {
        Ok(Room::EvictOldestPending)
    } else {
        Err(SessionRefused::Full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(max: usize, per_address: u32, rate: u32) -> SessionLimits {
        SessionLimits::new(max, per_address, rate)
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let l = limits(100, 1000, 4);
        let t0 = Instant::now();
        let mut a = AddressState::new(&l, t0);
        for _ in 0..4 {
            assert_eq!(a.admit(&l, t0), Ok(()));
        }
        assert_eq!(a.admit(&l, t0), Err(SessionRefused::Rate));
        // A quarter second refills one.
        let t = t0 + Duration::from_millis(250);
        assert_eq!(a.admit(&l, t), Ok(()));
        assert_eq!(a.admit(&l, t), Err(SessionRefused::Rate));
        // Refused attempts took nothing: another quarter second gives exactly one more.
        let t = t + Duration::from_millis(250);
        assert_eq!(a.admit(&l, t), Ok(()));
        assert_eq!(a.admit(&l, t), Err(SessionRefused::Rate));
        // A long pause fills the bucket to one second's worth, no more.
        let t = t + Duration::from_secs(60);
        for _ in 0..4 {
            assert_eq!(a.admit(&l, t), Ok(()));
        }
        assert_eq!(a.admit(&l, t), Err(SessionRefused::Rate));
    }

    #[test]
    fn pending_sessions_are_capped_per_address_before_the_rate() {
        let l = limits(100, 2, 100);
        let t0 = Instant::now();
        let mut a = AddressState::new(&l, t0);
        assert_eq!(a.admit(&l, t0), Ok(()));
        a.pending.push(1);
        assert_eq!(a.admit(&l, t0), Ok(()));
        a.pending.push(2);
        assert_eq!(a.admit(&l, t0), Err(SessionRefused::PerAddress));
        // One fetched a segment: room for one more.
        a.pending.retain(|&id| id != 1);
        assert_eq!(a.admit(&l, t0), Ok(()));
    }

    #[test]
    fn an_address_is_idle_once_its_bucket_is_full_and_nothing_pends() {
        let l = limits(100, 8, 2);
        let t0 = Instant::now();
        let mut a = AddressState::new(&l, t0);
        assert!(a.is_idle(&l, t0));
        a.admit(&l, t0).unwrap();
        assert!(!a.is_idle(&l, t0), "its bucket is not full");
        assert!(a.is_idle(&l, t0 + Duration::from_secs(1)));
        a.pending.push(5);
        assert!(
            !a.is_idle(&l, t0 + Duration::from_secs(9)),
            "a session pends"
        );
    }

    #[test]
    fn the_table_evicts_pending_sessions_only() {
        let l = limits(3, 8, 8);
        assert_eq!(room(2, 2, &l), Ok(Room::Free));
        assert_eq!(room(3, 1, &l), Ok(Room::EvictOldestPending));
        assert_eq!(room(3, 0, &l), Err(SessionRefused::Full));
        assert_eq!(room(4, 0, &l), Err(SessionRefused::Full));
    }

    #[test]
    fn limits_are_at_least_one() {
        let hls = HlsConfig {
            max_sessions: 0,
            pending_per_address: 0,
            new_sessions_per_second: 0,
            ..HlsConfig::default()
        };
        assert_eq!(SessionLimits::of(&hls), limits(1, 1, 1));
        assert_eq!(SessionLimits::default(), limits(100_000, 32, 20));
    }
}
