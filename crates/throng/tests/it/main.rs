//! Integration tests of the `throng` binary itself.

mod import;
mod serve;
mod support;
mod upgrade;
