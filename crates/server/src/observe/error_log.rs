//! The error log (`[logging] error-log`, Icecast's `errorlog`): the file the server's own
//! diagnostics are appended to, as a writer that can be reopened at its path while the process
//! runs. The binary hands [`ErrorLog`] to `tracing_subscriber` as its writer (each event is one
//! `write` of a whole line, with `O_APPEND`), and [`ErrorLog::install`] keeps a process-wide
//! handle so that SIGUSR1 (`logs.rs`) can call [`reopen`] after logrotate renamed the file,
//! without reaching into the subscriber. Standard error (`-` or empty) is never reopened. With
//! `[logging] logsize` the file is rotated by size after a write ([`ErrorLog::set_rotation`],
//! `log_rotation.rs`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use thiserror::Error;

use crate::observe::log_rotation::Rotation;

/// Errors opening or reopening the error log.
#[derive(Debug, Error)]
#[error("cannot open the error log {}: {source}", path.display())]
pub struct ErrorLogError {
    /// The path.
    pub path: PathBuf,
    /// The error.
    pub source: std::io::Error,
}

/// The open file and its path.
#[derive(Debug)]
struct Target {
    path: PathBuf,
    file: File,
    /// Size-triggered rotation (`[logging] logsize`), if any.
    rotation: Option<Rotation>,
}

impl Target {
    /// Rotates the file when it has grown past the rotation's size: renamed, and a new file
    /// opened at the path. A failure is reported on standard error (the log itself is what
    /// failed) and the old file is kept.
    fn rotate_if_due(&mut self) {
        let Some(r) = self.rotation else { return };
        if !self.file.metadata().is_ok_and(|m| r.due(m.len())) {
            return;
        }
        match r.rotate(&self.path).map_err(|source| ErrorLogError {
            path: self.path.clone(),
            source,
        }) {
            Ok(_) => match open_file(&self.path) {
                Ok(f) => self.file = f,
                Err(e) => eprintln!("throng: error log not rotated: {e}"),
            },
            Err(e) => eprintln!("throng: error log not rotated: {e}"),
        }
    }
}

/// A reopenable error-log file; cheap to clone (every clone writes to the same file).
/// Implements [`Write`]: one `write` call per line keeps lines whole.
#[derive(Debug, Clone)]
pub struct ErrorLog(Arc<Mutex<Target>>);

/// The error log installed for this process, for [`reopen`].
static INSTALLED: OnceLock<ErrorLog> = OnceLock::new();

/// Opens `path` for appending (created with mode 0644 when missing).
fn open_file(path: &Path) -> Result<File, ErrorLogError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| ErrorLogError {
            path: path.to_owned(),
            source,
        })
}

impl ErrorLog {
    /// Opens the error log at `path` (appended to, created if missing).
    ///
    /// Errors: the file cannot be opened for appending.
    pub fn open(path: impl Into<PathBuf>) -> Result<ErrorLog, ErrorLogError> {
        let path = path.into();
        let file = open_file(&path)?;
        Ok(ErrorLog(Arc::new(Mutex::new(Target {
            path,
            file,
            rotation: None,
        }))))
    }

    /// Opens the error log at `path` and makes it the process's, the one [`reopen`] reopens.
    /// A second call opens the file but leaves the first one installed.
    ///
    /// Errors: the file cannot be opened for appending.
    pub fn install(path: impl Into<PathBuf>) -> Result<ErrorLog, ErrorLogError> {
        let log = ErrorLog::open(path)?;
        Ok(INSTALLED.get_or_init(|| log.clone()).clone())
    }

    /// The path this log writes to.
    pub fn path(&self) -> PathBuf {
        self.0.lock().path.clone()
    }

    /// Reopens the file at its path: after a rename (logrotate), new lines go to a new file
    /// there.
    ///
    /// Errors: the file cannot be opened; the log keeps writing to the old file.
    pub fn reopen(&self) -> Result<(), ErrorLogError> {
        let path = self.path();
        self.reopen_at(path)
    }

    /// Switches the log to `path` (e.g. after a configuration reload changed it).
    ///
    /// Errors: the file cannot be opened; the log keeps writing to the old file.
    pub fn reopen_at(&self, path: impl Into<PathBuf>) -> Result<(), ErrorLogError> {
        let path = path.into();
        let file = open_file(&path)?;
        let mut t = self.0.lock();
        t.path = path;
        t.file = file;
        Ok(())
    }

    /// Sets the size-triggered rotation (`None`: none), checked after each write.
    pub fn set_rotation(&self, rotation: Option<Rotation>) {
        self.0.lock().rotation = rotation;
    }
}

impl Write for ErrorLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut t = self.0.lock();
        let n = t.file.write(buf)?;
        t.rotate_if_due();
        Ok(n)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let mut t = self.0.lock();
        t.file.write_all(buf)?;
        t.rotate_if_due();
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().file.flush()
    }
}

/// Reopens the process's error log ([`ErrorLog::install`]) at its path; returns that path, or
/// `None` when diagnostics go to standard error (nothing to reopen).
///
/// Errors: the file cannot be opened; the log keeps writing to the old file.
pub fn reopen() -> Result<Option<PathBuf>, ErrorLogError> {
    match INSTALLED.get() {
        Some(log) => log.reopen().map(|()| Some(log.path())),
        None => Ok(None),
    }
}

/// The process's error log, if one is installed (for a reload that changes its path).
pub fn installed() -> Option<&'static ErrorLog> {
    INSTALLED.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopen_after_rename_writes_to_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let (path, rotated) = (dir.path().join("error.log"), dir.path().join("error.log.1"));
        let mut log = ErrorLog::open(&path).unwrap();
        let mut clone = log.clone();
        log.write_all(b"one\n").unwrap();
        std::fs::rename(&path, &rotated).unwrap();
        clone.write_all(b"two\n").unwrap();
        log.reopen().unwrap();
        clone.write_all(b"three\n").unwrap();
        assert_eq!(std::fs::read_to_string(&rotated).unwrap(), "one\ntwo\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
        assert!(log.reopen_at(dir.path().join("no/such/dir.log")).is_err());
        log.write_all(b"four\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\nfour\n");
    }
}
