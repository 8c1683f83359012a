//! Admission: the `clients` count (Icecast `<clients>`) and the budget of connections still
//! reading their request head. [`Clients`] owns both. The accept loop gives each connection a
//! [`ClientSlot`] in the *head* state: it counts against `pending-clients` and, once half of
//! that budget is in use, against `pending-per-address` for its address, but not against
//! `clients`, so idle sockets cannot fill the server. Once the head is read and the request is
//! known, the slot moves to the `clients` count ([`ClientSlot::take_client`]): a listener up to
//! `clients`, an admin request or a source login up to `clients + reserved-clients`. The slot
//! releases whatever it holds when dropped, wherever the connection ends (its handler task, or
//! the fan-out shard it was handed to with the listener).
//!
//! A connection that holds a `clients` unit but has nothing to do (an event subscriber, a
//! keep-alive connection between two requests) goes *idle* ([`ClientSlot::go_idle`]): once
//! half of `clients` is in use, one address may hold at most `pending-per-address` idle
//! connections, as for heads; and when `clients` is used up, a new request takes the unit of
//! the connection idle longest ([`ClientSlot::take_client`]), which is then closed by its owner
//! ([`IdleMark`]). Idle sockets therefore never lock listeners out.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::gauge::Gauge;

/// Open connections of any kind, their limit, the `throng_clients` gauge that mirrors them,
/// and the connections still reading their head (in total and by address).
#[derive(Debug)]
pub struct Clients {
    open: AtomicI64,
    max: AtomicI64,
    gauge: Gauge,
    /// Connections still reading their head.
    pending: AtomicI64,
    /// The same, by address ([`address_key`]); an address is absent when it has none.
    pending_by_address: Mutex<HashMap<IpAddr, u32>>,
    /// Connections holding a `clients` unit with nothing to do.
    idle: Mutex<IdleSet>,
}

/// Idle connections in the order they went idle, and their count by address.
#[derive(Debug, Default)]
struct IdleSet {
    /// By the sequence number of their going idle: the first is the idlest.
    order: BTreeMap<u64, Arc<IdleMark>>,
    /// Idle connections by address key; an address is absent when it has none.
    by_address: HashMap<IpAddr, u32>,
    /// The next sequence number.
    next: u64,
}

impl IdleSet {
    fn remove(&mut self, seq: u64, key: IpAddr) -> bool {
        if self.order.remove(&seq).is_none() {
            return false;
        }
        if let Some(n) = self.by_address.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.by_address.remove(&key);
            }
        }
        true
    }
}

/// The flag an idle connection's owner watches: set when its `clients` unit was given to a new
/// request, after which the owner closes the connection.
#[derive(Debug)]
pub struct IdleMark {
    evicted: AtomicBool,
    notify: tokio::sync::Notify,
    /// Its address key, for the per-address count.
    key: IpAddr,
}

impl IdleMark {
    /// Whether the connection was evicted (its unit given away).
    pub fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }

    /// Waits until the connection is evicted.
    pub async fn evicted(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_evicted() {
                return;
            }
            notified.await;
        }
    }
}

/// Whether a per-address cap refuses one more connection: `mine` of the address's are held
/// already, `in_use` of `budget` are used in all, and the cap `per_address` applies only once
/// half the budget is in use (so a large NAT is not refused while there is room). The one
/// rule for connections reading their head and for idle connections.
pub fn over_cap(in_use: i64, budget: i64, mine: u32, per_address: u32) -> bool {
    in_use.saturating_mul(2) >= budget && mine >= per_address.max(1)
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

/// The budget of connections still reading their head as configured
/// (`[limits] pending-clients`): the value itself, or for 0 a quarter of the process's
/// open-file limit, at least 64.
pub fn pending_limit_for(pending: usize) -> i64 {
    if pending == 0 {
        (crate::net::listen::open_file_limit() / 4).max(64) as i64
    } else {
        pending as i64
    }
}

/// The address a per-address count is kept under: an IPv4 address (also when mapped into
/// IPv6), or the /64 prefix of an IPv6 address (one host usually holds a whole /64).
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

/// Limits on connections still reading their head, read from the configuration at each accept
/// (so a reload applies to the next connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLimits {
    /// Most such connections in total (`pending-clients`, resolved by [`pending_limit_for`]).
    pub total: i64,
    /// Most from one address once half of `total` is in use (`pending-per-address`).
    pub per_address: u32,
}

