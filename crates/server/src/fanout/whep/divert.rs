//! The hook that lets WebRTC sessions other than WHEP viewers (WHIP publishers, `whip/`) share
//! the engines' UDP ports: a table of their local ICE ufrags ([`Divert::register`]), looked up
//! only for a datagram no viewer takes ([`super::routing::Route::Drop`]), so a viewer's
//! datagrams never pay for it. A datagram from an address the table learnt, or a STUN request
//! whose `USERNAME` names a registered ufrag (the address is learnt then, as the engine's own
//! routing does), is handed to that session's channel ([`Diverted`]); its session answers with
//! the engine socket's clone (`EngineHandle::sender`). A full channel drops the datagram, as a
//! full socket buffer would.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

use parking_lot::RwLock;

/// Datagrams a diverted session may have waiting before more are dropped.
pub const DIVERT_QUEUE: usize = 512;

/// One datagram for a diverted session.
#[derive(Debug)]
pub struct Diverted {
    /// The datagram.
    pub data: Vec<u8>,
    /// Who sent it.
    pub source: SocketAddr,
    /// The engine address it came to (the local ICE candidate).
    pub destination: SocketAddr,
    /// When the engine read it.
    pub at: Instant,
}

/// Where a diverted session's datagrams go.
pub type DivertSink = tokio::sync::mpsc::Sender<Diverted>;

#[derive(Debug, Default)]
struct Table {
    by_ufrag: HashMap<String, DivertSink>,
    /// Learnt source address → the ufrag of its session.
    by_addr: HashMap<SocketAddr, String>,
}

/// The diverted sessions of every engine, by local ICE ufrag and learnt peer address.
#[derive(Debug, Default)]
pub struct Divert {
    table: RwLock<Table>,
}

impl Divert {
    /// Sends the datagrams for local ufrag `ufrag` to `sink` from now on (a ufrag registered
    /// already is replaced).
    pub fn register(&self, ufrag: String, sink: DivertSink) {
        self.table.write().by_ufrag.insert(ufrag, sink);
    }

    /// Stops diverting to `ufrag` and forgets the addresses learnt for it.
    pub fn unregister(&self, ufrag: &str) {
        let mut t = self.table.write();
        t.by_ufrag.remove(ufrag);
        t.by_addr.retain(|_, u| u != ufrag);
    }

    /// Registered sessions.
    pub fn len(&self) -> usize {
        self.table.read().by_ufrag.len()
    }

    /// Whether no session is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offers a datagram no viewer took: `true` when a diverted session got it (or its full
    /// channel dropped it), `false` when it is nobody's. `stun_ufrag` is our ufrag in the
    /// datagram's STUN `USERNAME` ([`super::routing::stun_local_ufrag`]).
    pub fn offer(&self, d: Diverted, stun_ufrag: Option<&str>) -> bool {
        let t = self.table.read();
        if t.by_ufrag.is_empty() {
            return false;
        }
        let known = t.by_addr.get(&d.source).cloned();
        let ufrag = match (known, stun_ufrag) {
            // A STUN request naming another registered session moves the address (a NAT
            // re-used it, or the peer restarted with a new session).
            (_, Some(u)) if t.by_ufrag.contains_key(u) => u.to_owned(),
            (Some(u), _) => u,
            _ => return false,
        };
        let Some(sink) = t.by_ufrag.get(&ufrag).cloned() else {
            return false;
        };
        let learn = t.by_addr.get(&d.source) != Some(&ufrag);
        drop(t);
        if learn {
            self.table.write().by_addr.insert(d.source, ufrag);
        }
        let _ = sink.try_send(d);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(port: u16) -> Diverted {
        Diverted {
            data: vec![1, 2, 3],
            source: SocketAddr::from(([192, 0, 2, 1], port)),
            destination: SocketAddr::from(([127, 0, 0, 1], 9000)),
            at: Instant::now(),
        }
    }

    #[test]
    fn stun_names_the_session_then_its_address_does() {
        let d = Divert::default();
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        assert!(!d.offer(datagram(1), Some("pub1")), "nothing registered");
        d.register("pub1".into(), tx);
        assert_eq!(d.len(), 1);
        // Not STUN, unknown address: nobody's.
        assert!(!d.offer(datagram(1), None));
        assert!(!d.offer(datagram(1), Some("other")));
        assert!(d.offer(datagram(1), Some("pub1")));
        // DTLS and SRTP from the same address carry no ufrag.
        assert!(d.offer(datagram(1), None));
        assert!(!d.offer(datagram(2), None), "another address is not learnt");
        assert_eq!(rx.try_recv().unwrap().source.port(), 1);
        assert_eq!(rx.try_recv().unwrap().source.port(), 1);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn unregistering_forgets_the_addresses_and_a_full_channel_drops() {
        let d = Divert::default();
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        d.register("a".into(), tx);
        assert!(d.offer(datagram(1), Some("a")));
        assert!(
            d.offer(datagram(1), None),
            "taken, though the channel is full"
        );
        assert_eq!(rx.try_recv().unwrap().source.port(), 1);
        assert!(rx.try_recv().is_err(), "the second was dropped");
        d.unregister("a");
        assert!(d.is_empty());
        assert!(!d.offer(datagram(1), None));
        assert!(!d.offer(datagram(1), Some("a")));
    }

    #[test]
    fn a_new_session_takes_the_address_by_stun() {
        let d = Divert::default();
        let (old, mut old_rx) = tokio::sync::mpsc::channel(4);
        let (new, mut new_rx) = tokio::sync::mpsc::channel(4);
        d.register("old".into(), old);
        d.register("new".into(), new);
        assert!(d.offer(datagram(5), Some("old")));
        assert!(d.offer(datagram(5), Some("new")));
        assert!(d.offer(datagram(5), None));
        assert!(old_rx.try_recv().is_ok());
        assert!(old_rx.try_recv().is_err());
        assert!(new_rx.try_recv().is_ok());
        assert!(
            new_rx.try_recv().is_ok(),
            "the address is the new session's now"
        );
    }
}
