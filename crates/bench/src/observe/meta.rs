//! What a report records about the run itself: when it started, on which host, with which
//! command line and bench version, and what the server says it is (the `Server` header of the
//! first listener URL's reply: Icecast's `server_id`, `Throng/x.y.z`, ...).

use crate::net::url::HttpUrl;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The run's circumstances, shown at the top of `report.html` and stored in `report.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunMeta {
    /// Start of the run, RFC 3339 in UTC (e.g. `2026-11-22T19:40:00Z`).
    pub started: String,
    /// Host name of the machine the bench ran on.
    pub host: String,
    /// Version of the bench (the `throng` workspace version).
    pub bench_version: String,
    /// The bench's command line, arguments quoted for a POSIX shell where needed.
    pub command_line: String,
    /// The `Server` header the first listener URL answered with (None: no answer, no header).
    pub server: Option<String>,
}

impl RunMeta {
    /// The circumstances of a run starting at `start_unix_ms` (ms since the Unix epoch) against
    /// a server that answered with `server` (see [`server_header`]).
    pub fn collect(start_unix_ms: u64, server: Option<String>) -> RunMeta {
        RunMeta {
            started: rfc3339(start_unix_ms),
            host: host_name(),
            bench_version: env!("CARGO_PKG_VERSION").into(),
            command_line: std::env::args()
                .map(|a| shell_quote(&a))
                .collect::<Vec<_>>()
                .join(" "),
            server,
        }
    }
}

/// `ms` since the Unix epoch as RFC 3339 UTC with seconds (`1970-01-01T00:00:00Z`).
pub fn rfc3339(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// This machine's host name (from the kernel; empty when unknown).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// `a` as one POSIX shell word: unchanged when it holds only safe characters, else in single
/// quotes.
pub fn shell_quote(a: &str) -> String {
    let safe = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if safe {
        a.to_owned()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// The `Server` header of `url`'s reply to a GET (the header that carries Icecast's
/// `server_id`), if it answers within `timeout`. The connection is closed after the response
/// head: the server sees one short extra listener before the run.
pub fn server_header(url: &str, timeout: Duration) -> Option<String> {
    let u = HttpUrl::parse(url).ok()?;
    let mut s = TcpStream::connect_timeout(&u.addr, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    let req = format!(
        "GET {} HTTP/1.0\r\nHost: {}:{}\r\nUser-Agent: throng-bench/{}\r\n\r\n",
        u.path,
        u.host,
        u.port,
        env!("CARGO_PKG_VERSION")
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    server_in_head(&String::from_utf8_lossy(&head))
}

/// The value of the `Server` header in a response head (case-insensitive name).
pub fn server_in_head(head: &str) -> Option<String> {
    head.split("\r\n")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("server"))
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_quotes_and_headers() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_376_400_500), "2026-11-22T19:40:00Z");
        assert_eq!(shell_quote("--pid-name"), "--pid-name");
        assert_eq!(shell_quote("throng serve"), "'throng serve'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        let head = "HTTP/1.0 200 OK\r\nContent-Type: audio/mpeg\r\nserver: Icecast 2.4.4\r\n\r\n";
        assert_eq!(server_in_head(head).as_deref(), Some("Icecast 2.4.4"));
        assert_eq!(server_in_head("HTTP/1.0 200 OK\r\n\r\n"), None);
    }
}
