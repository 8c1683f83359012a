//! A mount carried across a binary upgrade (SIGUSR2): its description, title and counters, its
//! queue (the retained chunks at their absolute offsets, so every listener's position stays
//! valid in the new process) and, when a source client or a file feeds it, where that feed
//! stopped. Plain serde values plus, for a source client, its socket; the upgrade code
//! (`upgrade/`) moves them between processes, this file only takes them from a live mount and
//! rebuilds one from them.
//!
//! The feed itself is handed over through the mount's [`HandoverSlot`] (`freeze.rs`).

use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use throng_proto::format::Format;
use throng_proto::icy::IcyDemuxState;
use throng_proto::source_info::SourceInfo;

use crate::mount::freeze::SourceClientState;
use crate::mount::icy_meta::IcyMeta;
use crate::mount::live::{Mount, MountSettings, SourceKind, Tuning};
use crate::mount::queue::{Chunk, QueueSnapshot, QueueWriter};

/// A relay's mount adopted by the new process, waiting for its relay task (`ingest/relay`) to
/// claim it and go on reading the upstream connection.
#[derive(Debug)]
pub struct AdoptedRelay {
    /// The upstream connection.
    pub socket: OwnedFd,
    /// The rebuilt mount.
    pub mount: Arc<Mount>,
    /// Its queue's writer, continuing at the old head.
    pub writer: QueueWriter,
    /// Bytes received but not framed.
    pub leftover: Vec<u8>,
    /// The upstream's inline ICY position.
    pub demux: Option<IcyDemuxState>,
}

/// One chunk of a queue, as carried across the upgrade.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkState {
    /// Absolute offset of its first byte.
    pub start: u64,
    /// Its bytes.
    pub data: Vec<u8>,
    /// It is a set of Ogg header pages.
    pub is_header: bool,
    /// Index into [`QueueState::header_sets`] of the Ogg headers in force for it.
    pub headers: Option<usize>,
}

/// A queue as carried across the upgrade: the retained window at its absolute offsets.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueueState {
    /// Retained chunks, oldest first.
    pub chunks: Vec<ChunkState>,
    /// Offset of the next byte.
    pub head: u64,
    /// Distinct Ogg header sets referred to by the chunks.
    pub header_sets: Vec<Vec<u8>>,
    /// Index of the current Ogg header set.
    pub current_headers: Option<usize>,
}

impl QueueState {
    /// The state of a published snapshot (shared header sets are stored once).
    pub fn from_snapshot(s: &QueueSnapshot) -> QueueState {
        let mut sets: Vec<Arc<Bytes>> = Vec::new();
        let mut index = |h: &Option<Arc<Bytes>>| {
            h.as_ref().map(|h| {
                sets.iter()
                    .position(|s| Arc::ptr_eq(s, h))
                    .unwrap_or_else(|| {
                        sets.push(h.clone());
                        sets.len() - 1
                    })
            })
        };
        let chunks = s
            .chunks
            .iter()
            .map(|c| ChunkState {
                start: c.start,
                data: c.data.to_vec(),
                is_header: c.is_header,
                headers: index(&c.ogg_headers),
            })
            .collect();
        let current_headers = index(&s.ogg_headers);
        QueueState {
            chunks,
            head: s.head,
            header_sets: sets.iter().map(|b| b.to_vec()).collect(),
            current_headers,
        }
    }

    /// The chunks back as shared pieces, and the current Ogg header set.
    pub fn into_chunks(self) -> (Vec<Chunk>, u64, Option<Arc<Bytes>>) {
        let sets: Vec<Arc<Bytes>> = self
            .header_sets
            .into_iter()
            .map(|b| Arc::new(Bytes::from(b)))
            .collect();
        let chunks = self
            .chunks
            .into_iter()
            .map(|c| Chunk {
                start: c.start,
                data: Bytes::from(c.data),
                ogg_headers: c.headers.and_then(|i| sets.get(i).cloned()),
                is_header: c.is_header,
            })
            .collect();
        let current = self.current_headers.and_then(|i| sets.get(i).cloned());
        (chunks, self.head, current)
    }
}

/// The stream description of a mount (Icecast's `ice-*`/`icy-*` fields), as carried across.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InfoState {
    name: String,
    description: String,
    url: Option<String>,
    genre: String,
    bitrate: Option<String>,
    public: bool,
    audio_info: Vec<(String, String)>,
    audio_info_raw: Option<String>,
    user_agent: Option<String>,
}

