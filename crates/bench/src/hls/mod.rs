//! HLS players (`throng bench run URL.m3u8`): playlist polling, segment fetches and a player's
//! buffer model ([`player`]), run by the same workers and reported like ICY listeners.

pub mod player;
