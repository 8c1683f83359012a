//! The `clients` count (Icecast `<clients>`): open connections of any kind against the limit.
//! [`Clients`] is its one owner: the accept loop admits a connection, and the [`ClientSlot`] it
//! gets releases the unit when dropped, wherever the connection ends (its handler task, or the
//! fan-out shard it was handed to with the listener).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;

/// Open connections of any kind, their limit, and the `throng_clients` gauge that mirrors them.
#[derive(Debug)]
pub struct Clients {
    open: AtomicI64,
    max: AtomicI64,
    gauge: Gauge,
}

/// The connection limit for `clients` as configured (`[limits] clients`): the value itself, or
/// for 0 the process's open-file limit less a reserve of 64 (at least 16).
pub fn limit_for(clients: usize) -> i64 {
    if clients == 0 {
        crate::net::listen::open_file_limit()
            .saturating_sub(64)
            .max(16) as i64
    } else {
        clients as i64
    }
}

impl Clients {
    /// A count with limit `max` (connections) reported through `gauge`.
    pub fn new(max: i64, gauge: Gauge) -> Arc<Clients> {
        Arc::new(Clients {
            open: AtomicI64::new(0),
            max: AtomicI64::new(max),
            gauge,
        })
    }

    /// Counts one accepted connection; the returned slot releases it. `over_limit` is true
    /// when the connection is past the limit (then it is to be answered 503 and closed).
    pub fn admit(self: &Arc<Self>) -> (ClientSlot, bool) {
        let n = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.gauge.inc();
        (
            ClientSlot {
                clients: self.clone(),
            },
            n > self.max(),
        )
    }

    /// Whether the limit is reached (connections open ≥ limit).
    pub fn is_full(&self) -> bool {
        self.open() >= self.max()
    }

    /// Connections open now.
    pub fn open(&self) -> i64 {
        self.open.load(Ordering::Relaxed)
    }

    /// The limit in force (connections).
    pub fn max(&self) -> i64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Changes the limit (a reload); connections already open past it stay.
    pub fn set_max(&self, max: i64) {
        self.max.store(max, Ordering::Relaxed);
    }

    fn release(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        self.gauge.dec();
    }
}

/// One unit of the `clients` count, released when dropped. It travels with its connection: a
/// listener's slot goes to the fan-out shard with it.
#[derive(Debug)]
pub struct ClientSlot {
    clients: Arc<Clients>,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.clients.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_released_once_when_dropped() {
        let gauge = Gauge::default();
        let c = Clients::new(2, gauge.clone());
        let (a, over_a) = c.admit();
        let (b, over_b) = c.admit();
        assert!(!over_a && !over_b);
        assert!(c.is_full());
        let (d, over_d) = c.admit();
        assert!(over_d, "the third of two is over the limit");
        assert_eq!((c.open(), gauge.get()), (3, 3));
        drop((a, b, d));
        assert_eq!((c.open(), gauge.get()), (0, 0));
        assert!(!c.is_full());
    }
}
