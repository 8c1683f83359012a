//! The container of a mount's HLS segments (issue 24), one rule for the packager, the status
//! documents (`hls_http::hls_unavailable`) and the packager's start: MP3 as packed audio, AAC
//! as `[hls] aac-segments` says, Ogg as fMP4 (Opus and FLAC are carried; another Ogg codec
//! yields no segment), WebM and unframed streams not at all.

use throng_proto::format::Format;

use crate::config::AacSegments;

/// The container of a mount's HLS segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// Packed audio (RFC 8216 section 3.4) with this segment extension (`mp3`, `aac`).
    Packed(&'static str),
    /// Fragmented MP4 (RFC 8216bis section 3.1.2), `.m4s` segments after an `EXT-X-MAP`.
    Fmp4,
}

/// The container HLS packages a mount of `format` in: MP3 packed, AAC as `aac` says, Ogg fMP4
/// (Opus and FLAC; an Ogg stream of another codec yields no segment, see
/// `hls_http::hls_unavailable`); `None` for formats HLS does not carry (WebM, other).
pub fn container(format: Format, aac: AacSegments) -> Option<Container> {
    match (format, aac) {
        (Format::Mp3, _) => Some(Container::Packed("mp3")),
        (Format::Aac, AacSegments::Packed) => Some(Container::Packed("aac")),
        (Format::Aac, AacSegments::Fmp4) | (Format::Ogg, _) => Some(Container::Fmp4),
        (Format::Ebml | Format::Other, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_has_its_container() {
        use AacSegments::{Fmp4, Packed};
        assert_eq!(container(Format::Mp3, Fmp4), Some(Container::Packed("mp3")));
        assert_eq!(
            container(Format::Aac, Packed),
            Some(Container::Packed("aac"))
        );
        assert_eq!(container(Format::Aac, Fmp4), Some(Container::Fmp4));
        assert_eq!(container(Format::Ogg, Packed), Some(Container::Fmp4));
        assert_eq!(container(Format::Ebml, Packed), None);
        assert_eq!(container(Format::Other, Fmp4), None);
    }
}
