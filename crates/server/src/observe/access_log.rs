//! The access log: one line per finished request in Combined Log Format plus the connection's
//! duration in seconds, as Icecast 2.4.4 `logging.c:logging_access` writes it:
//! `ip - user [20/Nov/2026:22:13:00 +0000] "GET /live.mp3 HTTP/1.1" 200 123456 "referer" "agent" 42`.
//!
//! Lines are formatted where the request ends and written by one background thread through a
//! bounded queue, so a slow disk never stalls a fan-out shard; the queue is flushed at shutdown.

use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

/// What one access-log line says.
#[derive(Debug, Clone)]
pub struct AccessEntry<'a> {
    /// Client address.
    pub ip: IpAddr,
    /// Authenticated user, if any.
    pub user: Option<&'a str>,
    /// `METHOD target HTTP/1.x`.
    pub request_line: &'a str,
    /// HTTP status sent.
    pub status: u16,
    /// Bytes sent, head included.
    pub bytes: u64,
    /// `Referer` header.
    pub referer: Option<&'a str>,
    /// `User-Agent` header.
    pub agent: Option<&'a str>,
    /// Connection duration in whole seconds.
    pub duration_secs: u64,
}

/// Formats one line (no trailing newline) stamped with `now`.
pub fn format_entry(e: &AccessEntry<'_>, now: chrono::DateTime<chrono::Local>) -> String {
    let clean = |s: &str| s.replace(['"', '\n', '\r'], "'");
    format!(
        "{} - {} [{}] \"{}\" {} {} \"{}\" \"{}\" {}",
        e.ip,
        e.user.map_or("-".to_owned(), clean),
        now.format("%d/%b/%Y:%H:%M:%S %z"),
        clean(e.request_line),
        e.status,
        e.bytes,
        e.referer.map_or("-".to_owned(), clean),
        e.agent.map_or("-".to_owned(), clean),
        e.duration_secs
    )
}

/// Lines queued for the writer at most; past that, lines are dropped (and counted) rather than
/// letting a blocked disk or pipe grow memory without bound or stall a fan-out shard.
pub const QUEUE_LINES: usize = 65_536;

enum Message {
    Line(String),
    /// Write everything queued before this, then acknowledge.
    Flush(mpsc::Sender<()>),
}

/// A handle to the access-log writer thread; cheap to clone.
#[derive(Clone)]
pub struct AccessLog {
    tx: Option<mpsc::SyncSender<Message>>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessLog")
            .field("enabled", &self.tx.is_some())
            .finish()
    }
}

impl AccessLog {
    /// Opens `dest`: a file path (appended), `-` for standard output, or `""` for no log.
    ///
    /// Errors: the file cannot be opened for appending, or the writer thread cannot start.
    pub fn open(dest: &str) -> std::io::Result<AccessLog> {
        let dropped = Arc::new(AtomicU64::new(0));
        if dest.is_empty() {
            return Ok(AccessLog { tx: None, dropped });
        }
        let mut out: Box<dyn Write + Send> = if dest == "-" {
            Box::new(std::io::stdout())
        } else {
            Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dest)?,
            )
        };
        let (tx, rx) = mpsc::sync_channel::<Message>(QUEUE_LINES);
        std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || {
                while let Ok(msg) = rx.recv() {
                    match msg {
                        Message::Line(line) => {
                            let _ = writeln!(out, "{line}");
                            // Write a backlog in one go, then flush once.
                            while let Ok(Message::Line(more)) = rx.try_recv() {
                                let _ = writeln!(out, "{more}");
                            }
                            let _ = out.flush();
                        }
                        Message::Flush(ack) => {
                            let _ = out.flush();
                            let _ = ack.send(());
                        }
                    }
                }
            })?;
        Ok(AccessLog {
            tx: Some(tx),
            dropped,
        })
    }

    /// Queues one line; drops it (counting) if the queue is full.
    pub fn log(&self, e: &AccessEntry<'_>) {
        if let Some(tx) = &self.tx {
            let line = format_entry(e, chrono::Local::now());
            if tx.try_send(Message::Line(line)).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Lines dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Waits (at most `timeout`) until every line queued so far is written.
    pub fn flush(&self, timeout: std::time::Duration) {
        if let Some(tx) = &self.tx {
            let (ack_tx, ack_rx) = mpsc::channel();
            if tx.send(Message::Flush(ack_tx)).is_ok() {
                let _ = ack_rx.recv_timeout(timeout);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn combined_log_format_plus_duration() {
        let now = chrono::Local
            .with_ymd_and_hms(2026, 11, 20, 22, 13, 0)
            .unwrap();
        let line = format_entry(
            &AccessEntry {
                ip: "127.0.0.1".parse().unwrap(),
                user: None,
                request_line: "GET /live.mp3 HTTP/1.1",
                status: 200,
                bytes: 123_456,
                referer: None,
                agent: Some("VLC/3.0 \"x\""),
                duration_secs: 42,
            },
            now,
        );
        let offset = now.format("%z").to_string();
        assert_eq!(
            line,
            format!("127.0.0.1 - - [20/Nov/2026:22:13:00 {offset}] \"GET /live.mp3 HTTP/1.1\" 200 123456 \"-\" \"VLC/3.0 'x'\" 42")
        );
    }
}
