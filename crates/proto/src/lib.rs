//! Sans-IO protocol code for Throng, an Icecast-compatible live-audio server.
//!
//! Nothing in this crate opens a socket, reads a clock or spawns a thread: every item is a pure
//! function or a state machine fed with bytes, so each rule is tested deterministically. The
//! server (`throng-server`) and the load generator (`throng-bench`) are thin I/O layers over it.
//!
//! Modules, by concept:
//! - [`http`]: HTTP/1.x request and response heads, including `SOURCE`, `ICE/1.0` and `ICY 200 OK`.
//! - [`auth`]: HTTP Basic credentials; [`htpasswd`]: htpasswd files; [`url_auth`]: URL
//!   authentication callbacks (POST bodies, reply headers, callback URLs).
//! - [`format`](mod@format): Content-Type to stream format, as Icecast 2.4.4 `format.c`.
//! - [`source_info`]: the `ice-*`/`icy-*` stream description a source client announces.
//! - [`listener_head`]: the response head Icecast 2.4.4 sends a listener.
//! - [`icy`]: ICY metadata blocks, interleaving arithmetic and de-interleaving.
//! - [`mp3`], [`adts`], [`ogg`]: frame and page headers.
//! - [`ogg_comments`], [`ogg_rechain`]: Vorbis/Opus comment headers, and new chained streams
//!   carrying updated tags (admin metadata for Ogg).
//! - [`framer`]: splits a byte stream into frames or pages, resynchronising over garbage.
//! - [`burst`]: where a new listener joins the stream (burst-on-connect alignment).
//! - [`xml`]: the admin interface's XML documents, serialized as Icecast 2.4.4 (libxml2) does.
//! - [`shoutcast`]: SHOUTcast v1 (ICY) source login: password line, `OK2`, `icy-*` headers.
//! - [`forwarded`]: the client address behind trusted proxies (`X-Forwarded-For`).
//! - [`sse`]: Server-Sent Events framing and parsing (`/api/v1/events`).
//! - [`proxy_protocol`]: the PROXY protocol v1/v2 header a load balancer sends first.
//! - [`mount_name`]: canonical mount names (no dot segments, backslashes or control
//!   characters) and their percent-encoded form in links.
//! - [`hls`]: packed-audio HLS: segment ID3 tags, segment cuts, playlists.
//! - [`opus_rtp`]: Ogg/Opus pages to Opus packets with continuous 48 kHz RTP timestamps (WHEP).

pub mod adts;
pub mod auth;
pub mod burst;
pub mod format;
pub mod forwarded;
pub mod framer;
pub mod hls;
pub mod htpasswd;
pub mod http;
pub mod icy;
pub mod listener_head;
pub mod mount_name;
pub mod mp3;
pub mod ogg;
pub mod ogg_comments;
pub mod ogg_rechain;
pub mod opus_rtp;
pub mod proxy_protocol;
pub mod rtp_header;
pub mod shoutcast;
pub mod source_info;
pub mod sse;
pub mod url_auth;
pub mod xml;
