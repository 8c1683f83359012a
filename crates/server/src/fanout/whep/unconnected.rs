//! The budget of WHEP sessions whose peer has not completed ICE and DTLS yet: an offer costs a
//! str0m `Rtc` (tens of KiB) and a DTLS certificate's worth of CPU, and until its peer connects
//! it proves nothing. At most [`MAX_UNCONNECTED`] such sessions exist at once over all
//! engines, and one address (one IPv6 /64, `net::clients::address_key`) holds at most
//! `pending-per-address` of them (the cap of connections still sending their head: an offer
//! without ICE is such a connection). A session holds an [`UnconnectedUnit`] from its offer
//! until its peer connects or it ends (within `CONNECT_TIMEOUT`).
//!
//! **Shared fairly** (issue 42: 40 addresses re-posting offers without ICE kept the budget
//! full, so 17 of 24 legitimate offers got 503): when the budget is full, an offer from an
//! address holding fewer units than the heaviest address takes the unit of that address's
//! oldest unconnected session, which its engine then closes (`policy:evicted`). An address can
//! thus hold many units only while nobody else wants them.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::net::clients::address_key;

/// Most WHEP sessions not connected yet, over all engines.
pub const MAX_UNCONNECTED: usize = 1024;

/// Why an offer gets no session now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UnconnectedRefused {
    /// [`MAX_UNCONNECTED`] sessions are waiting for their peer already, and no address holds
    /// more of them than this one would.
    #[error("too many WebRTC sessions waiting for ICE")]
    Busy,
    /// The address holds its cap of them.
    #[error("too many WebRTC sessions waiting for ICE from this address")]
    PerAddress,
}

/// The units held, in total and by address key (each address's oldest first; a unit's flag
/// is set when it is evicted).
#[derive(Debug, Default)]
struct Counts {
    total: usize,
    by_key: HashMap<IpAddr, VecDeque<Arc<AtomicBool>>>,
}

/// The counts of unconnected sessions, in total and by address key.
#[derive(Debug, Default)]
pub struct Unconnected {
    counts: Mutex<Counts>,
}

/// Whether one more unconnected session is refused with `total` of them in all and `mine` from
/// its address, under the address cap `per_address` (at least 1), when the heaviest address
/// holds `heaviest`: past [`MAX_UNCONNECTED`] it is taken only from an address holding more
/// than one more than `mine` ([`Decision::Evict`]).
pub fn decide(total: usize, mine: u32, per_address: u32, heaviest: u32) -> Decision {
    if mine >= per_address.max(1) {
        Decision::Refuse(UnconnectedRefused::PerAddress)
    } else if total < MAX_UNCONNECTED {
        Decision::Take
    } else if heaviest > mine + 1 {
        Decision::Evict
    } else {
        Decision::Refuse(UnconnectedRefused::Busy)
    }
}

/// What [`decide`] says of an offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A free unit.
    Take,
    /// The unit of the heaviest address's oldest unconnected session.
    Evict,
    /// None: the offer is answered 503.
    Refuse(UnconnectedRefused),
}

impl Unconnected {
    /// A unit for a new session from `ip` with `per_address` as the address cap.
    ///
    /// Errors: [`UnconnectedRefused`] (the offer is answered 503).
    pub fn take(
        self: &Arc<Self>,
        ip: IpAddr,
        per_address: u32,
    ) -> Result<UnconnectedUnit, UnconnectedRefused> {
        let key = address_key(ip);
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let mine = counts.by_key.get(&key).map_or(0, |q| q.len() as u32);
        let heaviest = counts
            .by_key
            .iter()
            .max_by_key(|(_, q)| q.len())
            .map(|(k, q)| (*k, q.len() as u32));
        match decide(
            counts.total,
            mine,
            per_address,
            heaviest.map_or(0, |(_, n)| n),
        ) {
            Decision::Refuse(why) => return Err(why),
            Decision::Take => counts.total += 1,
            Decision::Evict => {
                let (heavy, _) = heaviest.expect("an address holds units");
                if let Some(q) = counts.by_key.get_mut(&heavy) {
                    if let Some(oldest) = q.pop_front() {
                        oldest.store(true, Ordering::Release);
                    }
                    if q.is_empty() {
                        counts.by_key.remove(&heavy);
                    }
                }
            }
        }
        let evicted = Arc::new(AtomicBool::new(false));
        counts
            .by_key
            .entry(key)
            .or_default()
            .push_back(evicted.clone());
        Ok(UnconnectedUnit {
            budget: self.clone(),
            key,
            evicted,
        })
    }

