//! Where a binary upgrade asks the task feeding a mount (source client, relay, looped file) to
//! stop and hand its feed over ([`HandoverSlot`], one per mount): the task stops between two
//! reads, flushes what it has framed into the queue, and answers with a [`FrozenFeed`]: its
//! connection, the bytes it received but has not framed yet and its inline ICY position. The
//! new process's feeder starts with those bytes, so no frame is lost or repeated.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use throng_proto::icy::IcyDemuxState;
use tokio::sync::{oneshot, Notify};

/// A feed stopped for a hand-over: what the feeder had received but not yet framed.
#[derive(Debug)]
pub struct FrozenFeed {
    /// The source client's connection (`None` for a file, whose feed is its queue's head).
    pub socket: Option<OwnedFd>,
    /// Bytes received after the last framed unit (a partial frame or page), in order.
    pub leftover: Vec<u8>,
    /// Inline ICY position of a source that sends `icy-metaint`.
    pub demux: Option<IcyDemuxState>,
    /// What the new process needs to log and account for the source client.
    pub client: Option<SourceClientState>,
}

/// A source client's connection facts, for the access log line at its end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceClientState {
    /// The client's address.
    pub peer: SocketAddr,
    /// Its request line, as logged.
    pub request_line: String,
    /// Its `User-Agent`.
    pub agent: Option<String>,
    /// Its `Referer`.
    pub referer: Option<String>,
    /// Milliseconds it has been connected.
    pub connected_ms: u64,
}

/// Where the upgrade asks a feeding task to stop and hand its feed over.
#[derive(Debug, Default)]
pub struct HandoverSlot {
    wake: Notify,
    reply: Mutex<Option<oneshot::Sender<FrozenFeed>>>,
}

impl HandoverSlot {
    /// Asks the task feeding the mount to stop and hand over; the answer comes on the returned
    /// channel (dropped unanswered when the feed ends first, or when nothing feeds it in a way
    /// that can be handed over, such as a relay).
    pub fn request(&self) -> oneshot::Receiver<FrozenFeed> {
        let (tx, rx) = oneshot::channel();
        *self.reply.lock() = Some(tx);
        self.wake.notify_one();
        rx
    }

    /// Completes when a hand-over is requested (cancel-safe: a request made before the wait
    /// is not missed).
    pub async fn requested(&self) {
        loop {
            if self.reply.lock().is_some() {
                return;
            }
            self.wake.notified().await;
        }
    }

    /// Whether a hand-over is waiting to be answered.
    pub fn is_requested(&self) -> bool {
        self.reply.lock().is_some()
    }

    /// Answers the pending request with `feed`; false (and `feed` dropped) when none is pending.
    pub fn answer(&self, feed: FrozenFeed) -> bool {
        match self.reply.lock().take() {
            Some(tx) => tx.send(feed).is_ok(),
            None => false,
        }
    }
}
