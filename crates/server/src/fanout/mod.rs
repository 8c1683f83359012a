//! The fan-out engine's front: a fixed set of shard threads, and the choice of shard for each
//! new listener (the least loaded). Independent of where a mount's bytes come from.

pub mod cursor;
pub mod events;
pub mod handover;
pub mod seal;
pub mod shard;
pub mod whep;
pub mod write_path;

use std::sync::Arc;

use crate::audience::follow::MoveFilter;
use crate::audience::page::{take_page, Page};
use crate::audience::ListenerRow;
use crate::fanout::handover::{AdoptedListener, ExportedListener};
use crate::fanout::shard::{NewListener, ShardConfig, ShardContext, ShardHandle};
use crate::mount::live::Mount;

/// The shards.
#[derive(Debug)]
pub struct FanOut {
    shards: Vec<ShardHandle>,
}

impl FanOut {
    /// Starts `workers` shards (0: one per available core).
    ///
    /// Errors: a shard thread or poll cannot be created.
    pub fn start(workers: usize, cfg: ShardConfig, ctx: ShardContext) -> std::io::Result<FanOut> {
        let n = if workers == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            workers
        };
        let shards = (0..n)
            .map(|i| ShardHandle::spawn(i, cfg.clone(), ctx.clone()))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(FanOut { shards })
    }

    /// Hands a listener to the least-loaded shard.
    pub fn join(&self, l: NewListener) {
        let shard = self
            .shards
            .iter()
            .min_by_key(|s| s.load())
            .expect("at least one shard");
        shard.join(Box::new(l));
    }

    /// How many shards there are (the WHEP engines are as many).
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Listeners held by all shards.
    pub fn listeners(&self) -> usize {
        self.shards.iter().map(|s| s.load()).sum()
    }

    /// Moves every listener matching `filter` to `to`, each at its next frame boundary; returns
    /// how many were scheduled to move.
    pub async fn move_listeners(&self, filter: MoveFilter, to: Arc<Mount>) -> usize {
        let mut replies = Vec::new();
        for s in &self.shards {
            let (tx, rx) = tokio::sync::oneshot::channel();
            s.move_listeners(filter.clone(), to.clone(), Some(tx));
            replies.push(rx);
        }
        let mut n = 0;
        for r in replies {
            n += r.await.unwrap_or(0);
        }
        n
    }

    /// Like [`FanOut::move_listeners`], without waiting (for non-async callers).
    pub fn move_listeners_now(&self, filter: MoveFilter, to: Arc<Mount>) {
        for s in &self.shards {
            s.move_listeners(filter.clone(), to.clone(), None);
        }
    }

    /// The listeners of `mount` (or all) on `page`, sorted by id.
    pub async fn list(&self, mount: Option<&str>, page: Page) -> Vec<ListenerRow> {
        let mut replies = Vec::new();
        for s in &self.shards {
            let (tx, rx) = tokio::sync::oneshot::channel();
            s.list(mount.map(str::to_owned), page, tx);
            replies.push(rx);
        }
        let mut rows = Vec::new();
        for r in replies {
            rows = take_page(rows.into_iter().chain(r.await.unwrap_or_default()), page);
        }
        rows
    }

    /// Disconnects listener `id`; false if no shard holds it.
    pub async fn kill(&self, id: u64) -> bool {
        let mut replies = Vec::new();
        for s in &self.shards {
            let (tx, rx) = tokio::sync::oneshot::channel();
            s.kill(id, tx);
            replies.push(rx);
        }
        let mut found = false;
        for r in replies {
            found |= r.await.unwrap_or(false);
        }
        found
    }

    /// Takes every listener out of every shard (for a binary upgrade): each is deregistered
    /// and returned with its state; nothing is closed, logged or counted as a disconnect.
    pub async fn export_all(&self) -> Vec<ExportedListener> {
        let mut replies = Vec::new();
        for s in &self.shards {
            let (tx, rx) = tokio::sync::oneshot::channel();
            s.export(tx);
            replies.push(rx);
        }
        let mut all = Vec::new();
        for r in replies {
            all.extend(r.await.unwrap_or_default());
        }
        all
    }

    /// Hands a listener carried across an upgrade to the least-loaded shard, which continues
    /// it at its cursor.
    pub fn adopt(&self, l: AdoptedListener) {
        let shard = self
            .shards
            .iter()
            .min_by_key(|s| s.load())
            .expect("at least one shard");
        shard.adopt(Box::new(l));
    }

    /// Closes every listener, each ended with `why` (`EndReason::Shutdown`, or
    /// `EndReason::Drained` after a drain), and stops the shards.
    pub fn shutdown(&self, why: crate::audience::EndReason) {
        for s in &self.shards {
            s.shutdown(why);
        }
    }
}