    /// Unconnected sessions now.
    pub fn len(&self) -> usize {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

/// One session's unit of the budget, given back when dropped (its peer connected, or it
/// ended), or taken by an offer from a lighter address ([`UnconnectedUnit::is_evicted`]).
#[derive(Debug)]
pub struct UnconnectedUnit {
    budget: Arc<Unconnected>,
    key: IpAddr,
    evicted: Arc<AtomicBool>,
}

impl UnconnectedUnit {
    /// Whether the unit went to another address's offer: the session is to be closed
    /// (`policy:evicted`).
    pub fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }
}

impl Drop for UnconnectedUnit {
    fn drop(&mut self) {
        if self.is_evicted() {
            return; // no longer counted: its unit went to the evicting offer
        }
        let mut counts = self.budget.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = counts.by_key.get_mut(&self.key) {
            if let Some(i) = q.iter().position(|f| Arc::ptr_eq(f, &self.evicted)) {
                q.remove(i);
                counts.total -= 1;
            }
            if counts.by_key.get(&self.key).is_some_and(VecDeque::is_empty) {
                counts.by_key.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_and_the_address_caps_hold_and_units_come_back() {
        let b = Arc::new(Unconnected::default());
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        let two: IpAddr = "192.0.2.2".parse().unwrap();
        let held: Vec<UnconnectedUnit> = (0..3).map(|_| b.take(one, 3).unwrap()).collect();
        assert_eq!(b.take(one, 3).unwrap_err(), UnconnectedRefused::PerAddress);
        let other = b.take(two, 3).unwrap();
        assert_eq!(b.len(), 4);
        drop(held);
        assert!(b.take(one, 3).is_ok());
        drop(other);
        assert_eq!(b.len(), 0);
        assert!(b.counts.lock().unwrap().by_key.is_empty());
    }

    #[test]
    fn the_rule() {
        use Decision::*;
        assert_eq!(
            decide(MAX_UNCONNECTED, 0, 32, 1),
            Refuse(UnconnectedRefused::Busy)
        );
        assert_eq!(decide(MAX_UNCONNECTED, 0, 32, 2), Evict);
        assert_eq!(
            decide(MAX_UNCONNECTED, 5, 32, 6),
            Refuse(UnconnectedRefused::Busy)
        );
        assert_eq!(
            decide(10, 32, 32, 32),
            Refuse(UnconnectedRefused::PerAddress)
        );
        assert_eq!(decide(10, 31, 32, 32), Take);
        assert_eq!(decide(0, 1, 0, 1), Refuse(UnconnectedRefused::PerAddress));
    }

    #[test]
    fn forty_addresses_filling_the_budget_leave_legitimate_viewers_admitted() {
        let b = Arc::new(Unconnected::default());
        let attacker = |i: u32| -> IpAddr { format!("198.51.100.{i}").parse().unwrap() };
        // 40 addresses re-posting offers that never connect, 32 each as the cap allows.
        let mut held = Vec::new();
        for round in 0..32 {
            for i in 0..40 {
                if let Ok(u) = b.take(attacker(i), 32) {
                    held.push(u);
                }
                let _ = round;
            }
        }
        assert_eq!(b.len(), MAX_UNCONNECTED);
        // 24 legitimate viewers from their own addresses: every one gets a unit.
        let legit: Vec<UnconnectedUnit> = (0..24)
            .map(|i| {
                let ip: IpAddr = format!("203.0.113.{i}").parse().unwrap();
                b.take(ip, 32).expect("a legitimate viewer is admitted")
            })
            .collect();
        assert_eq!(b.len(), MAX_UNCONNECTED, "units moved, none added");
        // As many attackers' sessions are marked for closing, the oldest first.
        let evicted = held.iter().filter(|u| u.is_evicted()).count();
        assert_eq!(evicted, 24);
        // Dropping the evicted ones changes no count; dropping the rest gives all back.
        held.retain(|u| !u.is_evicted());
        assert_eq!(b.len(), MAX_UNCONNECTED);
        drop(held);
        assert_eq!(b.len(), 24);
        drop(legit);
        assert_eq!(b.len(), 0);
        assert!(b.counts.lock().unwrap().by_key.is_empty());
    }
}
