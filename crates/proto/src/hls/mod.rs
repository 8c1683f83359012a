//! HTTP Live Streaming without transcoding, sans-IO: packed audio (RFC 8216 section 3.4) and
//! fragmented MP4 ([`fmp4`]: the boxes; [`ogg_audio`]: Opus and FLAC packets out of Ogg pages). The
//! ID3v2 tag that opens each segment ([`id3`]: the Apple `transportStreamTimestamp` PRIV frame
//! and the timed title), the decision where a segment ends ([`cutter`]: the first frame
//! boundary at or after the target duration, from frame durations in samples), and the media
//! and master playlists ([`playlist`]), the URL paths ([`path`]), signed session tokens
//! ([`secure_link`]) and the cache tier's request log lines ([`cache_log`]). The server packages a mount's frames with them; the load
//! generator parses playlists with [`playlist::parse`].

pub mod cache_log;
pub mod cutter;
pub mod fmp4;
pub mod id3;
pub mod ogg_audio;
pub mod path;
pub mod playlist;
pub mod secure_link;
