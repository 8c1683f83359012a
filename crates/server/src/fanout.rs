//! The fan-out engine's front: a fixed set of shard threads, and the choice of shard for each
//! new listener (the least loaded). Independent of where a mount's bytes come from.

use crate::shard::{NewListener, ShardConfig, ShardContext, ShardHandle};

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

    /// Listeners held by all shards.
    pub fn listeners(&self) -> usize {
        self.shards.iter().map(|s| s.load()).sum()
    }

    /// Closes every listener and stops the shards.
    pub fn shutdown(&self) {
        for s in &self.shards {
            s.shutdown();
        }
    }
}