impl HeadLimits {
    /// The limits of `[limits]` as configured, for an address that is `exempt` from the
    /// per-address cap or not (a trusted proxy of `paths.x-forwarded-for` carries many
    /// clients; a load balancer of `paths.proxy-protocol-from` too, until its PROXY header
    /// names the client, [`ClientSlot::move_head`]).
    pub fn configured(limits: &crate::config::Limits, exempt: bool) -> HeadLimits {
        let per_address = if exempt {
            u32::MAX
        } else {
            u32::try_from(limits.pending_per_address).unwrap_or(u32::MAX)
        };
        HeadLimits {
            total: pending_limit_for(limits.pending_clients),
            per_address,
        }
    }
}

/// Why a new connection gets no head slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeadRefused {
    /// `pending-clients` connections are reading their head already.
    #[error("too many connections reading their request head")]
    Busy,
    /// The address holds `pending-per-address` of them while the budget is half used.
    #[error("too many connections reading their request head from this address")]
    PerAddress,
}

/// Which share of the `clients` count a request may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// A listener (or any request not below): up to `clients`.
    Listener,
    /// An admin/status request or a source login: up to `clients + reserved-clients`.
    Reserved(i64),
}

impl Clients {
    /// A count with limit `max` (connections) reported through `gauge`.
    pub fn new(max: i64, gauge: Gauge) -> Arc<Clients> {
        Arc::new(Clients {
            open: AtomicI64::new(0),
            max: AtomicI64::new(max),
            gauge,
            pending: AtomicI64::new(0),
            pending_by_address: Mutex::new(HashMap::new()),
            idle: Mutex::new(IdleSet::default()),
        })
    }

    /// Counts one connection against `clients` whatever the limit (a listener carried across
    /// a binary upgrade); the returned slot releases it. `over_limit` is true when the
    /// connection is past the limit.
    pub fn admit(self: &Arc<Self>) -> (ClientSlot, bool) {
        let n = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.gauge.inc();
        (
            ClientSlot {
                clients: self.clone(),
                state: State::Client,
                idle: None,
            },
            n > self.max(),
        )
    }

    /// A head slot for a connection just accepted from `ip`, within `limits`.
    ///
    /// Errors: [`HeadRefused`] when the connection is to be answered 503 and closed.
    pub fn start_head(
        self: &Arc<Self>,
        ip: IpAddr,
        limits: HeadLimits,
    ) -> Result<ClientSlot, HeadRefused> {
        let key = address_key(ip);
        let mut by_address = self
            .pending_by_address
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let pending = self.pending.load(Ordering::Relaxed);
        if pending >= limits.total {
            return Err(HeadRefused::Busy);
        }
        let mine = by_address.entry(key).or_insert(0);
        if over_cap(pending, limits.total, *mine, limits.per_address) {
            if *mine == 0 {
                by_address.remove(&key);
            }
            return Err(HeadRefused::PerAddress);
        }
        *mine += 1;
        self.pending.fetch_add(1, Ordering::Relaxed);
        Ok(ClientSlot {
            clients: self.clone(),
            state: State::Head(key),
            idle: None,
        })
    }

    /// Whether the listener share is used up (connections open ≥ limit).
    pub fn is_full(&self) -> bool {
        self.open() >= self.max()
    }

    /// Connections open now (those holding a `clients` slot).
    pub fn open(&self) -> i64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections reading their request head now.
    pub fn pending(&self) -> i64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// The limit in force (connections).
    pub fn max(&self) -> i64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Changes the limit (a reload); connections already open past it stay.
    pub fn set_max(&self, max: i64) {
        self.max.store(max, Ordering::Relaxed);
    }

    /// Takes one `clients` slot if fewer than `limit` are open.
    fn try_take(&self, limit: i64) -> bool {
        let taken = self
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok();
        if taken {
            self.gauge.inc();
        }
        taken
    }

    /// Takes the `clients` unit of the connection idle longest, if any, and marks it evicted.
    /// The count is unchanged: the unit passes from that connection to the caller.
    fn evict_idlest(&self) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let Some((&seq, mark)) = idle.order.first_key_value() else {
            return false;
        };
        let mark = mark.clone();
        idle.remove(seq, mark.key);
        mark.evicted.store(true, Ordering::Release);
        mark.notify.notify_one();
        true
    }

    /// Idle connections now (holding a `clients` unit with nothing to do).
    pub fn idle(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .order
            .len()
    }

    fn release(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        self.gauge.dec();
    }

    fn release_head(&self, key: IpAddr) {
        let mut by_address = self
            .pending_by_address
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = by_address.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                by_address.remove(&key);
            }
        }
        self.pending.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a [`ClientSlot`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A unit of the head budget, kept under this address key.
    Head(IpAddr),
    /// A unit of the `clients` count.
    Client,
    /// Nothing (a `clients` slot was refused).
    Released,
}

