//! The controller–agent link: JSON lines over a byte stream (TCP, TLS over TCP, or an SSH
//! session's standard input and output), and the shared-token handshake.
//!
//! On a new connection the agent sends a [`ToController::Challenge`] with a random nonce; the
//! controller answers [`ToAgent::Hello`] with HMAC-SHA256(token, nonce) (ring's HMAC; the token
//! never crosses the wire), and the agent answers [`ToController::Welcome`] with what it can
//! hold, or [`ToController::Refused`] with the reason (a wrong token, a run already going) and
//! closes. Then the controller probes the agent's clock ([`crate::dist::clock`]), sends the
//! [`ToAgent::Plan`] of its share, and heartbeats every second; the agent sends each merged
//! second of its share ([`ToController::Second`]) and a last [`ToController::Done`].
//! Only mergeable summaries cross the wire, never per-listener data.

use crate::dist::capacity::Capacity;
use crate::dist::clock::Estimate;
use crate::run::local::HostShare;
use crate::stats::Snapshot;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// The environment variable holding the shared token.
pub const TOKEN_ENV: &str = "THRONG_BENCH_TOKEN";

/// Version of the link's protocol (both ends must speak the same).
pub const PROTOCOL: u32 = 1;

/// Longest line accepted (bytes): a second of a run's groups stays far below.
pub const MAX_LINE: usize = 16 << 20;

/// What the controller sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ToAgent {
    /// The answer to the challenge.
    Hello {
        /// The protocol version.
        protocol: u32,
        /// HMAC-SHA256(token, nonce), hex.
        proof: String,
        /// The controller's name (host:port as it sees itself), for the agent's log.
        controller: String,
    },
    /// A clock probe: `t1` on the controller's clock (µs since the Unix epoch).
    Ping {
        /// The probe's number.
        id: u32,
        /// Sent at (controller's clock, µs).
        t1: u64,
    },
    /// The agent's share of the run.
    Plan {
        /// The share (segments of every group; `start_unix_ms` on the agent's clock).
        share: Box<HostShare>,
        /// The controller's clock estimate of this agent.
        estimate: Estimate,
        /// The agent's name in the run's report.
        name: String,
    },
    /// A new estimate of the agent's clock.
    Clock {
        /// The estimate.
        estimate: Estimate,
    },
    /// The controller is alive.
    Heartbeat,
    /// Stop every listener now.
    Stop,
}

/// What the agent sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ToController {
    /// The first line of a connection.
    Challenge {
        /// The protocol version.
        protocol: u32,
        /// A random nonce (hex).
        nonce: String,
        /// The agent's version (`throng-bench x.y.z`).
        version: String,
    },
    /// The handshake passed: what the agent can hold.
    Welcome {
        /// The agent's capacity.
        capacity: Capacity,
    },
    /// The agent will not take this run (why, in words), and closes.
    Refused {
        /// The reason.
        reason: String,
    },
    /// The answer to a clock probe.
    Pong {
        /// The probe's number.
        id: u32,
        /// The controller's send time, echoed.
        t1: u64,
        /// Received at (agent's clock, µs).
        t2: u64,
        /// Replied at (agent's clock, µs).
        t3: u64,
    },
    /// The plan is running: workers started.
    Ready {
        /// Worker processes started.
        processes: u32,
    },
    /// One merged second of the agent's share (index = group).
    Second {
        /// The second.
        second: u32,
        /// Each group's snapshot.
        groups: Vec<Snapshot>,
        /// The agent's last second.
        last: bool,
    },
    /// Something the report should say (a worker failed).
    Error {
        /// The message.
        message: String,
    },
    /// The run ended on this agent.
    Done {
        /// The agent's CPU over the run, its workers included (µs).
        cpu_us: u64,
    },
}

/// Link errors.
#[derive(Debug, Error)]
pub enum WireError {
    /// The stream failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A line that is not a message.
    #[error("bad message: {0}")]
    Bad(String),
    /// The other side closed.
    #[error("the link closed")]
    Closed,
}

