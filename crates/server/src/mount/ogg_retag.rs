//! Admin metadata updates for Ogg Vorbis and Opus mounts. The admin handler records the new
//! tags on the mount with [`request_ogg_tags`]; the mount's feeder, which passes every Ogg page
//! through an [`OggRetagger`], picks them up before its next page, and the sans-IO
//! [`Rechainer`] starts a new chained logical stream whose comment header carries them (so
//! listeners already playing and listeners who join later both get the new title). Icecast
//! 2.4.4 does this for Vorbis only (`format_vorbis.c:vorbis_set_tag`) and answers "Mountpoint
//! will not accept URL updates" for Opus; Throng does both, and keeps that answer for chains of
//! other codecs (FLAC, Speex, Theora) or of several logical streams. The mount's `title` and
//! `artist` stats follow the update at once, and follow a source's own TITLE/ARTIST comments
//! whenever it starts a chain (Icecast 2.4.4 `format_vorbis.c:process_vorbis_page`).

use std::sync::atomic::Ordering;

use thiserror::Error;
use throng_proto::format::Format;
use throng_proto::framer::Unit;
use throng_proto::ogg_rechain::{ChainStatus, RechainEvent, Rechainer, TagUpdate};

use crate::ledger::TitleSetter;
use crate::mount::live::Mount;

/// Why an Ogg mount does not take a metadata update.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum OggTagError {
    /// The mount does not carry Ogg.
    #[error("{0} is not an Ogg mount")]
    NotOgg(String),
    /// The source has not sent a complete set of Ogg headers yet, so its codec is unknown.
    #[error("the stream's codec is not known yet")]
    CodecUnknown,
    /// The current chain cannot carry new comments here: another codec (FLAC, Speex, Theora,
    /// ...), several logical streams, or headers that could not be parsed. Holds the reason.
    #[error("cannot update the comments of a {0} stream")]
    Unsupported(String),
}

/// The artist and title an admin `metadata` call sets on an Ogg mount, from its `song`,
/// `artist` and `title` parameters: `song` is the whole title (any ARTIST comment is then
/// removed, since the song string names the artist itself); else `title`, with `artist` when
/// given; else `artist` alone as the title (as the ICY path does). `None` when none is given.
/// Icecast 2.4.4 `admin.c:command_metadata` reads the same parameters.
pub fn tags_from_query<'a>(
    song: Option<&'a str>,
    artist: Option<&'a str>,
    title: Option<&'a str>,
) -> Option<(Option<&'a str>, &'a str)> {
    match (song, artist, title) {
        (Some(s), _, _) => Some((None, s)),
        (None, a, Some(t)) => Some((a, t)),
        (None, Some(a), None) => Some((None, a)),
        (None, None, None) => None,
    }
}

/// Asks for `title` (and `artist`, or no ARTIST comment when `None`) to be put into the Ogg
/// stream of `mount`, replacing its TITLE and ARTIST comments and keeping the others. The
/// update reaches listeners at the next data page on which a packet ends (at most one page,
/// typically 1 s with ffmpeg's Ogg muxer); the mount's `title`/`artist` stats change now.
///
/// Errors: [`OggTagError::NotOgg`]; [`OggTagError::CodecUnknown`] before the source's headers
/// are in; [`OggTagError::Unsupported`] unless the current chain is one Vorbis or Opus stream.
pub fn request_ogg_tags(
    mount: &Mount,
    artist: Option<&str>,
    title: &str,
) -> Result<(), OggTagError> {
    if mount.settings.format != Format::Ogg {
        return Err(OggTagError::NotOgg(mount.name.clone()));
    }
    let slot = &mount.ogg_tags;
    {
        let mut st = slot.state.lock();
        match &st.status {
            ChainStatus::Unknown => return Err(OggTagError::CodecUnknown),
            ChainStatus::NotRetaggable(why) => return Err(OggTagError::Unsupported(why.clone())),
            ChainStatus::Retaggable(_) => {}
        }
        // The same cleaning as the ICY block and the status (no NUL or control characters).
        let artist = artist.map(|a| throng_proto::icy::clean_title(a).into_owned());
        st.request = Some(TagUpdate {
            title: throng_proto::icy::clean_title(title).into_owned(),
            artist: artist.clone(),
        });
        st.artist = artist;
        slot.pending.store(true, Ordering::Release);
    }
    mount.set_song(artist, title, None, TitleSetter::Admin);
    Ok(())
}

/// The feeder's side: every page of an Ogg mount goes through here on its way to the chunker.
#[derive(Debug)]
pub struct OggRetagger {
    rechainer: Rechainer,
}

impl Default for OggRetagger {
    fn default() -> Self {
        OggRetagger::new()
    }
}

