//! Why an audience member's session ended, in one vocabulary for every path (ICY listener, HLS
//! session, WHEP viewer, event subscriber) and every place that says it: the access log (the
//! last field of a line), `/metrics` (`throng_session_ends_total{path,reason}`), the status
//! documents and the admin UI. An [`EndReason`] says whose side ended the session ([`Side`]:
//! the client, the server's policy, an operator, the upstream feed, or the server shutting
//! down) and why; [`EndReason::key`] is its stable `side:why` name.

/// Whose side ended a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The listener (its player, its network) ended it.
    Client,
    /// A server policy ended it (lag over queue-size, a time limit).
    Policy,
    /// An operator ended it (admin `killclient`).
    Operator,
    /// The upstream feed ended it (the source left with nowhere to go).
    Upstream,
    /// The server is shutting down.
    Shutdown,
}

impl Side {
    /// The side as written in keys and labels: `client`, `policy`, `operator`, `upstream`,
    /// `shutdown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Policy => "policy",
            Side::Operator => "operator",
            Side::Upstream => "upstream",
            Side::Shutdown => "shutdown",
        }
    }
}

/// Why a session ended: one type for every path (before this, ICY, WHEP, HLS and events each
/// had their own enum, with different words for the same reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EndReason {
    /// The client closed its side: a TCP FIN or reset seen while reading (ICY, events), a
    /// WHEP `DELETE`.
    HungUp,
    /// The client stopped answering: an HLS player that stopped fetching its playlist, a WHEP
    /// peer whose ICE consent lapsed or that never connected.
    Vanished,
    /// Writing to the client failed (socket error).
    WriteFailed,
    /// It fell behind the queue's tail (lag over queue-size) under `lag-policy = "drop"`, or
    /// an event subscriber's backlog overflowed.
    TooSlow,
    /// Its time limit passed (`max-listener-duration`, a URL-auth `icecast-auth-timelimit`).
    TimeLimit,
    /// An operator removed it (admin `killclient`).
    Killed,
    /// Its mount's feed ended with nowhere to go (no live fallback), or it could not drain
    /// within the grace.
    SourceEnded,
    /// The server shuts down.
    Shutdown,
    /// The server drained (SIGTERM or `POST /api/v1/drain` with `[limits] drain-timeout`): it
    /// stopped taking listeners, kept this one until `drain-timeout` passed, then closed it so
    /// its player reconnects through the origin to another edge (docs/SCALING.md, "On
    /// Kubernetes").
    Drained,
    /// It was idle (an event subscriber, a keep-alive connection between requests) and was
    /// closed, the idlest first, to make room under `clients` for a new request; or a WHEP
    /// session still waiting for its peer whose unit of the unconnected budget went to an offer
    /// from a lighter address (`fanout/whep/unconnected.rs`).
    Evicted,
}

impl EndReason {
    /// Every reason, in a stable order (for metrics and documentation tables).
    pub const ALL: [EndReason; 10] = [
        EndReason::HungUp,
        EndReason::Vanished,
        EndReason::WriteFailed,
        EndReason::TooSlow,
        EndReason::TimeLimit,
        EndReason::Killed,
        EndReason::SourceEnded,
        EndReason::Shutdown,
        EndReason::Drained,
        EndReason::Evicted,
    ];

    /// Whose side ended the session.
    pub fn side(self) -> Side {
        match self {
            EndReason::HungUp | EndReason::Vanished | EndReason::WriteFailed => Side::Client,
            EndReason::TooSlow | EndReason::TimeLimit | EndReason::Evicted => Side::Policy,
            EndReason::Killed => Side::Operator,
            EndReason::SourceEnded => Side::Upstream,
            EndReason::Shutdown | EndReason::Drained => Side::Shutdown,
        }
    }

    /// The reason alone, kebab-case: `hung-up`, `vanished`, `write-failed`, `too-slow`,
    /// `time-limit`, `killed`, `source-ended`, `shutdown`, `drained`, `evicted`.
    pub fn why(self) -> &'static str {
        match self {
            EndReason::HungUp => "hung-up",
            EndReason::Vanished => "vanished",
            EndReason::WriteFailed => "write-failed",
            EndReason::TooSlow => "too-slow",
            EndReason::TimeLimit => "time-limit",
            EndReason::Killed => "killed",
            EndReason::SourceEnded => "source-ended",
            EndReason::Shutdown => "shutdown",
            EndReason::Drained => "drained",
            EndReason::Evicted => "evicted",
        }
    }

    /// The stable name `side:why` (`client:hung-up`, `policy:too-slow`, `operator:killed`,
    /// `upstream:source-ended`, `shutdown:shutdown`, ...): the access log's last field, the
    /// `reason` label of `throng_session_ends_total`, and the status documents' keys.
    pub fn key(self) -> &'static str {
        match self {
            EndReason::HungUp => "client:hung-up",
            EndReason::Vanished => "client:vanished",
            EndReason::WriteFailed => "client:write-failed",
            EndReason::TooSlow => "policy:too-slow",
            EndReason::TimeLimit => "policy:time-limit",
            EndReason::Killed => "operator:killed",
            EndReason::SourceEnded => "upstream:source-ended",
            EndReason::Shutdown => "shutdown:shutdown",
            EndReason::Drained => "shutdown:drained",
            EndReason::Evicted => "policy:evicted",
        }
    }

    /// A sentence for people (the admin UI, info-level log lines).
    pub fn describe(self) -> &'static str {
        match self {
            EndReason::HungUp => "the listener hung up",
            EndReason::Vanished => "the listener stopped answering",
            EndReason::WriteFailed => "writing to the listener failed",
            EndReason::TooSlow => "fell too far behind (lag over queue-size)",
            EndReason::TimeLimit => "max listening time reached",
            EndReason::Killed => "removed by an operator",
            EndReason::SourceEnded => "the source ended with no fallback",
            EndReason::Shutdown => "the server is shutting down",
            EndReason::Drained => "the server drained (drain-timeout passed)",
            EndReason::Evicted => "idle, closed to make room for a new client",
        }
    }

    /// The reason named by `key` ([`EndReason::key`]), if any.
    pub fn from_key(key: &str) -> Option<EndReason> {
        EndReason::ALL.into_iter().find(|r| r.key() == key)
    }
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_its_side_and_why() {
        for r in EndReason::ALL {
            assert_eq!(r.key(), format!("{}:{}", r.side().as_str(), r.why()));
            assert_eq!(EndReason::from_key(r.key()), Some(r));
            assert!(!r.describe().is_empty());
        }
        assert_eq!(EndReason::from_key("client:bored"), None);
    }

    #[test]
    fn keys_are_distinct_and_one_token() {
        let mut keys: Vec<&str> = EndReason::ALL.iter().map(|r| r.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), EndReason::ALL.len());
        // One whitespace-free token: it ends an access-log line.
        assert!(keys.iter().all(|k| !k.contains(char::is_whitespace)));
    }

    #[test]
    fn sides_say_whose_end_it_was() {
        assert_eq!(EndReason::HungUp.side(), Side::Client);
        assert_eq!(EndReason::Vanished.side(), Side::Client);
        assert_eq!(EndReason::TooSlow.side(), Side::Policy);
        assert_eq!(EndReason::Killed.side(), Side::Operator);
        assert_eq!(EndReason::SourceEnded.side(), Side::Upstream);
        assert_eq!(EndReason::Shutdown.side(), Side::Shutdown);
        assert_eq!(EndReason::Drained.key(), "shutdown:drained");
    }
}