/// The reading half of a link.
pub struct Reader {
    inner: BufReader<Box<dyn Read + Send>>,
    line: String,
}

impl Reader {
    /// A reader over `r`.
    pub fn new(r: Box<dyn Read + Send>) -> Reader {
        Reader {
            inner: BufReader::with_capacity(256 * 1024, r),
            line: String::new(),
        }
    }

    /// The next message.
    ///
    /// Errors: the stream failed or closed, a line too long or not a message.
    pub fn recv<T: for<'de> Deserialize<'de>>(&mut self) -> Result<T, WireError> {
        self.line.clear();
        let n = (&mut self.inner)
            .take(MAX_LINE as u64)
            .read_line(&mut self.line)?;
        if n == 0 {
            return Err(WireError::Closed);
        }
        if !self.line.ends_with('\n') {
            return Err(WireError::Bad("line too long or cut".into()));
        }
        serde_json::from_str(&self.line).map_err(|e| {
            let mut l = self.line.clone();
            l.truncate(120);
            WireError::Bad(format!("{e}: {l}"))
        })
    }
}

/// The writing half of a link (shared by the threads that send).
#[derive(Clone)]
pub struct Writer(Arc<Mutex<Box<dyn Write + Send>>>);

impl Writer {
    /// A writer over `w`.
    pub fn new(w: Box<dyn Write + Send>) -> Writer {
        Writer(Arc::new(Mutex::new(w)))
    }

    /// Sends one message.
    ///
    /// Errors: the stream failed.
    pub fn send<T: Serialize>(&self, msg: &T) -> Result<(), WireError> {
        let mut line = serde_json::to_vec(msg).map_err(|e| WireError::Bad(e.to_string()))?;
        line.push(b'\n');
        let mut w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        w.write_all(&line)?;
        w.flush()?;
        Ok(())
    }
}

/// A random nonce (32 bytes, hex).
pub fn nonce() -> String {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 32];
    let _ = ring::rand::SystemRandom::new().fill(&mut b);
    hex(&b)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The proof of the token for `nonce`: HMAC-SHA256(token, nonce), hex.
pub fn proof(token: &str, nonce: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
    hex(ring::hmac::sign(&key, nonce.as_bytes()).as_ref())
}

/// Whether `proof` proves `token` for `nonce` (compared in constant time by ring).
pub fn verify(token: &str, nonce: &str, proof: &str) -> bool {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
    let Some(bytes) = unhex(proof) else {
        return false;
    };
    ring::hmac::verify(&key, nonce.as_bytes(), &bytes).is_ok()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_proved_not_sent() {
        let n = nonce();
        assert_eq!(n.len(), 64);
        assert_ne!(n, nonce());
        let p = proof("secret", &n);
        assert!(verify("secret", &n, &p));
        assert!(!verify("wrong", &n, &p));
        assert!(!verify("secret", &nonce(), &p));
        assert!(!verify("secret", &n, "zz"));
        assert!(!p.contains("secret"));
    }

    #[test]
    fn messages_travel_as_lines() {
        let mut out = Vec::new();
        let msg = ToController::Second {
            second: 3,
            groups: vec![Snapshot::default()],
            last: false,
        };
        out.extend(serde_json::to_vec(&msg).unwrap());
        out.push(b'\n');
        out.extend(b"{\"type\":\"done\",\"cpu_us\":5}\n");
        let mut r = Reader::new(Box::new(std::io::Cursor::new(out)));
        assert!(matches!(
            r.recv::<ToController>().unwrap(),
            ToController::Second { second: 3, .. }
        ));
        assert!(matches!(
            r.recv::<ToController>().unwrap(),
            ToController::Done { cpu_us: 5 }
        ));
        assert!(matches!(r.recv::<ToController>(), Err(WireError::Closed)));
    }
}