impl OggRetagger {
    /// A retagger with random serial numbers for the chains it starts.
    pub fn new() -> OggRetagger {
        OggRetagger {
            rechainer: Rechainer::new(rand::random()),
        }
    }

    /// Passes one framed unit of `mount`; the units to publish go to `emit`, in order.
    pub fn push(&mut self, mount: &Mount, unit: Unit, emit: &mut impl FnMut(Unit)) {
        if let Some(update) = mount.ogg_tags.take_request() {
            self.rechainer.request(update);
        }
        match self.rechainer.push(unit, emit) {
            None => {}
            Some(RechainEvent::SourceChain {
                status,
                title,
                artist,
            }) => {
                tracing::debug!(mount = %mount.name, ?status, ?title, ?artist, "Ogg chain headers");
                // A chain without TITLE/ARTIST leaves the title alone (a file mount keeps its
                // name, an admin title stays until the source names a song itself). The title
                // is set before the status is published, so whoever sees the status sees it.
                let named = title.is_some() || artist.is_some();
                if named {
                    mount.set_song(
                        artist.as_deref(),
                        title.as_deref().unwrap_or(""),
                        None,
                        TitleSetter::Source,
                    );
                }
                let mut st = mount.ogg_tags.state.lock();
                if named {
                    st.artist = artist;
                }
                st.status = status;
            }
            Some(RechainEvent::Applied(u)) => {
                tracing::info!(mount = %mount.name, title = %u.title, artist = ?u.artist,
                    "new Ogg chain carries the updated comments");
            }
            Some(RechainEvent::Dropped(why)) => {
                tracing::warn!(mount = %mount.name, %why,
                    "Ogg metadata update dropped: the source changed to a chain that cannot carry it");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::live::{MountSettings, SourceKind};
    use crate::mount::queue::QueueWriter;
    use throng_proto::framer::{Framer, UnitKind};
    use throng_proto::ogg_comments::CommentHeader;

    fn mount(format: Format) -> Mount {
        let settings = MountSettings {
            format,
            content_type: "audio/ogg".into(),
            info: Default::default(),
            force_hidden: false,
            source_user: "source".into(),
            source_password: "pw".into(),
            source_ip: None,
            kind: SourceKind::Client,
        };
        Mount::new("/t.opus", settings, QueueWriter::new(1 << 20).queue())
    }

    /// Units of `assets/test-tone.opus` (2 header pages, then 1 s data pages).
    fn opus_units() -> Vec<Unit> {
        let file = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../assets/test-tone.opus"
        ))
        .unwrap();
        let mut f = Framer::new(Format::Ogg);
        f.push(&file);
        f.finish();
        std::iter::from_fn(|| f.next_unit())
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn requests_follow_the_chain_status_and_reach_the_stream() {
        let m = mount(Format::Ogg);
        assert_eq!(
            request_ogg_tags(&mount(Format::Mp3), None, "x"),
            Err(OggTagError::NotOgg("/t.opus".into()))
        );
        assert_eq!(
            request_ogg_tags(&m, None, "x"),
            Err(OggTagError::CodecUnknown)
        );
        let units = opus_units();
        let mut r = OggRetagger::new();
        let mut out = Vec::new();
        for u in &units[..3] {
            r.push(&m, u.clone(), &mut |u| out.push(u));
        }
        assert_eq!(m.ogg_tags.status(), ChainStatus::Retaggable("Opus"));
        request_ogg_tags(&m, Some("Artist"), "Title").unwrap();
        assert_eq!(
            (m.title(), m.ogg_tags.artist()),
            ("Title".into(), Some("Artist".into()))
        );
        r.push(&m, units[3].clone(), &mut |u| out.push(u));
        let kinds: Vec<UnitKind> = out[3..].iter().map(|u| u.kind).collect();
        assert_eq!(
            kinds,
            [
                UnitKind::OggPage,
                UnitKind::OggHeader { new_chain: true },
                UnitKind::OggHeader { new_chain: false }
            ]
        );
        let tags = &out[5].data;
        let h = CommentHeader::parse(&tags[28..]).unwrap(); // one-segment page
        assert_eq!(h.get("title").as_deref(), Some("Title"));
        assert_eq!(h.get("artist").as_deref(), Some("Artist"));
    }

    #[test]
    fn admin_parameters_map_to_tags() {
        assert_eq!(
            tags_from_query(Some("A - T"), Some("x"), None),
            Some((None, "A - T"))
        );
        assert_eq!(
            tags_from_query(None, Some("A"), Some("T")),
            Some((Some("A"), "T"))
        );
        assert_eq!(tags_from_query(None, None, Some("T")), Some((None, "T")));
        assert_eq!(tags_from_query(None, Some("A"), None), Some((None, "A")));
        assert_eq!(tags_from_query(None, None, None), None);
    }
}
