//! Puts new TITLE/ARTIST comments into a live Ogg Vorbis or Opus stream by starting a new
//! chained logical stream (RFC 3533 §4), the way Icecast 2.4.4 `format_vorbis.c` does for
//! Vorbis (`vorbis_set_tag`, `initiate_flush`), extended to Opus. Sans-IO: feed the framer's
//! units with [`Rechainer::push`]; units come out unchanged until an update is requested.
//!
//! When an update is pending and the source's current chain is one Vorbis or Opus stream, the
//! next data page on which a packet ends (so no packet spans the cut) becomes the last page of
//! the current logical stream and gets the EOS flag. A new logical stream follows: a fresh
//! serial number; the identification header page unchanged but for serial and CRC; the
//! source's comment header with TITLE and ARTIST replaced (other comments kept); the Vorbis
//! setup header; then the source's following data pages, byte for byte but for serial, page
//! sequence, granule position and CRC. Granule positions are rebased on the cut: each is the
//! source's minus the granule of the last page of the old stream, so the new stream's time
//! starts at zero where the old one ended and keeps the source's spacing (and end trimming).
//! For Opus that is exactly the samples of the new stream's packets, pre-skip included (the
//! unchanged identification header announces it again, and decoders drop it again). For Vorbis
//! the first packet of a fresh stream decodes to no samples, so the first page claims a quarter
//! of two block sizes (at most 23 ms) more than a decoder reset at the chain yields, which
//! decoders read as the stream starting that much later, exactly as for every listener who
//! joins a live Vorbis stream mid-way; decoders that carry their state across the chain (ffmpeg)
//! get gapless timestamps. Source pages are never held back, so this adds no latency.
//!
//! A later chain started by the source itself (a new BOS page) passes through unchanged, and
//! its own comments become the base for the next update. Chains with several logical streams
//! or other codecs (FLAC, Speex, Theora, ...) are reported as not retaggable.

use bytes::Bytes;

use crate::framer::{Unit, UnitKind};
use crate::ogg::{parse_page, Codec, Page, PageParse, FLAG_BOS, FLAG_EOS};
use crate::ogg_comments::{restamp_page, CommentHeader, PageWriter, NO_GRANULE};

/// Largest header packet collected, in bytes; a longer one makes the chain not retaggable
/// (a source must not make the server buffer without bound).
pub const MAX_HEADER_PACKET: usize = 1 << 20;

/// The comments an update sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagUpdate {
    /// New TITLE.
    pub title: String,
    /// New ARTIST; `None` removes the source's ARTIST (the title then says it all, as an ICY
    /// `song` does).
    pub artist: Option<String>,
}

/// Whether the source's current chain can take an update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ChainStatus {
    /// No complete set of headers seen yet.
    #[default]
    Unknown,
    /// One logical stream of this codec (`"Vorbis"` or `"Opus"`), headers understood.
    Retaggable(&'static str),
    /// Not retaggable; the reason names the codecs, e.g. `"FLAC"` or `"Vorbis/Theora: several
    /// logical streams"`.
    NotRetaggable(String),
}

/// What happened while a page went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RechainEvent {
    /// The source's chain is known: its status, and TITLE/ARTIST from its comment header
    /// (Vorbis or Opus; `None` when absent or for other codecs).
    SourceChain {
        /// Whether updates are possible now.
        status: ChainStatus,
        /// The source's TITLE comment.
        title: Option<String>,
        /// The source's ARTIST comment.
        artist: Option<String>,
    },
    /// A requested update is now in the stream: a new chain with it starts after this page.
    Applied(TagUpdate),
    /// A pending update was dropped: the source moved to a chain that cannot carry it.
    Dropped(String),
}

/// Headers of a single Vorbis or Opus stream, kept to rebuild them under a new serial.
#[derive(Debug)]
struct Retaggable {
    codec: &'static str,
    ident: Vec<u8>,
    comment: CommentHeader,
    setup: Option<Vec<u8>>,
}

/// The source's current chain.
#[derive(Debug)]
struct SourceChain {
    serial: u32,
    codecs: Vec<Codec>,
    packets: Vec<Vec<u8>>,
    partial: Vec<u8>,
    oversized: bool,
    reported: bool,
    retag: Option<Retaggable>,
}

/// The chain this rechainer started, while it carries the source's pages.
#[derive(Debug)]
struct OutChain {
    serial: u32,
    sequence: u32,
    /// Source granule position of the cut: granule 0 of this chain.
    base: u64,
}

/// The rechaining state machine for one Ogg mount.
#[derive(Debug)]
pub struct Rechainer {
    rng: u32,
    src: Option<SourceChain>,
    out: Option<OutChain>,
    pending: Option<TagUpdate>,
}

