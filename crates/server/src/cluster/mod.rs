//! Origin and edges (issue 15, docs/SCALING.md). An edge is a Throng relaying the origin's
//! mounts; with `[cluster] origin` it reports to the origin (`report.rs`). The origin keeps
//! the edges that reported within `edge-timeout` (`registry.rs`), shows them in
//! `/api/v1/cluster` and `/metrics`, and answers listeners it has no room for (or all of them,
//! `redirect = "all"`) with `302` to the edge with the most room (`redirect.rs`), as
//! Icecast-KH's `master-redirect`. The decisions (which edge, when one expires, the
//! `Location`) are pure functions in `decide.rs`. Reports are signed with the cluster secret
//! and carry their time (`sign.rs`); an edge's entry is bound to the address of its first
//! report (`registry.rs`). A draining server (`drain.rs`) sends its newcomers on (an edge to
//! its origin) and says so in its reports, so the origin sends it no one.

pub mod decide;
pub mod drain;
pub mod redirect;
pub mod registry;
pub mod report;
pub mod sign;