/// A connection's unit of admission, released when dropped: first of the head budget, then
/// (after [`ClientSlot::take_client`]) of the `clients` count. It travels with its connection:
/// a listener's slot goes to the fan-out shard with it.
#[derive(Debug)]
pub struct ClientSlot {
    clients: Arc<Clients>,
    state: State,
    /// While idle: its sequence number in the idle set and its mark.
    idle: Option<Box<(u64, Arc<IdleMark>)>>,
}

/// Why a connection may not go idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdleRefused {
    /// Its address holds `pending-per-address` idle connections while half of `clients` is in
    /// use.
    #[error("too many idle connections from this address")]
    PerAddress,
    /// It holds no `clients` unit (nothing to give up).
    #[error("the connection holds no clients slot")]
    NotClient,
}

impl ClientSlot {
    /// Moves this connection from the head budget to the `clients` count, within `share`. When
    /// that share is used up, the unit of the connection idle longest is taken instead (that
    /// connection's [`IdleMark`] is set, and its owner closes it). Returns false when there is
    /// neither (the connection is to be answered 503); the slot then holds nothing. A slot that
    /// holds a `clients` unit already keeps it.
    pub fn take_client(&mut self, share: Share) -> bool {
        match self.state {
            State::Client => return true,
            State::Head(key) => self.clients.release_head(key),
            State::Released => {}
        }
        let max = self.clients.max();
        let limit = match share {
            Share::Listener => max,
            Share::Reserved(extra) => max.saturating_add(extra.max(0)),
        };
        if self.clients.try_take(limit) || self.clients.evict_idlest() {
            self.state = State::Client;
            true
        } else {
            self.state = State::Released;
            false
        }
    }

    /// Moves this connection's unit of the head budget to the address `ip` (the client named in
    /// a PROXY header, `net/proxy.rs`), within `limits` for that address: a load balancer of
    /// `paths.proxy-protocol-from` carries many clients, so each connection counts against its
    /// client, not the balancer. The budget's total is unchanged (the unit stays one unit). A
    /// slot that holds no head unit is left as it is.
    ///
    /// Errors: [`HeadRefused::PerAddress`] when that address holds its cap while half the
    /// budget is in use; the slot then holds nothing (the connection is answered 503).
    pub fn move_head(&mut self, ip: IpAddr, limits: HeadLimits) -> Result<(), HeadRefused> {
        let State::Head(old) = self.state else {
            return Ok(());
        };
        let key = address_key(ip);
        if key == old {
            return Ok(());
        }
        let mut by_address = self
            .clients
            .pending_by_address
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let pending = self.clients.pending.load(Ordering::Relaxed);
        let mine = by_address.get(&key).copied().unwrap_or(0);
        let refused = over_cap(pending, limits.total, mine, limits.per_address);
        if let Some(n) = by_address.get_mut(&old) {
            *n -= 1;
            if *n == 0 {
                by_address.remove(&old);
            }
        }
        if refused {
            self.clients.pending.fetch_sub(1, Ordering::Relaxed);
            self.state = State::Released;
            return Err(HeadRefused::PerAddress);
        }
        *by_address.entry(key).or_insert(0) += 1;
        self.state = State::Head(key);
        Ok(())
    }

    /// Whether this slot holds a `clients` unit.
    pub fn is_client(&self) -> bool {
        self.state == State::Client
    }

    /// Marks this connection, from `ip`, idle: it keeps its `clients` unit, but a new request
    /// finding `clients` used up may take it (the idlest first), and then the returned mark is
    /// set and the connection must be closed. Going idle again first leaves the idle set.
    ///
    /// Errors: [`IdleRefused::PerAddress`] when `ip` holds `per_address` idle connections
    /// while half of `clients` is in use ([`over_cap`]); the connection is then to be closed
    /// (or refused 503). [`IdleRefused::NotClient`] for a slot without a `clients` unit.
    pub fn go_idle(&mut self, ip: IpAddr, per_address: u32) -> Result<Arc<IdleMark>, IdleRefused> {
        if !self.wake() || self.state != State::Client {
            return Err(IdleRefused::NotClient);
        }
        let key = address_key(ip);
        let mut idle = self.clients.idle.lock().unwrap_or_else(|e| e.into_inner());
        let mine = idle.by_address.get(&key).copied().unwrap_or(0);
        if over_cap(self.clients.open(), self.clients.max(), mine, per_address) {
            return Err(IdleRefused::PerAddress);
        }
        let mark = Arc::new(IdleMark {
            evicted: AtomicBool::new(false),
            notify: tokio::sync::Notify::new(),
            key,
        });
        let seq = idle.next;
        idle.next += 1;
        idle.order.insert(seq, mark.clone());
        *idle.by_address.entry(key).or_insert(0) += 1;
        self.idle = Some(Box::new((seq, mark.clone())));
        Ok(mark)
    }

