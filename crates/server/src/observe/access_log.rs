//! The access log: one line per finished request in Combined Log Format plus the connection's
//! duration in seconds, as Icecast 2.4.4 `logging.c:logging_access` writes it:
//! `ip - user [20/Nov/2026:22:13:00 +0000] "GET /live.mp3 HTTP/1.1" 200 123456 "referer" "agent" 42`.
//! The line of an audience session (ICY listener, HLS session, WHEP viewer, event subscriber),
//! written when it ends, has one more field after the duration: its end reason, in the one
//! vocabulary of `audience::EndReason` (`client:hung-up`, `policy:too-slow`,
//! `operator:killed`, `upstream:source-ended`, ...). Parsers of Icecast's format read the
//! fields they know and ignore a trailing one.
//!
//! Lines are formatted where the request ends and written by one background thread through a
//! bounded queue, so a slow disk never stalls a fan-out shard; the queue is flushed at shutdown.
//! Every line passes through one redaction ([`redact_request_line`]): credentials sent in a query
//! string (`/admin.cgi?pass=`, `/admin/buildm3u?password=`, tokens, keys) become `***`, and
//! the user info of an absolute-form target is dropped, so the file never holds a secret. The
//! file can be reopened at its path ([`AccessLog::reopen`], SIGUSR1 after logrotate moved it) or
//! switched to another one ([`AccessLog::reopen_at`]).

use crate::observe::log_rotation::Rotation;
use std::borrow::Cow;
use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// For the end of an audience session (ICY listener, HLS session, WHEP viewer, event
    /// subscriber): its end reason key (`audience::EndReason::key`, e.g. `client:hung-up`),
    /// written as the line's last field; `None` for other requests.
    pub end: Option<&'static str>,
}

/// Formats one line (no trailing newline) stamped with `now`; the request line is redacted
/// ([`redact_request_line`]), and `"`, CR and LF in any field become `'`.
pub fn format_entry(e: &AccessEntry<'_>, now: chrono::DateTime<chrono::Local>) -> String {
    let clean = |s: &str| s.replace(['"', '\n', '\r'], "'");
    let mut line = format!(
        "{} - {} [{}] \"{}\" {} {} \"{}\" \"{}\" {}",
        e.ip,
        e.user.map_or("-".to_owned(), clean),
        now.format("%d/%b/%Y:%H:%M:%S %z"),
        clean(&redact_request_line(e.request_line)),
        e.status,
        e.bytes,
        e.referer.map_or("-".to_owned(), clean),
        e.agent.map_or("-".to_owned(), clean),
        e.duration_secs
    );
    if let Some(end) = e.end {
        line.push(' ');
        line.push_str(end);
    }
    line
}

/// What a redacted value is written as.
pub const REDACTED: &str = "***";

/// Query parameter names (compared without regard to case, after percent-decoding) whose
/// values are credentials: Icecast's `pass` (`/admin.cgi`) and `password` (`/admin/buildm3u`,
/// `/admin/manageauth`), and the usual names of tokens and keys. Any name containing `pass`,
/// `secret` or `token` is a credential too ([`is_secret_param`]).
pub const SECRET_PARAMS: &[&str] = &[
    "pass",
    "password",
    "passwd",
    "pwd",
    "token",
    "secret",
    "key",
    "apikey",
    "api_key",
    "auth",
    "authorization",
    "sig",
    "signature",
];

/// Whether query parameter `name` (raw, possibly percent-encoded) carries a credential.
pub fn is_secret_param(name: &str) -> bool {
    let name = percent_encoding::percent_decode_str(&name.replace('+', " "))
        .decode_utf8_lossy()
        .trim()
        .to_ascii_lowercase();
    SECRET_PARAMS.contains(&name.as_str())
        || ["pass", "secret", "token"].iter().any(|w| name.contains(w))
}

