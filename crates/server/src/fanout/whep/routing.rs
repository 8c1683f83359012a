//! Which WHEP session a datagram, a `DELETE` or a `killclient` is for: the engine's routing
//! table ([`Routes`]) indexing each session (a slot key) by its resource id, its listener id,
//! its local ICE ufrag and the source addresses its peer sent from, and the choice of session
//! for one datagram ([`Routes::route`], then [`Routes::after`] when str0m's `Rtc::accepts`
//! refuses it): the session owning the source address, else, for a new address, the one whose
//! ufrag the STUN `USERNAME` names ([`stun_local_ufrag`]), else none: a datagram is matched in
//! O(1) (two hash lookups), never against every session (a UDP spray of datagrams from unknown
//! addresses once cost a scan of thousands of sessions each). A compliant peer's first datagram
//! from any address is a STUN binding request naming our ufrag (RFC 8445 §7.2.2, ICE-lite: the
//! peer is the controlling agent and checks first), so nothing is lost.
//!
//! Pure: no socket, no clock, no `Rtc`. The engine asks `accepts` itself and tells the table
//! the address it learnt ([`Routes::learn`]); a session's removal ([`Routes::remove`]) clears
//! every index that names it, and only those.

use std::collections::HashMap;
use std::net::SocketAddr;

/// Where a datagram goes, the engine's next question to the sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The session that owns the source address (its peer sent from it before).
    Known(usize),
    /// A new address (or one its owner refused): the session whose local ufrag the STUN
    /// `USERNAME` names.
    ByUfrag(usize),
    /// No index names a session: drop it.
    Drop,
}

/// What was indexed for one session, to unindex it on removal.
#[derive(Debug)]
struct Owner {
    id: String,
    listener: u64,
    ufrag: String,
    /// Source addresses routed to the session (an address re-used by another session later
    /// stays here, but its index entry is the new owner's).
    addrs: Vec<SocketAddr>,
}

/// The engine's session indexes, by slot key.
#[derive(Debug, Default)]
pub struct Routes {
    ids: HashMap<String, usize>,
    by_listener: HashMap<u64, usize>,
    by_addr: HashMap<SocketAddr, usize>,
    by_ufrag: HashMap<String, usize>,
    owners: Vec<Option<Owner>>,
}

impl Routes {
    /// Indexes session `key` by its resource id, listener id and local ICE ufrag (a key
    /// still indexed is removed first).
    pub fn insert(&mut self, key: usize, id: String, listener: u64, ufrag: String) {
        self.remove(key);
        if self.owners.len() <= key {
            self.owners.resize_with(key + 1, || None);
        }
        self.ids.insert(id.clone(), key);
        self.by_listener.insert(listener, key);
        self.by_ufrag.insert(ufrag.clone(), key);
        self.owners[key] = Some(Owner {
            id,
            listener,
            ufrag,
            addrs: Vec::new(),
        });
    }

    /// Removes session `key` from every index (an address since taken by another session
    /// stays that session's); `false` when it was not indexed.
    pub fn remove(&mut self, key: usize) -> bool {
        let Some(owner) = self.owners.get_mut(key).and_then(Option::take) else {
            return false;
        };
        self.ids.remove(&owner.id);
        if self.by_listener.get(&owner.listener) == Some(&key) {
            self.by_listener.remove(&owner.listener);
        }
        self.by_ufrag.remove(&owner.ufrag);
        for a in &owner.addrs {
            if self.by_addr.get(a) == Some(&key) {
                self.by_addr.remove(a);
            }
        }
        true
    }

    /// The first session to offer a datagram from `source` to: the owner of the address,
    /// else the session `stun_ufrag` (our ufrag in its STUN `USERNAME`, if any) names, else
    /// none.
    pub fn route(&self, source: SocketAddr, stun_ufrag: Option<&str>) -> Route {
        match self.by_addr.get(&source) {
            Some(&k) => Route::Known(k),
            None => self.new_address(stun_ufrag),
        }
    }

    /// The next session to offer the datagram to after the one `refused` named did not accept
    /// it: the owner of the address refused → by ufrag; by ufrag refused → drop.
    pub fn after(&self, refused: Route, stun_ufrag: Option<&str>) -> Route {
        match refused {
            Route::Known(_) => self.new_address(stun_ufrag),
            Route::ByUfrag(_) | Route::Drop => Route::Drop,
        }
    }

    fn new_address(&self, stun_ufrag: Option<&str>) -> Route {
        match stun_ufrag.and_then(|u| self.by_ufrag.get(u)) {
            Some(&k) => Route::ByUfrag(k),
            None => Route::Drop,
        }
    }

