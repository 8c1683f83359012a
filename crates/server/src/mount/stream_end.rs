//! Why a mount's feed ended, and whose doing it was ([`StreamEnd`]): every feeder (a source
//! client, a SHOUTcast source, a relay, a looped file) ends with one, so that a log line says
//! whether the source client, the relay's upstream, this server or a shutdown ended the stream
//! ([`EndedBy`]), and whether feeding the mount again could work ([`StreamEnd::retryable`]), as
//! pingora's error `esource` and `retry` do. The wording is that of the server's log lines.

use std::time::Duration;

use thiserror::Error;

use crate::mount::feeder::FeederError;

/// Whose doing the end of a stream was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndedBy {
    /// The source client: it closed, failed, went silent or sent what is not audio.
    Client,
    /// A relay's upstream server: it closed, failed, went silent or sent what is not audio.
    Upstream,
    /// This server: an admin's `killsource`, an on-demand relay without listeners, a local
    /// failure.
    Server,
    /// The server shutting down, or the feeder stopped by its owner (a relay removed).
    Shutdown,
}

/// Who was sending the stream: the other end of a feeder's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A source client (`SOURCE`, `PUT` or SHOUTcast v1).
    Client,
    /// The upstream server of a relay.
    Upstream,
}

impl Peer {
    /// What the log says when this peer closes its connection.
    fn closed_text(self) -> &'static str {
        match self {
            Peer::Client => "source disconnected",
            Peer::Upstream => "upstream closed the stream",
        }
    }
}

impl From<Peer> for EndedBy {
    fn from(peer: Peer) -> EndedBy {
        match peer {
            Peer::Client => EndedBy::Client,
            Peer::Upstream => EndedBy::Upstream,
        }
    }
}