/// Redacts the credentials of a request target (`/path?query`, or an absolute
/// `http://user:pw@host/path?query`): the value of every query parameter that
/// [`is_secret_param`] names becomes [`REDACTED`] (`pass=SECRET` → `pass=***`, also when empty),
/// and an absolute URL's user info becomes `***@`. Everything else is kept byte for byte; a
/// target without a secret is returned borrowed.
pub fn redact_target(target: &str) -> Cow<'_, str> {
    let (before_query, query) = match target.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (target, None),
    };
    let mut changed = false;
    let mut head = Cow::Borrowed(before_query);
    if let Some(scheme_end) = before_query.find("://") {
        let authority_start = scheme_end + 3;
        let authority_end = before_query[authority_start..]
            .find('/')
            .map_or(before_query.len(), |i| authority_start + i);
        if let Some(at) = before_query[authority_start..authority_end].rfind('@') {
            head = Cow::Owned(format!(
                "{}{REDACTED}{}",
                &before_query[..authority_start],
                &before_query[authority_start + at..]
            ));
            changed = true;
        }
    }
    let mut out_query = String::new();
    if let Some(q) = query {
        for (i, pair) in q.split('&').enumerate() {
            if i > 0 {
                out_query.push('&');
            }
            match pair.split_once('=') {
                Some((name, _)) if is_secret_param(name) => {
                    out_query.push_str(name);
                    out_query.push('=');
                    out_query.push_str(REDACTED);
                    changed = true;
                }
                _ => out_query.push_str(pair),
            }
        }
    }
    if !changed {
        return Cow::Borrowed(target);
    }
    match query {
        Some(_) => Cow::Owned(format!("{head}?{out_query}")),
        None => Cow::Owned(head.into_owned()),
    }
}

/// Redacts a request line `METHOD target HTTP/1.x` (or a bare target, or `-`) with
/// [`redact_target`]; the method and version are kept.
pub fn redact_request_line(line: &str) -> Cow<'_, str> {
    let mut parts = line.splitn(3, ' ');
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return redact_target(line);
    };
    match redact_target(target) {
        Cow::Borrowed(_) => Cow::Borrowed(line),
        Cow::Owned(t) => Cow::Owned(match parts.next() {
            Some(version) => format!("{method} {t} {version}"),
            None => format!("{method} {t}"),
        }),
    }
}

/// Lines queued for the writer at most; past that, lines are dropped (and counted) rather than
/// letting a blocked disk or pipe grow memory without bound or stall a fan-out shard.
pub const QUEUE_LINES: usize = 65_536;

enum Message {
    Line(String),
    /// Write everything queued before this, then acknowledge.
    Flush(mpsc::Sender<()>),
}

/// Where lines go: nowhere, standard output, or a file opened for appending.
enum Output {
    Off,
    Stdout(std::io::Stdout),
    File(std::io::BufWriter<std::fs::File>),
}

impl Output {
    /// Opens `dest` as [`AccessLog::open`] describes it.
    fn open(dest: &str) -> std::io::Result<Output> {
        Ok(match dest {
            "" => Output::Off,
            "-" => Output::Stdout(std::io::stdout()),
            path => Output::File(std::io::BufWriter::with_capacity(
                64 * 1024,
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            )),
        })
    }

    /// Writes one line and its newline (buffered for a file: flushed by [`Output::flush`]).
    /// A file's buffer stays bounded when writes fail (a full disk): the line is not kept.
    fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        match self {
            Output::Off => Ok(()),
            Output::Stdout(out) => out.lock().write_all(format!("{line}\n").as_bytes()),
            Output::File(out) => out
                .write_all(line.as_bytes())
                .and_then(|()| out.write_all(b"\n")),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::Off => Ok(()),
            Output::Stdout(out) => out.flush(),
            Output::File(out) => out.flush(),
        }
    }

    /// Rotates a file at `dest` past `rotation`'s size (after a flush): renamed, and a new file
    /// opened there. A failure is logged and the old file kept.
    fn rotate_if_due(&mut self, dest: &str, rotation: Rotation) {
        let Output::File(out) = self else { return };
        if !out
            .get_ref()
            .metadata()
            .is_ok_and(|m| rotation.due(m.len()))
        {
            return;
        }
        let path = std::path::Path::new(dest);
        match rotation
            .rotate(path)
            .and_then(|to| Ok((Output::open(dest)?, to)))
        {
            Ok((new, to)) => {
                tracing::info!(log = dest, to = %to.display(), "access log rotated (logsize)");
                *self = new;
            }
            Err(e) => tracing::error!(log = dest, "access log not rotated: {e}"),
        }
    }
}

