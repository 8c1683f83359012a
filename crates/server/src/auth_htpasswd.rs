//! The `htpasswd` authenticator of a mount, as Icecast 2.4.4 `auth_htpasswd.c`: listeners log
//! in with HTTP Basic credentials checked against a file, which is read again whenever its
//! modification time (or size) changes, so users can be added without a restart.
//!
//! A missing or unreadable file refuses everyone (Icecast keeps an empty user list) and is
//! logged once per change. Line formats: see [`throng_proto::htpasswd`]. Bcrypt and MD5-crypt
//! checks run on the blocking thread pool, so a burst of logins never stalls the runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use throng_proto::htpasswd::{Check, Htpasswd, PasswordHash};

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

/// The users of one htpasswd file, re-read when it changes.
#[derive(Debug)]
pub struct HtpasswdAuth {
    path: PathBuf,
    cache: tokio::sync::Mutex<Cache>,
}

impl HtpasswdAuth {
    /// An authenticator over `path` (read on first use).
    pub fn new(path: &Path) -> HtpasswdAuth {
        HtpasswdAuth {
            path: path.to_owned(),
            cache: Default::default(),
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