    /// Records that datagrams from `source` are session `key`'s (it accepted one reached
    /// by ufrag): later ones are [`Route::Known`].
    pub fn learn(&mut self, source: SocketAddr, key: usize) {
        let Some(owner) = self.owners.get_mut(key).and_then(Option::as_mut) else {
            return;
        };
        self.by_addr.insert(source, key);
        if !owner.addrs.contains(&source) {
            owner.addrs.push(source);
        }
    }

    /// The session with resource id `id`.
    pub fn by_id(&self, id: &str) -> Option<usize> {
        self.ids.get(id).copied()
    }

    /// The session of listener `id`.
    pub fn by_listener(&self, id: u64) -> Option<usize> {
        self.by_listener.get(&id).copied()
    }

    /// Sessions indexed.
    pub fn len(&self) -> usize {
        self.ids.len()
    }
}

/// Whether an outgoing datagram of a session goes along its selected ICE pair: DTLS and
/// SRTP/SRTCP do (str0m sends them to the pair it uses), a STUN message does not (a response
/// goes back to wherever its request came from, a pair being checked included). By the first
/// byte, as RFC 7983 §7 demultiplexes: 0 to 3 is STUN.
pub fn on_selected_pair(datagram: &[u8]) -> bool {
    datagram.first().is_some_and(|&b| b > 3)
}