/// Whether the access log is failing, so a full disk gives one error line, not one per
/// request, and one line when writing works again.
#[derive(Default)]
struct WriteHealth {
    /// Set from the first failed write until a flush succeeds again.
    failing: bool,
    /// Lines that went to a failing log since the error was reported.
    lost: u64,
}

impl WriteHealth {
    /// Records the outcome of writing `lines` lines to `dest` (and flushing), logging the first
    /// failure and the recovery.
    fn record(&mut self, dest: &str, lines: u64, outcome: std::io::Result<()>) {
        match outcome {
            Err(e) => {
                if !self.failing {
                    tracing::error!(
                        access_log = %dest,
                        "cannot write the access log: {e}; its lines are lost until it can be \
                         written again (reported once)"
                    );
                    self.failing = true;
                }
                self.lost += lines;
            }
            Ok(()) if self.failing => {
                tracing::warn!(
                    access_log = %dest,
                    lost = self.lost,
                    "the access log can be written again"
                );
                *self = WriteHealth::default();
            }
            Ok(()) => {}
        }
    }
}

/// The state shared by every handle and the writer thread.
struct Shared {
    /// The destination as configured (`""`, `-` or a path) and its open output. The writer
    /// thread holds the lock while it writes a batch; [`AccessLog::reopen_at`] swaps it.
    out: parking_lot::Mutex<(String, Output)>,
    /// Whether lines are wanted at all (false for `""`): skips formatting when off.
    enabled: AtomicBool,
    /// Lines dropped because the queue was full.
    dropped: AtomicU64,
    /// Size-triggered rotation of a file destination (`[logging] logsize`).
    rotation: parking_lot::Mutex<Option<Rotation>>,
}

/// A handle to the access-log writer thread; cheap to clone. Every line goes through
/// [`redact_request_line`], so no credential sent in a query string reaches the file.
#[derive(Clone)]
pub struct AccessLog {
    tx: mpsc::SyncSender<Message>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessLog")
            .field("enabled", &self.shared.enabled.load(Ordering::Relaxed))
            .finish()
    }
}

