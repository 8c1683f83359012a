//! The budget of WHEP sessions whose peer has not completed ICE and DTLS yet: an offer costs a
//! str0m `Rtc` (tens of KiB) and a DTLS certificate's worth of CPU, and until its peer connects
//! it proves nothing. At most [`MAX_UNCONNECTED`] such sessions exist at once over all
//! engines, and one address (one IPv6 /64, `net::clients::address_key`) holds at most
//! `pending-per-address` of them (the cap of connections still sending their head: an offer
//! without ICE is such a connection). A session holds an [`UnconnectedUnit`] from its offer
//! until its peer connects or it ends (within `CONNECT_TIMEOUT`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::net::clients::address_key;

/// Most WHEP sessions not connected yet, over all engines.
pub const MAX_UNCONNECTED: usize = 1024;

/// Why an offer gets no session now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UnconnectedRefused {
    /// [`MAX_UNCONNECTED`] sessions are waiting for their peer already.
    #[error("too many WebRTC sessions waiting for ICE")]
    Busy,
    /// The address holds its cap of them.
    #[error("too many WebRTC sessions waiting for ICE from this address")]
    PerAddress,
}

/// The counts of unconnected sessions, in total and by address key.
#[derive(Debug, Default)]
pub struct Unconnected {
    counts: Mutex<(usize, HashMap<IpAddr, u32>)>,
}

/// Whether one more unconnected session is refused with `total` of them in all and `mine` from
/// its address, under the address cap `per_address` (at least 1).
pub fn refusal(total: usize, mine: u32, per_address: u32) -> Option<UnconnectedRefused> {
    if total >= MAX_UNCONNECTED {
        Some(UnconnectedRefused::Busy)
    } else if mine >= per_address.max(1) {
        Some(UnconnectedRefused::PerAddress)
    } else {
        None
    }
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
        let mine = counts.1.get(&key).copied().unwrap_or(0);
        if let Some(why) = refusal(counts.0, mine, per_address) {
            return Err(why);
        }
        counts.0 += 1;
        *counts.1.entry(key).or_insert(0) += 1;
        Ok(UnconnectedUnit {
            budget: self.clone(),
            key,
        })
    }

    /// Unconnected sessions now.
    pub fn len(&self) -> usize {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).0
    }
}

/// One session's unit of the budget, given back when dropped (its peer connected, or it
/// ended).
#[derive(Debug)]
pub struct UnconnectedUnit {
    budget: Arc<Unconnected>,
    key: IpAddr,
}

impl Drop for UnconnectedUnit {
    fn drop(&mut self) {
        let mut counts = self.budget.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.0 -= 1;
        if let Some(n) = counts.1.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                counts.1.remove(&self.key);
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
        assert!(b.counts.lock().unwrap().1.is_empty());
    }

    #[test]
    fn the_rule() {
        assert_eq!(
            refusal(MAX_UNCONNECTED, 0, 32),
            Some(UnconnectedRefused::Busy)
        );
        assert_eq!(refusal(10, 32, 32), Some(UnconnectedRefused::PerAddress));
        assert_eq!(refusal(10, 31, 32), None);
        assert_eq!(refusal(0, 1, 0), Some(UnconnectedRefused::PerAddress));
    }
}
