//! The `<pidfile>` of an icecast.xml (`[paths] pidfile`): the process id written once the
//! server listens, as one decimal line, and removed when it stops, as Icecast 2.4.4 `main.c`
//! does, so init scripts and panels can signal the server. A binary upgrade (SIGUSR2) hands the
//! sockets to a new process, which writes its own id: the old process then leaves the file
//! alone.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// A written pid file, removed on drop if it still holds this process's id.
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
    pid: u32,
}

impl PidFile {
    /// Writes this process's id to `path` (replacing any file there).
    ///
    /// Errors: the file cannot be written (a missing directory, no permission).
    pub fn write(path: &Path) -> anyhow::Result<PidFile> {
        let pid = std::process::id();
        std::fs::write(path, format!("{pid}\n"))
            .with_context(|| format!("cannot write the pid file {}", path.display()))?;
        Ok(PidFile {
            path: path.to_owned(),
            pid,
        })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path)
            .is_ok_and(|t| t.trim().parse::<u32>() == Ok(self.pid));
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_then_removed_unless_another_process_took_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("icecast.pid");
        let f = PidFile::write(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", std::process::id())
        );
        drop(f);
        assert!(!path.exists());
        let f = PidFile::write(&path).unwrap();
        std::fs::write(&path, "1\n").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "1\n");
    }
}
