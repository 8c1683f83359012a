//! The intro cache: intro files (`[[mount]] intro`, Icecast `<intro>`) read once and shared by
//! every listener that plays them, so a reconnect storm holds one copy per file, not one per
//! listener.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;

/// Largest intro file accepted, in bytes (16 MiB).
pub const MAX_INTRO_BYTES: u64 = 16 << 20;

/// Intro files by path, read on first use.
#[derive(Debug, Default)]
pub struct IntroCache {
    intros: parking_lot::Mutex<HashMap<PathBuf, Bytes>>,
    /// Held while an intro is read, so listeners arriving together (a reconnect storm after a
    /// restart) wait for one read instead of each reading, and holding, a copy.
    loading: tokio::sync::Mutex<()>,
}

impl IntroCache {
    /// Forgets every cached intro (a reload): the next listener reads the files again.
    pub fn clear(&self) {
        self.intros.lock().clear();
    }

    /// The intro file at `path` (read once, then cached and shared; at most
    /// [`MAX_INTRO_BYTES`]).
    ///
    /// Errors: the file cannot be read or is larger than [`MAX_INTRO_BYTES`].
    pub async fn get(&self, path: &Path) -> std::io::Result<Bytes> {
        if let Some(b) = self.intros.lock().get(path) {
            return Ok(b.clone());
        }
        let _loading = self.loading.lock().await;
        if let Some(b) = self.intros.lock().get(path) {
            return Ok(b.clone());
        }
        let meta = tokio::fs::metadata(path).await?;
        if meta.len() > MAX_INTRO_BYTES {
            return Err(std::io::Error::other("intro larger than 16 MiB"));
        }
        let b = Bytes::from(tokio::fs::read(path).await?);
        self.intros.lock().insert(path.to_owned(), b.clone());
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_arriving_together_share_one_intro() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("intro.mp3");
            std::fs::write(&path, vec![1u8; 256 * 1024]).unwrap();
            let cache = std::sync::Arc::new(IntroCache::default());
            // A cold cache and many listeners at once (a reconnect storm after a restart): one
            // buffer, not one copy each.
            let tasks: Vec<_> = (0..32)
                .map(|_| {
                    let (cache, path) = (cache.clone(), path.clone());
                    tokio::spawn(async move { cache.get(&path).await.unwrap() })
                })
                .collect();
            let mut ptrs = std::collections::HashSet::new();
            for t in tasks {
                ptrs.insert(t.await.unwrap().as_ptr() as usize);
            }
            assert_eq!(ptrs.len(), 1);
        });
    }

    #[test]
    fn an_oversized_or_missing_intro_is_an_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let cache = IntroCache::default();
            assert!(cache
                .get(Path::new("/nonexistent/intro.mp3"))
                .await
                .is_err());
        });
    }
}
