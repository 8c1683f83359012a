//! The `htpasswd` authenticator of a mount, as Icecast 2.4.4 `auth_htpasswd.c`: listeners log
//! in with HTTP Basic credentials checked against a file, which is read again whenever its
//! modification time (or size) changes, so users can be added without a restart.
//!
//! A missing or unreadable file refuses everyone (Icecast keeps an empty user list) and is
//! logged once per change. Line formats: see [`throng_proto::htpasswd`]. Bcrypt and MD5-crypt
//! checks run on the blocking thread pool, so a burst of logins never stalls the runtime.
//!
//! The admin command `manageauth` lists, adds and deletes users here, as Icecast 2.4.4
//! `htpasswd_userlist`, `htpasswd_adduser` (append a line) and `htpasswd_deleteuser` (rewrite
//! the file through `<file>.tmp` and a rename). Changes of one file are serialized (one
//! `HtpasswdAuth` per file, shared by every mount naming it), run on the blocking pool, and
//! are seen by the next login at once.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use thiserror::Error;
use throng_proto::htpasswd::{
    user_line, without_user, Check, Htpasswd, PasswordHash, UserNameError,
};

/// Whether checking a password against `hash` costs enough CPU to belong on the blocking pool:
/// bcrypt (tens of ms), and MD5-crypt (`$apr1$`, Apache `htpasswd`'s default), whose 1000 MD5
/// rounds over the listener-supplied password take tens of ms for a password of a few KB.
fn is_costly(hash: &PasswordHash) -> bool {
    matches!(
        hash,
        PasswordHash::Bcrypt(_) | PasswordHash::Md5Crypt { .. }
    )
}

/// The file's identity as last read: modification time and size in bytes.
type Stamp = (SystemTime, u64);

#[derive(Debug, Default)]
struct Cache {
    /// `None` until read, or while the file is missing.
    stamp: Option<Stamp>,
    /// Whether the last look found the file unusable (to log that once).
    failing: bool,
    users: Arc<Htpasswd>,
}

/// How adding a user came out (Icecast 2.4.4 `AUTH_USERADDED`, `AUTH_USEREXISTS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// The line was appended.
    Added,
    /// The file already lists the user; nothing was written.
    Exists,
}

/// Why a user could not be added or deleted (Icecast 2.4.4 `AUTH_FAILED`, logged).
#[derive(Debug, Error)]
pub enum UserFileError {
    /// The user name cannot be written to the file.
    #[error(transparent)]
    UserName(#[from] UserNameError),
    /// `<file>.tmp` exists: another rewrite is under way or was interrupted (Icecast 2.4.4
    /// refuses the same way).
    #[error("temporary file {} exists, rejecting operation", .0.display())]
    TempFileExists(PathBuf),
    /// Reading or writing a file failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `append to`, `write`, `rename to`, ...).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The blocking task doing the file work panicked or was cancelled.
    #[error("htpasswd file task failed: {0}")]
    Task(String),
}

fn io_error(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> UserFileError {
    let path = path.to_owned();
    move |source| UserFileError::Io { op, path, source }
}

/// The temporary file of a rewrite: `<file>.tmp` (Icecast 2.4.4's name).
fn temp_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".tmp");
    PathBuf::from(p)
}

/// Appends `line` for `user` unless the file lists `user` already; a missing file is created
/// (as Icecast's `fopen(..., "ab")`). A last line without its newline gets one first, so the
/// new line does not run into it (Icecast would join them).
fn add_blocking(path: &Path, user: &str, line: &str) -> Result<AddOutcome, UserFileError> {
    let existing = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io_error("read", path)(e)),
    };
    let (users, _) = Htpasswd::parse(&throng_proto::http::decode_text(&existing));
    if users.hash_of(user).is_some() {
        return Ok(AddOutcome::Exists);
    }
    let mut data = Vec::with_capacity(line.len() + 1);
    if existing.last().is_some_and(|&b| b != b'\n') {
        data.push(b'\n');
    }
    data.extend_from_slice(line.as_bytes());
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_error("open", path))?;
    f.write_all(&data).map_err(io_error("append to", path))?;
    Ok(AddOutcome::Added)
}

