//! Whether a WHIP publish is still alive, and what a new offer for its mount does. Pure: every
//! decision takes `now`.
//!
//! A publish lives while its audio arrives: it ends when no Opus packet has come for
//! `source-timeout` since the last one (or since the publish started, before any)
//! ([`Liveness::expired`]), as a silent source client is dropped after `source-timeout`. A blip
//! shorter than that (a reconnect with a new `POST` carrying the same credentials,
//! [`on_offer`]) keeps the mount, its queue and its listeners: nothing ends, so no listener goes
//! to a fallback. Reconnects do not reset the clock: a publisher whose new sessions never bring
//! audio (ICE failing again and again) does not hold its listeners on a silent mount.

use std::time::{Duration, Instant};

/// The clock of one publish.
#[derive(Debug, Clone, Copy)]
pub struct Liveness {
    timeout: Duration,
    /// The last Opus packet's arrival, or the publish's start before any.
    last_media: Instant,
}

impl Liveness {
    /// A publish that started at `now`, ended by `timeout` of silence.
    pub fn new(now: Instant, timeout: Duration) -> Liveness {
        Liveness {
            timeout,
            last_media: now,
        }
    }

    /// An Opus packet arrived at `now`.
    pub fn media(&mut self, now: Instant) {
        self.last_media = self.last_media.max(now);
    }

    /// When the publish ends unless audio arrives first.
    pub fn deadline(&self) -> Instant {
        self.last_media + self.timeout
    }

    /// Whether the publish has been silent for the timeout at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        now >= self.deadline()
    }
}

/// Who holds the mount a WHIP offer names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// Nobody: the mount is free.
    Nobody,
    /// A WHIP publish; `same_credentials`: it was started with the credentials of this offer.
    Whip {
        /// Whether the offer presents the credentials the publish started with.
        same_credentials: bool,
    },
    /// Another kind of source (a source client, a relay, a file).
    Other,
}

/// What a WHIP offer for a mount does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferAction {
    /// Start a new publish: the mount goes live.
    Start,
    /// Replace the WebRTC session of the publish that holds the mount (a reconnect): the mount,
    /// its stream and its listeners stay.
    Replace,
    /// `403 Mountpoint in use`, as a source client gets.
    InUse,
}

/// The decision for an authenticated offer on a mount held by `holder`.
pub fn on_offer(holder: Holder) -> OfferAction {
    match holder {
        Holder::Nobody => OfferAction::Start,
        Holder::Whip {
            same_credentials: true,
        } => OfferAction::Replace,
        Holder::Whip {
            same_credentials: false,
        }
        | Holder::Other => OfferAction::InUse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    #[test]
    fn silence_for_the_timeout_ends_a_publish() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, T);
        assert!(!l.expired(t0 + Duration::from_secs(9)));
        assert!(l.expired(t0 + T), "never any audio");
        l.media(t0 + Duration::from_secs(5));
        assert!(!l.expired(t0 + Duration::from_secs(14)));
        assert!(l.expired(t0 + Duration::from_secs(15)));
    }

    #[test]
    fn a_blip_shorter_than_the_timeout_is_bridged_a_longer_one_is_not() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, T);
        l.media(t0 + Duration::from_secs(1));
        // The network drops at 1 s; a reconnect brings audio again at 9 s: still live.
        assert!(!l.expired(t0 + Duration::from_secs(9)));
        l.media(t0 + Duration::from_secs(9));
        assert_eq!(l.deadline(), t0 + Duration::from_secs(19));
        // A packet stamped earlier (read late) does not move the clock back.
        l.media(t0 + Duration::from_secs(8));
        assert_eq!(l.deadline(), t0 + Duration::from_secs(19));
        // Reconnects that never bring audio do not keep it alive past the timeout.
        assert!(l.expired(t0 + Duration::from_secs(19)));
    }

    #[test]
    fn only_the_same_publisher_may_take_over_a_mount() {
        assert_eq!(on_offer(Holder::Nobody), OfferAction::Start);
        assert_eq!(
            on_offer(Holder::Whip {
                same_credentials: true
            }),
            OfferAction::Replace
        );
        assert_eq!(
            on_offer(Holder::Whip {
                same_credentials: false
            }),
            OfferAction::InUse
        );
        assert_eq!(on_offer(Holder::Other), OfferAction::InUse);
    }
}