    /// Leaves the idle set (a keep-alive connection's next request arrived). Returns false
    /// when the connection was evicted meanwhile: its unit is gone, the slot holds nothing,
    /// and the connection is to be closed. True for a slot that was not idle.
    pub fn wake(&mut self) -> bool {
        let Some(entry) = self.idle.take() else {
            return true;
        };
        let (seq, mark) = *entry;
        let mut idle = self.clients.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.remove(seq, mark.key) {
            true
        } else {
            // Evicted: the unit went to another connection.
            self.state = State::Released;
            false
        }
    }

    /// Whether this connection was evicted while idle (its owner is to close it).
    pub fn is_evicted(&self) -> bool {
        self.idle.as_ref().is_some_and(|e| e.1.is_evicted())
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        // An evicted slot's unit belongs to another connection now.
        self.wake();
        match self.state {
            State::Head(key) => self.clients.release_head(key),
            State::Client => self.clients.release(),
            State::Released => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: i64, per_address: u32) -> HeadLimits {
        HeadLimits { total, per_address }
    }

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

    #[test]
    fn heads_do_not_count_as_clients_until_taken() {
        let gauge = Gauge::default();
        let c = Clients::new(1, gauge.clone());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let mut a = c.start_head(ip, limits(100, 100)).unwrap();
        let mut b = c.start_head(ip, limits(100, 100)).unwrap();
        assert_eq!((c.open(), c.pending()), (0, 2));
        assert!(a.take_client(Share::Listener));
        assert_eq!((c.open(), c.pending(), gauge.get()), (1, 1, 1));
        assert!(
            !b.take_client(Share::Listener),
            "the listener share is full"
        );
        assert_eq!((c.open(), c.pending()), (1, 0));
        assert!(b.take_client(Share::Reserved(1)), "the reserve is not");
        let mut d = c.start_head(ip, limits(100, 100)).unwrap();
        assert!(!d.take_client(Share::Reserved(1)), "nor is it endless");
        drop((a, b, d));
        assert_eq!((c.open(), c.pending(), gauge.get()), (0, 0, 0));
        assert!(c.pending_by_address.lock().unwrap().is_empty());
    }

    #[test]
    fn the_head_budget_and_the_per_address_cap_hold() {
        let c = Clients::new(10, Gauge::default());
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        let two: IpAddr = "192.0.2.2".parse().unwrap();
        let l = limits(8, 2);
        // Below half the budget one address may take more than its cap...
        let mut held: Vec<ClientSlot> = (0..4).map(|_| c.start_head(one, l).unwrap()).collect();
        // ...then no more.
        assert_eq!(c.start_head(one, l).unwrap_err(), HeadRefused::PerAddress);
        // Another address still gets its share, up to the budget.
        held.push(c.start_head(two, l).unwrap());
        held.push(c.start_head(two, l).unwrap());
        assert_eq!(c.start_head(two, l).unwrap_err(), HeadRefused::PerAddress);
        let three: IpAddr = "192.0.2.3".parse().unwrap();
        held.push(c.start_head(three, l).unwrap());
        held.push(c.start_head(three, l).unwrap());
        assert_eq!(c.start_head(three, l).unwrap_err(), HeadRefused::Busy);
        held.truncate(0);
        assert_eq!(c.pending(), 0);
        assert!(c.start_head(one, l).is_ok());
    }

    #[test]
    fn a_head_moved_to_its_client_counts_against_the_client() {
        let c = Clients::new(10, Gauge::default());
        let balancer: IpAddr = "192.0.2.100".parse().unwrap();
        let l = limits(8, 2);
        let exempt = limits(8, u32::MAX);
        let mut held = Vec::new();
        // Six connections through the balancer (exempt at accept), from three clients.
        for i in 0..6u8 {
            let mut slot = c.start_head(balancer, exempt).unwrap();
            let client = IpAddr::from([198, 51, 100, i / 2]);
            slot.move_head(client, l).unwrap();
            held.push(slot);
        }
        assert!(!c.pending_by_address.lock().unwrap().contains_key(&balancer));
        // A client at its cap is refused once half the budget is in use, and holds nothing.
        let mut slot = c.start_head(balancer, exempt).unwrap();
        assert_eq!(
            slot.move_head(IpAddr::from([198, 51, 100, 0]), l),
            Err(HeadRefused::PerAddress)
        );
        assert_eq!(c.pending(), 6);
        drop(slot);
        assert_eq!(c.pending(), 6);
        // Another client behind the same balancer still gets in.
        let mut slot = c.start_head(balancer, exempt).unwrap();
        slot.move_head(IpAddr::from([198, 51, 100, 9]), l).unwrap();
        held.push(slot);
        drop(held);
        assert_eq!(c.pending(), 0);
        assert!(c.pending_by_address.lock().unwrap().is_empty());
    }

    #[test]
    fn a_full_server_takes_the_unit_of_the_connection_idle_longest() {
        let gauge = Gauge::default();
        let c = Clients::new(3, gauge.clone());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let (mut a, _) = c.admit();
        let (mut b, _) = c.admit();
        let (mut d, _) = c.admit();
        let mark_a = a.go_idle(ip, 32).unwrap();
        let mark_b = b.go_idle(ip, 32).unwrap();
        assert_eq!(c.idle(), 2);
        // A new listener finds `clients` used up: it takes `a`'s unit (idle longest).
        let mut e = c.start_head(ip, limits(100, 100)).unwrap();
        assert!(e.take_client(Share::Listener));
        assert!(mark_a.is_evicted() && a.is_evicted() && !mark_b.is_evicted());
        assert_eq!((c.open(), gauge.get(), c.idle()), (3, 3, 1));
        // `b` wakes for its next request before anyone needs its unit: it keeps it.
        assert!(b.wake());
        assert!(!a.wake(), "an evicted connection holds nothing");
        assert_eq!(c.idle(), 0);
        // Nothing idle is left: the next listener is refused.
        let mut f = c.start_head(ip, limits(100, 100)).unwrap();
        assert!(!f.take_client(Share::Listener));
        drop((a, f));
        assert_eq!(
            (c.open(), gauge.get()),
            (3, 3),
            "the evicted unit went to `e`"
        );
        // A busy connection never goes back to being evicted.
        let mark_d = d.go_idle(ip, 32).unwrap();
        assert!(d.wake());
        assert!(!mark_d.is_evicted());
        drop((b, d, e));
        assert_eq!((c.open(), gauge.get(), c.idle()), (0, 0, 0));
    }

    #[test]
    fn idle_connections_are_capped_per_address_once_half_of_clients_is_used() {
        let c = Clients::new(5, Gauge::default());
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        let two: IpAddr = "192.0.2.2".parse().unwrap();
        let mut slots: Vec<ClientSlot> = (0..4).map(|_| c.admit().0).collect();
        assert!(slots[0].go_idle(one, 1).is_ok());
        assert_eq!(
            slots[1].go_idle(one, 1).unwrap_err(),
            IdleRefused::PerAddress
        );
        assert!(slots[1].go_idle(two, 1).is_ok());
        // Below half of `clients`, the cap does not apply.
        slots.truncate(1);
        let (mut extra, _) = c.admit();
        assert_eq!(c.open(), 2);
        assert!(extra.go_idle(one, 1).is_ok());
        drop((slots, extra));
        assert_eq!((c.open(), c.idle()), (0, 0));
        let mut head = c.start_head(one, limits(10, 10)).unwrap();
        assert_eq!(head.go_idle(one, 1).unwrap_err(), IdleRefused::NotClient);
        assert!(head.take_client(Share::Listener));
    }

    #[test]
    fn the_per_address_rule_applies_from_half_the_budget() {
        assert!(!over_cap(4, 10, 5, 2), "below half: no cap");
        assert!(over_cap(5, 10, 2, 2));
        assert!(!over_cap(5, 10, 1, 2));
        assert!(
            !over_cap(5, 10, 0, 0) && over_cap(5, 10, 1, 0),
            "a cap of 0 means 1"
        );
    }

    #[test]
    fn ipv6_addresses_count_by_64_prefix() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(other));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(address_key(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }
}