/// Rewrites the file without `user` ([`without_user`]) through `<file>.tmp` (created
/// exclusively, given the file's permissions, synced) renamed over it. Returns whether the
/// user was listed.
fn delete_blocking(path: &Path, user: &str) -> Result<bool, UserFileError> {
    let text = std::fs::read(path).map_err(io_error("read", path))?;
    let (kept, found) = without_user(&text, user);
    let tmp = temp_path(path);
    let mut f = match OpenOptions::new().write(true).create_new(true).open(&tmp) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Err(UserFileError::TempFileExists(tmp))
        }
        Err(e) => return Err(io_error("create", &tmp)(e)),
    };
    let written = (|| {
        if let Ok(meta) = std::fs::metadata(path) {
            f.set_permissions(meta.permissions())
                .map_err(io_error("set permissions of", &tmp))?;
        }
        f.write_all(&kept).map_err(io_error("write", &tmp))?;
        f.sync_all().map_err(io_error("sync", &tmp))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(io_error("rename to", path))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(found)
}

/// The users of one htpasswd file, re-read when it changes.
#[derive(Debug)]
pub struct HtpasswdAuth {
    path: PathBuf,
    cache: tokio::sync::Mutex<Cache>,
    /// Held while the file is changed, so concurrent adds and deletes never lose lines.
    writing: tokio::sync::Mutex<()>,
}

impl HtpasswdAuth {
    /// An authenticator over `path` (read on first use).
    pub fn new(path: &Path) -> HtpasswdAuth {
        HtpasswdAuth {
            path: path.to_owned(),
            cache: Default::default(),
            writing: Default::default(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current users: the cached list, re-read first if the file's mtime or size changed.
    /// A file that is gone or not accessible yields no users (every listener is refused); one
    /// that exists but cannot be read keeps the previous users. Both are logged once.
    pub async fn users(&self) -> Arc<Htpasswd> {
        let mut cache = self.cache.lock().await;
        let meta = match tokio::fs::metadata(&self.path).await {
            Ok(m) => m,
            Err(e) => {
                if !cache.failing {
                    tracing::warn!(file = %self.path.display(), "htpasswd file unusable, refusing every listener: {e}");
                }
                *cache = Cache {
                    failing: true,
                    ..Cache::default()
                };
                return cache.users.clone();
            }
        };
        let stamp = (
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            meta.len(),
        );
        if cache.stamp == Some(stamp) {
            return cache.users.clone();
        }
        match tokio::fs::read(&self.path).await {
            Ok(bytes) => {
                let text = throng_proto::http::decode_text(&bytes);
                let (users, problems) = Htpasswd::parse(&text);
                for p in &problems {
                    tracing::warn!(file = %self.path.display(), line = p.line, "htpasswd line skipped or never matching: {}", p.what);
                }
                tracing::info!(file = %self.path.display(), users = users.len(), "htpasswd file read");
                *cache = Cache {
                    stamp: Some(stamp),
                    failing: false,
                    users: Arc::new(users),
                };
            }
            Err(e) => {
                if !cache.failing {
                    tracing::warn!(file = %self.path.display(), "cannot read htpasswd file, keeping the previous users: {e}");
                }
                cache.failing = true;
            }
        }
        cache.users.clone()
    }

    /// The user names of the current file, sorted byte-wise (Icecast 2.4.4
    /// `htpasswd_userlist`, in its user tree's `strcmp` order).
    pub async fn user_names(&self) -> Vec<String> {
        self.users()
            .await
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// Adds `user` with `password`: appends `user:md5hex(password)\n` unless the file lists
    /// `user` already (Icecast 2.4.4 `htpasswd_adduser`); creates a missing file.
    ///
    /// Errors: [`UserFileError::UserName`] when `user` contains `:`, a line break or NUL;
    /// [`UserFileError::Io`] when the file cannot be read or appended to.
    pub async fn add_user(&self, user: &str, password: &str) -> Result<AddOutcome, UserFileError> {
        let line = user_line(user, password)?;
        let (path, user) = (self.path.clone(), user.to_owned());
        self.change(move || add_blocking(&path, &user, &line)).await
    }

    /// Deletes every line of `user` by rewriting the file (Icecast 2.4.4
    /// `htpasswd_deleteuser`, which also drops comments and blank lines); returns whether the
    /// user was listed.
    ///
    /// Errors: [`UserFileError::TempFileExists`] when `<file>.tmp` exists;
    /// [`UserFileError::Io`] when the file cannot be read, or the temporary file written or
    /// renamed over it (the file is then unchanged).
    pub async fn delete_user(&self, user: &str) -> Result<bool, UserFileError> {
        let (path, user) = (self.path.clone(), user.to_owned());
        self.change(move || delete_blocking(&path, &user)).await
    }

    /// Runs the file change `f` on the blocking pool, one at a time, then drops the cached
    /// users so the next look reads the file again (its mtime may not have moved).
    async fn change<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, UserFileError> + Send + 'static,
    ) -> Result<T, UserFileError> {
        let _writing = self.writing.lock().await;
        let result = tokio::task::spawn_blocking(f)
            .await
            .unwrap_or_else(|e| Err(UserFileError::Task(e.to_string())));
        self.cache.lock().await.stamp = None;
        result
    }

    /// Checks `user` and `password` against the current file.
    pub async fn check(&self, user: &str, password: &str) -> Check {
        let users = self.users().await;
        if users.hash_of(user).is_some_and(is_costly) {
            let (user, password) = (user.to_owned(), password.to_owned());
            tokio::task::spawn_blocking(move || users.check(&user, &password))
                .await
                .unwrap_or(Check::WrongPassword)
        } else {
            users.check(user, password)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("throng-htpasswd-{name}"))
            .tempdir()
            .unwrap()
    }

    #[tokio::test]
    async fn add_list_delete_as_icecast_writes_the_file() {
        let dir = temp_dir("edit");
        let file = dir.path().join("users");
        let auth = HtpasswdAuth::new(&file);
        // A missing file is created by the first add.
        assert_eq!(
            auth.add_user("zed", "hackme").await.unwrap(),
            AddOutcome::Added
        );
        assert_eq!(auth.check("zed", "hackme").await, Check::Ok);
        assert_eq!(auth.add_user("ann", "pw").await.unwrap(), AddOutcome::Added);
        assert_eq!(
            auth.add_user("zed", "other").await.unwrap(),
            AddOutcome::Exists
        );
        assert_eq!(auth.user_names().await, vec!["ann", "zed"]);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!(
                "zed:23b4222d2613a2765d4d432d2d65e88e\nann:{}\n",
                throng_proto::htpasswd::md5_hex("pw")
            )
        );
        assert!(matches!(
            auth.add_user("a:b", "x").await,
            Err(UserFileError::UserName(_))
        ));
        assert!(auth.delete_user("zed").await.unwrap());
        assert!(!auth.delete_user("zed").await.unwrap());
        assert_eq!(auth.check("zed", "hackme").await, Check::NoSuchUser);
        assert_eq!(auth.user_names().await, vec!["ann"]);
        assert!(!temp_path(&file).exists());
    }

    #[tokio::test]
    async fn a_leftover_temp_file_refuses_deletes() {
        let dir = temp_dir("tmp");
        let file = dir.path().join("users");
        std::fs::write(&file, "fred:5ebe2294ecd0e0f08eab7690d2a6ee69").unwrap();
        std::fs::write(temp_path(&file), "").unwrap();
        let auth = HtpasswdAuth::new(&file);
        assert!(matches!(
            auth.delete_user("fred").await,
            Err(UserFileError::TempFileExists(_))
        ));
        assert_eq!(auth.check("fred", "secret").await, Check::Ok);
        // An add after a last line without newline starts a new line.
        assert_eq!(
            auth.add_user("bob", "hunter2").await.unwrap(),
            AddOutcome::Added
        );
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "fred:5ebe2294ecd0e0f08eab7690d2a6ee69\nbob:2ab96390c7dbe3439de74d0c9b0b1767\n"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_adds_keep_every_line() {
        let dir = temp_dir("race");
        let file = dir.path().join("users");
        let auth = Arc::new(HtpasswdAuth::new(&file));
        let tasks: Vec<_> = (0..32)
            .map(|i| {
                let auth = auth.clone();
                tokio::spawn(async move { auth.add_user(&format!("u{i:02}"), "pw").await })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap().unwrap(), AddOutcome::Added);
        }
        assert_eq!(auth.user_names().await.len(), 32);
        assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 32);
    }

    #[test]
    fn slow_hashes_are_checked_off_the_runtime() {
        // `htpasswd` writes `$apr1$` by default: 1000 MD5 rounds over a password that a client
        // can make a few KB long must not run on a runtime thread.
        assert!(is_costly(&PasswordHash::parse(
            "$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00"
        )));
        assert!(is_costly(&PasswordHash::parse(
            "$2y$05$bvIG6Nmid91Mu9RcmmWZfO5HJIMCT8riNW0hEp8f6/FuA2/mHZFpe"
        )));
        assert!(!is_costly(&PasswordHash::parse(
            "5f4dcc3b5aa765d61d8327deb882cf99"
        )));
        assert!(!is_costly(&PasswordHash::parse(
            "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="
        )));
    }
}
