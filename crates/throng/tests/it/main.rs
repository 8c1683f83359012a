//! Integration tests of the `throng` binary itself.

mod check_config;
mod import;
mod reload;
mod serve;
mod support;
