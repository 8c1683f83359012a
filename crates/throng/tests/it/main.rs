//! Integration tests of the `throng` binary itself.

mod serve;
