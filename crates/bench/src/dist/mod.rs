//! The bench beyond one machine: agents on load hosts ([`agent`]), the controller that splits a
//! run over them and merges their results exactly ([`controller`]), the link between them
//! ([`wire`], [`link`], [`ssh`]), one clock across hosts ([`clock`], RFC 5905 §8), and what an
//! agent can hold ([`capacity`]). The controller's cost is flat in listeners: only the
//! mergeable per-second summaries cross the wire.

pub mod agent;
pub mod capacity;
pub mod clock;
pub mod controller;
pub mod link;
pub mod ssh;
pub mod wire;