impl Rechainer {
    /// A rechainer whose serial numbers derive from `seed` (any value; pass something random
    /// so restarts do not reuse serials).
    pub fn new(seed: u32) -> Rechainer {
        Rechainer {
            rng: seed | 1,
            src: None,
            out: None,
            pending: None,
        }
    }

    /// Requests an update; it replaces one still pending.
    pub fn request(&mut self, update: TagUpdate) {
        self.pending = Some(update);
    }

    /// Whether an update waits for the next page boundary.
    pub fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The status of the source's current chain.
    pub fn status(&self) -> ChainStatus {
        match &self.src {
            Some(s) if s.reported => s.status(),
            _ => ChainStatus::Unknown,
        }
    }

    /// Passes one unit from the framer; the units to publish, in order, go to `emit`. Returns
    /// what this page changed ([`RechainEvent`]): the source's chain became known, a pending
    /// update was applied after it, or dropped; `None` for an ordinary page.
    pub fn push(&mut self, unit: Unit, emit: &mut impl FnMut(Unit)) -> Option<RechainEvent> {
        let bytes = unit.data.clone(); // a reference count, not a copy
        let PageParse::Page(page) = parse_page(&bytes) else {
            emit(unit);
            return None;
        };
        match unit.kind {
            UnitKind::OggHeader { new_chain: true } => {
                self.out = None;
                self.src = Some(SourceChain::start(&page));
                emit(unit);
                None
            }
            UnitKind::OggHeader { new_chain: false } => {
                let event = match &mut self.src {
                    Some(s) if page.is_bos() => {
                        s.codecs.push(first_codec(&page));
                        None
                    }
                    Some(s) => s.header_page(&page),
                    None => None,
                };
                emit(unit);
                event
            }
            UnitKind::OggPage | UnitKind::Audio => self.data_page(unit, &page, emit),
        }
    }

    fn data_page(
        &mut self,
        unit: Unit,
        page: &Page<'_>,
        emit: &mut impl FnMut(Unit),
    ) -> Option<RechainEvent> {
        let Some(src) = &mut self.src else {
            emit(unit);
            return None;
        };
        // A data page means every header page of the chain went by.
        let mut event = (!src.reported).then(|| src.report());
        let ends_packet = page.segments.last().is_some_and(|&l| l < 255)
            && page.granule != NO_GRANULE
            && page.flags & FLAG_EOS == 0;
        // The new comment header, built before anything is emitted: the old stream gets its EOS
        // only when the new one can follow.
        let new_comment = match (&self.pending, &src.retag) {
            (Some(update), Some(retag)) if ends_packet && page.serial == src.serial => {
                let mut comment = retag.comment.clone();
                comment.set("TITLE", Some(&update.title));
                comment.set("ARTIST", update.artist.as_deref());
                match comment.to_packet() {
                    Ok(packet) => Some(packet),
                    Err(e) => {
                        self.pending = None;
                        event = Some(RechainEvent::Dropped(e.to_string()));
                        None
                    }
                }
            }
            (Some(_), None) => {
                self.pending = None;
                let why = match src.status() {
                    ChainStatus::NotRetaggable(w) => w,
                    other => format!("{other:?}"),
                };
                event = Some(RechainEvent::Dropped(why));
                None
            }
            _ => None,
        };
        let cut = new_comment.is_some();
        let extra_flags = if cut { FLAG_EOS } else { 0 };
        let data = match &mut self.out {
            Some(out) if page.serial == src.serial => out.restamp(page, extra_flags),
            _ if cut => Bytes::from(restamp_page(
                page.bytes,
                page.flags | FLAG_EOS,
                page.granule,
                page.serial,
                page.sequence,
            )),
            _ => unit.data.clone(),
        };
        emit(Unit { data, ..unit });
        let Some(comment) = new_comment else {
            return event;
        };
        let update = self.pending.take().expect("cut only when pending");
        let retag = src.retag.as_ref().expect("cut only when retaggable");
        let avoid = [
            src.serial,
            self.out.as_ref().map_or(src.serial, |o| o.serial),
        ];
        let serial = next_serial(&mut self.rng, &avoid);
        let mut writer = PageWriter::new(serial, 0);
        let mut pages = writer.write(&[&retag.ident], true, 0);
        let mut rest: Vec<&[u8]> = vec![&comment];
        if let Some(setup) = &retag.setup {
            rest.push(setup);
        }
        pages.extend(writer.write(&rest, false, 0));
        for (i, p) in pages.into_iter().enumerate() {
            emit(Unit {
                data: Bytes::from(p),
                duration_us: 0,
                kind: UnitKind::OggHeader { new_chain: i == 0 },
            });
        }
        self.out = Some(OutChain {
            serial,
            sequence: writer.sequence,
            base: page.granule,
        });
        Some(RechainEvent::Applied(update))
    }
}

