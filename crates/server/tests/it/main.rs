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
mod fileserve;
mod filters;
mod hls;
mod hls_admission;
mod hls_browser;
mod hls_cache;
mod hooks;
mod ingest_faults;
mod ledger;
mod listeners;
mod manageauth;
mod metadata;
mod mount_metaint;
mod ogg_metadata;
mod peers;
mod recording;
mod relays;
mod reports_page;
mod shoutcast;
mod source_peers;
mod sources;
mod station_player;
mod status;
mod support;
mod tls;
mod web_page;
mod web_ui;
mod whep;
mod whep_transcode;
mod whip;
mod yp;
