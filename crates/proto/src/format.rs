//! Stream formats and their MIME types, as Icecast 2.4.4 `format.c:format_get_type` maps them.
//!
//! Icecast has two real plugins: Ogg (`application/ogg`, `audio/ogg`, ...) and "generic", which
//! carries MP3, AAC and anything else byte for byte. Throng keeps that acceptance rule but frames
//! MP3 and ADTS-AAC so bursts start on a frame and garbage is detected.

/// The framing Throng applies to a mount's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// MPEG-1/2/2.5 audio (layer I–III), framed by MP3 frame headers.
    Mp3,
    /// AAC in ADTS framing.
    Aac,
    /// Ogg (Vorbis, Opus, FLAC, Speex, ...), framed by Ogg pages.
    Ogg,
    /// WebM/Matroska (EBML): passed through unframed like [`Format::Other`], but never with
    /// ICY metadata spliced in, as Icecast 2.4.4 `format_ebml.c` (header replay is not done).
    Ebml,
    /// Anything else: passed through in 1400-byte pieces with no framing, as Icecast's generic
    /// format does.
    Other,
}

impl Format {
    /// Maps a Content-Type (parameters after `;` ignored, case-insensitive) to a format.
    ///
    /// Ogg types are those of Icecast 2.4.4 `format_get_type`; `audio/mpeg`, `audio/mp3`,
    /// `audio/mpeg3`, `audio/x-mpeg` are MP3; `audio/aac`, `audio/aacp`, `audio/x-aac`,
    /// `audio/x-aacp` are ADTS-AAC; everything else is [`Format::Other`].
    pub fn from_content_type(content_type: &str) -> Format {
        let base = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/ogg" | "application/x-ogg" | "audio/ogg" | "video/ogg" | "audio/opus" => {
                Format::Ogg
            }
            "audio/mpeg" | "audio/mp3" | "audio/mpeg3" | "audio/x-mpeg" | "audio/mpg" => {
                Format::Mp3
            }
            "audio/aac" | "audio/aacp" | "audio/x-aac" | "audio/x-aacp" => Format::Aac,
            "audio/webm" | "video/webm" => Format::Ebml,
            t if t.ends_with("/x-matroska") => Format::Ebml,
            _ => Format::Other,
        }
    }

    /// Guesses the format from a file name's extension (`mp3`, `aac`, `ogg`, `oga`, `opus`).
    pub fn from_path_extension(path: &str) -> Option<Format> {
        let ext = path.rsplit('.').next()?.to_ascii_lowercase();
        match ext.as_str() {
            "mp3" => Some(Format::Mp3),
            "aac" | "adts" => Some(Format::Aac),
            "ogg" | "oga" | "opus" => Some(Format::Ogg),
            _ => None,
        }
    }

    /// The Content-Type Throng announces for this format when the source gave none.
    pub fn default_mime(self) -> &'static str {
        match self {
            Format::Mp3 => "audio/mpeg",
            Format::Aac => "audio/aac",
            Format::Ogg => "application/ogg",
            Format::Ebml => "audio/webm",
            Format::Other => "application/octet-stream",
        }
    }

    /// Whether Icecast inserts ICY metadata for this format: everything the generic plugin
    /// (`format_mp3.c`) carries, not Ogg or WebM/Matroska.
    pub fn supports_icy_metadata(self) -> bool {
        !matches!(self, Format::Ogg | Format::Ebml)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_map_as_icecast() {
        assert_eq!(Format::from_content_type("audio/mpeg"), Format::Mp3);
        assert_eq!(
            Format::from_content_type("Audio/MPEG; charset=x"),
            Format::Mp3
        );
        assert_eq!(Format::from_content_type("application/ogg"), Format::Ogg);
        assert_eq!(Format::from_content_type("audio/ogg"), Format::Ogg);
        assert_eq!(Format::from_content_type("video/ogg"), Format::Ogg);
        assert_eq!(Format::from_content_type("audio/aacp"), Format::Aac);
        assert_eq!(Format::from_content_type("audio/webm"), Format::Ebml);
        assert_eq!(Format::from_content_type("video/x-matroska"), Format::Ebml);
        assert_eq!(
            Format::from_content_type("application/octet-stream"),
            Format::Other
        );
        assert!(!Format::Ebml.supports_icy_metadata());
        assert!(!Format::Ogg.supports_icy_metadata());
        assert!(Format::Aac.supports_icy_metadata());
    }

    #[test]
    fn extensions() {
        assert_eq!(Format::from_path_extension("a/b.MP3"), Some(Format::Mp3));
        assert_eq!(Format::from_path_extension("x.opus"), Some(Format::Ogg));
        assert_eq!(Format::from_path_extension("x.wav"), None);
    }
}