impl AccessLog {
    /// Opens `dest`: a file path (appended to, created if missing), `-` for standard output, or
    /// `""` for no log, and starts the writer thread.
    ///
    /// Errors: the file cannot be opened for appending, or the writer thread cannot start.
    pub fn open(dest: &str) -> std::io::Result<AccessLog> {
        let out = Output::open(dest)?;
        let shared = Arc::new(Shared {
            enabled: AtomicBool::new(!dest.is_empty()),
            out: parking_lot::Mutex::new((dest.to_owned(), out)),
            dropped: AtomicU64::new(0),
            rotation: parking_lot::Mutex::new(None),
        });
        let (tx, rx) = mpsc::sync_channel::<Message>(QUEUE_LINES);
        let writer = shared.clone();
        std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || {
                let mut health = WriteHealth::default();
                while let Ok(msg) = rx.recv() {
                    let mut out = writer.out.lock();
                    let out = &mut *out;
                    match msg {
                        Message::Line(line) => {
                            let mut result = out.1.write_line(&line);
                            let mut lines = 1;
                            // Write a backlog in one go, then flush once; a flush request
                            // met on the way is answered after that flush (it was dropped
                            // unanswered, so `flush` could return before its lines were
                            // written).
                            let mut acks = Vec::new();
                            while let Ok(more) = rx.try_recv() {
                                match more {
                                    Message::Line(more) => {
                                        result = result.and(out.1.write_line(&more));
                                        lines += 1;
                                    }
                                    Message::Flush(ack) => {
                                        acks.push(ack);
                                        break;
                                    }
                                }
                            }
                            health.record(&out.0, lines, result.and(out.1.flush()));
                            let rotation = *writer.rotation.lock();
                            if let Some(r) = rotation {
                                out.1.rotate_if_due(&out.0, r);
                            }
                            for ack in acks {
                                let _ = ack.send(());
                            }
                        }
                        Message::Flush(ack) => {
                            health.record(&out.0, 0, out.1.flush());
                            let _ = ack.send(());
                        }
                    }
                }
            })?;
        Ok(AccessLog { tx, shared })
    }

    /// Sets the size-triggered rotation of a file destination (`None`: none), checked after
    /// each batch of lines is written.
    pub fn set_rotation(&self, rotation: Option<Rotation>) {
        *self.shared.rotation.lock() = rotation;
    }

    /// Reopens the log at its current destination: after logrotate renamed the file, the next
    /// lines go to a new file at the configured path (SIGUSR1). Lines already written stay in
    /// the renamed file; standard output and a disabled log stay as they are. Returns
    /// the destination.
    ///
    /// Errors: the file cannot be opened; the log then keeps writing to the old file.
    pub fn reopen(&self) -> std::io::Result<String> {
        let dest = self.shared.out.lock().0.clone();
        self.reopen_at(&dest)?;
        Ok(dest)
    }

    /// Switches the log to `dest` (a path, `-` or `""`, as [`AccessLog::open`]), e.g. when a
    /// configuration reload changed `[logging] access-log`. The old file is flushed and closed;
    /// lines not yet written go to the new destination. Safe to call from any thread.
    ///
    /// Errors: the file cannot be opened; the log then keeps its current destination.
    pub fn reopen_at(&self, dest: &str) -> std::io::Result<()> {
        let new = Output::open(dest)?;
        let mut out = self.shared.out.lock();
        // A failure here is the old file's; the writer thread reports the new one's.
        let _ = out.1.flush();
        *out = (dest.to_owned(), new);
        self.shared
            .enabled
            .store(!dest.is_empty(), Ordering::Relaxed);
        Ok(())
    }

    /// Queues one line (redacted, see [`redact_request_line`]); drops it (counting) if the
    /// queue is full.
    pub fn log(&self, e: &AccessEntry<'_>) {
        if self.shared.enabled.load(Ordering::Relaxed) {
            let line = format_entry(e, chrono::Local::now());
            if self.tx.try_send(Message::Line(line)).is_err() {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Lines dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Waits (at most `timeout`) until every line queued so far is written.
    pub fn flush(&self, timeout: std::time::Duration) {
        let (ack_tx, ack_rx) = mpsc::channel();
        if self.tx.send(Message::Flush(ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(timeout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn flush_returns_after_a_backlog_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        for round in 0..20 {
            let log = AccessLog::open(path.to_str().unwrap()).unwrap();
            for i in 0..500 {
                log.log(&AccessEntry {
                    ip: "127.0.0.1".parse().unwrap(),
                    user: None,
                    request_line: "GET /x HTTP/1.1",
                    status: 200,
                    bytes: i,
                    referer: None,
                    agent: None,
                    duration_secs: 0,
                    end: None,
                });
            }
            log.flush(std::time::Duration::from_secs(10));
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            assert_eq!(lines, 500 * (round + 1), "round {round}");
        }
    }

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
                end: None,
            },
            now,
        );
        let offset = now.format("%z").to_string();
        assert_eq!(
            line,
            format!("127.0.0.1 - - [20/Nov/2026:22:13:00 {offset}] \"GET /live.mp3 HTTP/1.1\" 200 123456 \"-\" \"VLC/3.0 'x'\" 42")
        );
    }

    fn redacted(target: &str) -> String {
        redact_target(target).into_owned()
    }

    #[test]
    fn credentials_in_the_query_are_redacted() {
        assert_eq!(
            redacted("/admin.cgi?mode=updinfo&pass=SECRET&song=x"),
            "/admin.cgi?mode=updinfo&pass=***&song=x"
        );
        assert_eq!(
            redacted("/admin/buildm3u?mount=/a&username=bob&password=SECRET"),
            "/admin/buildm3u?mount=/a&username=bob&password=***"
        );
        assert_eq!(redacted("/x?pass="), "/x?pass=***");
        for name in [
            "passwd",
            "pwd",
            "token",
            "secret",
            "key",
            "auth",
            "PASS",
            "Password",
            "admin_pass",
            "relay-password",
            "x-token",
            "client_secret",
            "pa%73s",
            "api_key",
        ] {
            assert_eq!(
                redacted(&format!("/m?a=1&{name}=SECRET&b=2")),
                format!("/m?a=1&{name}=***&b=2"),
                "{name}"
            );
        }
    }

    #[test]
    fn other_targets_are_kept_byte_for_byte() {
        for t in [
            "/live.mp3",
            "/admin/metadata?mount=/live.mp3&mode=updinfo&song=A%20%26%20B",
            "/m?song=password&keyboard=1&monkey=2&mode",
            "/m?&&=x&pass",
            "/m?",
            "-",
        ] {
            assert!(matches!(redact_target(t), Cow::Borrowed(_)), "{t}");
            assert_eq!(redacted(t), t);
        }
    }

    #[test]
    fn user_info_of_an_absolute_target_is_redacted() {
        assert_eq!(
            redacted("http://source:SECRET@host:8000/live.mp3?pass=SECRET"),
            "http://***@host:8000/live.mp3?pass=***"
        );
        assert_eq!(redacted("http://host/a@b"), "http://host/a@b");
    }

    #[test]
    fn request_lines_keep_method_and_version() {
        assert_eq!(
            redact_request_line("GET /admin.cgi?pass=SECRET&mode=updinfo HTTP/1.0"),
            "GET /admin.cgi?pass=***&mode=updinfo HTTP/1.0"
        );
        assert_eq!(redact_request_line("-"), "-");
        assert_eq!(redact_request_line("GET /?token=t"), "GET /?token=***");
    }

    #[test]
    fn the_written_line_holds_no_secret() {
        let line = format_entry(
            &AccessEntry {
                ip: "127.0.0.1".parse().unwrap(),
                user: Some("admin"),
                request_line: "GET /admin/metadata?mount=/a&pass=SECRET&song=x HTTP/1.1",
                status: 200,
                bytes: 1,
                referer: None,
                agent: Some("curl/8"),
                duration_secs: 0,
                end: None,
            },
            chrono::Local::now(),
        );
        assert!(!line.contains("SECRET"), "{line}");
        assert!(line.contains("\"GET /admin/metadata?mount=/a&pass=***&song=x HTTP/1.1\""));
    }

    #[test]
    fn reopen_moves_new_lines_to_a_new_file_and_reopen_at_switches() {
        let dir = tempfile::tempdir().unwrap();
        let (path, rotated, other) = (
            dir.path().join("access.log"),
            dir.path().join("access.log.1"),
            dir.path().join("other.log"),
        );
        let log = AccessLog::open(path.to_str().unwrap()).unwrap();
        let entry = |line: &'static str| AccessEntry {
            ip: "127.0.0.1".parse().unwrap(),
            user: None,
            request_line: line,
            status: 200,
            bytes: 0,
            referer: None,
            agent: None,
            duration_secs: 0,
            end: None,
        };
        let wait = std::time::Duration::from_secs(5);
        log.log(&entry("GET /before HTTP/1.1"));
        log.flush(wait);
        std::fs::rename(&path, &rotated).unwrap();
        log.log(&entry("GET /renamed HTTP/1.1"));
        log.flush(wait);
        assert_eq!(log.reopen().unwrap(), path.to_str().unwrap());
        log.log(&entry("GET /after HTTP/1.1"));
        log.flush(wait);
        log.reopen_at(other.to_str().unwrap()).unwrap();
        log.log(&entry("GET /other HTTP/1.1"));
        log.flush(wait);
        log.reopen_at("").unwrap();
        log.log(&entry("GET /off HTTP/1.1"));
        log.flush(wait);
        let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
        let (old, new, other) = (read(&rotated), read(&path), read(&other));
        assert!(old.contains("/before") && old.contains("/renamed"), "{old}");
        assert!(!old.contains("/after"), "{old}");
        assert!(new.contains("/after") && !new.contains("/before"), "{new}");
        assert!(
            other.contains("/other") && !other.contains("/after"),
            "{other}"
        );
        assert!(!other.contains("/off") && !new.contains("/off"));
        assert!(log.reopen_at("/nonexistent-dir/x.log").is_err());
    }
}
