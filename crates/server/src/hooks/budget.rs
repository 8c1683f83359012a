//! The hook budget of one server (`[hooks]`, issue 42): at most `max-concurrent` hooks run at
//! once (a fair `tokio::sync::Semaphore`), at most `queue` more wait, the rest are dropped,
//! counted in `throng_hooks_dropped_total` and logged at WARN at most once a second. The server
//! context owns one ([`crate::ctx::ServerCtx::hooks`]); `mod.rs` asks it for every hook.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::hooks::{HookConfig, HookLimits};
use crate::hooks::event::Event;

/// Least time between two WARN lines about dropped hooks.
pub const DROP_WARN_EVERY: Duration = Duration::from_secs(1);

/// The hook budget of one server (`[hooks]`): permits for running hooks, the count of hooks
/// waiting for one, and the drop counter. Its size follows `max-concurrent` of the
/// configuration in force: a larger value adds permits at once, a smaller one retires
/// permits as they come back.
#[derive(Debug)]
pub struct Budget {
    /// One permit per hook allowed to run now.
    permits: Arc<Semaphore>,
    /// `(permits in all, running and free; max-concurrent as last read)`.
    size: parking_lot::Mutex<(usize, usize)>,
    /// Hooks waiting for a permit.
    waiting: AtomicUsize,
    /// `throng_hooks_dropped_total`.
    dropped: Counter,
    /// Drops not yet reported in a WARN line.
    unreported: AtomicU64,
    /// When the last WARN line about drops was written.
    last_warn: parking_lot::Mutex<Option<Instant>>,
}

/// What [`Budget::admit`] decided for one hook.
pub(super) enum Admission {
    /// A permit was free: run now.
    Run(OwnedSemaphorePermit),
    /// Wait for a permit (counted in `waiting` until one is had).
    Wait,
    /// Running and waiting are both full: not run.
    Drop,
}

impl Budget {
    /// An empty budget counting its drops into `dropped`; it takes its size from `[hooks]` at
    /// its first hook.
    pub fn new(dropped: Counter) -> Budget {
        Budget {
            permits: Arc::new(Semaphore::new(0)),
            size: parking_lot::Mutex::new((0, 0)),
            waiting: AtomicUsize::new(0),
            dropped,
            unreported: AtomicU64::new(0),
            last_warn: parking_lot::Mutex::new(None),
        }
    }

    /// Makes the budget `max_concurrent` permits (at least 1): more are added at once, fewer
    /// are retired (free ones now, running ones as their hooks end).
    pub(super) fn resize(&self, max_concurrent: usize) {
        let want = max_concurrent.max(1);
        let mut size = self.size.lock();
        size.1 = want;
        if want > size.0 {
            self.permits.add_permits(want - size.0);
            size.0 = want;
        } else if want < size.0 {
            size.0 -= self.permits.forget_permits(size.0 - want);
        }
    }

    /// Decides whether a hook runs now, waits, or is dropped under `limits`.
    pub(super) fn admit(&self, limits: &HookLimits) -> Admission {
        self.resize(limits.max_concurrent);
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return Admission::Run(p);
        }
        let queued = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w < limits.queue).then_some(w + 1)
            });
        if queued.is_ok() {
            Admission::Wait
        } else {
            Admission::Drop
        }
    }

    /// Waits for a permit, for a hook [`Budget::admit`] told to wait (it leaves the waiting
    /// count once it has one); `None` only if the semaphore were closed (it never is).
    pub(super) async fn wait(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.permits.clone().acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        permit.ok()
    }

    /// Gives back the permit of a hook that ended, or retires it when the budget is to shrink.
    pub(super) fn release(&self, permit: OwnedSemaphorePermit) {
        let mut size = self.size.lock();
        if size.0 > size.1 {
            size.0 -= 1;
            permit.forget();
        }
    }

    /// Counts a dropped hook, and writes the WARN line if none was written for
    /// [`DROP_WARN_EVERY`].
    pub(super) fn dropped(&self, hook: &HookConfig, ev: &Event, limits: &HookLimits) {
        self.dropped.inc();
        self.unreported.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last_warn.lock();
        if last.is_some_and(|t| t.elapsed() < DROP_WARN_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        let count = self.unreported.swap(0, Ordering::Relaxed);
        tracing::warn!(
            trigger = ev.trigger,
            mount = %ev.mount,
            hook = %hook_name(hook),
            dropped = count,
            "hooks dropped: {} running and {} waiting ([hooks] max-concurrent, queue)",
            limits.max_concurrent.max(1),
            limits.queue
        );
    }

    /// Hooks waiting for a permit now.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

/// The hook's program or URL, for log lines.
pub(super) fn hook_name(hook: &HookConfig) -> String {
    match (&hook.exec, &hook.url) {
        (Some(exe), _) => exe.display().to_string(),
        (None, Some(url)) => url.clone(),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_concurrent: usize, queue: usize) -> HookLimits {
        HookLimits {
            max_concurrent,
            queue,
        }
    }

    fn run_now(a: Admission) -> OwnedSemaphorePermit {
        match a {
            Admission::Run(p) => p,
            Admission::Wait => panic!("waits"),
            Admission::Drop => panic!("dropped"),
        }
    }

    #[test]
    fn hooks_run_up_to_the_budget_then_wait_up_to_the_queue_then_are_dropped() {
        let dropped = Counter::default();
        let b = Budget::new(dropped.clone());
        let l = limits(2, 1);
        let first = run_now(b.admit(&l));
        let _second = run_now(b.admit(&l));
        assert!(matches!(b.admit(&l), Admission::Wait));
        assert_eq!(b.waiting(), 1);
        assert!(matches!(b.admit(&l), Admission::Drop));
        // A hook that ends gives its permit back.
        b.release(first);
        let _third = run_now(b.admit(&l));
        // `max-concurrent = 0` is read as 1; `queue = 0` never waits.
        let one = Budget::new(Counter::default());
        let _p = run_now(one.admit(&limits(0, 0)));
        assert!(matches!(one.admit(&limits(0, 0)), Admission::Drop));
        let ev = Event {
            trigger: "source-listener-attach",
            mount: "/live.mp3".into(),
            client_id: 7,
            connected_at: 1_700_000_000,
            duration: 0,
            role: "listener",
            username: String::new(),
            ip: Some("127.0.0.1".into()),
            agent: None,
            media_type: String::new(),
            stream: [None, None, None, None],
            public: false,
            hidden: false,
            title: String::new(),
        };
        b.dropped(&HookConfig::default(), &ev, &l);
        b.dropped(&HookConfig::default(), &ev, &l);
        assert_eq!(dropped.get(), 2, "each drop counted, whatever the log says");
    }

    #[test]
    fn a_smaller_budget_retires_permits_as_hooks_end() {
        let b = Budget::new(Counter::default());
        let wide = limits(3, 0);
        let p1 = run_now(b.admit(&wide));
        let p2 = run_now(b.admit(&wide));
        // A reload to 1: the free permit goes at once, the two running ones as they end.
        let narrow = limits(1, 0);
        assert!(matches!(b.admit(&narrow), Admission::Drop));
        b.release(p1);
        assert!(matches!(b.admit(&narrow), Admission::Drop), "retired");
        b.release(p2);
        let p3 = run_now(b.admit(&narrow));
        assert!(matches!(b.admit(&narrow), Admission::Drop));
        // A reload to 4 adds permits at once.
        let _more: Vec<_> = (0..3).map(|_| run_now(b.admit(&limits(4, 0)))).collect();
        assert!(matches!(b.admit(&limits(4, 0)), Admission::Drop));
        drop(p3);
    }
}