impl From<&SourceInfo> for InfoState {
    fn from(i: &SourceInfo) -> InfoState {
        InfoState {
            name: i.name.clone(),
            description: i.description.clone(),
            url: i.url.clone(),
            genre: i.genre.clone(),
            bitrate: i.bitrate.clone(),
            public: i.public,
            audio_info: i.audio_info.clone(),
            audio_info_raw: i.audio_info_raw.clone(),
            user_agent: i.user_agent.clone(),
        }
    }
}

impl From<InfoState> for SourceInfo {
    fn from(i: InfoState) -> SourceInfo {
        SourceInfo {
            name: i.name,
            description: i.description,
            url: i.url,
            genre: i.genre,
            bitrate: i.bitrate,
            public: i.public,
            audio_info: i.audio_info,
            audio_info_raw: i.audio_info_raw,
            user_agent: i.user_agent,
        }
    }
}

/// An inline ICY position ([`IcyDemuxState`]) as carried across.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DemuxState {
    metaint: usize,
    audio_left: usize,
    meta_left: Option<usize>,
    meta: Vec<u8>,
}

impl From<IcyDemuxState> for DemuxState {
    fn from(d: IcyDemuxState) -> DemuxState {
        DemuxState {
            metaint: d.metaint,
            audio_left: d.audio_left,
            meta_left: d.meta_left,
            meta: d.meta,
        }
    }
}

impl From<DemuxState> for IcyDemuxState {
    fn from(d: DemuxState) -> IcyDemuxState {
        IcyDemuxState {
            metaint: d.metaint,
            audio_left: d.audio_left,
            meta_left: d.meta_left,
            meta: d.meta,
        }
    }
}

/// How a mount's feed continues in the new process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FeedState {
    /// A source client: its socket travels with the mount (`socket` index into the message's
    /// descriptors), with the bytes it sent that are not framed yet.
    Client {
        /// The unframed bytes.
        leftover: Vec<u8>,
        /// Its inline ICY position.
        demux: Option<DemuxState>,
        /// Connection facts.
        client: SourceClientState,
    },
    /// A looped file: it continues at the queue's head.
    File,
    /// A relay: its upstream connection travels with the mount (descriptor attached), with the
    /// bytes received but not framed; the relay task of the new process goes on reading it.
    Relay {
        /// The unframed bytes.
        leftover: Vec<u8>,
        /// The upstream's inline ICY position.
        demux: Option<DemuxState>,
    },
    /// Nothing that can be handed over (a relay, or a feed that had already ended): the queue
    /// is served until drained, then its listeners go where a listener of an ended mount goes
    /// (the new incarnation of the mount, or its fallback).
    Ended,
}

/// A mount as carried across the upgrade.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MountState {
    /// Mount name.
    pub name: String,
    /// The mount's id in the old process (listeners refer to it).
    pub old_id: u64,
    /// Its Content-Type.
    pub content_type: String,
    /// 0 client, 1 file, 2 relay.
    kind: u8,
    /// 0 MP3, 1 AAC, 2 Ogg, 3 EBML, 4 other.
    format: u8,
    info: InfoState,
    force_hidden: bool,
    hidden: bool,
    max_listeners: Option<u32>,
    burst_size: u64,
    credentials: (String, String),
    source_ip: Option<IpAddr>,
    title: String,
    icy_generation: u64,
    icy_block: Vec<u8>,
    listener_peak: u32,
    slow_listeners: u64,
    source_bytes: u64,
    bytes_sent: u64,
    started: chrono::DateTime<chrono::Local>,
    /// Bytes the queue retains (queue-size or burst-size, whichever is larger).
    pub retain: u64,
    /// The queue.
    pub queue: QueueState,
    /// How the feed continues.
    pub feed: FeedState,
}

fn format_code(f: Format) -> u8 {
    match f {
        Format::Mp3 => 0,
        Format::Aac => 1,
        Format::Ogg => 2,
        Format::Ebml => 3,
        Format::Other => 4,
    }
}

fn format_of(code: u8) -> Format {
    match code {
        0 => Format::Mp3,
        1 => Format::Aac,
        2 => Format::Ogg,
        3 => Format::Ebml,
        _ => Format::Other,
    }
}

fn kind_code(k: SourceKind) -> u8 {
    match k {
        SourceKind::Client => 0,
        SourceKind::File => 1,
        SourceKind::Relay => 2,
    }
}

