//! Size-triggered rotation of the access and error logs, as Icecast's `<logsize>` and
//! `<logarchive>` (`[logging] logsize`, `logarchive`): once a log file grows past the size, it
//! is renamed to `NAME.old` (replacing the previous one), or with `logarchive` to
//! `NAME.YYYYMMDD_HHMMSS` (kept), and a new file is opened at the configured path, as Icecast
//! 2.4.4 `log.c:_log_open` does. [`Rotation`] is the pure rule; the writers call
//! [`Rotation::rotate`] when [`Rotation::due`] says so.

use std::path::{Path, PathBuf};

use crate::config::Logging;

/// The rotation rule of a log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Size in bytes past which the file is rotated.
    pub max_bytes: u64,
    /// Archive with a timestamp (`NAME.YYYYMMDD_HHMMSS`) instead of `NAME.old`.
    pub archive: bool,
}

impl Rotation {
    /// The rule of `[logging]`: `None` without `logsize` (or with 0: no rotation).
    pub fn from_logging(l: &Logging) -> Option<Rotation> {
        l.logsize.filter(|&kb| kb > 0).map(|kb| Rotation {
            max_bytes: kb.saturating_mul(1024),
            archive: l.logarchive,
        })
    }

    /// Whether a file of `size` bytes is rotated now.
    pub fn due(&self, size: u64) -> bool {
        size > self.max_bytes
    }

    /// The name the file at `path` is renamed to at local time `now`.
    pub fn archive_path(&self, path: &Path, now: chrono::NaiveDateTime) -> PathBuf {
        let suffix = if self.archive {
            now.format("%Y%m%d_%H%M%S").to_string()
        } else {
            "old".to_owned()
        };
        let mut name = path.as_os_str().to_owned();
        name.push(".");
        name.push(suffix);
        PathBuf::from(name)
    }

    /// Renames the file at `path` to its [`Rotation::archive_path`] of now; the caller then
    /// opens a new file at `path`. Returns the new name.
    ///
    /// Errors: the rename failed (the caller keeps writing to the old file).
    pub fn rotate(&self, path: &Path) -> std::io::Result<PathBuf> {
        let to = self.archive_path(path, chrono::Local::now().naive_local());
        std::fs::rename(path, &to)?;
        Ok(to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logging(logsize: Option<u64>, logarchive: bool) -> Logging {
        Logging {
            logsize,
            logarchive,
            ..Logging::default()
        }
    }

    #[test]
    fn logsize_is_kilobytes_and_zero_is_off() {
        let r = Rotation::from_logging(&logging(Some(10_000), false)).unwrap();
        assert_eq!(r.max_bytes, 10_240_000);
        assert!(!r.due(10_240_000) && r.due(10_240_001));
        assert_eq!(Rotation::from_logging(&logging(Some(0), true)), None);
        assert_eq!(Rotation::from_logging(&logging(None, true)), None);
    }

    #[test]
    fn archived_names_as_icecast() {
        let at = chrono::NaiveDate::from_ymd_opt(2026, 3, 4)
            .unwrap()
            .and_hms_opt(5, 6, 7)
            .unwrap();
        let p = Path::new("/var/log/access.log");
        let old = Rotation::from_logging(&logging(Some(1), false)).unwrap();
        assert_eq!(
            old.archive_path(p, at),
            Path::new("/var/log/access.log.old")
        );
        let kept = Rotation::from_logging(&logging(Some(1), true)).unwrap();
        assert_eq!(
            kept.archive_path(p, at),
            Path::new("/var/log/access.log.20260304_050607")
        );
    }

    #[test]
    fn rotate_renames_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("error.log");
        std::fs::write(&p, "x").unwrap();
        let r = Rotation::from_logging(&logging(Some(1), false)).unwrap();
        let to = r.rotate(&p).unwrap();
        assert!(!p.exists());
        assert_eq!(std::fs::read_to_string(to).unwrap(), "x");
    }
}