/// A serial number for a new chain from the generator state `rng`, not one of `avoid`.
fn next_serial(rng: &mut u32, avoid: &[u32]) -> u32 {
    loop {
        // xorshift32: a full-period generator over non-zero values.
        let mut x = *rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *rng = x;
        if !avoid.contains(&x) {
            return x;
        }
    }
}

/// The codec of a BOS page's first packet.
fn first_codec(page: &Page<'_>) -> Codec {
    page.first_packet()
        .map(Codec::identify)
        .unwrap_or(Codec::Unknown)
}

impl SourceChain {
    fn start(bos: &Page<'_>) -> SourceChain {
        let mut s = SourceChain {
            serial: bos.serial,
            codecs: vec![first_codec(bos)],
            packets: Vec::new(),
            partial: Vec::new(),
            oversized: false,
            reported: false,
            retag: None,
        };
        s.collect(bos);
        s
    }

    /// Whether the first stream's codec can be retagged.
    fn retaggable_codec(&self) -> bool {
        matches!(self.codecs[0], Codec::Vorbis { .. } | Codec::Opus { .. })
    }

    /// Collects the first stream's header packets from `page`.
    fn collect(&mut self, page: &Page<'_>) {
        if page.serial != self.serial || !self.retaggable_codec() || self.oversized {
            return;
        }
        let wanted = self.codecs[0].header_packets();
        if !page.is_bos() && page.flags & crate::ogg::FLAG_CONTINUED == 0 {
            self.partial.clear();
        }
        let mut off = 0;
        for &l in page.segments {
            let l = l as usize;
            if self.packets.len() < wanted {
                self.partial.extend_from_slice(&page.body[off..off + l]);
                if self.partial.len() > MAX_HEADER_PACKET {
                    self.oversized = true;
                    return;
                }
                if l < 255 {
                    self.packets.push(std::mem::take(&mut self.partial));
                }
            }
            off += l;
        }
    }

    /// Takes a non-BOS header page; reports the chain once the first stream's headers are in.
    fn header_page(&mut self, page: &Page<'_>) -> Option<RechainEvent> {
        self.collect(page);
        let complete = self.packets.len() >= self.codecs[0].header_packets();
        (!self.reported && (complete || !self.retaggable_codec() || self.codecs.len() > 1))
            .then(|| self.report())
    }

    /// Understands the collected headers and describes the chain.
    fn report(&mut self) -> RechainEvent {
        self.reported = true;
        let names: Vec<&str> = self.codecs.iter().map(Codec::name).collect();
        let comment = match self.packets.get(1).map(|p| CommentHeader::parse(p)) {
            Some(Ok(c)) => Some(c),
            _ => None,
        };
        let (title, artist) = comment
            .as_ref()
            .map_or((None, None), |c| (c.get("TITLE"), c.get("ARTIST")));
        if self.codecs.len() == 1 && self.retaggable_codec() && !self.oversized {
            let vorbis = matches!(self.codecs[0], Codec::Vorbis { .. });
            let setup = self.packets.get(2).filter(|p| p.starts_with(b"\x05vorbis"));
            if let (Some(comment), true) = (comment, !vorbis || setup.is_some()) {
                self.retag = Some(Retaggable {
                    codec: names[0],
                    ident: self.packets[0].clone(),
                    comment,
                    setup: setup.cloned(),
                });
            }
        }
        self.packets.clear();
        self.partial = Vec::new();
        RechainEvent::SourceChain {
            status: self.status(),
            title,
            artist,
        }
    }

    fn status(&self) -> ChainStatus {
        if let Some(r) = &self.retag {
            return ChainStatus::Retaggable(r.codec);
        }
        let names = self
            .codecs
            .iter()
            .map(Codec::name)
            .collect::<Vec<_>>()
            .join("/");
        ChainStatus::NotRetaggable(if self.codecs.len() > 1 {
            format!("{names}: several logical streams")
        } else if self.retaggable_codec() {
            format!("{names}: headers not understood")
        } else {
            names
        })
    }
}

impl OutChain {
    /// The source data page `page` re-stamped into this chain, with `extra_flags` added.
    fn restamp(&mut self, page: &Page<'_>, extra_flags: u8) -> Bytes {
        let granule = if page.granule == NO_GRANULE {
            NO_GRANULE
        } else {
            // A source granule running back before the cut is clamped to the chain's start.
            page.granule.saturating_sub(self.base)
        };
        let sequence = self.sequence;
        self.sequence = self.sequence.wrapping_add(1);
        Bytes::from(restamp_page(
            page.bytes,
            (page.flags & !FLAG_BOS) | extra_flags,
            granule,
            self.serial,
            sequence,
        ))
    }
}

#[cfg(test)]
mod tests;