/// The receiver's (our) ufrag in a STUN Binding request: the `USERNAME` attribute (RFC 8489
/// §14.3) is `<receiver ufrag>:<sender ufrag>` in ICE (RFC 8445 §7.2.2). `None` when `data`
/// is not a STUN message (RFC 8489 §5: first two bits zero, magic cookie) or has no username.
pub fn stun_local_ufrag(data: &[u8]) -> Option<&str> {
    const MAGIC: [u8; 4] = [0x21, 0x12, 0xA4, 0x42];
    const USERNAME: u16 = 0x0006;
    if data.len() < 20 || data[0] & 0xC0 != 0 || data[4..8] != MAGIC {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([data[2], data[3]]));
    let mut attrs = data.get(20..20 + len)?;
    while attrs.len() >= 4 {
        let kind = u16::from_be_bytes([attrs[0], attrs[1]]);
        let alen = usize::from(u16::from_be_bytes([attrs[2], attrs[3]]));
        let value = attrs.get(4..4 + alen)?;
        if kind == USERNAME {
            let name = std::str::from_utf8(value).ok()?;
            return name.split(':').next();
        }
        // Attributes are padded to 4 bytes.
        let padded = 4 + alen.div_ceil(4) * 4;
        attrs = attrs.get(padded..).unwrap_or(&[]);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stun_is_told_from_what_follows_the_selected_pair() {
        // A STUN Binding success response (0x0101) and request (0x0001).
        assert!(!on_selected_pair(&[0x01, 0x01, 0, 0]));
        assert!(!on_selected_pair(&[0x00, 0x01, 0, 0]));
        assert!(
            on_selected_pair(&[22, 0xFE, 0xFD]),
            "a DTLS handshake record"
        );
        assert!(on_selected_pair(&[0x80, 0xC8]), "SRTCP");
        assert!(!on_selected_pair(&[]));
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], port))
    }

    /// Two sessions: key 0 (`s0`, listener 10, ufrag `u0`), key 1 (`s1`, 11, `u1`).
    fn two() -> Routes {
        let mut r = Routes::default();
        r.insert(0, "s0".into(), 10, "u0".into());
        r.insert(1, "s1".into(), 11, "u1".into());
        r
    }

    #[test]
    fn a_known_address_goes_to_its_owner() {
        let mut r = two();
        r.learn(addr(1000), 1);
        assert_eq!(r.route(addr(1000), None), Route::Known(1));
        // Whatever the STUN username says: the address decides first.
        assert_eq!(r.route(addr(1000), Some("u0")), Route::Known(1));
    }

    #[test]
    fn a_new_address_goes_by_its_stun_ufrag_or_nowhere() {
        let r = two();
        assert_eq!(r.route(addr(2000), Some("u0")), Route::ByUfrag(0));
        assert_eq!(r.route(addr(2000), Some("u1")), Route::ByUfrag(1));
        // Not STUN, or a ufrag of no session here: dropped, no session is scanned.
        assert_eq!(r.route(addr(2000), None), Route::Drop);
        assert_eq!(r.route(addr(2000), Some("zz")), Route::Drop);
    }

    #[test]
    fn a_refusal_moves_on_to_the_next_question() {
        let mut r = two();
        r.learn(addr(1000), 1);
        let first = r.route(addr(1000), Some("u0"));
        assert_eq!(r.after(first, Some("u0")), Route::ByUfrag(0));
        assert_eq!(r.after(first, None), Route::Drop);
        assert_eq!(r.after(Route::ByUfrag(0), Some("u0")), Route::Drop);
    }

    #[test]
    fn without_sessions_every_datagram_is_dropped() {
        let mut r = Routes::default();
        assert_eq!(r.len(), 0);
        assert_eq!(r.route(addr(1), Some("u0")), Route::Drop);
        r.insert(0, "s0".into(), 10, "u0".into());
        r.learn(addr(1), 0);
        r.remove(0);
        assert_eq!(r.route(addr(1), Some("u0")), Route::Drop);
        assert_eq!(r.after(Route::Known(0), None), Route::Drop);
    }

    #[test]
    fn learning_an_address_routes_it_from_then_on() {
        let mut r = two();
        assert_eq!(r.route(addr(3000), None), Route::Drop);
        r.learn(addr(3000), 0);
        r.learn(addr(3000), 0);
        assert_eq!(r.route(addr(3000), None), Route::Known(0));
        assert_eq!(r.owners[0].as_ref().unwrap().addrs, vec![addr(3000)]);
        // A key with no session learns nothing.
        r.learn(addr(3001), 7);
        assert_eq!(r.route(addr(3001), None), Route::Drop);
    }

    #[test]
    fn removal_cleans_every_index() {
        let mut r = two();
        r.learn(addr(1000), 0);
        r.learn(addr(1001), 0);
        assert_eq!(r.by_id("s0"), Some(0));
        assert_eq!(r.by_listener(10), Some(0));
        assert!(r.remove(0));
        assert!(!r.remove(0), "already gone");
        assert_eq!(r.by_id("s0"), None);
        assert_eq!(r.by_listener(10), None);
        assert_eq!(r.route(addr(1000), Some("u0")), Route::Drop);
        assert_eq!(r.route(addr(1001), None), Route::Drop);
        assert_eq!(r.len(), 1);
        assert!(!r.by_addr.values().any(|&k| k == 0));
        assert!(!r.by_ufrag.values().any(|&k| k == 0));
        // The other session is untouched.
        assert_eq!(r.by_id("s1"), Some(1));
        assert_eq!(r.by_listener(11), Some(1));
        assert_eq!(r.route(addr(9), Some("u1")), Route::ByUfrag(1));
    }

    #[test]
    fn an_address_reused_by_a_new_session_is_the_new_one_s() {
        let mut r = two();
        r.learn(addr(1000), 0);
        // The NAT gives the same address to another peer, session 1, which accepts it.
        assert_eq!(r.route(addr(1000), Some("u1")), Route::Known(0));
        assert_eq!(r.after(Route::Known(0), Some("u1")), Route::ByUfrag(1));
        r.learn(addr(1000), 1);
        assert_eq!(r.route(addr(1000), None), Route::Known(1));
        // Session 0 ending does not take the address from session 1.
        r.remove(0);
        assert_eq!(r.route(addr(1000), None), Route::Known(1));
        // A slot re-used by a new session starts with no address.
        r.insert(0, "s2".into(), 12, "u2".into());
        assert_eq!(r.by_id("s2"), Some(0));
        assert_eq!(r.route(addr(1000), None), Route::Known(1));
        assert!(r.owners[0].as_ref().unwrap().addrs.is_empty());
        r.remove(1);
        assert_eq!(r.route(addr(1000), None), Route::Drop);
        assert_eq!(r.route(addr(1000), Some("u2")), Route::ByUfrag(0));
    }

    fn stun(attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (kind, value) in attrs {
            body.extend_from_slice(&kind.to_be_bytes());
            body.extend_from_slice(&(value.len() as u16).to_be_bytes());
            body.extend_from_slice(value);
            while body.len() % 4 != 0 {
                body.push(0);
            }
        }
        let mut m = vec![0x00, 0x01];
        m.extend_from_slice(&(body.len() as u16).to_be_bytes());
        m.extend_from_slice(&[0x21, 0x12, 0xA4, 0x42]);
        m.extend_from_slice(&[7; 12]);
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn the_stun_username_names_the_session() {
        // PRIORITY first (4 bytes), then a USERNAME needing padding.
        let m = stun(&[(0x0024, &[0, 0, 0, 1]), (0x0006, b"srvA:cli")]);
        assert_eq!(stun_local_ufrag(&m), Some("srvA"));
        let m = stun(&[(0x8022, b"odd"), (0x0006, b"abcd:e")]);
        assert_eq!(stun_local_ufrag(&m), Some("abcd"));
        // No username, not STUN (DTLS, RTP), truncated.
        assert_eq!(stun_local_ufrag(&stun(&[(0x0024, &[0; 4])])), None);
        assert_eq!(stun_local_ufrag(&[22, 254, 253, 0, 0][..]), None);
        let mut rtp = stun(&[(0x0006, b"a:b")]);
        rtp[0] = 0x80;
        assert_eq!(stun_local_ufrag(&rtp), None);
        let m = stun(&[(0x0006, b"srvA:cli")]);
        assert_eq!(stun_local_ufrag(&m[..m.len() - 4]), None);
    }
}
