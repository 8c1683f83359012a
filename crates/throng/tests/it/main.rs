//! Integration tests of the `throng` binary itself.

mod import;
mod logs;
mod serve;
mod support;
