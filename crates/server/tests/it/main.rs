//! Integration tests of the server over real sockets, with real third-party peers (ffmpeg,
//! libshout's `shout`, curl) where the core issue names them. Peers are installed by
//! `scripts/install-deps.sh`; a missing peer fails its test with that hint.

mod access;
mod admin_api;
mod admission;
mod auth;
mod browser;
mod cdp;
mod cluster;
mod crowds;
mod dashboard;
mod errors;
mod events;
mod fallback;
mod fanout;
mod filters;
mod hls;
mod hls_browser;
mod ingest_faults;
mod listeners;
mod manageauth;
mod metadata;
mod ogg_metadata;
mod peers;
mod relays;
mod shoutcast;
mod source_peers;
mod sources;
mod status;
mod support;
mod tls;
mod web_page;
mod web_ui;
mod whep;