fn kind_of(code: u8) -> SourceKind {
    match code {
        0 => SourceKind::Client,
        1 => SourceKind::File,
        _ => SourceKind::Relay,
    }
}

impl MountState {
    /// The state of `mount` once its feed is frozen (or gone): `retain` is its queue's
    /// retention in bytes, `feed` how the feed continues.
    pub fn capture(mount: &Mount, retain: u64, feed: FeedState) -> MountState {
        let s = &mount.settings;
        let icy = mount.icy.load();
        MountState {
            name: mount.name.clone(),
            old_id: mount.id,
            content_type: s.content_type.clone(),
            kind: kind_code(s.kind),
            format: format_code(s.format),
            info: (&s.info).into(),
            force_hidden: s.force_hidden,
            hidden: mount.hidden(),
            max_listeners: mount.max_listeners(),
            burst_size: mount.burst_size(),
            credentials: (s.source_user.clone(), s.source_password.clone()),
            source_ip: s.source_ip,
            title: mount.title(),
            icy_generation: icy.generation,
            icy_block: icy.block.to_vec(),
            listener_peak: mount.listener_peak.load(Ordering::Relaxed),
            slow_listeners: mount.slow_listeners.load(Ordering::Relaxed),
            source_bytes: mount.source_bytes.load(Ordering::Relaxed),
            bytes_sent: mount.bytes_sent.load(Ordering::Relaxed),
            started: mount.started,
            retain,
            queue: QueueState::from_snapshot(&mount.queue.load()),
            feed,
        }
    }

    /// Rebuilds the mount with the same settings, title (same ICY generation, so listeners do
    /// not get the title again), counters and queue; returns it and its queue's writer, which
    /// continues at the old head. The queue of an [`FeedState::Ended`] mount is published as
    /// ended.
    pub fn rebuild(self) -> (Arc<Mount>, QueueWriter) {
        let info: SourceInfo = self.info.into();
        let format = format_of(self.format);
        let settings = MountSettings {
            format,
            content_type: self.content_type,
            info,
            force_hidden: self.force_hidden,
            source_user: self.credentials.0,
            source_password: self.credentials.1,
            source_ip: self.source_ip,
            kind: kind_of(self.kind),
        };
        let ended = matches!(self.feed, FeedState::Ended);
        let (chunks, head, headers) = self.queue.into_chunks();
        let mut writer = QueueWriter::resume(self.retain, chunks, head, headers);
        let mut mount = Mount::new(&self.name, settings, writer.queue());
        mount.set_tuning(Tuning {
            hidden: self.hidden,
            max_listeners: self.max_listeners,
            burst_size: self.burst_size,
        });
        mount.started = self.started;
        mount.restore_title(
            &self.title,
            IcyMeta {
                generation: self.icy_generation,
                block: Bytes::from(self.icy_block),
            },
        );
        mount
            .listener_peak
            .store(self.listener_peak, Ordering::Relaxed);
        mount
            .slow_listeners
            .store(self.slow_listeners, Ordering::Relaxed);
        mount
            .source_bytes
            .store(self.source_bytes, Ordering::Relaxed);
        mount.bytes_sent.store(self.bytes_sent, Ordering::Relaxed);
        if ended {
            writer.end();
        }
        (Arc::new(mount), writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_survives_its_state_with_offsets_and_header_sets() {
        let mut w = QueueWriter::new(1 << 20);
        let h = Arc::new(Bytes::from_static(b"HEAD"));
        w.push(Bytes::from_static(b"HEAD"), true, Some(h.clone()));
        w.push(Bytes::from(vec![1; 50]), false, Some(h.clone()));
        w.push(Bytes::from(vec![2; 50]), false, Some(h));
        let state = QueueState::from_snapshot(&w.queue().load());
        assert_eq!(state.header_sets.len(), 1);
        let (chunks, head, current) = state.into_chunks();
        let mut r = QueueWriter::resume(1 << 20, chunks, head, current);
        r.push(Bytes::from(vec![3; 10]), false, None);
        let s = r.queue().load();
        assert_eq!(s.head, 114);
        assert_eq!(s.tail(), 0);
        assert_eq!(s.chunks[3].start, 104);
        assert_eq!(
            s.join_point(0).1.as_deref().map(|b| &b[..]),
            Some(&b"HEAD"[..])
        );
        assert!(Arc::ptr_eq(
            s.chunks[1].ogg_headers.as_ref().unwrap(),
            s.chunks[2].ogg_headers.as_ref().unwrap()
        ));
    }
}