/// Why a mount's feed ended; [`StreamEnd::by`] says whose doing it was.
#[derive(Debug, Error)]
pub enum StreamEnd {
    /// The peer closed its connection.
    #[error("{}", .0.closed_text())]
    Closed(Peer),
    /// Reading from the peer failed (the server's fault only when it ran out of memory).
    #[error("read error: {1}")]
    ReadFailed(Peer, #[source] std::io::Error),
    /// The peer sent nothing for source-timeout.
    #[error("no data for {} s (source-timeout)", .timeout.as_secs())]
    Silent {
        /// Who went silent.
        peer: Peer,
        /// The source-timeout that passed.
        timeout: Duration,
    },
    /// The peer's bytes cannot feed the mount: not audio of the announced format, or malformed
    /// inline ICY metadata.
    #[error("{1}")]
    BadStream(Peer, #[source] FeederError),
    /// An admin stopped the mount (`killsource`).
    #[error("stopped by admin (killsource)")]
    Killed,
    /// An on-demand relay's mount had no listener for the linger time.
    #[error("no listeners")]
    Idle,
    /// The server is shutting down.
    #[error("server shutting down")]
    Shutdown,
    /// The feeder was stopped by its owner (a relay removed from the configuration or from the
    /// master's stream list).
    #[error("stopped")]
    Stopped,
    /// The feed was handed to the new process of a binary upgrade (SIGUSR2), which goes on
    /// reading the same connection.
    #[error("handed over to the upgraded server")]
    HandedOver,
}

impl StreamEnd {
    /// Whose doing the end was.
    pub fn by(&self) -> EndedBy {
        match self {
            StreamEnd::ReadFailed(_, e) if e.kind() == std::io::ErrorKind::OutOfMemory => {
                EndedBy::Server
            }
            StreamEnd::Closed(peer)
            | StreamEnd::ReadFailed(peer, _)
            | StreamEnd::Silent { peer, .. }
            | StreamEnd::BadStream(peer, _) => (*peer).into(),
            StreamEnd::Killed | StreamEnd::Idle => EndedBy::Server,
            StreamEnd::Shutdown | StreamEnd::Stopped | StreamEnd::HandedOver => EndedBy::Shutdown,
        }
    }

    /// Whether feeding the mount again could work: a relay then reconnects (after its backoff,
    /// or when a listener asks for an on-demand mount), and a source client may reconnect. Not
    /// after a shutdown or stop, nor after a source client sent what is not audio (it would be
    /// refused again until reconfigured); an upstream's bad stream is retried, as the upstream
    /// may change its source at any time.
    pub fn retryable(&self) -> bool {
        !matches!(
            self,
            StreamEnd::BadStream(Peer::Client, _)
                | StreamEnd::Shutdown
                | StreamEnd::Stopped
                | StreamEnd::HandedOver
        )
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Error, ErrorKind};

    use throng_proto::format::Format;

    use super::*;

    fn garbage() -> FeederError {
        FeederError::Garbage {
            bytes: 65536,
            format: Format::Mp3,
            hint: String::new(),
        }
    }

    fn silent(peer: Peer) -> StreamEnd {
        StreamEnd::Silent {
            peer,
            timeout: Duration::from_secs(10),
        }
    }

    #[test]
    fn whose_doing_and_retryable() {
        let reset = || Error::from(ErrorKind::ConnectionReset);
        let oom = || Error::from(ErrorKind::OutOfMemory);
        let table: Vec<(StreamEnd, EndedBy, bool)> = vec![
            (StreamEnd::Closed(Peer::Client), EndedBy::Client, true),
            (StreamEnd::Closed(Peer::Upstream), EndedBy::Upstream, true),
            (
                StreamEnd::ReadFailed(Peer::Client, reset()),
                EndedBy::Client,
                true,
            ),
            (
                StreamEnd::ReadFailed(Peer::Upstream, reset()),
                EndedBy::Upstream,
                true,
            ),
            (
                StreamEnd::ReadFailed(Peer::Client, oom()),
                EndedBy::Server,
                true,
            ),
            (
                StreamEnd::ReadFailed(Peer::Upstream, oom()),
                EndedBy::Server,
                true,
            ),
            (silent(Peer::Client), EndedBy::Client, true),
            (silent(Peer::Upstream), EndedBy::Upstream, true),
            (
                StreamEnd::BadStream(Peer::Client, garbage()),
                EndedBy::Client,
                false,
            ),
            (
                StreamEnd::BadStream(Peer::Upstream, garbage()),
                EndedBy::Upstream,
                true,
            ),
            (StreamEnd::Killed, EndedBy::Server, true),
            (StreamEnd::Idle, EndedBy::Server, true),
            (StreamEnd::Shutdown, EndedBy::Shutdown, false),
            (StreamEnd::Stopped, EndedBy::Shutdown, false),
        ];
        for (end, by, retryable) in table {
            assert_eq!(end.by(), by, "{end:?}");
            assert_eq!(end.retryable(), retryable, "{end:?}");
        }
    }

    #[test]
    fn display_is_the_log_wording() {
        let reset = Error::new(ErrorKind::ConnectionReset, "connection reset by peer");
        let cases: Vec<(StreamEnd, &str)> = vec![
            (StreamEnd::Closed(Peer::Client), "source disconnected"),
            (
                StreamEnd::Closed(Peer::Upstream),
                "upstream closed the stream",
            ),
            (
                StreamEnd::ReadFailed(Peer::Upstream, reset),
                "read error: connection reset by peer",
            ),
            (silent(Peer::Client), "no data for 10 s (source-timeout)"),
            (
                StreamEnd::BadStream(Peer::Client, garbage()),
                "65536 consecutive bytes are not Mp3 audio",
            ),
            (StreamEnd::Killed, "stopped by admin (killsource)"),
            (StreamEnd::Idle, "no listeners"),
            (StreamEnd::Shutdown, "server shutting down"),
            (StreamEnd::Stopped, "stopped"),
        ];
        for (end, text) in cases {
            assert_eq!(end.to_string(), text);
        }
    }

    #[test]
    fn the_cause_is_the_source() {
        use std::error::Error as _;
        let end = StreamEnd::BadStream(Peer::Upstream, garbage());
        assert!(end.source().is_some_and(|s| s.is::<FeederError>()));
        let end = StreamEnd::ReadFailed(Peer::Client, ErrorKind::TimedOut.into());
        assert!(end.source().is_some_and(|s| s.is::<Error>()));
        assert!(StreamEnd::Killed.source().is_none());
    }
}
