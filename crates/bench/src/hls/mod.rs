//! HLS players (`throng bench run URL.m3u8`): the engine ([`player`]: playlists polled as RFC
//! 8216 section 6.3.4 says, segments fetched over keep-alive connections, a player's buffer, the
//! starved rules), every segment's media verified as it arrives ([`segment`]: frames or fMP4
//! samples, ID3 timestamps and `tfdt`, media sequence and program date-time continuity), the
//! playlists read ([`playlist`]) and HTTP responses framed ([`http`]).

pub mod http;
pub mod player;
pub mod playlist;
pub mod segment;
