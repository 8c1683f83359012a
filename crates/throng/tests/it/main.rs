//! Integration tests of the `throng` binary itself.

mod deploy;
mod import;
mod logs;
mod serve;
mod support;
mod upgrade;
